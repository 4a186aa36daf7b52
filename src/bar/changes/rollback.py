"""Rollback: put the worktree back to any recorded state, as a step that can itself be undone.

The restore writes exactly the paths that differ between the two trees (changed files
rewritten, missing ones recreated, extra ones deleted, modes and symlinks included) and
leaves every other file alone, ignored ones included: the side index takes the target's
entries there, git writes their files into a staging directory, and each is moved into
the worktree with compare before replace (``bar.changes.guarded``). The agent's own index and HEAD are
not touched (unless ``--hard``, which resets the task branch to the HEAD recorded at the
target).

A state carries the base it was recorded against (``bar.history.bases``): a rollback to a state
recorded before a ``sync`` moves the task's base back with it, so that the task's changes
are again what they were then (``base_before``/``base_after`` on the step).
``bar undo`` and ``bar redo`` are rollbacks too (``bar.changes.undo``), marked ``undo_of`` /
``redo_of``.

Like every verb: write the intent (``rollback.json``), then ``complete`` it — restore,
snapshot, patch, ledger line, intent removed. Restoring to a tree is idempotent, so
recovery after a crash calls the same ``complete`` from wherever the files were left.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from bar import git
from bar.base import beneath, faults, file_clock, speed
from bar.base.clock import ms_since, now_iso, seconds_of
from bar.base.notices import note, plural, warn
from bar.base.record import record
from bar.changes import fast, guarded, resumed, trash
from bar.git import exact, ignored, racy
from bar.git.index_files import keep_private
from bar.history import bases, side_index, snapshot, states, steps
from bar.model import journals
from bar.model.journals import RollbackIntent
from bar.model.records import RollbackStep, State, Step
from bar.model.tasks import Task

if TYPE_CHECKING:
    from bar.history.checkpoints import Checkpoint, Recorder


@record(frozen=True)
class Plan:
    """What a rollback to ``target`` would change, from the worktree as it is now."""

    target: State
    changes: list[git.RawChange]


def target_of(task: Task, to: str | None) -> State:
    """``base``, a step id, or None: the state before the last step."""
    return states.before_last(task) if to is None else states.resolve(task, to)


def plan(task: Task, to: str | None) -> Plan:
    """What a rollback would do, computed without writing anything of the task's."""
    target = target_of(task, to)
    changes = git.diff_tree_raw(
        task.worktree,
        steps.current_tree(task, task.recorded_snapshot()),
        git.tree_of(task.worktree, target.commit),
    )
    return Plan(target, changes)


def rollback(
    task: Task,
    target: State,
    *,
    hard: bool,
    undo_of: str | None = None,
    redo_of: str | None = None,
) -> RollbackStep:
    """Roll back to ``target`` (caller holds the lock and ran ``transaction.prepare``, which
    left the worktree equal to the last recorded snapshot). ``undo_of``/``redo_of``: the
    step this rollback undoes or redoes (``bar.changes.undo``)."""
    intent = RollbackIntent(
        step_id=task.ledger.next_step_id(),
        target=target,
        hard=hard,
        snapshot_before=task.recorded_snapshot(),
        started_at=now_iso(),
        undo_of=undo_of,
        redo_of=redo_of,
    )
    journals.ROLLBACK.write(task.paths, intent)
    return complete(task, intent, verified=True)


def complete(task: Task, intent: RollbackIntent, *, verified: bool = False) -> RollbackStep:
    """Restore, record and remove the intent. ``verified``: the worktree was just found
    equal to ``intent.snapshot_before``, so it needs no rescan first."""
    with exact.configuration_read_once():
        return _complete(task, intent, verified)


def _complete(task: Task, intent: RollbackIntent, verified: bool) -> RollbackStep:
    t0 = time.monotonic()
    target = intent.target
    job = steps.PatchJob(task, intent.step_id, intent.snapshot_before)  # (beside the checkout)
    restored_tree = restore(
        task,
        intent.restores_to,
        on_tree=job.begin,
        verified=intent.snapshot_before if verified else None,
        command=command_of(intent),
        step_id=intent.step_id,
        state=target.commit,
    )
    if intent.hard:
        if not verified:
            _clear_own_index_lock(task, intent.started_at)
        now_head = git.rev_parse(task.worktree, "HEAD")
        if now_head and now_head != target.head:
            steps.keep_head(task, now_head, target.head)  # the commits the reset leaves
        git.git(task.worktree, "reset", "--quiet", "--mixed", target.head)
        faults.point("after resetting the task branch")
    snap = snapshot.take(
        task.worktree,
        task.index,
        task.snapshot_ref,
        intent.snapshot_before,
        f"step {intent.step_id}: rollback to {target.describe()}",
        stamped_at=intent.restores_to,
        restored_tree=None if intent.hard else restored_tree,
    )
    if intent.finish is not None:
        kept = git.diff_tree_raw(
            task.worktree, git.tree_of(task.worktree, target.commit), snap.tree
        )
        note(
            f"kept {plural(len(kept), 'file')} edited by hand after the rollback was "
            f"interrupted ({', '.join(c.path for c in kept[:5])}"
            f"{', ...' if len(kept) > 5 else ''}): the rollback wrote only its own files"
        )
    elif snap.tree != git.tree_of(task.worktree, target.commit):
        differ = git.diff_tree_raw(
            task.worktree, git.tree_of(task.worktree, target.commit), snap.tree
        )
        shown = ", ".join(c.path for c in differ[:5]) + (", ..." if len(differ) > 5 else "")
        one = len(differ) == 1
        warn(
            f"{plural(len(differ), 'path')} of the worktree {'differs' if one else 'differ'} "
            f"from the state restored ({shown}): saved as the rollback wrote "
            f"{'it' if one else 'them'} (by an editor?), or not writable; the step records "
            "what is there"
        )
    stat, patch = job.finish(snap.commit, snap.tree)
    base_before, base_after = task.base_commit, target.base or task.base_commit
    moves = base_after != base_before
    if moves:
        bases.will_move(task)
    step = RollbackStep(
        step_id=intent.step_id,
        started_at=intent.started_at,
        ended_at=now_iso(),
        duration_ms=ms_since(t0),
        target=target.kind,
        target_step=target.step_id,
        hard=intent.hard,
        snapshot_before=intent.snapshot_before,
        snapshot=snap.commit,
        diff_stat=stat,
        head=git.rev_parse(task.worktree, "HEAD"),
        base_before=base_before if moves else None,
        base_after=base_after if moves else None,
        undo_of=intent.undo_of,
        redo_of=intent.redo_of,
    )
    step.artifacts.patch = patch
    written = steps.append(task, step)
    bases.settle(task, base_after)
    journals.ROLLBACK.clear(task.paths)
    return written


def command_of(intent: RollbackIntent) -> str:
    """The command ``intent`` is of, as the trash and the messages say it."""
    if intent.undo_of is not None:
        return "bar undo"
    return "bar redo" if intent.redo_of is not None else "bar rollback"


def restore(
    task: Task,
    target_commit: str,
    *,
    verified: str | None = None,
    on_tree: Callable[[str], None] | None = None,
    command: str = "bar rollback",
    step_id: str | None = None,
    state: str | None = None,
) -> str | None:
    """Make the worktree equal ``target_commit``'s tree, touching only differing paths.

    ``verified``: a snapshot the side index and the worktree were just found to equal,
    so they need no rescan first. Returns the target's tree when git's checkout wrote
    the side index and the worktree to hold exactly it (no file needed its raw bytes put
    back), so that the snapshot that follows need not look at the worktree; else None.
    ``on_tree``: called with the target's tree just before git writes it, if it differs
    from the worktree's (the caller's patch is written meanwhile: ``steps.PatchJob``).
    What git would remove that no recorded state holds (a nested repository, ignored
    files) is moved to the task's trash first, and a nested repository the trash holds
    is put back where the target has its gitlink (``bar.changes.trash``); ``command``
    and ``step_id`` say in the trash who moved it. ``state``: the recorded state brought
    back, where it is not ``target_commit`` itself (a rollback recovery finished around
    hand edits: ``RollbackIntent.finish``); what the trash holds of it goes back.
    """
    lock = task.index.with_name(task.index.name + ".lock")
    lock.unlink(missing_ok=True)  # we hold the task lock: a leftover is from a crash
    now_commit = verified if verified is not None else task.recorded_snapshot()
    known = fast.tree_of(task.index, verified) if verified is not None else None
    if known is not None:
        git.note_tree(now_commit, known)  # (the stamps were just found to be of it)
    exact.look_up_trees(task.worktree, [now_commit, target_commit])  # one git for all four
    if verified is not None:
        now_tree = git.tree_of(task.worktree, verified)
    else:
        now_tree = side_index.write_tree(task.worktree, task.index, recorded=now_commit)
    target_tree = git.tree_of(task.worktree, target_commit)
    exact_bytes = _exact_bytes(task, now_commit, target_commit)
    if now_tree == target_tree:
        if verified is None and _left_unpopulated(task, target_tree, state or target_commit):
            return None  # (a repository came back, or left the record: the snapshot looks)
        # the same tree; where git converts, the bytes may still differ (line endings)
        if not exact_bytes.differ():
            return target_tree if verified is not None else None
        alike = exact_bytes.alike(task.worktree, target_tree, [])
        staging = _stage(task, alike, _fresh(task.dir / "restore-staging"), exact_bytes)
        _move_in(task, alike, target_tree, staging, command, step_id, exact_bytes)
        if exact_bytes.checkout is not None:
            side_index.renormalize(task.worktree, task.index)
            fast.forget(task.index)
        keep_private(task.index)
        return None  # (the snapshot that follows looks at what was written)
    faults.point("before restoring the worktree")
    started_ns = file_clock.floor()
    shortcuts = speed.fast()
    # the directories the restore will write, and what each must hold after it
    writes = fast.restore_before(
        task.worktree,
        now_tree,
        target_tree,
        fast.settled_ctimes(task.index, now_tree) if shortcuts else {},
    )
    rules = ignored.rules_change(task.worktree, now_tree, target_tree)
    way = trash.clear_the_way(
        task, now_commit, now_tree, target_tree, command=command, step=step_id
    )
    if on_tree is not None:
        on_tree(target_tree)
    # the side index takes the target's entries where the trees differ, git writes those
    # files into a staging directory, then each is moved into the worktree in place of
    # the one verified there (``_move_in``)
    changes = _changes(task.worktree, now_tree, target_tree)
    changes += exact_bytes.alike(task.worktree, target_tree, changes)
    staging = _stage(task, changes, _fresh(task.dir / "restore-staging"), exact_bytes)
    raced, written = _move_in(task, changes, target_tree, staging, command, step_id, exact_bytes)
    faults.point("after moving the target's files in")
    algo = "sha256" if len(target_tree) == 64 else "sha1"

    def holds(rel: str) -> bool:
        """The file the restore moved in at ``rel`` holds the blob it wrote there."""
        found = guarded.blob_of(task.worktree / rel, algo)
        return found is not None and found[1] == written.get(rel)

    racy.note(task.worktree, task.index, started_ns, len(target_tree), holds)
    if rules:
        ignored.keep_ignored(task.worktree, now_tree, rules)
    # what a rollback moved aside from the state restored (an undo of it), then nested
    # repositories (never written by git) where the target has their gitlink
    gitlinks = way.gitlinks
    if verified is None:  # (a restore a crash stopped may have written gitlinks already)
        gitlinks = {**_unpopulated(task, target_tree), **gitlinks}
    put_back = _put_back_of_state(task, state or target_commit, now_tree, command, step_id)
    put_back += trash.put_back_nested(task, gitlinks)
    gone = _unfound_repositories(task, gitlinks)
    # (a target recorded by another line-ending configuration: nothing is trusted below)
    reconverted = exact_bytes.checkout is not None
    moved = bool(way.aside) or bool(put_back) or bool(gone) or reconverted
    # the task's watcher collects the restore's writes (and watches the directories it
    # made) before they are listed below: see ``restored.forget_written``
    sight = (
        fast.look(task.index, now_commit, stale_ok=True)
        if fast.watching(task.index) and not rules and not moved
        else None
    )
    if reconverted:
        side_index.renormalize(task.worktree, task.index)
    keep_private(task.index)
    # what is ignored changed, bytes went to or came from the trash, a gitlink moved
    # (nested repositories stay where they are), or a save raced the restore: the
    # snapshot that follows looks at all
    foreign = shortcuts and fast.moves_gitlinks(writes)
    if rules or moved or foreign or raced:
        fast.forget(task.index)
    if rules or moved or foreign or raced or not shortcuts:
        faults.point("after restoring the worktree")
        return None
    # the side index and the worktree now hold exactly the target: note it, so the
    # snapshot that follows rescans only the directories the restore touched
    exact_as_git = not exact_bytes.now and not exact_bytes.target
    settled = fast.restore_after(task.worktree, writes) if exact_as_git else {}
    fast.restamp(
        task.worktree,
        task.index,
        target_tree,
        target_commit,
        started_ns,
        None if writes.diff is None else (now_tree, writes.diff),
        settled,
    )
    if sight is not None and exact_as_git:
        fast.forget_written(task.worktree, task.index, writes, settled, sight)
    faults.point("after restoring the worktree")
    return target_tree if exact_as_git and verified is not None else None


def _recorded_checkout(task: Task, target_commit: str) -> dict[str, str] | None:
    """``exact.recorded_checkout`` of the target, unless git converts nothing now nor did
    then (no raw tree): no git asked then. For the task's base, no snapshot of bar's, the
    configuration the worktree was made with (``side_index.base_checkout``), also where
    that converted nothing and the configuration of now does (an ``autocrlf`` set since)."""
    made_with = side_index.base_checkout(task.index) if target_commit == task.base_commit else None
    if made_with is not None and exact.converting(made_with):
        return made_with
    if (
        exact.raw_tree_of(task.worktree, target_commit) is None
        and fast.stamped_attributes(task.index) is False
        and not exact.converts(task.worktree, False)
    ):
        return None
    if made_with is not None:
        return made_with
    return exact.recorded_checkout(task.worktree, target_commit)


@record(frozen=True)
class _Exact:
    """The exact bytes a restore writes where git converts (line endings, filters):
    ``now``, ``target``: the raw entries (path -> (mode, blob)) of the state the worktree
    holds and of the one restored; ``checkout``: the line-ending configuration the target
    was recorded by, where it is not the one of now (docs/internals/git.md, "Exact bytes
    where git converts"): then every file is written again by it. All staged where
    git's checkout staged its own (``_stage``), each moved in by the guard."""

    now: dict[str, tuple[str, str]]
    target: dict[str, tuple[str, str]]
    checkout: dict[str, str] | None

    def differ(self) -> bool:
        """Whether the two states' files may differ in bytes where their trees agree."""
        return self.now != self.target or self.checkout is not None

    def alike(self, wt: Path, tree: str, changes: list[_Change]) -> list[_Change]:
        """The files ``tree`` holds as the state of now does (not in ``changes``) whose
        bytes must be written again: raw in one state and not the other, or otherwise
        raw; every file, where the target was recorded by another configuration."""
        if not self.differ():
            return []
        changed = {c[4] for c in changes}
        files = exact.raw_entries(wt, tree)  # (every regular file of the tree)
        if self.checkout is None:
            wanted = {p for p in self.target if self.now.get(p) != self.target[p]}
            wanted |= {p for p in self.now if p not in self.target}
        else:
            wanted = set(files)
        return [
            (files[p][0], files[p][0], files[p][1], files[p][1], p)
            for p in sorted(wanted - changed)
            if p in files
        ]

    def verified(self, rel: str, blobs: tuple[str | None, ...]) -> tuple[str | None, ...]:
        """``blobs``, what bar verified at ``rel``, with the raw bytes the state of now
        has there: the file holds those where git would write others."""
        raw = self.now.get(rel)
        return blobs if raw is None else (*blobs, raw[1])

    def written(self, rel: str, blob: str) -> str:
        """The blob of the bytes a restore writes at ``rel`` where git stores ``blob``."""
        raw = self.target.get(rel)
        return blob if raw is None else raw[1]


def _exact_bytes(task: Task, now_commit: str, target_commit: str) -> _Exact:
    """What a restore from ``now_commit`` to ``target_commit`` writes beside git's
    checkout (``_Exact``)."""
    checkout = _recorded_checkout(task, target_commit)
    return _Exact(
        exact.raw_entries(task.worktree, exact.raw_tree_of(task.worktree, now_commit)),
        exact.raw_entries(task.worktree, exact.raw_tree_of(task.worktree, target_commit)),
        checkout if _reconverted(task, checkout) else None,
    )


def _reconverted(task: Task, checkout: dict[str, str] | None) -> bool:
    """Whether the target was recorded by another line-ending configuration than the
    one of now (``checkout``: ``_recorded_checkout``)."""
    return checkout is not None and checkout != exact.checkout_config(task.worktree)


def _checkout_env(task: Task) -> dict[str, str]:
    """The side index's environment for a checkout: with no smudge filter where the
    stamped tree may name one (``exact.without_smudge``; a filter needs an attribute)."""
    env = git.index_env(task.index)
    if fast.stamped_attributes(task.index) is False and not exact.converts(task.worktree, False):
        return env
    return exact.without_smudge(task.worktree, env)


def _unpopulated(task: Task, tree: str) -> dict[str, str]:
    """The gitlinks of ``tree`` (path -> commit) where the worktree holds no repository
    (nothing, or an empty directory, which git counts as a gitlink not checked out): a
    restore that a crash stopped after git wrote them put nothing back there yet."""
    listed = git.git(task.worktree, "ls-tree", "-r", "-z", "--full-tree", tree).stdout
    found: dict[str, str] = {}
    for item in listed.split(b"\0"):
        meta, _, raw = item.partition(b"\t")
        fields = meta.split(b" ")
        if len(fields) != 3 or fields[0] != b"160000":
            continue
        path = raw.decode("utf-8", "surrogateescape")
        there = beneath.lstat_beneath(task.worktree, path)
        if there is None or trash.is_empty_dir(task.worktree, path):
            found[path] = fields[2].decode()
    return found


def _left_unpopulated(task: Task, tree: str, state: str) -> bool:
    """Where a recovery finds the worktree already at ``tree``: what the interrupted
    restore had still to do after git wrote its files (put back from the trash what the
    state restored held, and the nested repositories of its gitlinks, or take the
    gitlinks no repository backs out of the record). Whether it did anything."""
    gitlinks = _unpopulated(task, tree)
    done = bool(_put_back_of_state(task, state, tree, "bar rollback", None))
    done = bool(trash.put_back_nested(task, gitlinks)) or done
    done = bool(_unfound_repositories(task, gitlinks)) or done
    if done:
        fast.forget(task.index)
    return done


def _put_back_of_state(
    task: Task, state: str, now_tree: str, command: str, step_id: str | None
) -> list[trash.Item]:
    """``trash.put_back_of_state``, what it takes out of the worktree first taken out by
    a guard (compared before removed: a save made since stays), made when first needed."""
    guards: list[guarded.Guard] = []

    def take_out(rel: str, blob: str) -> bool:
        if not guards:
            guards.append(_guard(task, "sha256" if len(blob) == 64 else "sha1", command, step_id))
            guards[0].hand_back()  # (what a restore that was killed had captured)
        return guards[0].remove(rel, (blob,))

    try:
        return trash.put_back_of_state(task, state, now_tree, take_out)
    finally:
        for guard in guards:
            guard.close()


def _unfound_repositories(task: Task, gitlinks: dict[str, str]) -> list[str]:
    """The gitlinks the restored state has (path -> commit) where no nested repository
    came back (neither the disk nor the trash holds it: it was removed by a step or by
    hand, never by bar). git checks out an empty directory there; the record holds what
    is on disk, as ``git add -A`` would: the gitlink leaves the side index, and is said."""
    gone = [path for path in sorted(gitlinks) if not trash.holds_repo(task.worktree, path)]
    if not gone:
        return []
    git.git(
        task.worktree,
        "update-index",
        "--force-remove",
        "-z",
        "--stdin",
        input="".join(f"{path}\0" for path in gone).encode(),
        env=git.index_env(task.index),
    )
    for path in gone:
        warn(
            f"the state restored has a nested repository at {path}/ (commit "
            f"{gitlinks[path][:12]}) that neither the worktree nor the trash holds (a step or "
            "a hand removed it): it is not recorded, and the directory is left empty"
        )
    return gone


def _fresh(path: Path) -> Path:
    """The staging directory at ``path``, holding no file: what a killed restore left
    there is removed, its directories kept. (Every restore moves its files out and keeps
    the directories git made for them, for the next: making and removing directories is
    what a restore of many files spends most on, where the file system discards freed
    blocks at once.)"""
    try:
        path.mkdir(mode=0o700)
        return path
    except FileExistsError:
        pass
    for here, dirs, files in os.walk(path):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(here, d))]:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(here, name))
    return path


def _move_in(
    task: Task,
    changes: list[_Change],
    target_tree: str,
    staging: Path,
    command: str,
    step_id: str | None,
    exact_bytes: _Exact,
) -> tuple[bool, dict[str, str]]:
    """Move what git wrote into ``staging`` into the worktree, path by path, each in
    place of the version the worktree was verified to hold (``bar.changes.guarded``):
    a path an editor saved meanwhile is kept as saved, and said. Removed paths go first
    (with the directories they leave empty), then the written ones. Then the side index
    notes the stat of the files moved in. Whether a path raced the restore, and the
    blob of each file (or link) written."""
    wt = task.worktree
    algo = "sha256" if len(target_tree) == 64 else "sha1"
    guard = _guard(task, algo, command, step_id)
    guard.hand_back()  # (what a restore that was killed had captured)
    for old_mode, new_mode, old_blob, _new_blob, rel in changes:
        if new_mode != guarded.ABSENT:
            continue
        if old_mode == GITLINK:
            guard.remove_dir(rel)  # (its repository, if any, went to the trash before)
        else:
            guard.remove(rel, exact_bytes.verified(rel, (old_blob, None)))
        guard.prune(rel)
    for old_mode, new_mode, old_blob, new_blob, rel in changes:
        if new_mode == guarded.ABSENT:
            continue
        was = old_blob if old_mode not in (guarded.ABSENT, GITLINK) else None
        if new_mode == GITLINK:
            # git writes no file for a gitlink: an empty directory, where the file it
            # replaces was (the trash puts the repository back into it, if it holds it)
            if was is not None and not guard.remove(rel, (was,)):
                continue
            guard.make_dir(rel)
            continue
        if not os.path.lexists(staging / rel):
            continue  # (git wrote nothing there: the snapshot that follows says so)
        there = beneath.lstat_beneath(wt, rel)
        if there is not None and stat.S_ISDIR(there.st_mode) and not guard.remove_empty(rel):
            # a file saved in the directory the target makes a file: kept, and said
            guard.raced.append(guarded.Raced(rel, wt / rel))
            continue
        guard.replace(
            rel,
            exact_bytes.verified(rel, (was, new_blob)),
            staging / rel,
            exact_bytes.written(rel, new_blob),
        )
    guard.close()
    for raced in guard.raced:  # (written for a path a save raced: not moved in)
        with contextlib.suppress(FileNotFoundError, NotADirectoryError, IsADirectoryError):
            os.unlink(staging / raced.path)
    if changes:
        guard.settle()
        written = [c[4] for c in changes if c[1] != guarded.ABSENT]
        git.refresh(git.git, wt, written, git.index_env(task.index))
    if saves := guarded.by_path(guard.raced):
        shown = ", ".join(_raced_shown(task, rel, saves[rel]) for rel in list(saves)[:10])
        one = len(saves) == 1
        warn(
            f"{plural(len(saves), 'file')} changed while the rollback wrote "
            f"{'it' if one else 'them'} and {'was' if one else 'were'} kept as changed: "
            f"{shown}{', ...' if len(saves) > 10 else ''}; the step records them"
        )
    blobs = {
        rel: exact_bytes.written(rel, new_blob)
        for _o, mode, _b, new_blob, rel in changes
        if mode in _FILE_MODES
    }
    return bool(guard.raced), blobs


_FILE_MODES = ("100644", "100755", "120000")


def _raced_shown(task: Task, rel: str, kept: list[Path]) -> str:
    """``rel``, a path saves raced, and where those not at the path are kept."""
    elsewhere = [k for k in kept if k != task.worktree / rel]
    if not elsewhere:
        return rel
    which = "another save" if len(elsewhere) < len(kept) else "a save"
    if elsewhere[-1] == task.paths.trash:
        return f"{rel} ({which} moved to the trash: `bar trash`)"
    return f"{rel} ({which} kept as {elsewhere[-1].name})"


GITLINK = "160000"


_Change = tuple[str, str, str, str, str]  # old mode, new mode, old blob, new blob, path


def _changes(wt: Path, a: str, b: str) -> list[_Change]:
    """(old mode, new mode, old blob, new blob, path) of every path that differs."""
    raw = git.diff_trees(wt, a, b, trees=False).stdout
    parts = raw.split(b"\0")
    found: list[_Change] = []
    for meta, path in zip(parts[::2], parts[1::2], strict=False):
        old_mode, new_mode, old_blob, new_blob, _status = meta.decode().lstrip(":").split(" ")
        found.append(
            (old_mode, new_mode, old_blob, new_blob, path.decode("utf-8", "surrogateescape"))
        )
    return found


def hand_back(task: Task, command: str, step_id: str | None) -> None:
    """Put back into the worktree what a restore that was killed had captured: a file
    it was removing or replacing, moved aside until found to hold what bar verified
    there (``bar.changes.guarded``). Before anything looks at the worktree: the recovery
    that finishes the restore records hand edits first, and would record the file as
    deleted by hand, then leave it out of every state once the restore put it back. A
    path the hand took meanwhile keeps the hand's file, and the captured one goes to the
    trash (``Guard.keep_raced``)."""
    if not (task.dir / _ASIDE).is_dir():
        return
    guard = _guard(task, "sha1", command, step_id)  # (nothing is hashed)
    guard.hand_back()
    for rel, kept in guarded.by_path(guard.raced).items():
        if kept != [task.worktree / rel]:
            warn(f"the interrupted {command} had taken out {_raced_shown(task, rel, kept)}")


_ASIDE = "restore-aside"  # (in the task's directory)


def _guard(task: Task, algo: str, command: str, step_id: str | None) -> guarded.Guard:
    """The guard a restore writes the worktree through, its captures in the task's
    ``restore-aside``; a save it must not drop goes to the trash, said as ``command``'s
    (``step_id``)."""
    aside = task.dir / _ASIDE

    def to_trash(rel: str, captured: Path) -> Path | None:
        """A save captured where another was made since: into the task's trash."""
        held = aside / "to-trash"
        (held / rel).parent.mkdir(parents=True, exist_ok=True)
        os.rename(captured, held / rel)
        moved = trash.move_aside(
            task,
            held,
            [rel],
            "saved while the rollback wrote it, then saved again",
            command=command,
            kind=trash.ROLLBACK,
            step=step_id,
        )
        if moved:
            return task.paths.trash
        os.rename(held / rel, captured)  # (left where it was: kept beside the path)
        return None

    return guarded.Guard(task.worktree, aside, algo, _hashed(task.worktree), to_trash)


def _hashed(wt: Path) -> Callable[[str, Path], str | None]:
    """The blob git stores for a file where it converts bytes (line endings, filters)."""

    def converted(rel: str, file: Path) -> str | None:
        res = git.git(wt, "hash-object", f"--path={rel}", "--", str(file), check=False)
        return res.out.strip() if res.returncode == 0 else None

    return converted


def _stage(task: Task, changes: list[_Change], staging: Path, exact_bytes: _Exact) -> Path:
    """The side index given the target's entries where the trees differ (removals first,
    so that a file may become a directory and the other way round), and git's version of
    each file and link there written into ``staging`` (``checkout-index``: line endings
    and filters as git's checkout applies them). Only the differing paths are touched:
    git looks at no other entry and no other file (a checkout into an empty directory
    would look for every file of the index there, and find none), and the side index's
    cache of trees stays valid but where they differ. Where git converts, each staged
    file is then given the target's exact bytes (``exact.stage_exact``). The stat of the
    entries written is noted once their files are in the worktree (``_move_in``)."""
    if not changes:
        return staging
    zero = "0" * len(changes[0][2])
    gone = [f"0 {zero}\t{rel}" for _o, new, _b, _n, rel in changes if new == guarded.ABSENT]
    came = [f"{new} {blob}\t{rel}" for _o, new, _b, blob, rel in changes if new != guarded.ABSENT]
    env = git.index_env(task.index)
    lines = "".join(line + "\0" for line in gone + came)
    git.git(
        task.worktree,
        "update-index",
        "-z",
        "--index-info",
        input=lines.encode("utf-8", "surrogateescape"),
        env=env,
    )
    files = [rel for _o, new, _b, _n, rel in changes if new in _FILE_MODES]
    if files:
        git.git(
            task.worktree,
            "checkout-index",
            "-f",
            "-z",
            "--stdin",
            f"--prefix={staging}/",
            input=b"".join(rel.encode("utf-8", "surrogateescape") + b"\0" for rel in files),
            env=_checkout_env(task),  # (no smudge filter: a file keeps its raw bytes)
        )
        if exact_bytes.target or exact_bytes.checkout is not None:
            exact.stage_exact(
                task.worktree, task.index, staging, files, exact_bytes.target, exact_bytes.checkout
            )
    keep_private(task.index)
    return staging


def _clear_own_index_lock(task: Task, started_at: str) -> None:
    """A hard rollback killed inside its ``git reset`` leaves the worktree's
    ``index.lock``, and every later reset would fail on it. When finishing such a
    rollback (its bar is dead; we hold the task lock), a lock made after the rollback
    began (``started_at``, kept when recovery moves the rollback after a manual step) is
    that reset's own, and is removed."""
    lock = Path(
        git.out(task.worktree, "rev-parse", "--path-format=absolute", "--git-path", "index.lock")
    )
    try:
        made = lock.stat().st_mtime_ns
        began = seconds_of(started_at) * 1_000_000_000 - 1_000_000  # (kept to the ms)
    except (FileNotFoundError, ValueError):
        return
    if made >= began:
        lock.unlink(missing_ok=True)
        note(f"removed {lock}: left by the interrupted rollback's git reset")


def in_step(recorder: Recorder, name: str) -> Checkpoint:
    """Restore the recorded state ``name`` inside the running step whose checkpoints
    ``recorder`` takes, as a checkpoint (what changed since the last one is kept first, as a
    residual: nothing is lost)."""
    target = states.resolve(recorder.task, name)
    task, started = recorder.task, now_iso()
    snap = snapshot.take(
        task.worktree,
        task.index,
        task.snapshot_ref,
        recorder.last,
        f"step {recorder.step_id}: before a rollback",
        recorder.excludes,
    )
    if snap.commit != recorder.last:
        recorder.add("residual", snap.commit, started_at=started)
    written = restore(task, target.commit, verified=recorder.last)
    message = f"step {recorder.step_id}.{recorder.count + 1}: rollback to {target.describe()}"
    after = snapshot.take(
        task.worktree,
        task.index,
        task.snapshot_ref,
        recorder.last,
        message,
        recorder.excludes,
        stamped_at=target.commit,
        restored_tree=written,
    )
    return recorder.add(
        "rollback", after.commit, started_at=started, tool="bar rollback", target=target.name
    )


def finish_interrupted(task: Task, intent: RollbackIntent) -> list[Step]:
    """The rollback a stopped bar left (``journals.ROLLBACK``): finished around the hand
    edits made since (``bar.changes.resumed``), or only settled if it was recorded; the
    steps recorded."""
    # (before any look: a file the restore had taken out is the worktree's)
    hand_back(task, command_of(intent), intent.step_id)
    return resumed.finish(task, intent, intent.restores_to, "rollback", journals.ROLLBACK, complete)


journals.ROLLBACK.finished_by(finish_interrupted)
