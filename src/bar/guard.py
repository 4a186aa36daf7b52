"""What a step must not change: the files that decide what bar and git do next.

Without confinement (SPEC §8) a command run in a task can reach files outside its
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

import contextlib
import os
import re
import time
from pathlib import Path

from bar import git
from bar.notices import warn
from bar.store.files import write_bytes_atomic
from bar.tasks import Task

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
    plain = task.project.root / ".git"
    if plain.is_dir() and not plain.is_symlink():
        return plain
    return Path(git.out(task.project.root, "rev-parse", "--path-format=absolute",
                        "--git-common-dir"))  # fmt: skip


def admin_dir(task: Task, common: Path) -> Path | None:
    """The task worktree's own admin directory in the repository (``<git
    dir>/worktrees/<name>``): the one whose ``gitdir`` file names the worktree."""
    expected = str(task.worktree / ".git")
    first = common / "worktrees" / task.worktree.name
    candidates = [first, *sorted(p for p in (common / "worktrees").glob("*") if p != first)]
    for cand in candidates:
        said = _read(cand / "gitdir")
        if said is not None and said.decode("utf-8", "surrogateescape").strip() == expected:
            return cand
    return None


def check_link(task: Task, common: Path | None = None) -> str | None:
    """Make sure the worktree's ``.git`` file names the task's own admin directory, and
    that directory's ``commondir`` the repository; put them right if not. Returns what
    was wrong (None: all was well)."""
    common = common or common_dir(task)
    admin = admin_dir(task, common)
    if admin is None:
        return None  # git itself lost the worktree: doctor's business, not a tamper
    found = [w for w in (_check_git_file(task, admin), _check_common(task, admin, common)) if w]
    return "; ".join(found) or None


def _check_common(task: Task, admin: Path, common: Path) -> str | None:
    """The admin directory is writable in a confined step; a ``commondir`` pointed at
    another repository would make bar's own git commands read *its* config (filters)."""
    path = admin / "commondir"
    have = _read(path)
    said = (have or b"").decode("utf-8", "surrogateescape").strip()
    if have is not None and not os.path.islink(path) and said:
        with contextlib.suppress(OSError):
            if (admin / said).resolve() == common.resolve():
                return None
    what = f"the worktree's commondir was changed to {(have or b'')[:200]!r}"
    if have is not None or os.path.lexists(path):
        os.replace(path, _aside(task, "commondir"))
    write_bytes_atomic(path, b"../..\n")
    warn(f"{what}; bar put it back; the old one is in {task.dir / 'tampered'}")
    return what


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
        what = "the worktree's .git file was removed" if st is None else (
            "the worktree's .git was replaced by a directory or a link")  # fmt: skip
    if st is not None:
        os.replace(link, _aside(task, ".git"))
    write_bytes_atomic(link, want)
    warn(f"{what}; bar put it back (it must name {admin}); the old one is in "
         f"{task.dir / 'tampered'}")  # fmt: skip
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

    __slots__ = ("_common", "_configs", "_files", "_hooks", "_hooks_dir", "_modes", "_task")

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
                *sorted(self._configs),
                common / "info" / "attributes",
                common / "objects" / "info" / "alternates",  # the object store is writable
            )
        }
        self._hooks_dir = hooks = common / "hooks"
        self._hooks = {name: _read(hooks / name) for name in _names(hooks)}
        self._modes = {p: _mode(p) for p in [*self._files, *(hooks / n for n in self._hooks)]}

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
        for name in sorted(set(self._hooks) | set(_names(self._hooks_dir))):
            path = self._hooks_dir / name
            before, now = self._hooks.get(name), _read(path)
            if now != before:
                found.append(self._put_back(path, before, now))
        for f in found:
            warn(f"guard: {f}")
        return found

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
        return (f"the step set {', '.join(sorted(keys))} in {path}, which would make git run "
                f"a program; bar took it out (the step's version is in {aside})")  # fmt: skip


def _git_config(path: Path, *args: str) -> None:
    import subprocess

    from bar.proc import clean_env

    subprocess.run(["git", "config", "--file", str(path), *args], capture_output=True,
                   env=clean_env({}), check=False)  # fmt: skip


def _mode(path: Path) -> int | None:
    try:
        return os.stat(path).st_mode & 0o777
    except OSError:
        return None


def _names(hooks: Path) -> list[str]:
    try:
        return sorted(n for n in os.listdir(hooks) if not n.endswith(".sample"))
    except (FileNotFoundError, NotADirectoryError):
        return []


def _program_entries(config: bytes) -> set[tuple[str, str]]:
    import subprocess
    import tempfile

    from bar.proc import clean_env

    with tempfile.NamedTemporaryFile() as tmp:
        tmp.write(config)
        tmp.flush()
        res = subprocess.run(["git", "config", "--file", tmp.name, "--list", "-z"],
                             capture_output=True, env=clean_env({}))  # fmt: skip
    if res.returncode != 0:
        return {("unparseable", config.decode("utf-8", "replace"))}
    entries = set()
    for item in res.stdout.split(b"\0"):
        key, _, value = item.decode("utf-8", "surrogateescape").partition("\n")
        if key and _RUNS_A_PROGRAM.match(key.lower()):
            entries.add((key.lower(), value))
    return entries
