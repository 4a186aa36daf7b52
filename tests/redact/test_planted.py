"""Planted secrets: every way a secret reaches bar, and not one byte of it on disk.

Each test plants its own secrets through one channel, runs real ``bar`` processes, and
searches as raw bytes every file under BAR_HOME (names included) and everything in the
repository's .git: loose files, packs, refs, logs, config, and every object decompressed
(``git cat-file --batch-all-objects --batch``). Files that only exist while a step runs
(``running.json``, ``task.lock``) are searched while it runs, and after bar is killed.

Scope: what bar *learns* — values of secret-named variables, ``-e`` pairs, token shapes in
argv, task descriptions, the command's output — never reaches disk. What the command
writes into the worktree (file names and contents) is the task's work: snapshots, patches,
rollback and replay keep it exactly (``test_files_the_step_writes_are_kept_exactly``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest
from helpers import (
    BAR_EXE,
    bar_exe,
    bar_home,
    files_in_commit,
    held_bytes,
    ledger,
    replay_patches,
    set_config,
    task_dir,
    walk,
)

from bar.terminal.cast import read_cast
from conftest import git

# Distinct values, none a part of another. Plain values are only known to be secret by
# the name of the variable that carries them; the others have a well-known token shape.
ENV_VALUE = "plantedEnvValue-a1b2c3d4e5"  # (a) a secret-named environment variable
PAIR_VALUE = "plantedPairValue-f6g7h8i9j0"  # (b) bar run -e NAME=VALUE
ARGV_TOKEN = "sk-plantedArgvToken0123456789abcdef"  # (c) a token shape in argv
DESC_TOKEN = "ghp_plantedDescription0123456789abcdefgh"  # (d) bar task new -d
OUTPUT_VALUE = "plantedOutputValue-k1l2m3n4o5"  # (e) printed in two writes ...
OUTPUT_TOKEN = "xoxb-plantedSplitToken-0123456789"  # (e) ... and a token likewise
PTY_TOKEN = "AKIAPLANTEDPTY012345"  # (f) in a pty step's argv and output
PTY_VALUE = "plantedPtyPairValue-p6q7r8s9"  # (f) an -e value a pty step prints
KILL_ENV = "plantedKilledEnvValue-t0u1v2w3"  # (g) only the killed bar has it
KILL_PAIR = "plantedKilledPairValue-x4y5z6"  # (g)
KILL_TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJwbGFudGVkIjoia2lsbCJ9.plantedKillSignature0123"  # (g)
BLOCK_TOKEN = "glpat-plantedBlockedToken0123456"  # (h) a line the policy blocks
BLOCK_PAIR = "plantedBlockedPairValue-a7b8c9"  # (h)

WORK_TOKEN = "sk-plantedWorkProduct0123456789abcdef"  # the agent's own file: kept


# --- where to look -------------------------------------------------------------------


def leaks(repo: Path, secrets: Iterable[str]) -> list[str]:
    """Every place under BAR_HOME or in the repository's .git that holds a secret."""
    needles = {s: s.encode() for s in secrets}
    found: list[str] = []

    def check(where: str, data: bytes) -> None:
        found.extend(f"{s} in {where}" for s, b in needles.items() if b in data)

    for root in (bar_home(), repo / ".git"):
        for path in walk(root):
            check(f"the name {path}", os.fsencode(path))
            if (data := held_bytes(path)) is not None:
                check(str(path), data)
    for args in (
        ["cat-file", "--batch-all-objects", "--batch"],
        ["for-each-ref", "--format=%(refname) %(objectname)"],
        ["reflog", "show", "--all", "--format=%gs %s"],
        ["config", "--list"],
    ):
        out = subprocess.run(["git", *args], cwd=repo, capture_output=True, check=True).stdout
        check(f"git {' '.join(args)}", out)
    return found


def assert_nowhere(repo: Path, secrets: Sequence[str], when: str) -> None:
    found = leaks(repo, secrets)
    assert not found, f"{when}: planted secrets on disk:\n" + "\n".join(found)


# --- driving bar ---------------------------------------------------------------------


@pytest.fixture
def task(repo: Path) -> dict[str, str]:
    assert bar_exe("init", cwd=repo).code == 0
    git(repo, "add", ".bar")
    git(repo, "commit", "-qm", "bar policy")
    res = bar_exe("task", "new", "planted", "--json", cwd=repo)
    assert res.code == 0, res.err
    data: dict[str, str] = res.json()
    return data


def paused(script: str, gate: Path) -> str:
    """``script``, then wait until the test has looked at the disk."""
    return f"{script}\n: > '{gate}/started'\nwhile [ ! -e '{gate}/release' ]; do sleep 0.05; done"


@contextmanager
def running(repo: Path, gate: Path, *args: str) -> Iterator[subprocess.Popen[bytes]]:
    """``bar ARGS`` in a child process, held inside its step's command for the block
    (which may write ``gate``: a step's /tmp is its own)."""
    gate.mkdir()
    set_config(sandbox={"allow_write": [str(gate)]})
    proc = subprocess.Popen(
        [BAR_EXE, *args],
        cwd=repo,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (gate / "started").exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else b""
            assert time.monotonic() < deadline, "the step never started"
            time.sleep(0.05)
        yield proc
    finally:
        (gate / "release").touch()
        if proc.poll() is None:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def run_held(repo: Path, gate: Path, secrets: Sequence[str], *args: str) -> None:
    """Run ``bar ARGS`` (whose command was made by ``paused``); search the disk while its
    command runs and after it is recorded."""
    with running(repo, gate, *args) as proc:
        assert_nowhere(repo, secrets, "while the step runs")
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else b""
    assert_nowhere(repo, secrets, "after the step")


# --- the channels --------------------------------------------------------------------


def test_a_secret_named_environment_variable(
    repo: Path, task: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLANT_API_TOKEN", ENV_VALUE)
    gate = tmp_path / "gate"
    # the agent's shell expanded the variable: the value is in argv as well
    script = paused(f'echo "$PLANT_API_TOKEN"; echo {ENV_VALUE} >&2; echo a > a.txt', gate)
    run_held(repo, gate, [ENV_VALUE], "run", "--", "sh", "-c", script)
    (step,) = ledger(task["id"])
    assert "***" in step["cmd"][2]
    out = (task_dir(task["id"]) / step["artifacts"]["output"]).read_text()
    assert out.count("***") == 2


def test_b_an_e_pair(repo: Path, task: dict[str, str], tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    script = paused(f'echo "$DEPLOY_TOKEN" {PAIR_VALUE}; echo b > b.txt', gate)
    run_held(
        repo,
        gate,
        [PAIR_VALUE],
        "run",
        "-e",
        f"DEPLOY_TOKEN={PAIR_VALUE}",
        "--",
        "sh",
        "-c",
        script,
    )
    (step,) = ledger(task["id"])
    assert step["env"] == {"DEPLOY_TOKEN": "***"} and "***" in step["cmd"][2]


def test_c_a_token_shape_in_argv(repo: Path, task: dict[str, str], tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    script = paused(f"echo {ARGV_TOKEN}; echo made > made.txt", gate)
    run_held(repo, gate, [ARGV_TOKEN], "run", "--", "sh", "-c", script)
    (step,) = ledger(task["id"])
    assert step["diff_stat"]["file_list"] == ["made.txt"]  # a snapshot commit was made
    message = git(repo, "log", "-1", "--format=%B", f"refs/bar/tasks/{task['id']}")
    assert message.startswith("step 0001: sh -c ") and "***" in message


def test_d_a_token_in_a_task_description(repo: Path, tmp_path: Path) -> None:
    assert bar_exe("init", cwd=repo).code == 0
    git(repo, "add", ".bar")
    git(repo, "commit", "-qm", "bar policy")
    res = bar_exe("task", "new", "described", "-d", f"uses token {DESC_TOKEN}", "--json", cwd=repo)
    assert res.code == 0, res.err
    assert_nowhere(repo, [DESC_TOKEN], "after task new")
    assert res.json()["metadata"]["description"] == "uses token ***"
    assert bar_exe("run", "--", "sh", "-c", "echo work > work.txt", cwd=repo).code == 0
    # the description becomes the body of the commit that lands the work
    assert bar_exe("apply", cwd=repo).code == 0
    assert "uses token ***" in git(repo, "log", "-1", "--format=%B", "main")
    assert_nowhere(repo, [DESC_TOKEN], "after task new, run and apply")


def test_e_output_split_across_two_writes(
    repo: Path, task: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLANT_OUTPUT_SECRET", OUTPUT_VALUE)
    gate = tmp_path / "gate"
    half = len(OUTPUT_TOKEN) // 2
    script = paused(
        'printf %s "$PLANT_OUTPUT_SECRET" | head -c 9; sleep 0.3; '
        'printf "%s\\n" "$PLANT_OUTPUT_SECRET" | tail -c +10; '
        f"printf %s '{OUTPUT_TOKEN[:half]}' >&2; sleep 0.3; "
        f"printf '%s\\n' '{OUTPUT_TOKEN[half:]}' >&2",
        gate,
    )
    run_held(repo, gate, [OUTPUT_VALUE, OUTPUT_TOKEN], "run", "--", "sh", "-c", script)
    (step,) = ledger(task["id"])
    out = (task_dir(task["id"]) / step["artifacts"]["output"]).read_text()
    assert out == "=== STDOUT ===\n***\n=== STDERR ===\n***\n"


def test_f_a_pty_step(repo: Path, task: dict[str, str], tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    script = paused(f'echo {PTY_TOKEN} "$PTY_PAIR_SECRET"; echo f > f.txt', gate)
    pair = f"PTY_PAIR_SECRET={PTY_VALUE}"
    run_held(
        repo, gate, [PTY_TOKEN, PTY_VALUE], "run", "--pty", "-e", pair, "--", "sh", "-c", script
    )
    (step,) = ledger(task["id"])
    assert step["pty"] is True and step["artifacts"]["cast"]
    out = (task_dir(task["id"]) / step["artifacts"]["output"]).read_text()
    assert "*** ***" in out
    # the recording, put back whole from what it holds and the text it refers to
    printed = read_cast(task_dir(task["id"]) / step["artifacts"]["cast"]).output
    assert "*** ***" in printed


def test_g_a_step_killed_mid_run_and_recovered(
    repo: Path, task: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    planted = [KILL_ENV, KILL_PAIR, KILL_TOKEN]
    gate = tmp_path / "gate"
    script = paused(
        f'echo "$KILL_API_TOKEN" "$KILL_DB_PASSWORD" {KILL_ENV} {KILL_PAIR} {KILL_TOKEN}; '
        "echo work > killed.txt",
        gate,
    )
    monkeypatch.setenv("KILL_API_TOKEN", KILL_ENV)
    found: list[str] = []  # every phase is searched, so a failure shows every leak
    # unconfined: a confined command has a session of its own, and this test kills bar's
    # group, command included; run by bar itself (a served command is in the resident's)
    monkeypatch.setenv("BAR_RESIDENT_IDLE", "0")
    with running(
        repo,
        gate,
        "run",
        "--no-sandbox",
        "-e",
        f"KILL_DB_PASSWORD={KILL_PAIR}",
        "--",
        "sh",
        "-c",
        script,
    ) as proc:
        assert (task_dir(task["id"]) / "running.json").exists()
        assert (task_dir(task["id"]) / "task.lock").stat().st_size > 0
        found += [f"while the step runs: {x}" for x in leaks(repo, planted)]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        os.killpg(proc.pid, signal.SIGKILL)  # the orphaned command too
        found += [f"after bar was killed: {x}" for x in leaks(repo, planted)]
    # the next command, which never had those variables, records the step
    monkeypatch.delenv("KILL_API_TOKEN")
    res = bar_exe("run", "--", "true", cwd=repo)
    assert res.code == 0 and "interrupted" in res.err, res.err
    found += [f"after recovery: {x}" for x in leaks(repo, planted)]
    assert not found, "planted secrets on disk:\n" + "\n".join(found)
    assert not [s for s in planted if s in res.err]
    killed, *between, after = ledger(task["id"])
    # (a write of the killed command's within the clock tick of bar's last sign of life is
    # sometimes credited to a hand edit recorded before the next step: the secrets are
    # what is under test here)
    assert all(step["kind"] == "manual" for step in between), between
    assert killed["interrupted"] is True
    made = [f for step in (killed, *between) for f in step["diff_stat"]["file_list"]]
    assert made == ["killed.txt"]
    assert killed["cmd"][2].startswith('echo "$KILL_API_TOKEN" "$KILL_DB_PASSWORD" *** *** ***;')
    assert after["cmd"] == ["true"]
    for step in (killed, *between):
        message = git(repo, "log", "-1", "--format=%B", step["snapshot"])
        assert not [s for s in planted if s in message], message
    if killed["snapshot"] != killed["snapshot_before"]:  # (else its write is the hand's)
        message = git(repo, "log", "-1", "--format=%B", killed["snapshot"])
        assert message.startswith("step 0001 (interrupted): sh -c ")


def test_h_a_blocked_step(repo: Path, task: dict[str, str]) -> None:
    planted = [BLOCK_TOKEN, BLOCK_PAIR]
    line = ["sh", "-c", f"echo {BLOCK_TOKEN} {BLOCK_PAIR} && rm -rf /"]
    pair = f"AWS_SECRET={BLOCK_PAIR}"
    res = bar_exe("run", "-e", pair, "--", *line, cwd=repo)
    assert res.code == 126 and "blocked" in res.err
    (step,) = ledger(task["id"])
    assert step["blocked"] is True and step["cmd"][2] == "echo *** *** && rm -rf /"
    assert_nowhere(repo, planted, "after a blocked step")
    # bar killed just before the ledger line: what it held on disk stays there
    at = "before appending to ledger.jsonl"
    res = bar_exe("run", "-e", pair, "--", *line, cwd=repo, env={"BAR_FAULT_AT": at})
    assert res.code == -signal.SIGKILL, res.err
    assert (task_dir(task["id"]) / "task.lock").stat().st_size > 0
    assert_nowhere(repo, planted, "after bar was killed in a blocked step")


# --- the scope: the work itself is kept ----------------------------------------------


def test_files_the_step_writes_are_kept_exactly(
    repo: Path, task: dict[str, str], tmp_path: Path
) -> None:
    """A file the command names or fills with a token is its work: the snapshot, the
    patch (replayable with git apply) and rollback keep it byte for byte. Only bar's own
    account of the step, the ledger line, says ``***``."""
    name = f"{WORK_TOKEN}.txt"
    assert bar_exe("run", "--", "sh", "-c", f"echo {WORK_TOKEN} > {name}", cwd=repo).code == 0
    assert bar_exe("run", "--", "rm", name, cwd=repo).code == 0
    made, removed = ledger(task["id"])
    assert made["cmd"] == ["sh", "-c", "echo *** > ***.txt"]
    assert made["diff_stat"]["file_list"] == ["***.txt"]
    work = files_in_commit(repo, made["snapshot"])
    assert work[name] == f"-:{WORK_TOKEN}\n".encode()
    patch = (task_dir(task["id"]) / made["artifacts"]["patch"]).read_bytes()
    assert name.encode() in patch and WORK_TOKEN.encode() in patch
    replayed = replay_patches(repo, task["id"], task["base_commit"], tmp_path / "replay")
    assert replayed == files_in_commit(repo, removed["snapshot"])
    assert bar_exe("rollback", "--to", "1", cwd=repo).code == 0
    assert (Path(task["worktree"]) / name).read_text() == f"{WORK_TOKEN}\n"


def test_i_every_export_format(
    repo: Path, task: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What leaves in the field's formats (ATIF, OpenTelemetry, live or written, Agent
    Trace, git-ai notes) holds no planted secret: an agent session told them, plain steps
    printed and were given them, the work was applied and noted."""
    from helpers import run_claude
    from otlp_receiver import receiving

    secrets = [ENV_VALUE, PAIR_VALUE, ARGV_TOKEN]
    monkeypatch.setenv("PLANT_API_TOKEN", ENV_VALUE)
    with receiving() as collector:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url)
        wt = Path(task["worktree"])
        run_claude(wt, tmp_path, f"use {ENV_VALUE}", f"write:notes.txt={ARGV_TOKEN} {ENV_VALUE}")
        script = f'echo "$DEPLOY_TOKEN" {ARGV_TOKEN} {ENV_VALUE} > out.txt'
        pair = f"DEPLOY_TOKEN={PAIR_VALUE}"
        assert bar_exe("run", "-e", pair, "--", "sh", "-c", script, cwd=wt).code == 0
        collector.wait_for(
            lambda c: {"bar run 0001", "bar run 0002"} <= {s.name for s in c.spans()}
        )
        sent = b"".join(r.SerializeToString() for r in collector.requests)
    assert not [s for s in secrets if s.encode() in sent], "a secret went out live"
    assert bar_exe("apply", cwd=repo).code == 0
    for args in (
        ["export", "--format", "atif"],
        ["export", "--format", "otel"],
        ["export", "--format", "agent-trace"],
        ["notes", "export"],
    ):
        res = bar_exe(*args, cwd=repo)
        assert res.code == 0, (args, res.err)
        assert not [s for s in secrets if s in res.out], args
    note = git(repo, "notes", "--ref", "ai", "show", "HEAD")
    assert "s_" in note and not [s for s in secrets if s in note]
    # the work the agent wrote is its own (the file holds the token): only bar's own
    # record of it is searched, the files of the worktree and its commits are the work
    assert ARGV_TOKEN in (wt / "notes.txt").read_text()
