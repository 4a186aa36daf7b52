"""The policy's answer to each program a confined step starts (SPEC §18).

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
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from bar.policy import Decision, Policy
from bar.policy.places import Places

if TYPE_CHECKING:
    from bar.sandbox.exec_watch import Exec

_MAX_EVENTS = 1000
_CACHED = 4096
_MAX_WORDS = 256
_MAX_WORD = 4096
SOURCE = "exec"


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
        self._cache: dict[tuple[str, tuple[str, ...], str], Decision] = {}

    def __call__(self, found: Exec) -> tuple[bool, str] | None:
        key = (found.path, found.argv, found.cwd)
        decision = self._cache.get(key)
        if decision is None:
            root = f"/proc/{found.pid}/cwd/"
            looked = False

            def exists(word: str) -> bool:
                nonlocal looked
                looked = True
                return os.path.lexists(root + word)

            decision = self.policy.evaluate_exec(
                found.path, found.argv, self.places, cwd=found.cwd, exists=exists
            )
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
