"""The merge an apply lands, computed in git's object store, and computed ahead.

``merge`` is the git work of an apply before its commit: a three-way ``merge-tree
--write-tree`` of the target's tip and the task's state, then the stat of what the result
changes on the target. It writes only objects, so it can be done before anything is known
to need it.

An apply of a task with a worktree first looks for hand edits there (a stat of every file,
as ``git status`` does: most of an apply's time on a large repository), and the state it
lands is the recorded one unless it finds some. ``Ahead`` does the commit mode's git work
for the recorded state in a thread meanwhile (git runs in child processes, so the scan and
the merge share the machine's cores); the caller uses it only if the state, its base and
the target are still those it was computed for, and otherwise computes again. A failure
ahead is not reported: the caller computes again and meets it in its own order.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from bar import git
from bar.base.proc import Started
from bar.base.record import field, record
from bar.errors import GitError
from bar.git import DiffStat
from bar.git.safe import SafeGit


class Counted:
    """The stat of what a merge changes on the target, and which of the given paths (bar's
    settings files) it changes: from one ``git diff --numstat``, begun with the merge and
    read when first asked (an apply moves the target meanwhile)."""

    __slots__ = ("_asked", "_paths", "_value")

    def __init__(
        self,
        asked: Started | None = None,
        paths: Sequence[str] = (),
        value: tuple[DiffStat, list[str]] | None = None,
    ) -> None:
        self._asked, self._paths = asked, list(paths)
        self._value = value if value is not None or asked is not None else (DiffStat.empty(), [])

    def value(self) -> tuple[DiffStat, list[str]]:
        if self._value is None:
            assert self._asked is not None
            raw = self._asked.result().stdout
            self._value = git.parse_numstat(raw), git.touching(raw, self._paths)
        return self._value


@record
class Merged:
    """The target's tip merged with ``theirs`` (the task's work as a commit)."""

    tip: str | None  # the target's tip (None: no such branch, nothing else was done)
    theirs: str = ""
    tree: str | None = None  # None: it conflicts
    conflicts: list[str] = field(default_factory=list)
    counted: Counted = field(default_factory=Counted)
    preview: str | None = None  # `git diff --stat -p` of tip to tree, if asked

    @property
    def stat(self) -> DiffStat:
        return self.counted.value()[0]

    @property
    def settings(self) -> list[str]:
        """Of the settings paths the merge was given, those it changes."""
        return self.counted.value()[1]


def merge_trees(safe: SafeGit, repo: Path, ours: str, theirs: str) -> tuple[str | None, list[str]]:
    """Three-way merge of two commits in the object store: (tree, conflicting paths)."""
    tree, conflicts = merge_with_markers(safe, repo, ours, theirs)
    return (None, conflicts) if conflicts else (tree, [])


def merge_with_markers(safe: SafeGit, repo: Path, ours: str, theirs: str) -> tuple[str, list[str]]:
    """Three-way merge of two commits in the object store: the merged tree (with conflict
    markers in the conflicting files) and the conflicting paths."""
    res = safe.git(
        repo, "merge-tree", "--write-tree", "--name-only", "-z", ours, theirs, check=False
    )
    if res.returncode not in (0, 1):
        raise GitError(res.cmd, res.returncode, res.stdout, res.stderr)
    fields = res.stdout.split(b"\0")
    tree = fields[0].decode().strip()
    conflicts: list[str] = []
    for item in fields[1:] if res.returncode == 1 else []:
        if not item:
            break
        path = item.decode("utf-8", "surrogateescape")
        if path not in conflicts:
            conflicts.append(path)
    return tree, conflicts


def on_base(safe: SafeGit, repo: Path, state: str, base: str) -> str:
    """A commit of ``state``'s tree whose only parent is ``base``: merged with a branch,
    its changes are taken against the base the state was recorded on (git 2.38's
    merge-tree has no --merge-base), whatever the snapshot chain descends from."""
    return start_on_base(safe, repo, state, base)()


def start_on_base(safe: SafeGit, repo: Path, state: str, base: str) -> Callable[[], str]:
    """``on_base`` begun now; the returned function waits for the commit's id."""
    return safe.start_commit_tree(
        repo,
        git.tree_of(repo, state),
        [base],
        "bar: a state on its base",
        identity=git.BAR_IDENTITY,
    )


def merge(
    safe: SafeGit,
    repo: Path,
    tip: str,
    theirs: str,
    settings: Sequence[str],
    *,
    preview: bool = False,
) -> Merged:
    """``tip`` merged with ``theirs``; the stat and the ``settings`` paths it changes come
    from one diff of trees (--no-ext-diff, --no-textconv), and with ``preview`` so does
    the text a dry run shows (``diffs.Diff.text(with_stat=True)``)."""
    tree, conflicts = merge_trees(safe, repo, tip, theirs)
    if tree is None:
        return Merged(tip, theirs, None, conflicts)
    if not preview:
        asked = git.start(
            repo, "diff", *git.DIFF_FLAGS, "--numstat", "-z", tip, tree, "--", env=git.TREES_ONLY
        )
        return Merged(tip, theirs, tree, [], Counted(asked, settings))
    raw = git.git(
        repo,
        "-c",
        "color.ui=never",
        "diff",
        *git.DIFF_FLAGS,
        "--numstat",
        "-z",
        "--stat",
        "-p",
        tip,
        tree,
        "--",
        env=git.TREES_ONLY,
    ).stdout
    end = _numstat_end(raw)
    numstat, text = raw[:end], raw[end:]
    # -z ends the stat with a NUL where the patch follows; the stat itself holds none
    # (it quotes names), nor does a patch of text files
    text = text.replace(b"\0", b"\n", 1)
    counted = Counted(value=(git.parse_numstat(numstat), git.touching(numstat, settings)))
    return Merged(tip, theirs, tree, [], counted, text.decode("utf-8", "surrogateescape"))


_NUMSTAT_ENTRY = re.compile(rb"(?:\d+|-)\t(?:\d+|-)\t")


def _numstat_end(raw: bytes) -> int:
    """Where the ``--numstat -z`` block at the start of ``raw`` ends (a ``--stat`` follows:
    its lines start with a space, an entry with its counts)."""
    pos = 0
    while (entry := _NUMSTAT_ENTRY.match(raw, pos)) is not None:
        end = raw.index(b"\0", pos)
        if end == entry.end():  # a rename: its old and new names follow, NUL-terminated
            end = raw.index(b"\0", raw.index(b"\0", end + 1) + 1)
        pos = end + 1
    return pos


def checked_out_in(
    repo: Path, branch: str, listed: list[dict[str, str]] | None = None
) -> Path | None:
    """The checkout where ``branch`` is checked out (``listed``: ``git.worktree_list``
    of ``repo`` if the caller has it)."""
    ref = f"refs/heads/{branch}"
    if listed is None and not git.may_be_checked_out(repo, branch):
        return None
    for entry in git.worktree_list(repo) if listed is None else listed:
        if entry.get("branch") == ref and "bare" not in entry:
            return Path(entry["worktree"])
    return None


@record
class Plan:
    """What a commit-mode apply merges: computed ahead, it is used only if still so."""

    target: str
    state: str
    base: str
    settings: tuple[str, ...]
    preview: bool = False  # the dry run's text too


class Ahead:
    """``merge`` of the commit mode, for ``plan``, in a thread started at once; ``safe``
    (made in the thread, from the configuration seen in ``dirs``) is the caller's too."""

    def __init__(self, repo: Path, plan: Plan, *dirs: Path | None) -> None:
        self.plan = plan
        self._repo, self._dirs = repo, dirs
        self._done: tuple[list[dict[str, str]], SafeGit, Merged] | None = None
        self._thread = threading.Thread(target=self._run, name="bar-apply-merge", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            repo, plan = self._repo, self.plan
            # what does not depend on another answer is asked at once: the worktrees, the
            # configuration seen from each directory, the target's tip and its tree
            # (no worktree's HEAD names the target: none has it checked out, nor needs
            # to be listed)
            listing = (
                git.start(repo, *git.WORKTREE_LIST)
                if git.may_be_checked_out(repo, plan.target)
                else None
            )
            asked = SafeGit.ask(*self._dirs)
            ref = f"refs/heads/{plan.target}"
            tips = (
                git.start(
                    repo,
                    "cat-file",
                    "--batch-check=%(objectname) %(objecttype)",
                    input=f"{ref}\n{ref}^{{tree}}\n".encode(),
                    check=False,
                )
                if "\n" not in ref
                else None
            )
            # the task's state on its base: a commit-tree, which no driver takes part in
            theirs_made = start_on_base(SafeGit.read(), repo, plan.state, plan.base)
            listed = git.worktree_list(repo, listing) if listing is not None else []
            safe = SafeGit.read(*self._dirs, checked_out_in(repo, plan.target, listed), asked=asked)
            tip = _tip(tips, repo, ref)
            theirs = theirs_made()
            if tip is None:
                self._done = listed, safe, Merged(None)
                return
            merged = merge(safe, repo, tip, theirs, plan.settings, preview=plan.preview)
            self._done = listed, safe, merged
        except Exception:  # the caller computes again and meets it
            self._done = None

    def result(self, plan: Plan) -> tuple[list[dict[str, str]], SafeGit, Merged] | None:
        """(the worktree list, the git to use, the merge) if done for ``plan``, else None."""
        self._thread.join()
        return self._done if plan == self.plan else None


def _tip(asked: Started | None, repo: Path, ref: str) -> str | None:
    """The commit ``ref`` names (None: none), from ``cat-file --batch-check`` asked for it
    and its tree (the tree is noted for ``git.tree_of``); git is asked again, on its own,
    for any other answer (a ref naming something other than a commit)."""
    res = asked.result() if asked is not None else None
    said = [line.split() for line in res.out.splitlines()] if res is not None else []
    if res is not None and res.returncode == 0 and len(said) == 2:
        if said[0][1:] == ["commit"]:
            if said[1][1:] == ["tree"]:
                git.note_tree(said[0][0], said[1][0])
            return said[0][0]
        if said[0][1:] == ["missing"]:
            return None
    return git.rev_parse(repo, ref)
