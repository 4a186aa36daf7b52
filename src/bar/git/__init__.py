"""Small typed functions over one ``git()`` helper.

Always argument lists, ``-z`` and ``--no-ext-diff`` where output is parsed, never a shell.
Per-call variables such as ``GIT_INDEX_FILE`` go into a copy of the environment.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from bar.base import faults
from bar.base.ids import CommitId, TreeId
from bar.base.ids import is_object_id as is_object_id  # (what a record may hand to git)
from bar.base.ids import short as short  # (how bar shows an object id)
from bar.base.proc import Result, Started, clean_env, run
from bar.base.proc import pieces as read_pieces
from bar.base.proc import start as start_child
from bar.base.record import record
from bar.errors import GitError
from bar.store.files import open_regular

# at most this many paths are named to git in one command: it matches each entry of
# the index against every path named (at 40,000 entries, ten cost half a look at every
# file, sixty about as much as the whole look; a refresh of a hundred, two thirds)
FEW_PATHS = 64


# Snapshot commits are bar's own records, not the developer's: a fixed identity means a
# missing user.name never stops a step.
BAR_IDENTITY = {
    "GIT_AUTHOR_NAME": "bar",
    "GIT_AUTHOR_EMAIL": "bar@localhost",
    "GIT_COMMITTER_NAME": "bar",
    "GIT_COMMITTER_EMAIL": "bar@localhost",
}

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


# Task worktrees whose git directories bar names itself (``bar.model.tasks``): git run there
# by bar reads neither the worktree's ``.git`` file nor its admin directory's
# ``commondir``, which a step can write (a commondir pointed at a repository the step
# made would have bar's git read that repository's config, filters included).
_PINNED: dict[str, dict[str, str]] = {}


def pin(worktree: Path, git_dir: Path, common_dir: Path) -> None:
    _PINNED[str(worktree)] = {
        "GIT_DIR": str(git_dir),
        "GIT_COMMON_DIR": str(common_dir),
        "GIT_WORK_TREE": str(worktree),
    }


# Task directories whose indexes (the side index, and copies of it made there) git reads
# and writes with the task's own git directory (``bar.model.tasks``): the side index is split,
# its shared part kept there, where no step can write (``store.layout.TaskPaths.git_dir``).
_OWN: dict[str, tuple[str, str, str]] = {}


def pin_own(task_dir: Path, own: Path, common: Path, worktree: Path) -> None:
    _OWN[str(task_dir)] = (str(own), str(common), str(worktree))


def own_git_dir(index: Path) -> Path | None:
    """The git directory of the task whose directory holds ``index`` (made or not)."""
    for folder in (index.parent, index.parent.parent):
        found = _OWN.get(str(folder))
        if found is not None:
            return Path(found[0])
    return None


def pinned_env(
    repo: Path | str, env: Mapping[str, str] | None = None, *, network: bool = False
) -> Mapping[str, str]:
    """``env`` plus the git directories bar pinned for ``repo`` (if it is a worktree),
    and, unless ``network``, ``NO_TRANSPORT`` (which ``env`` cannot undo); always
    ``NO_OPTIONAL_WRITES``."""
    fixed = _PINNED.get(str(repo))
    return {
        **(fixed or {}),
        **(env or {}),
        **({} if network else NO_TRANSPORT),
        **NO_OPTIONAL_WRITES,
    }


def pinned_common_dir(repo: Path | str) -> Path | None:
    fixed = _PINNED.get(str(repo))
    return Path(fixed["GIT_COMMON_DIR"]) if fixed else None


def git(
    repo: Path | str,
    *args: str,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    input: bytes | None = None,
    network: bool = False,
) -> Result:
    """Run bar's own git in ``repo`` (``NO_PROGRAMS``; no remote is reached unless
    ``network``: only ``bar.share.remotes`` asks)."""
    pinned = pinned_env(repo, env, network=network)
    return run(
        "git",
        *(NO_PROGRAMS if not network else NO_HOOKS),
        "-C",
        str(repo),
        *args,
        env=pinned,
        check=check,
        input=input,
        error=GitError,
    )


def entries(repo: Path | str, *args: str, env: Mapping[str, str] | None = None) -> Iterator[bytes]:
    """The output of ``git ... -z`` (entries each ended by a NUL) as it comes, in blocks of
    whole entries: each entry after a NUL, the block's last one running to its end, so
    that a pattern beginning with a NUL finds each entry once and whole. For a listing of
    a whole tree or index, which at a million files is 80–140 MB, held whole two or three
    times over by ``git`` (the pieces read, joined, split): more than the rest of what bar
    holds. Raises ``GitError`` as ``git`` does, once the output has ended."""
    rest = b""
    for piece in read_pieces(
        "git", *NO_PROGRAMS, "-C", str(repo), *args, env=pinned_env(repo, env), error=GitError
    ):
        data = rest + piece
        cut = data.rfind(b"\0")
        if cut < 0:  # (no entry ends in it yet)
            rest = data
            continue
        yield b"\0" + data[:cut]
        rest = data[cut + 1 :]
    if rest:  # (git ends every entry with a NUL: only an output cut short)
        yield b"\0" + rest


# bar's own git takes no orders from a configuration a step could have written
# (docs/sandbox.md, "What bar does on the step's behalf"). It runs no hook and no fsmonitor
# (a developer's or a planted program must not fire on bar's plumbing, nor fail it:
# reference-transaction runs on every update-ref; bar knows what changed by itself), signs
# nothing, and reaches no remote: ``GIT_ALLOW_PROTOCOL`` empty overrides every
# ``protocol.<name>.allow`` a configuration sets, so an object missing from a repository
# with a promisor remote is never "fetched" through a transport that runs a program
# (``ext::``, a local ``uploadpack``, ssh); ``GIT_NO_LAZY_FETCH`` says the same to a git
# that knows it. External diffs and text conversions are off by the flags of every diff bar
# parses (``DIFF_FLAGS``, ``--no-textconv``), filters by ``bar.git.safe`` where a checkout
# could run one, and the one configuration file of a worktree's a step could write
# (``config.worktree``) is read-only in the step's mount namespace (``bar.sandbox``).
NO_HOOKS = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false")
# nor does it warn of, or refuse, a line ending it converts (``core.safecrlf``): bar
# records what git stores, and a warning reaches the developer's terminal as noise (it
# spans lines where a path holds a newline)
NO_PROGRAMS = (
    *NO_HOOKS,
    "-c",
    "submodule.recurse=false",  # (a nested repository's git, and its configuration, never run)
    "-c",
    "protocol.allow=never",
    "-c",
    "commit.gpgSign=false",
    "-c",
    "core.safecrlf=false",
)
NO_TRANSPORT = {"GIT_ALLOW_PROTOCOL": "", "GIT_NO_LAZY_FETCH": "1"}
# A nested repository is foreign (docs/internals/record.md, "Nothing is destroyed that was
# not recorded"): bar never writes inside it. Yet ``git add`` and ``git diff-files`` ask
# each gitlink whether it is dirty with a ``git status`` of their own inside it, which
# refreshes and rewrites its index (split, with a ``sharedindex.*``, when the side index's
# ``core.splitIndex`` reaches it through the environment, as every ``GIT_CONFIG_*`` does).
# ``GIT_OPTIONAL_LOCKS=0`` makes every git below bar's skip such writes (bar's own index
# writes take their lock all the same).
NO_OPTIONAL_WRITES = {"GIT_OPTIONAL_LOCKS": "0"}


def start(
    repo: Path | str,
    *args: str,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    input: bytes | None = None,
) -> Started:
    """``git`` started now, its result read later (``Started.result()``): for a question
    whose answer is needed only after other work, which it then runs beside."""
    return start_child(
        "git",
        *NO_PROGRAMS,
        "-C",
        str(repo),
        *args,
        env=pinned_env(repo, env),
        check=check,
        input=input,
        error=GitError,
    )


def out(repo: Path | str, *args: str, env: Mapping[str, str] | None = None) -> str:
    return git(repo, *args, env=env).out.strip()


def rev_parse(repo: Path | str, rev: str) -> str | None:
    """The object id ``rev`` names, or None."""
    res = git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", rev, check=False)
    return res.out.strip() if res.returncode == 0 else None


def head(repo: Path | str) -> CommitId | None:
    """``rev_parse(repo, "HEAD")``. In a worktree whose git directories bar pinned, read
    from the files git would read (``HEAD``, then the branch's loose ref or its line in
    ``packed-refs``) without starting git, which costs more than the answer on every
    step; git is asked whenever they hold anything else (a symbolic ref to a symbolic
    ref, a branch found nowhere, another ref storage)."""
    fixed = _PINNED.get(str(repo))
    if fixed is not None:
        found = _read_head(fixed["GIT_DIR"], fixed["GIT_COMMON_DIR"])
        if found is not None:
            return found
    said = rev_parse(repo, "HEAD")
    return CommitId(said) if said is not None else None


_BRANCH_RE = re.compile(rb"^ref: (refs/heads/[^\x00-\x20\x7f~^:?*\[\\]+)\n?$")


def _opened(path: str | bytes) -> int:
    """A descriptor of the regular file at ``path``, for reading: a file of a nested
    repository a step made may be a named pipe, which a plain ``open`` waits on for
    ever, or a link to a device, which opening acts on (``OSError``: none such)."""
    return open_regular(path, follow=True)


def read_small(path: str | bytes, most: int = 4097) -> bytes:
    """The first ``most`` bytes of the regular file at ``path`` (``OSError``: there is
    none: missing, a directory, a named pipe)."""
    with os.fdopen(_opened(path), "rb") as f:
        return f.read(most)


def _read_head(git_dir: str, common_dir: str) -> CommitId | None:
    try:
        said = read_small(os.path.join(git_dir, "HEAD"))
    except OSError:
        return None
    if is_object_id(said.rstrip(b"\n").decode("ascii", "replace")):
        return CommitId(said.rstrip(b"\n").decode())  # detached
    named = _BRANCH_RE.match(said)
    ref = named.group(1) if named is not None else b".."
    if any(bad in ref for bad in (b"..", b"/.", b"@{", b"//")) or ref.endswith((b".lock", b"/")):
        return None  # no name git would give a branch: let git say what it makes of it
    return read_ref(common_dir, ref)


def read_ref(common_dir: str | Path, ref: bytes) -> CommitId | None:
    """The commit a branch's loose ref, else its line in ``packed-refs``, names; None when
    neither holds one (git may still know better: another ref storage, a symbolic ref)."""
    try:
        value = read_small(os.path.join(os.fsencode(common_dir), ref))
        said = value.rstrip(b"\n").decode("ascii", "replace")
        return CommitId(said) if is_object_id(said) else None
    except (FileNotFoundError, NotADirectoryError):
        pass
    except OSError:
        return None
    try:
        with os.fdopen(_opened(os.path.join(common_dir, "packed-refs")), "rb") as f:
            # (a line at a time, each at most a ref's length: a file of a nested
            # repository a step made may be gigabytes with no line end)
            while line := f.readline(8192):
                sha, _, name = line.rstrip(b"\n").partition(b" ")
                if name == ref:
                    found = sha.decode("ascii", "replace")
                    return CommitId(found) if is_object_id(found) else None
    except OSError:
        pass
    return None


def ref_commit(common_dir: Path, repo: Path | str, ref: str) -> str | None:
    """The commit the branch ``ref`` names: read from its files (``read_ref``) where they
    hold it, else asked of git in ``repo``; None if it names none."""
    return read_ref(common_dir, ref.encode()) or rev_parse(repo, ref)


def absolute_alternates(store: Path) -> bytes | None:
    """The object store ``store``'s ``info/alternates`` (where else git finds objects)
    with each path made absolute as git reads it, from ``store``; None when it names no
    store by a relative path (what ``git clone --shared`` with a relative path writes).
    Only a regular file is read (``read_regular``)."""
    from bar.store.files import read_regular  # (not loaded for every git call)

    lines = [ln.strip() for ln in (read_regular(store / "info" / "alternates") or b"").splitlines()]
    if not any(ln and not ln.startswith((b"/", b"#")) for ln in lines):
        return None
    here = os.fsencode(store)
    return b"".join(
        (ln if not ln or ln.startswith((b"/", b"#")) else os.path.normpath(os.path.join(here, ln)))
        + b"\n"
        for ln in lines
    )


def resolve_commit(repo: Path | str, rev: str) -> CommitId | None:
    """The commit ``rev`` names (a tag peeled), or None."""
    said = rev_parse(repo, f"{rev}^{{commit}}")
    return CommitId(said) if said is not None else None


def has_commit(repo: Path | str) -> bool:
    return rev_parse(repo, "HEAD^{commit}") is not None


def current_branch(repo: Path | str) -> str | None:
    res = git(repo, "symbolic-ref", "--quiet", "--short", "HEAD", check=False)
    return res.out.strip() if res.returncode == 0 else None


def local_branches(repo: Path | str) -> list[str]:
    """The names of the repository's branches (``refs/heads/``), the most recently
    committed first."""
    listed = git(
        repo, "for-each-ref", "--sort=-committerdate", "--format=%(refname)", "refs/heads/"
    )
    return [r.removeprefix("refs/heads/") for r in listed.out.splitlines() if r]


def branch_exists(repo: Path | str, branch: str) -> bool:
    return rev_parse(repo, f"refs/heads/{branch}") is not None


def check_branch_name(repo: Path | str, branch: str) -> bool:
    return git(repo, "check-ref-format", "--branch", branch, check=False).returncode == 0


def reflog_message(text: str) -> str:
    """``text`` as one line of a reflog: each control character (a NUL, which no command
    line can carry, a newline, an escape) a space, runs of spaces one, at most 500
    characters. A message may come from what a step wrote (its branch's reflog in its
    quarantine): bar's git must take it whatever it holds."""
    return " ".join("".join(" " if ord(c) < 32 or ord(c) == 127 else c for c in text).split())[:500]


def update_ref(repo: Path | str, ref: str, new: str, old: str | None, message: str) -> None:
    """Move ``ref`` to ``new`` only if it still points at ``old`` (compare-and-swap).

    ``old=None`` requires that the ref does not exist yet.
    """
    expected = old if old is not None else ""  # (empty: must not exist, in any object format)
    faults.point(f"before moving {ref}")
    git(repo, "update-ref", "-m", reflog_message(message), ref, new, expected, env=as_common(repo))
    faults.point(f"after moving {ref}")


def as_common(repo: Path | str) -> dict[str, str] | None:
    """For a ref moved from a task's worktree: its repository's git directory taken as
    the one git works in, so that git writes nothing in the worktree's admin directory
    (which a step writes). Moving the branch the worktree's ``HEAD`` names, git would
    append to that ``HEAD``'s reflog there (``logs/HEAD``), through a link a step left
    in its place (to ``~/.bashrc``, with a message the step chose). None: ``repo`` is
    no worktree bar pinned (a checkout of the developer's, whose git directory no step
    writes)."""
    fixed = _PINNED.get(str(repo))
    if fixed is None or fixed["GIT_DIR"] == fixed["GIT_COMMON_DIR"]:
        return None
    return {"GIT_DIR": fixed["GIT_COMMON_DIR"]}


def ref_lock_path(repo: Path | str, ref: str) -> Path:
    """The file git creates to lock ``ref`` while it moves it (``<ref>.lock`` in the
    repository's common git directory, where refs live)."""
    dot_git = Path(repo) / ".git"
    if dot_git.is_dir() and not dot_git.is_symlink():
        return dot_git / f"{ref}.lock"  # a main worktree's .git is the common directory
    return Path(out(repo, "rev-parse", "--path-format=absolute", "--git-path", f"{ref}.lock"))


def delete_ref(repo: Path | str, ref: str, *, check: bool = True) -> None:
    git(repo, "update-ref", "-d", ref, check=check)


# The side index is bar's, not the repository's: whatever the repository says of stat
# data (``core.trustctime=false``, ``core.checkStat=minimal``), a file whose ctime moved
# is hashed again, or a same-size rewrite with its mtime put back would go unrecorded;
# and no entry is marked assume-unchanged (``core.ignoreStat``), or none would be looked
# at again.
_FULL_STAT = (
    ("core.trustctime", "true"),
    ("core.checkStat", "default"),
    ("core.ignoreStat", "false"),
)


def index_env(index: Path, *, reshare: bool = False) -> dict[str, str]:
    """The environment that makes git use ``index`` instead of the worktree's own; for an
    index in a task's directory, with the task's own git directory once it is made
    (``pin_own``), which holds the shared part of a split index. The side index is
    written split; a copy of it (in a folder of the task's directory: a look that must
    write nothing of the task's) is written whole, so that no shared part is written
    for it. ``reshare``: a split index's next write starts a new shared part
    (``bar.history.side_index.crowded``)."""
    env = {"GIT_INDEX_FILE": str(index)}
    pairs: list[tuple[str, str]] = []
    for folder, split in ((index.parent, "true"), (index.parent.parent, "false")):
        found = _OWN.get(str(folder))
        if found is not None:
            pairs += _FULL_STAT  # (a task's side index, or a copy of it)
            if os.path.isdir(found[0]):
                env["GIT_DIR"], env["GIT_COMMON_DIR"], env["GIT_WORK_TREE"] = found
                pairs.append(("core.splitIndex", split))
                if split == "true" and index.name.startswith("index.staged."):
                    # a copy the watcher may throw away (``bar.changes.fast.staging``): git must not
                    # remove an old shared part the side index still uses
                    pairs.append(("splitIndex.sharedIndexExpire", "never"))
                if split == "true" and reshare:
                    pairs.append(("splitIndex.maxPercentChange", "0"))
            break
    for n, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{n}"], env[f"GIT_CONFIG_VALUE_{n}"] = key, value
    if pairs:
        env["GIT_CONFIG_COUNT"] = str(len(pairs))
    return env


_TREES: dict[str, TreeId] = {}  # commit id -> its tree: an object never changes
_TREES_KEPT = 4096  # a long-lived process (``bar ui``) starts over past this many


def tree_of(repo: Path | str, commit: str) -> TreeId:
    """The tree of ``commit`` (remembered: an object never changes)."""
    known = _TREES.get(commit)
    if known is not None:
        return known
    tree = TreeId(out(repo, "rev-parse", "--verify", f"{commit}^{{tree}}"))
    if is_object_id(commit):  # a name (HEAD, a branch) can move; an object id cannot
        if len(_TREES) >= _TREES_KEPT:
            _TREES.clear()
        _TREES[commit] = tree
    return tree


def note_tree(commit: str, tree: str) -> None:
    """Remember ``commit``'s tree, learnt without asking ``tree_of`` (one lookup of many)."""
    if is_object_id(commit) and is_object_id(tree):
        if len(_TREES) >= _TREES_KEPT:
            _TREES.clear()
        _TREES[commit] = TreeId(tree)


def commit_tree(
    repo: Path | str,
    tree: str,
    parents: Sequence[str],
    message: str,
    *,
    identity: Mapping[str, str] | None = None,
) -> str:
    args = ["commit-tree", tree]
    for parent in parents:
        args += ["-p", parent]
    # an argument that is not UTF-8 (a file name) is written as a \x escape
    data = message.encode("utf-8", "backslashreplace")
    return git(repo, *args, env=identity, input=data).out.strip()


@record(frozen=True)
class FileStat:
    path: str
    additions: int
    deletions: int
    binary: bool


@record(frozen=True)
class DiffStat:
    files: int
    additions: int
    deletions: int
    file_list: tuple[str, ...]

    def to_record(self) -> dict[str, object]:
        return {
            "files": self.files,
            "additions": self.additions,
            "deletions": self.deletions,
            "file_list": list(self.file_list),
        }

    @classmethod
    def empty(cls) -> DiffStat:
        return cls(0, 0, 0, ())


DIFF_FLAGS = ("--no-ext-diff", "--no-textconv", "--no-color", "-M")

# The environment of every diff of two trees or commits bar runs: no index. Given one,
# git takes a blob's bytes from the worktree file the index notes with the same stat
# (and a diff naming a gitlink loads the worktree's index); a file removed between git's
# look at its stat and its read is then taken as empty, without an error (git 2.39,
# diff.c, ``reuse_worktree_file``): a rollback's patch, written as the rollback removed
# a file, had the deletion with none of its lines. No file can be made at this path, so
# git reads no index and every byte from the objects.
#
# And a blob larger than ``LINE_DIFF_LARGEST`` is diffed as binary (``core.bigFileThreshold``
# in a diff): git's line diff holds some 40 bytes a line of each side, twice where a
# patch is written and counted at once, so a file of a billion newlines, which a step
# writes in a second, took tens of GB and minutes to record (a 40 MB file of two-byte
# lines: 0.9 GB and 7.9 s; diffed as binary, 46 MB and 0.16 s). Its binary patch replays
# as a line patch does; it is counted as binary (``-``), not in lines. git weighs a
# blob's size before its bytes only where it counts lines or is asked for no binary
# patch: a ``--binary`` patch alone reads every blob first (``diff_patch_args``).
LINE_DIFF_LARGEST = 8 << 20
TREES_ONLY: Mapping[str, str] = {
    "GIT_INDEX_FILE": "/proc/self/no-index",
    "GIT_CONFIG_COUNT": "1",
    "GIT_CONFIG_KEY_0": "core.bigFileThreshold",
    "GIT_CONFIG_VALUE_0": str(LINE_DIFF_LARGEST),
}


def numstat(repo: Path | str, a: str, b: str) -> DiffStat:
    """Files, added and deleted lines between two trees or commits (renames detected)."""
    if a == b:  # (a task with no step yet: its record is its base)
        return parse_numstat(b"")
    raw = git(repo, "diff", *DIFF_FLAGS, "--numstat", "-z", a, b, "--", env=TREES_ONLY).stdout
    return parse_numstat(raw)


def touching(raw: bytes, paths: Sequence[str]) -> list[str]:
    """Which of ``paths`` a ``git diff --numstat -z`` output names (both names of a
    rename); a path that ends in ``/`` stands for every file beneath it (those named are
    returned)."""
    parts = raw.split(b"\0")
    names: set[str] = set()
    i = 0
    while i < len(parts):
        fields = parts[i].split(b"\t", 2)
        if len(fields) < 3:  # the empty field at the end
            i += 1
        elif fields[2]:
            names.add(fields[2].decode("utf-8", "surrogateescape"))
            i += 1
        else:  # a rename: its old and new names follow as fields of their own
            names.update(p.decode("utf-8", "surrogateescape") for p in parts[i + 1 : i + 3])
            i += 3
    exact = [p for p in paths if p in names]
    folders = tuple(p for p in paths if p.endswith("/"))
    return exact + sorted(n for n in names if folders and n.startswith(folders))


def parse_numstat(raw: bytes) -> DiffStat:
    """``git diff --numstat -z`` output as a ``DiffStat``: a rename (``-M``) is one file
    of the count, as git counts it, and both its names are in ``file_list`` (every path
    the change touches, as a diff without rename detection lists them)."""
    files, names = file_stats(raw)
    return DiffStat(
        files=len(files),
        additions=sum(f.additions for f in files),
        deletions=sum(f.deletions for f in files),
        file_list=tuple(names),
    )


def may_rename(raw: bytes) -> bool:
    """Whether ``git diff --numstat -z --no-renames`` output could hold a rename: a file
    that lost no line (or is binary, or empty) beside another that gained none."""
    files, _ = file_stats(raw)
    gained = [f for f in files if f.binary or f.deletions == 0]
    lost = [f for f in files if f.binary or f.additions == 0]
    return any(g is not x for g in gained for x in lost[:2])


def file_stats(raw: bytes) -> tuple[list[FileStat], list[str]]:
    """The files of ``git diff --numstat -z`` output (a rename under its new name), and
    every path it names (a rename's two)."""
    parts = raw.split(b"\0")
    files: list[FileStat] = []
    names: list[str] = []
    i = 0
    while i < len(parts):
        head = parts[i]
        if not head:
            i += 1
            continue
        fields = head.split(b"\t", 2)
        adds, dels = fields[0], fields[1]
        path_field = fields[2] if len(fields) > 2 else b""
        if path_field:
            path = path_field
            i += 1
        else:  # a rename: the old and new paths follow as separate fields
            path = parts[i + 2]
            names.append(parts[i + 1].decode("utf-8", "surrogateescape"))
            i += 3
        binary = adds == b"-"
        files.append(
            FileStat(
                path.decode("utf-8", "surrogateescape"),
                0 if binary else int(adds),
                0 if binary else int(dels),
                binary,
            )
        )
        names.append(files[-1].path)
    return files, names


def diff_patch_args(
    a: str, b: str, *paths: str, with_numstat: bool = False, binary: bool = True
) -> list[str]:
    """The ``git diff`` that makes a replayable patch from ``a`` to ``b`` (of ``paths``
    alone, if given: literal); ``with_numstat``: preceded by its ``--numstat -z`` block
    and a NUL (one diff for both). Without rename detection: a rename git pairs across a
    change of shape (a symbolic link ``x`` that became ``x/y``) is a patch ``git apply``
    refuses ("beyond a symbolic link"), while a deletion and an addition replay whatever
    the shapes. ``binary`` False: a binary file's section says only that it differs
    (``Binary files ... differ``), which does not replay; asked for binary patches with
    no numstat, git reads every changed blob whole before it weighs its size, and diffs
    one larger than ``LINE_DIFF_LARGEST`` line by line (``TREES_ONLY``)."""
    stat = ["--numstat", "-z", "--patch"] if with_numstat else []
    shape = ["--binary"] if binary else []
    named = [f":(literal){p}" for p in paths]
    return [
        "diff",
        *DIFF_FLAGS[:3],
        "--no-renames",
        *stat,
        *shape,
        "--full-index",
        a,
        b,
        "--",
        *named,
    ]


def diff_numstat_args(a: str, b: str) -> list[str]:
    """The ``git diff`` giving the numstat block of ``diff_patch_args(a, b,
    with_numstat=True)`` alone (``-z``: each entry ends with a NUL)."""
    return ["diff", *DIFF_FLAGS[:3], "--no-renames", "--numstat", "-z", a, b, "--"]


@record(frozen=True)
class RawChange:
    status: str  # A, M, D, T (renames are split into D + A: -M is not used here)
    src_mode: str
    dst_mode: str
    dst_blob: str
    path: str
    src_blob: str = ""  # (all zeros where the path was not there)


# the last few ``diff_trees`` git gave, by repository and the two ids: a tree never
# changes, and one restore asks for the same pair from several places
_TREE_DIFFS: dict[tuple[str, str, str], Result] = {}
_TREE_DIFFS_KEPT = 2


def diff_trees(
    repo: Path | str, a: str, b: str, *, trees: bool = True, check: bool = True
) -> Result:
    """``git diff-tree -r -z --no-renames --raw A B``: every path that differs between
    two trees (or commits), with ``trees`` the trees that differ too (``-t``); git asked
    once for a pair of object ids, whichever of the two is asked."""
    key = (str(repo), a, b)
    res = _TREE_DIFFS.get(key)
    if res is None:
        res = git(repo, "diff-tree", "-r", "-t", "-z", "--no-renames", "--raw", a, b, check=check)
        if res.returncode == 0 and is_object_id(a) and is_object_id(b):
            while len(_TREE_DIFFS) >= _TREE_DIFFS_KEPT:
                del _TREE_DIFFS[next(iter(_TREE_DIFFS))]
            _TREE_DIFFS[key] = res
    if trees or res.returncode != 0:
        return res
    return Result(res.cmd, 0, _without_trees(res.stdout), res.stderr)


def _without_trees(raw: bytes) -> bytes:
    """``diff-tree -t``'s output without its trees' entries: what it gives without
    ``-t`` (a tree that becomes a file, or back, is a removal and an addition)."""
    parts = raw.split(b"\0")
    kept = [
        meta + b"\0" + path + b"\0"
        for meta, path in zip(parts[::2], parts[1::2], strict=False)
        if b"040000" not in (meta[1:7], meta[8:14])
    ]
    return b"".join(kept)


def refresh(
    run_git: Callable[..., Result], where: Path, paths: Sequence[str], env: Mapping[str, str]
) -> None:
    """Note in the index ``env`` names (``index_env``) the stat data of ``paths``, files
    just written in ``where`` as that index holds them: those alone where they are few
    (``FEW_PATHS``), else every entry's (a stat of every file). A file changed since
    stays changed, as after any refresh. ``run_git``: ``git``, or a ``SafeGit``'s."""
    if 0 < len(paths) <= FEW_PATHS:
        literal = {**env, "GIT_LITERAL_PATHSPECS": "1"}
        if (
            run_git(where, "add", "--refresh", "--", *paths, env=literal, check=False).returncode
            == 0
        ):
            return
    run_git(where, "update-index", "-q", "--refresh", env=env, check=False)


def diff_tree_raw(repo: Path | str, a: str, b: str) -> list[RawChange]:
    """Every path that differs between two trees, without rename detection."""
    raw = diff_trees(repo, a, b, trees=False).stdout
    parts = raw.split(b"\0")
    changes: list[RawChange] = []
    i = 0
    while i + 1 < len(parts):
        meta = parts[i].decode()
        if not meta.startswith(":"):
            i += 1
            continue
        src_mode, dst_mode, src, dst, status = meta[1:].split(" ")
        path = parts[i + 1].decode("utf-8", "surrogateescape")
        changes.append(RawChange(status[0], src_mode, dst_mode, dst, path, src))
        i += 2
    return changes


def admin_dir(checkout: Path | str) -> Path:
    """A checkout's own git directory, as ``git rev-parse --absolute-git-dir`` names it,
    read from its ``.git`` as git reads it (a directory, or a file ``gitdir: PATH`` in a
    linked worktree) without starting git; git answers when it is anything else. A task
    worktree's is the one bar pinned (its ``.git`` file is the step's to write)."""
    fixed = _PINNED.get(str(checkout))
    if fixed is not None:
        return Path(out(checkout, "rev-parse", "--absolute-git-dir"))
    dot = os.path.join(checkout, ".git")
    if os.path.isdir(dot):
        return Path(os.path.realpath(dot))
    try:
        with open(dot, "rb") as f:
            head = f.read(4097)
    except OSError:
        head = b""
    if head.startswith(b"gitdir: ") and head.count(b"\n") <= 1 and len(head) <= 4096:
        named = os.fsdecode(head[8:].rstrip(b"\r\n"))
        found = os.path.realpath(os.path.join(checkout, named))
        if os.path.isfile(os.path.join(found, "HEAD")):
            return Path(found)
    return Path(out(checkout, "rev-parse", "--absolute-git-dir"))


WORKTREE_LIST = ("worktree", "list", "--porcelain", "-z")


def worktree_list(repo: Path | str, asked: Started | None = None) -> list[dict[str, str]]:
    """``git worktree list --porcelain`` as a list of {worktree, HEAD, branch, ...}
    (``asked``: ``start(repo, *WORKTREE_LIST)``, begun before)."""
    text = (asked.result() if asked is not None else git(repo, *WORKTREE_LIST)).out
    result: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for item in text.split("\0"):
        if not item:
            if current:
                result.append(current)
                current = {}
            continue
        key, _, value = item.partition(" ")
        current[key] = value or "true"
    if current:
        result.append(current)
    return result


def may_be_checked_out(repo: Path | str, branch: str) -> bool:
    """False when no worktree of ``repo`` (a main checkout) can have ``branch`` checked
    out: no worktree's ``HEAD`` names it, read as git reads them (the main one's in
    ``.git``, the others' under ``.git/worktrees``); True when one does, or when that
    cannot be told from files alone (another ref storage, a ``HEAD`` that is a link, a
    ``.git`` that is a file): then ask ``worktree_list``."""
    common = os.path.join(repo, ".git")
    if not os.path.isdir(common) or os.path.islink(common):
        return True
    if os.path.lexists(os.path.join(common, "reftable")):
        return True
    wanted = f"ref: refs/heads/{branch}".encode()
    try:
        with os.scandir(os.path.join(common, "worktrees")) as entries:
            admins = [common, *(e.path for e in entries)]
    except FileNotFoundError:
        admins = [common]
    except OSError:
        return True
    for admin in admins:
        head = os.path.join(admin, "HEAD")
        try:
            if os.path.islink(head):
                return True
            with open(head, "rb") as f:
                if f.read(4097).rstrip(b"\n") == wanted:
                    return True
        except FileNotFoundError:
            continue  # (an admin directory git is making or removing)
        except OSError:
            return True
    return False


def is_ancestor(repo: Path | str, a: str, b: str) -> bool:
    return git(repo, "merge-base", "--is-ancestor", a, b, check=False).returncode == 0


# what a shell changes from one command to the next
_VOLATILE = frozenset({"PWD", "OLDPWD", "SHLVL", "_"})


def git_env() -> dict[str, str]:
    """The environment bar's git runs with here (``proc.clean_env``), but for what a
    shell changes from one command to the next."""
    env = clean_env({**NO_TRANSPORT, **NO_OPTIONAL_WRITES})
    return {k: v for k, v in env.items() if k not in _VOLATILE}
