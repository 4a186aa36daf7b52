"""The core loop on real repositories: init, tasks, run, snapshots, reading."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import threading
from pathlib import Path

import pytest
import yaml

from conftest import git
from helpers import bar, bar_exe, ledger, new_task, project_dir, task_dir, worktree

# --- init ----------------------------------------------------------------------------


def test_init_creates_the_files_of_the_spec(repo: Path, capfd: pytest.CaptureFixture[str]) -> None:
    res = bar(capfd, "init")
    assert res.code == 0, res.err
    pdir = project_dir()
    import hashlib

    digest = hashlib.sha256(str(repo.resolve()).encode()).hexdigest()[:4]
    assert pdir.name == f"{repo.name}-{digest}"
    config = yaml.safe_load((pdir / "config.yaml").read_text())
    assert config["version"] == 1
    assert config["git"] == {"default_base": "main", "branch_prefix": "bar/"}
    assert config["policy"]["path"] == ".bar/policy.yaml"
    assert config["hooks"]["pre_run"] == [] and config["hooks"]["post_run"] == []
    assert config["output"] == {"color": True, "verbose": False}
    state = json.loads((pdir / "state.json").read_text())
    assert state["version"] == 1 and state["active_task_id"] is None
    assert state["updated_at"].endswith("Z")
    assert (repo / ".bar" / "policy.yaml").exists()
    assert stat.S_IMODE(pdir.stat().st_mode) == 0o700
    assert stat.S_IMODE((pdir / "config.yaml").stat().st_mode) == 0o600
    assert stat.S_IMODE((pdir / "state.json").stat().st_mode) == 0o600


def test_init_is_idempotent(repo: Path, capfd: pytest.CaptureFixture[str]) -> None:
    assert bar(capfd, "init").code == 0
    before = (project_dir() / "config.yaml").read_bytes()
    res = bar(capfd, "init")
    assert res.code == 0 and "already registered" in res.out
    assert (project_dir() / "config.yaml").read_bytes() == before


def test_init_refuses_outside_a_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    monkeypatch.chdir(plain)
    res = bar(capfd, "init")
    assert res.code == 4
    assert "not inside a git repository" in res.err
    assert "Traceback" not in res.err


def test_init_refuses_a_repository_without_commits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    monkeypatch.chdir(empty)
    res = bar(capfd, "init")
    assert res.code == 4 and "no commit" in res.err and "hint:" in res.err


def test_default_base_is_the_current_branch_without_main(
    make_repo, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo()
    git(repo, "branch", "-m", "main", "trunk")
    monkeypatch.chdir(repo)
    assert bar(capfd, "init").code == 0
    config = yaml.safe_load((project_dir() / "config.yaml").read_text())
    assert config["git"]["default_base"] == "trunk"


def test_commands_before_init_say_so(repo: Path, capfd: pytest.CaptureFixture[str]) -> None:
    res = bar(capfd, "task", "list")
    assert res.code == 4 and "bar init" in res.err


# --- tasks ---------------------------------------------------------------------------


@pytest.fixture
def inited(repo: Path, capfd: pytest.CaptureFixture[str]) -> Path:
    assert bar(capfd, "init").code == 0
    # Policy is exercised in its own tests; keep the core loop independent of it.
    cfg = project_dir() / "config.yaml"
    cfg.write_text(cfg.read_text().replace("enabled: true", "enabled: false"))
    return repo


def test_task_new_writes_task_json_exactly(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    t = new_task(capfd, "fix-bug", "-d", "Fix the bug", "--tag", "bug", "--tag", "urgent")
    rec = json.loads((task_dir(t["id"]) / "task.json").read_text())
    assert set(rec) == {
        "version", "id", "name", "repo_root", "base_ref", "base_commit", "branch",
        "workspace_path", "status", "created_at", "updated_at", "closed_at", "metadata",
        "snapshot_ref",
    }  # fmt: skip
    assert len(rec["id"]) == 8 and all(c.isalnum() or c in "_-" for c in rec["id"])
    assert rec["name"] == "fix-bug"
    assert rec["repo_root"] == str(inited.resolve())
    assert rec["base_ref"] == "main"
    assert rec["base_commit"] == git(inited, "rev-parse", "main").strip()
    assert rec["branch"] == f"bar/fix-bug-{rec['id']}"
    assert rec["workspace_path"] == f"workspaces/{rec['id']}"
    assert rec["status"] == "active" and rec["closed_at"] is None
    assert rec["metadata"] == {"description": "Fix the bug", "tags": ["bug", "urgent"]}
    assert rec["snapshot_ref"] == f"refs/bar/tasks/{rec['id']}"
    assert (project_dir() / rec["workspace_path"] / "README.md").exists()
    state = json.loads((project_dir() / "state.json").read_text())
    assert state["active_task_id"] == rec["id"]
    events = [json.loads(x) for x in (project_dir() / "events.jsonl").read_text().splitlines()]
    kinds = [e["event"] for e in events]
    assert "task.created" in kinds and "worktree.created" in kinds
    assert git(inited, "rev-parse", rec["snapshot_ref"]).strip() == rec["base_commit"]


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("a/b", "slash"),
        ("a..b", "'..'"),
        ("has space", "whitespace"),
        ("tab\there", "whitespace"),
        ("ctl\x01", "control"),
        ("x" * 65, "at most 64"),
        ("", "empty"),
        ("-flag", "starts with"),
    ],
)
def test_task_names_are_validated(
    inited: Path, capfd: pytest.CaptureFixture[str], name: str, problem: str
) -> None:
    res = bar(capfd, "task", "new", "--", name)
    assert res.code == 2
    assert problem in res.err
    assert not (project_dir() / "tasks").exists() or not any((project_dir() / "tasks").iterdir())


def test_task_list_show_switch(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    a = new_task(capfd, "alpha")
    b = new_task(capfd, "beta")
    rows = bar(capfd, "task", "list", "--json").json()
    assert [r["name"] for r in rows] == ["alpha", "beta"]
    assert [r["active"] for r in rows] == [False, True]
    assert bar(capfd, "task", "switch", "alpha").code == 0
    shown = bar(capfd, "task", "show", "--json").json()
    assert shown["id"] == a["id"]
    human = bar(capfd, "task", "list").out
    assert "alpha" in human and "beta" in human and b["id"] in human
    res = bar(capfd, "task", "switch", "nope")
    assert res.code == 3 and "no task" in res.err


def test_close_removes_worktree_keeps_branch_and_history(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd, "closing")
    wt = worktree(t)
    assert bar(capfd, "run", "--", "sh", "-c", "echo hi > new.txt").code == 0
    (wt / "hand.txt").write_text("edited by hand\n")
    res = bar(capfd, "task", "close")
    assert res.code == 5 and "--force" in res.err
    assert wt.exists()
    res = bar(capfd, "task", "close", "--force")
    assert res.code == 0, res.err
    assert not wt.exists()
    steps = ledger(t["id"])
    assert [s["kind"] for s in steps] == ["run", "manual"]
    assert "hand.txt" in steps[1]["diff_stat"]["file_list"]
    assert git(inited, "rev-parse", "--verify", t["branch"]).strip()
    snap = git(inited, "rev-parse", t["snapshot_ref"]).strip()
    assert git(inited, "show", f"{snap}:hand.txt") == "edited by hand\n"
    rec = json.loads((task_dir(t["id"]) / "task.json").read_text())
    assert rec["status"] == "closed" and rec["closed_at"]
    events = [
        json.loads(x)["event"] for x in (project_dir() / "events.jsonl").read_text().splitlines()
    ]
    assert "task.closed" in events and "worktree.removed" in events
    assert json.loads((project_dir() / "state.json").read_text())["active_task_id"] is None


# --- run -----------------------------------------------------------------------------


def test_run_records_a_step_exactly(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    t = new_task(capfd)
    res = bar(
        capfd, "run", "-e", "MODE=fast", "--",
        "sh", "-c", "echo out; echo err >&2; printf 'x\\n' > a.txt; rm README.md; exit 3",
    )  # fmt: skip
    assert res.code == 3
    assert "out" in res.out and "err" in res.err
    (step,) = ledger(t["id"])
    assert step["step_id"] == "0001" and step["kind"] == "run"
    assert step["cmd"][0] == "sh" and step["cwd"] == "."
    assert step["env"] == {"MODE": "fast"}
    assert step["exit_code"] == 3
    assert step["diff_stat"] == {
        "files": 2, "additions": 1, "deletions": 1, "file_list": ["README.md", "a.txt"],
    }  # fmt: skip
    assert step["artifacts"] == {"patch": "artifacts/0001.patch", "output": "artifacts/0001.output"}
    assert step["policy_events"] == []
    for key in ("started_at", "ended_at"):
        assert step[key].endswith("Z")
    assert isinstance(step["duration_ms"], int)
    out = (task_dir(t["id"]) / "artifacts/0001.output").read_text()
    assert out == "=== STDOUT ===\nout\n=== STDERR ===\nerr\n"
    assert step["snapshot"] == git(inited, "rev-parse", t["snapshot_ref"]).strip()
    assert step["snapshot_before"] == t["base_commit"]
    assert step["head"] == t["base_commit"]
    mode = stat.S_IMODE((task_dir(t["id"]) / "artifacts/0001.patch").stat().st_mode)
    assert mode == 0o600


def test_run_without_changes_or_output_has_no_artifacts(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    assert bar(capfd, "run", "--", "true").code == 0
    (step,) = ledger(t["id"])
    assert step["artifacts"] == {}
    assert step["snapshot"] == step["snapshot_before"]


def test_exit_codes_not_found_and_signal(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    t = new_task(capfd)
    assert bar(capfd, "run", "--", "no-such-program-xyz").code == 127
    assert bar(capfd, "run", "--", "sh", "-c", "kill -TERM $$").code == 128 + 15
    steps = ledger(t["id"])
    assert steps[0]["exit_code"] == 127
    assert steps[1]["exit_code"] == 143 and steps[1]["signal"] == 15


def test_hand_edits_become_a_manual_step(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    t = new_task(capfd)
    (worktree(t) / "by-hand.txt").write_text("typed by a person\n")
    assert bar(capfd, "run", "--", "sh", "-c", "echo agent > agent.txt").code == 0
    steps = ledger(t["id"])
    assert [s["kind"] for s in steps] == ["manual", "run"]
    assert steps[0]["diff_stat"]["file_list"] == ["by-hand.txt"]
    assert steps[1]["diff_stat"]["file_list"] == ["agent.txt"]
    assert steps[1]["snapshot_before"] == steps[0]["snapshot"]


def test_run_in_a_subdirectory_and_cwd_validation(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    (worktree(t) / "sub").mkdir()
    assert bar(capfd, "run", "--cwd", "sub", "--", "sh", "-c", "pwd > here.txt").code == 0
    assert (worktree(t) / "sub" / "here.txt").read_text().strip().endswith("/sub")
    res = bar(capfd, "run", "--cwd", "../..", "--", "true")
    assert res.code == 2 and "outside the task worktree" in res.err


def test_agent_staging_and_commits_do_not_disturb_recording(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    wt = worktree(t)
    script = "echo one > one.txt && git add one.txt && git commit -qm one && echo two > two.txt && git add two.txt"
    assert bar(capfd, "run", "--", "sh", "-c", script).code == 0
    (step,) = ledger(t["id"])
    assert sorted(step["diff_stat"]["file_list"]) == ["one.txt", "two.txt"]
    head = git(wt, "rev-parse", "HEAD").strip()
    assert step["head"] == head != t["base_commit"]
    # the agent's own staging area is untouched: two.txt is still staged, not committed
    assert git(wt, "diff", "--cached", "--name-only").split() == ["two.txt"]


def test_developer_checkout_is_never_touched(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    (inited / "untracked-dev.txt").write_text("mine\n")
    (inited / "README.md").write_text("dev edit\n")
    git(inited, "add", "README.md")

    def fingerprint() -> tuple[str, ...]:
        index = (inited / ".git" / "index").read_bytes()
        files = sorted(
            (str(p.relative_to(inited)), p.read_bytes())
            for p in inited.rglob("*")
            if p.is_file() and ".git" not in p.parts
        )
        heads = git(inited, "for-each-ref", "refs/heads/main", "--format=%(objectname)")
        return (git(inited, "rev-parse", "HEAD"), heads, repr(index), repr(files),
                git(inited, "symbolic-ref", "HEAD"))  # fmt: skip

    before = fingerprint()
    for name in ("one", "two"):
        new_task(capfd, name)
        for i in range(3):
            assert (
                bar(capfd, "run", "--", "sh", "-c", f"echo {i} > f{i}.txt; rm -f README.md").code
                == 0
            )
    assert bar(capfd, "task", "close", "--force").code == 0
    assert fingerprint() == before


def test_two_tasks_run_at_the_same_time(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    a = new_task(capfd, "a")
    b = new_task(capfd, "b")
    results: dict[str, int] = {}

    def go(t: dict[str, str]) -> None:
        res = bar_exe("run", "--task", t["id"], "--", "sh", "-c",
                      f"sleep 0.5; echo {t['name']} > {t['name']}.txt", cwd=inited)  # fmt: skip
        results[t["id"]] = res.code

    threads = [threading.Thread(target=go, args=(t,)) for t in (a, b)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert results == {a["id"]: 0, b["id"]: 0}
    for t in (a, b):
        (step,) = ledger(t["id"])
        assert step["diff_stat"]["file_list"] == [f"{t['name']}.txt"]


def test_second_run_in_a_busy_task_fails_fast_with_no_wait(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    slow = subprocess.Popen(
        [str(Path(os.sys.executable).parent / "bar"), "run", "--", "sleep", "3"], cwd=inited
    )
    try:
        import time

        deadline = time.time() + 30
        while not (task_dir(t["id"]) / "running.json").exists() and time.time() < deadline:
            time.sleep(0.05)
        res = bar(capfd, "run", "--no-wait", "--", "true")
        assert res.code == 7 and "busy" in res.err
        status = bar(capfd, "status", "--json").json()
        assert status["running"]["step_id"] == "0001"
    finally:
        slow.wait(timeout=60)
    assert [s["step_id"] for s in ledger(t["id"])] == ["0001"]


def test_output_is_streamed_and_large(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    t = new_task(capfd)
    code = "import sys\nfor i in range(200000): sys.stdout.write(f'line {i}\\n')"
    assert bar(capfd, "run", "--", os.sys.executable, "-c", code).code == 0
    text = (task_dir(t["id"]) / "artifacts/0001.output").read_text()
    assert text.startswith("=== STDOUT ===\nline 0\n")
    assert text.endswith("line 199999\n=== STDERR ===\n")


# --- reading ------------------------------------------------------------------------


def test_log_show_diff_status(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    t = new_task(capfd)
    for i in range(5):
        assert bar(capfd, "run", "--", "sh", "-c", f"echo {i} >> log.txt; echo step{i}").code == 0
    res = bar(capfd, "log", "-n", "2", "--json")
    assert [s["step_id"] for s in res.json()] == ["0004", "0005"]
    human = bar(capfd, "log").out
    assert human.count("\n") == 5 and "exit 0" in human
    assert "+4" in bar(capfd, "log", "-p").out or "@@" in bar(capfd, "log", "-p").out
    shown = bar(capfd, "show", "3")
    assert shown.code == 0 and "step2" in shown.out and "+2" in shown.out
    js = bar(capfd, "show", "0003", "--json").json()
    assert js["output_text"] == "=== STDOUT ===\nstep2\n=== STDERR ===\n"
    assert bar(capfd, "show", "99").code == 3
    d = bar(capfd, "diff", "--from", "2", "--to", "4", "--json").json()
    assert d["diff_stat"]["additions"] == 2
    assert "+3" in bar(capfd, "diff").out
    assert "log.txt" in bar(capfd, "diff", "--stat").out
    st = bar(capfd, "status", "--json").json()
    assert st["task"]["id"] == t["id"] and st["unrecorded_changes"] is False
    (worktree(t) / "x").write_text("x")
    st = bar(capfd, "status", "--json").json()
    assert st["unrecorded_changes"] is True
    assert "no step recorded" in bar(capfd, "status").out


def test_log_reads_only_the_tail(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    t = new_task(capfd)
    assert bar(capfd, "run", "--", "true").code == 0
    path = task_dir(t["id"]) / "ledger.jsonl"
    line = path.read_text().splitlines()[0]
    # a huge ledger whose early part is garbage: reading the tail must not touch it
    rec = json.loads(line)
    lines = ["not json at all"] * 50_000
    for i in range(2, 30):
        rec["step_id"] = f"{i:04d}"
        lines.append(json.dumps(rec))
    path.write_text(line + "\n" + "\n".join(lines) + "\n")
    res = bar(capfd, "log", "-n", "3", "--json")
    assert res.code == 0
    assert [s["step_id"] for s in res.json()] == ["0027", "0028", "0029"]
    assert "skipping" not in res.err


def test_torn_ledger_line_is_skipped_and_numbering_continues(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    assert bar(capfd, "run", "--", "true").code == 0
    path = task_dir(t["id"]) / "ledger.jsonl"
    with path.open("ab") as fh:
        fh.write(b'{"step_id":"0002","kind":"ru')  # a crash mid-write
    res = bar(capfd, "run", "--", "true")
    assert res.code == 0
    res = bar(capfd, "log", "--json")
    assert [s["step_id"] for s in res.json()] == ["0001", "0002"]
    assert "skipping line 2" in res.err


def test_unknown_versions_are_clear_errors(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    t = new_task(capfd)
    path = task_dir(t["id"]) / "task.json"
    rec = json.loads(path.read_text())
    rec["version"] = 7
    path.write_text(json.dumps(rec))
    res = bar(capfd, "task", "show", t["id"])
    assert res.code == 8
    assert f"unsupported task.json version 7 in {path}" in res.err


def test_unknown_config_key_names_key_and_file(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    cfg = project_dir() / "config.yaml"
    cfg.write_text(cfg.read_text() + "colour: blue\n")
    res = bar(capfd, "task", "list")
    assert res.code == 8 and "'colour'" in res.err and str(cfg) in res.err
    cfg.write_text(
        cfg.read_text()
        .replace("colour: blue\n", "")
        .replace("verbose: false", "verbose: false\n  loud: true")
    )
    res = bar(capfd, "task", "list")
    assert res.code == 8 and "output.loud" in res.err


def test_executable_end_to_end(inited: Path) -> None:
    assert bar_exe("--version").out.startswith("bar ")
    assert bar_exe("task", "new", "e2e", cwd=inited).code == 0
    res = bar_exe("run", "--", "sh", "-c", "echo hello; echo data > d.txt", cwd=inited)
    assert res.code == 0 and "hello" in res.out and "step 0001 recorded" in res.err
    res = bar_exe("log", cwd=inited)
    assert "0001" in res.out
    help_text = bar_exe("--help").out
    assert "exit codes" in help_text and "bar run -- claude" in help_text
