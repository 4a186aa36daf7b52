"""The policy's answer to each program a confined step starts (docs/policy.md, "Programs
judged as they run").

``bar.sandbox.exec_watch`` hands bar every ``execve`` of the step with its real argument
vector; this judges it with the step's policy, in the step's places (``~``, the
worktree: ``bar.policy.places``), records what matched as a policy event of the step
(``source: exec``, with the ``argv``), and says what to print on the program's standard
error. A ``block`` refuses the program (``EPERM``); a ``warn`` lets it run, said once.

Every match is recorded once per step: a loop that runs the same warned program a
thousand times, or a command the typed line or an agent's hook already judged, adds no
event (blocks still refuse every time). After ``_MAX_EVENTS`` distinct matches the step
records one more event that says how many were left out.
"""

from __future__ import annotations

import os
import shlex
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from bar.policy import Decision, Policy
from bar.policy.places import Places

if TYPE_CHECKING:
    from bar.sandbox.exec_quick import Shortcut
    from bar.sandbox.exec_watch import Exec

_MAX_EVENTS = 1000
_CACHED = 4096
_MAX_WORDS = 256
_MAX_WORD = 4096
SOURCE = "exec"
UNREAD_RULE = "bar:exec-unread"


def _plain(name: str) -> bool:
    from bar import shell
    from bar.policy.rules import MULTI_CALL

    return name not in MULTI_CALL and shell.plain_program(name)


def _strictest(decisions: list[Decision]) -> Decision:
    """One decision of several: every event once, the strictest action."""
    if len(decisions) == 1:
        return decisions[0]
    order = {"allow": 0, "log": 1, "warn": 2, "block": 3}
    events = tuple({(e.rule, e.matched): e for d in decisions for e in d.events}.values())
    action = max((d.action for d in decisions), key=order.__getitem__)
    return Decision(action, events)


class ExecJudge:
    """Judges a step's programs with ``policy``; ``record`` appends a step's decision
    log lines; ``known`` holds the (rule, matched) pairs already on file for the step."""

    def __init__(
        self,
        policy: Policy,
        places: Places,
        record: Callable[..., None],
        known: set[tuple[str | None, str]] | None = None,
    ) -> None:
        self.policy = policy
        self.places = places
        self.record = record
        self.known = known if known is not None else set()
        self.left_out = 0
        self._lock = threading.Lock()
        self._recorded = 0
        # the same program, arguments and directory: the same answer (a loop, a build)
        self._cache: dict[tuple[object, ...], Decision] = {}

    def __call__(self, found: Exec) -> tuple[bool, str] | None:
        if found.truncated:  # (never judged by a part of it)
            return self._refuse_unread(found)
        key = (found.path, found.argv, found.cwd, found.names, found.scripts)
        decision = self._cache.get(key)
        if decision is None:
            decision, looked = self._judge(found)
            if not looked:  # (what is in a directory may change: not kept)
                if len(self._cache) >= _CACHED:
                    self._cache.clear()
                self._cache[key] = decision
        if decision.action == "allow":
            return None
        said: list[str] = []
        fresh = []
        with self._lock:
            for event in decision.events:
                seen = (event.rule, event.matched)
                if seen in self.known:
                    continue
                self.known.add(seen)
                fresh.append(event)
            if self._recorded + len(fresh) > _MAX_EVENTS:
                self.left_out += len(fresh)
                fresh = []
            self._recorded += len(fresh)
        argv = [w[:_MAX_WORD] for w in found.argv[:_MAX_WORDS]]
        if fresh:
            self.record(
                *(
                    {
                        "rule": e.rule,
                        "action": e.action,
                        "matched": e.matched,
                        "source": SOURCE,
                        "argv": argv,
                        "decision": decision.action,
                    }
                    for e in fresh
                )
            )
        if decision.blocked:
            for e in decision.events:
                if e.action == "block":
                    said.append(f"bar: blocked by policy rule {e.rule}: {e.reason} ({e.matched})")
            return True, "\n".join(dict.fromkeys(said))
        for e in fresh:
            if e.action == "warn":
                said.append(f"bar: policy warn: rule {e.rule}: {e.reason} ({e.matched})")
        return False, "\n".join(said)

    def _judge(self, found: Exec) -> tuple[Decision, bool]:
        """The strictest decision on what runs: the program by the name it was called,
        by what its links lead to and by what its bytes are; and, for a script, each
        interpreter its ``#!`` lines start. Whether a directory was looked into."""
        root = f"/proc/{found.pid}/cwd/"
        looked = False

        def exists(word: str) -> bool:
            nonlocal looked
            looked = True
            return os.path.lexists(root + word)

        def judged(path: str, argv: tuple[str, ...]) -> Decision:
            return self.policy.evaluate_exec(path, argv, self.places, cwd=found.cwd, exists=exists)

        def matters(name: str) -> bool:
            """Whether judging the same words again under ``name`` can say more: a
            rule's strings are in it, or the analysis reads into such a program (a
            wrapper, a loader, a multi-call program: ``ld.so /bin/rm -rf ~``)."""
            base = os.path.basename(name)
            return self.policy.may_name(base) or not _plain(base)

        decisions = [judged(found.path, found.argv)]
        decisions += [judged(name, found.argv) for name in found.names if matters(name)]
        # the name a program is called by can choose what it does (``git-reset`` is
        # git's reset whatever file runs it; a multi-call program's applets)
        called = found.argv[0] if found.argv else ""
        if os.path.basename(called) not in ("", os.path.basename(found.path)) and matters(called):
            decisions.append(judged(called, found.argv))
        decisions += [judged(vector[0], vector) for vector in found.scripts]
        if found.settings:  # (git given settings by its environment: as ``VAR=value git …``)
            decisions.append(
                self.policy.evaluate_line(
                    " ".join(shlex.quote(e) for e in (*found.settings, *found.argv)), self.places
                )
            )
        return _strictest(decisions), looked

    def shortcut(self) -> Shortcut | None:
        """What the compiled listener may let run without asking this judge: a program
        no rule of the policy can match, in these places (``bar.sandbox.exec_quick``);
        None when some rule could match any text."""
        needed = self.policy.needed()
        if needed is None:
            return None
        from bar.sandbox.exec_quick import Shortcut
        from bar.sandbox.exec_watch import SYSTEM

        return Shortcut(
            exact=needed[0],
            folded=needed[1],
            places=self.places.forms(),
            roots=self.places.rooms(),
            system=SYSTEM,
            plain=_plain,
        )

    def _refuse_unread(self, found: Exec) -> tuple[bool, str]:
        reason = (
            "the program's arguments are too long for bar to read whole, so they cannot be judged"
        )
        self.record(
            {
                "rule": UNREAD_RULE,
                "action": "block",
                "matched": f"{found.path} ({len(found.argv)} arguments read)",
                "source": SOURCE,
                "argv": [w[:_MAX_WORD] for w in found.argv[:_MAX_WORDS]],
                "decision": "block",
            }
        )
        return True, f"bar: refused: {reason}"

    def finish(self) -> None:
        """Once the step ended: say how many matches were left out of the record."""
        if self.left_out:
            self.record(
                {
                    "rule": "bar:exec-events",
                    "action": "log",
                    "matched": f"{self.left_out} more matches at exec, not recorded",
                    "source": SOURCE,
                }
            )
