"""A task-board client written from reference 002 alone (the worktree + task-isolation
design), knowing nothing of bar: it reads the control plane in ``<repo>/.tasks/`` and
the execution plane in ``<repo>/.worktrees/``, runs commands in a worktree by its
registered path, and rebuilds the whole picture from those files, as the design's crash
recovery does. It must not import bar."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

TASK_STATUSES = ("pending", "in_progress", "completed")
WORKTREE_STATUSES = ("active", "removed", "kept")


class SeedBoard:
    def __init__(self, repo_root: Path) -> None:
        self.tasks_dir = repo_root / ".tasks"
        self.worktrees_dir = repo_root / ".worktrees"

    # --- control plane -------------------------------------------------------------

    def task(self, task_id: int) -> dict[str, Any]:
        record: dict[str, Any] = json.loads((self.tasks_dir / f"task_{task_id}.json").read_text())
        return record

    def tasks(self) -> list[dict[str, Any]]:
        found = [json.loads(p.read_text()) for p in self.tasks_dir.glob("task_*.json")]
        return sorted(found, key=lambda t: int(t["id"]))

    def listing(self) -> list[str]:
        marks = {"pending": "[ ]", "in_progress": "[>]", "completed": "[x]"}
        lines = []
        for t in self.tasks():
            owner = f" owner={t['owner']}" if t.get("owner") else ""
            wt = f" wt={t['worktree']}" if t.get("worktree") else ""
            lines.append(f"{marks.get(t['status'], '[?]')} #{t['id']}: {t['subject']}{owner}{wt}")
        return lines

    # --- execution plane -----------------------------------------------------------

    def index(self) -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = json.loads((self.worktrees_dir / "index.json").read_text())[
            "worktrees"
        ]
        return entries

    def worktree(self, name: str) -> dict[str, Any] | None:
        return next((w for w in self.index() if w.get("name") == name), None)

    def status(self, name: str) -> str:
        wt = self.worktree(name)
        if wt is None:
            return f"Error: Unknown worktree '{name}'"
        done = subprocess.run(
            ["git", "status", "--short", "--branch"],
            cwd=wt["path"],
            capture_output=True,
            text=True,
            check=False,
        )
        return (done.stdout + done.stderr).strip()

    def run(self, name: str, command: str) -> str:
        wt = self.worktree(name)
        if wt is None or not Path(wt["path"]).exists():
            return f"Error: Unknown worktree '{name}'"
        done = subprocess.run(
            command, shell=True, cwd=wt["path"], capture_output=True, text=True, check=False
        )
        return (done.stdout + done.stderr).strip()

    def events(self, limit: int = 20) -> list[dict[str, Any]]:
        lines = (self.worktrees_dir / "events.jsonl").read_text().splitlines()[-limit:]
        out = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except ValueError:
                out.append({"event": "parse_error", "raw": line})
        return out

    # --- crash recovery: the disk is the truth ---------------------------------------

    def recover(self) -> dict[str, Any]:
        """Everything there is, from the two planes alone: each task with its status
        and the worktree it is bound to, each live worktree with the task it serves.
        Inconsistencies the design rules out are returned as problems."""
        tasks = {t["id"]: t for t in self.tasks()}
        problems: list[str] = []
        live: dict[str, dict[str, Any]] = {}
        for wt in self.index():
            if wt["status"] not in WORKTREE_STATUSES:
                problems.append(f"worktree {wt['name']}: unknown status {wt['status']}")
            if wt["status"] == "removed":
                continue
            if not Path(wt["path"]).is_dir():
                problems.append(f"worktree {wt['name']} is {wt['status']} but its path is gone")
            live[wt["name"]] = wt
            task_id = wt.get("task_id")
            if task_id is not None and task_id not in tasks:
                problems.append(f"worktree {wt['name']} names task {task_id}, which is not there")
        for task in tasks.values():
            if task["status"] not in TASK_STATUSES:
                problems.append(f"task {task['id']}: unknown status {task['status']}")
            bound = task.get("worktree") or ""
            if task["status"] == "in_progress" and bound and bound not in live:
                problems.append(f"task {task['id']} is bound to {bound}, which is not live")
            if bound and bound in live and live[bound].get("task_id") != task["id"]:
                problems.append(f"task {task['id']} and worktree {bound} disagree")
        return {"tasks": tasks, "worktrees": live, "problems": problems}
