"""Checkpoints after every tool call (docs/checkpoints.md): recorded by the step's
supervisor as the agent reports its calls, addressed ``STEP.N`` by every command that takes
a state, and adding up, with the residual, to the step's own patch."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    BAR_EXE,
    SUPPORT,
    bar,
    files_in_commit,
    files_on_disk,
    git_commands,
    ledger,
    new_task,
    replay_patches,
    seen_alive_after,
    task_dir,
    worktree,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bar.git.index_files import identity

FAKE_AGENT = str(SUPPORT / "fake_agent.py")


@pytest.fixture
def inited(repo: Path, capfd: pytest.CaptureFixture[str]) -> Path:
    (repo / "notes.txt").write_text("first\nsecond\n")
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "notes"], cwd=repo, check=True)
    assert bar(capfd, "init").code == 0
    return repo


def agent_program(tmp_path: Path, agent: str) -> str:
    """An executable named like the agent that runs the fake one (bar gives Codex its
    hooks on the command line, after the program's name)."""
    program = tmp_path / "bin" / agent
    program.parent.mkdir(exist_ok=True)
    program.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE_AGENT} --agent {agent} "$@"\n')
    program.chmod(0o755)
    return str(program)


def run_agent(
    cwd: Path, tmp_path: Path, agent: str, *commands: str
) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(
        [
            BAR_EXE,
            "run",
            "--no-pty",
            "--agent",
            agent,
            "--",
            agent_program(tmp_path, agent),
            *commands,
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    return res


def checkpoint_lines(task_id: str, step_id: str) -> list[dict[str, Any]]:
    path = task_dir(task_id) / "artifacts" / f"{step_id}.checkpoints.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def blame(capfd: pytest.CaptureFixture[str], *args: str) -> list[dict[str, Any]]:
    res = bar(capfd, "blame", *args, "--json")
    assert res.code == 0, res.err
    lines: list[dict[str, Any]] = res.json()["lines"]
    return lines


# --- the done-when of the checkpoints: each agent's three edits --------------------


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini"])
def test_three_edits_three_checkpoints_rewind_undo_and_blame(
    agent: str, inited: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    wt = worktree(t)
    run_agent(
        inited,
        tmp_path,
        agent,
        "write:notes.txt=first\nedited by the tool\nsecond",
        "echo 'added by the shell' >> notes.txt",
        "write:new.txt=third edit",
    )
    (step,) = ledger(t["id"])
    assert step["checkpoints"] == 3
    assert step["artifacts"]["checkpoints"] == "artifacts/0001.checkpoints.jsonl"
    cps = checkpoint_lines(t["id"], "0001")
    edit_tool = {"claude": "Write", "codex": "apply_patch", "gemini": "write_file"}[agent]
    shell_tool = {"claude": "Bash", "codex": "Bash", "gemini": "run_shell_command"}[agent]
    assert [c["tool"] for c in cps] == [edit_tool, shell_tool, edit_tool]
    assert [c["checkpoint"] for c in cps] == ["0001.1", "0001.2", "0001.3"]
    assert cps[0]["paths"] == ["notes.txt"] and cps[2]["paths"] == ["new.txt"]
    assert cps[1]["command"] == "echo 'added by the shell' >> notes.txt"
    assert cps[1]["decision"] == "allow" and cps[1]["outcome"] == "ran"
    assert all(c["session_id"] for c in cps)
    assert [c["diff_stat"]["file_list"] for c in cps] == [["notes.txt"], ["notes.txt"], ["new.txt"]]
    # chained: each starts where the previous ended, the first at the step's start
    assert cps[0]["snapshot_before"] == step["snapshot_before"]
    assert all(b["snapshot_before"] == a["snapshot"] for a, b in itertools.pairwise(cps))
    assert cps[-1]["snapshot"] == step["snapshot"]  # nothing was left for a residual
    after_third = files_on_disk(wt)

    # rewind to the second edit: exactly its state
    assert bar(capfd, "rollback", "--to", "1.2").code == 0
    assert (
        wt / "notes.txt"
    ).read_text() == "first\nedited by the tool\nsecond\nadded by the shell\n"
    assert not (wt / "new.txt").exists()
    assert files_on_disk(wt) == files_in_commit(inited, cps[1]["snapshot"])
    rollback = ledger(t["id"])[-1]
    assert (rollback["target"], rollback["target_step"]) == ("step", "0001.2")
    # and undo the rewind: the third edit is back
    assert bar(capfd, "rollback", "--to", "1").code == 0
    assert files_on_disk(wt) == after_third

    # every line blamed on the tool call that wrote it, through the rewind and its undo
    got = {(b["text"], b["state"], b["tool"]) for b in blame(capfd, "notes.txt")}
    assert got == {
        ("first", "base", None),
        ("edited by the tool", "0001.1", edit_tool),
        ("second", "base", None),
        ("added by the shell", "0001.2", shell_tool),
    }
    (line,) = blame(capfd, "new.txt")
    assert (line["state"], line["tool"], line["session_id"]) == (
        "0001.3",
        edit_tool,
        cps[2]["session_id"],
    )
    # blame of an earlier state
    assert [b["text"] for b in blame(capfd, "notes.txt", "--at", "1.1")] == [
        "first",
        "edited by the tool",
        "second",
    ]

    # the checkpoints' patches replay in order onto the base, to the step's state
    replayed = _replay_checkpoints(inited, t, cps, tmp_path / "replay")
    assert replayed == files_in_commit(inited, step["snapshot"])


def _replay_checkpoints(
    repo: Path, t: dict[str, Any], cps: list[dict[str, Any]], dest: Path
) -> dict[str, bytes]:
    dest.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "archive", "--format=tar", t["base_commit"]],
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-f", "-"], cwd=dest, input=archive, check=True)
    for cp in cps:
        if cp.get("patch"):
            subprocess.run(
                ["git", "apply", "--binary", str(task_dir(t["id"]) / cp["patch"])],
                cwd=dest,
                check=True,
                capture_output=True,
            )
    return files_on_disk(dest)


def test_checkpoints_of_edits_in_place_ask_git_for_no_tree_shape(
    inited: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the agent's settings bar installs (excluded from every snapshot, so named again at
    # each checkpoint) change no tree: edits in place keep its directories as they are
    new_task(capfd)
    trace = tmp_path / "trace.json"
    monkeypatch.setenv("GIT_TRACE2_EVENT", str(trace))
    run_agent(
        inited,
        tmp_path,
        "claude",
        "write:notes.txt=one",
        "write:notes.txt=two",
        "echo three >> notes.txt",
    )
    monkeypatch.delenv("GIT_TRACE2_EVENT")
    ran = git_commands(trace)
    # (and no commit-tree: bar writes the checkpoints' commits itself, ``bar.git.object_writer``)
    assert "diff-tree" not in ran and "commit-tree" not in ran, " ".join(ran)


def test_the_stamps_checkpoints_hold_are_written_by_the_step(
    inited: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    # each checkpoint keeps its stamps in memory; the step's own snapshot (which here
    # finds nothing new: the last call's checkpoint took it all) writes them: the next
    # command trusts them (they name the step's state and the side index as it is)
    t = new_task(capfd)
    stamps_file = task_dir(t["id"]) / "index.stamps"
    run_agent(inited, tmp_path, "claude", "write:notes.txt=one", "write:notes.txt=two")
    (step,) = ledger(t["id"])
    assert step["checkpoints"] == 2
    written = json.loads(stamps_file.read_text())
    assert written["commit"] == step["snapshot"]
    assert written["index"] == identity(task_dir(t["id"]) / "index")


def test_changes_no_hook_saw_are_the_residual_checkpoint(
    inited: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    run_agent(
        inited,
        tmp_path,
        "claude",
        "write:a.txt=one",
        "silent:sub/agent.txt=unseen",
        "echo two > b.txt",
        "ls",
    )
    (_step,) = ledger(t["id"])
    cps = checkpoint_lines(t["id"], "0001")
    # the silent write happened before the shell command: a residual of its own, taken
    # when the command began, so the command's checkpoint holds only what it did
    assert [c["kind"] for c in cps] == ["tool", "residual", "tool", "tool"]
    assert cps[1]["diff_stat"]["file_list"] == ["sub/agent.txt"]
    assert cps[2]["diff_stat"]["file_list"] == ["b.txt"]
    assert cps[3]["diff_stat"]["files"] == 0 and "patch" not in cps[3]  # ls changed nothing
    assert cps[3]["snapshot"] == cps[3]["snapshot_before"]  # and wrote no snapshot

    # a write after the last hook: the residual closes the step
    run_agent(
        inited, tmp_path, "claude", "write:a.txt=three", "silent:late.txt=after the last hook"
    )
    step2 = ledger(t["id"])[-1]
    cps2 = checkpoint_lines(t["id"], "0002")
    assert [c["kind"] for c in cps2] == ["tool", "residual"]
    assert cps2[1]["diff_stat"]["file_list"] == ["late.txt"]
    assert cps2[1]["snapshot"] == step2["snapshot"] and step2["checkpoints"] == 2
    assert replay_patches(inited, t["id"], t["base_commit"], tmp_path / "steps") == (
        _replay_checkpoints(inited, t, [*cps, *cps2], tmp_path / "checkpoints")
    )
    shown = bar(capfd, "show", "2.2")
    assert shown.code == 0 and "changes no hook reported" in shown.out


def test_every_command_that_takes_a_state_takes_a_checkpoint(
    inited: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    new_task(capfd)
    run_agent(inited, tmp_path, "claude", "write:a.txt=one", "write:a.txt=two", "write:b.txt=b")
    diff = bar(capfd, "diff", "--from", "1.1", "--to", "0001.2")
    assert diff.code == 0 and "-one" in diff.out and "+two" in diff.out and "b.txt" not in diff.out
    shown = bar(capfd, "show", "1.3", "--json")
    assert shown.json()["tool"] == "Write" and "+b" in shown.json()["patch_text"]
    text = bar(capfd, "show", "1").out
    assert "0001.2  Write" in text and "--- checkpoints (3" in text
    log = bar(capfd, "log")
    assert "3 checkpoints (bar log --tools lists them)" in log.out and "0001.1" not in log.out
    tools = bar(capfd, "log", "--tools")
    assert [line.split()[0] for line in tools.out.splitlines()[1:]] == [
        "0001.1",
        "0001.2",
        "0001.3",
    ]
    (rec,) = bar(capfd, "log", "--json").json()
    assert [c["checkpoint"] for c in rec["checkpoint_list"]] == ["0001.1", "0001.2", "0001.3"]

    # apply a checkpoint's state: one commit with exactly its files
    dry = bar(capfd, "apply", "--at", "1.2", "--dry-run")
    assert dry.code == 0 and "a.txt" in dry.out and "b.txt" not in dry.out
    done = bar(capfd, "apply", "--at", "1.2", "--json")
    assert done.code == 0, done.err
    commit = done.json()["commit_sha"]
    assert files_in_commit(inited, commit)["a.txt"] == b"-:two\n"
    assert "b.txt" not in files_in_commit(inited, commit)
    message = subprocess.run(
        ["git", "log", "-1", "--format=%B", commit],
        cwd=inited,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "Bar-Step: 0001.2" in message
    refused = bar(capfd, "apply", "--at", "1.2", "--mode", "merge")
    assert refused.code == 2 and "--at lands a recorded state as one commit" in refused.err

    # names that are not there: one clear sentence each
    missing = bar(capfd, "rollback", "--to", "1.4")
    assert missing.code == 3 and "step 0001 has no checkpoint 4: it has 3" in missing.err
    assert "list them with `bar show 0001`" in missing.err
    assert (
        "no step 0009" in bar(capfd, "show", "9.1").err.lower()
        or bar(capfd, "show", "9.1").code != 0
    )
    assert bar(capfd, "diff", "--to", "1.0").code == 2


def test_a_step_without_an_agent_has_no_checkpoints(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    assert bar(capfd, "run", "--no-pty", "--", "sh", "-c", "echo x > x.txt").code == 0
    (step,) = ledger(t["id"])
    assert "checkpoints" not in step and "checkpoints" not in step["artifacts"]
    for cmd in (("show", "1.1"), ("rollback", "--to", "1.1"), ("diff", "--to", "1.2")):
        res = bar(capfd, *cmd)
        assert res.code == 3, (cmd, res.err)  # not found, as a step that is not there
        assert res.err.startswith("bar: step 0001 has no checkpoints\n"), cmd
        assert "list them" not in res.err and "bar run --agent" in res.err
    assert len(ledger(t["id"])) == 1  # the rollback changed nothing


def test_an_interrupted_session_keeps_its_checkpoints_and_adds_the_residual(
    inited: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """bar killed mid-session: the next command records the step as interrupted, with the
    checkpoints taken until then and what changed after them as the residual."""
    t = new_task(capfd)
    wt = worktree(t)
    proc = subprocess.Popen(
        [
            BAR_EXE,
            "run",
            "--no-pty",
            "--agent",
            "claude",
            "--",
            agent_program(tmp_path, "claude"),
            "write:a.txt=one",
            "echo two > b.txt",
            "silent:c.txt=three",
            f"wait:{tmp_path / 'never'}",
        ],  # (waits for its user: no call, no hook event)
        cwd=inited,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    cps_file = task_dir(t["id"]) / "artifacts" / "0001.checkpoints.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (wt / "c.txt").exists():
        time.sleep(0.05)
    assert (wt / "c.txt").exists(), proc.stderr.read() if proc.stderr else ""
    seen_alive_after(t["id"], wt / "c.txt")  # (a write in the kill's last instant is not
    # the step's, ``bar.step.interrupted``)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert len(cps_file.read_text().splitlines()) == 2
    assert bar(capfd, "run", "--no-pty", "--", "true").code == 0  # records it first
    step, _ = bar(capfd, "log", "--json").json()
    assert step["interrupted"] is True and step["checkpoints"] == 3
    kinds = [c["kind"] for c in step["checkpoint_list"]]
    assert kinds == ["tool", "tool", "residual"]
    assert step["checkpoint_list"][2]["diff_stat"]["file_list"] == ["c.txt"]
    assert step["checkpoint_list"][2]["snapshot"] == step["snapshot"]


# --- property: checkpoints add up to their step, whatever the calls did ----------------

_NAMES = st.sampled_from(["a.txt", "b.txt", "dir/c.txt", "dir/sub/d.txt", "e f.txt"])
_TEXT = st.text(alphabet="xyz \n", min_size=0, max_size=12)
_CALL = st.one_of(
    st.tuples(st.just("write"), _NAMES, _TEXT),
    st.tuples(st.just("shell-append"), _NAMES, _TEXT),
    st.tuples(st.just("shell-remove"), _NAMES, st.just("")),
    st.tuples(st.just("silent"), _NAMES, _TEXT),
    st.tuples(st.just("noop"), st.just(""), st.just("")),
)


def _model_call(files: dict[str, str], call: tuple[str, str, str]) -> None:
    """What a call does to the files, as the fake agent and the shell do it."""
    kind, name, text = call
    if kind == "write":
        files[name] = text + ("\n" if text and not text.endswith("\n") else "")
    elif kind == "silent":
        files[name] = text + "\n"
    elif kind == "shell-append":
        files[name] = files.get(name, "") + text
    elif kind == "shell-remove":
        files.pop(name, None)


def _command(call: tuple[str, str, str]) -> str:
    kind, name, text = call
    quoted = "'" + name + "'"
    if kind == "write":
        return f"write:{name}={text}"
    if kind == "silent":
        return f"silent:{name}={text}"
    if kind == "shell-append":
        return f"mkdir -p \"$(dirname {quoted})\" && printf %s '{text}' >> {quoted}"
    if kind == "shell-remove":
        return f"rm -f {quoted}"
    return "true"


@settings(
    max_examples=int(os.environ.get("BAR_CHECKPOINT_EXAMPLES", "4")),
    deadline=None,
    derandomize=os.environ.get("BAR_CHECKPOINT_RANDOM") != "1",
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(sessions=st.lists(st.lists(_CALL, min_size=1, max_size=6), min_size=1, max_size=2))
def test_checkpoint_patches_replay_in_order_onto_the_base(
    sessions: list[list[tuple[str, str, str]]],
    make_repo: Any,
    tmp_path_factory: pytest.TempPathFactory,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Random sessions of edits, shell commands and writes no hook sees: each checkpoint
    holds exactly the files a model of the calls says existed after its call (edits in
    place included, which the checkpoints learn of from the kernel, not from git), and the
    checkpoints of every step replay in order onto the base to each step's state."""
    work = tmp_path_factory.mktemp("session")
    base = {"a.txt": "base\n", "dir/c.txt": "c\n"}
    repo = make_repo(base, name=str(work / "repo"))
    monkeypatch.setenv("BAR_HOME", str(work / "barhome"))  # one project per example
    monkeypatch.chdir(repo)
    assert bar(capfd, "init").code == 0
    t = new_task(capfd)
    model = dict(base)
    all_cps: list[dict[str, Any]] = []
    for session in sessions:
        run_agent(repo, work, "claude", *map(_command, session))
        step = ledger(t["id"])[-1]
        expected = []
        for call in session:
            _model_call(model, call)
            if call[0] != "silent":  # a call the agent reports: a checkpoint after it
                expected.append({k: b"-:" + v.encode() for k, v in model.items()})
        if not expected:  # no hook reported anything: the step alone records it
            assert "checkpoints" not in step
            continue
        cps = checkpoint_lines(t["id"], step["step_id"])
        assert len(cps) == step["checkpoints"]
        assert cps[0]["snapshot_before"] == step["snapshot_before"]
        assert cps[-1]["snapshot"] == step["snapshot"]
        got = [files_in_commit(repo, c["snapshot"]) for c in cps if c["kind"] == "tool"]
        assert got == expected
        all_cps += cps
    if all(s.get("checkpoints") for s in ledger(t["id"])):
        replayed = _replay_checkpoints(repo, t, all_cps, work / "replay")
        assert replayed == files_in_commit(repo, ledger(t["id"])[-1]["snapshot"])
        assert replayed == files_on_disk(worktree(t))


def test_a_rollback_while_the_session_waits_is_a_checkpoint_of_the_running_step(
    inited: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Between turns, `bar rollback --to` is done by the running step's bar run (the one
    writer of the task's files) and recorded as a checkpoint; while the agent runs a
    command it is refused, and nothing changes."""
    t = new_task(capfd)
    wt = worktree(t)
    flags = tmp_path / "flags"
    flags.mkdir()
    busy = f"touch busy.txt && while [ ! -e {flags}/done ]; do sleep 0.05; done"
    proc = subprocess.Popen(
        [
            BAR_EXE,
            "run",
            "--no-pty",
            "--agent",
            "claude",
            "--",
            agent_program(tmp_path, "claude"),
            "write:a.txt=one",
            "write:a.txt=two",
            busy,
            f"wait:{flags}/go",
            "cat a.txt > seen.txt",
        ],
        cwd=inited,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    cps_file = task_dir(t["id"]) / "artifacts" / "0001.checkpoints.jsonl"

    def wait_for(check: Any) -> None:
        deadline = time.monotonic() + 60
        while not check():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)

    try:
        wait_for(lambda: (wt / "busy.txt").exists())
        refused = bar(capfd, "rollback", "--to", "1.1")
        assert refused.code == 7 and "the agent is running a command" in refused.err
        assert (wt / "a.txt").read_text() == "two\n"
        (flags / "done").touch()
        wait_for(lambda: cps_file.exists() and len(cps_file.read_text().splitlines()) == 3)
        running = bar(capfd, "status", "--json").json()["running"]
        assert (running["step_id"], running["checkpoints"]) == ("0001", 3)
        shown = bar(capfd, "show", "1.3", "--json").json()  # of the running step
        assert shown["tool"] == "Bash" and shown["command"] == busy
        # not --hard under the agent: that waits for the step to end, like any busy task
        assert bar(capfd, "rollback", "--no-wait", "--hard", "--to", "1.1").code == 7
        done = bar(capfd, "rollback", "--to", "1.1")
        assert done.code == 0, done.err
        assert "inside the running step 0001" in done.out and "(checkpoint 0001.4)" in done.out
        assert (wt / "a.txt").read_text() == "one\n"
        (flags / "go").touch()
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, out + err
    assert (wt / "seen.txt").read_text() == "one\n"  # the agent went on from the rewound state
    cps = checkpoint_lines(t["id"], "0001")
    assert [(c["kind"], c.get("tool")) for c in cps] == [
        ("tool", "Write"),
        ("tool", "Write"),
        ("tool", "Bash"),
        ("rollback", "bar rollback"),
        ("tool", "Bash"),
    ]
    assert cps[3]["target"] == "0001.1"
    assert cps[3]["diff_stat"]["file_list"] == ["a.txt", "busy.txt"]  # made after 0001.1
    # undoable like any rollback: back to the state before it
    assert bar(capfd, "rollback", "--to", "1.3").code == 0
    assert (wt / "a.txt").read_text() == "two\n"
    (step, _) = ledger(t["id"])
    assert cps[-1]["snapshot"] == step["snapshot"]


def test_a_background_write_between_calls_is_no_calls_doing(
    inited: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A file written while none of the agent's calls ran (a process it left in the
    background, a subagent that skips hooks) is a residual of its own: the next call's
    checkpoint, and blame, hold only what that call did."""
    t = new_task(capfd)
    run_agent(
        inited,
        tmp_path,
        "claude",
        "write:a.txt=one",
        "silent:bg.txt=from the background",
        "write:b.txt=two",
    )
    cps = checkpoint_lines(t["id"], "0001")
    assert [(c["kind"], c["diff_stat"]["file_list"]) for c in cps] == [
        ("tool", ["a.txt"]),
        ("residual", ["bg.txt"]),
        ("tool", ["b.txt"]),
    ]
    (line,) = bar(capfd, "blame", "bg.txt", "--json").json()["lines"]
    assert line["state"] == "0001.2" and line["kind"] == "residual"
    (line,) = bar(capfd, "blame", "b.txt", "--json").json()["lines"]
    assert line["state"] == "0001.3" and line["tool"] == "Write"
