"""Named pipes where git reads a file.

git opens the ignore and attribute files of each directory it reads (``.gitignore``,
``.gitattributes``), the worktree's ``.gitmodules`` (through a link too), and the
``HEAD``, refs and configuration of each nested repository with a plain ``open``, which
for a named pipe (a FIFO) waits for a writer for ever: one ``mkfifo .gitignore`` in a
step hung every later bar command, and the developer's own ``git status``. Before bar's
git looks at a worktree (``planted``, from ``bar.history.side_index`` and the speed
layer's ``rescan``), bar looks for them; while one is there it records nothing and says
which (``refuse``, a ``SnapshotFailed``: the step stays pending, nothing is lost). git
stores no named pipe, so the record never held one, and removing it is the developer's
to do. (bar's own reads of such files, ``bar.git.read_small``, never wait on one.)

A whole look finds them with one ``find`` of the worktree, which reads every directory
as git's own look does, and one of the nested repositories' git directories; a scoped
one looks at the paths of its scope and below the directories in it.

The same look weighs the rule files themselves: git matches every rule of the
``.gitattributes`` above a file against it each time it converts, hashes, diffs or
checks it out, and every ``.gitignore`` rule against each path it does not track. A
step writes 400,000 rules (3 MB) in a second; with 1,000 files bar then took 136 s to
record it and 16 s each later step (git's own cap is 100 MB a file: hours). So while the
worktree's rule files (outside nested repositories) hold more than ``RULES_LARGEST``
together, or its ``.gitattributes`` files more than ``ATTRIBUTES_LARGEST`` (1 MB of
patterns of several ``*`` took 170 s to record with 20,000 files, and each later look
100 s), bar records nothing and says so, as for a pipe. A scoped look that meets a rule
file weighs them all.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
from collections.abc import Sequence
from pathlib import Path

from bar.base.notices import byte_size, plural
from bar.errors import SnapshotFailed
from bar.git import read_small
from bar.store.files import write_bytes_atomic

READ_BY_NAME = (".gitignore", ".gitattributes")
RULES_LARGEST = 1 << 20  # bytes the worktree's rule files (``READ_BY_NAME``) hold together
# and its .gitattributes files, which git matches against each file it hashes, diffs or
# checks out (a change of them has every recorded file hashed again: ``bar.git.conversions``)
ATTRIBUTES_LARGEST = 128 << 10
FOLLOWED = (".gitmodules",)  # (read through a symbolic link too)
# what git reads of a nested repository's git directory to tell it is one and find its
# commit (a named pipe there hung bar's git and its own reads: ``git.read_small``)
IN_GIT_DIR = ("HEAD", "commondir", "config", "packed-refs", "refs")


def planted(worktree: Path, scope: Sequence[str] | None) -> list[str]:
    """The named pipes, relative to ``worktree`` (else absolute), that git would open at
    or below the paths of ``scope`` (None, or ``["."]``: the whole worktree): called as
    one of ``READ_BY_NAME`` or ``FOLLOWED`` (a link to one, for the latter), or in a
    nested repository's git directory."""
    return _looked(worktree, scope)[0]


def _looked(worktree: Path, scope: Sequence[str] | None) -> tuple[list[str], dict[str, int]]:
    """``planted``, and the rule files (regular ``READ_BY_NAME``) at or below ``scope``
    outside nested repositories, each with its size."""
    prefix = str(worktree) + os.sep
    if scope is None or "." in scope:
        return _found([str(worktree)], prefix)
    rules: dict[str, int] = {}
    named: list[str] = []
    below: list[str] = []
    for rel in scope:
        parts = rel.split("/")
        if ".git" in parts[1:]:  # (in a nested repository's .git: all of it is looked at)
            below.append(prefix + "/".join(parts[: parts.index(".git", 1)]))
            continue
        try:
            st = os.lstat(prefix + rel)
        except OSError:
            continue
        name = parts[-1]
        if stat.S_ISDIR(st.st_mode):
            below.append(prefix + rel)
        elif (stat.S_ISFIFO(st.st_mode) and name in (*READ_BY_NAME, *FOLLOWED)) or (
            stat.S_ISLNK(st.st_mode) and name in FOLLOWED and _is_fifo(prefix + rel)
        ):
            named.append(rel)
        elif stat.S_ISREG(st.st_mode) and name in READ_BY_NAME:
            rules[rel] = st.st_size
    deep, deep_rules = _found(below, prefix) if below else ([], {})
    return sorted({*named, *deep}), {**rules, **deep_rules}


def _is_fifo(path: str) -> bool:
    try:
        return stat.S_ISFIFO(os.stat(path).st_mode)
    except OSError:
        return False


def refuse(worktree: Path, scope: Sequence[str] | None, noted: Path | None = None) -> None:
    """Raise ``SnapshotFailed`` naming the named pipes ``planted`` finds, if any, or
    if the worktree's rule files hold more than ``RULES_LARGEST`` together. A scoped
    look weighs them all when it meets one of them, or when one of those ``noted`` (the
    rule files of the last whole weighing, kept there with their inode, size and ctime)
    moved: a write through another name of one (a hard link) is seen by no watch."""
    found, rules = _looked(worktree, scope)
    whole = scope is None or "." in scope
    if not found and not whole and (rules or _moved(worktree, noted)):
        found, rules = _looked(worktree, None)
        whole = True
    if not found:
        _refuse_heavy_rules(worktree, rules)
        if whole and noted is not None:  # (only once they pass: until then, weighed again)
            _note(worktree, noted, rules)
        return
    shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
    raise SnapshotFailed(
        f"{plural(len(found), 'named pipe')} where git reads a file ({shown}): any git "
        "that looks at the worktree waits on one for ever, so nothing is recorded while "
        "it is there",
        hint="remove "
        + ("it" if len(found) == 1 else "them")
        + f" (rm -- {' '.join(_quoted(worktree, found[:5]))}), then run your next step or "
        "`bar doctor --repair`: what is pending is recorded then, nothing is lost",
    )


def _refuse_heavy_rules(worktree: Path, rules: dict[str, int]) -> None:
    if sum(rules.values()) > min(RULES_LARGEST, ATTRIBUTES_LARGEST):
        rules = _read_by_git(worktree, rules)
    attributes = {p: n for p, n in rules.items() if p.rpartition("/")[2] == ".gitattributes"}
    if sum(attributes.values()) > ATTRIBUTES_LARGEST:
        rules, names, most = attributes, ".gitattributes files", ATTRIBUTES_LARGEST
    elif sum(rules.values()) > RULES_LARGEST:
        names, most = ".gitignore and .gitattributes files", RULES_LARGEST
    else:
        return
    total = sum(rules.values())
    heaviest = sorted(rules, key=lambda p: (-rules[p], p))[:3]
    shown = ", ".join(f"{p} ({byte_size(rules[p])})" for p in heaviest)
    more = f" and {len(rules) - 3} more" if len(rules) > 3 else ""
    raise SnapshotFailed(
        f"the worktree's {names} hold {byte_size(total)} of rules ({shown}{more}): git "
        "matches each rule against every file it looks at, minutes a look, so nothing is "
        f"recorded while they hold more than {byte_size(most)}",
        hint="make them smaller (or remove "
        + ("it" if len(heaviest) == 1 else "the largest")
        + f": rm -- {' '.join(_quoted(worktree, heaviest[:1]))}), then run your next "
        "step or `bar doctor --repair`: what is pending is recorded then, nothing is lost",
    )


def noted_rules(index: Path) -> Path:
    """Where the rule files of the side index ``index``'s worktree are noted."""
    return index.with_name(index.name + ".rules")


def _note(worktree: Path, noted: Path, rules: dict[str, int]) -> None:
    prefix = str(worktree) + os.sep
    said: dict[str, list[int]] = {}
    for path in rules:
        try:
            st = os.lstat(prefix + path)
        except OSError:
            continue
        said[path] = [st.st_ino, st.st_size, st.st_ctime_ns]
    try:
        if said:
            data = json.dumps({"version": 1, "files": said}).encode()
            with contextlib.suppress(OSError), open(noted, "rb") as f:
                if f.read(len(data) + 1) == data:
                    return  # (as noted: each whole look of an unchanged tree meets that)
            write_bytes_atomic(noted, data)
        else:
            noted.unlink(missing_ok=True)
    except OSError:
        pass  # (then a scoped look meets no note: it weighs what it meets, as before)


def _moved(worktree: Path, noted: Path | None) -> bool:
    """Whether a rule file ``noted`` names is gone or changed since it was noted."""
    if noted is None:
        return False
    try:
        with open(noted, "rb") as f:
            said = json.loads(f.read()).get("files")
    except (OSError, ValueError, AttributeError):
        return False
    if not isinstance(said, dict):
        return False
    prefix = str(worktree) + os.sep
    for path, was in said.items():
        try:
            st = os.lstat(prefix + str(path))
        except OSError:
            return True
        if [st.st_ino, st.st_size, st.st_ctime_ns] != was:
            return True
    return False


def _read_by_git(worktree: Path, rules: dict[str, int]) -> dict[str, int]:
    """Of ``rules``, those git reads: not in an ignored directory (git walks none; the
    rule files of ``node_modules/`` are no cost). A rule file that ignores itself is
    read all the same: its directory is asked, not the file."""
    from bar.git import ignored

    folders = sorted({d for d in (p.rpartition("/")[0] for p in rules) if d})
    if not folders:
        return rules
    out = ignored.by_rules(worktree, folders)
    return {p: n for p, n in rules.items() if p.rpartition("/")[0] not in out}


def _found(tops: list[str], prefix: str) -> tuple[list[str], dict[str, int]]:
    """``find`` below each of ``tops`` (absolute): named pipes git would open (links
    are not followed, but for ``FOLLOWED``), and in the git directory of each nested
    repository (a ``.git`` directory, or the one a ``.git`` file names); and the rule
    files outside nested repositories, each with its size."""
    names = [arg for name in READ_BY_NAME for arg in ("-o", "-name", name)][1:]
    followed = [arg for name in FOLLOWED for arg in ("-o", "-name", name)][1:]
    fifo = ("(", "-type", "p", "-o", "-xtype", "p", ")")
    out = _find(
        tops,
        ("(", "-name", ".git", "(", "-type", "d", "-o", "-type", "f", ")", "-printf", "g%p\\0"),
        ("-prune", ")", "-o", "(", *names, ")", "-type", "p", "-printf", "p%p\\0"),
        ("-o", "(", *names, ")", "-type", "f", "-printf", "r%s %p\\0"),
        ("-o", "(", *followed, ")", *fifo, "-printf", "p%p\\0"),
    )
    found = [p[1:] for p in out if p.startswith("p")]
    root = prefix + ".git"
    nested = [p[1:] for p in out if p.startswith("g") and p[1:] != root]
    dirs = [d for d in (_git_dir(p) for p in nested) if d]
    inside = [os.path.join(d, name) for d in dirs for name in IN_GIT_DIR]
    inside = [p for p in inside if os.path.lexists(p)]
    if inside:
        found += _find(inside, (*fifo, "-print0"))
    owners = tuple(os.path.dirname(p) + os.sep for p in nested)
    rules: dict[str, int] = {}
    for line in out:
        if line.startswith("r"):
            size, _, path = line[1:].partition(" ")
            if path.startswith(prefix) and not path.startswith(owners) and size.isdigit():
                rules[path[len(prefix) :]] = int(size)
    return sorted({p[len(prefix) :] if p.startswith(prefix) else p for p in found}), rules


def _find(tops: list[str], *expression: tuple[str, ...]) -> list[str]:
    res = subprocess.run(
        ["find", *tops, *(arg for part in expression for arg in part)],
        capture_output=True,
        check=False,
    )  # (a directory it cannot read is one git cannot either: git says so)
    return [os.fsdecode(p) for p in res.stdout.split(b"\0") if p]


def _git_dir(dot_git: str) -> str | None:
    """The git directory a nested repository's ``.git`` is or names (None: none)."""
    if os.path.isdir(dot_git) and not os.path.islink(dot_git):
        return dot_git
    try:
        said = read_small(dot_git).decode("utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not said.startswith("gitdir: "):
        return None
    named = os.path.join(os.path.dirname(dot_git), said[len("gitdir: ") :])
    return named if os.path.isdir(named) else None


def _quoted(worktree: Path, paths: list[str]) -> list[str]:
    import shlex

    return [shlex.quote(str(worktree / p)) for p in paths]
