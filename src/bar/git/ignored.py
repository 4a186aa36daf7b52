"""What git ignores in a task's worktree, and what bar does when that changes.

A recorded state is what ``git add -A`` of the worktree gives in an index that holds the
worktree's HEAD: a file HEAD holds stays recorded whatever the ignore rules say (git keeps
a tracked file), any other file is recorded only while no rule ignores it. The side index
holds every file a step recorded, so when the rules come to cover one of those, bar takes
it out (``drop_newly_ignored``, after a full rescan: any change of a ``.gitignore``, of
``info/exclude`` or of ``core.excludesFile`` brings one about). A rollback never touches
an ignored file: where it restores ``.gitignore`` files (``rules_change``), the files it
would delete that the restored rules ignore and HEAD does not hold are put back
(``keep_ignored``; one HEAD holds is no ignored file, and goes as any other), and files the
old rules ignored and the restored ones do not become part of the state it records.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import TracebackType

from bar import git
from bar.base.notices import note, plural
from bar.base.proc import PIPE_HOLDS, clean_env

# files the index holds that HEAD does not, up to which only those are asked about
_FEW = 100


def against_head(worktree: Path, index: Path, head: str) -> dict[str, list[bytes]] | None:
    """The paths of the index ``index`` that differ from the worktree's HEAD ``head``,
    by status: ``A``, the index holds them and HEAD does not; ``D``, the other way round
    (no key: none). None where git could not say. One ``diff-index`` against HEAD's
    tree, which git's cache of the index's trees makes quick. (``head`` by its id: with
    a side index's environment, git's HEAD is the task's own git directory's.)"""
    res = git.git(
        worktree,
        "diff-index",
        "--cached",
        "--name-status",
        "-z",
        "--no-renames",
        "--diff-filter=AD",
        head,
        env=git.index_env(index),
        check=False,
    )
    if res.returncode != 0:
        return None
    found: dict[str, list[bytes]] = {}
    said = res.stdout.split(b"\0")
    for status, path in zip(said[::2], said[1::2], strict=False):
        if path:
            found.setdefault(status.decode("ascii", "replace"), []).append(path)
    return found


def drop_newly_ignored(
    worktree: Path, index: Path, head: str | None, added: list[bytes] | None
) -> None:
    """Take out of the side index ``index`` the files git now ignores that the
    worktree's HEAD ``head`` does not hold (see the module's text): ``added``, as
    ``against_head`` gave them (None: git could not say).

    Only a file HEAD does not hold can go, so git is first asked for those (the index
    against HEAD's tree: a tenth of a second on a million files); matching every file
    against the ignore rules takes seconds there. None: nothing to ask; a few: only they
    are matched; else (or where HEAD cannot be read) every file is."""
    env = git.index_env(index)
    head = head or "HEAD"
    if added == []:
        return
    paths: list[str] = []
    if added is not None and len(added) <= _FEW:
        paths = ["--", *(os.fsdecode(p) for p in added)]
        env = {**env, "GIT_LITERAL_PATHSPECS": "1"}
    res = git.git(
        worktree,
        "ls-files",
        "-z",
        "-c",
        "-i",
        "--exclude-standard",
        *paths,
        env=env,
        check=False,
    )
    found = [p for p in res.stdout.split(b"\0") if p] if res.returncode == 0 else []
    if not found:
        return
    held = git.git(worktree, "ls-tree", "-r", "-z", "--name-only", head, check=False)
    kept = set(held.stdout.split(b"\0")) if held.returncode == 0 else set(found)
    gone = [p for p in found if p not in kept]
    if gone:
        git.git(
            worktree,
            "update-index",
            "-z",
            "--force-remove",
            "--stdin",
            env=env,
            input=b"\0".join(gone) + b"\0",
        )


def rules_change(worktree: Path, now_tree: str, target_tree: str) -> list[str]:
    """The paths the restore from ``now_tree`` to ``target_tree`` deletes, if it changes
    a ``.gitignore`` (what git ignores then changes: files on disk that no state holds
    may stop being ignored, files a state holds may start being); empty if it changes
    none."""
    changes = git.diff_tree_raw(worktree, now_tree, target_tree)
    if not any(c.path == ".gitignore" or c.path.endswith("/.gitignore") for c in changes):
        return []
    return [c.path for c in changes if c.status == "D"] or [".gitignore"]


def _not_in_head(worktree: Path, paths: list[bytes]) -> list[bytes]:
    """Of ``paths``, those the worktree's HEAD does not hold (all of them where it has
    no HEAD; where HEAD cannot be read, none: nothing is put back on a guess)."""
    head = git.head(worktree)
    if head is None:
        return paths
    few = len(paths) <= _FEW
    held = git.git(
        worktree,
        "ls-tree",
        "-r",
        "-z",
        "--name-only",
        head,
        *(["--", *(os.fsdecode(p) for p in paths)] if few else []),
        env={"GIT_LITERAL_PATHSPECS": "1"} if few else None,
        check=False,
    )
    if held.returncode != 0:
        return []
    kept = set(held.stdout.split(b"\0"))
    return [p for p in paths if p not in kept]


def by_rules(worktree: Path, paths: Sequence[str]) -> set[str]:
    """Those of ``paths`` the worktree's ignore rules alone ignore (whatever an index
    holds); none if git cannot say."""
    res = git.git(
        worktree,
        "check-ignore",
        "--no-index",
        "-z",
        "--stdin",
        check=False,
        input=question(paths),
    )
    return answered(res.stdout) if res.returncode in (0, 1) else set()


def keep_ignored(worktree: Path, now_tree: str, deleted: list[str]) -> None:
    """Of the files the restore just deleted, write back those the target's ignore rules
    ignore: a rollback never touches an ignored file, and under the rules it restored,
    these are (build output a step recorded before a ``.gitignore`` named it). They
    are written from ``now_tree``, which holds them. Not those the worktree's HEAD holds:
    git keeps a file it tracks whatever the rules say, so no such file is ignored (the
    state the rollback records leaves it out: it must not stay on disk)."""
    said = by_rules(worktree, deleted)
    ignored = [p.encode("utf-8", "surrogateescape") for p in deleted if p in said]
    if ignored:
        ignored = _not_in_head(worktree, ignored)
    if not ignored:
        return
    # the side index no longer holds them (the target does not): read them from the tree
    wanted = set(ignored)
    listing = git.git(worktree, "ls-tree", "-r", "-z", now_tree).stdout
    for item in listing.split(b"\0"):
        meta, _, rel = item.partition(b"\t")
        if rel not in wanted:
            continue
        mode, _kind, oid = meta.split(b" ")
        if mode not in (b"100644", b"100755", b"120000"):
            continue  # a nested repository: the trash keeps it (``bar.changes.trash``)
        path = os.path.join(os.fsencode(worktree), rel)
        if os.path.lexists(path):
            continue  # something is there already: never overwritten
        data = git.git(worktree, "cat-file", "blob", oid.decode()).stdout
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if mode == b"120000":
            os.symlink(data, path)
            continue
        fd = os.open(
            path,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
            0o777 if mode == b"100755" else 0o666,
        )
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    note(
        f"kept {plural(len(ignored), 'file')} the restored .gitignore ignores "
        "(a rollback never touches ignored files)"
    )


class Asking:
    """What git ignores in ``worktree`` (``git check-ignore --no-index``), asked of one
    git many times (``ignored``), each question answered before the next is put: a walk
    that must know what git ignores at one level before it reads the next starts one
    git for the whole walk, not one a level (a chain of thousands of nested directories
    took thousands, each reading every level's rules again). Git names the rule that
    decided each path only in its verbose answers, which git 2.39 cannot give for a path
    some 25 directories deep that a rule ignores (it dies of a bad read): a question left
    unanswered is put again, and every one after it, to a git of its own that says only
    which paths it ignores. Used as a context manager, which ends the process."""

    def __init__(self, worktree: Path) -> None:
        self._worktree = worktree
        self._proc: subprocess.Popen[bytes] | None = None
        self._alone = False  # each question to a git of its own
        self._left = b""  # read past the last answer (none is, but a read may end anywhere)

    def __enter__(self) -> Asking:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def ignored(self, paths: Sequence[str]) -> set[str] | None:
        """Which of ``paths`` (relative to the worktree) git ignores, by the ignore files
        alone; None where git could not say."""
        if not paths:
            return set()
        if not self._alone:
            found = self._asked(paths)
            if found is not None:
                return found
            self._alone = True
            self.close()
        res = git.git(
            self._worktree,
            "check-ignore",
            "--no-index",
            "-z",
            "--stdin",
            check=False,
            input=question(paths),
        )
        if res.returncode not in (0, 1):
            return None
        return answered(res.stdout)

    def close(self) -> None:
        proc, self._proc = self._proc, None
        self._left = b""
        if proc is None:
            return
        if proc.stdin is not None:
            try:
                proc.stdin.close()
            except OSError:
                pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()

    def _asked(self, paths: Sequence[str]) -> set[str] | None:
        """``ignored`` of the one git, from its verbose answers (None: it gave none)."""
        proc = self._started()
        if proc is None or proc.stdin is None or proc.stdout is None:
            return None
        data = question(paths)
        if len(data) <= PIPE_HOLDS:  # (git has read all before: the pipe is empty)
            self._write(proc, data)
            fields = self._read(proc, 4 * len(paths))
        else:
            # git answers each path as it reads it: what it writes while the question is
            # still being written must be read meanwhile, or both wait on a full pipe
            writer = threading.Thread(target=self._write, args=(proc, data), daemon=True)
            writer.start()
            try:
                fields = self._read(proc, 4 * len(paths))
            finally:
                writer.join()
        if fields is None:
            return None
        found: set[str] = set()
        for i, path in enumerate(paths):
            pattern = fields[4 * i + 2]
            # (the last rule that matched, a negated one too: that one, ``!`` first,
            # says the path is not ignored)
            if pattern and not pattern.startswith(b"!"):
                found.add(path)
        return found

    def _started(self) -> subprocess.Popen[bytes] | None:
        if self._proc is None:
            cmd = ["git", *git.NO_PROGRAMS, "-C", str(self._worktree), *_ASK]
            env = {"GIT_FLUSH": "1"}  # (each answer as soon as it is found)
            try:
                self._proc = subprocess.Popen(
                    cmd,
                    env=clean_env(git.pinned_env(self._worktree, env)),
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                )
            except OSError:
                return None
        return self._proc

    @staticmethod
    def _write(proc: subprocess.Popen[bytes], data: bytes) -> None:
        assert proc.stdin is not None
        try:
            proc.stdin.write(data)
            proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass  # it ended: the read finds that out

    def _read(self, proc: subprocess.Popen[bytes], count: int) -> list[bytes] | None:
        """The next ``count`` NUL-ended fields git writes (None: it ended first)."""
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        fields: list[bytes] = []
        left = self._left
        while True:
            *done, left = left.split(b"\0")
            fields += done
            if len(fields) >= count:
                break
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:
                return None
            if not chunk:
                return None
            left += chunk
        if len(fields) > count:
            return None  # more than was asked: not an answer to this question
        self._left = left
        return fields


def question(paths: Iterable[str]) -> bytes:
    """``paths`` as ``git check-ignore -z --stdin`` is to read them: each a pathspec to
    it, which takes no ``literal`` magic, so one that begins with ``:`` (a directory a
    step named ``:(top)a`` was answered for as ``a``) is named behind ``./``."""
    return b"".join(
        (b"./" if p.startswith(":") else b"") + p.encode("utf-8", "surrogateescape") + b"\0"
        for p in paths
    )


def answered(out: bytes) -> set[str]:
    """The paths ``git check-ignore -z`` printed for a ``question``, as they were given."""
    return {
        (p[2:] if p.startswith(b"./:") else p).decode("utf-8", "surrogateescape")
        for p in out.split(b"\0")
        if p
    }


_ASK = ("check-ignore", "--no-index", "--stdin", "-z", "--verbose", "--non-matching")
