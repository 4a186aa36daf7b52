"""Raw bytes (docs/internals/git.md, "Exact bytes where git converts"): a change of git's
conversion inputs with no file touched.

Switching ``core.autocrlf``, adding or removing a ``.gitattributes``, or changing a
filter's configuration changes what ``git add -A`` of a fresh index stores for files
whose stat did not move: the next look must notice it (both modes), and no rollback or
undo may rewrite a file's bytes because of it. A repository's weaker stat check
(``core.trustctime=false``, ``core.checkStat=minimal``) never weakens bar's looks.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    bar,
    init_clean,
    ledger,
    new_task,
    plain_git_tree,
    recorded_tree,
    task_dir,
    worktree,
)

from bar.git import conversions
from conftest import MakeRepo, git


@pytest.fixture(params=["fast", "slow"])
def speed(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways: the speed layer on (the default) and off (``BAR_FAST=0``)."""
    if request.param == "slow":
        monkeypatch.setenv("BAR_FAST", "0")
    return str(request.param)


def _task(
    make_repo: MakeRepo,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    files: dict[str, str | bytes],
    config: dict[str, str] | None = None,
) -> tuple[Path, dict[str, Any], Path]:
    repo = make_repo(files)
    for key, value in (config or {}).items():
        git(repo, "config", key, value)
    monkeypatch.chdir(repo)
    init_clean(repo, capfd)
    task = new_task(capfd)
    wt = worktree(task)
    monkeypatch.chdir(wt)
    return repo, task, wt


def _fresh_tree(wt: Path, tmp: Path) -> str:
    """``helpers.plain_git_tree``, every file then hashed through the attributes of the
    worktree's own files: within one ``git add -A``, git may read a ``.gitattributes``
    HEAD holds and the worktree no longer does, or not, by the order it reads
    directories in; the record follows the worktree."""
    plain_git_tree(wt, tmp)
    env = {**os.environ, "GIT_INDEX_FILE": str(tmp / "oracle-index")}
    subprocess.run(["git", "add", "--renormalize", "."], cwd=wt, env=env, check=True)
    return subprocess.run(
        ["git", "write-tree"], cwd=wt, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


def _look(capfd: pytest.CaptureFixture[str]) -> None:
    """A command that records hand edits first."""
    res = bar(capfd, "run", "--", "true")
    assert res.code == 0, res.err


def _status_dirty(capfd: pytest.CaptureFixture[str]) -> bool:
    res = bar(capfd, "status", "--json")
    assert res.code == 0, res.err
    return bool(res.json()["unrecorded_changes"])


def _round_trip(capfd: pytest.CaptureFixture[str], wt: Path, expected: dict[str, bytes]) -> None:
    """rollback to base then undo: every file comes back byte for byte."""
    res = bar(capfd, "rollback", "--to", "base")
    assert res.code == 0, res.err
    res = bar(capfd, "undo")
    assert res.code == 0, res.err
    for rel, data in expected.items():
        assert (wt / rel).read_bytes() == data, rel
    assert not _status_dirty(capfd)


@pytest.mark.parametrize("switch", ["remove_attributes", "autocrlf_off", "add_text_auto"])
def test_a_conversion_switched_before_the_tasks_first_look_is_recorded(
    switch: str,
    speed: str,
    make_repo: MakeRepo,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """The conversions are noted when the task's side index is made, not at its first
    look: a switch between the two (no file touched, the stat cache as git's checkout
    left it) is a change like any other. A file the checkout wrote with CRLF under
    ``core.autocrlf``, or LF in a repository whose blob holds CRLF."""
    files: dict[str, str | bytes] = {"a.txt": "a\n", "d/.gitignore": "build/\n*.log\n"}
    config = {}
    if switch == "remove_attributes":
        files[".gitattributes"] = "* text=auto\n"
    elif switch == "autocrlf_off":
        config["core.autocrlf"] = "true"
    else:
        files["crlf.txt"] = b"one\r\ntwo\r\n"
    repo, task, wt = _task(make_repo, capfd, monkeypatch, files, config)
    if switch == "remove_attributes":
        (wt / ".gitattributes").unlink()
    elif switch == "autocrlf_off":
        git(repo, "config", "core.autocrlf", "false")
    else:
        (wt / ".gitattributes").write_text("* text=auto\n")
    expected = {rel: (wt / rel).read_bytes() for rel in files if (wt / rel).exists()}
    # (whether git's stat cache trusts the checkout's entries depends on the second the
    # checkout ended in: what bar noted says it moved, whatever the clock)
    index = task_dir(str(task["id"])) / "index"
    assert conversions.moved(wt, index) or switch != "autocrlf_off"
    _look(capfd)
    assert recorded_tree(repo, task) == _fresh_tree(wt, tmp_path)
    _round_trip(capfd, wt, expected)


@pytest.mark.parametrize("switch", ["remove_attributes", "autocrlf_off", "add_text_auto"])
def test_a_conversion_switched_with_no_file_touched_is_recorded(
    switch: str,
    speed: str,
    make_repo: MakeRepo,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    files: dict[str, str | bytes] = {"a.txt": "a\n"}
    config = {}
    if switch == "remove_attributes":
        files[".gitattributes"] = "* text=auto\n"
    elif switch == "autocrlf_off":
        config["core.autocrlf"] = "true"
    repo, task, wt = _task(make_repo, capfd, monkeypatch, files, config)
    crlf = b"one\r\ntwo\r\n"
    res = bar(capfd, "run", "--", "sh", "-c", "printf 'one\\r\\ntwo\\r\\n' > f.txt")
    assert res.code == 0, res.err
    assert recorded_tree(repo, task) == _fresh_tree(wt, tmp_path)
    _look(capfd)  # (the stamps settle)
    if switch == "remove_attributes":
        (wt / ".gitattributes").unlink()
    elif switch == "autocrlf_off":
        git(repo, "config", "core.autocrlf", "false")
    else:
        (wt / ".gitattributes").write_text("* text=auto\n")
    assert _status_dirty(capfd)
    _look(capfd)
    assert ledger(str(task["id"]))[-2]["kind"] == "manual"
    assert recorded_tree(repo, task) == _fresh_tree(wt, tmp_path)
    assert (wt / "f.txt").read_bytes() == crlf
    _round_trip(capfd, wt, {"f.txt": crlf, "a.txt": (wt / "a.txt").read_bytes()})
    assert recorded_tree(repo, task) == _fresh_tree(wt, tmp_path)


@pytest.mark.parametrize(
    ("before", "after"), [("true", "false"), ("false", "true"), ("true", "input")]
)
def test_a_state_comes_back_with_its_bytes_whatever_the_configuration_says_now(
    before: str,
    after: str,
    speed: str,
    make_repo: MakeRepo,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """A state recorded under one ``core.autocrlf`` is rolled back to under another: git's
    checkout of its files would write other line endings, so the restore checks them out
    by the configuration the state was recorded with (its raw parent names it), and
    every file comes back byte for byte; the undo too. Files the base holds (checked out
    by git), files a step wrote, deep ones, many, a name that is not UTF-8."""
    base = {
        "a.txt": "a\n",
        "d/e/f/deep.txt": "deep\n",
        **{f"m/{n}.txt": f"{n}\n" for n in range(20)},
    }
    repo, task, wt = _task(make_repo, capfd, monkeypatch, base, {"core.autocrlf": before})
    script = "mkdir -p x/y; printf 'lf\\n' > x/y/lf.txt; printf 'crlf\\r\\n' > crlf.txt"
    script += "; printf 'odd\\n' > $(printf 'caf\\351.txt')"
    assert bar(capfd, "run", "--", "sh", "-c", script).code == 0
    state = {p: p.read_bytes() for p in wt.rglob("*") if p.is_file() and ".git" not in p.parts}
    assert bar(capfd, "run", "--", "sh", "-c", "printf more > more.txt").code == 0
    git(repo, "config", "core.autocrlf", after)
    _look(capfd)
    assert recorded_tree(repo, task) == _fresh_tree(wt, tmp_path)
    now = {p: p.read_bytes() for p in wt.rglob("*") if p.is_file() and ".git" not in p.parts}
    first = ledger(str(task["id"]))[0]["step_id"]
    res = bar(capfd, "rollback", "--to", first)
    assert res.code == 0, res.err
    for path, data in state.items():
        assert path.read_bytes() == data, path
    assert not (wt / "more.txt").exists()
    assert recorded_tree(repo, task) == _fresh_tree(wt, tmp_path)
    res = bar(capfd, "verify", "--step", first)  # (compared by the state's configuration)
    assert res.code == 0, res.out + res.err
    assert bar(capfd, "verify").code == 0
    res = bar(capfd, "undo")
    assert res.code == 0, res.err
    for path, data in now.items():
        assert path.read_bytes() == data, path
    assert not _status_dirty(capfd)
    assert recorded_tree(repo, task) == _fresh_tree(wt, tmp_path)


@pytest.mark.parametrize("after", ["true", "input"])
def test_the_base_comes_back_with_its_bytes_after_a_conversion_is_switched_on(
    after: str,
    speed: str,
    make_repo: MakeRepo,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """The task's base was checked out where git converted nothing; ``core.autocrlf`` is
    switched on by hand since. A rollback to the base writes its files as they were
    checked out (LF), not by the configuration of now (CRLF): neither the files the
    rollback changes nor those whose raw bytes only the state of now carried."""
    base = {".gitignore": "build/\n", "a.txt": "a\n", "d/e/f/deep.txt": "deep\n"}
    repo, task, wt = _task(make_repo, capfd, monkeypatch, base)
    state = {p: p.read_bytes() for p in wt.rglob("*") if p.is_file() and ".git" not in p.parts}
    script = "printf 'new\\n' > new.txt; printf 'changed\\n' > a.txt"
    assert bar(capfd, "run", "--", "sh", "-c", script).code == 0
    git(repo, "config", "core.autocrlf", after)
    with (wt / ".gitignore").open("ab") as f:
        f.write(b"dir/\n")
    _look(capfd)
    now = {p: p.read_bytes() for p in wt.rglob("*") if p.is_file() and ".git" not in p.parts}
    res = bar(capfd, "rollback", "--to", "base")
    assert res.code == 0, res.err
    for path, data in state.items():
        assert path.read_bytes() == data, path
    assert not (wt / "new.txt").exists()
    assert recorded_tree(repo, task) == _fresh_tree(wt, tmp_path)
    assert not _status_dirty(capfd)
    res = bar(capfd, "undo")
    assert res.code == 0, res.err
    for path, data in now.items():
        assert path.read_bytes() == data, path
    assert not _status_dirty(capfd)


@pytest.mark.parametrize("to", ["step", "same tree"])
def test_a_file_whose_blob_did_not_change_comes_back_with_the_states_line_endings(
    to: str,
    speed: str,
    make_repo: MakeRepo,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Recorded under ``core.autocrlf=true`` (git's checkout wrote ``a.txt`` CRLF); then,
    by hand, ``autocrlf=input`` and ``a.txt`` rewritten LF: git stores the same blob, so
    the trees agree on it, and only its bytes differ. A rollback to the state recorded
    under ``true`` writes them as that state held them (CRLF), whether other files
    differ between the two states or none does."""
    repo, task, wt = _task(
        make_repo,
        capfd,
        monkeypatch,
        {"a.txt": "a\nb\n", "k.txt": "k\n"},
        {"core.autocrlf": "true"},
    )
    assert (wt / "a.txt").read_bytes() == b"a\r\nb\r\n"
    assert bar(capfd, "run", "--", "true").code == 0
    target = ledger(str(task["id"]))[-1]["step_id"]
    git(repo, "config", "core.autocrlf", "input")
    (wt / "a.txt").write_bytes(b"a\nb\n")
    if to == "step":
        (wt / "new.txt").write_bytes(b"new\n")
    _look(capfd)
    res = bar(capfd, "rollback", "--to", target)
    assert res.code == 0, res.err
    assert (wt / "a.txt").read_bytes() == b"a\r\nb\r\n"
    assert (wt / "k.txt").read_bytes() == b"k\r\n"
    assert not (wt / "new.txt").exists()
    res = bar(capfd, "undo")
    assert res.code == 0, res.err
    assert (wt / "a.txt").read_bytes() == b"a\nb\n"


def test_close_and_reopen_keep_the_bytes_and_credit_nothing_to_the_developer(
    speed: str,
    make_repo: MakeRepo,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    repo, task, wt = _task(
        make_repo, capfd, monkeypatch, {"a.txt": "a\n"}, {"core.autocrlf": "true"}
    )
    assert bar(capfd, "run", "--", "sh", "-c", "printf 'lf\\n' > f.txt").code == 0
    monkeypatch.chdir(repo)
    res = bar(capfd, "task", "close", "--force")
    assert res.code == 0, res.err
    res = bar(capfd, "task", "reopen", str(task["id"]))
    assert res.code == 0, res.err
    monkeypatch.chdir(wt)
    assert (wt / "f.txt").read_bytes() == b"lf\n"
    assert (wt / "a.txt").read_bytes() == b"a\r\n"  # (git's own checkout, as recorded)
    assert not _status_dirty(capfd)
    _look(capfd)
    assert [s["kind"] for s in ledger(str(task["id"]))] == ["run", "run"]


def test_a_filter_pair_that_is_not_its_own_inverse_changes_no_byte(
    speed: str,
    make_repo: MakeRepo,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """clean upper-cases, smudge adds a line: git's checkout is not the bytes on disk,
    and bar runs neither program on a rollback."""
    files: dict[str, str | bytes] = {"a.txt": "a\n", ".gitattributes": "*.up filter=up\n"}
    config = {"filter.up.clean": "tr a-z A-Z", "filter.up.smudge": "sed 's/^/smudged /'"}
    repo, task, wt = _task(make_repo, capfd, monkeypatch, files, config)
    assert bar(capfd, "run", "--", "sh", "-c", "printf 'hello\\n' > f.up").code == 0
    assert recorded_tree(repo, task) == _fresh_tree(wt, tmp_path)
    _round_trip(capfd, wt, {"f.up": b"hello\n"})
    # and a filter's configuration changed with no file touched
    git(repo, "config", "filter.up.clean", "cat")
    _look(capfd)
    assert recorded_tree(repo, task) == _fresh_tree(wt, tmp_path)
    assert (wt / "f.up").read_bytes() == b"hello\n"


@pytest.mark.parametrize(
    "setting",
    [("core.trustctime", "false"), ("core.checkStat", "minimal"), ("core.ignoreStat", "true")],
)
def test_a_weaker_stat_check_in_the_repository_is_not_bars(
    setting: tuple[str, str],
    speed: str,
    make_repo: MakeRepo,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """A same-size rewrite with its mtime put back: only the ctime (and inode data) show it."""
    repo, task, wt = _task(make_repo, capfd, monkeypatch, {"a.txt": "a\n"}, dict([setting]))
    assert bar(capfd, "run", "--", "sh", "-c", "printf 'one\\n' > f.txt").code == 0
    _look(capfd)
    st = os.stat(wt / "f.txt")
    (wt / "f.txt").write_bytes(b"two\n")
    os.utime(wt / "f.txt", ns=(st.st_atime_ns, st.st_mtime_ns))
    assert _status_dirty(capfd)
    _look(capfd)
    assert recorded_tree(repo, task) == _fresh_tree(wt, tmp_path)
    last = ledger(str(task["id"]))[-2]
    assert last["kind"] == "manual"
    shown = subprocess.run(
        ["git", "show", f"{last['snapshot']}:f.txt"], cwd=repo, capture_output=True, check=True
    )
    assert shown.stdout == b"two\n"


def test_another_home_with_no_attributes_file_in_either_switches_nothing(
    inited_clean: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """What git's conversions read outside the worktree is noted by its bytes: a
    ``HOME`` or ``XDG_CONFIG_HOME`` of another name (bar run from another shell, an
    editor's terminal, ``sudo -E``), where neither holds a global attributes file, is no
    switched conversion, whose next look hashes every file of the task again (80 s at a
    million files). An attributes file there is one, whether or not anything else
    moved."""
    task = new_task(capfd)
    wt = worktree(task)
    index = task_dir(str(task["id"])) / "index"
    assert bar(capfd, "run", "--", "sh", "-c", "echo one > f.txt").code == 0
    assert not conversions.moved(wt, index)
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / ".config").mkdir(parents=True)
    monkeypatch.delenv("GIT_CONFIG_GLOBAL")  # (git reads the new HOME's .gitconfig: none)
    monkeypatch.setenv("HOME", str(elsewhere))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(elsewhere / ".config"))
    assert not conversions.moved(wt, index)
    assert json.loads(conversions.record_path(index).read_text())["version"] == 2
    assert not conversions.moved(wt, index)
    (elsewhere / ".config" / "git").mkdir()
    (elsewhere / ".config" / "git" / "attributes").write_text("*.txt text eol=crlf\n")
    assert conversions.moved(wt, index)
    res = bar(capfd, "run", "--", "true")
    assert res.code == 0, res.err
    assert not conversions.moved(wt, index)  # (noted by the look that renormalized)


def test_a_note_of_a_bar_before_holds_while_nothing_changed(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A task's note of the conversions' inputs made by a bar before this one (which
    hashed the attribute files' names too) still vouches for the stat cache where nothing
    changed, and is noted again the new way: no task hashes all its files again for an
    update of bar."""
    task = new_task(capfd)
    wt = worktree(task)
    index = task_dir(str(task["id"])) / "index"
    assert bar(capfd, "run", "--", "sh", "-c", "echo one > f.txt").code == 0
    noted = conversions.record_path(index)
    record = json.loads(noted.read_text())
    record["values"] = conversions._values(wt, str(inited_clean / ".git"))[2]
    del record["version"]
    record["stats"] = []  # (as if a file had moved: the values are compared)
    noted.write_text(json.dumps(record))
    assert not conversions.moved(wt, index)
    assert json.loads(noted.read_text())["version"] == 2
    record["values"] = "0" * 64  # (inputs that did change)
    noted.write_text(json.dumps(record))
    assert conversions.moved(wt, index)
