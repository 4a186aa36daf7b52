"""Confinement, round two (docs/sandbox.md): bar's own code is never writable from a step (not
where a writable root holds it: an install under /tmp, or named in sandbox.allow_write;
a hard link no rule can make read-only refuses the step), and a step cannot plant what
git believes about the objects (a commit graph, alternates)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import bar, set_config
from test_sandbox import _run, confined
from test_sandbox import inited as inited  # (a fixture)

import bar as bar_package
from bar.errors import CannotConfine
from bar.sandbox import Plan, confine, namespace, own_code


@confined
def test_a_step_cannot_write_bar_even_where_it_may_write(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    package = Path(bar_package.__file__).parent
    script = Path(sys.executable).parent / "bar"
    # every place bar lives made writable by the project's own settings: the kernel must
    # still keep bar's files out of reach (opened for appending: nothing is written
    # should the rule fail)
    set_config(sandbox={"allow_write": [str(package.parent), sys.prefix]})
    assert bar(capfd, "task", "new", "own").code == 0
    refused = ("ermission denied", "Read-only file")
    targets = (package / "__init__.py", script, script.with_name("bar-python"))
    for target in (*targets, Path(sys.prefix) / "pyvenv.cfg"):
        if not target.exists():
            continue
        code, out, _ = _run(capfd, f': >> "{target}"')
        # (refused by Landlock; or, in the step's own /tmp, by a read-only mount). The
        # compiled bar may be running as this runs (another command's): then the kernel
        # refuses the write as "Text file busy" before it asks Landlock, and what a step
        # would do instead, put another file in its place, is what must be refused
        busy = "Text file busy" in out and target == script
        assert code != 0 and (busy or any(r in out for r in refused)), (target, out)
        code, out, _ = _run(
            capfd, f'cp /bin/true "{target}.new" || mv -f "{target}" "{target}.old"'
        )
        assert code != 0 and any(r in out for r in refused), (target, out)
        assert target.exists() and not Path(f"{target}.new").exists()


def test_hard_links_are_found(tmp_path: Path) -> None:
    root = tmp_path / "pkg"
    (root / "sub").mkdir(parents=True)
    (root / "a.py").write_text("a")
    (root / "sub" / "b.py").write_text("b")
    assert own_code.linked([root]) == []
    os.link(root / "sub" / "b.py", tmp_path / "cache-copy")
    assert own_code.linked([root / "sub"]) == [str(root / "sub" / "b.py")]


@confined
def test_a_step_is_refused_while_bars_files_are_hard_links(tmp_path: Path) -> None:
    linked = tmp_path / "site" / "bar"
    linked.mkdir(parents=True)
    (linked / "cli.py").write_text("")
    os.link(linked / "cli.py", tmp_path / "uv-cache-entry")
    confinement = confine(Plan((tmp_path,)))
    with pytest.raises(CannotConfine) as caught:
        own_code.refuse_if_linked(confinement, [linked])
    assert "hard links" in str(caught.value) and "--link-mode=copy" in (caught.value.hint or "")
    assert not confinement.open  # (released)


@confined
def test_a_link_perf_made_is_named_with_how_to_remove_it(tmp_path: Path) -> None:
    """``perf record`` links every binary it sampled into its build-id cache: the refusal
    names that link, not a reinstall that would change nothing."""
    linked = tmp_path / "site" / "bar"
    linked.mkdir(parents=True)
    (linked / "_quick.so").write_bytes(b"\x7fELF")
    cached = Path.home() / ".debug" / str(linked / "_quick.so").lstrip("/") / "4f2a" / "elf"
    cached.parent.mkdir(parents=True)
    os.link(linked / "_quick.so", cached)
    (cached.parent.parent / "other-build").mkdir()  # (an older build: another file)
    confinement = confine(Plan((tmp_path,)))
    with pytest.raises(CannotConfine) as caught:
        own_code.refuse_if_linked(confinement, [linked])
    hint = caught.value.hint or ""
    assert str(cached) in hint and "perf record -N" in hint and "--link-mode" not in hint


@pytest.fixture(params=["quarantine", "shared"])
def objects(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Steps with their objects in quarantine, or (a kernel without namespaces) not."""
    if request.param == "shared":
        monkeypatch.setenv(namespace.UNAVAILABLE_ENV, "1")
    elif namespace.available("/tmp") is not None:
        pytest.skip("this kernel lets no ordinary user make namespaces")
    return str(request.param)


@confined
@pytest.mark.parametrize("name", ["commit-graph", "commit-graphs/graph-x.graph", "alternates"])
def test_a_step_cannot_plant_what_git_believes_about_its_objects(
    name: str, objects: str, inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A forged commit graph makes git show other parents and dates for commits;
    alternates make objects appear from elsewhere: a commit writes neither."""
    assert bar(capfd, "task", "new", "graph").code == 0
    target = inited / ".git" / "objects" / "info" / name
    script = (
        f'mkdir -p "$(dirname "{target}")" 2>&1; echo planted > "{target}" 2>&1; '
        "echo c > c.txt && git add c.txt && git commit -qm c && echo committed"
    )
    code, out, _ = _run(capfd, script)
    assert code == 0, out
    assert "committed" in out and not target.exists(), out


@confined
def test_indexes_git_trusts_about_packs_do_not_outlive_the_step(
    objects: str, inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A multi-pack index says which pack and offset holds an object, and git reads it
    without checking: one a step wrote (it could name other objects' offsets) is moved
    aside, and the repository stays whole."""
    assert bar(capfd, "task", "new", "midx").code == 0
    pack = inited / ".git" / "objects" / "pack"
    script = (
        "echo c > c.txt && git add c.txt && git commit -qm c && git repack -q -d && "
        'git multi-pack-index write && ls "$(git rev-parse --git-common-dir)/objects/pack"'
    )
    code, out, step = _run(capfd, script)
    assert code == 0 and "multi-pack-index" in out, out
    assert not (pack / "multi-pack-index").exists()
    assert step["sandbox"]["objects"] == objects
    if objects == "shared":  # (in quarantine, it stays there)
        assert any(
            e["rule"] == "bar:guard" and "multi-pack-index" in e["matched"]
            for e in step["policy_events"]
        )
    fsck = subprocess.run(["git", "fsck", "--strict"], cwd=inited, capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr


@confined
def test_the_worktrees_own_git_files_name_only_objects_in_the_repository(
    objects: str, inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A reflog entry, a detached HEAD or an index entry naming an object the store does
    not hold breaks ``git fsck`` (the fixture checks it after the test): whether the step
    wrote them by hand or its git wrote them through a repointed ``commondir``."""
    assert bar(capfd, "task", "new", "own").code == 0
    wt = Path(_git_out(inited, "worktree", "list", "--porcelain").split("worktree ")[2].split()[0])
    admin = Path(_git_out(wt, "rev-parse", "--absolute-git-dir"))
    ghost = "3" * 40
    script = (
        f"git update-index --add --info-only --cacheinfo 100644,{ghost},ghost.txt && "
        f"printf '%s %s x <x> 1 +0000\\tplanted\\n' {'0' * 40} {'4' * 40} >> '{admin}/logs/HEAD' && "
        'git init -q --bare "$TMPDIR/fake" && '
        f"printf '%s\\n' \"$TMPDIR/fake\" > '{admin}/commondir' && "
        "git commit -q --allow-empty -m 'into the fake' ; echo done"
    )
    code, out, step = _run(capfd, script)
    assert code == 0 and "done" in out, out
    matched = " ".join(e["matched"] for e in step["policy_events"] if e["rule"] == "bar:guard")
    assert "reflog logs/HEAD" in matched and "index" in matched, matched
    fsck = subprocess.run(
        ["git", "fsck", "--no-dangling"], cwd=inited, capture_output=True, text=True
    )
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr
    # a HEAD detached onto a missing commit is put back on the task branch
    code, out, step = _run(capfd, f"echo {ghost} > '{admin}/HEAD'")
    assert (admin / "HEAD").read_text().startswith("ref: refs/heads/")
    assert bar(capfd, "run", "--no-pty", "--", "true").code == 0


def _git_out(where: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(where), *args], capture_output=True, text=True, check=True
    ).stdout.strip()
