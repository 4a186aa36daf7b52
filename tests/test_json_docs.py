"""Every ``--json`` output is the shape docs/json.md documents: a real session runs each
command that prints JSON, and each output is checked key by key against the document
(a key the document does not name fails too), so the document cannot fall behind."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import jsonshape
import pytest
from helpers import SUPPORT, bar, bar_exe, ledger, set_config, worktree

from conftest import git

FAKE_AGENT = SUPPORT / "fake_agent.py"


class Session:
    def __init__(self, capfd: pytest.CaptureFixture[str]) -> None:
        self.capfd = capfd
        self.seen: dict[str, list[Any]] = defaultdict(list)

    def json(self, heading: str, *args: str, code: int = 0) -> Any:
        """Run ``bar ARGS`` and keep its JSON under the document's heading for it. (A step
        runs in a child: in-process, what the command prints would land on stdout too.)"""
        res = bar_exe(*args) if args[0] == "run" else bar(self.capfd, *args)
        assert res.code == code, (args, res.err)
        value = json.loads(res.out)
        self.seen[heading].append(value)
        return value

    def json_exe(self, heading: str, *args: str, env: dict[str, str] | None = None) -> Any:
        """``json``, in a child process (a command that talks to a Temporal server: its
        native client is not loaded into the test's process)."""
        res = bar_exe(*args, env=env)
        assert res.code == 0, (args, res.err)
        value = json.loads(res.out)
        self.seen[heading].append(value)
        return value


def agent_program(tmp_path: Path) -> str:
    program = tmp_path / "bin" / "claude"
    program.parent.mkdir(exist_ok=True)
    program.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE_AGENT} --agent claude "$@"\n')
    program.chmod(0o755)
    return str(program)


def session(s: Session, repo: Path, tmp_path: Path) -> None:
    """Every command that prints JSON, in the states a script meets them in."""
    s.json("bar init --json", "init", "--json")
    t = s.json("bar task new --json", "task", "new", "first", "-d", "what it is for", "--json")
    s.json(
        "bar run --json",
        "run",
        "--no-pty",
        "--json",
        "--",
        "sh",
        "-c",
        "echo out; echo err >&2; echo change >> README.md",
    )
    s.json("bar run --json", "run", "--no-pty", "--json", "--", "rm", "-rf", "/", code=126)
    set_config(hooks={"pre_run": ["exit 3"]})
    s.json("bar run --json", "run", "--no-pty", "--json", "--", "true", code=10)
    set_config(hooks={"pre_run": []})
    s.json(
        "bar run --json",
        "run",
        "--no-pty",
        "--agent",
        "claude",
        "--json",
        "--",
        agent_program(tmp_path),
        "write:new.txt=made by a tool",
        "echo more >> new.txt",
    )
    for args in (["log", "--json"], ["log", "--json", "-p"], ["log", "--json", "--tools"]):
        s.json("bar log --json", *args)
    for ref in ("1", "2", "3", "4", "4.1"):
        s.json("bar show --json", "show", ref, "--json")
    s.json("bar diff --json", "diff", "--json")
    s.json("bar diff --json", "diff", "--stat", "--json")
    (worktree(t) / "README.md").write_text("edited by hand\n")
    s.json("bar diff --json", "diff", "--unrecorded", "--json")
    s.json("bar status --json", "status", "--json")
    s.json("bar verify --json", "verify", "--json", code=1)  # (the hand edit)
    s.json("bar verify --json", "verify", "--step", "base", "--json", code=1)
    s.json("bar blame --json", "blame", "new.txt", "--json")
    s.json("bar task path --json", "task", "path", "--json")
    s.json("bar rollback --json", "rollback", "--to", "1", "--dry-run", "--json")
    s.json("bar rollback --json", "rollback", "--to", "1", "--json")
    s.json("bar undo --json", "undo", "--dry-run", "--json")
    s.json("bar undo --json", "undo", "--json")
    s.json("bar redo --json", "redo", "--json")
    trash_session(s, tmp_path)
    (worktree(t) / "README.md").write_text("edited by hand again\n")
    s.json("bar verify --json", "verify", "--record", "--json")
    (repo / "upstream.txt").write_text("from upstream\n")
    git(repo, "add", "upstream.txt")
    git(repo, "commit", "-qm", "upstream")
    s.json("bar task sync --json", "task", "sync", "--dry-run", "--json")
    s.json("bar task sync --json", "task", "sync", "--json")
    s.json("bar apply --json", "apply", "--dry-run", "--json")
    s.json("bar apply --json", "apply", "-m", "The first task", "--json")
    s.json("bar task list --json", "task", "list", "--all", "--json")
    s.json("bar task show --json", "task", "show", "--json")
    edit = ("task", "edit", "first", "--meta", "ticket=T-1", "--tag", "x", "--json")
    s.json("bar task edit --json", *edit)
    s.json("bar task edit --json", *edit)  # (again: nothing changed)
    second = s.json("bar task new --json", "task", "new", "second", "--json")
    s.json("bar task rename --json", "task", "rename", "second", "second-b", "--json")
    s.json("bar task rename --json", "task", "rename", second["id"], "second", "--json")
    s.json("bar task switch --json", "task", "switch", "first", "--json")
    s.json("bar task close --json", "task", "close", "second", "--json")
    s.json("bar task reopen --json", "task", "reopen", "second", "--json")
    s.json("bar task close --json", "task", "close", "second", "--json")
    s.json("bar task delete --json", "task", "delete", second["id"], "--dry-run", "--json")
    s.json("bar task delete --json", "task", "delete", second["id"], "--json")
    s.json("bar task prune --json", "task", "prune", "--dry-run", "--json")
    board(s)
    s.json("bar policy check --json", "policy", "check", "--json", "-c", "ls -la")
    s.json("bar policy check --json", "policy", "check", "--json", "-c", "rm -rf ~", code=126)
    s.json("bar policy explain --json", "policy", "explain", "--json", "-c", "ls -la")
    s.json(
        "bar policy explain --json",
        "policy",
        "explain",
        "--json",
        "--exec",
        "--",
        "rm",
        "-rf",
        "/",
        code=126,
    )
    s.json("bar policy test --json", "policy", "test", "--json")
    s.json("bar doctor --json", "doctor", "--json")
    for action in ("stop", "status", "start", "status", "stop"):  # none, then one, then none
        s.json(f"bar resident {action} --json", "resident", action, "--json")
    assert bar(s.capfd, "task", "switch", "first").code == 0
    agents_drive(s, str(t["id"]))
    sharing(s, repo, tmp_path)
    workers(s, repo, tmp_path)
    moved = repo.rename(repo.parent / "moved")
    os.chdir(moved)
    s.json("bar init --json", "init", "--adopt", "--json")


def board(s: Session) -> None:
    """The task board (docs/board.md)."""
    s.json("bar task new --json", "task", "new", "planned", "--plan", "--json")
    s.json("bar task claim --json", "task", "claim", "planned", "--owner", "w1", "--json")
    s.json("bar task unclaim --json", "task", "unclaim", "planned", "--json")
    s.json("bar worktree create --json", "worktree", "create", "lane", "--json")
    s.json("bar task new --json", "task", "new", "later", "--plan", "--json")
    s.json("bar task bind --json", "task", "bind", "later", "lane", "--json")
    s.json("bar task new --json", "task", "new", "third", "--plan", "--json")
    s.json(
        "bar worktree create --json", "worktree", "create", "third-wt", "--task", "third", "--json"
    )
    s.json("bar task start --json", "task", "start", "planned", "--no-switch", "--json")
    s.json("bar worktree keep --json", "worktree", "keep", "planned", "--json")
    s.json("bar worktree list --json", "worktree", "list", "--all", "--json")
    s.json("bar worktree remove --json", "worktree", "remove", "planned", "--json")
    s.json("bar events --json", "events", "-n", "50", "--json")


def agents_drive(s: Session, task_id: str) -> None:
    """bar flow and bar decide (docs/decide-flow.md) on the active task."""
    s.json("bar flow status --json", "flow", "status", "--json")  # null: not started
    for action in ("start", "next-step", "issue", "error", "next-part", "next-step"):
        s.json(f"bar flow {action} --json", "flow", action, f"{action} done", "--json")
    s.json("bar flow back-step --json", "flow", "back-step", "--rollback", "undo", "--json")
    s.json("bar flow back-part --json", "flow", "back-part", "--rollback", "again", "--json")
    s.json("bar flow status --json", "flow", "status", "--json")
    s.json("bar log --json", "log", "--json")  # each step with its phase
    item = {
        "id": 1,
        "title": "which",
        "location": {"file": "a.md", "start": 1, "end": 2},
        "context": "why",
        "recommend": "a",
        "options": [
            {"value": "a", "label": "A", "score": 90, "pros": ["p"], "cons": ["c"]},
            {"value": "b", "label": "B"},
        ],
    }
    question = json.dumps({"task": "t", "source": "s", "items": [item]})
    s.json("bar decide submit --json", "decide", "submit", question, "--json")
    s.json("bar decide submit --json", "decide", "submit", question, "--json")  # replaces
    s.json("bar decide list --json", "decide", "list", "--json")
    s.json("bar status --json", "status", "--json")  # the decision that waits
    s.json("bar log --json", "log", "--kind", "run", "--since", "1d", "--grep", ".", "--json")
    s.json("bar show --json", "show", "--json")  # the latest step
    done = s.json(
        "bar decide answer --json",
        "decide",
        "answer",
        "--choose",
        "1=a",
        "--note",
        "1=why not",
        "--json",
    )
    s.json("bar decide result --json", "decide", "result", "--json")
    s.json("bar decide show --json", "decide", "show", "--json")
    s.json("bar decide list --json", "decide", "list", "--json")
    s.json("bar show --json", "show", done["step"]["step_id"], "--json")
    # an answer written where aide's clients look, as aide's web server writes it. A
    # question is stamped to the second, so a step that ended up to the margin before it
    # could have written its answer (``bar.aide.answers``), and one step above ran
    # unconfined (its pre_run hook failed): on a machine quick enough to get here within
    # the margin, the question waits until that step is past it, as on any slower one
    from bar.aide import answers

    ends = [
        dt.datetime.fromisoformat(step["ended_at"].replace("Z", "+00:00"))
        for step in ledger(task_id)
        if step["kind"] == "run"
    ]
    past = max(ends) + answers._MARGIN + dt.timedelta(seconds=1)
    while dt.datetime.now(dt.UTC) < past:
        time.sleep(0.05)
    where = s.json("bar decide path --json", "decide", "path", "--json")
    sid = s.json("bar decide submit --json", "decide", "submit", question, "--json")["session_id"]
    pending = json.loads((Path(where["decisions"]) / "pending.json").read_text())
    answer = {"input": pending, "output": {"decisions": [{"id": 1, "chosen": "b"}]}}
    (Path(where["decisions"]) / f"{sid}.json").write_text(json.dumps(answer))
    s.json("bar decide result --json", "decide", "result", "--json")
    s.json("bar log --json", "log", "--json")  # the decision step, via a file
    s.json("bar decide clean --json", "decide", "clean", "--dry-run", "--json")
    cleaned = s.json("bar decide clean --json", "decide", "clean", "--json")
    s.json("bar show --json", "show", cleaned["step"]["step_id"], "--json")


def sharing(s: Session, repo: Path, tmp_path: Path) -> None:
    """Push to a bare remote, then, as a second clone of it, fetch and adopt."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    s.json("bar push --json", "push", str(remote), "--dry-run", "--json")
    s.json("bar push --json", "push", str(remote), "--json")
    s.json("bar fetch --json", "fetch", str(remote), "--json")
    s.json("bar blame --json", "blame", "README.md", "--rev", "HEAD", "--json")
    s.json("bar notes export --json", "notes", "export", "--json")
    example = Path(__file__).parent / "data" / "gitai" / "mixed.note"  # the standard's
    git(repo, "notes", "--ref", "ai", "add", "-f", "-F", str(example), "HEAD")
    s.json("bar notes import --json", "notes", "import", "--json")
    root = git(repo, "rev-list", "--max-parents=0", "HEAD").strip().splitlines()[0]
    s.json("bar review --json", "review", "HEAD", "--base", root, "--json")
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(repo), str(other))
    here = Path.cwd()
    os.chdir(other)
    try:
        s.json("bar init --json", "init", "--json")
        fetched = s.json("bar fetch --json", "fetch", str(remote), "--json")
        s.json("bar task list --json", "task", "list", "--json")
        copy = fetched["tasks"][0]["task_id"]
        s.json("bar task adopt --json", "task", "adopt", copy, "--json")
    finally:
        os.chdir(here)


def workers(s: Session, repo: Path, tmp_path: Path) -> None:
    """A task sent to a worker (a second clone with its own bar home) through a real
    Temporal dev server: new, run, detach, status, list, cancel."""
    import signal
    import subprocess
    import time

    from helpers import BAR_EXE

    from bar.workers.devserver import DevServer

    remote = tmp_path / "workers-remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    git(repo, "push", "-q", "origin", "HEAD:refs/heads/main")
    clone = tmp_path / "worker-clone"
    git(tmp_path, "clone", "-q", str(remote), str(clone))
    home = {"BAR_HOME": str(tmp_path / "worker-home")}
    assert bar_exe("init", cwd=clone, env=home).code == 0
    server = DevServer(tmp_path / "temporal.db").start()
    env = {"BAR_TEMPORAL": server.address}
    log = tmp_path / "worker.log"
    with open(log, "wb") as out:
        worker = subprocess.Popen(
            [BAR_EXE, "worker", "--queue", "json"],
            cwd=clone,
            env={**os.environ, **env, **home, "BAR_WORKER_NAME": "w1"},
            stdout=out,
            stderr=out,
        )
    try:
        while b"takes steps" not in log.read_bytes():
            assert worker.poll() is None, log.read_text()
            time.sleep(0.1)
        s.json_exe("bar task new --json", "task", "new", "far", "--on", "json", "--json", env=env)
        s.json_exe(
            "bar run --json", "run", "--on", "json", "--task", "far", "--json", "--",
            "sh", "-c", "echo far > far.txt", env=env,
        )  # fmt: skip
        s.json_exe(
            "bar run --json", "run", "--on", "json", "--detach", "--task", "far", "--json",
            "--", "sh", "-c", "echo begun; sleep 60", env=env,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while True:
            now = json.loads(bar_exe("status", "--task", "far", "--json", env=env).out)
            if (now["task"]["on_workers"]["now"] or {}).get("running", {}).get("worker"):
                break
            assert time.monotonic() < deadline, now
            time.sleep(0.2)
        s.json_exe("bar status --json", "status", "--task", "far", "--json", env=env)
        s.json_exe("bar task list --json", "task", "list", "--json", env=env)
        s.json_exe("bar cancel --json", "cancel", "--task", "far", "--json", env=env)
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        server.stop()


def trash_session(s: Session, tmp_path: Path) -> None:
    """A file no state holds moved to the trash (by the core, as a rollback moves one),
    listed, and put back elsewhere."""
    from bar import api
    from bar.changes import trash

    task = api.get_task(api.open_project())
    (task.worktree / "scratch").mkdir()
    (task.worktree / "scratch" / "notes.tmp").write_text("never recorded\n")
    trash.move_aside(
        task, task.worktree, ["scratch"], "a test", command="bar rollback", kind=trash.ROLLBACK
    )
    s.json("bar trash list --json", "trash", "--json")
    s.json("bar trash list --json", "trash", "list", "--json")
    s.json(
        "bar trash restore --json",
        "trash",
        "restore",
        "scratch",
        "--to",
        str(tmp_path / "rescued"),
        "--json",
    )


def test_every_json_output_is_as_documented(
    repo: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    s = Session(capfd)
    session(s, repo, tmp_path)
    if os.environ.get("JSON_SHAPES_DUMP"):  # to write the document from
        Path(os.environ["JSON_SHAPES_DUMP"]).write_text(json.dumps(s.seen, indent=1))
    shapes = jsonshape.shapes()
    defs = {name: shape for name, shape in shapes.items() if name.startswith("$")}
    for heading, outputs in s.seen.items():
        assert heading in shapes, f"docs/json.md has no section `{heading}`"
        for value in outputs:
            jsonshape.check(value, shapes[heading], defs, heading)
    documented = {name for name in shapes if not name.startswith("$")}
    assert documented <= set(s.seen), f"documented, never checked: {documented - set(s.seen)}"


def test_every_command_with_json_has_a_section() -> None:
    from bar.cli.parser import build_parser

    def walk(parser: argparse.ArgumentParser, path: list[str]) -> list[str]:
        found = []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    found += walk(child, [*path, name])
            elif "--json" in action.option_strings:
                found.append(" ".join(["bar", *path, "--json"]))
        return found

    headings = set(jsonshape.shapes())
    missing = [c for c in walk(build_parser(whole=True), []) if c not in headings]
    assert not missing, f"commands with --json that docs/json.md does not document: {missing}"


def test_the_json_version_is_the_documents(capfd: pytest.CaptureFixture[str]) -> None:
    from bar import JSON_VERSION

    assert f"(json {JSON_VERSION})" in bar(capfd, "--version").out
    assert f"(json {JSON_VERSION})" in bar_exe("--version").out
    assert f"**JSON output version {JSON_VERSION}**" in jsonshape.DOC.read_text()
