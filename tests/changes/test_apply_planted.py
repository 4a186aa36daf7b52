"""Apply runs nothing an agent could have planted (docs/sandbox.md, "What bar does on the
step's behalf").

A task worktree shares the repository's ``.git/config`` and ``.git/hooks`` with the
developer's checkout, so an agent (without the sandbox) can define a filter, a merge
driver, an fsmonitor command or a hook there, and commit the ``.gitattributes`` that puts
it to use. ``bar apply`` then runs git in the developer's checkout: none of it may run,
and the files are written as git stores them.

Each planted program notes where it ran (its directory, the index git used and the git
command that ran it), so a test can tell apply's own git from the snapshot of the task
worktree that every bar command takes first (``bar.history.snapshot``, see the last test).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    bar,
    files_in_commit,
    files_on_disk,
    ledger,
    new_task,
    run_sh,
    task_dir,
    worktree,
)

from conftest import git


@pytest.fixture
def ran(tmp_path: Path) -> Path:
    """Where a planted program leaves its mark if it is ever run."""
    path = tmp_path / "ran"
    path.mkdir()
    return path


def note(ran: Path, name: str) -> str:
    """Shell that records a run of the planted program ``name``."""
    return f'echo "$PWD|$GIT_INDEX_FILE|$(ps -o args= -p $PPID)" >> {ran}/{name}'


def runs(ran: Path, task: dict[str, Any], *, snapshots: bool = False) -> list[str]:
    """The planted programs that ran, as "name: directory|index|git command"; unless
    ``snapshots``, without those the snapshot of the task worktree ran (git working on
    an index of the task's own, or reading its files back through ``cat-file
    --filters``)."""
    own = task_dir(task["id"]).resolve()
    found = []
    for marker in sorted(ran.iterdir()):
        for line in marker.read_text().splitlines():
            _where, index, command = line.split("|", 2)
            snapshot = (index and Path(index).resolve().is_relative_to(own)) or (
                f"{worktree(task)} cat-file " in command
            )
            if snapshots or not snapshot:
                found.append(f"{marker.name}: {line}")
    return found


def run(capfd: pytest.CaptureFixture[str], script: str) -> None:
    run_sh(capfd, script)


def plant(where: Path, *pairs: tuple[str, str], worktree_only: bool = False) -> None:
    """Set configuration from inside ``where``, as an agent can from its worktree: it
    lands in the repository's shared ``.git/config`` (or, ``worktree_only``, in the
    ``config.worktree`` of the worktree ``where``, read by that worktree alone)."""
    if worktree_only:
        git(where, "config", "extensions.worktreeConfig", "true")
    for key, value in pairs:
        git(where, "config", *(["--worktree"] if worktree_only else []), key, value)


def hooks_of(where: Path) -> Path:
    """The hooks directory every worktree of the repository shares."""
    return Path(git(where, "rev-parse", "--path-format=absolute", "--git-path", "hooks").strip())


def plant_hooks(hooks: Path, ran: Path, names: tuple[str, ...]) -> None:
    hooks.mkdir(exist_ok=True)
    for name in names:
        hook = hooks / name
        hook.write_text(f"#!/bin/sh\n{note(ran, name)}\ncat >/dev/null\n")
        hook.chmod(0o755)


def assert_checkout_is_the_commit(repo: Path) -> None:
    """Every file in the developer's checkout holds the bytes git stores for it."""
    assert files_on_disk(repo) == files_in_commit(repo, "HEAD")


def attributes_applied(capfd: pytest.CaptureFixture[str], attributes: str) -> dict[str, Any]:
    """A task whose first apply brings the agent's ``.gitattributes`` into the developer's
    checkout (nothing is planted yet, so that apply is harmless)."""
    task = new_task(capfd)
    run(capfd, f"printf '{attributes}\\n' > .gitattributes")
    res = bar(capfd, "apply", "-m", "attributes")
    assert res.code == 0, res.err
    return task


def make_stat_dirty(repo: Path, *rels: str) -> None:
    """Change only the timestamps, so git must read these files' content again."""
    for rel in rels:
        os.utime(repo / rel, (1_000_000, 1_000_000))


def test_a_smudge_filter_the_agent_planted_never_runs(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], ran: Path
) -> None:
    t = new_task(capfd)
    plant(
        worktree(t),
        ("filter.x.smudge", f"{note(ran, 'smudge')}; tr a-z A-Z"),
        ("filter.x.clean", "cat"),
        ("filter.x.required", "true"),
    )
    run(capfd, "printf '* filter=x\\n' > .gitattributes; echo lower case > feature.txt")
    res = bar(capfd, "apply")
    assert runs(ran, t) == []
    assert res.code == 0, res.err
    assert (inited_clean / "feature.txt").read_text() == "lower case\n"
    assert_checkout_is_the_commit(inited_clean)
    assert ledger(t["id"])[-1]["kind"] == "apply"


def test_a_clean_filter_and_an_fsmonitor_the_agent_planted_never_run(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], ran: Path
) -> None:
    t = attributes_applied(capfd, "* filter=x")
    run(capfd, "echo two > two.txt; echo changed > README.md")
    plant(
        worktree(t),
        ("filter.x.clean", f"{note(ran, 'clean')}; cat"),
        ("filter.x.required", "true"),
        ("core.fsmonitor", f"{note(ran, 'fsmonitor')}; :"),
    )
    make_stat_dirty(inited_clean, "README.md", ".gitattributes")
    dry = bar(capfd, "apply", "--dry-run")
    assert dry.code == 0, dry.err
    res = bar(capfd, "apply")
    assert runs(ran, t) == []
    assert res.code == 0, res.err
    assert (inited_clean / "README.md").read_text() == "changed\n"
    assert_checkout_is_the_commit(inited_clean)


def test_configuration_planted_for_the_developers_checkout_alone_never_runs(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], ran: Path, tmp_path: Path
) -> None:
    """Planted in the checkout's own ``config.worktree``, which the task worktree never
    reads: a process filter that fails, required, an fsmonitor and a hooks directory."""
    t = attributes_applied(capfd, "* filter=x")
    run(capfd, "echo changed > README.md")
    plant_hooks(tmp_path / "hooks", ran, ("post-index-change", "reference-transaction"))
    plant(
        inited_clean,
        ("filter.x.process", f"sh -c '{note(ran, 'process')}'"),
        ("filter.x.required", "true"),
        ("core.fsmonitor", f"{note(ran, 'fsmonitor')}; :"),
        ("core.hooksPath", str(tmp_path / "hooks")),
        worktree_only=True,
    )
    make_stat_dirty(inited_clean, "README.md", ".gitattributes")
    dry = bar(capfd, "apply", "--dry-run")
    assert dry.code == 0, dry.err
    res = bar(capfd, "apply")
    assert runs(ran, t, snapshots=True) == []
    assert res.code == 0, res.err
    assert (inited_clean / "README.md").read_text() == "changed\n"
    assert_checkout_is_the_commit(inited_clean)


HOOKS = (
    "post-checkout",
    "post-merge",
    "reference-transaction",
    "post-index-change",
    "pre-commit",
    "commit-msg",
    "post-commit",
    "post-rewrite",
    "pre-auto-gc",
)


@pytest.mark.parametrize("mode", ["commit", "merge"])
def test_hooks_the_agent_planted_never_run(
    mode: str, inited_clean: Path, capfd: pytest.CaptureFixture[str], ran: Path
) -> None:
    t = new_task(capfd)
    run(capfd, "echo f > feature.txt; echo changed > README.md")
    plant_hooks(hooks_of(worktree(t)), ran, HOOKS)
    res = bar(capfd, "apply", "--mode", mode)
    assert runs(ran, t) == []
    assert res.code == 0, res.err
    assert (inited_clean / "feature.txt").read_text() == "f\n"
    assert_checkout_is_the_commit(inited_clean)


def test_a_merge_driver_the_agent_planted_never_runs(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], ran: Path
) -> None:
    (inited_clean / "notes.txt").write_text("a\nb\nc\nd\ne\n")
    git(inited_clean, "add", "notes.txt")
    git(inited_clean, "commit", "-qm", "notes")
    t = attributes_applied(capfd, "* merge=x")
    run(capfd, "sed -i 's/^a$/A/' notes.txt")
    (inited_clean / "notes.txt").write_text("a\nb\nc\nd\nE\n")  # the developer's own change
    git(inited_clean, "commit", "-qam", "the developer's edit")
    plant(worktree(t), ("merge.x.driver", f"{note(ran, 'driver')}; exit 0"), ("merge.default", "x"))
    res = bar(capfd, "apply")
    assert runs(ran, t, snapshots=True) == []
    assert res.code == 0, res.err
    assert (inited_clean / "notes.txt").read_text() == "A\nb\nc\nd\nE\n"  # git's own merge
    assert_checkout_is_the_commit(inited_clean)


def test_a_merge_driver_replaced_by_gits_merge_still_reports_a_conflict(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], ran: Path
) -> None:
    t = attributes_applied(capfd, "* merge=x")
    run(capfd, "echo task > README.md")
    (inited_clean / "README.md").write_text("developer\n")
    git(inited_clean, "commit", "-qam", "the developer's edit")
    plant(worktree(t), ("merge.x.driver", f"{note(ran, 'driver')}; cp %B %A"))
    res = bar(capfd, "apply")
    assert runs(ran, t, snapshots=True) == []
    assert res.code == 6 and "README.md" in res.err, res.err
    assert (inited_clean / "README.md").read_text() == "developer\n"


def test_a_worktree_path_the_agent_planted_does_not_redirect_the_apply(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    t = new_task(capfd)
    run(capfd, "echo f > feature.txt")
    plant(worktree(t), ("core.worktree", str(elsewhere)))
    res = bar(capfd, "apply")
    git(inited_clean, "config", "--unset", "core.worktree")
    assert list(elsewhere.iterdir()) == []
    assert res.code == 0, res.err
    assert (inited_clean / "feature.txt").read_text() == "f\n"
    assert_checkout_is_the_commit(inited_clean)


def test_the_snapshot_apply_takes_first_runs_nothing_planted_either(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], ran: Path
) -> None:
    t = new_task(capfd)
    run(capfd, "echo f > feature.txt")
    plant_hooks(hooks_of(worktree(t)), ran, HOOKS)
    plant(worktree(t), ("core.fsmonitor", f"{note(ran, 'fsmonitor')}; :"))
    assert bar(capfd, "apply").code == 0
    assert runs(ran, t, snapshots=True) == []
