"""A git ``pre-push`` hook that pushes task histories with the branch (``bar init --share``).

git runs the hook before it pushes, with the remote's name and URL as arguments and one
line per ref on stdin: ``<local ref> <local sha> <remote ref> <remote sha>``. The hook
runs ``bar push --hook REMOTE``, which finds the tasks behind the commits about to leave
(their ``Bar-Task:`` links, and task branches pushed as they are) and pushes their
histories to ``share.remote`` if set, else to the same remote. If a history is refused
(a secret found), the hook fails and so does the branch's push: nothing leaves that the
record says must not. ``git push --no-verify`` skips it, as any hook.

bar's own pushes run no hooks (``bar.git.NO_PROGRAMS``): the hook never starts itself.
A ``pre-push`` hook that was there before is kept as ``pre-push.before-bar`` and run
first.
"""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import sys
from pathlib import Path

from bar import git
from bar.base.record import record
from bar.errors import BarError
from bar.history import trailers
from bar.model.project import Project
from bar.model.tasks import Task, list_tasks

MARK = "# bar: pushes the task histories behind the pushed commits (bar init --share)"
KEPT = "pre-push.before-bar"
ZERO = "0" * 40


@record(frozen=True)
class Installed:
    path: Path
    kept: Path | None  # the hook that was there, run first
    already: bool


def hooks_dir(project: Project) -> Path:
    """Where git looks for hooks here (``core.hooksPath`` honoured). Asked of git without
    bar's own settings, which point its hooks at nothing."""
    from bar.base.proc import run

    said = run("git", "-C", str(project.root), "rev-parse", "--git-path", "hooks").out.strip()
    path = Path(said)
    return path if path.is_absolute() else project.root / path


def install(project: Project) -> Installed:
    folder = hooks_dir(project)
    folder.mkdir(parents=True, exist_ok=True)
    hook = folder / "pre-push"
    if hook.exists() and MARK in hook.read_text(errors="replace"):
        return Installed(hook, folder / KEPT if (folder / KEPT).exists() else None, True)
    kept = None
    if hook.exists() or hook.is_symlink():
        kept = folder / KEPT
        if kept.exists():
            raise BarError(
                f"{hook} is not bar's, and {kept} is taken",
                hint="merge or remove one of them, then run bar init --share again",
            )
        os.replace(hook, kept)
    hook.write_text(_script(kept is not None))
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return Installed(hook, kept, False)


def _script(chain: bool) -> str:
    bar = _bar_command()
    before = (
        "input=$(cat)\n"
        f'if [ -x "$(dirname "$0")/{KEPT}" ]; then\n'
        f'  printf "%s\\n" "$input" | "$(dirname "$0")/{KEPT}" "$@" || exit $?\n'
        "fi\n"
        f'printf "%s\\n" "$input" | exec {bar} push --hook "$1"\n'
        if chain
        else f'exec {bar} push --hook "$1"\n'
    )
    return f"#!/bin/sh\n{MARK}\n# `git push --no-verify` skips it\n{before}"


def _bar_command() -> str:
    """This bar, by an absolute path when it has one (a venv's bar need not be on the
    PATH git's hooks see)."""
    found = shutil.which("bar")
    argv0 = sys.argv[0] if sys.argv and os.path.isabs(sys.argv[0]) else None
    for candidate in (argv0, found):
        if candidate and os.access(candidate, os.X_OK) and Path(candidate).name == "bar":
            return shlex.quote(candidate)
    return "bar"


def tasks_pushed(project: Project, lines: list[str]) -> list[Task]:
    """The tasks of this machine behind the commits that ``lines`` (the hook's stdin) push."""
    repo = project.root
    linked: set[str] = set()
    own = [t for t in list_tasks(project) if not t.read_only]
    branches = {f"refs/heads/{t.branch}": t.id for t in own}
    for line in lines:
        parts = line.split()
        if len(parts) != 4 or parts[1] == ZERO:
            continue  # a deletion sends nothing
        local_ref, local, _, remote = parts
        not_in = [remote] if remote != ZERO and _have(repo, remote) else ["--remotes"]
        raw = git.git(repo, "log", "-z", "--format=%B", local, "--not", *not_in, "--", check=False)
        for message in raw.stdout.decode("utf-8", "replace").split("\0"):
            linked |= {link.task_id for link in trailers.links(message)}
        if local_ref in branches:  # a task branch pushed as it is
            linked.add(branches[local_ref])
    return [t for t in own if t.id in linked]


def _have(repo: Path, sha: str) -> bool:
    return git.git(repo, "cat-file", "-e", f"{sha}^{{commit}}", check=False).returncode == 0
