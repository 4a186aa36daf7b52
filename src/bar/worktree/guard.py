"""What a step must not change: the files that decide what bar and git do next.

Without confinement (docs/sandbox.md) a command run in a task can reach files outside its
worktree. Some of them would turn bar against the developer: the worktree's ``.git``
file pointed at the developer's own repository (a hard rollback would then reset *their*
branch), bar's ``config.yaml`` with the policy switched off, the policy file itself, a
filter or hook planted in the repository's shared ``.git/config``, ``.git/hooks`` or
``.git/info/attributes`` (run later in the developer's checkout). So, sandbox or not:

- ``check_link`` runs before bar works on a task: the ``.git`` file must name the task's
  own admin directory; anything else is moved aside and the file rewritten;
- a ``Guard`` taken before a step's command starts is checked after it ends: each of
  those files the step changed is put back as it was, the step's version kept under the
  task's ``tampered/`` directory, and the change reported (a ``bar:guard`` policy event
  in the step and a warning).

The repository's config is put back only when the step changed an entry that makes git
run a program (a filter, a hook path, an fsmonitor, a pager, an ssh command, an alias to
a shell command...): an agent setting ``user.name`` or adding a remote is ordinary work.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path

from bar import git
from bar.base.notices import warn
from bar.git import object_guard
from bar.model import tasks
from bar.model.tasks import Task
from bar.store.files import write_bytes_atomic

# file-system clocks are coarse: a file changed just after the step began may carry a
# slightly earlier time
_CLOCK_SLACK_NS = 50_000_000

# config entries that make git run something (`git config --list` keys, lower case)
_RUNS_A_PROGRAM = re.compile(
    r"^(filter\..*\.(clean|smudge|process|required)|core\.(hookspath|fsmonitor|sshcommand"
    r"|pager|editor|askpass|gitproxy|attributesfile|worktree)|diff\..*\.(textconv|command)"
    r"|diff\.external|merge\..*\.driver|credential\..*|gpg\..*program|sequence\.editor"
    r"|pager\..*|alias\..*|include\..*|includeif\..*|uploadpack\..*|receive\..*"
    r"|protocol\..*|remote\..*\.(uploadpack|receivepack)|extensions\..*)$"
)


def _read(path: Path) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None


def common_dir(task: Task) -> Path:
    """The repository's git directory (shared by every worktree)."""
    return task.project.common_dir


def admin_dir(task: Task, common: Path) -> Path | None:
    """The task worktree's own admin directory in the repository."""
    return tasks.admin_dir(common, task.worktree)


def check_link(task: Task, common: Path | None = None) -> str | None:
    """Make sure the worktree is wired to the task as git wired it: its ``.git`` file
    names the task's own admin directory; that directory's ``commondir`` the repository
    and its ``gitdir`` the worktree; its ``HEAD`` the task branch (or a commit), and the
    task branch is no link to another ref. Puts right what is not; returns what was
    wrong (None: all was well). Runs before bar works on a task and after every step."""
    common = common or common_dir(task)
    admin = admin_dir(task, common)
    if admin is None:
        return None  # git itself lost the worktree: doctor's business, not a tamper
    checks = (
        _check_git_file(task, admin),
        _check_file(
            task,
            admin / "commondir",
            b"../..\n",
            lambda have: (
                (admin / have.decode("utf-8", "surrogateescape").strip()).resolve()
                == common.resolve()
            ),
        ),
        _check_file(
            task,
            admin / "gitdir",
            f"{task.worktree / '.git'}\n".encode(),
            lambda have: have.strip() == str(task.worktree / ".git").encode(),
        ),
        _check_file(
            task,
            admin / "HEAD",
            f"ref: refs/heads/{task.branch}\n".encode(),
            lambda have: (
                have.strip() == f"ref: refs/heads/{task.branch}".encode()
                or git.is_object_id(have.strip().decode("ascii", "replace"))
            ),
        ),
        _check_branch(task, common),
        _check_entries(task, admin),
    )
    return "; ".join(w for w in checks if w) or None


# what a worktree's admin directory holds that bar leaves alone in this walk: the
# step's own objects, which bar brings in without following a link (``bar.sandbox.quarantine``)
_WALKED_PAST = frozenset({"bar-objects"})


def _check_entries(task: Task, admin: Path) -> str | None:
    """No link, and nothing but files and directories, anywhere in the worktree's admin
    directory, which a step may write: git follows a link where it writes a file there
    (its lock on ``index``, the reflog ``logs/HEAD`` it appends to), so a link a step
    left would have bar's own git write where the link points (the developer's
    ``~/.bashrc``, another repository's index). Each one found is moved aside, under the
    task's ``tampered/`` directory, and said."""
    found: list[str] = []
    stack = [admin]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
            if folder == admin and entry.name in _WALKED_PAST:
                continue
            if entry.is_dir(follow_symlinks=False):
                stack.append(Path(entry.path))
            elif not entry.is_file(follow_symlinks=False):
                rel = os.path.relpath(entry.path, admin)
                kind = "a link" if entry.is_symlink() else "a special file"
                os.replace(entry.path, _aside(task, rel))
                found.append(f"the worktree's {rel} was {kind}")
    if not found:
        return None
    what = "; ".join(found)
    warn(f"{what}; bar moved it aside (git would write through it) to {task.dir / 'tampered'}")
    return what


def _check_file(task: Task, path: Path, want: bytes, good: Callable[[bytes], bool]) -> str | None:
    """A git file of the worktree's admin directory (which a confined step can write) as
    git wrote it, or put back as git writes it."""
    have = _read(path) if not os.path.islink(path) else None
    try:
        if have is not None and good(have):
            return None
    except (OSError, ValueError):
        pass
    what = f"the worktree's {path.name} was changed to {(have or b'')[:200]!r}"
    if os.path.lexists(path):
        os.replace(path, _aside(task, path.name))
    write_bytes_atomic(path, want)
    warn(f"{what}; bar put it back; the old one is in {task.dir / 'tampered'}")
    return what


def _check_branch(task: Task, common: Path) -> str | None:
    """The task branch's ref file (its directory is writable in a step) must hold a
    commit, not a link to another ref: bar's rollback would move *that* ref."""
    path = common / "refs" / "heads" / task.branch
    have = _read(path) if not os.path.islink(path) else b"ref: (a link)"
    if have is None:
        return None
    last = task.ledger.last()
    sha = (getattr(last, "head", None) if last else None) or task.base_commit
    if have.startswith(b"ref:"):
        what = f"the task branch {task.branch} was made a link: {have[:200]!r}"
    elif _names_a_commit(task, have.strip().decode("ascii", "replace"), sha):
        return None
    else:
        what = f"the task branch {task.branch} names no commit: {have[:200]!r}"
    os.replace(path, _aside(task, "branch"))
    write_bytes_atomic(path, f"{sha}\n".encode())
    warn(f"{what}; bar set it back to {sha[:10]}, the last commit it recorded")
    return what


def _names_a_commit(task: Task, said: str, known: str) -> bool:
    """Whether the branch's ``said`` is a commit the repository has (``known``, the last
    one bar recorded, is taken as it is: no git is asked on the usual way)."""
    if said == known:
        return True
    if not git.is_object_id(said):
        return False
    res = git.git(task.worktree, "cat-file", "-e", f"{said}^{{commit}}", check=False)
    return res.returncode == 0


def _check_git_file(task: Task, admin: Path) -> str | None:
    link = task.worktree / ".git"
    want = f"gitdir: {admin}\n".encode()
    try:
        st = os.lstat(link)
    except FileNotFoundError:
        st = None
    if st is not None and os.path.isfile(link) and not os.path.islink(link):
        have = _read(link)
        if have is not None and have.strip() == want.strip():
            return None
        what = f"the worktree's .git file was changed to {(have or b'')[:200]!r}"
    else:
        what = (
            "the worktree's .git file was removed"
            if st is None
            else ("the worktree's .git was replaced by a directory or a link")
        )
    if st is not None:
        os.replace(link, _aside(task, ".git"))
    write_bytes_atomic(link, want)
    warn(
        f"{what}; bar put it back (it must name {admin}); the old one is in {task.dir / 'tampered'}"
    )
    return what


def _aside(task: Task, name: str) -> Path:
    folder = task.dir / "tampered"
    folder.mkdir(mode=0o700, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    path = folder / f"{stamp}-{name.replace('/', '_')}"
    n = 1
    while path.exists() or path.is_symlink():
        path = folder / f"{stamp}-{n}-{name.replace('/', '_')}"
        n += 1
    return path


class Guard:
    """The guarded files as they were before a step; ``check`` after it."""

    __slots__ = (
        "_branches",
        "_common",
        "_configs",
        "_files",
        "_hooks",
        "_hooks_dir",
        "_modes",
        "_objects",
        "_own",
        "_refs",
        "_since",
        "_task",
    )

    def __init__(self, task: Task) -> None:
        self._task = task
        self._common = common = common_dir(task)
        admin = admin_dir(task, common)
        # git configs bar's own git commands in the worktree read: the shared one, and
        # the worktree's own (read when extensions.worktreeConfig is on)
        self._configs = {common / "config"} | ({admin / "config.worktree"} if admin else set())
        self._files: dict[Path, bytes | None] = {
            p: _read(p)
            for p in (
                task.project.paths.config,
                task.project.policy_path(),
                task.project.shared_config_path(),
                *sorted(self._configs),
                common / "info" / "attributes",
                common / "objects" / "info" / "alternates",  # the object store is writable
            )
        }
        # the directory of the task branch's ref is writable in a step; it holds the other
        # tasks' branches too, which must stay where their tasks left them
        self._refs = common / "refs" / "heads" / Path(task.branch).parent
        self._own = common / "refs" / "heads" / task.branch
        self._branches = _loose_refs(self._refs, self._own)
        self._since = time.time_ns() - _CLOCK_SLACK_NS
        self._hooks_dir = hooks = common / "hooks"
        self._hooks = {name: _read(hooks / name) for name in _names(hooks)}
        self._modes = {
            p: _mode(p) for p in [*self._files, *(hooks / n for n in self._hooks), *self._branches]
        }
        self._objects = object_guard.watch(common / "objects")

    def check(self) -> list[str]:
        """Put back what the step changed; return one line per change."""
        found: list[str] = []
        link = check_link(self._task, self._common)
        if link:
            found.append(link)
        for path, before in self._files.items():
            now = _read(path)
            if now == before:
                continue
            if path in self._configs and now is not None:
                planted = _program_entries(now) - _program_entries(before or b"")
                if planted and before is not None:
                    found.append(self._unplant(path, before, now, {k for k, _ in planted}))
                elif planted:
                    found.append(self._put_back(path, before, now))
                continue
            found.append(self._put_back(path, before, now))
        now_refs = _loose_refs(self._refs, self._own)
        for path in sorted(set(self._branches) | set(now_refs)):
            before, now = self._branches.get(path), now_refs.get(path)
            if (
                now != before
                and (before is not None or (now or b"").startswith(b"ref:"))
                and (before != b"ref: (a link)")
            ):
                found.append(self._put_back(path, before, now))
        for name in sorted(set(self._hooks) | set(_names(self._hooks_dir))):
            path = self._hooks_dir / name
            before, now = self._hooks.get(name), _read(path)
            if now != before:
                found.append(self._put_back(path, before, now))
        found += self._check_objects()
        for f in found:
            warn(f"guard: {f}")
        return found

    def _check_objects(self) -> list[str]:
        """Objects the step wrote or touched must hold what their names say
        (``bar.git.object_guard``); a loose one that does not is moved aside."""
        store = self._common / "objects"
        loose, packs = object_guard.changed(store, self._objects, self._since)
        found = []
        for cache in object_guard.planted_caches(store, self._since):
            aside = _aside(self._task, "pack-" + cache.name)
            try:
                os.replace(cache, aside)
            except OSError:  # (another file system): gone, then
                import shutil  # (not loaded by a plain step)

                shutil.rmtree(cache, ignore_errors=True) if cache.is_dir() else cache.unlink()
            found.append(
                f"the step wrote {cache.name}, which git would trust about the "
                f"packs without checking it; bar moved it to {aside} (git makes it "
                "again when it needs one)"
            )
        for bad in object_guard.bad_objects(self._task.worktree, loose, packs):
            path = Path(bad)
            if path.suffix == ".pack":
                found.append(
                    f"the pack {path} fails git's check after the step (rewritten?); "
                    "run `git fsck` in the repository"
                )
                continue
            name = path.parent.name + path.name
            aside = _aside(self._task, "object-" + name)
            os.replace(path, aside)
            again = (
                " and stored it again from the worktree"
                if self._store_again(name)
                else ("; git will report it missing")
            )
            found.append(
                f"the object {name} did not hold what its name says (rewritten?); "
                f"bar moved it to {aside}{again}"
            )
        return found

    def _store_again(self, blob: str) -> bool:
        """Write ``blob`` again from a worktree file recorded with it, if one still holds
        it (bar's own index says which)."""
        env = git.index_env(self._task.index)
        listed = git.git(self._task.worktree, "ls-files", "-s", "-z", env=env, check=False)
        for entry in listed.out.split("\0"):
            meta, _, rel = entry.partition("\t")
            if blob in meta.split() and rel:
                res = git.git(self._task.worktree, "hash-object", "-w", "--", rel, check=False)
                if res.out.strip() == blob:
                    return True
        return False

    def _put_back(self, path: Path, before: bytes | None, now: bytes | None) -> str:
        kept = ""
        if now is not None or os.path.lexists(path):
            aside = _aside(self._task, path.name)
            os.replace(path, aside)
            kept = f" (the step's version is in {aside})"
        if before is not None:
            write_bytes_atomic(path, before)
            os.chmod(path, self._modes.get(path) or 0o600)  # as it was
            return f"the step changed {path}; bar put it back{kept}"
        return f"the step created {path}; bar removed it{kept}"

    def _unplant(self, path: Path, before: bytes, now: bytes, keys: set[str]) -> str:
        """Take out of the repository's config the entries the step added that run a
        program (as they were before, if they were there); keep the rest of its edits."""
        aside = _aside(self._task, path.name)
        write_bytes_atomic(aside, now)
        old = [(k, v) for k, v in sorted(_program_entries(before)) if k in keys]
        for key in sorted(keys):
            _git_config(path, "--unset-all", key)
        for key, value in old:
            _git_config(path, "--add", key, value)
        return (
            f"the step set {', '.join(sorted(keys))} in {path}, which would make git run "
            f"a program; bar took it out (the step's version is in {aside})"
        )


def _git_config(path: Path, *args: str) -> None:
    import subprocess

    from bar.base.proc import clean_env

    subprocess.run(
        ["git", "config", "--file", str(path), *args],
        capture_output=True,
        env=clean_env({}),
        check=False,
    )


def _mode(path: Path) -> int | None:
    try:
        return os.stat(path).st_mode & 0o777
    except OSError:
        return None


def _loose_refs(folder: Path, own: Path) -> dict[Path, bytes]:
    """Every ref file under ``folder`` but ``own`` (links read as links), by path."""
    found: dict[Path, bytes] = {}
    for root, _dirs, files in os.walk(folder):
        for name in files:
            path = Path(root, name)
            if path != own and not name.endswith(".lock"):
                found[path] = (b"ref: (a link)" if os.path.islink(path) else _read(path)) or b""
    return found


def _names(hooks: Path) -> list[str]:
    try:
        return sorted(n for n in os.listdir(hooks) if not n.endswith(".sample"))
    except (FileNotFoundError, NotADirectoryError):
        return []


def _program_entries(config: bytes) -> set[tuple[str, str]]:
    import subprocess
    import tempfile

    from bar.base.proc import clean_env

    with tempfile.NamedTemporaryFile() as tmp:
        tmp.write(config)
        tmp.flush()
        res = subprocess.run(
            ["git", "config", "--file", tmp.name, "--list", "-z"],
            capture_output=True,
            env=clean_env({}),
        )
    if res.returncode != 0:
        return {("unparseable", config.decode("utf-8", "replace"))}
    entries = set()
    for item in res.stdout.split(b"\0"):
        key, _, value = item.decode("utf-8", "surrogateescape").partition("\n")
        if key and _RUNS_A_PROGRAM.match(key.lower()):
            entries.add((key.lower(), value))
    return entries
