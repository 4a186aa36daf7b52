"""A task's record as a git history commit, and back.

The tree of a history commit::

    task.json        the task's metadata (without ``origin``: where a copy came from is
                     the reader's business)
    ledger.jsonl     every complete line of the ledger, byte for byte
    artifacts/       the artifacts of the steps in that ledger (a running step's are not
                     there yet), each a regular file
    history.json     {"version": 1, "task": id, "last_step": ..., "refs": {...},
                      "cut": [{"path", "size", "sha256"}]}

``refs`` names the commits the record needs, by the ref that holds them here:
``snapshot`` (the ledger's last state; ``refs/bar/tasks/<id>``), ``head`` (the task
branch after the last step), and every ``refs/bar/<kind>/<id>/...`` a rollback or a flow
keeps (``kept/``, ``bases/``, ``flow/``). They are the history commit's parents after the
first (the history pushed before), so whoever has the commit has every object.

A file larger than ``share.max_blob`` is cut in the history commit (never on disk here):
its first and last bytes are kept around a marker line, and ``cut`` says what it was.
The commit's dates are the last step's, and its author is bar, so two machines that hold
the same record build the same commit.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bar import git
from bar.base.record import field, record
from bar.errors import BarError, CorruptFile
from bar.model.tasks import Task
from bar.store.layout import STEP_ID_RE, TASK_ID_RE

HISTORY = "refs/bar/history/"
FETCHED = "refs/bar/fetched/"  # refs/bar/fetched/<task id>/<remote>: the last fetched
KEPT_KINDS = ("kept", "bases", "flow")  # refs/bar/<kind>/<task id>/...: kept commits
META = "history.json"
VERSION = 1
IDENTITY = {
    "GIT_AUTHOR_NAME": "bar",
    "GIT_AUTHOR_EMAIL": "bar@localhost",
    "GIT_COMMITTER_NAME": "bar",
    "GIT_COMMITTER_EMAIL": "bar@localhost",
}


def history_ref(task_id: str) -> str:
    return f"{HISTORY}{task_id}"


def fetched_ref(task_id: str, remote_key: str) -> str:
    return f"{FETCHED}{task_id}/{remote_key}"


@record(frozen=True)
class Cut:
    path: str
    size: int
    sha256: str

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "size": self.size, "sha256": self.sha256}


@record(frozen=True)
class Built:
    """A history commit made (or found unchanged) for a task."""

    commit: str
    parent: str | None  # the history it continues
    changed: bool  # a new commit (else the record is as last built)
    steps: int
    last_step: str | None
    refs: dict[str, str]
    files: dict[str, str]  # path in the tree -> blob id (as pushed)
    sources: dict[str, Path]  # path in the tree -> the file here it was made from
    cut: list[Cut] = field(default_factory=list)


# --- building ----------------------------------------------------------------------------


def build(task: Task, max_blob: int, *, keep: bool = True) -> Built:
    """The history commit of ``task`` as recorded now: a child of its last one (the same
    commit when nothing changed). Read without the task lock: a step that is running
    holds it for as long as the agent works, and everything read here is either append-
    only (the ledger: only its complete lines are taken) or written before the ledger line
    that names it (artifacts). ``keep``: move ``refs/bar/history/<id>`` to the commit
    (``--dry-run`` does not)."""
    repo = task.project.root
    ledger = _complete_lines(task.paths.ledger)
    last_step = _last_step_id(ledger)
    steps = ledger.count(b"\n")
    sources: dict[str, Path] = {}
    for name in _artifact_names(task.paths.artifacts, last_step):
        sources[f"artifacts/{name}"] = task.paths.artifacts / name
    refs = _refs(task)
    cache = _BlobCache(task)
    blobs: dict[str, str] = {}
    cut: list[Cut] = []
    small: list[str] = []
    for path, source in sources.items():
        try:
            st = os.stat(source)
        except FileNotFoundError:
            continue  # removed meanwhile (a step's artifact is never removed once named)
        if st.st_size > max_blob:
            data = source.read_bytes()
            cut.append(Cut(path, len(data), hashlib.sha256(data).hexdigest()))
            blobs[path] = _hash_bytes(repo, cut_copy(data, max_blob))
        elif (known := cache.get(path, st)) is not None:
            blobs[path] = known
        else:
            small.append(path)
    if small:
        made = _hash_paths(repo, [sources[p] for p in small])
        for path, blob in zip(small, made, strict=True):
            blobs[path] = blob
            cache.put(path, os.stat(sources[path]), blob)
    blobs["ledger.jsonl"] = _hash_bytes(repo, ledger)
    blobs["task.json"] = _hash_bytes(repo, _task_json(task))
    meta = {
        "version": VERSION,
        "task": task.id,
        "last_step": last_step,
        "refs": refs,
        "cut": [c.to_json() for c in cut],
    }
    blobs[META] = _hash_bytes(repo, (json.dumps(meta, indent=1, sort_keys=True) + "\n").encode())
    tree = _make_tree(repo, blobs)
    parent = git.rev_parse(repo, history_ref(task.id))
    parents = _parents(parent, refs)
    if parent is not None and git.tree_of(repo, parent) == tree:  # (history.json: same refs)
        cache.save()
        return Built(
            parent, _first_parent(repo, parent), False, steps, last_step, refs, blobs, sources, cut
        )
    commit = _commit(task, tree, parents, steps, last_step)
    if keep:
        git.git(repo, "update-ref", history_ref(task.id), commit, parent or "")
    cache.save()
    return Built(commit, parent, True, steps, last_step, refs, blobs, sources, cut)


def cut_copy(data: bytes, max_blob: int) -> bytes:
    """``data`` cut to about ``max_blob`` bytes: its start and end around a marker."""
    marker = (
        f"\n\n=== bar: cut: this file is {len(data)} bytes; the shared copy keeps its first "
        "and last bytes only (share.max_blob) ===\n\n"
    ).encode()
    if len(marker) >= max_blob:  # (a limit smaller than the marker: the marker, cut)
        return marker.strip()[:max_blob]
    keep = max_blob - len(marker)
    head = keep * 3 // 4
    tail = keep - head
    return data[:head] + marker + (data[len(data) - tail :] if tail else b"")


def _complete_lines(path: Path) -> bytes:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return b""
    end = data.rfind(b"\n")
    return data[: end + 1] if end >= 0 else b""


def _last_step_id(ledger: bytes) -> str | None:
    for line in reversed(ledger.splitlines()):
        try:
            value = json.loads(line).get("step_id")
        except (ValueError, AttributeError):
            continue
        if isinstance(value, str) and STEP_ID_RE.match(value):
            return value
    return None


def _artifact_names(folder: Path, last_step: str | None) -> list[str]:
    """The artifacts of the steps up to ``last_step``: regular files named ``NNNN.*``."""
    if last_step is None:
        return []
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return []
    names = []
    for entry in entries:
        step, dot, _ = entry.name.partition(".")
        if not dot or not STEP_ID_RE.match(step) or int(step) > int(last_step):
            continue
        if entry.is_file(follow_symlinks=False):
            names.append(entry.name)
    return sorted(names)


def _task_json(task: Task) -> bytes:
    rec = task.to_record()
    rec.pop("origin", None)
    return (json.dumps(rec, indent=2, sort_keys=True) + "\n").encode()


def _refs(task: Task) -> dict[str, str]:
    """The commits the record needs, by name (see the module docstring)."""
    repo = task.project.root
    refs: dict[str, str] = {}
    last = task.ledger.last()
    snapshot = task.ledger.last_snapshot() or task.base_commit
    refs["snapshot"] = snapshot
    refs["base"] = task.base_commit
    head = next((s.head for s in task.ledger.iter_reverse(warn=False) if s.head), None)
    if head is None and last is None:
        head = git.rev_parse(repo, f"refs/heads/{task.branch}")
    if head:
        refs["head"] = head
    patterns = [f"refs/bar/{kind}/{task.id}/" for kind in KEPT_KINDS]
    listed = git.git(
        repo, "for-each-ref", "--format=%(objectname) %(objecttype) %(refname)", *patterns
    )
    for line in listed.out.splitlines():
        sha, kind, name = line.split(" ", 2)
        if kind == "commit":
            refs[name.removeprefix("refs/bar/")] = sha
    return refs


def _parents(parent: str | None, refs: dict[str, str]) -> list[str]:
    return list(dict.fromkeys([*([parent] if parent else []), *sorted(set(refs.values()))]))


def _first_parent(repo: Path, commit: str) -> str | None:
    return git.rev_parse(repo, f"{commit}^1")


def _commit(task: Task, tree: str, parents: list[str], steps: int, last: str | None) -> str:
    step = task.ledger.last()
    when = step.ended_at if step is not None else task.created_at
    env = {**IDENTITY, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
    message = (
        f"bar history of task {task.name} ({task.id}): {steps} step{'s' * (steps != 1)}"
        + (f", last {last}" if last else "")
        + f"\n\nPushed from {socket.gethostname()}.\nBar-Task: {task.id}\n"
    )
    args = [a for p in parents for a in ("-p", p)]
    return git.git(
        task.project.root, "commit-tree", tree, *args, env=env, input=message.encode()
    ).out.strip()


def _hash_bytes(repo: Path, data: bytes) -> str:
    return git.git(repo, "hash-object", "-w", "--stdin", input=data).out.strip()


def _hash_paths(repo: Path, paths: list[Path]) -> list[str]:
    listing = "".join(f"{p}\n" for p in paths).encode()
    found = git.git(repo, "hash-object", "-w", "--no-filters", "--stdin-paths", input=listing)
    return found.out.split()


def _make_tree(repo: Path, blobs: dict[str, str]) -> str:
    top: list[str] = []
    inner: list[str] = []
    for path, blob in blobs.items():
        if path.startswith("artifacts/"):
            inner.append(f"100644 blob {blob}\t{path.removeprefix('artifacts/')}\n")
        else:
            top.append(f"100644 blob {blob}\t{path}\n")
    if inner:
        sub = git.git(repo, "mktree", input="".join(inner).encode()).out.strip()
        top.append(f"040000 tree {sub}\tartifacts\n")
    return git.git(repo, "mktree", input="".join(top).encode()).out.strip()


class _BlobCache:
    """The blob id of each artifact by its stat, so a push hashes only what is new (an
    artifact is written whole, under a new inode, and then never again)."""

    def __init__(self, task: Task) -> None:
        self.path = task.project.paths.cache / f"history-{task.id}.json"
        self.data: dict[str, list[Any]] = {}
        self.dirty = False
        try:
            loaded = json.loads(self.path.read_bytes())
            if isinstance(loaded, dict) and loaded.get("version") == 1:
                self.data = loaded.get("files", {})
        except (OSError, ValueError):
            pass

    @staticmethod
    def _key(st: os.stat_result) -> list[Any]:
        return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]

    def get(self, path: str, st: os.stat_result) -> str | None:
        found = self.data.get(path)
        if isinstance(found, list) and len(found) == 2 and found[0] == self._key(st):
            return str(found[1])
        return None

    def put(self, path: str, st: os.stat_result, blob: str) -> None:
        self.data[path] = [self._key(st), blob]
        self.dirty = True

    def save(self) -> None:
        if not self.dirty:
            return
        from bar.store.files import write_json_atomic

        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_json_atomic(self.path, {"version": 1, "files": self.data})


# --- reading ------------------------------------------------------------------------------


@record(frozen=True)
class Pushed:
    """A history commit as read back (from a remote): what a task directory is made of."""

    commit: str
    task_id: str
    task: dict[str, Any]
    ledger: str  # blob id
    artifacts: dict[str, str]  # name -> blob id
    meta: dict[str, Any]

    @property
    def refs(self) -> dict[str, str]:
        refs = self.meta.get("refs")
        return refs if isinstance(refs, dict) else {}


def read(repo: Path, commit: str, task_id: str) -> Pushed:
    """The history commit ``commit`` of task ``task_id``, checked: only the files a record
    has, regular files only, and every commit it names among its parents (a history
    from another machine is read as untrusted input)."""
    if not TASK_ID_RE.match(task_id):
        raise CorruptFile(f"a shared history names an invalid task id {task_id!r}")
    where = f"the shared history of task {task_id} ({commit[:12]})"
    entries = _ls_tree(repo, commit)
    files: dict[str, tuple[str, str]] = {}
    artifacts: dict[str, str] = {}
    for mode, kind, blob, path in entries:
        if path.startswith("artifacts/"):
            name = path.removeprefix("artifacts/")
            step, dot, _ = name.partition(".")
            if (
                kind != "blob"
                or mode not in ("100644", "100755")
                or not dot
                or not STEP_ID_RE.match(step)
                or "/" in name
            ):
                raise CorruptFile(f"{where} holds {path!r}, which is no artifact")
            artifacts[name] = blob
        elif path in ("task.json", "ledger.jsonl", META) and kind == "blob":
            files[path] = (mode, blob)
        else:
            raise CorruptFile(f"{where} holds {path!r}, which no task record has")
    missing = [p for p in ("task.json", "ledger.jsonl", META) if p not in files]
    if missing:
        raise CorruptFile(f"{where} has no {', '.join(missing)}")
    try:
        task_rec = json.loads(_cat(repo, files["task.json"][1]))
        meta = json.loads(_cat(repo, files[META][1]))
    except ValueError as exc:
        raise CorruptFile(f"{where} has a task.json or {META} that is not JSON: {exc}") from None
    if not isinstance(task_rec, dict) or task_rec.get("id") != task_id:
        raise CorruptFile(f"{where} has a task.json of another task")
    if not isinstance(meta, dict) or meta.get("version") != VERSION:
        raise CorruptFile(
            f"{where} was written by another version of bar ({META} version {meta.get('version') if isinstance(meta, dict) else '?'})",
            hint="update bar on this machine",
        )
    parents = set(
        git.git(repo, "rev-parse", f"{commit}^@").out.split()
    )  # (`git show -s` took seconds on a 40k-file tree)
    refs = meta.get("refs")
    if not isinstance(refs, dict) or not all(
        isinstance(k, str) and _ref_name_ok(k, task_id) and git.is_object_id(v) and v in parents
        for k, v in refs.items()
    ):
        raise CorruptFile(f"{where} names commits it does not carry")
    return Pushed(commit, task_id, task_rec, files["ledger.jsonl"][1], artifacts, meta)


def _ref_name_ok(name: str, task_id: str) -> bool:
    """A ref the history may name: its own task's only (``kept/<task id>/...``), since
    fetching points ``refs/bar/<name>`` here; another task's would move that task's refs."""
    if name in ("snapshot", "head", "base"):
        return True
    kind, _, rest = name.partition("/")
    return (
        kind in KEPT_KINDS
        and rest.startswith(f"{task_id}/")
        and rest.count("/") >= 1
        and ".." not in rest
        and not rest.endswith(("/", ".lock"))
    )


def _ls_tree(repo: Path, commit: str) -> list[tuple[str, str, str, str]]:
    raw = git.git(repo, "ls-tree", "-r", "-z", "--full-tree", commit).stdout
    out = []
    for item in raw.split(b"\0"):
        if not item:
            continue
        head, _, path = item.partition(b"\t")
        mode, kind, blob = head.decode().split(" ")
        out.append((mode, kind, blob, path.decode("utf-8", "surrogateescape")))
    return out


def _cat(repo: Path, blob: str) -> bytes:
    return git.git(repo, "cat-file", "blob", blob).stdout


def write_files(repo: Path, pushed: Pushed, into: Path) -> None:
    """The ledger and artifacts of ``pushed`` written under the task directory ``into``
    (made ``0700``, files ``0600``), each as one ``cat-file --batch`` read."""
    from bar.store.files import write_bytes_atomic

    (into / "artifacts").mkdir(mode=0o700, parents=True, exist_ok=True)
    wanted = [
        ("ledger.jsonl", pushed.ledger),
        *((f"artifacts/{n}", b) for n, b in sorted(pushed.artifacts.items())),
    ]
    for path, data in zip(
        (p for p, _ in wanted), cat_many(repo, [b for _, b in wanted]), strict=True
    ):
        write_bytes_atomic(into / path, data)


def cat_many(repo: Path, blobs: list[str]) -> Iterator[bytes]:
    """The contents of ``blobs``, in order, read by ``git cat-file --batch`` a few hundred
    at a time."""
    for at in range(0, len(blobs), 256):
        yield from _cat_batch(repo, blobs[at : at + 256])


def _cat_batch(repo: Path, blobs: list[str]) -> list[bytes]:
    raw = git.git(
        repo, "cat-file", "--batch", input="".join(f"{b}\n" for b in blobs).encode()
    ).stdout
    out: list[bytes] = []
    at = 0
    for _ in blobs:
        end = raw.index(b"\n", at)
        header = raw[at:end].split(b" ")
        if len(header) != 3:
            raise BarError(f"git cannot read object {header[0].decode(errors='replace')}")
        size = int(header[2])
        out.append(raw[end + 1 : end + 1 + size])
        at = end + 1 + size + 1
    return out


def read_blob(repo: Path, blob: str) -> bytes:
    return _cat(repo, blob)
