"""How a step ended, in the one set of words every face uses.

The truth is the step's ledger line (docs/storage.md, "What a version-1 reader must know"):
``exit_code``; ``signal``, the signal that stopped the command (it was killed by it, or
caught it and exited: a Ctrl-C'd agent that exits 0 is recorded 128+N,
``bar.base.proc.exit_status``); ``interrupted`` (bar died mid-step); ``blocked``; and bar's
own ``stopped_by`` (a failing pre_run hook) and ``stopped`` (a budget). ``bar run``'s last
line, ``bar log``, ``bar show``, ``bar ui`` and the ``result`` of the JSON shapes
(``--json``, ``bar mcp``) all say it through ``of``, so a step stopped by Ctrl-C reads
``interrupted`` wherever it is shown, whatever code the command chose.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bar.base.record import record

if TYPE_CHECKING:
    from bar.model.records import RunStep

# what a signal that stopped a step is called (``signal`` loads ``enum``: not for this)
_SIGNALS = {
    1: ("hung up", "SIGHUP"),
    2: ("interrupted", "SIGINT"),
    3: ("quit", "SIGQUIT"),
    6: ("aborted", "SIGABRT"),
    9: ("killed", "SIGKILL"),
    11: ("crashed", "SIGSEGV"),
    13: ("broken pipe", "SIGPIPE"),
    15: ("terminated", "SIGTERM"),
}


@record(frozen=True)
class Ending:
    """How a step ended: ``word`` (``exit 0``, ``exit 2``, ``interrupted``, ``blocked``,
    ...), its ``tone`` (``ok``, ``warn``: it was stopped on purpose, ``bad``: it failed)
    and the ``detail`` the word leaves out (``SIGINT, exit 130``; empty if none)."""

    word: str
    tone: str
    detail: str = ""

    @property
    def text(self) -> str:
        """The word with its detail: ``interrupted (SIGINT, exit 130)``."""
        return f"{self.word} ({self.detail})" if self.detail else self.word

    @property
    def ok(self) -> bool:
        return self.tone == "ok"


def signal_name(number: int) -> str:
    return _SIGNALS[number][1] if number in _SIGNALS else f"signal {number}"


def of(step: RunStep) -> Ending:
    """How the ``run`` step ``step`` ended (``RunStep.ending``)."""
    code = step.exit_code
    if step.blocked:
        return Ending("blocked", "bad", "by policy; nothing ran")
    if step.extra.get("stopped_by"):
        return Ending("stopped", "bad", f"by a failing {step.extra['stopped_by']} hook")
    if step.extra.get("stopped"):  # bar stopped the agent itself: ``budget``
        return Ending(f"stopped: {step.extra['stopped']}", "warn", _exit(code))
    if step.interrupted:
        return Ending("interrupted", "warn", "bar stopped before the command ended")
    if step.signal:
        word = _SIGNALS[step.signal][0] if step.signal in _SIGNALS else "killed"
        tone = "warn" if step.signal in (1, 2, 3, 15) else "bad"  # (stopped, not failed)
        return Ending(word, tone, ", ".join(filter(None, (signal_name(step.signal), _exit(code)))))
    if code is None:
        return Ending("no exit", "bad")
    return Ending(f"exit {code}", "ok" if code == 0 else "bad")


def _exit(code: int | None) -> str:
    return f"exit {code}" if code is not None else ""
