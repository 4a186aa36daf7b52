"""``bar push`` and ``bar fetch`` at their edges (docs/sharing.md): a dry run sends and moves
nothing; ``--all`` is every task of this machine and no fetched copy; a remote is a name git
knows, a URL, or share.remote; a history on the remote that no bar wrote is refused whole,
and never becomes a task."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from two_machines import Machine, Pair, git, machines, make_remote, pair_of_machines, remote_refs


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    with pair_of_machines(tmp_path) as made:
        yield made


def outcomes(result: dict[str, Any]) -> dict[str, str]:
    return {t["task_id"]: t["outcome"] for t in result["tasks"]}


def history(task_id: str) -> str:
    return f"refs/bar/history/{task_id}"


def test_a_dry_run_scans_and_says_what_would_go_and_sends_and_moves_nothing(pair: Pair) -> None:
    a = pair.a
    tid = a.new_task("t")["id"]
    a.step(tid, "echo one > f.txt")
    dry = a.json("push", "--dry-run")
    assert dry["dry_run"] is True and dry["ok"] is True
    (row,) = dry["tasks"]
    assert (row["outcome"], row["steps"], row["findings"]) == ("would push", 1, [])
    assert remote_refs(pair.remote) == {}
    assert a.ref(history(tid)) is None
    said = a.ok("push", "--dry-run").out
    assert f"would push t ({tid}): 1 step to origin" in said

    first = a.json("push")["tasks"][0]["history"]
    a.step(tid, "echo two >> f.txt")
    landed = remote_refs(pair.remote)
    assert outcomes(a.json("push", "--dry-run")) == {tid: "would push"}
    assert a.ref(history(tid)) == first  # the ref here is where the last push left it
    assert remote_refs(pair.remote) == landed
    # a dry run finds what a push would refuse, and refuses the same way
    a.step(tid, "echo " + "ghp_" + "A" * 36 + " > leak.txt")
    res = a.bar("push", "--dry-run", "--json")
    assert res.code == 12 and outcomes(res.json()) == {tid: "refused"}, res.err
    assert a.ref(history(tid)) == first and remote_refs(pair.remote) == landed


def test_all_pushes_every_task_of_this_machine_and_no_fetched_copy(pair: Pair) -> None:
    a, b = pair.a, pair.b
    theirs = b.new_task("theirs")["id"]
    b.step(theirs, "echo b > b.txt")
    b.ok("push")
    a.ok("fetch")
    one = a.new_task("one")["id"]
    a.step(one, "echo 1 > one.txt")
    two = a.new_task("two")["id"]
    a.step(two, "echo 2 > two.txt")
    a.ok("task", "close", "two")  # a closed task is this machine's too

    pushed = a.json("push", "--all")
    assert outcomes(pushed) == {one: "pushed", two: "pushed"}
    refs = remote_refs(pair.remote)
    assert {history(one), history(two), history(theirs)} <= set(refs)
    assert outcomes(a.json("push", "--all")) == {one: "up to date", two: "up to date"}
    assert "up to date on origin" in a.ok("push", "--all").out

    # a fetched copy by name: refused, nothing sent
    res = a.bar("push", "--task", theirs)
    assert res.code == 1, res.err
    assert "read-only copy fetched from origin" in res.err and "bar task adopt" in res.err
    assert remote_refs(pair.remote) == refs
    # --all and --task name different tasks
    res = a.bar("push", "--all", "--task", one)
    assert res.code == 2 and "--all and --task" in res.err
    # a machine with nothing of its own has nothing to push
    with machines(pair.remote.parent, str(pair.remote), ("c",)) as (c,):
        c.ok("fetch")
        res = c.bar("push", "--all")
        assert res.code == 2 and "no task of its own" in res.err, res.err


def test_an_unknown_remote_is_a_usage_error_with_the_known_ones(pair: Pair) -> None:
    a = pair.a
    tid = a.new_task("t")["id"]
    a.step(tid, "echo 1 > f.txt")
    for cmd in (("push", "nowhere"), ("fetch", "nowhere"), ("push", "--all", "nowhere")):
        res = a.bar(*cmd)
        assert res.code == 2, (cmd, res.err)
        assert "no remote named 'nowhere'" in res.err
        assert "hint: known remotes: origin" in res.err
    for cmd in (("push", "--", "-x"), ("fetch", "--", "--upload-pack=touch x")):
        res = a.bar(*cmd)
        assert res.code == 2, (cmd, res.err)
    assert remote_refs(pair.remote) == {}
    # a remote that cannot be reached: git's failure, said with a hint
    res = a.bar("push", f"file://{pair.remote.parent / 'missing.git'}")
    assert res.code == 1 and "hint: check the remote's URL" in res.err, res.err


def test_share_remote_names_where_push_and_fetch_go(pair: Pair, tmp_path: Path) -> None:
    a, b = pair.a, pair.b
    logs = tmp_path / "logs.git"
    git(tmp_path, "init", "-q", "--bare", str(logs))
    a.set_config(share={"remote": str(logs)})  # a URL (here a path) of its own
    tid = a.new_task("t")["id"]
    a.step(tid, "echo 1 > f.txt")
    pushed = a.json("push")
    assert pushed["remote"] == str(logs) and outcomes(pushed) == {tid: "pushed"}
    assert history(tid) in remote_refs(logs)
    assert remote_refs(pair.remote) == {}  # origin untouched
    # REMOTE on the command line wins over share.remote
    assert a.json("push", "origin")["remote"] == "origin"
    assert history(tid) in remote_refs(pair.remote)

    # on b, share.remote names a remote git knows
    b.git("remote", "add", "logs", str(logs))
    b.set_config(share={"remote": "logs"})
    fetched = b.json("fetch")
    assert fetched["remote"] == "logs" and fetched["url"] == str(logs)
    assert outcomes(fetched) == {tid: "new"}
    assert b.task(tid)["origin"]["remote"] == "logs"
    res = b.bar("task", "close", tid)
    assert "read-only copy fetched from logs" in res.err


def _evil_history(machine: Machine, base: str, extra: dict[str, str]) -> str:
    """A commit with the tree of history commit ``base`` and the files ``extra`` added,
    with ``base``'s parents (and ``base`` first): what a hostile remote could hold."""
    top = machine.git("ls-tree", base).splitlines()
    for path, text in extra.items():
        folder, _, name = path.rpartition("/")
        blob = machine.git("hash-object", "-w", "--stdin", input=text.encode()).strip()
        if folder:
            sub = machine.git("mktree", input=f"100644 blob {blob}\t{name}\n".encode()).strip()
            top.append(f"040000 tree {sub}\t{folder}")
        else:
            top.append(f"100644 blob {blob}\t{name}")
    tree = machine.git("mktree", input=("\n".join(top) + "\n").encode()).strip()
    parents = [base, *machine.git("show", "-s", "--format=%P", base).split()]
    args = [x for p in parents for x in ("-p", p)]
    return machine.git("commit-tree", tree, *args, "-m", "not bar's").strip()


def test_a_history_no_bar_wrote_is_broken_and_never_becomes_a_task(pair: Pair) -> None:
    a, b = pair.a, pair.b
    good = a.new_task("good")["id"]
    a.step(good, "echo 1 > f.txt")
    a.ok("push")
    b.ok("fetch")
    copy_before = b.record(good)
    task_json = (b.task_dir(good) / "task.json").read_bytes()
    base = a.ref(history(good))
    assert base is not None

    # a new task id whose history holds a file no record has
    evil = _evil_history(a, base, {"evil/x": "boo\n"})
    a.git("push", "-q", "origin", f"{evil}:refs/bar/history/Evil-123")
    # and the good task's history gone on, fast-forward, with a stray file
    stray = _evil_history(a, base, {"x.sh": "y"})
    a.git("push", "-q", "origin", f"{stray}:{history(good)}")

    res = b.bar("fetch", "--json")
    assert res.code == 1, res.err
    rows = {t["task_id"]: t for t in res.json()["tasks"]}
    assert rows["Evil-123"]["outcome"] == "broken"
    assert "'evil/x'" in rows["Evil-123"]["message"]
    assert rows[good]["outcome"] == "broken" and "'x.sh'" in rows[good]["message"]
    res = b.bar("fetch")
    assert res.code == 1 and "broken   Evil-123:" in res.err, res.err
    # nothing was materialized: no task, no task refs, the copy as it was
    assert not b.task_dir("Evil-123").exists()
    assert [t["id"] for t in b.json("task", "list", "--all")] == [good]
    assert b.ref("refs/bar/tasks/Evil-123") is None
    assert b.record(good) == copy_before
    assert (b.task_dir(good) / "task.json").read_bytes() == task_json
    leftovers = [p.name for p in (b.project_dir / "tasks").iterdir() if p.name != good]
    assert leftovers == []
    assert b.ok("log", "-t", good).out == a.ok("log", "-t", good).out


def test_a_history_with_a_task_json_of_another_task_is_broken(pair: Pair) -> None:
    a, b = pair.a, pair.b
    tid = a.new_task("t")["id"]
    a.step(tid, "echo 1 > f.txt")
    a.ok("push")
    base = a.ref(history(tid))
    assert base is not None
    # the same record under another id: it would overwrite that task's files here
    a.git("push", "-q", "origin", f"{base}:refs/bar/history/Other-12")
    res = b.bar("fetch", "--json")
    assert res.code == 1
    rows = {t["task_id"]: t["outcome"] for t in res.json()["tasks"]}
    assert rows == {"Other-12": "broken", tid: "new"}
    assert not b.task_dir("Other-12").exists()
    # a ref name that is no task id is passed over
    a.git("push", "-q", "origin", f"{base}:refs/bar/history/not-an-id-at-all")
    res = b.bar("fetch", "--json")
    assert "not-an-id-at-all" not in res.out
    assert subprocess.run(["git", "fsck"], cwd=b.repo, capture_output=True).returncode == 0


def test_fetch_from_a_remote_with_no_histories_says_so(tmp_path: Path) -> None:
    remote = make_remote(tmp_path)
    with machines(tmp_path, str(remote), ("solo",)) as (solo,):
        res = solo.ok("fetch")
        assert "has no task histories" in res.out
        assert solo.json("fetch")["tasks"] == []


def test_a_push_the_remote_turns_down_is_rejected_and_remembered_as_not_sent(pair: Pair) -> None:
    a = pair.a
    tid = a.new_task("t")["id"]
    a.step(tid, "echo 1 > f.txt")
    hook = pair.remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'no agents here' >&2\nexit 1\n")
    hook.chmod(0o755)
    res = a.bar("push", "--json")
    assert res.code == 6, res.err
    (row,) = res.json()["tasks"]
    assert row["outcome"] == "rejected" and "pre-receive hook declined" in row["message"]
    assert remote_refs(pair.remote) == {}
    assert a.ref(f"refs/bar/fetched/{tid}/origin") is None
    res = a.bar("push")
    assert res.code == 6 and f"rejected t ({tid}):" in res.err
    hook.unlink()
    assert outcomes(a.json("push")) == {tid: "pushed"}
    assert a.ref(f"refs/bar/fetched/{tid}/origin") == a.ref(history(tid))


def test_fetch_says_where_a_task_of_this_machine_stands(pair: Pair) -> None:
    a = pair.a
    tid = a.new_task("t")["id"]
    a.step(tid, "echo 1 > f.txt")
    a.ok("push")
    assert outcomes(a.json("fetch")) == {tid: "up to date"}
    a.step(tid, "echo 2 >> f.txt")
    fetched = a.json("fetch")
    assert outcomes(fetched) == {tid: "ahead"}
    assert "bar push origin" in fetched["tasks"][0]["message"]
    a.ok("push")
    assert outcomes(a.json("fetch")) == {tid: "up to date"}
    # nothing went on elsewhere: nothing to adopt
    res = a.bar("task", "adopt", tid)
    assert res.code == 3 and "no remote has gone on with it" in res.err, res.err


def test_adopting_a_copy_never_moves_a_branch_of_that_name(pair: Pair) -> None:
    a, b = pair.a, pair.b
    task = a.new_task("t")
    a.step(task["id"], "echo 1 > f.txt")
    a.ok("push")
    b.ok("fetch")
    b.git("branch", task["branch"], "main")
    b.git("commit", "-q", "--allow-empty", "-m", "mine")
    b.git("branch", "-f", task["branch"], "HEAD")
    mine = b.ref(f"refs/heads/{task['branch']}")
    res = b.bar("task", "adopt", task["id"])
    assert res.code == 1 and f"a branch {task['branch']} already exists here" in res.err
    assert b.ref(f"refs/heads/{task['branch']}") == mine
    assert b.task(task["id"])["state"] == "fetched"
    # renamed out of the way, the adoption goes through
    b.git("branch", "-m", task["branch"], "kept")
    assert b.json("task", "adopt", task["id"])["steps"] == 1
    assert b.task(task["id"])["state"] == "active"


def test_adopting_never_drops_unrecorded_edits_of_the_worktree(pair: Pair) -> None:
    a, b = pair.a, pair.b
    tid = a.new_task("t")["id"]
    a.step(tid, "echo 1 > f.txt")
    a.ok("push")
    b.ok("fetch")
    b.ok("task", "adopt", tid)
    b.step(tid, "echo 2 >> f.txt")
    b.ok("push")
    a.ok("fetch")
    worktree = Path(a.task(tid)["worktree"])
    (worktree / "hand.txt").write_text("by hand\n")
    res = a.bar("task", "adopt", tid)
    assert res.code == 5, res.err
    assert "`bar run -- true` records hand edits" in res.err
    assert (worktree / "hand.txt").read_text() == "by hand\n"
    assert len(a.record(tid)["ledger.jsonl"].splitlines()) == 1
    (worktree / "hand.txt").unlink()
    assert a.json("task", "adopt", tid)["steps"] == 2
    assert a.record(tid) == b.record(tid)


def _history_with_meta(machine: Machine, base: str, change: Any) -> str:
    """A child of history commit ``base`` whose history.json is ``change(meta)``, every
    commit its refs name among its parents (as bar writes them)."""
    meta = json.loads(machine.git("cat-file", "blob", f"{base}:history.json"))
    meta = change(meta)
    blob = machine.git(
        "hash-object", "-w", "--stdin", input=(json.dumps(meta) + "\n").encode()
    ).strip()
    top = [
        line if not line.endswith("\thistory.json") else f"100644 blob {blob}\thistory.json"
        for line in machine.git("ls-tree", base).splitlines()
    ]
    tree = machine.git("mktree", input=("\n".join(top) + "\n").encode()).strip()
    parents = list(dict.fromkeys([base, *meta["refs"].values()]))
    args = [x for p in parents for x in ("-p", p)]
    return machine.git("commit-tree", tree, *args, "-m", "history").strip()


def test_a_history_cannot_point_the_refs_of_another_task(pair: Pair) -> None:
    a, b = pair.a, pair.b
    # b's own task keeps a commit (a hard rollback left it)
    own = b.new_task("own")["id"]
    commit = "git -c user.name=A -c user.email=a@example.com commit -q -am"
    b.step(own, f"echo 1 > f.txt && git add f.txt && {commit} one")
    b.step(own, f"echo 2 >> f.txt && {commit} two")
    b.ok("rollback", "-t", own, "--to", "0001", "--hard")
    (kept_line,) = b.git(
        "for-each-ref", "--format=%(refname) %(objectname)", "refs/bar/kept/"
    ).splitlines()
    kept_ref, kept_sha = kept_line.split()
    assert kept_ref.startswith(f"refs/bar/kept/{own}/")

    tid = a.new_task("t")["id"]
    a.step(tid, "echo x > x.txt")
    a.ok("push")
    base = a.ref(history(tid))
    assert base is not None
    main = a.ref("main")
    assert main is not None
    name = kept_ref.removeprefix("refs/bar/")

    def hostile(meta: dict[str, Any]) -> dict[str, Any]:
        meta["refs"][name] = main  # b's task's kept ref, pointed elsewhere
        meta["refs"][f"flow/{own}/impl"] = main
        return meta

    a.git("push", "-q", "origin", f"{_history_with_meta(a, base, hostile)}:{history(tid)}")
    res = b.bar("fetch", "--json")
    assert res.code == 1, res.err
    assert outcomes(res.json()) == {tid: "broken"}
    assert b.ref(kept_ref) == kept_sha
    assert b.ref(f"refs/bar/flow/{own}/impl") is None
    assert not b.task_dir(tid).exists()


def test_a_copy_is_brought_up_to_date_by_the_next_fetch(pair: Pair) -> None:
    a, b = pair.a, pair.b
    tid = a.new_task("t")["id"]
    a.step(tid, "echo 1 > f.txt")
    a.ok("push")
    assert outcomes(b.json("fetch")) == {tid: "new"}
    b.ok("task", "switch", tid)  # the copy read as the active task
    a.step(tid, "echo 2 >> f.txt")
    a.ok("task", "close", tid)
    a.ok("push", "--task", tid)
    fetched = b.json("fetch")
    assert outcomes(fetched) == {tid: "updated"} and fetched["tasks"][0]["steps"] == 2
    assert b.record(tid) == a.record(tid)
    copy = b.task(tid)
    assert copy["state"] == "fetched" and copy["origin"]["history"] == a.ref(history(tid))
    assert b.ok("log").out == a.ok("log", "-t", tid).out
    assert outcomes(b.json("fetch")) == {tid: "up to date"}
