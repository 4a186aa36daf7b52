"""``bar doctor``: check every file, ledger line, ref and worktree; repair without loss.

Every check reports a ``Finding``. With ``repair=True`` the repairable ones are fixed in a
way that loses nothing (``bar.project.repairs``): an unreadable ledger line is moved to
``ledger.jsonl.corrupt`` (never deleted), a stale ``running`` marker becomes an
``interrupted`` step with the changes made up to the crash, an interrupted rollback or
apply is finished, a journal too garbled to finish is moved aside and the ledger rules, a
stale git lock on the snapshot ref is removed, a garbled or missing side index is rebuilt,
a missing worktree is recreated at the last recorded state, a missing patch is
regenerated from its two snapshots, a task a killed ``bar task new`` left half-made is
removed with what it made (``bar.task.new``), a deletion that was interrupted is finished
(``bar.task.delete``), refs under ``refs/bar/`` of a task no project has are deleted
(events.jsonl keeps where they pointed), the person's answer to a decision found on disk
with no decision step (written by aide's web server) is recorded as one (``bar.aide.answers``),
and permissions are tightened to 0700/0600. The developer's policy file is only reported, never rewritten. A task whose
lock is held by a live bar process is only inspected, never repaired.

``remaining`` is what is left when doctor is done: every error it did not repair and
every repair that failed, and after repairs every error a fresh check still finds.
Warnings (a step the next command finishes by itself, a loose file mode) are reported
but leave the project usable. The CLI exits non-zero while anything remains.
"""

from __future__ import annotations

import functools
import json
import os
import stat
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

from bar import git
from bar.base.notices import plural
from bar.base.progress import Progress
from bar.base.record import record
from bar.errors import BarError, PolicyError, UnsupportedVersion
from bar.git import packing, worktrees
from bar.history import telemetry
from bar.model import board
from bar.model.project import Project
from bar.model.records import Step, step_from_record
from bar.model.tasks import Task, load_task
from bar.project import repairs
from bar.project.repairs import then
from bar.store.files import DIR_MODE, FILE_MODE, read_json
from bar.store.layout import STEP_COVERS, STEP_TEMPORARY, TASK_ID_RE
from bar.store.lock import is_locked
from bar.task import delete as task_delete
from bar.task import new as task_new
from bar.task import registry, removal, reopen
from bar.worktree import git_locks as git_locks

# a rollback's staging, and what one killed midway leaves in its task's directory
# (``bar.changes.rollback``)
_RESTORING = frozenset({"restore-staging", "restore-aside"})


@record
class Finding:
    severity: str  # "error" | "warning"
    where: str
    message: str
    repair: Callable[[], str] | None = None  # returns what it did
    repaired: str | None = None
    repair_error: str | None = None
    hint: str | None = None  # what the developer can do when bar cannot repair it

    @property
    def remains(self) -> bool:
        """Left after doctor ran: a failed repair, or an error not repaired."""
        return bool(self.repair_error) or (self.severity == "error" and not self.repaired)

    def to_json(self) -> dict[str, object]:
        return {
            "severity": self.severity,
            "where": self.where,
            "message": self.message,
            "repairable": self.repair is not None,
            "repaired": self.repaired,
            "repair_error": self.repair_error,
            "hint": self.hint,
        }


@record(frozen=True)
class Group:
    """Findings alike (one severity, message and fate), said once: how many, where (the
    directory they share) and one of them."""

    findings: tuple[Finding, ...]

    @property
    def first(self) -> Finding:
        return self.findings[0]

    @property
    def under(self) -> str:
        return os.path.commonpath([os.path.dirname(f.where) for f in self.findings])


def grouped(findings: list[Finding], least: int = 3) -> list[Finding | Group]:
    """``findings`` in order, those alike put together where there are ``least`` or
    more of them (a home full of files of one loose mode is one line, not a hundred)."""
    alike: dict[tuple[object, ...], list[Finding]] = {}
    for f in findings:
        key = (f.severity, f.message, f.repair is None, f.repaired, f.repair_error, f.hint)
        alike.setdefault(key, []).append(f)
    out: list[Finding | Group] = []
    said: set[tuple[object, ...]] = set()
    for f in findings:
        key = (f.severity, f.message, f.repair is None, f.repaired, f.repair_error, f.hint)
        if len(alike[key]) < least:
            out.append(f)
        elif key not in said:
            said.add(key)
            out.append(Group(tuple(alike[key])))
    return out


class Doctor:
    def __init__(self, project: Project) -> None:
        self.project = project
        self.findings: list[Finding] = []
        self.still: list[Finding] = []  # errors a fresh check finds after the repairs

    def add(
        self,
        severity: str,
        where: Path | str,
        message: str,
        repair: Callable[[], str] | None = None,
        *,
        hint: str | None = None,
    ) -> None:
        self.findings.append(Finding(severity, str(where), message, repair, hint=hint))

    # --- project-wide ----------------------------------------------------------------

    def check(self) -> list[Finding]:
        p = self.project.paths
        self._guard(p.dir, self._check_permissions)
        self._guard(p.config, self._check_config)
        self._guard(p.config, self._check_policy)
        self._guard(p.state, self._check_state)
        self._guard(p.events, lambda: self._check_jsonl(p.events, "events.jsonl line"))
        if p.tasks.is_dir():
            entries = [
                e for e in sorted(p.tasks.iterdir()) if e.is_dir() and TASK_ID_RE.match(e.name)
            ]
            with Progress("doctor: checking task", len(entries)) as shown:
                for i, entry in enumerate(entries, 1):
                    shown.update(i, _task_name(entry))
                    self._guard(entry, functools.partial(self._check_creation, entry))
        self._guard(p.dir, self._check_workspaces)
        self._guard(p.dir, self._check_registry)
        self._guard(p.dir, self._check_seed_board)
        self._guard(p.dir, self._check_refs)
        self._guard(p.dir, self._check_packing)
        self._guard(p.telemetry, self._check_telemetry)
        return self.findings

    @property
    def remaining(self) -> list[Finding]:
        """The problems left: errors not repaired, failed repairs, and errors that a
        check after the repairs still finds (a repair that did not hold)."""
        left = [f for f in self.findings if f.remains]
        seen = {(f.where, f.message) for f in left}
        return left + [f for f in self.still if (f.where, f.message) not in seen]

    @property
    def ok(self) -> bool:
        """Nothing remains: no error left unrepaired and no repair that failed."""
        return not self.remaining

    def repair(self) -> list[Finding]:
        tried = False
        todo = [f for f in self.findings if f.repair is not None]
        with Progress("doctor: repairing", len(todo)) as shown:
            for i, f in enumerate(todo, 1):
                assert f.repair is not None
                shown.update(i, f.where)
                tried = True
                try:
                    f.repaired = f.repair()
                except (BarError, OSError) as exc:
                    f.repair_error = str(exc)
        if tried:
            self.still = [f for f in Doctor(self.project).check() if f.severity == "error"]
        return self.findings

    def _guard(self, where: Path, check: Callable[[], None]) -> None:
        try:
            check()
        except (BarError, OSError, ValueError) as exc:
            self.add("error", where, str(exc))

    def _check_config(self) -> None:
        _ = self.project.config

    def _check_policy(self) -> None:
        """The developer's policy file: reported with the parse error and its line, never rewritten."""
        try:
            enabled = self.project.config.policy.enabled
        except (BarError, OSError, ValueError):
            return  # the config check reports it
        path = self.project.policy_path()
        if not enabled and not path.exists():
            return
        try:
            self.project.policy_file()
        except PolicyError as exc:
            hint = (
                exc.hint
                or "fix the file by hand (bar never rewrites it); `bar policy test` checks it"
            )
            if enabled:
                self.add("error", path, f"{exc}; every `bar run` stops on it", hint=hint)
            else:
                self.add(
                    "warning",
                    path,
                    f"{exc} (policy.enabled is false: runs do not read it)",
                    hint=hint,
                )

    def _check_state(self) -> None:
        active = self.project.active_task_id()
        if active and not self.project.paths.task(active).task_json.exists():
            self.add(
                "error",
                self.project.paths.state,
                f"the active task {active} does not exist",
                then(lambda: self.project.set_active_task(None), "cleared the active task"),
            )

    def _check_permissions(self) -> None:
        workspaces = self.project.paths.workspaces
        for path in _walk(self.project.dir, skip=workspaces):
            if path.name == AGENTS and path.parent.parent == self.project.paths.tasks:
                self._check_agent_homes(path)
                continue
            if path.name.startswith("index") and path.name.endswith(".lock"):
                continue  # git's, while it writes a side index or a copy (a watcher's)
            if path.name in STEP_COVERS and path.parent.parent == self.project.paths.tasks:
                continue  # (no one may open them: what hides a path from a step)
            if any(p.name in _RESTORING for p in path.parents):
                continue  # (a rollback's staging directories, kept; what a killed one left)
            try:
                st = path.lstat()
            except FileNotFoundError:
                continue  # (gone while looked at: a watcher's staging thrown away)
            want = DIR_MODE if stat.S_ISDIR(st.st_mode) else FILE_MODE
            have = stat.S_IMODE(st.st_mode)
            if have != want:
                self.add(
                    "warning",
                    path,
                    f"mode {have:04o} should be {want:04o} (outputs can hold secrets)",
                    then(functools.partial(_chmod_if_there, path, want), f"set mode {want:04o}"),
                )
            if path.is_file() and path.name.startswith(".") and path.name.endswith(".tmp"):
                self.add(
                    "warning",
                    path,
                    "a temporary file left by an interrupted write",
                    then(path.unlink, "removed it"),
                )

    def _check_agent_homes(self, agents: Path) -> None:
        """A task's agent homes (``bar.agents.homes``) are judged by what matters, not
        file by file: the agents write there, with modes of their own choosing, and no
        other user reaches any of it while ``agents`` and each home are closed to them.
        So these must be 0700, and the credentials bar copies in stay the owner's even
        so (``bar.agents.base.Home.secrets``); bar's layer over ``/etc`` (``system``) has ``/etc``'s
        mode on purpose (``bar.agents.managed``), and is inside ``agents``."""
        from bar.agents import AGENTS, homes

        for path in (agents, *sorted(p for p in agents.iterdir() if p.name in AGENTS)):
            self._closed(path, "agent's files (its credentials, its transcripts)")
        for path in homes.secret_files(agents):
            try:
                have = stat.S_IMODE(path.lstat().st_mode)
            except FileNotFoundError:
                continue
            if have & 0o077:
                self.add(
                    "warning",
                    path,
                    f"mode {have:04o} lets other users read the agent's credentials: "
                    f"should be {FILE_MODE:04o}",
                    then(functools.partial(_chmod_if_there, path, FILE_MODE), "set mode 0600"),
                )

    def _closed(self, path: Path, what: str) -> None:
        """A directory no other user may enter: it holds the ``what``."""
        try:
            st = path.lstat()
        except FileNotFoundError:
            return
        have = stat.S_IMODE(st.st_mode)
        if stat.S_ISDIR(st.st_mode) and have & 0o077:
            self.add(
                "warning",
                path,
                f"mode {have:04o} lets other users reach the {what}: should be {DIR_MODE:04o}",
                then(functools.partial(_chmod_if_there, path, DIR_MODE), "set mode 0700"),
            )

    def _check_jsonl(self, path: Path, what: str) -> None:
        if not path.exists():
            return
        bad = _bad_lines(path)
        if bad:
            numbers = ", ".join(str(n) for n, _ in bad[:10])
            self.add(
                "error",
                path,
                f"{len(bad)} unreadable {what}(s) (line {numbers})",
                lambda: repairs.quarantine_lines(path, [n for n, _ in bad]),
            )

    # --- per task --------------------------------------------------------------------

    def _check_creation(self, tdir: Path) -> None:
        """A task directory a killed ``bar task new`` left is reported (unless a live bar
        is still creating it) and cleared by the code the next ``bar task new`` runs; one a
        stopped ``bar task delete`` left is finished, as the next delete or prune would."""
        if task_delete.is_being_deleted(self.project, tdir.name):
            self.add(
                "warning",
                tdir,
                "a task whose deletion was interrupted",
                lambda: task_delete.finish(self.project, tdir.name),
            )
            return
        left = task_new.leftover(self.project, tdir.name)
        if left is not None and not task_new.being_created(self.project, tdir.name):
            self.add(
                "warning",
                tdir,
                task_new.describe(self.project, tdir.name, left),
                lambda: task_new.finish(self.project, tdir.name),
            )
        if left in (None, task_new.UNFINISHED):
            self._check_task(tdir)

    def _check_task(self, tdir: Path) -> None:
        task = load_task(self.project, tdir.name)
        busy = is_locked(task.paths.lock)
        where = f"task {task.name} ({task.id})"
        ledger = task.ledger
        bad = _bad_lines(ledger.path) if ledger.path.exists() else []
        if bad:
            numbers = ", ".join(str(n) for n, _ in bad[:10])
            self.add(
                "error",
                ledger.path,
                f"{len(bad)} unreadable ledger line(s) (line {numbers})",
                None
                if busy
                else self._under_lock(
                    task, lambda: repairs.quarantine_lines(ledger.path, [n for n, _ in bad])
                ),
            )
        steps = ledger.read_all(warn=False)
        self._check_numbering(task, steps)
        self._check_artifacts(task, steps, busy)
        if not busy:  # a live bar may be moving the ref right now
            self._check_ref_lock(task, where)
        self._check_snapshots(task, steps, busy)
        if busy:
            return  # a live bar holds the task: the rest would race it
        lock = task.index.with_name("index.lock")
        if lock.exists():
            self.add(
                "warning",
                lock,
                "a git lock left by a crash",
                self._under_lock(task, then(lambda: lock.unlink(missing_ok=True), "removed it")),
            )
        self._check_git_locks(task, where)
        if task.read_only:
            return  # a fetched copy: no worktree, board or journals of its own here
        self._check_board(task, where)
        if self._check_removal(task, where):
            pass  # the worktree is going: finishing that is the repair
        elif task.on_workers:
            pass  # its worktree is on the machine that runs its next step, not here
        elif task.pending:
            self._check_unstarted(task, where)
        elif task.active:
            self._check_worktree(task, where)
        # after the side index: finishing a step snapshots the worktree through it
        self._check_journals(task, where)
        if task.active and not task.pending and not task.on_workers:
            self._check_answer(task, where)

    def _under_lock(self, task: Task, action: Callable[[], str]) -> Callable[[], str]:
        return lambda: self._locked(task, action)

    def _locked(self, task: Task, action: Callable[[], str]) -> str:
        from bar.step import transaction

        with transaction.task_lock(task, "bar doctor --repair", wait=False, copy_ok=True):
            return action()

    def _check_ref_lock(self, task: Task, where: str) -> None:
        lock = git.ref_lock_path(task.project.root, task.snapshot_ref)
        if lock.exists():
            self.add(
                "error",
                lock,
                f"{where}: a git lock on {task.snapshot_ref} left by a bar that was stopped "
                "while moving it; every step of the task fails until it is removed",
                self._under_lock(task, lambda: repairs.remove_ref_lock(task)),
            )

    def _check_git_locks(self, task: Task, where: str) -> None:
        for lock in git_locks.lock_files(task):
            pid = git_locks.holder(task, lock)
            if pid is not None:
                self.add(
                    "warning",
                    lock,
                    f"{where}: a git lock held by a running git "
                    f"(pid {pid}); bar leaves it to finish",
                )
                continue
            self.add(
                "error",
                lock,
                f"{where}: a git lock left by a git that was stopped; every git in the "
                "task's worktree fails until it is removed",
                self._under_lock(task, then(partial(lock.unlink, missing_ok=True), "removed it")),
            )

    def _check_answer(self, task: Task, where: str) -> None:
        """The person's answer to the latest decision, on disk (written by aide's web
        server, ``bar.aide.answers``) with no ``decision`` step: recorded by the repair,
        as the next command that changes the task would; one a step could have written,
        or that answers nothing asked, is only said."""
        from bar.aide import answers

        got = answers.found(task)
        if got is None:
            return
        try:
            answers.check(task, got)
        except BarError as exc:
            self.add("warning", got.path, f"{where}: {exc}", hint=exc.hint)
            return
        self.add(
            "warning",
            got.path,
            f"{where}: the answer to decision {got.session_id} is on disk but no decision "
            "step records it yet (the next command that changes the task records it)",
            self._under_lock(task, lambda: repairs.take_answer(task)),
        )

    def _check_removal(self, task: Task, where: str) -> bool:
        """A removal of the worktree (a close) a stopped bar left: True if there is one."""
        path = removal.journal(task)
        if not path.exists():
            return False
        try:
            removal.interrupted(task)
        except BarError as exc:
            self.add("error", path, f"{where}: {exc}", hint="move the file away, then run again")
            return True

        def finish() -> str:
            return (
                "finished the removal of the worktree"
                if removal.resume(task)
                else "the removal had not begun: the worktree is as it was"
            )

        self.add(
            "warning",
            path,
            f"{where}: an interrupted removal of the worktree is pending (bar stopped "
            "mid-way; `bar task close` finishes it too)",
            self._under_lock(task, finish),
        )
        return True

    def _check_journals(self, task: Task, where: str) -> None:
        for path, what, read in repairs.journals_of(task):
            if not path.exists():
                continue
            try:
                problem = repairs.journal_problem(task, read)
            except UnsupportedVersion as exc:
                self.add(
                    "error",
                    path,
                    f"{where}: {exc}",
                    hint="finish it with the newer bar that wrote it",
                )
                continue
            if problem is None:
                self.add(
                    "warning",
                    path,
                    f"{where}: an interrupted {what} is pending (bar stopped mid-way)",
                    self._under_lock(task, lambda: repairs.finish_pending(task)),
                )
            else:
                quarantine = functools.partial(repairs.quarantine_journal, task, path, read)
                self.add(
                    "error",
                    path,
                    f"{where}: the interrupted {what} cannot be finished, its journal is garbled "
                    f"({problem}); every command of the task stops on it",
                    self._under_lock(task, quarantine),
                )

    def _check_numbering(self, task: Task, steps: list[Step]) -> None:
        expected = 1
        for step in steps:
            if step.number != expected:
                kind = "repeated" if step.number < expected else "missing"
                self.add(
                    "warning",
                    task.ledger.path,
                    f"step ids are not consecutive: {step.step_id} follows "
                    f"{expected - 1:04d} ({kind} step ids)",
                )
            expected = step.number + 1

    def _check_artifacts(self, task: Task, steps: list[Step], busy: bool) -> None:
        root = task.dir.resolve()
        for step in steps:
            for rel in (step.artifacts.patch, step.artifacts.output, step.artifacts.cast):
                if not rel:
                    continue
                path = (task.dir / rel).resolve()
                if not path.is_relative_to(root):
                    self.add(
                        "error",
                        task.ledger.path,
                        f"step {step.step_id} names an artifact outside the task: {rel!r}",
                    )
                    continue
                if path.exists():
                    continue
                repair = None
                if (
                    rel == step.artifacts.patch
                    and step.snapshot_before
                    and step.snapshot
                    and not busy
                ):
                    repair = lambda s=step, p=path: repairs.regenerate_patch(task, s, p)  # noqa: E731
                self.add("warning", path, f"step {step.step_id}: artifact {rel} is missing", repair)

    def _check_snapshots(self, task: Task, steps: list[Step], busy: bool) -> None:
        repo = task.project.root
        wanted = {s.snapshot for s in steps if s.snapshot} | {
            s.snapshot_before for s in steps if s.snapshot_before
        }
        missing = _missing_objects(repo, sorted(w for w in wanted if w))
        for sha in missing:
            self.add(
                "error",
                task.snapshot_ref,
                f"snapshot {sha} named by the ledger is not in the repository",
            )
        ref_value = git.rev_parse(repo, task.snapshot_ref)
        last = next((s.snapshot for s in reversed(steps) if s.snapshot), None) or task.base_commit
        if last in missing:
            return
        if ref_value is None:
            self.add(
                "error",
                task.snapshot_ref,
                "the snapshot ref is missing",
                None
                if busy
                else self._under_lock(
                    task,
                    then(
                        lambda: git.update_ref(
                            repo, task.snapshot_ref, last, None, "bar doctor: restore ref"
                        ),
                        f"pointed it at {last[:10]}",
                    ),
                ),
            )
        elif not git.is_ancestor(repo, last, ref_value):

            def rejoin() -> str:
                tree = git.tree_of(repo, last)
                commit = git.commit_tree(
                    repo,
                    tree,
                    [ref_value, last],
                    "bar doctor: rejoin the snapshot chain",
                    identity=git.BAR_IDENTITY,
                )
                git.update_ref(repo, task.snapshot_ref, commit, ref_value, "bar doctor: rejoin")
                return "joined the ledger's last snapshot back into the chain (both histories kept)"

            self.add(
                "error",
                task.snapshot_ref,
                "the snapshot ref does not contain the ledger's last snapshot",
                None if busy else self._under_lock(task, rejoin),
            )

    def _check_board(self, task: Task, where: str) -> None:
        """task.json's ``board`` agrees with its ``status`` and with the worktree on disk
        (``bar.model.board``); a disagreement (a hand edit, a file of an older bar) is
        written back as the disk says."""
        try:
            raw = read_json(task.paths.task_json, "task.json").get("board")
        except (BarError, OSError):
            return  # the task's own check says why
        want = board.expected(task)
        if raw is None or raw == want.to_record():
            return  # (a task.json of an older bar has none: its migration gives it)
        said = f"has board {raw!r}, but the task is {want.status}"
        self.add(
            "warning",
            task.paths.task_json,
            f"{where}: task.json {said}",
            self._under_lock(task, lambda: _write_board(task, want)),
        )

    def _check_unstarted(self, task: Task, where: str) -> None:
        """A planned task has no worktree; one there was left by a ``bar task start``
        that was stopped, and is made again by the next start."""
        if task.worktree.exists() or task.worktree.is_symlink():
            from bar.task.start import holds_files

            if holds_files(self.project, task):
                self.add(
                    "warning",
                    task.worktree,
                    f"{where}: the task is pending, yet its worktree's place holds files bar "
                    "did not put there: kept; move them away before `bar task start`",
                )
                return

            def discard() -> str:
                with self.project.lock("bar doctor: remove a half-made worktree"):
                    worktrees.discard(self.project.root, task.worktree)
                return "removed it: `bar task start` makes it again"

            self.add(
                "warning",
                task.worktree,
                f"{where}: a worktree a stopped `bar task start` left (the task is pending)",
                self._under_lock(task, discard),
            )

    def _check_seed_board(self) -> None:
        from bar.task import seed_board

        said = seed_board.differences(self.project)
        if said:
            shown = "; ".join(said[:3]) + (f" and {len(said) - 3} more" if len(said) > 3 else "")

            def write() -> str:
                with self.project.lock("bar doctor: the board's copy"):
                    seed_board.repair(self.project)
                return "wrote the board's copy again (board.layout: seed)"

            self.add(
                "warning",
                self.project.root / seed_board.TASKS_DIR,
                f"the board's copy in the repository is out of date: {shown}",
                write,
            )

    def _check_registry(self) -> None:
        said = registry.differences(self.project)
        if said:
            shown = "; ".join(said[:3]) + (f" and {len(said) - 3} more" if len(said) > 3 else "")
            self.add(
                "warning",
                registry.path_of(self.project),
                f"the worktree registry is out of date: {shown}",
                lambda: f"rebuilt it: {plural(len(registry.rebuild(self.project)), 'worktree')}",
            )

    def _check_worktree(self, task: Task, where: str) -> None:
        repo = task.project.root
        exists = task.worktree.is_dir()
        registered = worktrees.is_registered(repo, task.worktree)
        if not exists:
            self.add(
                "error",
                task.worktree,
                f"{where}: the worktree is missing",
                self._under_lock(task, lambda: reopen.recreate_worktree(task)),
            )
        elif not registered:
            self.add(
                "error",
                task.worktree,
                f"{where}: the worktree is not registered with git",
                self._under_lock(task, lambda: repairs.repair_registration(task)),
            )
        elif not task.index.exists():
            self.add(
                "warning",
                task.index,
                f"{where}: the snapshot index is missing",
                self._under_lock(task, lambda: repairs.reseed_index(task)),
            )
        elif not repairs.index_is_readable(task):
            self.add(
                "error",
                task.index,
                f"{where}: the snapshot index is unreadable (garbled); no step can be "
                "recorded until it is rebuilt",
                self._under_lock(task, lambda: repairs.reseed_index(task)),
            )

    def _check_workspaces(self) -> None:
        wdir = self.project.paths.workspaces
        if not wdir.is_dir():
            return
        for entry in sorted(wdir.iterdir()):
            if entry == registry.path_of(self.project) and entry.is_file():
                continue  # the worktree registry (checked on its own)
            if entry.name.startswith(".index.json.") and entry.name.endswith(".tmp"):
                self.add(
                    "warning",
                    entry,
                    "a temporary file left by an interrupted write of the worktree registry",
                    then(entry.unlink, "removed it"),
                )
                continue
            if entry.name == "lanes" and entry.is_dir() and not entry.is_symlink():
                continue  # worktrees made with no task (bar worktree create): registered
            half_made = TASK_ID_RE.match(entry.name) and task_new.leftover(
                self.project, entry.name
            )  # reported with its task directory
            if not self.project.paths.task(entry.name).task_json.exists() and not half_made:
                self.add("warning", entry, "a worktree directory that belongs to no task")

    def _check_refs(self) -> None:
        for task_id, refs in task_delete.orphaned_refs(self.project).items():
            shown = ", ".join(refs[:3]) + (f" and {len(refs) - 3} more" if len(refs) > 3 else "")
            # never deleted by --repair: the task may live under another BAR_HOME, and
            # its snapshots would be lost with them
            self.add(
                "warning",
                f"refs/bar/*/{task_id}",
                f"{plural(len(refs), 'ref')} of task {task_id}, which no project here has: {shown}",
                hint="if no other BAR_HOME of yours holds the task, delete them: git "
                f"for-each-ref --format='delete %(refname)' 'refs/bar/*/{task_id}' "
                f"'refs/bar/*/{task_id}/*' | git update-ref --stdin",
            )

    def _check_packing(self) -> None:
        failed = packing.last_failure(self.project.dir)
        if failed:
            common = self.project.common_dir
            self.add(
                "warning",
                self.project.dir / "pack.log",
                f"the last packing of the repository's loose objects failed: {failed}",
                partial(packing.pack_now, common, self.project.dir),
                hint=f"`git fsck` in {self.project.root} says whether an object is "
                "damaged; bar tries again after a step that finds packing due",
            )

    def _check_telemetry(self) -> None:
        where = self.project.paths.telemetry
        lost = telemetry.dropped(where)
        if lost:
            self.add(
                "warning",
                where / "dropped",
                f"{plural(lost, 'step')} not sent as OpenTelemetry spans (the queue was "
                "full, or the endpoint refused them three times)",
                partial(_forget_dropped, where),
                hint=f"{where / 'sender.log'} says what went wrong; `bar export --format "
                "otel` writes every span of a task again",
            )
        if telemetry.waiting(where) and telemetry.endpoint(
            self.project.config.telemetry.otlp_endpoint
        ):
            self.add(
                "warning",
                where / "queue",
                f"{plural(telemetry.waiting(where), 'step')} wait to be sent as spans",
                partial(_send_waiting, where),
                hint="a sender starts after the next step; --repair starts one now",
            )


# --- helpers ------------------------------------------------------------------------


def _forget_dropped(where: Path) -> str:
    (where / "dropped").unlink(missing_ok=True)
    return "forgot the count of steps not sent"


def _send_waiting(where: Path) -> str:
    telemetry.start_sender(where)
    return "started a sender for the waiting steps"


def _write_board(task: Task, want: board.Board) -> str:
    fresh = load_task(task.project, task.id)
    fresh.board = want
    fresh.save()
    return f"wrote board {want.status}"


AGENTS = "agents"  # a task's directory of agent homes (``bar.agents.homes.path``)


def _task_name(tdir: Path) -> str:
    """A task's name for the progress line (its id if task.json cannot be read)."""
    try:
        return str(json.loads((tdir / "task.json").read_text()).get("name") or tdir.name)
    except (OSError, ValueError, AttributeError):
        return tdir.name


def _chmod_if_there(path: Path, mode: int) -> None:
    try:
        os.chmod(path, mode)
    except FileNotFoundError:
        pass  # (a file a watcher stages into, thrown away since)


def _walk(root: Path, skip: Path) -> Iterator[Path]:
    """bar's files under ``root``: not ``skip``, not a task's ``tmp`` (the confined steps'
    own, which may hold links anywhere), what is in its agents' homes (the agents':
    ``_check_agent_homes``), its trash or a worktree being removed (the worktree's files,
    their modes as they were there), never through a link."""
    yield root
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        if here == skip or _not_bars(here):
            dirnames[:] = []
            continue
        for d in dirnames:
            gone = _not_bars(here / d) and d.startswith("removing")  # (the worktree's own)
            if here / d != skip and not gone and not (here / d).is_symlink():
                yield here / d
        for f in filenames:
            path = here / f
            if not path.is_symlink():
                yield path


def _not_bars(path: Path) -> bool:
    """A task's directory of files that are not bar's own (see ``_walk``)."""
    return path.parent.parent.name == "tasks" and (
        path.name in (*STEP_TEMPORARY, AGENTS, "trash") or path.name.startswith("removing")
    )


def _bad_lines(path: Path) -> list[tuple[int, bytes]]:
    bad: list[tuple[int, bytes]] = []
    if path.is_symlink():
        raise BarError(f"{path} is a symbolic link; bar does not follow links in its files")
    with path.open("rb") as fh:
        for n, line in enumerate(fh, 1):
            text = line.rstrip(b"\n")
            if not text.strip():
                continue
            try:
                rec = json.loads(text)
                if path.name == "ledger.jsonl":
                    step_from_record(rec, f"line {n}")
                elif not isinstance(rec, dict):
                    raise ValueError("not an object")
            except (ValueError, UnicodeDecodeError, BarError):
                bad.append((n, text))
    return bad


def _missing_objects(repo: Path, shas: list[str]) -> list[str]:
    if not shas:
        return []
    res = git.git(repo, "cat-file", "--batch-check", input="\n".join(shas).encode() + b"\n")
    return [line.split()[0] for line in res.out.splitlines() if line.endswith(" missing")]
