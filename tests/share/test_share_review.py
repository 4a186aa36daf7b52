"""``bar review`` of a branch another machine pushed, for a task of this machine that went
on there (``bar fetch`` says *behind*): the review reads the history the fetch brought,
in place, without adopting it, and this machine's task stays as it was. A state no
history here holds is said with what brings it, never with a command that was just run.
Two machines, each its own clone and bar home, sharing through one bare remote."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from two_machines import Pair, pair_of_machines


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    with pair_of_machines(tmp_path) as made:
        yield made


def test_review_reads_what_fetch_brought_of_a_task_that_went_on_elsewhere(pair: Pair) -> None:
    a, b = pair.a, pair.b
    tid = a.new_task("fix-login")["id"]
    a.step(tid, "echo one > app.txt")
    a.ok("push")
    b.ok("fetch")
    b.ok("task", "adopt", tid)
    b.step(tid, "echo two >> app.txt; echo notes > notes.md")
    b.ok("apply", "--task", tid, "--target", "fix-login", "--create", "-m", "Fix login")
    b.ok("push", "--task", tid)
    b.git("push", "-q", "origin", "fix-login")

    a.git("fetch", "-q", "origin")
    (fetched,) = a.json("fetch")["tasks"]
    assert fetched["outcome"] == "behind" and "bar task adopt" in fetched["message"]
    own_record = a.record(tid)
    own_refs = {r: a.ref(r) for r in (f"refs/bar/tasks/{tid}", f"refs/bar/history/{tid}")}

    shown = a.bar("review", "origin/fix-login")
    assert shown.code == 0, shown.err
    assert f"task fix-login ({tid}), as last fetched from origin" in shown.out
    assert "this machine's record of it is behind (steps up to 0001 here)" in shown.out
    assert f"`bar task adopt {tid}` continues it here" in shown.out
    assert "lands step 0002: made by bar apply" in shown.out
    assert "it holds the task's files as that state recorded them" in shown.out
    assert "echo two >> app.txt" in shown.out  # the other machine's step
    assert "not in the record here" not in shown.out and "bar fetch" not in shown.out

    (entry,) = a.json("review", "origin/fix-login")["tasks"]
    assert (entry["here"], entry["record"]) == (True, "fetched")
    assert entry["origin"]["remote"] == "origin"
    assert entry["origin"]["history"] == a.ref(f"refs/bar/fetched/{tid}/origin")
    (landing,) = entry["landings"]
    assert (landing["state"], landing["recorded"], landing["applied"]) == ("0002", True, True)
    assert landing["matches"] is True
    assert [s["step_id"] for s in entry["steps"]] == ["0001", "0002"]

    # nothing of this machine's task changed, and the history read is no task here
    assert a.record(tid) == own_record
    assert {r: a.ref(r) for r in own_refs} == own_refs
    (listed,) = a.json("task", "list", "--all")
    assert listed["id"] == tid and listed["steps"] == 1 and "origin" not in listed
    assert a.ok("doctor").code == 0

    # the other machine lands a step it has not pushed: no history here holds it
    b.step(tid, "echo three > more.txt")
    b.ok("apply", "--task", tid, "--target", "fix-login", "-m", "More")
    b.git("push", "-q", "origin", "fix-login")
    a.git("fetch", "-q", "origin")
    a.ok("fetch")
    unpushed = a.bar("review", "origin/fix-login")
    assert unpushed.code == 0, unpushed.err
    assert "lands step 0004" in unpushed.out
    assert "that state is not in the record here, nor in the history last fetched from origin" in (
        unpushed.out
    )
    assert "sends it with `bar push`, then `bar fetch` here brings it" in unpushed.out
    assert "lands step 0002: made by bar apply" in unpushed.out  # the one it holds

    # once pushed and fetched, the review reads it
    b.ok("push", "--task", tid)
    a.ok("fetch")
    (entry,) = a.json("review", "origin/fix-login")["tasks"]
    assert [x["recorded"] for x in entry["landings"]] == [True, True]
    assert entry["steps"][-1]["step_id"] == "0004"
    assert a.record(tid) == own_record


def test_a_task_never_fetched_is_named_for_bar_fetch(pair: Pair) -> None:
    a, b = pair.a, pair.b
    tid = b.new_task("theirs")["id"]
    b.step(tid, "echo x > x.txt")
    b.ok("apply", "--task", tid, "--target", "theirs", "--create")
    b.git("push", "-q", "origin", "theirs")
    a.git("fetch", "-q", "origin")
    res = a.bar("review", "origin/theirs")
    assert res.code == 3
    assert f"task {tid} is not here" in res.out and "`bar fetch` brings it" in res.out
