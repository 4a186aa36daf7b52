"""Proving that a task's worktree holds a recorded state, byte for byte.

Every look for changes (the look for hand edits of every command, a step's snapshot)
trusts what the kernel says changed: a file's size, times and inode (git's stat cache),
the watches. A write through a shared memory map to a page that was already dirty
changes none of those and raises no event, so no look sees it (docs/internals/record.md,
"What bar can and cannot see"). ``check`` sees everything: it reads every file of the
state and hashes its bytes as git hashes a blob (``git hash-object --no-filters``: the
bytes on disk, no conversion), and compares them, its type and its mode with the record;
it lists what the worktree holds beside them that a snapshot would take (not ignored,
not in the state); it writes nothing. It uses nothing of the speed layer, so both speed
modes give the same answer.

Where git converts line endings, a state's file is what git's checkout of it writes, or
the raw bytes the snapshot carries (``bar.git.exact``): a file whose bytes are not its
blob's is compared with git's checkout of the blob. A path a ``filter`` attribute names
is converted by a program of the repository's, which bar never runs: when its bytes are
not the blob's, it is listed as not compared.

``mark_for_recording`` makes the next look hash the differing files whatever their stat
says (``bar.git.racy``'s suspects), so ``bar verify --record`` records them as a
``manual`` step.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bar import git
from bar.base.record import field, record
from bar.git import exact
from bar.history.side_index import unrecordable
from bar.store.files import read_regular

# what a path of the worktree is, against the state
MODIFIED = "modified"  # a file whose bytes differ (or a nested repository at another commit)
MODE = "mode"  # the same bytes, the executable bit flipped
MISSING = "missing"  # in the state, not on disk
EXTRA = "extra"  # on disk, not ignored, not in the state: a snapshot would take it
TYPE = "type"  # a file that is now a link, a directory or a nested repository, or back
KINDS = (MODIFIED, MODE, TYPE, MISSING, EXTRA)

_BATCH = 512  # files hashed by one worker at a time


@record(frozen=True)
class Difference:
    path: str
    kind: str  # one of ``KINDS``
    detail: str  # what differs, in words

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "kind": self.kind, "detail": self.detail}


@record
class Report:
    state: str  # the state's name: ``base``, ``0003``, ``0003.2``
    commit: str  # its snapshot commit
    files: int  # the state's entries checked (files, links, nested repositories)
    bytes_hashed: int
    seconds: float
    differences: list[Difference] = field(default_factory=list)
    not_compared: list[str] = field(default_factory=list)  # a filter converts them

    @property
    def matches(self) -> bool:
        return not self.differences

    def counts(self) -> dict[str, int]:
        return {kind: sum(1 for d in self.differences if d.kind == kind) for kind in KINDS}

    def to_json(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "snapshot": self.commit,
            "matches": self.matches,
            "files": self.files,
            "bytes_hashed": self.bytes_hashed,
            "seconds": round(self.seconds, 3),
            "counts": self.counts(),
            "differences": [d.to_json() for d in self.differences],
            "not_compared": list(self.not_compared),
        }


@record(frozen=True)
class _Entry:
    mode: str
    oid: str
    path: bytes


def _tree_entries(repo: Path, tree: str) -> list[_Entry]:
    out = git.git(repo, "ls-tree", "-r", "-z", "--full-tree", tree).stdout
    found: list[_Entry] = []
    for item in out.split(b"\0"):
        if item:
            meta, _, path = item.partition(b"\t")
            mode, _type, oid = meta.decode().split()
            found.append(_Entry(mode, oid, path))
    return found


def _blob_id(data: bytes, digits: int) -> str:
    """What ``git hash-object --no-filters`` names these bytes."""
    h = hashlib.sha1() if digits == 40 else hashlib.sha256()
    h.update(b"blob %d\0" % len(data))
    h.update(data)
    return h.hexdigest()


class _Disk:
    """The worktree as found, never through a link: a path whose parent is not a real
    directory is not there."""

    def __init__(self, root: bytes) -> None:
        self.root = root
        self._dirs: dict[bytes, bool] = {b"": True}

    def real_dir(self, rel: bytes) -> bool:
        known = self._dirs.get(rel)
        if known is None:
            parent = rel.rpartition(b"/")[0]
            try:
                known = self.real_dir(parent) and stat.S_ISDIR(
                    os.lstat(self.root + b"/" + rel).st_mode
                )
            except OSError:
                known = False
            self._dirs[rel] = known
        return known

    def lstat(self, rel: bytes) -> os.stat_result | None:
        if not self.real_dir(rel.rpartition(b"/")[0]):
            return None
        try:
            return os.lstat(self.root + b"/" + rel)
        except OSError:
            return None


def _what(st: os.stat_result | None, full: bytes) -> str:
    if st is None:
        return "nothing"
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link"
    if stat.S_ISDIR(st.st_mode):
        return "a nested repository" if os.path.lexists(full + b"/.git") else "a directory"
    if stat.S_ISREG(st.st_mode):
        return "a file"
    return "a special file"


_RECORDED_AS = {"120000": "a symbolic link", "160000": "a nested repository"}


def _name(path: bytes) -> str:
    return path.decode("utf-8", "surrogateescape")


def check(
    worktree: Path,
    commit: str,
    state: str,
    *,
    scratch: Path,
    on_progress: Callable[[int, int], None] | None = None,
) -> Report:
    """Compare the worktree with the snapshot ``commit`` (named ``state``), every byte.
    ``scratch``: a directory for a temporary index; ``on_progress(done, total)``."""
    t0 = time.monotonic()
    tree = git.tree_of(worktree, commit)
    entries = _tree_entries(worktree, tree)
    raw = exact.raw_entries(worktree, exact.raw_tree_of(worktree, commit))
    file_mode = git.git(worktree, "config", "--type=bool", "core.fileMode", check=False)
    exec_bits = file_mode.out.strip() != "false"
    disk = _Disk(os.fsencode(worktree))
    found: list[Difference] = []
    hashed = 0
    files: list[_Entry] = []
    for e in entries:
        full = disk.root + b"/" + e.path
        st = disk.lstat(e.path)
        recorded_as = _RECORDED_AS.get(e.mode, "a file")
        if st is None:
            found.append(Difference(_name(e.path), MISSING, f"{recorded_as} in the state"))
            continue
        now_as = _what(st, full)
        if e.mode == "160000":
            if now_as != recorded_as:
                found.append(Difference(_name(e.path), TYPE, f"{recorded_as} is {now_as}"))
                continue
            head = git.git(
                Path(os.fsdecode(full)), "rev-parse", "-q", "--verify", "HEAD", check=False
            )
            at = head.out.strip() if head.returncode == 0 else "no commit"
            if at != e.oid:
                found.append(
                    Difference(
                        _name(e.path), MODIFIED, f"nested repository at {at[:12]}, not {e.oid[:12]}"
                    )
                )
            continue
        if now_as != recorded_as:
            found.append(Difference(_name(e.path), TYPE, f"{recorded_as} is {now_as}"))
            continue
        if e.mode == "120000":
            try:
                target = os.readlink(full)
            except OSError:
                found.append(Difference(_name(e.path), MISSING, "the link went while read"))
                continue
            want = raw[_name(e.path)][1] if _name(e.path) in raw else e.oid
            if _blob_id(target, len(e.oid)) != want:
                found.append(Difference(_name(e.path), MODIFIED, "the link points elsewhere"))
            continue
        if exec_bits and bool(st.st_mode & 0o100) != (e.mode == "100755"):
            flip = "now executable" if st.st_mode & 0o100 else "no longer executable"
            found.append(Difference(_name(e.path), MODE, flip))
        files.append(e)

    total = len(files)
    digits = len(tree)
    mismatched: list[_Entry] = []

    def hash_batch(batch: list[_Entry]) -> tuple[int, list[tuple[_Entry, str | None]]]:
        size = 0
        out: list[tuple[_Entry, str | None]] = []
        for e in batch:
            data = read_regular(disk.root + b"/" + e.path)
            if data is None:
                out.append((e, None))
                continue
            size += len(data)
            out.append((e, _blob_id(data, digits)))
        return size, out

    batches = [files[i : i + _BATCH] for i in range(0, total, _BATCH)]
    done = 0
    with ThreadPoolExecutor(max_workers=min(4, (os.cpu_count() or 1) + 1)) as pool:
        for size, results in pool.map(hash_batch, batches):
            hashed += size
            for e, oid in results:
                name = _name(e.path)
                if oid is None:
                    found.append(Difference(name, MISSING, "could not be read"))
                elif oid != (raw[name][1] if name in raw else e.oid):
                    if name in raw:
                        found.append(Difference(name, MODIFIED, "its bytes differ"))
                    else:
                        mismatched.append(e)
            done += len(results)
            if on_progress is not None:
                on_progress(done, total)
    not_compared: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bar-verify-", dir=scratch) as tmp:
        index = Path(tmp) / "index"  # the state, for git to list what is beside it
        git.git(worktree, "read-tree", commit, env={"GIT_INDEX_FILE": str(index)})
        if mismatched:
            checkout = exact.recorded_checkout(worktree, commit) or {}
            found += _converted(worktree, index, Path(tmp), mismatched, not_compared, checkout)
        found += _extra(worktree, index, entries)
    found.sort(key=lambda d: (d.path, d.kind))
    return Report(
        state=state,
        commit=commit,
        files=len(entries),
        bytes_hashed=hashed,
        seconds=time.monotonic() - t0,
        differences=found,
        not_compared=sorted(not_compared),
    )


def _converted(
    worktree: Path,
    index: Path,
    tmp: Path,
    entries: list[_Entry],
    not_compared: list[str],
    checkout: dict[str, str],
) -> list[Difference]:
    """Of files whose bytes are not their blob's: those git's checkout of the blob would
    not write either (where git converts line endings, a file is what the checkout
    writes; elsewhere the checkout writes the blob, and they all differ). Those a
    ``filter`` attribute names go to ``not_compared``. ``checkout``: the line-ending
    configuration the state was recorded by (``exact.recorded_checkout``)."""
    names = [_name(e.path) for e in entries]
    plain = set(exact.unfiltered(worktree, names))
    not_compared += [n for n in names if n not in plain]
    out = tmp / "checkout"
    git.git(
        worktree,
        "checkout-index",
        "-f",
        "-z",
        "--stdin",
        f"--prefix={out}/",
        env=exact.with_config({"GIT_INDEX_FILE": str(index)}, checkout),
        check=False,
        input=b"".join(n.encode("utf-8", "surrogateescape") + b"\0" for n in sorted(plain)),
    )
    found = []
    for n in sorted(plain):
        want = read_regular(os.fsencode(out) + b"/" + n.encode("utf-8", "surrogateescape"))
        have = read_regular(os.fsencode(worktree) + b"/" + n.encode("utf-8", "surrogateescape"))
        if want is None or have != want:
            found.append(Difference(n, MODIFIED, "its bytes differ"))
    return found


def _extra(worktree: Path, index: Path, entries: Iterable[_Entry]) -> list[Difference]:
    """What a snapshot would take that the state does not hold: files no rule ignores,
    nested repositories, and ignored files the worktree's HEAD holds (git keeps a
    tracked file)."""
    env = {"GIT_INDEX_FILE": str(index)}
    others = git.git(worktree, "ls-files", "-z", "--others", "--exclude-standard", env=env)
    found = [
        Difference(
            _name(p.rstrip(b"/")),
            EXTRA,
            "a nested repository the state does not hold"
            if p.endswith(b"/")
            else "not in the state",
        )
        for p in others.stdout.split(b"\0")
        if p and (p.endswith(b"/") or _recordable(os.path.join(os.fsencode(worktree), p)))
    ]
    ignored = git.git(
        worktree, "ls-files", "-z", "--others", "--ignored", "--exclude-standard", env=env
    ).stdout
    ignored_paths = [p for p in ignored.split(b"\0") if p]
    if ignored_paths:
        held = git.git(
            worktree,
            "ls-tree",
            "-r",
            "-z",
            "--name-only",
            "HEAD",
            "--",
            *(f":(top,literal){_name(p)}" for p in ignored_paths[:2000]),
            check=False,
        ).stdout
        in_state = {e.path for e in entries}
        found += [
            Difference(_name(p), EXTRA, "ignored, but the worktree's HEAD holds it")
            for p in held.split(b"\0")
            if p and p not in in_state
        ]
    return found


def _recordable(full: bytes) -> bool:
    """A file a snapshot would take (not one it leaves out: ``side_index.unrecordable``)."""
    try:
        st = os.lstat(full)
    except OSError:
        return True
    return not stat.S_ISREG(st.st_mode) or unrecordable(os.fsdecode(full), st) is None


def mark_for_recording(index: Path, report: Report) -> list[str]:
    """Have the next look hash the files ``report`` found modified whatever their stat
    says (``bar.git.racy``); the paths marked. Files missing, extra or of another
    type change what a directory lists or a stat says: every look sees those."""
    from bar.git import racy

    paths = [d.path for d in report.differences if d.kind in (MODIFIED, MODE)]
    racy.add(index, paths)
    return paths
