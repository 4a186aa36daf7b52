"""``bar undo`` / ``bar redo``: an editor's undo over the steps, recorded as rollback steps,
checked against a list-and-cursor model of what the worktree should hold."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import bar, files_on_disk, init_clean, ledger, new_task, run_sh, worktree
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import git


def test_undo_undo_redo_redo_returns_to_after_the_second_run(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    wt = worktree(t)
    start = files_on_disk(wt)
    run_sh(capfd, "echo one > f.txt")
    after_one = files_on_disk(wt)
    run_sh(capfd, "echo two > f.txt && echo x > g.txt")
    after_two = files_on_disk(wt)

    first = bar(capfd, "undo")
    assert first.code == 0, first.err
    assert "Undid step 0002" in first.out and files_on_disk(wt) == after_one
    assert bar(capfd, "undo").code == 0 and files_on_disk(wt) == start
    again = bar(capfd, "redo")
    assert again.code == 0 and "Redid step 0001" in again.out and files_on_disk(wt) == after_one
    assert bar(capfd, "redo").code == 0 and files_on_disk(wt) == after_two

    steps = ledger(t["id"])
    assert [(s["kind"], s.get("undo_of"), s.get("redo_of")) for s in steps[2:]] == [
        ("rollback", "0002", None),
        ("rollback", "0001", None),
        ("rollback", None, "0001"),
        ("rollback", None, "0002"),
    ]
    log = bar(capfd, "log").out
    assert "undo of step 0002" in log and "redo of step 0001" in log
    nothing = bar(capfd, "redo")
    assert nothing.code == 1 and "nothing to redo" in nothing.err


def test_a_new_step_ends_the_redo_chain(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    run_sh(capfd, "echo one > f.txt")
    run_sh(capfd, "echo two > f.txt")
    assert bar(capfd, "undo").code == 0
    run_sh(capfd, "echo three > h.txt")
    res = bar(capfd, "redo")
    assert res.code == 1
    assert "nothing to redo: step 0004" in res.err and "came after the last undo" in res.err
    assert "hint: " in res.err
    assert (worktree(t) / "h.txt").exists() and len(ledger(t["id"])) == 4


def test_nothing_to_undo_and_no_op_steps_are_passed_over(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    res = bar(capfd, "undo")
    assert res.code == 1 and "nothing to undo" in res.err
    assert bar(capfd, "redo").code == 1
    run_sh(capfd, "echo one > f.txt")
    run_sh(capfd, "true")  # changed nothing: undo skips it
    assert bar(capfd, "undo").code == 0
    assert not (worktree(t) / "f.txt").exists()
    assert ledger(t["id"])[-1]["undo_of"] == "0001"


def test_undo_records_hand_edits_first_and_undoes_them(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    run_sh(capfd, "echo one > f.txt")
    (worktree(t) / "f.txt").write_text("edited by hand\n")
    res = bar(capfd, "undo")
    assert res.code == 0, res.err
    assert [s["kind"] for s in ledger(t["id"])] == ["run", "manual", "rollback"]
    assert ledger(t["id"])[-1]["undo_of"] == "0002"
    assert (worktree(t) / "f.txt").read_text() == "one\n"
    assert bar(capfd, "redo").code == 0
    assert (worktree(t) / "f.txt").read_text() == "edited by hand\n"


def test_dry_run_and_json(inited_clean: Path, capfd: pytest.CaptureFixture[str]) -> None:
    t = new_task(capfd)
    run_sh(capfd, "echo one > f.txt")
    dry = bar(capfd, "undo", "--dry-run")
    assert dry.code == 0 and "A f.txt" not in dry.out and "f.txt" in dry.out
    assert "dry run" in dry.out and len(ledger(t["id"])) == 1
    res = bar(capfd, "undo", "--json")
    data = res.json()
    assert res.code == 0 and data["action"] == "undo" and data["step_id"] == "0001"
    assert data["step"]["undo_of"] == "0001" and data["target"] == "base"
    dry_redo = bar(capfd, "redo", "--dry-run", "--json")
    assert dry_redo.json()["action"] == "redo" and dry_redo.json()["step"] is None
    assert bar(capfd, "undo", "--help").out.count("examples:") == 1


def _predicted(capfd: pytest.CaptureFixture[str], verb: str) -> None:
    """The oracle: ``VERB --dry-run --json`` says what ``VERB --json`` then does."""
    dry = bar(capfd, verb, "--dry-run", "--json")
    real = bar(capfd, verb, "--json")
    assert dry.code == real.code == 0, (dry.err, real.err)
    same = ("action", "step_id", "kind", "target", "target_step", "snapshot", "changes")
    assert {k: dry.json()[k] for k in same} == {k: real.json()[k] for k in same}
    assert real.json()["unrecorded"] == []


def test_dry_run_of_undo_with_hand_edits_says_they_would_be_recorded_and_undone(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    wt = worktree(t)
    run_sh(capfd, "echo one > f.txt && echo keep > k.txt")
    after_run = files_on_disk(wt)
    (wt / "f.txt").write_text("edited by hand\n")
    (wt / "g.txt").write_text("new by hand\n")
    (wt / "k.txt").unlink()
    edited = files_on_disk(wt)
    dry = bar(capfd, "undo", "--dry-run")
    assert dry.code == 0, dry.err
    assert dry.out.splitlines()[:4] == [
        "Your unrecorded changes (3 files) would be recorded as a manual step (0002) and undone:",
        "  M f.txt",
        "  A g.txt",
        "  D k.txt",
    ]
    assert "dry run" in dry.out
    assert len(ledger(t["id"])) == 1 and files_on_disk(wt) == edited  # nothing was changed
    data = bar(capfd, "undo", "--dry-run", "--json").json()
    assert (data["step_id"], data["kind"], data["target_step"]) == ("0002", "manual", "0001")
    assert [(c["status"], c["path"]) for c in data["unrecorded"]] == [
        ("M", "f.txt"),
        ("A", "g.txt"),
        ("D", "k.txt"),
    ]
    assert [(c["status"], c["path"]) for c in data["changes"]] == [
        ("M", "f.txt"),
        ("D", "g.txt"),
        ("A", "k.txt"),
    ]
    _predicted(capfd, "undo")
    assert files_on_disk(wt) == after_run
    assert [s["kind"] for s in ledger(t["id"])] == ["run", "manual", "rollback"]
    _predicted(capfd, "redo")  # without hand edits, the dry run still predicts
    assert files_on_disk(wt) == edited


def test_dry_run_of_redo_with_hand_edits_says_they_would_end_the_redo(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    wt = worktree(t)
    run_sh(capfd, "echo one > f.txt")
    assert bar(capfd, "undo").code == 0
    (wt / "h.txt").write_text("by hand\n")
    dry = bar(capfd, "redo", "--dry-run")
    assert dry.code == 1
    assert "would be nothing to redo" in dry.err and "unrecorded changes (1 file)" in dry.err
    assert "as step 0003" in dry.err and "bar diff --unrecorded" in dry.err
    assert len(ledger(t["id"])) == 2 and (wt / "h.txt").exists()
    real = bar(capfd, "redo")  # as foretold: the hand edits become step 0003, and end it
    assert real.code == 1 and "nothing to redo: step 0003" in real.err
    assert [s["kind"] for s in ledger(t["id"])] == ["run", "rollback", "manual"]


def test_undo_of_a_sync_restores_the_base_and_the_branch(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    run_sh(capfd, "echo mine > mine.txt")
    (inited_clean / "up.txt").write_text("up\n")
    git(inited_clean, "add", "up.txt")
    git(inited_clean, "commit", "-qm", "upstream")
    assert bar(capfd, "task", "sync").code == 0
    res = bar(capfd, "undo")
    assert res.code == 0, res.err
    assert "base is" in res.out
    assert not (worktree(t) / "up.txt").exists()
    assert git(worktree(t), "rev-parse", "HEAD").strip() == t["base_commit"]
    assert bar(capfd, "redo").code == 0
    assert (worktree(t) / "up.txt").exists()
    assert (
        git(worktree(t), "rev-parse", "HEAD").strip()
        == git(inited_clean, "rev-parse", "main").strip()
    )


# --- property: any sequence of run / undo / redo, against a model -------------------

actions = st.lists(st.sampled_from(["run", "run", "undo", "redo"]), min_size=1, max_size=9)


def test_undo_of_a_hard_rollback_moves_the_branch_back_and_redo_forth(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """``rollback --hard`` moved the task branch to the HEAD at its target: its undo puts
    the branch back where it was (it is still where the rollback left it), its redo
    moves it again; a branch someone moved since is left alone."""
    t = new_task(capfd)
    wt = worktree(t)
    run_sh(capfd, "echo one > f.txt")
    run_sh(
        capfd,
        "echo two > f.txt && git add -A && git -c user.name=a -c user.email=a@b commit -qm two",
    )
    committed = git(wt, "rev-parse", "HEAD").strip()
    assert bar(capfd, "rollback", "--hard", "--to", "1").code == 0
    assert git(wt, "rev-parse", "HEAD").strip() == t["base_commit"]
    assert bar(capfd, "undo").code == 0
    assert git(wt, "rev-parse", "HEAD").strip() == committed
    assert (wt / "f.txt").read_text() == "two\n"
    assert bar(capfd, "redo").code == 0
    assert git(wt, "rev-parse", "HEAD").strip() == t["base_commit"]
    assert (wt / "f.txt").read_text() == "one\n"
    git(wt, "commit", "-q", "--allow-empty", "-m", "moved by hand")
    moved = git(wt, "rev-parse", "HEAD").strip()
    assert bar(capfd, "undo").code == 0  # (the redo undone: the branch was moved since)
    assert git(wt, "rev-parse", "HEAD").strip() == moved


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)
@given(seq=actions)
def test_any_sequence_matches_a_list_and_cursor(
    make_repo: object,
    capfd: pytest.CaptureFixture[str],
    seq: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo = make_repo()  # type: ignore[operator]
    monkeypatch.chdir(repo)
    monkeypatch.setenv("BAR_HOME", str(repo.parent / f"home-{repo.name}"))  # one per example
    init_clean(repo, capfd)
    t = new_task(capfd, "p")
    wt = worktree(t)
    # the model: states[0..cursor] are done, states[cursor+1..] can be redone
    states = [files_on_disk(wt)]
    cursor = 0
    for n, action in enumerate(seq):
        if action == "run":
            run_sh(capfd, f"echo {n} > f{n % 3}.txt")
            del states[cursor + 1 :]
            states.append(files_on_disk(wt))
            cursor += 1
            continue
        res = bar(capfd, action)
        possible = cursor > 0 if action == "undo" else cursor < len(states) - 1
        assert res.code == (0 if possible else 1), (seq, n, res.err)
        if possible:
            cursor += -1 if action == "undo" else 1
        assert files_on_disk(wt) == states[cursor], (seq, n)
