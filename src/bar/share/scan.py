"""What must not leave the machine, found before anything does (fail-closed).

``bar push`` sends the objects the remote does not have: the history commit's files and
the commits of the task's states and branch. Before it does, every one of those objects
is read here:

* **secret**  a token shape or the value of a secret-named variable this process knows
  (the detector of docs/internals/redact.md), in any file: an output, a patch, a session,
  a state;
* **ignored** a file of the task's states that your checkout's ignore rules (``.gitignore``,
  ``info/exclude``, ``core.excludesFile``) ignore, and that the base did not have: an
  agent that edits ``.gitignore`` cannot get ``.env`` pushed;
* **hidden**  a file of the task's states under ``sandbox.deny_read``;
* **too big** a file of the task's states over ``share.max_blob``: a state cannot be cut
  without lying about it (the history's own files are cut instead, ``bar.share.history_commit``).

Each finding has a short id; ``bar push --allow ID`` lets that one through, and nothing
else. The code the task started from (its base commits) is yours and is not scanned.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bar import git
from bar.base.record import record
from bar.git.ignored import answered, question
from bar.model.tasks import Task
from bar.redact import Scrubber
from bar.store.layout import home_dir

SECRET = "secret"
IGNORED = "ignored"
HIDDEN = "hidden"
TOO_BIG = "too big"


@record(frozen=True)
class Finding:
    id: str
    kind: str  # secret | ignored | hidden | too big
    path: str  # the file: in the history ("artifacts/0003.output") or in a state
    line: int | None
    detail: str
    in_state: bool  # a file of the task's states (else of the history's record)
    step: str | None = None  # the first step whose state has it, when known

    def where(self) -> str:
        at = f"{self.path}:{self.line}" if self.line else self.path
        if self.in_state:
            return f"{at} (in the task's files" + (f", step {self.step})" if self.step else ")")
        return at

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "path": self.path,
            "line": self.line,
            "detail": self.detail,
            "in_state": self.in_state,
            "step": self.step,
        }


def _id(kind: str, path: str, what: bytes) -> str:
    digest = hashlib.sha256(kind.encode() + b"\0" + path.encode() + b"\0" + what)
    return digest.hexdigest()[:10]


def secrets_in(data: bytes, path: str, scrubber: Scrubber, *, in_state: bool) -> list[Finding]:
    found = []
    for start, end, what in scrubber.find(data):
        text = data[start:end]
        line = data.count(b"\n", 0, start) + 1
        shown = text[:4].decode("utf-8", "replace")
        kind = "the value of a secret variable" if what == "secret value" else "a token"
        found.append(
            Finding(
                _id(SECRET, path, text),
                SECRET,
                path,
                line,
                f"{kind} ({shown}…, {len(text)} characters)",
                in_state,
            )
        )
    return found


def history_files(
    repo: Path,
    blobs: dict[str, str],
    known: set[str],
    scrubber: Scrubber,
    sent: dict[str, str] | None = None,
) -> list[Finding]:
    """Secrets in the history's files whose blobs the remote does not have (``known``).

    A file the remote holds another version of (``sent``: path -> blob there; the ledger,
    which only grows, and task.json) reports only secrets that version does not hold:
    those left with an earlier push, scanned then or let through by id, and finding them
    again would ask for the same ``--allow`` at every push after."""
    new = {path: blob for path, blob in blobs.items() if blob not in known}
    found: list[Finding] = []
    for (path, _), data in zip(new.items(), _contents(repo, list(new.values())), strict=True):
        found += secrets_in(data, path, scrubber, in_state=False)
    before = {p: b for p, b in (sent or {}).items() if p in {f.path for f in found}}
    if before:
        gone: set[str] = set()  # ids hold the kind, the path and the secret, not the line
        for (path, _), data in zip(
            before.items(), _contents(repo, list(before.values())), strict=True
        ):
            gone |= {f.id for f in secrets_in(data, path, scrubber, in_state=False)}
        found = [f for f in found if f.id not in gone]
    return found


def state_files(
    task: Task,
    tips: Iterable[str],
    exclude: Iterable[str],
    scrubber: Scrubber,
    max_blob: int,
    allow: frozenset[str] = frozenset(),
) -> list[Finding]:
    """Everything wrong with the files of the commits reachable from ``tips`` and not
    from ``exclude`` (what the remote has, and the task's bases), but what ``allow``
    lets through."""
    repo = task.project.root
    tips = [t for t in dict.fromkeys(tips)]
    if not tips:
        return []
    listed = git.git(repo, "rev-list", "--objects", *tips, "--not", *dict.fromkeys(exclude), "--")
    named: dict[str, str] = {}
    for line in listed.stdout.split(b"\n"):
        sha, space, name = line.partition(b" ")
        if space and name:  # commits have no path; a tree's is a directory: both drop out
            named.setdefault(sha.decode(), name.decode("utf-8", "surrogateescape"))
    objects = list(named)
    if not objects:
        return []
    sizes = _blob_sizes(repo, objects)
    blobs = [(b, named[b]) for b in objects if b in sizes and b in named]
    found: list[Finding] = []
    small = [(b, p) for b, p in blobs if sizes[b] <= max_blob]
    for blob, path in blobs:
        if sizes[blob] > max_blob:
            found.append(
                Finding(
                    _id(TOO_BIG, path, blob.encode()),
                    TOO_BIG,
                    path,
                    None,
                    f"{sizes[blob]} bytes, over share.max_blob ({max_blob}); a recorded state "
                    "is never cut",
                    True,
                )
            )
    for (_, path), data in zip(small, _contents(repo, [b for b, _ in small]), strict=True):
        found += secrets_in(data, path, scrubber, in_state=True)
    paths = sorted({p for _, p in blobs})
    found += _ignored(task, paths)
    found += _hidden(task, paths)
    return _with_steps(task, [f for f in found if f.id not in allow], tips, exclude)


def _blob_sizes(repo: Path, objects: list[str]) -> dict[str, int]:
    checked = git.git(
        repo,
        "cat-file",
        "--batch-check=%(objectname) %(objecttype) %(objectsize)",
        input="".join(f"{o}\n" for o in objects).encode(),
    ).out
    sizes = {}
    for line in checked.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] == "blob":
            sizes[parts[0]] = int(parts[2])
    return sizes


def _contents(repo: Path, blobs: list[str]) -> Iterable[bytes]:
    from bar.share.history_commit import cat_many

    return cat_many(repo, blobs)


def _ignored(task: Task, paths: list[str]) -> list[Finding]:
    if not paths:
        return []
    repo = task.project.root
    said = git.git(
        repo,
        "check-ignore",
        "--no-index",
        "-z",
        "--stdin",
        input=question(paths),
        check=False,
    )
    said_ignored = answered(said.stdout)
    ignored = [p for p in paths if p in said_ignored]
    if not ignored:
        return []
    at_base = _in_tree(repo, task.base_commit, ignored)
    return [
        Finding(
            _id(IGNORED, p, b""),
            IGNORED,
            p,
            None,
            "your checkout's ignore rules ignore it (.gitignore, info/exclude)",
            True,
        )
        for p in ignored
        if p not in at_base
    ]


def _in_tree(repo: Path, commit: str, paths: list[str]) -> set[str]:
    asked = "".join(f"{commit}:{p}\n" for p in paths).encode()
    said = git.git(repo, "cat-file", "--batch-check=%(objecttype)", input=asked, check=False).out
    return {
        p for p, line in zip(paths, said.splitlines(), strict=False) if not line.endswith("missing")
    }


def _hidden(task: Task, paths: list[str]) -> list[Finding]:
    prefixes = hidden_prefixes(task)
    return [
        Finding(
            _id(HIDDEN, p, b""),
            HIDDEN,
            p,
            None,
            "it is under sandbox.deny_read",
            True,
        )
        for p in paths
        if any(p == pre or p.startswith(pre + "/") for pre in prefixes)
    ]


def hidden_prefixes(task: Task) -> list[str]:
    """``sandbox.deny_read`` as paths relative to the repository (those inside it)."""
    out = []
    roots = [os.path.realpath(task.project.root), os.path.realpath(task.worktree)]
    for entry in task.project.config.sandbox.deny_read:
        full = str(home_dir()) + entry[1:] if entry.startswith("~") else entry
        full = os.path.realpath(full)
        for root in roots:
            if full.startswith(root + os.sep):
                out.append(full[len(root) + 1 :])
    return out


def _with_steps(
    task: Task, found: list[Finding], tips: list[str], exclude: Iterable[str]
) -> list[Finding]:
    """Each state finding with the first step whose state has its file."""
    if not any(f.in_state for f in found):
        return found
    states: dict[str, str] = {}
    for recorded in task.ledger.read_all(warn=False):
        snap = getattr(recorded, "snapshot", None)
        if snap:
            states.setdefault(snap, recorded.step_id)
    chain = git.git(
        task.project.root,
        "rev-list",
        "--first-parent",
        "--reverse",
        *tips[:1],
        "--not",
        *dict.fromkeys(exclude),
        "--",
    ).out.split()
    # one batch: for each file found, which recorded states have it (oldest first)
    paths = dict.fromkeys(f.path for f in found if f.in_state)
    asked = [(path, sha) for path in paths for sha in chain if sha in states]
    said = git.git(
        task.project.root,
        "cat-file",
        "--batch-check=%(objecttype)",
        input="".join(f"{sha}:{path}\n" for path, sha in asked).encode(),
        check=False,
    ).out.splitlines()
    first: dict[str, str] = {}
    for (path, sha), line in zip(asked, said, strict=False):
        if not line.endswith("missing"):
            first.setdefault(path, states[sha])
    out = []
    for f in found:
        step = first.get(f.path) if f.in_state else None
        out.append(Finding(f.id, f.kind, f.path, f.line, f.detail, f.in_state, step))
    return out
