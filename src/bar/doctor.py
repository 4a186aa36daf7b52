"""``bar doctor``: check every file, ledger line, ref and worktree; repair without loss.

Every check reports a ``Finding``. With ``repair=True`` the repairable ones are fixed in a
way that loses nothing: an unreadable ledger line is moved to ``ledger.jsonl.corrupt``
(never deleted), a stale ``running`` marker becomes an ``interrupted`` step with the
changes made up to the crash, an interrupted rollback or apply is finished, a missing
worktree is recreated at the last recorded state, a missing patch is regenerated from
its two snapshots, and permissions are tightened to 0700/0600. A task whose lock is held
by a live bar process is only inspected, never repaired.
"""

from __future__ import annotations

import functools
import json
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from bar import git, recovery, rollback, snapshot, worktree
from bar.errors import BarError
from bar.project import Project
from bar.records import Step, step_from_record
from bar.store.files import DIR_MODE, FILE_MODE, write_bytes_atomic
from bar.store.layout import TASK_ID_RE
from bar.store.lock import is_locked
from bar.tasks import Task, load_task


@dataclass
class Finding:
    severity: str  # "error" | "warning"
    where: str
    message: str
    repair: Callable[[], str] | None = None  # returns what it did
    repaired: str | None = None
    repair_error: str | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "severity": self.severity,
            "where": self.where,
            "message": self.message,
            "repairable": self.repair is not None,
            "repaired": self.repaired,
            "repair_error": self.repair_error,
        }


class Doctor:
    def __init__(self, project: Project) -> None:
        self.project = project
        self.findings: list[Finding] = []

    def add(
        self,
        severity: str,
        where: Path | str,
        message: str,
        repair: Callable[[], str] | None = None,
    ) -> None:
        self.findings.append(Finding(severity, str(where), message, repair))

    # --- project-wide ----------------------------------------------------------------

    def check(self) -> list[Finding]:
        p = self.project.paths
        self._guard(p.dir, self._check_permissions)
        self._guard(p.config, self._check_config)
        self._guard(p.state, self._check_state)
        self._guard(p.events, lambda: self._check_jsonl(p.events, "events.jsonl line"))
        if p.tasks.is_dir():
            for entry in sorted(p.tasks.iterdir()):
                if entry.is_dir() and TASK_ID_RE.match(entry.name):
                    self._guard(entry, functools.partial(self._check_task, entry))
        self._guard(p.dir, self._check_workspaces)
        return self.findings

    @property
    def ok(self) -> bool:
        """No error left unrepaired and no repair that failed."""
        return not any(
            f.repair_error or (f.severity == "error" and not f.repaired) for f in self.findings
        )

    def repair(self) -> list[Finding]:
        for f in self.findings:
            if f.repair is None:
                continue
            try:
                f.repaired = f.repair()
            except (BarError, OSError) as exc:
                f.repair_error = str(exc)
        return self.findings

    def _guard(self, where: Path, check: Callable[[], None]) -> None:
        try:
            check()
        except (BarError, OSError, ValueError) as exc:
            self.add("error", where, str(exc))

    def _check_config(self) -> None:
        _ = self.project.config

    def _check_state(self) -> None:
        active = self.project.active_task_id()
        if active and not self.project.paths.task(active).task_json.exists():
            self.add(
                "error", self.project.paths.state, f"the active task {active} does not exist",
                _then(lambda: self.project.set_active_task(None), "cleared the active task"),
            )  # fmt: skip

    def _check_permissions(self) -> None:
        workspaces = self.project.paths.workspaces
        for path in _walk(self.project.dir, skip=workspaces):
            want = DIR_MODE if path.is_dir() else FILE_MODE
            have = stat.S_IMODE(path.lstat().st_mode)
            if have != want:
                self.add(
                    "warning", path, f"mode {have:04o} should be {want:04o} (outputs can hold secrets)",
                    _then(functools.partial(os.chmod, path, want), f"set mode {want:04o}"),
                )  # fmt: skip
            if path.is_file() and path.name.startswith(".") and path.name.endswith(".tmp"):
                self.add("warning", path, "a temporary file left by an interrupted write",
                         _then(path.unlink, "removed it"))  # fmt: skip

    def _check_jsonl(self, path: Path, what: str) -> None:
        if not path.exists():
            return
        bad = _bad_lines(path)
        if bad:
            numbers = ", ".join(str(n) for n, _ in bad[:10])
            self.add(
                "error", path, f"{len(bad)} unreadable {what}(s) (line {numbers})",
                lambda: _quarantine(path, [n for n, _ in bad]),
            )  # fmt: skip

    # --- per task --------------------------------------------------------------------

    def _check_task(self, tdir: Path) -> None:
        task = load_task(self.project, tdir.name)
        busy = is_locked(task.paths.lock)
        where = f"task {task.name} ({task.id})"
        ledger = task.ledger
        bad = _bad_lines(ledger.path) if ledger.path.exists() else []
        if bad:
            numbers = ", ".join(str(n) for n, _ in bad[:10])
            self.add(
                "error", ledger.path, f"{len(bad)} unreadable ledger line(s) (line {numbers})",
                None if busy else lambda: self._locked(task, lambda: _quarantine(ledger.path, [n for n, _ in bad])),
            )  # fmt: skip
        steps = ledger.read_all(warn=False)
        self._check_numbering(task, steps)
        self._check_artifacts(task, steps, busy)
        self._check_snapshots(task, steps, busy)
        if busy:
            return  # a live bar holds the task: the rest would race it
        pending = [
            (path, what)
            for path, what in ((task.paths.marker, "step"), (task.paths.rollback_journal,
                               "rollback"), (task.paths.apply_journal, "apply"))
            if path.exists()
        ]  # fmt: skip
        for path, what in pending:
            self.add(
                "warning", path, f"{where}: an interrupted {what} is pending (bar stopped mid-way)",
                lambda: self._locked(task, lambda: _finish_pending(task)),
            )  # fmt: skip
        lock = task.index.with_name("index.lock")
        if lock.exists():
            self.add("warning", lock, "a git lock left by a crash",
                     _then(lambda: lock.unlink(missing_ok=True), "removed it"))  # fmt: skip
        if task.active:
            self._check_worktree(task, where)

    def _locked(self, task: Task, action: Callable[[], str]) -> str:
        with task.lock("bar doctor --repair", wait=False):
            return action()

    def _check_numbering(self, task: Task, steps: list[Step]) -> None:
        expected = 1
        for step in steps:
            if step.number != expected:
                kind = "repeated" if step.number < expected else "missing"
                self.add(
                    "warning", task.ledger.path,
                    f"step ids are not consecutive: {step.step_id} follows "
                    f"{expected - 1:04d} ({kind} step ids)",
                )  # fmt: skip
            expected = step.number + 1

    def _check_artifacts(self, task: Task, steps: list[Step], busy: bool) -> None:
        root = task.dir.resolve()
        for step in steps:
            for rel in (step.artifacts.patch, step.artifacts.output, step.artifacts.cast):
                if not rel:
                    continue
                path = (task.dir / rel).resolve()
                if not path.is_relative_to(root):
                    self.add("error", task.ledger.path,
                             f"step {step.step_id} names an artifact outside the task: {rel!r}")  # fmt: skip
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
                    repair = lambda s=step, p=path: _regenerate_patch(task, s, p)  # noqa: E731
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
                "error", task.snapshot_ref, "the snapshot ref is missing",
                None if busy else _then(lambda: git.update_ref(repo, task.snapshot_ref, last, None,
                                  "bar doctor: restore ref"), f"pointed it at {last[:10]}"),
            )  # fmt: skip
        elif not git.is_ancestor(repo, last, ref_value):

            def rejoin() -> str:
                tree = git.tree_of(repo, last)
                commit = git.commit_tree(repo, tree, [ref_value, last], "bar doctor: rejoin the snapshot chain",
                                         identity=git.BAR_IDENTITY)  # fmt: skip
                git.update_ref(repo, task.snapshot_ref, commit, ref_value, "bar doctor: rejoin")
                return "joined the ledger's last snapshot back into the chain (both histories kept)"

            self.add("error", task.snapshot_ref,
                     "the snapshot ref does not contain the ledger's last snapshot",
                     None if busy else rejoin)  # fmt: skip

    def _check_worktree(self, task: Task, where: str) -> None:
        repo = task.project.root
        exists = task.worktree.is_dir()
        registered = worktree.is_registered(repo, task.worktree)
        if not exists:
            self.add("error", task.worktree, f"{where}: the worktree is missing",
                     lambda: self._locked(task, lambda: _recreate_worktree(task)))  # fmt: skip
        elif not registered:
            self.add("error", task.worktree, f"{where}: the worktree is not registered with git",
                     lambda: self._locked(task, lambda: _repair_registration(task)))  # fmt: skip
        elif not task.index.exists():
            self.add("warning", task.index, f"{where}: the snapshot index is missing",
                     lambda: self._locked(task, lambda: _reseed_index(task)))  # fmt: skip

    def _check_workspaces(self) -> None:
        wdir = self.project.paths.workspaces
        if not wdir.is_dir():
            return
        for entry in sorted(wdir.iterdir()):
            if not self.project.paths.task(entry.name).task_json.exists():
                self.add("warning", entry, "a worktree directory that belongs to no task")


# --- helpers ------------------------------------------------------------------------


def _then(action: Callable[[], object], said: str) -> Callable[[], str]:
    """A repair that runs ``action`` and says ``said``."""

    def run() -> str:
        action()
        return said

    return run


def _walk(root: Path, skip: Path) -> Iterator[Path]:
    yield root
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        if here == skip:
            dirnames[:] = []
            continue
        for d in dirnames:
            if here / d != skip:
                yield here / d
        for f in filenames:
            path = here / f
            if not path.is_symlink():
                yield path


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


def _quarantine(path: Path, numbers: list[int]) -> str:
    """Move the given lines to ``<file>.corrupt`` (appended) and rewrite the file without them."""
    drop = set(numbers)
    keep: list[bytes] = []
    moved: list[bytes] = []
    with path.open("rb") as fh:
        for n, line in enumerate(fh, 1):
            body = line.rstrip(b"\n")
            if not body.strip():
                continue
            (moved if n in drop else keep).append(body)
    side = path.with_name(path.name + ".corrupt")
    fd = os.open(side, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
    try:
        os.write(fd, b"".join(m + b"\n" for m in moved))
        os.fsync(fd)
    finally:
        os.close(fd)
    write_bytes_atomic(path, b"".join(k + b"\n" for k in keep))
    return f"moved {len(moved)} line(s) to {side.name}"


def _finish_pending(task: Task) -> str:
    done = recovery.finish_pending(task)
    if not done:
        return "nothing had changed; the journal was removed"
    return "recorded " + ", ".join(f"step {step.step_id} ({step.kind})" for step in done)


def _regenerate_patch(task: Task, step: Step, path: Path) -> str:
    assert step.snapshot_before and step.snapshot
    snapshot.write_patch(task.worktree if task.worktree.is_dir() else task.project.root,
                         step.snapshot_before, step.snapshot, path)  # fmt: skip
    return "regenerated it from the step's snapshots"


def _reseed_index(task: Task) -> str:
    git.git(task.worktree, "read-tree", task.recorded_snapshot(), env=git.index_env(task.index))
    os.chmod(task.index, FILE_MODE)
    return "rebuilt it from the last snapshot"


def _recreate_worktree(task: Task) -> str:
    """Recreate a deleted worktree on its branch and restore the last recorded state."""
    repo = task.project.root
    with task.project.lock("bar doctor: recreate worktree"):  # worktree add is not concurrent-safe
        git.git(repo, "worktree", "prune")
        git.git(repo, "worktree", "add", "--quiet", str(task.worktree), task.branch)
    task.index.unlink(missing_ok=True)
    snapshot.seed_index(task.worktree, task.index, task.base_commit)
    rollback.restore(task, task.recorded_snapshot())
    return f"recreated it on {task.branch} at the last recorded state"


def _repair_registration(task: Task) -> str:
    res = git.git(task.project.root, "worktree", "repair", str(task.worktree), check=False)
    if worktree.is_registered(task.project.root, task.worktree):
        return "re-registered it with git"
    raise BarError(f"git could not re-register the worktree: {res.err.strip()}")


def _missing_objects(repo: Path, shas: list[str]) -> list[str]:
    if not shas:
        return []
    res = git.git(repo, "cat-file", "--batch-check", input="\n".join(shas).encode() + b"\n")
    return [line.split()[0] for line in res.out.splitlines() if line.endswith(" missing")]
