"""Named pipes where git reads a file by its name.

git opens the ignore and attribute files of each directory it reads (``.gitignore``,
``.gitattributes``) with a plain ``open``, which for a named pipe (a FIFO) waits for a
writer for ever: one ``mkfifo .gitignore`` in a step hung every later bar command, and the
developer's own ``git status``. Before bar's git looks at a worktree (``planted``, from
``bar.history.side_index`` and the speed layer's ``rescan``), bar looks for them; while
one is there it records nothing and says which (``refuse``, a ``SnapshotFailed``: the
step stays pending, nothing is lost). git stores no named pipe, so the record never held
one, and removing it is the developer's to do.

A whole look finds them with one ``find`` of the worktree (not below a ``.git``), which
reads every directory as git's own look does; a scoped one looks at the paths of its scope
and below the directories in it.
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Sequence
from pathlib import Path

from bar.base.notices import plural
from bar.errors import SnapshotFailed

READ_BY_NAME = (".gitignore", ".gitattributes")


def planted(worktree: Path, scope: Sequence[str] | None) -> list[str]:
    """The named pipes, relative to ``worktree``, called as one of ``READ_BY_NAME`` at or
    below the paths of ``scope`` (None, or ``["."]``: the whole worktree)."""
    prefix = str(worktree) + os.sep
    if scope is None or "." in scope:
        return _found([str(worktree)], prefix)
    named: list[str] = []
    below: list[str] = []
    for rel in scope:
        try:
            st = os.lstat(prefix + rel)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode):
            below.append(prefix + rel)
        elif stat.S_ISFIFO(st.st_mode) and rel.rpartition("/")[2] in READ_BY_NAME:
            named.append(rel)
    return sorted({*named, *(_found(below, prefix) if below else [])})


def refuse(worktree: Path, scope: Sequence[str] | None) -> None:
    """Raise ``SnapshotFailed`` naming the named pipes ``planted`` finds, if any."""
    found = planted(worktree, scope)
    if not found:
        return
    shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
    raise SnapshotFailed(
        f"{plural(len(found), 'named pipe')} where git reads ignore or attribute rules "
        f"({shown}): any git that looks at the worktree waits on one for ever, so nothing "
        "is recorded while it is there",
        hint="remove "
        + ("it" if len(found) == 1 else "them")
        + f" (rm -- {' '.join(_quoted(worktree, found[:5]))}), then run any bar command: "
        "what is pending is recorded then, nothing is lost",
    )


def _found(tops: list[str], prefix: str) -> list[str]:
    """``find`` below each of ``tops`` (absolute): named pipes of the names git reads,
    not below a ``.git``; links are not followed."""
    names = [arg for name in READ_BY_NAME for arg in ("-o", "-name", name)][1:]
    res = subprocess.run(
        ["find", *tops, "-name", ".git", "-prune", "-o", "(", *names, ")", "-type", "p", "-print0"],
        capture_output=True,
        check=False,
    )  # (a directory it cannot read is one git cannot either: git says so)
    mine = os.fsencode(prefix)
    return [os.fsdecode(p[len(mine) :]) for p in res.stdout.split(b"\0") if p.startswith(mine)]


def _quoted(worktree: Path, paths: list[str]) -> list[str]:
    import shlex

    return [shlex.quote(str(worktree / p)) for p in paths]
