"""Nothing leaves the machine unscanned (docs/sharing.md, "Nothing leaves unscanned
(fail-closed)"): a secret in an output or in the task's files, a file the developer's ignore
rules ignore, one sandbox.deny_read hides, one over share.max_blob refuses the push (exit
12), naming file, line and an id that ``--allow`` lets through; an output over
share.max_blob is cut in the pushed copy, never here."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from two_machines import Machine, Pair, git, pair_of_machines, remote_refs

TOKEN = "ghp_" + "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"  # a GitHub token's shape, 36 letters


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    files = {"README.md": "hello\n", ".gitignore": ".env\n*.log\n"}
    with pair_of_machines(tmp_path, files) as made:
        yield made


def refused(machine: Machine, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """``bar push ARGS --json``, which must be refused: the task's row."""
    res = machine.bar("push", *args, "--json", env=env)
    assert res.code == 12, (res.code, res.out, res.err)
    result = res.json()
    assert result["ok"] is False
    (row,) = result["tasks"]
    assert row["outcome"] == "refused"
    return dict(row)


def blob_on_remote(remote: Path, task_id: str, path: str) -> bytes:
    """The file ``path`` of the task's history as the remote holds it, byte for byte."""
    blob = git(remote, "rev-parse", f"refs/bar/history/{task_id}:{path}").strip()
    return subprocess.run(
        ["git", "cat-file", "blob", blob], cwd=remote, capture_output=True, check=True
    ).stdout


def test_a_token_planted_in_an_output_blocks_the_push_until_allowed(pair: Pair) -> None:
    a = pair.a
    tid = a.new_task("t")["id"]
    a.step(tid, "echo line1; echo line2")
    output = a.task_dir(tid) / "artifacts" / "0001.output"
    line = output.read_bytes().count(b"\n") + 1
    with output.open("ab") as out:
        out.write(f"oops {TOKEN}\n".encode())

    res = a.bar("push", "--task", tid)
    assert res.code == 12, res.err
    found = re.search(
        rf"artifacts/0001\.output:{line}\s+secret: a token \(ghp_…, 40 characters\)\s+"
        r"\[--allow ([0-9a-f]{10})\]",
        res.err,
    )
    assert found, res.err
    finding = found.group(1)
    assert f"refused t ({tid}): 1 finding must not leave this machine" in res.err
    assert "bar push --allow ID" in res.err
    assert TOKEN not in res.err + res.out  # the report never shows it
    # nothing arrived
    assert remote_refs(pair.remote) == {}
    assert "refs/bar/" not in a.git("ls-remote", "origin")

    row = refused(a, "--task", tid)
    (f,) = row["findings"]
    assert f == {
        "id": finding,
        "kind": "secret",
        "path": "artifacts/0001.output",
        "line": line,
        "detail": "a token (ghp_…, 40 characters)",
        "in_state": False,
        "step": None,
    }
    # another id lets nothing through; its own does
    refused(a, "--task", tid, "--allow", "0123456789")
    res = a.bar("push", "--task", tid, "--allow", finding, "--json")
    assert res.code == 0, res.err
    assert res.json()["tasks"][0]["outcome"] == "pushed"
    assert TOKEN.encode() in blob_on_remote(pair.remote, tid, "artifacts/0001.output")


def test_the_value_of_a_secret_variable_set_for_the_push_blocks_it(pair: Pair) -> None:
    a = pair.a
    value = "Zk9-plain-looking-value-4711"
    tid = a.new_task("t")["id"]
    # the step ran without the variable: its output holds the value as printed
    a.step(tid, f"echo connecting with {value}")
    assert value.encode() in (a.task_dir(tid) / "artifacts" / "0001.output").read_bytes()

    res = a.bar("push", env={"MY_API_TOKEN": value})
    assert res.code == 12, res.err
    assert re.search(
        r"artifacts/0001\.output:\d+\s+secret: the value of a secret variable", res.err
    )
    assert value not in res.err + res.out
    row = refused(a, env={"MY_API_TOKEN": value})
    # in what the step printed, and in its command as the ledger holds it
    assert sorted((f["kind"], f["path"]) for f in row["findings"]) == [
        ("secret", "artifacts/0001.output"),
        ("secret", "ledger.jsonl"),
    ]
    assert remote_refs(pair.remote) == {}
    # a variable of no secret name is no secret; without it set, the value is just text
    res = a.bar("push", "--dry-run", "--json", env={"MY_GREETING": value})
    assert res.code == 0 and res.json()["tasks"][0]["outcome"] == "would push", res.err


def test_a_token_in_the_tasks_files_is_found_in_its_state_with_its_step(pair: Pair) -> None:
    a = pair.a
    tid = a.new_task("t")["id"]
    a.step(tid, "echo fine > a.txt")
    a.step(tid, f"printf 'x = 1\\ntoken = {TOKEN}\\n' > config.py")
    row = refused(a)
    by_path = {f["path"]: f for f in row["findings"]}
    state = by_path["config.py"]
    assert (state["kind"], state["line"], state["in_state"], state["step"]) == (
        "secret",
        2,
        True,
        "0002",
    )
    res = a.bar("push")
    assert "config.py:2 (in the task's files, step 0002)  secret: a token" in res.err
    assert remote_refs(pair.remote) == {}
    # every finding allowed, it goes
    allow = [x for f in row["findings"] for x in ("--allow", f["id"])]
    assert a.json("push", *allow)["tasks"][0]["outcome"] == "pushed"


def test_a_50_mb_output_is_cut_in_the_pushed_copy_and_whole_here(pair: Pair) -> None:
    a, b = pair.a, pair.b
    tid = a.new_task("big")["id"]
    a.step(tid, "head -c 50000000 /dev/zero | tr '\\0' x", quiet=True)
    output = a.task_dir(tid) / "artifacts" / "0001.output"
    local = output.read_bytes()
    assert len(local) > 50_000_000
    size, digest = len(local), hashlib.sha256(local).hexdigest()
    stat = output.stat()

    pushed = a.json("push")
    (row,) = pushed["tasks"]
    assert row["outcome"] == "pushed"
    assert row["cut"] == [{"path": "artifacts/0001.output", "size": size, "sha256": digest}]
    res = a.ok("push", "--dry-run")  # the text says what was cut too
    assert f"cut in the pushed copy: artifacts/0001.output ({size} bytes" in res.out

    sent = blob_on_remote(pair.remote, tid, "artifacts/0001.output")
    assert len(sent) <= 10_000_000
    assert b"bar: cut" in sent and f"this file is {size} bytes".encode() in sent
    assert sent.startswith(local[:1000]) and sent.endswith(local[-1000:])
    meta = json.loads(blob_on_remote(pair.remote, tid, "history.json"))
    assert meta["cut"] == [{"path": "artifacts/0001.output", "size": size, "sha256": digest}]
    # this machine's file is as it was
    assert output.read_bytes() == local
    assert (output.stat().st_ino, output.stat().st_mtime_ns) == (stat.st_ino, stat.st_mtime_ns)

    # the other machine reads the cut copy
    b.ok("fetch")
    assert (b.task_dir(tid) / "artifacts" / "0001.output").read_bytes() == sent
    assert "bar: cut" in b.ok("show", "0001", "-t", tid).out


def test_a_file_an_agent_unignored_is_refused_and_allowed_by_id(pair: Pair) -> None:
    a = pair.a
    tid = a.new_task("t")["id"]
    # the agent drops .env from .gitignore, so the task's state records it
    a.step(tid, "printf '*.log\\n' > .gitignore; echo API=1 > .env; echo x > kept.log")
    row = refused(a, "--task", tid)
    (f,) = row["findings"]
    assert (f["kind"], f["path"], f["in_state"], f["step"]) == ("ignored", ".env", True, "0001")
    res = a.bar("push", "--task", tid)
    assert re.search(r"\.env \(in the task's files, step 0001\)\s+ignored: ", res.err), res.err
    assert f"[--allow {f['id']}]" in res.err
    assert remote_refs(pair.remote) == {}
    assert a.json("push", "--task", tid, "--allow", f["id"])["tasks"][0]["outcome"] == "pushed"


def test_a_file_of_the_state_over_max_blob_is_too_big_and_outputs_are_cut(pair: Pair) -> None:
    a = pair.a
    a.set_config(share={"max_blob": 1000})
    tid = a.new_task("t")["id"]
    a.step(
        tid, "head -c 3000 /dev/zero | tr '\\0' y > big.bin; head -c 2000 /dev/zero | tr '\\0' z"
    )
    row = refused(a, "--task", tid)
    (f,) = row["findings"]
    assert (f["kind"], f["path"], f["line"], f["in_state"], f["step"]) == (
        "too big",
        "big.bin",
        None,
        True,
        "0001",
    )
    assert "3000 bytes, over share.max_blob (1000)" in f["detail"]
    res = a.bar("push", "--task", tid)
    assert "big.bin (in the task's files, step 0001)  too big: 3000 bytes" in res.err
    assert remote_refs(pair.remote) == {}
    # allowed, it goes whole (a state is never cut); the record's big files are cut
    pushed = a.json("push", "--task", tid, "--allow", f["id"])
    (row,) = pushed["tasks"]
    assert row["outcome"] == "pushed"
    assert {c["path"] for c in row["cut"]} == {"artifacts/0001.output", "artifacts/0001.patch"}
    for c in row["cut"]:
        assert len(blob_on_remote(pair.remote, tid, c["path"])) <= 1000
    state = remote_refs(pair.remote)[f"refs/bar/tasks/{tid}"]
    assert git(pair.remote, "cat-file", "-s", f"{state}:big.bin").strip() == "3000"


def test_a_file_under_deny_read_is_refused_as_hidden(pair: Pair) -> None:
    a = pair.a
    a.set_config(sandbox={"deny_read": [str(a.repo / "private")]})
    tid = a.new_task("t")["id"]
    a.step(tid, "mkdir -p private; echo key > private/key.txt; echo ok > public.txt")
    row = refused(a, "--task", tid)
    (f,) = row["findings"]
    assert (f["kind"], f["path"], f["in_state"]) == ("hidden", "private/key.txt", True)
    assert remote_refs(pair.remote) == {}


def test_a_secret_let_through_once_is_not_asked_for_again_but_a_new_one_is(pair: Pair) -> None:
    a = pair.a
    value, other = "Zk9-plain-looking-value-4711", "Qw7-another-plain-value-0815"
    env = {"MY_API_TOKEN": value, "OTHER_SECRET": other}
    tid = a.new_task("t")["id"]
    a.step(tid, f"echo connecting with {value}")
    row = refused(a, env=env)
    allow = [x for f in row["findings"] for x in ("--allow", f["id"])]
    assert a.json("push", *allow, env=env)["tasks"][0]["outcome"] == "pushed"
    # the ledger grows; the line the remote has already is not news
    a.step(tid, "echo next")
    assert a.json("push", env=env)["tasks"][0]["outcome"] == "pushed"
    # the same value printed again is in a file the remote has not: asked for again; in
    # the ledger, which the remote has with that secret, it is not
    a.step(tid, f"echo again {value}")
    row = refused(a, env=env)
    assert [(f["path"], f["line"]) for f in row["findings"]] == [("artifacts/0003.output", 2)]
    allow = [x for f in row["findings"] for x in ("--allow", f["id"])]
    assert a.json("push", *allow, env=env)["tasks"][0]["outcome"] == "pushed"
    # another secret in the ledger is found
    a.step(tid, f"echo {other} > /dev/null")
    row = refused(a, env=env)
    assert [(f["path"], f["line"]) for f in row["findings"]] == [("ledger.jsonl", 4)]
