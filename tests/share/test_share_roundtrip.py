"""Task histories between two machines (docs/sharing.md): a task pushed from one machine is a
read-only copy on the other, which reads it as its own machine does; adopted there, it goes
on and comes back, and every recorded state is the same bytes on both. Over a file path and
through a real ``git daemon``; two pushes at once both land; a push that would drop another
machine's steps is refused."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import files_on_disk
from two_machines import (
    Machine,
    Pair,
    git_daemon,
    machines,
    make_remote,
    pair_of_machines,
    remote_refs,
)


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    with pair_of_machines(tmp_path) as made:
        yield made


def outcomes(result: dict[str, Any]) -> dict[str, str]:
    """Task id -> outcome, from the JSON of ``bar push`` or ``bar fetch``."""
    return {t["task_id"]: t["outcome"] for t in result["tasks"]}


def history(task_id: str) -> str:
    return f"refs/bar/history/{task_id}"


def states(task_id: str) -> str:
    return f"refs/bar/tasks/{task_id}"


def placed(text: str, *machines: Machine) -> str:
    """``text`` with the machines' own directories named, not spelled out (a record says
    where its steps ran; a task's directory is where this machine keeps it)."""
    for machine in machines:
        for path, name in ((machine.project_dir, "<project>"), (machine.repo, "<repo>")):
            text = text.replace(str(path), name)
    return text


# the reading commands a fetched copy answers as its own machine does
READING = [
    ("log",),
    ("log", "--json"),
    ("show", "0001"),
    ("show", "0002"),
    ("show", "0002", "--json"),
    ("diff",),
    ("diff", "--from", "0001", "--to", "0002"),
    ("diff", "--stat"),
    ("blame", "app.txt"),
    ("blame", "app.txt", "--json"),
    ("blame", "app.txt", "--at", "0001"),
]


def test_a_pushed_task_is_a_read_only_copy_there_that_reads_the_same(pair: Pair) -> None:
    a, b = pair.a, pair.b
    tid = a.new_task("fix-login")["id"]
    a.step(tid, "printf 'one\\ntwo\\n' > app.txt; echo made it")
    a.step(tid, "printf 'one\\nTWO\\nthree\\n' > app.txt; echo notes > notes.md; echo again")
    pushed = a.json("push")  # the active task, to origin
    assert pushed["remote"] == "origin" and pushed["url"] == str(pair.remote)
    assert pushed["ok"] is True and pushed["dry_run"] is False
    (row,) = pushed["tasks"]
    assert (row["task_id"], row["outcome"], row["steps"]) == (tid, "pushed", 2)
    assert row["findings"] == [] and row["cut"] == []
    there = remote_refs(pair.remote)
    assert there == {history(tid): row["history"], states(tid): a.ref(states(tid))}
    assert a.ref(history(tid)) == row["history"]

    fetched = b.json("fetch")
    assert [(t["task_id"], t["outcome"], t["steps"]) for t in fetched["tasks"]] == [(tid, "new", 2)]
    (copy,) = b.json("task", "list", "--all")
    assert (copy["id"], copy["name"], copy["state"]) == (tid, "fix-login", "fetched")
    assert copy["origin"]["remote"] == "origin"
    assert copy["origin"]["url"] == str(pair.remote)
    assert copy["origin"]["history"] == row["history"]
    assert copy["steps"] == 2
    listed = b.ok("task", "list").out
    assert "fetched" in listed and "from origin" in listed and "bar task adopt" in listed
    # the copy's states are the same commits; it has no worktree and no branch here
    assert b.ref(states(tid)) == a.ref(states(tid))
    assert not Path(copy["worktree"]).exists()
    assert b.ref(f"refs/heads/{copy['branch']}") is None

    for cmd in READING:
        here = a.ok(*cmd, "-t", tid).out
        there_ = b.ok(*cmd, "-t", tid).out
        if "--json" in cmd:  # paths of each machine's own files aside
            here, there_ = placed(here, a, b), placed(there_, a, b)
        assert there_ == here, cmd
    assert "made it" in b.ok("show", "0001", "-t", tid).out

    # a second fetch brings nothing new
    assert outcomes(b.json("fetch")) == {tid: "up to date"}


CHANGING = [
    ("run", "--", "true"),
    ("run", "--", "sh", "-c", "echo x > app.txt"),
    ("rollback", "--to", "0001"),
    ("rollback", "--to", "base", "--hard"),
    ("undo",),
    ("redo",),
    ("task", "close"),
    ("apply",),
    ("push",),
]


def test_every_changing_command_refuses_a_fetched_copy(pair: Pair) -> None:
    a, b = pair.a, pair.b
    tid = a.new_task("fix-login")["id"]
    a.step(tid, "echo one > app.txt")
    a.step(tid, "echo two >> app.txt")
    a.ok("push")
    b.ok("fetch")
    record = b.record(tid)
    task_json = (b.task_dir(tid) / "task.json").read_bytes()
    refs = {name: b.ref(name) for name in (states(tid), history(tid))}
    for cmd in CHANGING:
        # the task named by its id, by its name, and (the first command) as the active task
        for ref in (["-t", tid], ["-t", "fix-login"]):
            res = b.bar(*cmd[:1], *ref, *cmd[1:]) if cmd[0] != "task" else b.bar(*cmd, tid)
            assert res.code == 1, (cmd, res.out, res.err)
            assert "read-only copy fetched from origin" in res.err, (cmd, res.err)
            assert f"hint: `bar task adopt {tid}`" in res.err, (cmd, res.err)
    assert b.ok("task", "switch", tid)  # a copy may be the one you read
    res = b.bar("run", "--", "true")
    assert res.code == 1 and "read-only copy" in res.err
    res = b.bar("task", "reopen", tid)
    assert res.code == 1 and "read-only copy" in res.err
    # nothing changed
    assert b.record(tid) == record
    assert (b.task_dir(tid) / "task.json").read_bytes() == task_json
    assert {name: b.ref(name) for name in refs} == refs
    assert b.ref(f"refs/heads/{b.task(tid)['branch']}") is None


def round_trip(a: Machine, b: Machine, remote: Path) -> None:
    """a records and pushes; b fetches, adopts, goes on and pushes back; a fetches
    (behind) and adopts: both hold the same record, states and branch."""
    tid = a.new_task("round")["id"]
    a.step(tid, "echo one > f.txt; echo printed one")
    a.step(tid, "echo two >> f.txt; printf 'x\\n' > keep.txt")
    assert outcomes(a.json("push")) == {tid: "pushed"}
    assert outcomes(a.json("push")) == {tid: "up to date"}

    assert outcomes(b.json("fetch")) == {tid: "new"}
    adopted = b.json("task", "adopt", tid)
    assert adopted["task_id"] == tid and adopted["steps"] == 2
    assert adopted["history"] == a.ref(history(tid)) == b.ref(history(tid))
    assert adopted["remote"] == "origin"
    mine = b.task(tid)
    assert mine["state"] == "active" and "origin" not in mine
    assert Path(adopted["worktree"]).is_dir()
    b.worktree_matches_last_state(tid)
    assert b.ref(f"refs/heads/{mine['branch']}") == a.ref(f"refs/heads/{mine['branch']}")

    b.step(tid, "echo three >> f.txt; mkdir -p sub; echo deep > sub/g.txt; rm keep.txt")
    b.step(tid, "printf 'four\\n' >> f.txt; echo printed four")
    pushed = b.json("push", "--task", tid)
    assert outcomes(pushed) == {tid: "pushed"} and pushed["tasks"][0]["steps"] == 4

    # a push before a's fetch cannot know the remote's history continues a's: refused,
    # saying how to bring it here
    before = remote_refs(remote)
    res = a.bar("push", "--task", tid, "--json")
    assert res.code == 6, res.err
    (row,) = res.json()["tasks"]
    assert "`bar fetch origin`" in row["message"] and f"bar task adopt {tid}" in row["message"]
    assert remote_refs(remote) == before

    fetched = a.json("fetch")
    assert outcomes(fetched) == {tid: "behind"}
    assert f"bar task adopt {tid}" in fetched["tasks"][0]["message"]
    # a's own record is not touched by the fetch
    assert len(a.record(tid)["ledger.jsonl"].splitlines()) == 2
    # pushing now says it is behind, and sends nothing
    res = a.bar("push", "--task", tid, "--json")
    assert res.code == 0 and outcomes(res.json()) == {tid: "behind"}, res.err
    assert remote_refs(remote) == before

    adopted = a.json("task", "adopt", tid)
    assert adopted["steps"] == 4

    # every state byte for byte the same on both machines and the remote
    assert a.record(tid) == b.record(tid)
    assert len(a.record(tid)["ledger.jsonl"].splitlines()) == 4
    there = remote_refs(remote)
    for name in (states(tid), history(tid)):
        assert a.ref(name) == b.ref(name) == there[name], name
    branch = f"refs/heads/{a.task(tid)['branch']}"
    assert a.ref(branch) == b.ref(branch)
    a.worktree_matches_last_state(tid)
    b.worktree_matches_last_state(tid)
    worktrees = [Path(m.task(tid)["worktree"]) for m in (a, b)]
    assert files_on_disk(worktrees[0]) == files_on_disk(worktrees[1])
    assert (worktrees[0] / "sub" / "g.txt").read_text() == "deep\n"
    assert not (worktrees[0] / "keep.txt").exists()
    for cmd in (("log",), ("show", "0003"), ("diff",), ("blame", "f.txt")):
        assert a.ok(*cmd, "-t", tid).out == b.ok(*cmd, "-t", tid).out, cmd

    # a goes on from there: a fast-forward, which b sees as the remote being ahead of it
    a.step(tid, "echo five >> f.txt")
    assert outcomes(a.json("push", "--task", tid)) == {tid: "pushed"}
    assert outcomes(b.json("fetch")) == {tid: "behind"}


def test_a_task_goes_to_the_other_machine_and_back_over_a_file_remote(pair: Pair) -> None:
    round_trip(pair.a, pair.b, pair.remote)


def test_a_task_goes_to_the_other_machine_and_back_through_git_daemon(tmp_path: Path) -> None:
    remote = make_remote(tmp_path)
    with git_daemon(tmp_path) as port:
        url = f"git://127.0.0.1:{port}/remote.git"
        with machines(tmp_path, url) as (a, b):
            assert a.git("remote", "get-url", "origin").strip() == url
            round_trip(a, b, remote)
            pushed = a.json("push", "--all")
            assert pushed["url"] == url


def test_two_machines_pushing_different_tasks_at_once_both_land(pair: Pair) -> None:
    a, b = pair.a, pair.b
    ta = a.new_task("from-a")["id"]
    tb = b.new_task("from-b")["id"]
    for n in range(3):
        a.step(ta, f"echo a{n} >> a.txt")
        b.step(tb, f"echo b{n} >> b.txt")
        procs = [a.popen("push", "--json"), b.popen("push", "--json")]
        done = [p.communicate(timeout=120) for p in procs]
        for proc, (_, err) in zip(procs, done, strict=True):
            assert proc.returncode == 0, err.decode()
        results = [json.loads(out) for out, _ in done]
        assert outcomes(results[0]) == {ta: "pushed"}
        assert outcomes(results[1]) == {tb: "pushed"}
        there = remote_refs(pair.remote)
        assert there[history(ta)] == a.ref(history(ta))
        assert there[history(tb)] == b.ref(history(tb))
        assert there[states(ta)] == a.ref(states(ta))
        assert there[states(tb)] == b.ref(states(tb))
    assert outcomes(a.json("fetch")) == {ta: "up to date", tb: "new"}
    assert outcomes(b.json("fetch")) == {ta: "new", tb: "up to date"}
    assert a.record(tb) == b.record(tb) and a.record(ta) == b.record(ta)


def test_a_push_that_would_drop_the_other_machines_steps_is_refused(pair: Pair) -> None:
    a, b = pair.a, pair.b
    tid = a.new_task("both")["id"]
    a.step(tid, "echo one > f.txt")
    a.ok("push")
    b.ok("fetch")
    b.ok("task", "adopt", tid)
    # both machines own the task now, and each records a step
    a.step(tid, "echo from-a >> f.txt")
    b.step(tid, "echo from-b >> f.txt")
    assert outcomes(a.json("push", "--task", tid)) == {tid: "pushed"}
    landed = remote_refs(pair.remote)
    record_b = b.record(tid)

    res = b.bar("push", "--task", tid, "--json")
    assert res.code == 6, res.err
    (row,) = res.json()["tasks"]
    assert row["outcome"] == "diverged"
    assert "bar fetch origin" in row["message"]
    assert remote_refs(pair.remote) == landed
    res = b.bar("push", "--task", tid)
    assert res.code == 6 and f"diverged both ({tid})" in res.err, res.err

    # once b has a's history, the fetch says so, and the push is still refused
    fetched = b.json("fetch")
    assert outcomes(fetched) == {tid: "diverged"}
    res = b.bar("push", "--task", tid, "--json")
    assert res.code == 6 and outcomes(res.json()) == {tid: "diverged"}, res.err
    assert remote_refs(pair.remote) == landed
    # and adopting a's line would drop b's step: refused, nothing changed
    mine_b = b.ref(history(tid))
    res = b.bar("task", "adopt", tid)
    assert res.code == 1 and "adopting would drop" in res.err, res.err
    assert b.record(tid) == record_b and b.ref(history(tid)) == mine_b


def test_a_line_of_main_is_traced_through_a_squash_merge_into_the_fetched_history(
    pair: Pair,
) -> None:
    a, b = pair.a, pair.b
    tid = a.new_task("feat")["id"]
    a.step(tid, "printf 'one\\ntwo\\n' > app.txt")
    a.step(tid, "printf 'one\\nTWO\\nthree\\n' > app.txt")
    a.git("branch", "feature", "main")
    a.ok("apply", "-t", tid, "--target", "feature")
    # the team squash-merges the branch: the message keeps the trailers
    a.git("merge", "--squash", "feature")
    a.git("commit", "-q", "--no-edit")
    assert f"Bar-Task: {tid}" in a.git("log", "-1", "--format=%B", "main")
    a.git("push", "-q", "origin", "main")
    a.ok("push", "--task", tid)

    b.git("fetch", "-q", "origin")
    before = b.json("blame", "--rev", "origin/main", "app.txt")
    assert before["missing_tasks"] == [tid]
    assert [line["state"] for line in before["lines"]] == [None, None, None]
    assert "`bar fetch` brings" in b.bar("blame", "--rev", "origin/main", "app.txt").err

    b.ok("fetch")
    there = b.json("blame", "--rev", "origin/main", "app.txt")
    assert there["missing_tasks"] == []
    assert [(line["text"], line["state"], line["task_id"]) for line in there["lines"]] == [
        ("one", "0001", tid),
        ("TWO", "0002", tid),
        ("three", "0002", tid),
    ]
    here = a.json("blame", "--rev", "main", "app.txt")
    assert there["lines"] == here["lines"]
    assert (
        b.ok("blame", "--rev", "origin/main", "app.txt").out
        == a.ok("blame", "--rev", "main", "app.txt").out
    )


COMMIT = "git -c user.name=Agent -c user.email=agent@example.com commit -q -am"


def test_the_commits_a_hard_rollback_keeps_travel_with_the_history(pair: Pair) -> None:
    a, b = pair.a, pair.b
    task = a.new_task("agent")
    tid = task["id"]
    a.step(tid, f"echo one > f.txt && git add f.txt && {COMMIT} one")
    a.step(tid, f"echo two >> f.txt && {COMMIT} two")
    a.ok("rollback", "-t", tid, "--to", "0001", "--hard")
    kept = a.git("for-each-ref", "--format=%(refname) %(objectname)", f"refs/bar/kept/{tid}/")
    assert kept.strip(), "a hard rollback keeps the head it left"
    assert outcomes(a.json("push", "--task", tid)) == {tid: "pushed"}

    assert outcomes(b.json("fetch")) == {tid: "new"}
    assert b.git("for-each-ref", "--format=%(refname) %(objectname)", "refs/bar/kept/") == kept
    for cmd in (("log",), ("show", "0002"), ("show", "0003"), ("diff", "--from", "0002")):
        assert b.ok(*cmd, "-t", tid).out == a.ok(*cmd, "-t", tid).out, cmd

    b.ok("task", "adopt", tid)
    branch = f"refs/heads/{task['branch']}"
    assert b.ref(branch) == a.ref(branch)
    assert b.git("log", "--format=%s", branch).split() == ["one", "initial"]
    b.worktree_matches_last_state(tid)
    # b can roll back to the state the rollback left behind, and push that
    b.ok("rollback", "-t", tid, "--to", "0002", "--hard")
    assert b.git("log", "--format=%s", branch).split() == ["two", "one", "initial"]
    assert outcomes(b.json("push", "--task", tid)) == {tid: "pushed"}
    assert outcomes(a.json("fetch")) == {tid: "behind"}
    a.ok("task", "adopt", tid)
    assert a.record(tid) == b.record(tid) and a.ref(branch) == b.ref(branch)
    a.worktree_matches_last_state(tid)


def test_push_all_of_many_tasks_reads_the_remote_once_and_sends_them_all(pair: Pair) -> None:
    a, b = pair.a, pair.b
    ids = []
    for n in range(6):
        tid = a.new_task(f"t{n}")["id"]
        a.step(tid, f"echo {n} > f.txt")
        ids.append(tid)
    assert outcomes(a.json("push", "--all")) == dict.fromkeys(ids, "pushed")
    a.step(ids[2], "echo more >> f.txt")
    expected = dict.fromkeys(ids, "up to date") | {ids[2]: "pushed"}
    assert outcomes(a.json("push", "--all")) == expected
    assert outcomes(b.json("fetch")) == dict.fromkeys(ids, "new")
    for tid in ids:
        assert b.record(tid) == a.record(tid)
