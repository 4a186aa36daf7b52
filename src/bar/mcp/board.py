"""What ``bar mcp`` offers a lead agent: the task board (docs/board.md).

Unlike the tools of ``bar.mcp.tools``, which serve one task, these act on the project:
plan tasks (``task_create``), see them (``task_list``), take one (``task_claim``), start
one (``task_start``), list, keep and remove worktrees, read the event log, and run a
command as a step of a task (``task_run``). Inside a step the server is confined, so the
writes go to the step's ``bar run`` as the ``board`` order; a step's agent never closes
or removes its own task's worktree, and runs its own commands in its own shell (it has
one: ``task_run`` is for a lead agent outside any step).
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from bar import api
from bar.api import orders
from bar.errors import BarError, UsageError
from bar.model.tasks import Task

RUN_TIMEOUT = 600.0  # seconds a task_run may take before it is stopped
OUTPUT_MAX = 40_000  # bytes of a task_run's output returned


class Board:
    """The board tools of one ``bar mcp``; ``own``: the task it serves, if any."""

    def __init__(self, loc: api.Location, own: Task | None) -> None:
        self._loc = loc
        self._own = own

    @property
    def inside(self) -> bool:
        """This server runs inside a step (of ``own``)."""
        return bool(os.environ.get("BAR_TASK_ID")) and self._own is not None

    def _read(self, op: str, args: dict[str, object]) -> dict[str, Any]:
        return api.board(self._loc.project, op, args)

    def _write(self, op: str, args: dict[str, object]) -> dict[str, Any]:
        if self.inside:
            assert self._own is not None
            return dict(orders.board_order(self._own, op, args))
        return api.board(self._loc.project, op, args)

    # --- tools ---------------------------------------------------------------------------

    def task_create(
        self, name: str, description: str = "", base: str = "", queue: str = ""
    ) -> dict[str, Any]:
        args: dict[str, object] = {"name": name, "description": description, "base": base}
        if queue:
            args["queue"] = queue
        return self._write("create", args)

    def task_list(self, status: str = "open") -> dict[str, Any]:
        return self._read("list", {"status": status})

    def task_claim(
        self, task: str, owner: str, start: bool = False, reassign: bool = False
    ) -> dict[str, Any]:
        return self._write(
            "claim", {"task": task, "owner": owner, "start": start, "reassign": reassign}
        )

    def task_unclaim(self, task: str, owner: str = "") -> dict[str, Any]:
        return self._write("unclaim", {"task": task, "owner": owner})

    def task_start(self, task: str) -> dict[str, Any]:
        return self._write("start", {"task": task})

    def worktree_create(self, name: str, task: str = "", base: str = "") -> dict[str, Any]:
        return self._write("worktree_create", {"name": name, "task": task, "base": base})

    def task_bind_worktree(self, task: str, worktree: str) -> dict[str, Any]:
        return self._write("bind", {"task": task, "worktree": worktree})

    def worktree_list(self, all: bool = False) -> dict[str, Any]:
        return self._read("worktrees", {"all": all})

    def worktree_keep(self, task: str) -> dict[str, Any]:
        return self._write("keep", {"task": task})

    def worktree_remove(self, task: str, complete_task: bool = False) -> dict[str, Any]:
        return self._write("remove", {"task": task, "complete_task": complete_task})

    def events(self, limit: int = 20) -> dict[str, Any]:
        return self._read("events", {"limit": limit})

    def task_run(self, task: str, command: str, timeout: float = RUN_TIMEOUT) -> dict[str, Any]:
        """Run ``command`` (a shell line) as a step of ``task``, as ``bar run --task``
        would: policy, hooks, confinement and the record included."""
        if self.inside:
            raise UsageError(
                "task_run is for a lead agent outside any step; inside a step, run the "
                "command in your own shell: bar records it as part of this step",
            )
        if not command.strip():
            raise UsageError("task_run needs a command")
        found = api.get_task(self._loc, task)  # a clear error for a task that is not there
        argv = [sys.executable, "-m", "bar", "run", "--task", found.id, "--no-pty", "--json"]
        try:
            done = subprocess.run(
                [*argv, "--", "sh", "-c", command],
                cwd=self._loc.project.root,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=timeout,
                env={**os.environ, "BAR_QUIET": "1"},
            )
        except subprocess.TimeoutExpired:
            raise BarError(
                f"the command ran longer than {timeout:.0f} s and was stopped",
                hint="give a larger timeout, or run it with `bar run` yourself",
            ) from None
        import json

        try:
            step = json.loads(done.stdout)
        except ValueError:
            said = done.stderr.decode("utf-8", "replace").strip().splitlines()
            raise BarError(said[-1] if said else "bar run failed to record the step") from None
        output = done.stderr[:OUTPUT_MAX].decode("utf-8", "replace")
        rec: dict[str, Any] = {"task_id": found.id, "step": step, "output": output}
        if len(done.stderr) > OUTPUT_MAX:
            rec["truncated"] = {
                "output": {"shown_bytes": OUTPUT_MAX, "total_bytes": len(done.stderr)}
            }
        return rec
