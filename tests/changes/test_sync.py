"""``bar task sync``: a task whose base branch moved on is merged onto its tip, and every
state keeps the base it was recorded against. Real git, real runs; plain git's own merge
and rebase are the oracles."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import (
    bar,
    files_in_commit,
    files_on_disk,
    init_clean,
    ledger,
    new_task,
    replay_patches,
    run_sh,
    task_dir,
    worktree,
)

from conftest import git

LINES = "".join(f"line {i}\n" for i in range(1, 11))


@pytest.fixture
def inited(repo: Path, capfd: pytest.CaptureFixture[str]) -> Path:
    (repo / "a.txt").write_text(LINES)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "lines")
    return init_clean(repo, capfd)


def upstream(repo: Path, files: dict[str, str], message: str = "upstream") -> str:
    """Commit ``files`` on main in the developer's checkout: the base branch moves on."""
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD").strip()


def task_json(task_id: str) -> dict[str, object]:
    data: dict[str, object] = json.loads((task_dir(task_id) / "task.json").read_text())
    return data


def tree_files(repo: Path, rev: str) -> dict[str, bytes]:
    return files_in_commit(repo, git(repo, "rev-parse", rev).strip())


def oracle_rebase(repo: Path, base: str, task_files: dict[str, bytes], onto: str) -> str:
    """Plain git: the task's changes as one commit on ``base``, rebased onto ``onto``; the
    resulting tree."""
    scratch = repo.parent / "oracle"
    git(repo, "worktree", "add", "-q", "--detach", str(scratch), base)
    for path in list(files_on_disk(scratch)):
        (scratch / path).unlink()
    for rel, data in task_files.items():
        (scratch / rel).parent.mkdir(parents=True, exist_ok=True)
        (scratch / rel).write_bytes(data.split(b":", 1)[1])
    git(scratch, "add", "-A")
    git(scratch, "commit", "-qm", "task")
    git(scratch, "rebase", "-q", onto)
    tree = git(scratch, "rev-parse", "HEAD^{tree}").strip()
    git(repo, "worktree", "remove", "--force", str(scratch))
    return tree


def test_sync_then_apply_lands_exactly_upstream_plus_the_task(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    old_base = t["base_commit"]
    run_sh(capfd, "sed -i 's/line 2$/line 2 by the task/' a.txt && echo new > task.txt")
    run_sh(capfd, "mkdir -p src && echo code > src/m.py")
    task_state = files_in_commit(inited, ledger(t["id"])[-1]["snapshot"])
    tip = upstream(
        inited,
        {"a.txt": LINES.replace("line 9\n", "line 9 upstream\n"), "up.txt": "from upstream\n"},
    )

    res = bar(capfd, "task", "sync")
    assert res.code == 0, res.err
    assert "Synced task t1 onto main" in res.out
    step = ledger(t["id"])[-1]
    assert step["kind"] == "sync" and step["onto"] == "main"
    assert (step["base_before"], step["base_after"]) == (old_base, tip)
    assert step["conflicts"] == [] and step["artifacts"]["patch"] == "artifacts/0003.patch"
    assert task_json(t["id"])["base_commit"] == tip
    assert task_json(t["id"])["first_base"] == old_base
    expected = oracle_rebase(inited, old_base, task_state, tip)
    assert files_on_disk(worktree(t)) == files_in_commit(inited, expected)
    # the task's changes are measured from the new base: only its own
    diff = bar(capfd, "diff", "--stat")
    assert "task.txt" in diff.out and "up.txt" not in diff.out
    # the task branch followed (no commits of the agent's): git status shows only the task
    assert git(worktree(t), "rev-parse", "HEAD").strip() == tip
    status = git(worktree(t), "status", "--porcelain").split("\n")
    assert sorted(s[3:] for s in status if s) == ["a.txt", "src/", "task.txt"]

    applied = bar(capfd, "apply", "-m", "task work")
    assert applied.code == 0, applied.err
    assert git(inited, "rev-parse", "HEAD^{tree}").strip() == expected
    assert git(inited, "rev-parse", "HEAD^").strip() == tip
    # replaying every patch from the first base still gives the last snapshot
    replayed = replay_patches(inited, t["id"], old_base, inited.parent / "replay")
    assert replayed == files_in_commit(inited, ledger(t["id"])[-2]["snapshot"])


def test_a_conflict_changes_nothing_and_the_apply_hint_points_to_sync(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    run_sh(capfd, "sed -i 's/line 5$/line 5 by the task/' a.txt")
    upstream(inited, {"a.txt": LINES.replace("line 5\n", "line 5 upstream\n")})
    applied = bar(capfd, "apply")
    assert applied.code == 6 and "bar task sync --onto main" in applied.err
    before = files_on_disk(worktree(t))
    steps_before = ledger(t["id"])

    res = bar(capfd, "task", "sync")
    assert res.code == 6, res.out + res.err
    assert "would conflict in: a.txt" in res.err and "--allow-conflicts" in res.err
    assert files_on_disk(worktree(t)) == before and ledger(t["id"]) == steps_before
    assert task_json(t["id"])["base_commit"] == t["base_commit"]
    dry = bar(capfd, "task", "sync", "--dry-run", "--json")
    assert dry.code == 6 and dry.json()["conflicts"] == ["a.txt"]


def test_allow_conflicts_records_markers_and_the_resolution_applies(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    run_sh(capfd, "sed -i 's/line 5$/line 5 by the task/' a.txt")
    tip = upstream(
        inited,
        {
            "a.txt": LINES.replace("line 5\n", "line 5 upstream\n").replace(
                "line 10\n", "line 10 upstream\n"
            )
        },
    )
    res = bar(capfd, "task", "sync", "--allow-conflicts")
    assert res.code == 0, res.err
    assert "conflict markers in: a.txt" in res.out
    text = (worktree(t) / "a.txt").read_text()
    assert "<<<<<<<" in text and "line 5 upstream" in text and "line 5 by the task" in text
    assert "line 10 upstream" in text
    # the markers name the two sides, as a merge in git would, not by their commit ids
    markers = [line for line in text.splitlines() if line[:7] in ("<" * 7, ">" * 7)]
    assert markers == ["<<<<<<< main", ">>>>>>> task t1"]
    assert ledger(t["id"])[-1]["conflicts"] == ["a.txt"]
    assert "conflict markers in 1 file" in bar(capfd, "log").out

    resolved = LINES.replace("line 5\n", "line 5 both\n").replace("line 10\n", "line 10 upstream\n")
    (worktree(t) / "a.txt").write_text(resolved)
    run_sh(capfd, "true")  # records the resolution (as hand edits)
    applied = bar(capfd, "apply", "-m", "resolved")
    assert applied.code == 0, applied.err
    assert (inited / "a.txt").read_text() == resolved
    assert git(inited, "rev-parse", "HEAD^").strip() == tip


def test_apply_refuses_markers_a_sync_left_until_a_step_resolves_them(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    run_sh(capfd, "sed -i 's/line 5$/line 5 by the task/' a.txt && echo mine > mine.txt")
    upstream(inited, {"a.txt": LINES.replace("line 5\n", "line 5 upstream\n")})
    assert bar(capfd, "task", "sync", "--allow-conflicts").code == 0
    main = git(inited, "rev-parse", "main").strip()
    status = bar(capfd, "status", "--json").json()
    assert status["unresolved_conflicts"] == ["a.txt"]
    assert "a.txt still holds the conflict markers of a sync" in bar(capfd, "status").out

    dry = bar(capfd, "apply", "--dry-run")
    real = bar(capfd, "apply", "-m", "with markers")
    assert dry.code == real.code == 6, dry.out + dry.err + real.out + real.err
    assert "no conflicts" not in dry.out
    assert dry.err == real.err
    assert "a.txt still holds the conflict markers" in real.err
    assert 'cd "$(bar task path t1)"' in real.err and "bar run" in real.err
    assert git(inited, "rev-parse", "main").strip() == main  # nothing landed
    assert [s["kind"] for s in ledger(t["id"])] == ["run", "sync"]
    # the state before the sync has no markers: it may land (on a branch at the old base)
    git(inited, "branch", "old", t["base_commit"])
    assert bar(capfd, "apply", "--at", "1", "--target", "old", "-m", "before").code == 0

    # half resolved (the closing marker still there) is still refused
    text = (worktree(t) / "a.txt").read_text()
    (worktree(t) / "a.txt").write_text(text.replace("<<<<<<< ", "(was a marker) "))
    assert bar(capfd, "apply", "--dry-run").code == 6
    (worktree(t) / "a.txt").write_text(LINES.replace("line 5\n", "line 5 both\n"))
    assert bar(capfd, "apply", "--dry-run").code == 0  # unrecorded, but the apply records it
    run_sh(capfd, "true")
    assert bar(capfd, "status", "--json").json()["unresolved_conflicts"] == []
    assert "conflict markers" not in bar(capfd, "status").out
    applied = bar(capfd, "apply", "-m", "resolved")
    assert applied.code == 0, applied.err
    assert "<<<<<<<" not in git(inited, "show", "main:a.txt")


def test_earlier_states_keep_their_base(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    t = new_task(capfd)
    old_base = t["base_commit"]
    run_sh(capfd, "echo mine > mine.txt")
    tip = upstream(inited, {"up.txt": "up\n"})
    assert bar(capfd, "task", "sync").code == 0
    # diff of the pre-sync state: against the base it was recorded on
    diff = bar(capfd, "diff", "--from", "base", "--to", "1", "--stat")
    assert "mine.txt" in diff.out and "up.txt" not in diff.out
    # apply --at the pre-sync state onto a branch still at the old base: its changes only
    git(inited, "branch", "old", old_base)
    applied = bar(capfd, "apply", "--at", "1", "--target", "old", "-m", "at 1")
    assert applied.code == 0, applied.err
    assert tree_files(inited, "old") == {**tree_files(inited, old_base), "mine.txt": b"-:mine\n"}
    # a rollback to it moves the base back with it
    assert bar(capfd, "rollback", "--to", "1").code == 0
    step = ledger(t["id"])[-1]
    assert (step["base_before"], step["base_after"]) == (tip, old_base)
    assert task_json(t["id"])["base_commit"] == old_base
    assert not (worktree(t) / "up.txt").exists()
    assert "up.txt" not in bar(capfd, "diff", "--stat").out
    # and rolling forward to the synced state moves it again
    assert bar(capfd, "rollback", "--to", "2").code == 0
    assert task_json(t["id"])["base_commit"] == tip
    assert (worktree(t) / "up.txt").read_text() == "up\n"


def test_agent_commits_get_a_merge_of_the_tip(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    run_sh(capfd, "echo c > c.txt && git add c.txt && git commit -qm 'agent commit'")
    head = git(worktree(t), "rev-parse", "HEAD").strip()
    tip = upstream(inited, {"up.txt": "up\n"})
    assert bar(capfd, "task", "sync").code == 0
    parents = git(worktree(t), "rev-parse", "HEAD^1", "HEAD^2").split()
    assert parents == [head, tip]
    assert git(worktree(t), "status", "--porcelain") == ""
    assert git(worktree(t), "rev-parse", "HEAD").strip() == ledger(t["id"])[-1]["head"]


def test_up_to_date_and_dry_run_change_nothing(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    run_sh(capfd, "echo mine > mine.txt")
    res = bar(capfd, "task", "sync")
    assert res.code == 0 and "up to date" in res.out and len(ledger(t["id"])) == 1
    upstream(inited, {"up.txt": "up\n"})
    (worktree(t) / "hand.txt").write_text("by hand\n")
    dry = bar(capfd, "task", "sync", "--dry-run")
    assert dry.code == 0 and "add     up.txt" in dry.out and "dry run" in dry.out
    assert len(ledger(t["id"])) == 1 and not (worktree(t) / "up.txt").exists()
    res = bar(capfd, "task", "sync", "--json")
    assert res.code == 0, res.err
    kinds = [s["kind"] for s in ledger(t["id"])]
    assert kinds == ["run", "manual", "sync"]  # the hand edit recorded first
    assert res.json()["step"]["step_id"] == "0003"
    assert (worktree(t) / "hand.txt").read_text() == "by hand\n"


def test_sync_onto_another_branch_and_bad_names(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    git(inited, "checkout", "-qb", "release")
    tip = upstream(inited, {"rel.txt": "r\n"})
    git(inited, "checkout", "-q", "main")
    res = bar(capfd, "task", "sync", "--onto", "release")
    assert res.code == 0, res.err
    assert task_json(t["id"])["base_commit"] == tip
    assert task_json(t["id"])["base_ref"] == "main"
    missing = bar(capfd, "task", "sync", "--onto", "no-such-branch")
    assert missing.code == 3 and "names no branch or commit" in missing.err
    helped = bar(capfd, "task", "sync", "--help")
    assert helped.code == 0 and "examples:" in helped.out


def test_blame_after_a_sync_names_the_sync_for_upstream_lines(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    new_task(capfd)
    run_sh(capfd, "sed -i 's/line 2$/line 2 by the task/' a.txt")
    upstream(inited, {"a.txt": LINES.replace("line 9\n", "line 9 upstream\n")})
    assert bar(capfd, "task", "sync").code == 0
    res = bar(capfd, "blame", "a.txt", "--json")
    assert res.code == 0, res.err
    by_text = {line["text"]: line for line in res.json()["lines"]}
    assert by_text["line 2 by the task"]["state"] == "0001"
    assert by_text["line 9 upstream"]["state"] == "0002"
    assert by_text["line 9 upstream"]["kind"] == "sync"
    assert by_text["line 1"]["state"] == "base"


def test_show_and_rollback_say_how_the_base_moves(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    run_sh(capfd, "echo mine > mine.txt")
    tip = upstream(inited, {"up.txt": "up\n"})
    assert bar(capfd, "task", "sync").code == 0
    shown = bar(capfd, "show", "2").out
    assert "onto      main" in shown and f"{t['base_commit'][:10]} -> {tip[:10]}" in shown
    dry = bar(capfd, "rollback", "--to", "1", "--dry-run")
    assert f"make {t['base_commit'][:10]} the task's base again" in dry.out
    done = bar(capfd, "rollback", "--to", "1")
    assert f"the task's base is {t['base_commit'][:10]} again" in done.out
