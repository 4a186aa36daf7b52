"""``bar apply --dry-run`` makes the checks the apply makes, and fails as it would."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import bar, commit_files, ledger, new_task, run_sh, worktree

from conftest import git


def test_dry_run_and_apply_agree_on_a_dirty_checkout(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    run_sh(capfd, "echo task > README.md")
    (inited_clean / "README.md").write_text("my own edit\n")
    dry = bar(capfd, "apply", "--dry-run")
    real = bar(capfd, "apply")
    assert dry.code == real.code == 5, dry.out + dry.err + real.err
    # said once, on stderr as the apply says it; stdout's summary says it would be refused
    first = dry.out.splitlines()[0]
    assert "would be refused" in first and "no conflicts" not in first
    assert "it would be updated" not in dry.out and "README.md (" not in dry.out
    assert "would overwrite" not in dry.out and dry.err.count("would overwrite") == 1
    assert dry.err == real.err
    assert "README.md" in real.err and "nothing was changed" in real.err
    as_json = bar(capfd, "apply", "--dry-run", "--json")
    assert as_json.code == 5 and as_json.json()["blocking_paths"] == ["README.md"]
    assert "nothing was changed" in as_json.json()["refusal"]
    assert (inited_clean / "README.md").read_text() == "my own edit\n"
    assert [s["kind"] for s in ledger(t["id"])] == ["run"]
    # clean again: both say yes
    git(inited_clean, "checkout", "README.md")
    dry = bar(capfd, "apply", "--dry-run")
    assert dry.code == 0 and "it would be updated" in dry.out
    assert bar(capfd, "apply").code == 0


def test_dry_run_and_apply_agree_while_another_git_holds_the_checkout(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    new_task(capfd)
    run_sh(capfd, "echo task > new.txt")
    lock = inited_clean / ".git" / "index.lock"
    lock.write_text("")
    dry = bar(capfd, "apply", "--dry-run")
    real = bar(capfd, "apply")
    assert dry.code == real.code == 9, dry.err + real.err
    assert "another git command is running" in dry.err and "would be refused" in dry.out
    assert "another git command" not in dry.out
    lock.unlink()
    assert bar(capfd, "apply", "--dry-run").code == 0


def test_the_dry_run_shows_the_diff_git_shows_of_what_lands(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The dry run's stat and patch are git's `diff --stat -p` of the target to the
    commit the apply then makes: renames, odd names, a binary file, a three-way merge."""
    big = "".join(f"line {i}\n" for i in range(40))
    commit_files(inited_clean, {"big.txt": big, "other.txt": "other\n"}, "two files")
    new_task(capfd)
    run_sh(
        capfd,
        "git mv big.txt renamed.txt && echo more >> renamed.txt; "
        "printf 'x\\n' > \"$(printf 'tab\\tand é.txt')\"; printf '\\0\\1\\2' > bin.dat; "
        "echo s > 'with space.txt'",
    )
    (inited_clean / "other.txt").write_text("changed on main\n")  # the target moves on
    git(inited_clean, "commit", "-qam", "main moves on")
    before = git(inited_clean, "rev-parse", "main").strip()
    dry = bar(capfd, "apply", "--dry-run")
    assert dry.code == 0, dry.err
    assert git(inited_clean, "rev-parse", "main").strip() == before
    assert bar(capfd, "apply").code == 0
    after = git(inited_clean, "rev-parse", "main").strip()
    shown = git(
        inited_clean,
        "-c",
        "color.ui=never",
        "diff",
        "--no-ext-diff",
        "--no-textconv",
        "--stat",
        "-p",
        before,
        after,
        "--",
    )
    assert "renamed.txt" in shown and "Bin" in shown and "\\t" in shown
    assert shown in dry.out
    assert "4 files +3 -0" in dry.out.splitlines()[0], dry.out


def test_a_hand_edit_shows_in_the_dry_run_and_lands_with_the_apply(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Edits made by hand after the last step are part of what an apply lands (recorded
    first as a manual step); its dry run shows them, records nothing."""
    t = new_task(capfd)
    run_sh(capfd, "echo step > step.txt")
    (worktree(t) / "step.txt").write_text("by hand\n")
    (worktree(t) / "hand.txt").write_text("new by hand\n")
    dry = bar(capfd, "apply", "--dry-run")
    assert dry.code == 0 and "+by hand" in dry.out and "+new by hand" in dry.out, dry.out
    assert [s["kind"] for s in ledger(t["id"])] == ["run"]
    assert bar(capfd, "apply").code == 0
    assert [s["kind"] for s in ledger(t["id"])] == ["run", "manual", "apply"]
    assert (inited_clean / "step.txt").read_text() == "by hand\n"
    assert (inited_clean / "hand.txt").read_text() == "new by hand\n"
