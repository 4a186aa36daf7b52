"""A running step's progress, published so that a lost worker loses nothing.

While a step runs on a worker, the worker publishes every few seconds (when something
changed) one commit on the remote's ``refs/bar/progress/<task id>``:

    state/        the worktree as it is now (a snapshot through a private index)
    running.json  the step's intent (docs/internals/record.md), secrets already scrubbed
    artifacts/    the running step's files so far: output, checkpoints, session

Its parent is the task's snapshot chain on the worker (``refs/bar/tasks/<id>``), so the
step's checkpoints travel with it. What it adds is scanned as ``bar push`` scans
(``bar.share.scan``): a finding keeps that progress here, and says so.

When the worker goes silent, the step's next attempt (on any worker) ``restore``s it:
the task at its pushed history, the worktree at the published state, the intent and
artifacts in place; bar's own crash recovery then records the step ``interrupted`` with
every change up to then (``bar.step.recovery``).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from bar import git
from bar.base.record import record
from bar.history import side_index
from bar.model import journals
from bar.model.tasks import Task
from bar.redact import known
from bar.share import remotes, scan
from bar.share.remotes import Remote

PROGRESS = "refs/bar/progress/"
IDENTITY = {
    "GIT_AUTHOR_NAME": "bar",
    "GIT_AUTHOR_EMAIL": "bar@localhost",
    "GIT_COMMITTER_NAME": "bar",
    "GIT_COMMITTER_EMAIL": "bar@localhost",
}


def ref(task_id: str) -> str:
    return f"{PROGRESS}{task_id}"


@record
class Publisher:
    """Publishes one running step's progress (one per step, in the worker's thread)."""

    task: Task
    remote: Remote
    known_there: list[str]  # commits the remote has (the pushed history): not scanned again
    last_tree: str | None = None
    last_sizes: tuple[int, ...] = ()
    held: str = ""  # why the last progress stayed here (a finding), if it did

    def publish(self) -> bool:
        """Publish now if the step's state or files changed since the last time."""
        task = self.task
        intent = journals.RUN.read(task.paths)
        if intent is None:
            return False
        files = sorted(task.paths.artifacts.glob(f"{intent.step_id}.*"))
        sizes = tuple(f.stat().st_size for f in files if f.is_file())
        state = _state_tree(task, intent.excludes)
        if state == self.last_tree and sizes == self.last_sizes:
            return False
        repo = task.project.root
        entries = [f"040000 tree {state}\tstate\n"]
        entries.append(f"100644 blob {_blob(repo, task.paths.marker.read_bytes())}\trunning.json\n")
        inner = [f"100644 blob {_blob(repo, f.read_bytes())}\t{f.name}\n" for f in files]
        if inner:
            sub = git.git(repo, "mktree", input="".join(inner).encode()).out.strip()
            entries.append(f"040000 tree {sub}\tartifacts\n")
        tree = git.git(repo, "mktree", input="".join(entries).encode()).out.strip()
        chain = git.rev_parse(repo, f"refs/bar/tasks/{task.id}") or intent.snapshot_before
        commit = git.commit_tree(
            repo,
            tree,
            [chain],
            f"bar progress of task {task.name} ({task.id}), step {intent.step_id}\n",
            identity=IDENTITY,
        )
        found = scan.state_files(
            task,
            [commit],
            [*self.known_there, task.base_commit],
            known.scrubber(),
            task.project.config.share.max_blob,
        )
        self.last_tree, self.last_sizes = state, sizes
        if found:
            self.held = "; ".join(f"{f.kind} in {f.where()}" for f in found[:3])
            return False
        self.held = ""
        remotes.push(repo, self.remote, [f"+{commit}:{ref(task.id)}"])
        return True


def _state_tree(task: Task, excludes: list[str]) -> str:
    """The worktree as a tree, through a copy of the task's side index (the running
    step's own snapshots use the index itself): in a folder of the task's directory, so
    git reads the shared part of the split index and writes the copy whole
    (``git.index_env``)."""
    with tempfile.TemporaryDirectory(prefix=".progress-", dir=task.dir) as tmp:
        index = Path(tmp) / "index"
        if task.index.exists():
            shutil.copyfile(task.index, index)
        tree, _, _ = side_index.write_whole(task.worktree, index, None, excludes)
        return str(tree)


def _blob(repo: Path, data: bytes) -> str:
    return git.git(repo, "hash-object", "-w", "--stdin", input=data).out.strip()


def clear(task: Task, remote: Remote) -> None:
    """The step is recorded and its history pushed: its progress goes."""
    repo = task.project.root
    if remotes.listed(repo, remote, [ref(task.id)]):
        remotes.push(repo, remote, [f":{ref(task.id)}"])


def fetch(task: Task, remote: Remote) -> str | None:
    """The progress the remote holds for ``task`` (its commit, now here), or None."""
    repo = task.project.root
    there = remotes.listed(repo, remote, [ref(task.id)])
    if ref(task.id) not in there:
        return None
    local = f"refs/bar/progress-fetched/{task.id}"
    remotes.fetch(repo, remote, [f"+{ref(task.id)}:{local}"])
    return git.rev_parse(repo, local)


def restore(task: Task, commit: str) -> str | None:
    """Put the step that ``commit`` published back as a running step a crashed bar left:
    the worktree at its state, its intent and files in place (the caller holds nothing;
    the next ``transaction.prepare`` records it). Returns its step id, or None when the
    progress is of a step the task's record already has."""
    repo = task.project.root
    raw = git.git(repo, "cat-file", "blob", f"{commit}:running.json").stdout
    step_id = str(json.loads(raw).get("step_id", ""))
    last = task.ledger.last()
    if last is not None and last.number >= int(step_id or 0):
        return None
    chain = git.out(repo, "rev-parse", f"{commit}^")
    current = git.rev_parse(repo, f"refs/bar/tasks/{task.id}")
    if current is None or (current != chain and git.is_ancestor(repo, current, chain)):
        git.git(repo, "update-ref", f"refs/bar/tasks/{task.id}", chain, current or "")
    listed = git.git(repo, "ls-tree", "-z", f"{commit}:artifacts", check=False).stdout
    task.paths.artifacts.mkdir(mode=0o700, parents=True, exist_ok=True)
    for entry in filter(None, listed.split(b"\0")):
        meta, _, name = entry.partition(b"\t")
        blob = meta.split()[2].decode()
        path = task.paths.artifacts / os.fsdecode(name)
        if "/" in os.fsdecode(name) or not name.startswith(step_id.encode() + b"."):
            continue  # only the step's own files, never a path elsewhere
        path.write_bytes(git.git(repo, "cat-file", "blob", blob).stdout)
        path.chmod(0o600)
    _checkout(task, task.recorded_snapshot(), f"{commit}:state")
    tmp = task.paths.marker.with_suffix(".restoring")
    tmp.write_bytes(raw)
    tmp.chmod(0o600)
    os.replace(tmp, task.paths.marker)
    return step_id


def _checkout(task: Task, recorded: str, state: str) -> None:
    """The worktree, now at ``recorded``, brought to the tree ``state`` (a two-tree
    read-tree through a private index: additions, deletions, modes, links)."""
    repo = task.worktree
    with tempfile.TemporaryDirectory(prefix="bar-restore-") as tmp:
        env = git.index_env(Path(tmp) / "index")
        git.git(repo, "read-tree", f"{recorded}^{{tree}}", env=env)
        git.git(repo, "read-tree", "-m", "-u", f"{recorded}^{{tree}}", state, env=env)
