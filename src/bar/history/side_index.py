"""The task's side index: the worktree written into it (``git add -A`` against
``GIT_INDEX_FILE``, never the worktree's own index) and the tree written from it.

The side index is seeded from the index that ``git worktree add`` just wrote for the base
commit: it holds the same entries ``read-tree <base>`` would, plus valid stat data, so the
first snapshot does not re-hash every file of the repository.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import signal
import stat
import subprocess
import time
from collections.abc import Collection, Sequence
from pathlib import Path

from bar import git
from bar.base import file_clock, speed
from bar.base.ids import TreeId
from bar.base.notices import brief, byte_size, warn
from bar.changes import fast
from bar.errors import BarError, GitError, SnapshotFailed
from bar.git import conversions, exact, fifos, ignored, racy
from bar.git.index_files import keep_private
from bar.store.files import open_regular, write_bytes_atomic
from bar.store.layout import AIDE_DIR, AIDE_FILES

_env = git.index_env


def seed_index(
    worktree: Path,
    index: Path,
    base_commit: str,
    git_dir: Path,
    common: Path,
    head: str | None = None,
) -> None:
    """Create the side index for a new task worktree, in git's index format 4 (paths
    prefix-compressed: about 40% smaller on a large tree) and split: its shared part, all
    the entries, lies in the task's own git directory ``git_dir`` (``make_git_dir``), and
    the index itself holds what changed since, so each snapshot's `git add` and
    `write-tree` write a small file, not the whole index (on a 40,000-file repository
    25 + 17 ms instead of 46 + 39). ``head``: the worktree's HEAD, where the caller
    just checked it out (else git is asked)."""
    import shutil

    admin = git.pinned_env(worktree).get("GIT_DIR")  # (its index: ``<admin>/index``)
    own = (
        Path(admin) / "index"
        if admin
        else Path(git.out(worktree, "rev-parse", "--path-format=absolute", "--git-path", "index"))
    )
    make_git_dir(git_dir, base_commit)
    git.pin_own(index.parent, git_dir, common, worktree)
    tmp = index.with_name(index.name + ".seed")
    if own.is_file():
        shutil.copyfile(own, tmp)
        racy.keep_time(own, tmp)
    else:
        git.git(worktree, "read-tree", base_commit, env=_env(tmp))
    git.git(worktree, "update-index", "--index-version", "4", env=_env(tmp))
    # (apart: an index whose version changes is written whole, not split)
    git.git(worktree, "update-index", "--split-index", env=_env(tmp))
    keep_private(tmp)
    os.replace(tmp, index)
    note_base_checkout(worktree, index)
    # what the checkout's stat cache was made under: a change before the first look is seen
    conversions.note(worktree, index, common)
    note_head(worktree, index, head)


def _base_checkout_path(index: Path) -> Path:
    return index.with_name(index.name + ".base_checkout")


def note_base_checkout(worktree: Path, index: Path) -> None:
    """Note the configuration git's checkout converted line endings by when it made the
    worktree (``exact.checkout_config``): the task's base is no snapshot of bar's, whose
    raw parent would say it, yet a rollback to it must write the bytes that were on disk
    then, whatever the configuration says now (docs/internals/git.md, "Exact bytes where git
    converts")."""
    said = json.dumps(exact.checkout_config(worktree), sort_keys=True).encode()
    with contextlib.suppress(OSError, BarError):
        write_bytes_atomic(_base_checkout_path(index), said + b"\n", durable=False)


def base_checkout(index: Path) -> dict[str, str] | None:
    """What ``note_base_checkout`` noted (None: nothing, as for a task made before it)."""
    try:
        found = json.loads(_base_checkout_path(index).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(found, dict):
        return None
    return {str(k): str(v) for k, v in found.items()}


# entries the written part of a split side index may hold before its next write starts
# a new shared part (``crowded``)
CROWDED = 256


def crowded(index: Path) -> bool:
    """Whether the written part of the split index ``index`` holds ``CROWDED`` entries or
    more. Git starts a new shared part once a fifth of the entries are new, but never for
    entries that replace shared ones; and it writes in the split part, as replacements,
    the entries that are racily clean when it splits (a task's side index is seeded right
    after ``git reset --hard`` wrote every file; a rollback writes the worktree and the
    index together). Those stay there on every later write, which then writes the whole
    index on top of the shared part it reads: the next write starts a new shared part
    instead. (Its header only: 12 bytes read.)"""
    try:
        with open(index, "rb") as f:
            head = f.read(12)
    except OSError:
        return False
    return len(head) == 12 and head[:4] == b"DIRC" and int.from_bytes(head[8:], "big") >= CROWDED


def make_git_dir(git_dir: Path, head: str) -> None:
    """Make the task's own git directory (``store.layout.TaskPaths.git_dir``), if it is
    not there: a ``HEAD`` at the commit ``head`` is all git needs to take it for one,
    given the repository's common directory."""
    if (git_dir / "HEAD").is_file():
        return
    from bar.store.files import ensure_dir, write_text_atomic

    ensure_dir(git_dir)
    write_text_atomic(git_dir / "HEAD", head + "\n")


def write_tree(
    worktree: Path, index: Path, excludes: Sequence[str] = (), recorded: str | None = None
) -> TreeId:
    """Stage the worktree's full state (tracked + untracked, not ignored) and write a tree.

    With ``recorded`` (the snapshot the side index was last stamped at), only what can
    have changed since is rescanned: see ``rescan.changed_since``.
    """
    return _write(
        worktree,
        index,
        excludes,
        fast.changed_since(worktree, index, recorded) if recorded else None,
    )


def _write(worktree: Path, index: Path, excludes: Sequence[str], scope: list[str] | None) -> TreeId:
    """Rescan ``scope`` (None: everything) into the side index and write its tree."""
    return write_whole(worktree, index, scope, excludes)[0]


def write_whole(
    worktree: Path,
    index: Path,
    scope: list[str] | None,
    excludes: Sequence[str] = (),
    suspects: Sequence[str] | None = None,
    *,
    renormalize: bool = False,
    left_out: Path | None = None,
    stamped_as: Path | None = None,
    unchanged: Collection[str] | None = None,
) -> tuple[TreeId, bool, list[str] | None]:
    """``_write``, whether every file of the scope could be read (``_add``), and the
    scope rescanned (None: everything, also when the given one could not be added as
    such). ``suspects``: files to hash whatever their stat (``bar.git.racy``; default: those
    noted for ``index``), added to the scope. ``renormalize``: git's conversions changed
    (``bar.git.conversions``): every recorded file is hashed anew, whatever its stat,
    and everything is rescanned. ``left_out``: where the files this look leaves out
    are noted, with those noted there before (``with_left_out``: the task's side index
    has them at ``left_out_file``). ``stamped_as``: the side index whose stamps hold for
    ``index`` (a copy of it at the state they were made for: a staging's).
    ``unchanged``: the stamped directories a look found unchanged since the stamps,
    which held for ``index`` then (``rescan.scan``): none of them gained an entry, so
    none became a nested repository."""
    if renormalize:
        reseed(worktree, index)
        scope = None
    # (before any git reads the worktree's rules; the rule files noted beside the
    # task's own side index, not beside a copy of it)
    fifos.refuse(worktree, scope, fifos.noted_rules(index) if left_out is not None else None)
    suspects = racy.suspects(index) if suspects is None else suspects
    if suspects:
        racy.force(worktree, index, suspects)
        if scope is not None:
            scope = sorted({*scope, *suspects})
    since = file_clock.floor()  # (before git looks at any file: see ``bar.git.racy``)
    stamps_of = stamped_as or index
    swallowed = _swallowed(worktree, index, stamps_of, not renormalize, unchanged)
    if swallowed:
        _unrecord(worktree, index, swallowed)
        if scope is not None:
            scope = sorted({*scope, *swallowed})
    # (the stamps held for the side index when the look began, and no gitlink was in
    # their tree: it holds none now, ``_unrecord`` and ``racy.force`` adding none)
    gitlinks = not (unchanged is not None and fast.holds_no_gitlink(stamps_of))
    unrooted = _unrooted(worktree, index) if scope != [] and gitlinks else []
    if unrooted:
        _unrecord(worktree, index, unrooted, whole=True)
        if scope is not None:
            scope = sorted({*scope, *unrooted})
    if scope:
        scope = outside_nested(worktree, scope)
    added = True if scope == [] else _add(worktree, index, scope or ["."], excludes, left_out)
    if added is False and scope:
        speed.fallback("a scope git could not add as such")
        added, scope = _add(worktree, index, ["."], excludes, left_out), None
    if renormalize:
        # once the index holds the worktree's own .gitattributes: within one ``git add``
        # git may still read those HEAD holds and the worktree no longer does
        _renormalize(worktree, index, excludes)
    if scope != []:
        # (what HEAD holds and the index does not, and the other way round: one look for
        # both; adding again files HEAD holds makes none of the others)
        head = git.head(worktree)
        versus = ignored.against_head(worktree, index, head) if head is not None else None
        _add_held_again(
            worktree, index, excludes, scope, None if versus is None else versus.get("D")
        )
        if scope is None:
            new = None if versus is None else versus.get("A", [])
            ignored.drop_newly_ignored(worktree, index, head, new)
    tree = _write_tree(worktree, index)
    if scope != []:
        racy.note(worktree, index, since, len(tree))
    keep_private(index)
    return tree, added is not None, scope


def _write_tree(worktree: Path, index: Path) -> TreeId:
    """The side index's tree (``git write-tree``, which may store its cache-tree).

    Writing the index back, git compares the bytes of an entry whose stat cannot tell
    (racily clean: changed in the second the index was written) through a mapping of the
    file, as ``git add`` does: a file cut short meanwhile kills it with SIGBUS, holding the
    side index's lock, and it is asked again, as the add is."""
    for reread in range(_REREADS + 1):
        try:
            return TreeId(git.out(worktree, "write-tree", env=_env(index)))
        except GitError as exc:
            if exc.returncode != -signal.SIGBUS:
                raise
            index.with_name(index.name + ".lock").unlink(missing_ok=True)
            if reread == _REREADS:
                raise SnapshotFailed(
                    "the worktree's state could not be stored in git: git write-tree died"
                    " of SIGBUS at each read",
                    hint=_UNSTABLE_HINT,
                ) from None
            time.sleep(min(0.05, 0.01 * (reread + 1)))
    raise AssertionError("unreachable")  # (the last reread returns or raises)


def head_path(index: Path) -> Path:
    return index.with_name(index.name + ".head")


def head_moved(worktree: Path, index: Path) -> bool:
    """Whether the worktree's HEAD moved since ``note_head`` (a step committed, reset, or
    the developer did by hand): the files HEAD holds are recorded whatever the ignore rules
    say (what the step committed is part of the step: docs/internals/record.md, "The record
    never lies"), so the side index starts over from it (``reseed``). HEAD is noted when
    the side index is made (``seed_index``); with nothing noted, nothing says it did not
    move: yes (the caller notes it once it reseeded)."""
    now = git.head(worktree)
    try:
        before = head_path(index).read_text().strip()
    except OSError:
        return now is not None
    return now is not None and before != now


def note_head(worktree: Path, index: Path, head: str | None = None) -> None:
    """Note the worktree's HEAD as the one the side index was last seeded for."""
    head = head or git.head(worktree)
    if head is not None:
        with contextlib.suppress(OSError, BarError):
            write_bytes_atomic(head_path(index), head.encode() + b"\n", durable=False)


def reseed(worktree: Path, index: Path) -> None:
    """Start the side index over from the worktree's HEAD, as the record's definition
    does (a fresh index holding HEAD, then ``git add -A``): every file is hashed anew
    through git's conversions as they are now (its stat cache would call them clean),
    and the files HEAD holds are kept whatever the ignore rules say. For a change of
    git's conversions (``bar.git.conversions``) or of HEAD. git's attributes come from
    the worktree, else from the index, which therefore holds HEAD's as git add begins."""
    # (the worktree's HEAD, named by its id: with the side index's environment, git's
    # HEAD is the task's own git directory's)
    head = git.head(worktree)
    res = (
        git.git(worktree, "read-tree", head, env=_env(index), check=False)
        if head is not None
        else None
    )
    if res is None or res.returncode != 0:  # (no HEAD to read: an unborn branch)
        git.git(worktree, "read-tree", "--empty", env=_env(index))


def renormalize(worktree: Path, index: Path) -> None:
    """Hash every file the side index holds anew through git's conversions as they are
    now: after a restore wrote bytes by the configuration a state was recorded with."""
    _renormalize(worktree, index, ())


def _renormalize(worktree: Path, index: Path, excludes: Sequence[str]) -> None:
    """Hash every file the side index holds anew through git's conversions as they are
    now (``git add --renormalize``: its stat cache would call them clean), with the
    attributes of the worktree's own ``.gitattributes`` files."""
    kept = () if os.path.islink(os.path.join(worktree, AIDE_DIR)) else AIDE_FILES
    specs = [":(top)", *(f":(top,exclude,literal){p}" for p in (*excludes, *kept))]
    git.git(
        worktree,
        "add",
        "--renormalize",
        "--ignore-errors",
        "--pathspec-from-file=-",
        "--pathspec-file-nul",
        env=_env(index),
        input=b"\0".join(s.encode("utf-8", "surrogateescape") for s in specs) + b"\0",
        check=False,
    )


def _add_held_again(
    worktree: Path,
    index: Path,
    excludes: Sequence[str],
    scope: Sequence[str] | None,
    gone: list[bytes] | None,
) -> None:
    """Add by force the files the worktree's HEAD holds that the side index does not
    (recorded gone) and that are on disk again: ``git add -A`` passes over such a file
    where an ignore rule now names it, yet the record's index starts from HEAD, and git
    keeps a file its index holds whatever the rules say. Only files and links made again
    (a directory where HEAD held a file is taken as ``git add -A`` takes it), none beyond
    a link or inside a nested repository. Within ``scope`` (None: everywhere): a file
    made again is a change the look saw there (a task that deleted thousands of the
    files HEAD holds would otherwise have each looked at again at every look). ``gone``:
    the files HEAD holds that the side index does not (``ignored.against_head``)."""
    if not gone:
        return
    kept = () if os.path.islink(os.path.join(worktree, AIDE_DIR)) else AIDE_FILES
    prefix = str(worktree) + os.sep
    real = os.path.realpath(worktree)
    back: list[str] = []
    within = None if scope is None else set(scope)
    for raw in gone:
        path = raw.decode("utf-8", "surrogateescape")
        if within is not None and not _within(path, within):
            continue
        if path in kept or excluded({path}, excludes):
            continue
        try:
            st = os.lstat(prefix + path)
        except OSError:
            continue  # (gone, as recorded)
        mode = st.st_mode
        if stat.S_ISREG(mode) and unrecordable(prefix + path, st) is not None:
            continue  # (not recorded: ``_too_large``)
        parent = os.path.dirname(path)
        beyond = parent and os.path.realpath(prefix + parent) != os.path.join(real, parent)
        made = stat.S_ISREG(mode) or stat.S_ISLNK(mode)
        if made and not beyond and outside_nested(worktree, [path]) == [path]:
            back.append(path)
    if back:
        git.git(
            worktree,
            "add",
            "-f",
            "--ignore-errors",
            "--pathspec-from-file=-",
            "--pathspec-file-nul",
            env=_env(index),
            input=b"".join(
                f":(top,literal){p}".encode("utf-8", "surrogateescape") + b"\0" for p in back
            ),
            check=False,
        )


def _within(path: str, scope: set[str]) -> bool:
    """Whether ``path`` is one of ``scope``, or below one."""
    while path:
        if path in scope:
            return True
        path = path.rpartition("/")[0]
    return "." in scope


def outside_nested(worktree: Path, scope: Sequence[str]) -> list[str]:
    """``scope`` with every path inside a nested repository (its files, its ``.git``)
    named by the repository itself, the outermost: nothing inside one is recorded, and
    git adds nothing at all for a repository named beside a path inside it (not even
    its gitlink, and says nothing)."""
    prefix = str(worktree) + os.sep
    holds_git: dict[str, bool] = {}  # directory -> whether it is a repository's root
    out: set[str] = set()
    for path in scope:
        parts = path.split("/")
        named = path
        for i in range(1, len(parts)):
            above = "/".join(parts[:i])
            found = holds_git.get(above)
            if found is None:
                found = holds_git[above] = os.path.lexists(prefix + above + "/.git")
            if found:
                named = above
                break
        out.add(named)
    return sorted(out)


def became_repositories(worktree: Path, index: Path, unchanged: Collection[str] | None) -> bool:
    """Whether a stamped directory a look found changed, and nothing in it to rescan, is
    now a nested repository: a ``.git`` moved or made in a directory whose other entries
    are stamped directories of their own names no path (a look skips ``.git``), yet git
    records the directory as one gitlink from then on (``_swallowed``, which the write it
    calls for runs). ``unchanged``: the directories the look found unchanged (None: it
    looked at everything, and the write runs anyway)."""
    return unchanged is not None and bool(_swallowed(worktree, index, index, True, unchanged))


def _swallowed(
    worktree: Path,
    index: Path,
    stamped_as: Path,
    stamped: bool = True,
    unchanged: Collection[str] | None = None,
) -> list[str]:
    """Directories of recorded files that are now nested repositories (a ``.git`` in
    them): git would go on taking their files from inside the foreign repository, where
    ``git add -A`` from a fresh index records one gitlink (and a path named inside one
    fails: "Pathspec ... is in submodule"). From the stamped directories (one stat
    each), else from the side index's entries: always where the side index was just
    started over from HEAD (``stamped`` False), whose files the stamps, made of the
    recorded state, may not hold. ``stamped_as``: the side index whose stamps hold for
    ``index`` (itself, or the one a staging copied); ``unchanged``: stamped directories a
    look found unchanged since (no ``.git`` made in one moves nothing else)."""
    dirs = fast.stamped_dirs(stamped_as) if stamped and speed.fast() else None
    if dirs is not None and unchanged:
        dirs = [d for d in dirs if d not in unchanged]
    if dirs is None:
        parents: set[bytes] = set()
        try:
            for block in git.entries(worktree, "ls-files", "-z", env=_env(index)):
                parents.update(_PARENT.findall(block))
        except GitError:
            parents = set()
        found: set[str] = set()
        for raw in parents:
            parent = raw.decode("utf-8", "surrogateescape")
            while parent and parent not in found:
                found.add(parent)
                parent = parent.rpartition("/")[0]
        dirs = sorted(found)
    prefix = str(worktree) + os.sep
    repos = [d for d in dirs if d and os.path.lexists(prefix + d + "/.git")]
    return [d for d in repos if not any(d.startswith(r + "/") for r in repos)]


def _unrooted(worktree: Path, index: Path) -> list[str]:
    """Gitlinks the side index holds, and the worktree's HEAD does not, where no nested
    repository is now (no ``.git`` in the directory: moved away, its directory swapped
    for a plain one): ``git add -A`` keeps such a gitlink, and takes none of the files
    in its directory, where from a fresh index holding HEAD it records those files. (A
    gitlink HEAD holds stays, as it does there.) One ``diff-index`` against HEAD's tree;
    with no HEAD yet, the index's entries."""
    head = git.head(worktree)
    if head is not None:
        res = git.git(
            worktree,
            "diff-index",
            "--cached",
            "-z",
            "--no-renames",
            "--diff-filter=AT",
            head,
            env=_env(index),
            check=False,
        )
        parts = res.stdout.split(b"\0") if res.returncode == 0 else []
        found = [
            os.fsdecode(path)
            for meta, path in zip(parts[::2], parts[1::2], strict=False)
            if meta.split(b" ")[1:2] == [b"160000"]
        ]
    else:
        res = git.git(worktree, "ls-files", "-s", "-z", env=_env(index), check=False)
        found = [
            os.fsdecode(entry.split(b"\t", 1)[1])
            for entry in (res.stdout.split(b"\0") if res.returncode == 0 else ())
            if entry.startswith(b"160000 ")
        ]
    prefix = str(worktree) + os.sep
    return [p for p in found if not os.path.lexists(prefix + p + "/.git")]


def _unrecord(worktree: Path, index: Path, dirs: Sequence[str], whole: bool = False) -> None:
    """Take out of the side index every entry under ``dirs`` (the caller adds each
    again: as the gitlink git records for a nested repository); ``whole``: each of
    ``dirs`` itself too (a gitlink no repository backs: its files are added instead)."""
    git.git(
        worktree,
        "rm",
        "--cached",
        "-r",
        "-f",  # (staged content is what the side index holds: nothing to keep)
        "-q",
        "--ignore-unmatch",
        "--pathspec-from-file=-",
        "--pathspec-file-nul",
        env=_env(index),
        input=b"".join(
            f":(top,literal){d}{'' if whole else '/'}".encode("utf-8", "surrogateescape") + b"\0"
            for d in dirs
        ),
    )


def excluded(paths: set[str] | None, excludes: Sequence[str]) -> set[str]:
    """Of ``paths``, those at or under one of ``excludes``."""
    return {p for p in paths or () for e in excludes if p == e or p.startswith(e + "/")}


def only_excluded(worktree: Path, path: str, excludes: Sequence[str]) -> bool:
    """Whether ``path`` holds nothing a snapshot takes: it is at or under one of
    ``excludes``, or a directory holding only such paths (the agent's settings bar
    installs for a step: rescanned, never in the tree)."""
    if excluded({path}, excludes):
        return True
    inside = [e for e in excludes if e.startswith(path + "/")]
    if not inside:
        return False
    try:
        names = os.listdir(os.path.join(worktree, path))
    except OSError:
        return False
    return all(f"{path}/{name}" in inside for name in names)


# What `git add --ignore-errors` says about a file it could not read (and so left out);
# any other complaint means the snapshot itself could not be written.
_UNREADABLE = re.compile(
    rb"^(error: open\(.*\): .*|error: unable to index file .*|error: read error while indexing .*"
    rb"|error: .*: can only add regular files, symbolic links or git-directories"
    rb"|error: '.*' does not have a commit checked out"
    rb"|fatal: adding files failed|warning: .*)$"
)


# git's words for a path that is no file, link or repository (a FIFO, a socket, a
# device), after its name: none is recorded, and a file recorded there before is gone
_SPECIAL = b": can only add regular files, symbolic links or git-directories"


# git's words for a file that changed while it read it (cut short under its read: "short
# read"; a large one, streamed into a pack, found with other bytes when read again:
# "unstable object source data"), and how many times a look reads again before it says so
_CHANGED_WHILE_READ = re.compile(
    rb"(?m)^(error: short read while indexing |fatal: confused by unstable object source data )"
)
_REREADS = 20  # (in a tmpfs, where a rewrite is quick, a saving loop races most reads)
_UNSTABLE_HINT = (
    f"a file changed under each of git's {_REREADS + 1} reads of it (a program rewriting it"
    " without pause); once it stops, run any bar command: the step is recorded then,"
    " nothing is lost"
)


def _add(
    worktree: Path,
    index: Path,
    paths: Sequence[str],
    excludes: Sequence[str],
    keep: Path | None = None,
) -> bool | None:
    """``git add -A`` the given paths ("." everything); the files it leaves out
    (``_too_large``) are noted in ``keep``, if given (``_note_left_out``).

    Returns False when a partial scope cannot be added as such (a pathspec matching
    nothing, a path now beyond a symbolic link): the caller then scans everything. Files
    that cannot be read are left out with a warning naming them (None is returned); any
    other failure (a full disk, an object that cannot be written) raises, so a step is
    never recorded as "no changes" when its changes simply could not be stored.
    """
    listed = _listed(worktree, index) if paths == ["."] else None
    answering = _answering_gitlinks(worktree, index, paths, listed)
    if answering:
        _unrecord(worktree, index, answering, whole=True)
        if paths != ["."]:
            paths = sorted({*paths, *answering})
    left_out = _too_large(worktree, index, paths, listed)
    noted = _note_left_out(worktree, keep, paths, left_out) if keep is not None else len(left_out)
    for why, reason in LEFT_OUT.items():
        these = [f for f, w in left_out.items() if w == why]
        if these:
            warn(
                f"{LEFT_OUT_SAID}{reason}: "
                + ", ".join(these[:10])
                + (f" and {len(these) - 10} more" if len(these) > 10 else "")
            )
    if noted > MOST_LEFT_OUT:
        raise SnapshotFailed(
            f"{noted:,} files of the worktree are not recorded (named above): git matches "
            "each against every file at every look, minutes a look, so nothing is "
            f"recorded while more than {MOST_LEFT_OUT:,} are there",
            hint="remove them, then run your next step or `bar doctor --repair`: what is "
            "pending is recorded then, nothing is lost",
        )
    large = list(left_out)
    if large:
        _unrecord(worktree, index, large, whole=True)
    # the paths left out first: git 2.39 walks only below the named paths' common
    # prefix, which it takes from the first pathspec, and then finds nothing in a new
    # directory of several levels named beside a path left out (``git add -A --
    # d/d/d/d/d/d/d/d/d/d ':(exclude).aide/decisions'`` adds none of its files, nor
    # ``t/a ':(exclude)zz'``): a file made in an empty directory bar had stamped went
    # unrecorded. One left out first makes the prefix empty: git walks from the top,
    # into the named paths only.
    specs = [f":(top,exclude,literal){p}" for p in (*excludes, *large)]
    specs += [":(top)" if p == "." else f":(top,literal){p}" for p in paths]
    rereads = 0
    for attempt in range(1, 3 + _REREADS):
        # aide's files bar keeps in the worktree (``bar.aide.place``): bookkeeping, left
        # out whatever ignores them or not; where .aide is a link there are none (and git
        # refuses a pathspec beyond a link: a link swapped in meanwhile, looked at again)
        kept = () if os.path.islink(os.path.join(worktree, AIDE_DIR)) else AIDE_FILES
        every = [*(f":(top,exclude,literal){p}" for p in kept), *specs]
        res = git.git(
            worktree,
            "-c",
            "advice.addEmbeddedRepo=false",  # (a nested repository is recorded as git does)
            "add",
            "-A",
            "--ignore-errors",
            "--pathspec-from-file=-",
            "--pathspec-file-nul",
            env=_env(index, reshare=crowded(index)),
            input=b"\0".join(s.encode("utf-8", "surrogateescape") for s in every) + b"\0",
            check=False,
        )
        changed_while_read = res.returncode == -signal.SIGBUS or (
            res.returncode != 0 and _CHANGED_WHILE_READ.search(res.stderr) is not None
        )
        if changed_while_read and rereads < _REREADS:
            if res.returncode < 0:  # (the git that died held the side index's lock)
                index.with_name(index.name + ".lock").unlink(missing_ok=True)
            # a file written while git read it (an editor saving): git stops at once, or
            # dies of SIGBUS where the file it had mapped was cut short; the add runs
            # again, and hashes the file as it is then
            rereads += 1
            time.sleep(min(0.05, 0.01 * rereads))
            continue
        if not (kept and attempt == 1 and b"exclude,literal).aide/" in res.stderr):
            break
    if res.returncode == 0:
        return True
    # a path of the scope that is ignored is not added (the rest is): git says so in a
    # closing block of path names and hints, which is no failure
    said = res.stderr.split(b"The following paths are ignored by one of your .gitignore")[0]
    said_lines = [
        line for line in said.splitlines() if line.strip() and not line.startswith(b"hint: ")
    ]
    if not said_lines and said != res.stderr and res.returncode == 1:
        return True
    if paths != ["."] and any(
        b"pathspec" in line.lower() or b"beyond a symbolic link" in line for line in said_lines
    ):
        return False  # (a path now inside a nested repository too: "Pathspec ... is in submodule")
    if said_lines and all(_UNREADABLE.match(line) for line in said_lines):
        special = [
            os.fsdecode(line[len(b"error: ") : -len(_SPECIAL)])
            for line in said_lines
            if line.startswith(b"error: ") and line.endswith(_SPECIAL)
        ]
        if special:  # (git keeps what its index held there: the record would say it is)
            _unrecord(worktree, index, special, whole=True)
        warn(f"some files were not recorded: {brief(said.decode('utf-8', 'replace'))}")
        return None
    raise SnapshotFailed(
        "the worktree's state could not be stored in git: "
        + (res.err.strip() or f"git add exited with {res.returncode}"),
        hint=_UNSTABLE_HINT if changed_while_read else _failed_hint(said_lines),
    )


_NO_SPACE = (b"no space left", b"disk quota", b"file too large")


LARGEST_FILE = 1 << 30  # bytes: a larger file is not recorded (``_too_large``)
# how a look's warning of the files it leaves out begins (``bar status``, which names
# them on a line of its own, leaves the warning out)
LEFT_OUT_SAID = "not recorded, "
LEFT_OUT = {
    "large": f"larger than {byte_size(LARGEST_FILE)} (bar records no larger file: its "
    "hashing, its patch and every rollback would take as long)",
    "holes": "mostly holes (sparse files, less than half ever written: bar records none, "
    "as hashing and diffing the holes would cost bar what making them did not)",
    "links": "hard links (files over 64 KiB with more than two names, or whose names "
    f"together pass {byte_size(LARGEST_FILE)}: bar records none of the names, as git "
    "would read, hash and patch the file once for each, and a link costs a step nothing)",
}


def _listed(worktree: Path, index: Path) -> tuple[list[str], list[str]]:
    """For a whole look, in one ``ls-files``: the side index's gitlinks, and the files
    git would hash (those it does not track, and those whose stat changed).

    ``-m`` compares the bytes of a file whose stat cannot tell (changed in the second
    the index was written) through a mapping of it, as ``git add`` does: a file cut
    short meanwhile kills it with SIGBUS, and it is asked again, as the add is."""
    for reread in range(_REREADS + 1):
        gitlinks: list[str] = []
        hashed: list[str] = []
        try:
            for block in git.entries(
                worktree,
                "ls-files",
                "-z",
                "-t",  # (each entry's kind first: ``?`` untracked, ``H`` held, ``C`` changed)
                "-s",
                "-o",
                "-m",
                "--exclude-standard",
                env=_env(index),
            ):
                # (all the untracked come first, the changed last: in order)
                hashed += map(os.fsdecode, _UNTRACKED.findall(block))
                hashed += map(os.fsdecode, _CHANGED.findall(block))
                gitlinks += map(os.fsdecode, _GITLINK.findall(block))
        except GitError as exc:
            if exc.returncode == -signal.SIGBUS and reread < _REREADS:
                time.sleep(min(0.05, 0.01 * (reread + 1)))
                continue
            said = exc.stderr.decode("utf-8", "replace").strip()
            raise SnapshotFailed(
                "the worktree's state could not be stored in git: "
                + (said or f"git ls-files exited with {exc.returncode}"),
                hint=_UNSTABLE_HINT if exc.returncode == -signal.SIGBUS else None,
            ) from None
        return gitlinks, hashed
    raise AssertionError("unreachable")  # (the last reread returns or raises)


# entries of ``ls-files -z`` (``_swallowed``: the directory a path is in) and of
# ``ls-files -z -t -s`` (``_listed``: "<tag> SP <mode> SP <object> SP <stage> TAB <path>",
# "? <path>" for a file not tracked), each after a NUL (``git.entries``)
_PARENT = re.compile(rb"\x00([^\x00]*)/[^\x00/]*")
_UNTRACKED = re.compile(rb"\x00\? ([^\x00]*)")
_CHANGED = re.compile(rb"\x00C [^\t\x00]*\t([^\x00]*)")
_GITLINK = re.compile(rb"\x00H 160000 [^\t\x00]*\t([^\x00]*)")


def _too_large(
    worktree: Path,
    index: Path,
    paths: Sequence[str],
    listed: tuple[list[str], list[str]] | None = None,
) -> dict[str, str]:
    """The files at or below ``paths`` ("." everywhere) that ``git add`` would take (not
    ignored, not inside a nested repository) and bar does not record, each with why
    (``unrecordable``: ``large``, ``links``, ``holes``). A step can make a file of any size at no
    cost (``truncate -s 100G``, a sparse file): git would read and hash all of it, and a
    patch of more than 2 GiB fails in git itself, so a task whose step made one could
    record no step again. Paths named are ``lstat``ed; below a directory, ``find``
    looks for files large enough to be any; everywhere, the files git would hash
    (those it does not track, and those whose stat changed) are. A file of holes or
    links a scoped look finds is one only if git would hash it, as in a whole look."""
    prefix = str(worktree) + os.sep
    folders: list[str] = []
    named = (listed or _listed(worktree, index))[1] if paths == ["."] else list(paths)
    found: dict[str, str] = {}
    for path in named:
        try:
            st = os.lstat(prefix + path)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            why = unrecordable(prefix + path, st)
            if why is not None:
                found[path] = why
        elif stat.S_ISDIR(st.st_mode) and paths != ["."]:
            folders.append(prefix + path)
    if folders:
        larger = ("-type", "f", "-size", f"+{HOLES_FROM // 1024}k", "-print0")
        deep = subprocess.run(
            ["find", *folders, "-name", ".git", "-prune", "-o", *larger],
            capture_output=True,
            check=False,
        ).stdout
        mine = os.fsencode(prefix)
        for full in deep.split(b"\0"):
            if not full.startswith(mine):
                continue
            try:
                st = os.lstat(full)
            except OSError:
                continue
            why = unrecordable(os.fsdecode(full), st)
            if why is not None:
                found[os.fsdecode(full[len(mine) :])] = why
    found = {f: why for f, why in found.items() if outside_nested(worktree, [f]) == [f]}
    if not found:
        return {}
    res = git.git(
        worktree,
        "check-ignore",
        "-z",
        "--stdin",
        env=_env(index),
        input=ignored.question(found),
        check=False,
    )
    ignored_ones = ignored.answered(res.stdout)
    found = {f: why for f, why in found.items() if f not in ignored_ones}
    # (a scoped look names what moved, a whole one what git would hash: a file whose
    # bytes are as recorded, holes dug in it or names given to it since where git does
    # not trust a ctime, is neither to either)
    unsure = (
        sorted(f for f, why in found.items() if why in ("holes", "links")) if paths != ["."] else []
    )
    if unsure:
        hashed = _ls_files(
            worktree, index, ("-z", "-o", "-m"), [f":(top,literal){f}" for f in unsure]
        )
        if hashed is not None:
            would = {os.fsdecode(p) for p in hashed.split(b"\0") if p}
            found = {f: why for f, why in found.items() if f in would or f not in unsure}
    return dict(sorted(found.items()))


_ARGS_AT_ONCE = 128 << 10  # bytes of pathspecs one ``git ls-files`` is given (ARG_MAX: 2 MiB)


def _ls_files(
    worktree: Path, index: Path, flags: Sequence[str], specs: Sequence[str]
) -> bytes | None:
    """What ``git ls-files FLAGS -- SPECS`` says, asked in as many calls as the pathspecs
    need (git 2.39's ls-files takes them as arguments only, and a step's ten thousand
    names of 200 bytes passed the kernel's bound on them); None if git failed."""
    if not specs:
        return b""  # (no pathspec at all would be every file)
    said: list[bytes] = []
    start, size = 0, 0
    for end, spec in enumerate([*specs, None]):
        if spec is not None and (size + len(spec) + 1 <= _ARGS_AT_ONCE or end == start):
            size += len(spec) + 1
            continue
        res = git.git(
            worktree, "ls-files", *flags, "--", *specs[start:end], env=_env(index), check=False
        )
        if res.returncode != 0:
            return None
        said.append(res.stdout)
        start, size = end, (len(spec) + 1 if spec is not None else 0)
    return b"".join(said)


def left_out_file(index: Path) -> Path:
    return index.with_name(index.name + ".left-out")


def _left_out(where: Path) -> dict[str, list[int]]:
    """The files the looks at the worktree left out (``unrecordable``), each with its
    inode and ctime when it was judged (``<index>.left-out``)."""
    try:
        with open(where, "rb") as f:
            said = json.loads(f.read())
    except (OSError, ValueError):
        return {}
    files = said.get("files") if isinstance(said, dict) else None
    if not isinstance(files, dict):
        return {}
    return {
        str(p): v
        for p, v in files.items()
        if isinstance(v, list) and len(v) == 2 and all(isinstance(n, int) for n in v)
    }


def still_left_out(worktree: Path, where: Path) -> dict[str, str]:
    """The files noted in ``where`` (``_note_left_out``) that the record still leaves
    out, each with why (``unrecordable``: a key of ``LEFT_OUT``), judged now."""
    prefix = str(worktree) + os.sep
    found: dict[str, str] = {}
    for path in sorted(_left_out(where)):
        try:
            st = os.lstat(prefix + path)
        except OSError:
            continue
        why = unrecordable(prefix + path, st) if stat.S_ISREG(st.st_mode) else None
        if why is not None:
            found[path] = why
    return found


MOST_LEFT_OUT = 1000  # files the record leaves out that a look may meet and go on


def _note_left_out(
    worktree: Path, where: Path, paths: Sequence[str], left_out: dict[str, str]
) -> int:
    """Keep in ``where`` the files a look at ``paths`` ("." everywhere) left out, with
    those an earlier look left out elsewhere that are still there (``with_left_out``);
    how many that is. Each is a pathspec of every ``git add`` of a whole look, which git
    matches against every file: ten thousand names of one file made each look of a
    5,000-file worktree take 8 s, forty thousand 57 s."""
    prefix = str(worktree) + os.sep
    within = set(paths)
    kept = {
        p: v
        for p, v in _left_out(where).items()
        if not _within(p, within) and os.path.lexists(prefix + p)
    }
    for path in left_out:
        try:
            st = os.lstat(prefix + path)
        except OSError:
            continue
        kept[path] = [st.st_ino, st.st_ctime_ns]
    if not kept:
        where.unlink(missing_ok=True)
        return 0
    write_bytes_atomic(where, json.dumps({"version": 1, "files": kept}).encode())
    return len(kept)


def with_left_out(worktree: Path, index: Path, scope: list[str] | None) -> list[str] | None:
    """``scope`` (what a scoped look covers; None: everything) with the files an
    earlier look left out (``unrecordable``) whose inode or ctime moved since: a file's
    verdict can change with no event on its name (a name of it removed elsewhere, for
    ``links``; a write through such a name, for ``large``), never without its ctime
    moving, and a whole look judges again every file git would hash. None (a whole
    look) when more moved than a scope should name (``_LISTED_APART``)."""
    if scope is None:
        return None
    prefix = str(worktree) + os.sep
    moved: list[str] = []
    for path, (ino, ctime_ns) in _left_out(left_out_file(index)).items():
        try:
            st = os.lstat(prefix + path)
        except OSError:
            continue  # (gone: never recorded, nothing to record)
        if (st.st_ino, st.st_ctime_ns) != (ino, ctime_ns):
            moved.append(path)
    if len(moved) > _LISTED_APART:
        speed.fallback("many files left out changed since the last look")
        return None
    return sorted({*scope, *moved}) if moved else scope


HOLES_FROM = 64 << 10  # bytes: a larger file mostly of holes, or of many names, is not recorded
MOST_NAMES = 2  # hard links a file over ``HOLES_FROM`` may have and be recorded


def unrecordable(path: str, st: os.stat_result) -> str | None:
    """Why the regular file at ``path`` (its ``lstat``, ``st``) is no file bar records,
    or None: it is recorded. Each is a file a step makes at no cost that would cost bar
    many times that to hash, diff and roll back, at every step:

    - ``large``: over ``LARGEST_FILE``;
    - ``links``: over ``HOLES_FROM`` and more than ``MOST_NAMES`` names (hard links:
      git reads a file once for each of its names, so ``ln`` a hundred times to a file
      of 100 MB made it hash 10 GB), or names whose sizes together pass
      ``LARGEST_FILE``. What a step makes bar read through links is then at most what
      it wrote, twice; a file of 64 KiB or less is read for each name, as any file;
    - ``holes``: over ``HOLES_FROM`` with less than half of it ever written (a sparse
      file: ``truncate -s 1000M`` costs a step a microsecond). What was written is
      asked of the file system (``SEEK_DATA``), not read from the file's blocks: a
      compressed file system counts fewer blocks than bytes for a file with no hole,
      and space given by ``fallocate``, which costs a step no more than a hole, is
      counted in blocks but holds no data.

    Each is judged by the file's own ``lstat`` alone (the names of a file share it), and
    only where git would hash the file (a name recorded before its file gained names
    stays recorded while its bytes are as recorded), so every look, scoped or whole,
    judges a file alike."""
    size = st.st_size
    if size > LARGEST_FILE:
        return "large"
    if size <= HOLES_FROM:
        return None
    if st.st_nlink > MOST_NAMES or st.st_nlink * size > LARGEST_FILE:
        return "links"
    return "holes" if _written(path, st) < size // 2 else None


def _written(path: str, st: os.stat_result) -> int:
    """The bytes of the file at ``path`` (its ``lstat``, ``st``) that are data, not
    holes, counted until half its size is reached (then that much: no more is needed).
    A file that is not as ``st`` says, before or after, counts as written whole: it is
    changing while looked at (an editor truncates, then writes), and git's own look
    judges it (it reads again a file that changes under it)."""
    size = st.st_size
    fd = _open_as_it_was(path, st)
    if fd is None:
        return size  # (changed, or git cannot read it either: it says so)
    try:
        data, at = 0, 0
        while at < size and data < size // 2:
            try:
                start = os.lseek(fd, at, os.SEEK_DATA)
                end = os.lseek(fd, start, os.SEEK_HOLE)
            except OSError as e:
                if e.errno == errno.ENXIO:
                    break  # (no data past ``at``, or the file was cut short: below)
                return size  # (the file system cannot say: taken as written)
            data += end - start
            at = end
        return data if _as_it_was(os.fstat(fd), st) else size
    finally:
        os.close(fd)


def _open_as_it_was(path: str, st: os.stat_result) -> int | None:
    """A descriptor to read the regular file ``path`` whose ``lstat`` was ``st``, or None
    if it is no longer that file or cannot be read (``open_regular``: nothing a
    directory swapped for a link leads to is opened)."""
    try:
        fd = open_regular(path, same_as=st)
    except OSError:
        return None
    if not _as_it_was(os.fstat(fd), st):
        os.close(fd)
        return None
    return fd


def _as_it_was(now: os.stat_result, st: os.stat_result) -> bool:
    return stat.S_ISREG(now.st_mode) and (
        now.st_ino,
        now.st_size,
        now.st_mtime_ns,
        now.st_ctime_ns,
    ) == (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


_LISTED_APART = 1000  # directories whose gitlinks are listed by name; more: all of them


def _answering_gitlinks(
    worktree: Path,
    index: Path,
    paths: Sequence[str],
    listed: tuple[list[str], list[str]] | None = None,
) -> list[str]:
    """The nested repositories at or below ``paths`` ("." everywhere) that the side
    index may hold as gitlinks. ``git add`` asks each gitlink it holds whether it is
    dirty with a ``git status`` inside the nested repository, which reads that
    repository's own configuration and attributes, all of them a step may write: a
    filter planted there would run with the developer's rights. Taken out of the side
    index first, each is added again as git adds a repository it has not seen (the
    commit its ``HEAD`` names, read from its refs; nothing is run inside it). A path of
    ``paths`` that is a repository is one (one stat each); below a directory, or
    everywhere, the side index's gitlinks whose directory holds a repository now."""
    prefix = str(worktree) + os.sep
    if paths == ["."]:
        found, below = list((listed or _listed(worktree, index))[0]), []
    else:
        found = [p for p in paths if os.path.lexists(prefix + p + "/.git")]
        below = [
            f":(top,literal){p}/"
            for p in paths
            if p not in found and os.path.isdir(prefix + p) and not os.path.islink(prefix + p)
        ]
    if below:
        if len(below) > _LISTED_APART:
            below = [":(top)"]  # (ls-files takes its pathspecs as arguments only)
        listed_below = _ls_files(worktree, index, ("-s", "-z"), below)
        if listed_below is None:
            raise SnapshotFailed(
                "the worktree's state could not be stored in git: git ls-files failed"
            )
        found += [
            os.fsdecode(entry.split(b"\t", 1)[1])
            for entry in listed_below.split(b"\0")
            if entry.startswith(b"160000 ") and b"\t" in entry
        ]
    return sorted({g for g in found if os.path.lexists(prefix + g + "/.git")})


def _failed_hint(lines: Sequence[bytes]) -> str | None:
    """What to do about a ``git add`` that failed: free space only where git said the
    disk is full (``SnapshotFailed``'s own hint); else what git refused, named."""
    if any(word in line.lower() for line in lines for word in _NO_SPACE):
        return None
    first = next((line for line in lines if line.startswith((b"fatal:", b"error:"))), None)
    said = (first or (lines[0] if lines else b"")).decode("utf-8", "replace").strip()
    return (
        f"git refused to add the worktree's files ({said or 'no reason given'}); fix what it"
        " names and run any bar command: the step is recorded then, nothing is lost"
    )
