"""Which steps ``bar log`` lists when it is asked for some: ``--grep``, ``--kind``,
``--agent``, ``--since``. Each given filter must hold (they combine with "and"); ``-n``
then takes the last N of the steps they leave.

``--grep`` is a regular expression searched in what the log says a step was (a run's
command line, "rollback to step 0003" ...) and in its output, stdout and stderr alike:
the file ``bar show`` prints, read a line at a time, so a long output costs its reading
and never its size in memory. ``--since`` is a moment (a date, a date and time, read in
the local time zone unless it names its own) or a length of time back from now (``2h``).
A step not recorded yet, which ``bar log`` lists last, is held to the same filters
(``holds_running``): a run step, with its command, its agent, when it started, and what
it printed so far.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from bar.base.clock import seconds_of
from bar.base.cmdline import line_of
from bar.base.record import record
from bar.errors import UsageError
from bar.ledger.describe import rollback_text, summary
from bar.model.agent_names import AGENTS
from bar.model.records import KINDS, RollbackStep, RunStep, Step

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}  # by the unit's first letter
_LENGTH = re.compile(
    r"([0-9]+(?:\.[0-9]+)?) ?(s|secs?|seconds?|m|mins?|minutes?|h|hrs?|hours?|d|days?|w|weeks?)"
)


@record(frozen=True)
class Selection:
    """The filters given; none given selects every step."""

    grep: re.Pattern[str] | None = None
    kinds: tuple[str, ...] = ()
    agent: str | None = None
    since: float | None = None  # seconds since the epoch

    @property
    def everything(self) -> bool:
        return self.grep is None and not self.kinds and self.agent is None and self.since is None


def selection(
    *,
    grep: str | None = None,
    ignore_case: bool = False,
    kinds: Iterable[str] = (),
    agent: str | None = None,
    since: str | None = None,
    now: float | None = None,
) -> Selection:
    """The filters as the command line gives them, checked (``UsageError`` says what is
    wrong with one)."""
    pattern = None
    if grep is not None:
        try:
            pattern = re.compile(grep, re.IGNORECASE if ignore_case else 0)
        except re.error as exc:
            raise UsageError(
                f"--grep {grep!r} is not a regular expression: {exc}",
                hint="a plain word matches itself; escape . * ( [ with a backslash",
            ) from None
    chosen = tuple(dict.fromkeys(kinds))
    for kind in chosen:
        if kind not in KINDS:
            raise UsageError(
                f"--kind {kind!r} is not a kind of step", hint=f"one of {', '.join(KINDS)}"
            )
    if agent is not None and agent not in AGENTS:
        raise UsageError(
            f"--agent {agent!r} is not an agent bar knows", hint=f"one of {', '.join(AGENTS)}"
        )
    moment = None if since is None else since_of(since, time.time() if now is None else now)
    return Selection(pattern, chosen, agent, moment)


def since_of(text: str, now: float) -> float:
    """``--since``'s moment, in seconds since the epoch: ``text`` is a length of time back
    from ``now`` (``90s``, ``30min``, ``2h``, ``1d``, ``2w``) or a moment
    (``2026-11-27``, ``2026-11-27 14:00``, ``2026-11-27T14:00:00Z``)."""
    said = text.strip().lower()
    length = _LENGTH.fullmatch(said)
    if length is not None:
        return now - float(length.group(1)) * _UNITS[length.group(2)[0]]
    import datetime as dt

    try:
        at = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(
            f"--since {text!r} is neither a moment nor a length of time",
            hint="e.g. --since 2h, --since 30min, --since 2026-11-27, "
            "--since '2026-11-27 14:00' (local time unless it ends in Z or +HH:MM)",
        ) from None
    return at.timestamp()  # a moment with no zone is one of the local time zone


def select(task_dir: Path, steps: Iterable[Step], chosen: Selection) -> list[Step]:
    """The steps ``chosen`` lets through, in their order. ``task_dir``: where their
    outputs are, for ``--grep``."""
    if chosen.everything:
        return list(steps)
    kept: list[Step] = []
    seen: dict[str, Step] = {}  # the steps so far, for what an undo or redo names
    for step in steps:
        if _holds(task_dir, step, chosen, seen):
            kept.append(step)
        seen[step.step_id] = step
    return kept


def _holds(task_dir: Path, step: Step, chosen: Selection, seen: dict[str, Step]) -> bool:
    if isinstance(step, RollbackStep):  # as the log says it: what it undid too
        said = rollback_text(step, seen.get(step.undo_of or step.redo_of or ""))
    else:
        said = summary(step)
    return _passes(
        chosen,
        kind=step.kind,
        agent=agent_of(step),
        started_at=step.started_at,
        said=said,
        lines=lambda: _output_lines(task_dir, step),
    )


def holds_running(
    chosen: Selection,
    *,
    cmd: Sequence[str],
    agent: str | None,
    started_at: str,
    lines: Callable[[], Iterable[str]],
) -> bool:
    """Whether ``chosen`` lets through a run step not recorded yet (``bar log`` lists it
    last): its command line, its agent, when it started, and ``lines``: its output so far
    (read only if ``--grep`` asks, and its command does not match)."""
    return _passes(
        chosen, kind="run", agent=agent, started_at=started_at, said=line_of(cmd), lines=lines
    )


def _passes(
    chosen: Selection,
    *,
    kind: str,
    agent: str | None,
    started_at: str,
    said: str,
    lines: Callable[[], Iterable[str]],
) -> bool:
    if chosen.kinds and kind not in chosen.kinds:
        return False
    if chosen.agent is not None and agent != chosen.agent:
        return False
    if chosen.since is not None:
        try:
            if seconds_of(started_at) < chosen.since:
                return False
        except ValueError:
            return False  # a time bar did not write: no moment to compare
    if chosen.grep is not None:
        grep = chosen.grep
        if not grep.search(said) and not any(grep.search(line) for line in lines()):
            return False
    return True


def agent_of(step: Step) -> str | None:
    """The agent a run step supervised (``claude``, ``codex``, ``gemini``), or None."""
    if not isinstance(step, RunStep):
        return None
    agent = step.extra.get("agent")
    if isinstance(agent, dict) and isinstance(agent.get("name"), str):
        return str(agent["name"])
    session = step.extra.get("session")
    if isinstance(session, dict) and isinstance(session.get("agent"), str):
        return str(session["agent"])
    return None


def _output_lines(task_dir: Path, step: Step) -> Iterator[str]:
    """The lines of the step's output file (a pty step of an earlier bar, which kept none:
    the text of its recording); none when it printed nothing or its file is gone."""
    rel = step.artifacts.output
    if rel:
        path = (task_dir / rel).resolve()
        if not path.is_relative_to(task_dir.resolve()):
            return  # a planted link: `bar doctor` says so; nothing outside is read
        try:
            with path.open("rb") as fh:
                for raw in fh:
                    yield raw.decode("utf-8", "replace")
        except OSError:
            return
    elif step.artifacts.cast:
        from bar.errors import BarError
        from bar.terminal.cast import text_of_cast

        try:
            text = b"".join(text_of_cast(task_dir / step.artifacts.cast))
        except (BarError, OSError):
            return
        yield from text.decode("utf-8", "replace").splitlines()
