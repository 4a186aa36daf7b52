"""Repository shapes that once made bar record nothing, or brick a task: a repository with
no file at its top level, a directory swapped for a symbolic link, a file name that is
not UTF-8, a full disk."""

from __future__ import annotations

import json
import os
import resource
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import (
    SETTLE,
    bar,
    bar_exe,
    files_in_commit,
    ledger,
    new_task,
    replay_patches,
    task_dir,
    worktree,
)

from conftest import MakeRepo, git


def _task(
    make_repo: MakeRepo,
    capfd: pytest.CaptureFixture[str],
    files: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[Path, Path, dict[str, object]]:
    repo = make_repo(files)
    monkeypatch.chdir(repo)
    assert bar(capfd, "init").code == 0
    task = new_task(capfd)
    wt = worktree(task)
    monkeypatch.chdir(wt)
    return repo, wt, task


def test_a_repository_with_only_directories_at_its_top_records_every_change(
    make_repo: MakeRepo, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, _, task = _task(make_repo, capfd, {"pkg/a.txt": "a\n"}, monkeypatch)
    res = bar(
        capfd, "run", "--", "sh", "-c", "echo b >> pkg/a.txt; mkdir newpkg; echo n > newpkg/n.txt"
    )
    assert res.code == 0, res.err
    assert "did not match" not in res.err
    (step,) = ledger(str(task["id"]))
    assert sorted(step["diff_stat"]["file_list"]) == ["newpkg/n.txt", "pkg/a.txt"]
    res = bar(capfd, "run", "--", "sh", "-c", "echo c >> pkg/a.txt")
    assert ledger(str(task["id"]))[-1]["diff_stat"]["file_list"] == ["pkg/a.txt"]


def test_a_directory_swapped_for_a_symlink_and_back_is_recorded_and_rolled_back(
    make_repo: MakeRepo, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, wt, task = _task(
        make_repo, capfd, {"d/a.txt": "a\n", "d/sub/b.txt": "b\n", "top.txt": "t\n"}, monkeypatch
    )
    assert bar(capfd, "run", "--", "sh", "-c", "rm -rf d && ln -s /tmp d").code == 0
    assert bar(capfd, "run", "--", "sh", "-c", "echo more >> top.txt").code == 0
    steps = ledger(str(task["id"]))
    assert [s["diff_stat"]["files"] for s in steps] == [3, 1]  # d/a.txt, d/sub/b.txt, d
    assert files_in_commit(repo, steps[-1]["snapshot"])["d"] == b"-> /tmp"
    res = bar(capfd, "rollback", "--to", "base")
    assert res.code == 0, res.err
    assert (wt / "d").is_dir() and not (wt / "d").is_symlink()
    assert (wt / "d" / "sub" / "b.txt").read_text() == "b\n"
    assert not (task_dir(str(task["id"])) / "rollback.json").exists()
    assert bar(capfd, "status").code == 0


@pytest.mark.parametrize(
    "script",
    [
        "rm x && mkdir x && ln -s a x/y",  # a symbolic link moved under a directory of its name
        "rm x && mkdir x && mv d/f x/f",  # a link swapped for a directory a file moved into
        "mkdir x2 && mv d x2/ && rm x && mv x2 x",  # a link swapped for a directory holding one
    ],
)
def test_every_step_patch_replays_across_a_change_of_shape(
    make_repo: MakeRepo,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    script: str,
) -> None:
    """Recorded patches carry no renames: git pairs ``x`` and ``x/y`` as a rename when the
    link ``x`` became a directory, and ``git apply`` refuses such a patch. Each step's
    patch, forwards, replays onto the state before it, and the last state is rebuilt."""
    repo, _, task = _task(make_repo, capfd, {"a": "a\n", "d/f": "f\nff\nfff\n"}, monkeypatch)
    assert bar(capfd, "run", "--", "ln", "-s", "d", "x").code == 0
    assert bar(capfd, "run", "--", "sh", "-c", script).code == 0
    assert bar(capfd, "rollback", "--to", "1").code == 0  # (and back: the reverse shape)
    steps = ledger(str(task["id"]))
    rebuilt = replay_patches(repo, str(task["id"]), str(task["base_commit"]), tmp_path / "re")
    assert rebuilt == files_in_commit(repo, steps[-1]["snapshot"])
    assert "rename" not in (task_dir(str(task["id"])) / steps[1]["artifacts"]["patch"]).read_text()


def test_a_file_name_that_is_not_utf8_is_recorded_and_reads_back(
    make_repo: MakeRepo, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, wt, task = _task(make_repo, capfd, {"a.txt": "a\n"}, monkeypatch)
    script = "open(b'caf\\xe9.txt', 'wb').write(b'x')"
    res = bar_exe("run", "--", sys.executable, "-c", script, cwd=wt)
    assert res.code == 0, res.err
    for args in (["log"], ["show", "1"], ["status"], ["log", "--json"], ["doctor"]):
        res = bar_exe(*args, cwd=wt)
        assert res.code == 0, (args, res.err)
    (step,) = ledger(str(task["id"]))
    assert os.fsencode(step["diff_stat"]["file_list"][0]) == b"caf\xe9.txt"  # same bytes back
    assert files_in_commit(repo, step["snapshot"])["caf\udce9.txt"] == b"-:x"
    assert bar(capfd, "rollback", "--to", "base").code == 0
    assert not os.path.lexists(os.path.join(os.fsencode(wt), b"caf\xe9.txt"))


def test_a_step_whose_changes_cannot_be_stored_is_not_recorded_as_no_changes(
    make_repo: MakeRepo, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk, as git sees it: writing the new object fails. The step must stay
    pending (not "no changes", not a later "manual" step) and be recorded once it can."""
    repo, wt, task = _task(make_repo, capfd, {"a.txt": "a\n"}, monkeypatch)
    big = os.urandom(3 << 20)  # incompressible: its object is ~3 MiB

    def limit() -> None:  # files bar's git writes may not grow past 1 MiB
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))

    (wt / "big.bin").write_bytes(big)
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "bar"), "run", "--", "true"],
        cwd=wt,
        capture_output=True,
        preexec_fn=limit,
    )
    assert proc.returncode != 0, proc.stderr
    assert b"could not be stored" in proc.stderr or b"could not write" in proc.stderr
    assert all(s["diff_stat"]["files"] != 0 for s in ledger(str(task["id"])) if "diff_stat" in s)
    # space again: the next command records the change, attributed to a step of its own
    res = bar(capfd, "run", "--", "true")
    assert res.code == 0, res.err
    recorded = [s for s in ledger(str(task["id"])) if s["diff_stat"]["files"]]
    assert [s["diff_stat"]["file_list"] for s in recorded] == [["big.bin"]]
    assert files_in_commit(repo, recorded[0]["snapshot"])["big.bin"] == b"-:" + big
    git(repo, "status")  # the repository is sound
    assert json.loads(json.dumps(ledger(str(task["id"]))))


def test_a_step_whose_recording_fails_is_recorded_later_as_the_step_it_was(
    make_repo: MakeRepo, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk fills while the step writes: the file it wrote is the step's (not a later
    "manual" step's), and so is its exit code."""
    _, wt, task = _task(make_repo, capfd, {"a.txt": "a\n"}, monkeypatch)

    def limit() -> None:  # bar's git may not write files past 1 MiB; the step lifts it
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, resource.RLIM_INFINITY))

    write = "import os; open('big.bin', 'wb').write(os.urandom(3 << 20))"
    script = f"ulimit -f unlimited; {shlex.quote(sys.executable)} -c {shlex.quote(write)}; exit 3"
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "bar"), "run", "--", "sh", "-c", script],
        cwd=wt,
        capture_output=True,
        preexec_fn=limit,
    )
    assert proc.returncode != 0
    assert not ledger(str(task["id"]))  # nothing recorded wrongly
    res = bar(capfd, "status")
    assert res.code == 0, res.err
    res = bar(capfd, "run", "--", "true")
    assert res.code == 0, res.err
    first = ledger(str(task["id"]))[0]
    assert first["kind"] == "run" and first["exit_code"] == 3 and not first.get("interrupted")
    assert first["diff_stat"]["file_list"] == ["big.bin"]


def test_a_nested_repository_is_named_loudly_in_the_step_and_in_status(
    make_repo: MakeRepo, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, _, task = _task(make_repo, capfd, {"a.txt": "a\n"}, monkeypatch)
    script = (
        "git init -q vendor/lib && echo x > vendor/lib/x && git -C vendor/lib add x && "
        "git -C vendor/lib -c user.name=n -c user.email=e commit -qm x"
    )
    res = bar(capfd, "run", "--", "sh", "-c", script)
    assert res.code == 0, res.err
    assert "vendor/lib is a git repository of its own" in res.err
    assert ledger(str(task["id"]))[-1]["nested_repos"] == ["vendor/lib"]
    res = bar(capfd, "run", "--", "sh", "-c", "echo edit >> vendor/lib/x")
    assert ledger(str(task["id"]))[-1]["nested_repos"] == ["vendor/lib"]
    assert "vendor/lib" not in res.err  # said once, when it appeared
    res = bar(capfd, "status")
    assert "vendor/lib is a git repository of its own" in res.out
    assert bar(capfd, "status", "--json").json()["nested_repos"] == ["vendor/lib"]


def test_a_change_in_a_directory_the_tree_does_not_hold_is_seen(
    make_repo: MakeRepo, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Empty directories and ones holding only ignored files are not in any snapshot's
    tree, yet a file created in one must be recorded (found by the oracle)."""
    repo, wt, task = _task(make_repo, capfd, {"a.txt": "a\n", ".gitignore": "*.log\n"}, monkeypatch)
    assert (
        bar(capfd, "run", "--", "sh", "-c", "mkdir -p deep/er logs && touch logs/x.log").code == 0
    )
    past = time.time() - 60  # as if the directories were made long ago (no racy window)
    for d in (wt, wt / "deep", wt / "deep" / "er", wt / "logs"):
        os.utime(d, (past, past))
    time.sleep(SETTLE)  # a directory's ctime cannot be set back: wait out the window
    assert bar(capfd, "run", "--", "true").code == 0  # stamps the settled directories
    script = "rm -r deep/er && ln -s /tmp deep/er && echo kept > logs/keep.txt"
    assert bar(capfd, "run", "--", "sh", "-c", script).code == 0
    step = ledger(str(task["id"]))[-1]
    assert sorted(step["diff_stat"]["file_list"]) == ["deep/er", "logs/keep.txt"]
    assert files_in_commit(repo, step["snapshot"])["deep/er"] == b"-> /tmp"


@pytest.mark.parametrize(
    ("setup", "written", "name"),
    [
        ("autocrlf", b"lf only\n", "new.txt"),
        ("text_auto", b"crlf\r\nfile\r\n", "new.txt"),
        ("autocrlf", b"one\n", "caf\udce9.txt"),  # a name git quotes in some outputs
    ],
)
def test_a_rollback_restores_the_bytes_git_would_convert(
    setup: str,
    written: bytes,
    name: str,
    make_repo: MakeRepo,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    files = (
        {"a.txt": "a\n"}
        if setup == "autocrlf"
        else {"a.txt": "a\n", ".gitattributes": "* text=auto\n"}
    )
    repo = make_repo(files)
    if setup == "autocrlf":
        git(repo, "config", "core.autocrlf", "true")
    monkeypatch.chdir(repo)
    assert bar(capfd, "init").code == 0
    task = new_task(capfd)
    wt = worktree(task)
    monkeypatch.chdir(wt)
    (wt / name).write_bytes(written)
    assert bar(capfd, "run", "--", "true").code == 0
    assert bar(capfd, "run", "--", "rm", name).code == 0
    res = bar(capfd, "rollback")  # back to the state before the rm
    assert res.code == 0, res.err
    assert (wt / name).read_bytes() == written
    res = bar(capfd, "status", "--json")
    assert res.json()["unrecorded_changes"] is False
    # and the snapshot stores what git itself would commit
    step = next(s for s in ledger(str(task["id"])) if s["kind"] == "manual")
    blob = git(repo, "cat-file", "-p", f"{step['snapshot']}:{name}").encode()
    assert blob == written.replace(b"\r\n", b"\n")


def test_a_large_steps_patch_written_by_two_gits_replays_and_counts_as_one(
    make_repo: MakeRepo,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """A step whose snapshot takes long has its patch and its stat written by two gits at
    once (``steps.SPLIT_AFTER_S``; here every step's): the patches replay to each state,
    and the stat the ledger keeps is git's numstat of the same two trees."""
    from bar.history import steps as ledger_steps

    monkeypatch.setattr(ledger_steps, "SPLIT_AFTER_S", 0.0)
    files = {"a": "a\n" * 40, "d/f": "f\n", "bin": "b"}
    repo, wt, task = _task(make_repo, capfd, files, monkeypatch)
    edits = [
        "for i in $(seq 1 300); do echo $i > n$i.txt; done; printf '\\0\\1' > bin",
        "sed -i 's/a/b/' a && rm d/f && chmod +x n1.txt && ln -s a link",
    ]
    for script in edits:
        assert bar(capfd, "run", "--", "sh", "-c", script).code == 0
    steps = ledger(str(task["id"]))
    rebuilt = replay_patches(repo, str(task["id"]), str(task["base_commit"]), tmp_path / "re")
    assert rebuilt == files_in_commit(repo, steps[-1]["snapshot"])
    for step in steps:
        listed = subprocess.run(
            ["git", "diff", "--no-renames", "--numstat", step["snapshot_before"], step["snapshot"]],
            cwd=wt,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
        assert step["diff_stat"]["files"] == len(listed) > 0
        added = sum(int(line.split("\t")[0]) for line in listed if not line.startswith("-"))
        assert step["diff_stat"]["additions"] == added
