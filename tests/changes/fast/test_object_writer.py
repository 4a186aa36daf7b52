"""bar.git.object_writer against git: the commits it writes are the ones ``git commit-tree`` writes
(same bytes, so the same id) on random messages, parents and time zones, in SHA-1 and
SHA-256 repositories; it moves a loose ref as ``git update-ref`` does, and leaves to git
every case it does not reproduce (a packed ref, a reflog, a lock held, a value that is
not the expected one, a configuration that changes what git writes)."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import bar, ledger, new_task, task_dir, worktree
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bar.git import BAR_IDENTITY, object_writer
from conftest import git

ZONES = ["UTC", "Asia/Kolkata", "America/St_Johns", "Pacific/Chatham", "Europe/Paris"]


def _repo(root: Path, object_format: str = "sha1") -> Path:
    repo = root / f"repo-{object_format}"
    subprocess.run(["git", "init", "-q", f"--object-format={object_format}", str(repo)], check=True)
    (repo / "f").write_text("one\n")
    git(repo, "add", "f")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    return repo


def _writer(repo: Path, config: str = "") -> object_writer.Writer:
    if not config and (repo / ".git" / "config").read_text().count("sha256"):
        config = "extensions.objectformat sha256"
    writer = object_writer.Writer.for_repository(repo / ".git", config)
    assert writer is not None
    return writer


def _git_commit(repo: Path, tree: str, parents: list[str], message: bytes, date: str) -> str:
    env = {**os.environ, **BAR_IDENTITY, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    args = ["git", "commit-tree", tree, *(a for p in parents for a in ("-p", p))]
    done = subprocess.run(args, cwd=repo, env=env, input=message, capture_output=True, check=True)
    return done.stdout.decode().strip()


@pytest.fixture(scope="module")
def repos() -> Iterator[dict[str, Path]]:
    with tempfile.TemporaryDirectory(prefix="bar-loose-") as tmp:
        yield {f: _repo(Path(tmp), f) for f in ("sha1", "sha256")}


# the characters git's UTF-8 check replaces, and a few it keeps, among any others
CORNERS = [
    "\n",
    "\ufffe",
    "\uffff",
    "\ufdd0",
    "\ufdef",
    "\U0001fffe",
    "\U0010ffff",
    "\udcff",
    "\ud800",
    "é",
    "\r",
]
MESSAGES = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8", exclude_characters="\0"), st.sampled_from(CORNERS)
    ),
    max_size=40,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    message=MESSAGES,
    n_parents=st.integers(0, 2),
    zone=st.sampled_from(ZONES),
    object_format=st.sampled_from(["sha1", "sha256"]),
)
def test_a_commit_is_the_one_git_writes(
    repos: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    message: str,
    n_parents: int,
    zone: str,
    object_format: str,
) -> None:
    repo = repos[object_format]
    for name in ("GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE"):  # (dated now)
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TZ", zone)
    time.tzset()
    try:
        tree = git(repo, "rev-parse", "HEAD^{tree}").strip()
        head = git(repo, "rev-parse", "HEAD").strip()
        # the parents must be loose objects (git gc packs nothing here)
        parents = [head, _git_commit(repo, tree, [], b"other", "@1 +0000")][:n_parents]
        made = _writer(repo).commit(tree, parents, message)
        encoded = message.encode("utf-8", "backslashreplace")
        # what git stores, dated as the writer dated its commit
        probe = made or _git_commit(repo, tree, parents, encoded, "@1 +0000")
        stored = subprocess.run(
            ["git", "cat-file", "commit", probe], cwd=repo, capture_output=True, check=True
        ).stdout
        kept = stored.split(b"\n\n", 1)[1]
        if made is None:
            # left to git only where git would not store the message as given
            assert kept != encoded
            return
        assert kept == encoded
        date = stored.split(b"\ncommitter ", 1)[1].split(b"\n", 1)[0].split(b"> ", 1)[1]
        assert made == _git_commit(repo, tree, parents, encoded, "@" + date.decode())
        assert date.decode().endswith(time.strftime("%z", time.localtime(int(date.split()[0]))))
        mode = os.stat(repo / ".git" / "objects" / made[:2] / made[2:]).st_mode & 0o777
        assert mode == 0o444 & ~_umask()
        assert not list((repo / ".git" / "objects" / made[:2]).glob("tmp_obj_*"))
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_an_object_already_there_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = _repo(tmp_path)
    tree = git(repo, "rev-parse", "HEAD^{tree}").strip()
    for name in ("GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE"):  # (the same commit twice)
        monkeypatch.setenv(name, "@1700000000 +0000")
    writer = _writer(repo)
    first = writer.commit(tree, [], "same")
    assert first is not None
    path = repo / ".git" / "objects" / first[:2] / first[2:]
    os.utime(path, (1, 1))
    assert writer.commit(tree, [], "same") == first
    assert path.stat().st_mtime > 1  # (freshened, as git does, not written again)
    git(repo, "cat-file", "-e", first)


def test_a_parent_that_is_not_loose_is_left_to_git(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    git(repo, "gc", "-q")
    head = git(repo, "rev-parse", "HEAD").strip()
    tree = git(repo, "rev-parse", "HEAD^{tree}").strip()
    assert _writer(repo).commit(tree, [head], "x") is None  # (packed: git checks it)


def _ref(repo: Path, name: str) -> str | None:
    done = subprocess.run(
        ["git", "rev-parse", "--verify", "-q", name], cwd=repo, capture_output=True, text=True
    )
    return done.stdout.strip() or None


def test_a_loose_ref_moves_as_update_ref_moves_it(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    head = git(repo, "rev-parse", "HEAD").strip()
    tree = git(repo, "rev-parse", "HEAD^{tree}").strip()
    ref = "refs/bar/tasks/abc"
    git(repo, "update-ref", ref, head)
    writer = _writer(repo)
    new = writer.commit(tree, [head], "step")
    assert new is not None
    assert writer.move(ref, new, head)
    assert _ref(repo, ref) == new
    assert (repo / ".git" / ref).read_text() == new + "\n"
    assert not (repo / ".git" / f"{ref}.lock").exists()
    # not at the value expected: nothing moves, the lock is gone
    assert not writer.move(ref, head, head)
    assert _ref(repo, ref) == new
    assert not (repo / ".git" / f"{ref}.lock").exists()
    git(repo, "fsck", "--no-dangling")


@pytest.mark.parametrize("case", ["packed", "reflog", "locked", "symbolic", "missing"])
def test_what_git_does_otherwise_is_left_to_git(tmp_path: Path, case: str) -> None:
    repo = _repo(tmp_path)
    head = git(repo, "rev-parse", "HEAD").strip()
    other = _git_commit(
        repo, git(repo, "rev-parse", "HEAD^{tree}").strip(), [head], b"o", "@1 +0000"
    )
    ref = "refs/bar/tasks/abc"
    git(repo, "update-ref", ref, head)
    lock = repo / ".git" / f"{ref}.lock"
    if case == "packed":
        git(repo, "pack-refs", "--all")
    elif case == "reflog":
        git(repo, "update-ref", "-d", ref)
        git(repo, "update-ref", "--create-reflog", ref, head)
        assert (repo / ".git" / "logs" / ref).is_file()
    elif case == "locked":
        lock.write_text("someone else's\n")
    elif case == "symbolic":
        git(
            repo, "symbolic-ref", ref, "refs/heads/" + git(repo, "branch", "--show-current").strip()
        )
    elif case == "missing":
        git(repo, "update-ref", "-d", ref)
    before = (repo / ".git" / ref).read_bytes() if (repo / ".git" / ref).exists() else None
    assert not _writer(repo).move(ref, other, head)
    after = (repo / ".git" / ref).read_bytes() if (repo / ".git" / ref).exists() else None
    assert after == before
    assert lock.exists() == (case == "locked")
    if case == "locked":
        assert lock.read_text() == "someone else's\n"


@pytest.mark.parametrize(
    "config",
    [
        "commit.gpgsign true",
        "commit.gpgsign",
        "core.sharedrepository group",
        "core.logallrefupdates always",
        "core.fsync loose-object",
        "core.fsyncobjectfiles true",
        "extensions.objectformat sha512",
        "extensions.refstorage reftable",
        "i18n.commitencoding ISO-8859-1",
        "core.loosecompression eleven",
        "extensions.somethingnew true",
    ],
)
def test_a_configuration_that_changes_what_git_writes_is_left_to_git(
    tmp_path: Path, config: str
) -> None:
    assert object_writer.Writer.for_repository(tmp_path, config) is None


@pytest.mark.parametrize(
    "config",
    [
        "",
        "commit.gpgsign false",
        "core.sharedrepository umask",
        "core.logallrefupdates true",
        "extensions.worktreeconfig true",
        "extensions.refstorage files",
        "i18n.commitencoding UTF-8",
        "core.compression 9\ncore.loosecompression 0",
    ],
)
def test_a_configuration_that_changes_nothing_keeps_the_writer(tmp_path: Path, config: str) -> None:
    assert object_writer.Writer.for_repository(tmp_path, config) is not None


@pytest.mark.parametrize(
    "value",
    [
        "2024-01-15T10:00:00Z",
        "@1700000000 +0530",
        "1700000000 -0330",
        "2024-01-15T10:00:00+01:00",
        "2024-07-01T23:59:59-0800",
        "2024-02-30T10:00:00Z",
        "2024-01-15T24:00:00Z",
        "yesterday",
        "2024-01-15 10:00:00",
        "Mon, 15 Jan 2024 10:00:00 +0000",
    ],
)
def test_a_date_from_the_environment_is_read_as_git_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    repo = _repo(tmp_path)
    tree = git(repo, "rev-parse", "HEAD^{tree}").strip()
    monkeypatch.setenv("GIT_AUTHOR_DATE", value)
    monkeypatch.setenv("GIT_COMMITTER_DATE", value)
    writer = object_writer.Writer.for_repository(repo / ".git", "")
    if writer is None:  # (a form it leaves to git)
        assert value in (
            "2024-02-30T10:00:00Z",
            "2024-01-15T24:00:00Z",
            "yesterday",
            "2024-01-15 10:00:00",
            "Mon, 15 Jan 2024 10:00:00 +0000",
        )
        return
    made = writer.commit(tree, [], "dated")
    assert made == _git_commit(repo, tree, [], b"dated", value)


def test_a_date_from_the_environment_is_left_to_git(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GIT_COMMITTER_DATE", "last tuesday")
    assert object_writer.Writer.for_repository(tmp_path, "") is None


def test_a_step_writes_its_snapshot_without_git(
    capfd: pytest.CaptureFixture[str], repo: Path, tmp_path: Path
) -> None:
    """A hand edit and a step recorded through the writer: no commit-tree or update-ref
    started, and the chain is one git reads as its own."""
    assert bar(capfd, "init").code == 0
    task = new_task(capfd)
    wt = worktree(task)
    os.chdir(wt)
    bar(capfd, "run", "--", "sh", "-c", "echo a > a.txt")  # (the first: git makes refs/bar)
    trace = tmp_path / "trace"
    os.environ["GIT_TRACE2_EVENT"] = str(trace)
    try:
        (wt / "hand.txt").write_text("by hand\n")
        bar(capfd, "run", "--", "sh", "-c", "echo b > b.txt")
    finally:
        del os.environ["GIT_TRACE2_EVENT"]
    started = trace.read_text()
    assert '"commit-tree"' not in started and '"update-ref"' not in started
    steps = ledger(task["id"])
    assert [s.get("kind", "run") for s in steps[-2:]] == ["manual", "run"]
    ref = git(wt, "rev-parse", f"refs/bar/tasks/{task['id']}").strip()
    assert ref == steps[-1]["snapshot"]
    assert git(wt, "rev-parse", f"{ref}^") == steps[-2]["snapshot"] + "\n"
    assert git(wt, "show", f"{ref}:b.txt") == "b\n"
    git(wt, "fsck", "--no-dangling")
    assert task_dir(task["id"]).is_dir()


def test_a_sha256_repository_is_recorded_rolled_back_and_applied(
    capfd: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a repository of SHA-256 objects: a task is made (its ref created with an empty
    old value, not SHA-1's forty zeros), steps and a hand edit are recorded by the
    writer, a rollback and an apply work, and git checks the whole store."""
    repo = _repo(tmp_path, "sha256")
    monkeypatch.chdir(repo)
    assert bar(capfd, "init").code == 0
    for args in (
        ["add", ".bar"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "bar"],
    ):
        subprocess.run(["git", *args], cwd=repo, capture_output=True, check=True)
    task = new_task(capfd)
    wt = worktree(task)
    monkeypatch.chdir(wt)
    assert bar(capfd, "run", "--", "sh", "-c", "echo b > b.txt").code == 0
    (wt / "f").write_text("by hand\n")
    assert bar(capfd, "run", "--", "sh", "-c", "echo c > c.txt").code == 0
    steps = ledger(task["id"])
    assert [s.get("kind", "run") for s in steps] == ["run", "manual", "run"]
    assert all(len(s["snapshot"]) == 64 for s in steps)
    assert bar(capfd, "rollback", "--to", "0001").code == 0
    assert not (wt / "c.txt").exists() and (wt / "f").read_text() == "one\n"
    monkeypatch.chdir(repo)
    assert bar(capfd, "apply", "--task", task["id"]).code == 0
    assert (repo / "b.txt").read_text() == "b\n"
    git(repo, "fsck", "--no-dangling")
