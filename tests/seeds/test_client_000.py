"""A client written from the original storage design alone (``client_000``) reads what bar
wrote in a real session: every kind of step bar records (run, a pty run, a manual step,
a decision, a rollback, an apply), task.json through the design's version check, each
step's state rebuilt by ``git apply`` of the diffs onto the base, and each step's output
in the design's format. docs/storage.md says what such a reader must ignore."""

from __future__ import annotations

import ast
import json
import subprocess
from pathlib import Path

import client_000 as seed
import pytest
from helpers import (
    BAR_EXE,
    bar,
    bar_exe,
    bar_home,
    files_in_commit,
    ledger,
    new_task,
    task_dir,
    worktree,
)

from conftest import MakeRepo, git

QUESTIONS = {
    "task": "store the report",
    "source": "plan.md",
    "items": [
        {
            "id": 1,
            "title": "format",
            "options": [{"value": "csv", "label": "CSV"}, {"value": "json", "label": "JSON"}],
            "recommend": "csv",
        }
    ],
}


def _run(*args: str, cwd: Path) -> None:
    done = bar_exe(*args, cwd=cwd)
    assert done.code == 0, (args, done.err)


def test_the_client_imports_nothing_of_bar() -> None:
    tree = ast.parse(Path(seed.__file__).read_text())
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert names and not [n for n in names if n == "bar" or n.startswith("bar.")]


def test_a_client_of_the_storage_design_reads_a_real_session(
    make_repo: MakeRepo,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    repo = make_repo(
        {
            "README.md": "# shop\n",
            "src/app.py": "print('hi')\n",
            "data.bin": b"\x00\xff\x10binary",
            "name with space.txt": "spaced\n",
            "tool.sh": "#!/bin/sh\necho tool\n",
        }
    )
    monkeypatch.chdir(repo)
    git(repo, "branch", "release")  # where the work lands: the base branch stays put
    assert bar(capfd, "init").code == 0
    t = new_task(capfd, "report", "-d", "store the report", "--meta", "ticket=SHOP-7")
    wt = worktree(t)

    # 0001 run: output on both streams, a binary file, a rename to a non-ASCII name
    _run(
        "run",
        "--no-pty",
        "--",
        "sh",
        "-c",
        "echo hello; echo warn >&2; printf 'more\\n' >> README.md; "
        "printf '\\000\\001\\002' > blob.bin; mv 'name with space.txt' 'renamed ü.txt'",
        cwd=wt,
    )
    # 0002 manual: edited by hand between steps, recorded before the next one
    (wt / "src" / "app.py").write_text("print('hello by hand')\n")
    (wt / "tool.sh").chmod(0o755)
    # 0003 run on a terminal: escapes on screen, plain text in its output file
    done = subprocess.run(
        [
            *(BAR_EXE, "run", "--pty", "--", "sh", "-c"),
            "printf '\\033[31mred\\033[0m done\\n'; echo pty >> README.md; rm data.bin",
        ],
        cwd=wt,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    # 0004 decision: the agent's question answered
    _run("decide", "submit", json.dumps(QUESTIONS), cwd=wt)
    _run("decide", "answer", "--choose", "1=json", cwd=wt)
    # 0005 rollback to the state of step 0001; 0006 a run after it; 0007 apply
    _run("rollback", "--to", "1", cwd=wt)
    _run(
        "run", "--no-pty", "--", "sh", "-c", "ln -s README.md link; echo after > after.txt", cwd=wt
    )
    _run("apply", "--target", "release", "-m", "Store the report", cwd=repo)

    recorded = ledger(t["id"])
    kinds = [s["kind"] for s in recorded]
    assert kinds == ["run", "manual", "run", "decision", "rollback", "run", "apply"], kinds
    assert recorded[2]["pty"] is True

    # --- what the client finds, knowing only the design --------------------------------
    (project,) = seed.projects(bar_home())
    assert project.active_task_id == t["id"]
    here = project.dir / "tasks" / t["id"]
    assert here == task_dir(t["id"])
    task = seed.load_task(here)  # version 1: the design's migrateTaskJSON takes it
    assert (task.id, task.name, task.base_ref, task.status) == (t["id"], "report", "main", "active")
    assert task.metadata == {"description": "store the report", "ticket": "SHOP-7"}
    steps = seed.read_ledger(here)
    assert [s.step_id for s in steps] == [f"{n:04d}" for n in range(1, 8)]
    assert [s.kind for s in steps] == kinds
    for step in steps:  # every kind of bar's own reads as a run step would
        if step.kind not in seed.KINDS:
            assert step.cmd == [] and step.cwd == "." and step.exit_code == 0
            assert step.diff_stat is not None

    states = seed.replay(here, tmp_path / "replayed")
    for rec in recorded:
        if rec["kind"] != "apply":  # each state, byte for byte, as bar recorded it
            assert states[rec["step_id"]] == files_in_commit(repo, rec["snapshot"]), rec
    assert states["0002"]["tool.sh"].startswith(b"x:")  # a mode change replays too
    assert "data.bin" not in states["0003"] and "renamed ü.txt" in states["0001"]
    rollback = steps[4]
    assert (rollback.target, rollback.target_step) == ("step", "0001")
    assert states["0005"] == states["0001"]  # the design's meaning of a rollback
    assert states["0006"]["link"] == b"-> README.md"
    apply = steps[6]
    assert (apply.mode, apply.target_branch) == ("commit", "release")
    landed = git(repo, "rev-parse", "release").strip()
    assert apply.commit_sha == landed
    assert files_in_commit(repo, landed) == states["0006"]

    outputs = {s.step_id: seed.read_output(here, s) for s in steps}
    assert outputs["0001"] == ("hello\n", "warn\n")
    assert outputs["0003"] == ("red done\n", "")  # a pty step keeps the design's file too
    assert {k for k, v in outputs.items() if v is not None} == {"0001", "0003"}
    assert steps[2].artifacts["output"] == "artifacts/0003.output"


def test_the_design_reader_refuses_what_it_cannot_read(tmp_path: Path) -> None:
    # what a task.json of an earlier bar (version 2) did to such a reader: refused whole
    rec = {
        "version": 2,
        "id": "AbCdEfGh",
        "name": "x",
        "repo_root": "/r",
        "base_ref": "main",
        "branch": "bar/x-AbCdEfGh",
        "workspace_path": "workspaces/AbCdEfGh",
        "status": "active",
        "created_at": "2024-01-15T10:00:00.000Z",
        "updated_at": "2024-01-15T10:00:00.000Z",
        "closed_at": None,
    }
    with pytest.raises(seed.Unreadable, match="unsupported task version: 2"):
        seed.migrate_task_json(json.dumps(rec).encode())
    rec["version"] = 1
    assert seed.migrate_task_json(json.dumps(rec).encode()).name == "x"
    # a step of a kind it does not know that lacks a run step's keys cannot be replayed
    line = '{"step_id":"0001","kind":"manual","started_at":"2024-01-15T10:00:00Z",'
    line += '"ended_at":"2024-01-15T10:00:00Z","artifacts":{"patch":"artifacts/0001.patch"}}'
    with pytest.raises(seed.Unreadable, match="lacks cmd, cwd, exit_code, diff_stat"):
        seed.parse_step(line, "ledger line 1")
