"""The developer's checkout of a branch that ``apply`` moves: may it move, and moving it.

The branch may not move while a worktree is in the middle of a rebase, merge,
cherry-pick, revert, am or bisect of it: git would later put back the commit it started
from and drop the apply. Nor may any path the apply writes hold something git does not
know at the branch's commit: a changed or staged file, or an untracked or *ignored* one
(git itself counts ignored files as expendable; a developer's ``.env`` is not).

The update is git's own two-tree checkout split into steps that can each be run again:
the new index is built aside (a copy of the index with the touched entries, found equal to
the old commit's, set to the new one's: what ``read-tree -m old new`` makes of it, which
keeps the developer's unrelated staged changes and every other entry's stat data),
deleted paths are unlinked, the others written with ``checkout-index -f``, their stat data
noted, the index replaced, and the branch moved last with a compare-and-swap. Every path
it writes was found equal to the old commit first, so after a crash the same steps finish
the job. Its cost is in the paths it touches, not in the checkout's size, but for reading
and writing the index and one look at the touched files (``git status`` of those alone
where they are few: ``bar.git.FEW_PATHS``). Throughout, bar holds the checkout's
``index.lock`` (so no git command changes the index meanwhile) and writes into it a
marker naming the apply and its phase: recovery finishes an update only if it finds its
own marker saying the update had begun.

Every git command here, and every one ``bar.changes.apply`` runs to compute and land its commit,
goes through ``bar.git.safe.SafeGit``, which runs nothing an agent could have planted.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from bar import git
from bar.base import beneath, faults
from bar.base.notices import note, plural, warn
from bar.base.progress import Progress
from bar.base.record import record
from bar.changes import guarded
from bar.errors import DirtyWorktree, GitStateError
from bar.git import racy
from bar.git.safe import SafeGit

GITLINK = "160000"
ABSENT = "000000"
_LITERAL = {"GIT_LITERAL_PATHSPECS": "1"}
# the entries of ``ls-files -z -v`` with a tag other than "H" (tracked, nothing set), in
# its output with a NUL put before the first (a pattern that begins with a plain byte is
# sought at C's speed; one that may begin anywhere is tried at every byte)
_FLAGGED = re.compile(rb"\0([^H\0]) ([^\0]*)")

# (file in a worktree's admin directory, what is in progress, how to end it)
_OPERATIONS = (
    ("rebase-merge", "a rebase", "git rebase --continue or git rebase --abort"),
    ("rebase-apply", "a rebase", "git rebase --continue or git rebase --abort"),
    ("MERGE_HEAD", "a merge", "git merge --continue or git merge --abort"),
    ("CHERRY_PICK_HEAD", "a cherry-pick", "git cherry-pick --continue or --abort"),
    ("REVERT_HEAD", "a revert", "git revert --continue or git revert --abort"),
    ("sequencer", "a cherry-pick or revert", "git cherry-pick (or revert) --continue or --abort"),
    ("BISECT_LOG", "a bisect", "git bisect reset"),
)


@record(frozen=True)
class Change:
    """One path that differs between two trees (no rename detection)."""

    old_mode: str
    new_mode: str
    old_blob: str
    new_blob: str
    path: str

    @property
    def in_old(self) -> bool:
        return self.old_mode != ABSENT

    @property
    def in_new(self) -> bool:
        return self.new_mode != ABSENT


def changes(safe: SafeGit, repo: Path, old: str, new: str) -> list[Change]:
    raw = safe.git(repo, "diff-tree", "-r", "-z", "--no-renames", "--raw", old, new).stdout
    parts = raw.split(b"\0")
    found: list[Change] = []
    for meta, path in zip(parts[::2], parts[1::2], strict=False):
        old_mode, new_mode, old_blob, new_blob, _status = meta.decode().lstrip(":").split(" ")
        found.append(
            Change(old_mode, new_mode, old_blob, new_blob, path.decode("utf-8", "surrogateescape"))
        )
    return found


# --- a git operation in progress ---------------------------------------------------


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return ""


def refuse_mid_operation(
    common: Path, branch: str, task_branch: Callable[[Path], str | None] = lambda _: None
) -> None:
    """Raise if ``branch`` is checked out, rebased or bisected in a worktree where a git
    operation is under way. Read from each worktree's admin directory (under the
    repository's ``common`` git directory) as git does: during a rebase or bisect HEAD
    is detached, and only these files name the branch. ``task_branch``: the branch of
    the task whose worktree is at a path (None: no task's); a task's worktree holds its
    own branch alone, and its admin directory is the step's to write, so what it says
    of another branch (a rebase of ``main`` in progress) is passed over."""
    ref = f"refs/heads/{branch}"
    linked = common / "worktrees"
    admins = [common, *sorted(linked.iterdir() if linked.is_dir() else [])]
    for admin in admins:
        uses = ref in (
            _read(admin / "HEAD").removeprefix("ref: "),
            _read(admin / "rebase-merge" / "head-name"),
            _read(admin / "rebase-apply" / "head-name"),
        ) or _read(admin / "BISECT_START") in (branch, ref)
        busy = [op for op in _OPERATIONS if (admin / op[0]).exists()] if uses else []
        if not busy:
            continue
        gitdir_file = _read(admin / "gitdir")  # a linked worktree names its .git file
        where = gitdir_file and str(Path(gitdir_file).parent)
        owner = task_branch(Path(where)) if where else None
        if owner is not None and owner != branch:
            continue
        _name, what, end = busy[0]
        if (admin / "rebase-apply" / "applying").exists():
            what, end = "a git am", "git am --continue or git am --abort"
        where = where or git.worktree_list(common)[0]["worktree"]
        raise GitStateError(
            f"{branch} is in the middle of {what} in {where}; applying now would move the "
            f"branch under git's feet; nothing was changed",
            hint=f"finish it there ({end}), then apply again",
        )


# --- what is in the way --------------------------------------------------------------


def blocking_paths(
    safe: SafeGit, checkout: Path, old: str, new: str, found: list[Change] | None = None
) -> list[str]:
    """Paths that keep an update of ``checkout`` from ``old`` to ``new`` (commits or
    trees; ``found``: their ``changes``, if known) from being safe: every touched path
    must be clean there (not changed, staged, assumed unchanged or skipped), no
    unresolved conflict anywhere, and no untracked or ignored file where the update
    writes a file or makes a directory."""
    found = changes(safe, checkout, old, new) if found is None else found
    touched = {c.path for c in found}
    blocked: set[str] = set()
    # the touched paths looked at alone where they are few; git matches every entry of
    # the index against every path named, so past a few dozen one look at all is cheaper
    named = sorted(touched) if len(touched) <= git.FEW_PATHS else []
    # (a submodule's HEAD is compared, but no git is run inside it: its configuration is
    # the agent's to plant as well; what it prints is short: the paths not clean)
    status = safe.start(
        checkout,
        "status",
        "--porcelain=v1",
        "-z",
        "--untracked-files=no",
        "--no-renames",
        "--ignore-submodules=dirty",
        *(["--", *named] if named else []),
        env=_LITERAL if named else None,
    )
    # meanwhile, every entry's tag: an unresolved conflict anywhere ("M": one line per
    # side), and the touched paths git would not look at (assumed unchanged: lower
    # case; skipped)
    # (read as it comes: a million entries are 40 MB, held whole two or three times over)
    for block in safe.entries(checkout, "ls-files", "-z", "-v"):
        for tag, raw in _FLAGGED.findall(block):  # (all but the plain "H")
            path = raw.decode("utf-8", "surrogateescape")
            if tag in b"Mm" or ((tag.islower() or tag == b"S") and path in touched):
                blocked.add(path)
    for item in status.result().stdout.split(b"\0"):
        xy, path = item[:2].decode(errors="replace"), item[3:].decode("utf-8", "surrogateescape")
        if path in touched or "U" in xy or xy in ("AA", "DD"):
            blocked.add(path)
    return sorted(blocked | _untracked_in_the_way(checkout, found))


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return path.lstat()
    except (FileNotFoundError, NotADirectoryError):
        return None


def _untracked_in_the_way(checkout: Path, found: list[Change]) -> set[str]:
    """What is on disk, tracked at neither commit, where the update adds a path: the path
    itself, a leading directory that is not a directory (a file, a symlink), or the files
    inside a directory the update turns into a file."""
    tracked = {c.path for c in found if c.in_old}
    removed = {c.path for c in found if not c.in_new}
    blocked: set[str] = set()
    for c in found:
        if c.path in tracked or c.new_mode == GITLINK:
            continue  # deleted or changed in place (the clean check covers it), a submodule
        reachable = True
        for parent in map(str, reversed(PurePosixPath(c.path).parents[:-1])):
            st = None if parent in tracked else _lstat(checkout / parent)
            if st is None or not stat.S_ISDIR(st.st_mode):
                blocked.update([parent] if st is not None else [])
                reachable = False  # nothing below it is on disk, or it is already named
                break
        st = _lstat(checkout / c.path) if reachable else None
        if st is None:
            continue
        if not stat.S_ISDIR(st.st_mode):
            blocked.add(c.path)
            continue
        blocked.update(_files_under(checkout, c.path))
    return blocked - removed


def _files_under(checkout: Path, rel: str) -> list[str]:
    """Everything but directories below ``rel`` (symlinks to directories included)."""
    found: list[str] = []
    for root, dirs, files in os.walk(checkout / rel):
        here = Path(root).relative_to(checkout).as_posix()
        links = [d for d in dirs if os.path.islink(os.path.join(root, d))]
        found += [f"{here}/{name}" for name in files + links]
    return found


# --- the update ----------------------------------------------------------------------


def _admin(checkout: Path) -> Path:
    return git.admin_dir(checkout)


def _marker(token: str, phase: str) -> bytes:
    return f"bar apply {token} {phase}\n".encode()


def _refuse_links(checkout: Path, admin: Path, paths: tuple[Path, ...]) -> None:
    """Refuse to apply where a file bar writes in the checkout's admin directory is a
    link, or no file nor directory: the checkout of a task (``--target`` another task's
    branch), whose admin directory its steps write, would have bar read or write through
    it. Any bar command on that task moves such a link aside."""
    for path in paths:
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            continue
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise GitStateError(
                f"{path} is a link or a special file: bar does not write through it; "
                "nothing was changed",
                hint=f"if {checkout} is a task's worktree, any bar command on that task "
                "moves it aside (bar status --task ID); then apply again",
            )


def lock(checkout: Path, token: str) -> None:
    """Take the checkout's ``index.lock`` for the apply named ``token`` (phase
    "checking": nothing written yet)."""
    path = _admin(checkout) / "index.lock"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        raise _busy(checkout, path) from None
    try:
        os.write(fd, _marker(token, "checking"))
    finally:
        os.close(fd)
    faults.point("after locking the checkout's index")


def busy(checkout: Path) -> GitStateError | None:
    """What ``lock`` would raise now: another git holds the checkout's index (None: no
    one does)."""
    path = _admin(checkout) / "index.lock"
    return _busy(checkout, path) if os.path.lexists(path) else None


def _busy(checkout: Path, lock: Path) -> GitStateError:
    return GitStateError(
        f"{lock} exists: another git command is running in {checkout}; nothing was changed",
        hint="apply again when it has finished (if no git is running, remove that file)",
    )


def _mark_updating(checkout: Path, token: str) -> None:
    fd = os.open(_admin(checkout) / "index.lock", os.O_WRONLY)
    try:
        os.pwrite(fd, _marker(token, "updating"), 0)  # same length: one small write
    finally:
        os.close(fd)


def lock_phase(checkout: Path, token: str) -> str | None:
    """The phase ("checking" or "updating") of the apply named ``token`` if it holds the
    checkout's index lock, else None."""
    try:
        held = (_admin(checkout) / "index.lock").read_bytes()
    except OSError:
        return None
    return next((p for p in ("checking", "updating") if held == _marker(token, p)), None)


def unlock(checkout: Path, token: str) -> None:
    if lock_phase(checkout, token) is not None:
        (_admin(checkout) / "index.lock").unlink()


def advance(
    safe: SafeGit,
    checkout: Path,
    branch: str,
    old: str,
    new: str,
    *,
    token: str,
    reason: str,
    found: list[Change] | None = None,
) -> None:
    """Bring ``checkout`` (whose lock ``token`` holds, every touched path found clean)
    from ``old`` to ``new`` (``found``: their ``changes``, if known): index, files, then
    the branch. Running it again after a crash at any point between its writes ends in
    the same state."""
    import shutil  # only where an apply writes a checkout

    _mark_updating(checkout, token)
    faults.point("after marking the checkout's update as begun")
    admin = _admin(checkout)
    index, staged = admin / "index", admin / "index.bar-apply"
    written = admin / "bar-apply-files"  # where files are written before they move in
    _refuse_links(checkout, admin, (index, staged, written))
    for leftover in (staged, staged.with_name(staged.name + ".lock")):
        leftover.unlink(missing_ok=True)  # from an attempt that was killed
    shutil.rmtree(written, ignore_errors=True)
    if index.exists():
        shutil.copyfile(index, staged, follow_symlinks=False)
        racy.keep_time(index, staged)
    env = git.index_env(staged)
    found = changes(safe, checkout, old, new) if found is None else found
    if staged.exists():  # the touched entries, found clean, of new instead of old
        safe.git(checkout, "update-index", "-z", "--index-info", env=env, input=_entries(found))
    else:
        safe.git(checkout, "read-tree", "-m", "-i", old, new, env=env)
    faults.point("after writing the checkout's new index")
    guard = _guard(safe, checkout, admin, _algorithm(new))
    guard.hand_back()  # (captured by an attempt that was killed)
    for c in found:
        if not c.in_new:
            _remove(checkout, c, guard)
    landing = [c.path for c in found if c.in_new]
    if landing:
        # each file is written aside and renamed into place: a kill leaves every touched
        # path either the old version or the new one, never half-written
        paths = b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in landing)
        with Progress(f"apply: writing {plural(len(landing), 'file')} into {checkout}") as shown:
            shown.update()
            os.mkdir(written, 0o700)  # (made here, a directory: git writes through no link)
            safe.git(
                checkout,
                "checkout-index",
                "-f",
                "-z",
                "--stdin",
                f"--prefix={written}/",
                env=env,
                input=paths,
            )
            for c in found:
                if c.in_new:
                    _move_in(written / c.path, c, guard)
        shutil.rmtree(written, ignore_errors=True)
        guard.settle()
        git.refresh(safe.git, checkout, [c.path for c in found if c.in_new], env)
    guard.close()
    _tell_raced(checkout, guard.raced, new)
    faults.point("after writing the checkout's files")
    os.replace(staged, index)
    faults.point("after replacing the checkout's index")
    safe.update_ref(checkout, f"refs/heads/{branch}", new, old, reason)


def _entries(found: list[Change]) -> bytes:
    """What ``git read-tree -m OLD NEW`` changes in an index whose touched entries are
    OLD's, as lines of ``update-index -z --index-info``: the paths that go first (a file
    may leave where a directory comes), then the new version of every other. Every other
    entry is kept as it was, its stat data and the developer's staged changes with it."""
    gone = [c for c in found if not c.in_new]
    kept = [c for c in found if c.in_new]
    lines = [b"0 %s\t%s\0" % (c.new_blob.encode(), _raw(c.path)) for c in gone]
    lines += [
        b"%s %s\t%s\0" % (c.new_mode.encode(), c.new_blob.encode(), _raw(c.path)) for c in kept
    ]
    return b"".join(lines)


def _raw(path: str) -> bytes:
    return path.encode("utf-8", "surrogateescape")


def _algorithm(oid: str) -> str:
    """The hash algorithm of object id ``oid`` (git's two: SHA-1, SHA-256)."""
    return "sha256" if len(oid) == 64 else "sha1"


def _guard(safe: SafeGit, checkout: Path, admin: Path, algo: str) -> guarded.Guard:
    """Writes into ``checkout`` that never overwrite a save that raced them."""

    def converted(rel: str, file: Path) -> str | None:
        res = safe.git(checkout, "hash-object", f"--path={rel}", "--", str(file), check=False)
        return res.out.strip() if res.returncode == 0 else None

    return guarded.Guard(checkout, admin / "bar-apply-aside", algo, converted)


def _tell_raced(checkout: Path, raced: list[guarded.Raced], new: str) -> None:
    """Say which files changed while the apply wrote them, and where they are."""
    paths = guarded.by_path(raced)
    if not paths:
        return
    shown = ", ".join(
        rel + "".join(f" (kept as {k.name})" for k in kept if k != checkout / rel)
        for rel, kept in list(paths.items())[:10]
    )
    warn(
        f"{plural(len(paths), 'file')} in {checkout} changed while bar applied "
        f"{git.short(new)}, and {'was' if len(paths) == 1 else 'were'} kept as changed: "
        f"{shown}{', ...' if len(paths) > 10 else ''}; `git diff` there shows them against "
        "the applied commit"
    )


def _move_in(source: Path, change: Change, guard: guarded.Guard) -> None:
    """Put a written file (or link) in the checkout in place of the old version, unless
    what is there changed since it was found clean (``bar.changes.guarded``)."""
    if change.new_mode == GITLINK:
        # git writes no file for a gitlink: an empty directory where nothing is (the file
        # it replaces removed first, unless it changed since it was found clean)
        was = change.old_blob if change.in_old and change.old_mode != GITLINK else None
        if was is not None and not guard.remove(change.path, (was,)):
            return
        guard.make_dir(change.path)
        return
    if not os.path.lexists(source):
        return
    st = beneath.lstat_beneath(guard.root, change.path)
    if st is not None and stat.S_ISDIR(st.st_mode):
        guard.remove_dir(change.path)  # emptied by the removals before
    old = change.old_blob if change.in_old and change.old_mode != GITLINK else None
    # (the new version there already: written by an attempt that was killed)
    guard.replace(change.path, (old, change.new_blob), source, change.new_blob)


def _remove(checkout: Path, change: Change, guard: guarded.Guard) -> None:
    """Delete a path the update removes (unless it changed since it was found clean),
    then the directories it leaves empty."""
    st = beneath.lstat_beneath(checkout, change.path)
    if st is not None and not stat.S_ISDIR(st.st_mode):
        guard.remove(change.path, (change.old_blob,))
    elif st is not None and change.old_mode == GITLINK:
        guard.remove_dir(change.path)  # a submodule with content in it stays, as git leaves it
    # (a directory at a removed file's path was made by the update itself, for the paths
    # below it, before a crash: it stays)
    guard.prune(change.path)


def resume(
    safe: SafeGit, checkout: Path, branch: str, old: str, new: str, *, token: str, reason: str
) -> bool:
    """Finish an update a dead bar began (its lock says "updating"); release a lock it
    held while still checking. True if an update was finished."""
    phase = lock_phase(checkout, token)
    tip = git.rev_parse(checkout, f"refs/heads/{branch}")
    finished = False
    if phase == "updating":
        _clear_own_ref_locks(checkout, branch)
    if phase == "updating" and tip == old:
        odd = _neither(safe, checkout, changes(safe, checkout, old, new))
        if odd:
            raise DirtyWorktree(
                f"bar was stopped while applying {git.short(new)} to {branch} in {checkout}, "
                f"and these files have changed there since: {', '.join(odd[:10])}; finishing "
                "the apply would overwrite them",
                hint="move them out of the checkout (or undo the changes), then run the "
                "command again: it finishes the apply",
            )
        advance(safe, checkout, branch, old, new, token=token, reason=reason)
        finished = True
    elif phase == "updating" and tip != new:
        warn(
            f"{branch} was moved while bar's interrupted apply held {checkout}; some files "
            "there may be the apply's: check `git status` there"
        )
    unlock(checkout, token)
    return finished


def _clear_own_ref_locks(checkout: Path, branch: str) -> None:
    """A bar killed inside the update's last ``git update-ref`` leaves what that git had
    locked: the branch's ``.lock`` and, the branch being the checkout's ``HEAD``, the
    checkout's ``HEAD.lock`` too (git locks both, moves the branch, then lets ``HEAD.lock``
    go: a kill between leaves it behind a branch already moved, and every later commit
    there fails on it). Either, made after bar marked its own index lock "updating" (still
    held: it is ours, and its bar is dead), is that update-ref's, and is removed."""
    try:
        marked = (_admin(checkout) / "index.lock").stat().st_mtime_ns
    except FileNotFoundError:
        return
    for name in (f"refs/heads/{branch}.lock", "HEAD.lock"):
        lock = Path(git.out(checkout, "rev-parse", "--path-format=absolute", "--git-path", name))
        try:
            made = lock.stat().st_mtime_ns
        except FileNotFoundError:
            continue
        if made >= marked:
            lock.unlink(missing_ok=True)
            note(f"removed {lock}: left by the interrupted apply's git update-ref")


def _neither(safe: SafeGit, checkout: Path, found: list[Change]) -> list[str]:
    """Touched paths whose file is neither absent nor the old or the new version (changed
    since the update was interrupted, so redoing it would lose work)."""
    algo = _algorithm(found[0].new_blob) if found else "sha1"  # (no path: nothing hashed)
    touched = {c.path for c in found}
    odd: list[str] = []
    files: list[Change] = []
    for c in found:
        st = _lstat(checkout / c.path)
        if st is None or GITLINK in (c.old_mode, c.new_mode) or "\n" in c.path:
            continue
        if stat.S_ISDIR(st.st_mode):  # one the update was making or emptying
            odd += [p for p in _files_under(checkout, c.path) if p not in touched]
        elif stat.S_ISREG(st.st_mode):
            files.append(c)
        elif stat.S_ISLNK(st.st_mode):
            target = os.readlink(os.fsencode(checkout / c.path))
            import hashlib  # only for a symbolic link

            blob = hashlib.new(algo, b"blob %d\0" % len(target) + target).hexdigest()
            odd += [c.path] if blob not in (c.old_blob, c.new_blob) else []
        else:
            odd.append(c.path)
    if files:
        listed = "".join(c.path + "\n" for c in files).encode("utf-8", "surrogateescape")
        blobs = safe.git(checkout, "hash-object", "--stdin-paths", input=listed).out.split()
        odd += [
            c.path
            for c, blob in zip(files, blobs, strict=True)
            if blob not in (c.old_blob, c.new_blob)
        ]
    return sorted(odd)
