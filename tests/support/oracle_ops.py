"""The worktree operations of the differential oracle (``tests/test_oracle.py``): made
by the test itself (a hand) or by a step's own process, which imports only this module
(the standard library's: a step's start stays short)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

_WHO = ["-c", "user.name=oracle", "-c", "user.email=oracle@localhost", "-c", "commit.gpgsign=false"]


def _p(root: Path, rel: bytes) -> str:
    return os.path.join(os.fsencode(root), rel).decode("utf-8", "surrogateescape")


def clear(path: str) -> None:
    if os.path.islink(path) or os.path.isfile(path):
        os.unlink(path)
    elif os.path.isdir(path):
        shutil.rmtree(path)


def write(root: Path, rel: bytes, data: bytes) -> None:
    path = _p(root, rel)
    parent = os.path.dirname(path)
    if os.path.islink(parent) or os.path.isfile(parent):
        os.unlink(parent)
    os.makedirs(parent, exist_ok=True)
    clear(path) if os.path.isdir(path) else None
    with open(path, "wb") as f:
        f.write(data)


def apply_op(root: Path, o: tuple[Any, ...]) -> None:
    """Perform one operation on the worktree; impossible ones are skipped."""
    kind, arg = o[0], o[1]
    path = _p(root, arg)
    try:
        if kind == "write":
            write(root, arg, o[2])
        elif kind == "delete":
            clear(path)
        elif kind == "chmod" and os.path.isfile(path) and not os.path.islink(path):
            os.chmod(path, os.stat(path).st_mode ^ 0o111)
        elif kind == "case" and os.path.lexists(path):
            name = os.path.basename(path)
            other = os.path.join(os.path.dirname(path), name.swapcase())
            if other != path and not os.path.lexists(other):
                os.rename(path, other)
        elif kind == "dir_to_link" and os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
            # a directory of this example's own, writable in a confined step
            os.symlink(os.environ.get("ORACLE_OUTSIDE", "/tmp"), path)
        elif kind == "link_to_dir" and os.path.islink(path):
            os.unlink(path)
            write(root, arg + b"/back.txt", b"back\n")
        elif kind == "mkdir" and not os.path.lexists(path):
            os.makedirs(path, exist_ok=True)  # an empty directory: git records nothing
        elif kind == "nested":
            os.makedirs(path, exist_ok=True)
            if not os.path.exists(os.path.join(path, ".git")):
                subprocess.run(["git", "init", "-q", path], check=True)
            _append(root, arg + b"/inside.txt", b"inside\n")  # (the same in both plays)
        elif kind == "move" and os.path.lexists(path):
            clear(_p(root, o[2])) if os.path.lexists(_p(root, o[2])) else None
            os.makedirs(os.path.dirname(_p(root, o[2])), exist_ok=True)
            os.rename(path, _p(root, o[2]))
        elif kind == "move_dir" and os.path.isdir(path) and not os.path.lexists(_p(root, o[2])):
            os.rename(path, _p(root, o[2]))  # a whole directory, files and all, moves
        elif kind == "temp":  # made and gone within the step: nothing to record
            write(root, arg + b".tmp", b"scratch\n")
            os.unlink(_p(root, arg + b".tmp"))
        elif kind == "symlink" and not os.path.lexists(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            os.symlink("a.txt", path)
        elif kind == "rewrite_keep" and os.path.isfile(path) and not os.path.islink(path):
            # as many other bytes, the mtime set back: only the ctime tells (``bar.git.racy``)
            st_before = os.stat(path)
            with open(path, "rb") as f:
                data = f.read()
            with open(path, "wb") as f:
                f.write(bytes(b ^ 0x20 if 0x41 <= (b | 0x20) <= 0x7A else b for b in data))
            os.utime(path, ns=(st_before.st_atime_ns, st_before.st_mtime_ns))
        elif kind == "touch_back" and os.path.lexists(path):
            os.utime(path, (1_000_000_000, 1_000_000_000), follow_symlinks=False)
        elif kind == "hardlink_out" and os.path.isfile(path) and not os.path.islink(path):
            # a second name outside the worktree, written through later (``write_outside``)
            outside = os.path.join(os.environ["ORACLE_OUTSIDE"], "links")
            os.makedirs(outside, exist_ok=True)
            os.link(path, os.path.join(outside, f"{len(os.listdir(outside))}"))
        elif kind == "write_outside":
            outside = os.path.join(os.environ["ORACLE_OUTSIDE"], "links")
            for name in sorted(os.listdir(outside)) if os.path.isdir(outside) else []:
                with open(os.path.join(outside, name), "r+b") as f:
                    f.truncate(0)
                    f.write(arg)
        elif (
            kind == "swap_dirs"
            and arg != o[2]
            and os.path.isdir(path)
            and os.path.isdir(_p(root, o[2]))
            and not os.path.islink(path)
            and not os.path.islink(_p(root, o[2]))
        ):
            other = _p(root, o[2])
            if not (other + "/").startswith(path + "/") and not (path + "/").startswith(
                other + "/"
            ):
                aside = path + ".swap"
                os.rename(path, aside)
                os.rename(other, path)
                os.rename(aside, other)
        elif kind == "ignore":
            with open(_p(root, b".gitignore"), "ab") as f:
                f.write(arg + b"\n")
        elif kind == "unignore" and os.path.isfile(path):
            with open(path, "rb") as f:
                kept = [line for line in f.read().splitlines() if line in (b"build/", b"*.log")]
            with open(path, "wb") as f:
                f.write(b"".join(line + b"\n" for line in kept))
        elif kind == "exclude":  # the repository's own ignore rules, outside the worktree
            exclude = os.path.join(os.environ["ORACLE_REPO"], ".git", "info", "exclude")
            os.makedirs(os.path.dirname(exclude), exist_ok=True)
            with open(exclude, "wb") as f:
                f.write(arg + b"\n" if arg else b"")
        else:
            _new_op(root, o, path)
    except OSError:
        pass  # a path the shape made impossible right now (or one a confined step may not)


_SAME_DATES = {"GIT_AUTHOR_DATE": "1700000000 +0000", "GIT_COMMITTER_DATE": "1700000000 +0000"}


def _git_here(cwd: str, *args: str) -> None:
    """git, whose failure is one of the impossible operations (a confined step may not
    write the repository's config; there is nothing to commit). Its commits are the same
    in both plays (fixed dates): the two speed modes must record the same trees."""
    env = {**os.environ, **_SAME_DATES}
    subprocess.run(["git", *_WHO, *args], cwd=cwd, env=env, capture_output=True, check=False)


def _append(root: Path, rel: bytes, line: bytes) -> None:
    """One more line in ``rel`` (made if missing): the same bytes in both plays."""
    path = _p(root, rel)
    have = Path(path).read_bytes() if os.path.isfile(path) and not os.path.islink(path) else b""
    write(root, rel, have + line)


def _new_op(root: Path, o: tuple[Any, ...], path: str) -> None:
    """The operations ``BAR_ORACLE_NEW_OPS`` adds (see the module's text)."""
    kind, arg = o[0], o[1]
    if kind == "nested_commit":  # made where anything was (a file goes), then committed to
        if not os.path.isdir(os.path.join(path, ".git")):
            if os.path.lexists(path) and not os.path.isdir(path):
                os.unlink(path)
            os.makedirs(path, exist_ok=True)
            _git_here(path, "init", "-q")
        _append(root, arg + b"/lib.c", b"committed\n")
        _git_here(path, "add", "-A")
        _git_here(path, "commit", "-qm", "nested")
    elif kind == "nested_edit" and os.path.isdir(os.path.join(path, ".git")):
        _append(root, arg + b"/wip.c", b"uncommitted\n")
    elif kind == "nested_to_file" and os.path.isdir(os.path.join(path, ".git")):
        shutil.rmtree(path)
        write(root, arg, b"a file again\n")
    elif kind == "ignored_in" and os.path.isdir(path) and not os.path.islink(path):
        _append(root, arg + b"/cache.log", b"ignored\n")
        rules = _p(root, b".gitignore")
        have = Path(rules).read_bytes() if os.path.isfile(rules) else b""
        if b"*.log" not in have.splitlines():
            with open(rules, "ab") as f:
                f.write(b"*.log\n")
    elif kind == "dir_to_file" and os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
        write(root, arg, b"a directory before\n")
    elif kind == "attributes":
        rules = _p(root, b".gitattributes")
        if arg:
            with open(rules, "wb") as f:
                f.write(arg + b"\n")
        elif os.path.lexists(rules):
            os.unlink(rules)
    elif kind == "autocrlf":
        _git_here(str(root), "config", "core.autocrlf", arg.decode())
    elif kind == "commit" and os.path.lexists(path):  # the step commits, ignored or not
        rel = arg.decode("utf-8", "surrogateescape")
        _git_here(str(root), "add", "-f", "--", rel)
        _git_here(str(root), "commit", "-qm", "committed inside", "--", rel)
    elif kind == "reset":
        _git_here(str(root), "reset", "-q", arg.decode(), "HEAD~1")
