"""bar's own code is never writable from a step (docs/sandbox.md, "What a step may do").

A step that rewrote bar, its console script or the interpreter that runs it would run
its code with the developer's full rights the next time the developer types ``bar``.
Where bar is installed under a path a step may write (a virtual environment in ``/tmp``,
under ``~/.cache`` or the ``sandbox.allow_write`` paths), the plan makes those paths
holes in the writable roots (``places``), which the kernel then keeps read-only.

What no path rule can hold is a hard link: a file of bar's that is also linked from a
writable directory (uv links installed files to its cache, ``~/.cache/uv``, by default)
can be rewritten there, and the same bytes change here. Landlock's rules only ever add
rights, so bar cannot take that one away: ``linked`` finds such files, and a confined
step is then refused with how to reinstall bar with copies.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from bar.errors import CannotConfine

if TYPE_CHECKING:
    from bar.sandbox import Confinement

_checked: dict[tuple[str, ...], list[str]] = {}


def places() -> list[Path]:
    """The directories that hold bar's code and what runs it: its package, the
    environment it is installed in (its console script, its dependencies) and the
    interpreter's own installation."""
    import bar

    package = Path(bar.__file__).parent
    interpreter = Path(os.path.realpath(sys.executable))
    found = [package, Path(sys.prefix), Path(sys.base_prefix), interpreter.parent.parent]
    return list(dict.fromkeys(p for p in found if str(p) not in ("/", "/usr", "")))


def linked(roots: list[Path] | None = None, *, again: bool = False) -> list[str]:
    """bar's files (its package, its console script, the interpreter) that have another
    name somewhere (a hard link); checked once per process, unless asked ``again`` (the
    resident, whose forks take its answer: ``bar.changes.fast.resident_daemon``)."""
    if roots is None:
        import bar

        script = Path(sys.executable).parent / "bar"
        roots = [Path(bar.__file__).parent, script, Path(os.path.realpath(sys.executable))]
        if script.with_name("bar-python").exists():  # (beside the compiled bar: the script)
            roots.append(script.with_name("bar-python"))
    key = tuple(map(str, roots))
    if again or key not in _checked:
        _checked[key] = [path for root in roots for path in _linked_under(root)]
    return _checked[key]


def _linked_under(root: Path) -> list[str]:
    try:
        if os.lstat(root).st_nlink > 1 and not root.is_dir():
            return [str(root)]
        if not root.is_dir():
            return []
    except OSError:
        return []
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            path = os.path.join(folder, name)
            try:
                if os.lstat(path).st_nlink > 1:
                    found.append(path)
            except OSError:
                continue
    return found


def refuse_if_linked(confinement: Confinement, roots: list[Path] | None = None) -> None:
    """A confined step is not started while bar's own files (or those under ``roots``)
    are hard links: say which, and how to reinstall bar."""
    found = linked(roots) if confinement.enabled else []
    if not found:
        return
    confinement.close()
    more = f" and {len(found) - 1} more" if len(found) > 1 else ""
    cached = [name for name in map(perf_cache_name, found) if name is not None]
    hint = (
        "reinstall bar with copies rather than links: `uv pip install "
        "--link-mode=copy ...` (or UV_LINK_MODE=copy), or `pip install ...`; or run this "
        "step with --no-sandbox"
    )
    if cached:  # (not an install's doing: nothing to reinstall)
        hint = (
            f"perf's build-id cache made the other name ({cached[0]}): remove it "
            f"(rm -r {Path(cached[0]).parent}) and record with `perf record -N`, which "
            "keeps no copy; or run this step with --no-sandbox"
        )
    raise CannotConfine(
        f"bar's own files are hard links ({found[0]}{more}): a step could rewrite them "
        "through their other name, which no sandbox rule can stop",
        hint=hint,
    )


def perf_cache_name(path: str) -> str | None:
    """The other name of ``path`` when ``perf record`` made it: its build-id cache links
    every binary it sampled as ``~/.debug/PATH/BUILD-ID/elf``."""
    try:
        here = os.stat(path)
        builds = list(os.scandir(Path.home() / ".debug" / path.lstrip("/")))
    except (OSError, RuntimeError):  # (no cache, no home)
        return None
    for build in builds:
        other = os.path.join(build.path, "elf")
        try:
            seen = os.stat(other, follow_symlinks=False)
        except OSError:
            continue
        if (seen.st_dev, seen.st_ino) == (here.st_dev, here.st_ino):
            return other
    return None
