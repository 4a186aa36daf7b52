"""What the task worktree's own git files name must be in the repository.

A step writes the worktree's admin directory (git keeps the worktree's ``HEAD``, index and
reflogs there), and ``git fsck`` of the repository reads all three: a reflog entry, a
detached ``HEAD`` or an index entry naming an object the store does not hold is an error
there (left by a step that wrote them by hand, by one whose git wrote into another
repository through a repointed ``commondir``, or by objects ``bar.sandbox.quarantine`` refused).
So once a step is recorded, each of them that changed since bar last looked is checked
with one ``git cat-file``: reflog entries naming a missing object are taken out, a
``HEAD`` on one is put back on the task branch, an index entry naming one is reset to
the branch's. What was taken out is kept in the task's ``tampered/`` and said.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from bar import git
from bar.model.tasks import Task
from bar.store import below
from bar.store.files import read_regular, write_bytes_atomic
from bar.worktree.guard import admin_dir, common_dir

SEEN = "worktree-state.json"  # in the task's directory: (size, mtime) of each file looked at


def check(task: Task) -> list[str]:
    """Check what changed since the last look; one line per thing put right."""
    admin = admin_dir(task, common_dir(task))
    if admin is None:
        return []
    seen = _seen(task)
    now: dict[str, list[int]] = {}
    changed = []
    for rel in ["HEAD", "index", *(f"logs/{r}" for r, _ in _logs(admin))]:
        try:
            st = os.lstat(admin / rel)
        except OSError:
            continue
        now[rel] = [st.st_size, st.st_mtime_ns]
        if seen.get(rel) != now[rel]:
            changed.append(rel)
    if not changed:
        return []
    found = _put_right(task, admin, changed)
    if found:  # (the files were rewritten: looked at again next time)
        now = {rel: v for rel, v in now.items() if rel not in changed}
    write_bytes_atomic(task.dir / SEEN, json.dumps(now).encode(), durable=False)
    return found


def _put_right(task: Task, admin: Path, changed: list[str]) -> list[str]:
    logs = {rel: read_regular(admin / rel) or b"" for rel in changed if rel.startswith("logs/")}
    head = (read_regular(admin / "HEAD") or b"").strip().decode(errors="replace")
    head = head if "HEAD" in changed and git.is_object_id(head) else ""
    staged = _staged(task) if "index" in changed else {}
    named = {w for data in logs.values() for line in data.splitlines() for w in _ids(line)}
    named |= {head} - {""} | set(staged.values())
    missing = _missing(task, named)
    if not missing:
        return []
    found = []
    for rel, data in logs.items():
        lines = data.splitlines(keepends=True)
        kept = [ln for ln in lines if not set(_ids(ln)) & missing]
        if len(kept) != len(lines):
            aside = _aside(task, rel, data)
            write_bytes_atomic(admin / rel, b"".join(kept))
            found.append(
                f"the worktree's reflog {rel} named {len(lines) - len(kept)} object(s) "
                f"not in the repository; bar took those entries out ({aside})"
            )
    if head in missing:
        _aside(task, "HEAD", f"{head}\n".encode())
        write_bytes_atomic(admin / "HEAD", f"ref: refs/heads/{task.branch}\n".encode())
        found.append(
            f"the worktree's HEAD named {head}, which is not in the repository; bar "
            f"put it back on {task.branch}"
        )
    lost = sorted(path for path, oid in staged.items() if oid in missing)
    if lost:
        git.git(
            task.worktree, "--literal-pathspecs", "reset", "-q", "HEAD", "--", *lost, check=False
        )
        found.append(
            f"the worktree's index named objects not in the repository for "
            f"{', '.join(lost[:5])}{' and more' if len(lost) > 5 else ''}; bar reset "
            "those entries to the task branch's"
        )
    return found


def _logs(admin: Path) -> list[tuple[str, bytes]]:
    return list(below.tree(admin / "logs"))


def _seen(task: Task) -> dict[str, list[int]]:
    try:
        loaded = json.loads(read_regular(task.dir / SEEN) or b"{}")
    except ValueError:
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _ids(line: bytes) -> list[str]:
    """The old and new object ids of a reflog line (not the null id: it names nothing)."""
    words = line.split(b"\t")[0].split()[:2]
    return [
        w.decode() for w in words if w.strip(b"0") and git.is_object_id(w.decode(errors="replace"))
    ]


def _staged(task: Task) -> dict[str, str]:
    """Paths whose index entry differs from the task branch's, with the id it names."""
    res = git.git(
        task.worktree, "diff-index", "--cached", "--raw", "-z", "--no-renames", "HEAD", check=False
    )
    if res.returncode != 0:
        return {}
    fields = res.stdout.split(b"\0")
    staged = {}
    for meta, path in zip(fields[0::2], fields[1::2], strict=False):
        oid = meta.split()[3].decode(errors="replace") if len(meta.split()) >= 4 else ""
        if git.is_object_id(oid) and oid.strip("0"):  # (not a removal)
            staged[os.fsdecode(path)] = oid
    return staged


def _missing(task: Task, ids: set[str]) -> set[str]:
    if not ids:
        return set()
    asked = "".join(f"{i}\n" for i in sorted(ids)).encode()
    res = git.git(
        task.worktree, "cat-file", "--batch-check=%(objectname)", input=asked, check=False
    )
    return {ln.split()[0].decode() for ln in res.stdout.splitlines() if ln.endswith(b" missing")}


def _aside(task: Task, rel: str, data: bytes) -> Path:
    aside = task.dir / "tampered" / f"worktree-{rel.replace('/', '_')}"
    aside.parent.mkdir(mode=0o700, exist_ok=True)
    write_bytes_atomic(aside, data)
    return aside
