"""The speed layer's one switch, and how it says it was not sure.

The truth is slow and simple: a snapshot is ``git add -A`` of the worktree into the
task's side index, whose stat cache bar keeps honest (``bar.git.racy``). Everything else that makes a step fast is a shortcut that must give the
same answer, and is switched off as one: the resident process (``bar.changes.fast.resident``), the
watches (``bar.base.inotify``, the task's watcher and its stagings), the stamps of directory
ctimes (``bar.changes.fast.stamps``, ``bar.changes.fast.rescan``), the early ``git diff-files`` (``bar.changes.fast.prescan``),
the restored directories' stamps (``bar.changes.fast.restored``) and the object writer
(``bar.git.object_writer``). ``BAR_FAST=0`` in the environment, or ``speed.fast: false`` in the
project's config.yaml, turns them all off; ``BAR_FAST=1`` turns them on whatever the
config says. The test suite's oracle runs both ways and requires the same records.

A shortcut that cannot be sure falls back to looking at everything and says why through
``fallback``. Most reasons are expected (a ``.gitignore`` changed, a watch was lost); a
reason marked ``unexpected`` is a shortcut that broke (a git command it relies on
failed): with ``BAR_STRICT_FALLBACK=1`` (the test suite sets it) that raises, so a slow
path that fires silently on every step cannot hide.
"""

from __future__ import annotations

import os

_configured: bool | None = None  # the project's speed.fast, once a task was loaded


def fast() -> bool:
    """Whether the shortcuts may be used."""
    said = os.environ.get("BAR_FAST", "").strip().lower()
    if said in ("0", "false", "no", "off"):
        return False
    if said in ("1", "true", "yes", "on"):
        return True
    return _configured is not False


def configure(enabled: bool) -> None:
    """Set the project's ``speed.fast`` for this process (the loaded task's project)."""
    global _configured
    _configured = enabled


class UnexpectedFallback(AssertionError):
    """A shortcut fell back for a reason that means it is broken (strict mode only)."""


def fallback(reason: str, *, unexpected: bool = False) -> None:
    """A shortcut gave up, and everything is looked at instead. ``unexpected``: the
    reason is a failure of the shortcut itself, never a property of the worktree, which
    the tests' strict mode (``BAR_STRICT_FALLBACK=1``) raises as ``UnexpectedFallback``."""
    if unexpected and os.environ.get("BAR_STRICT_FALLBACK") == "1":
        raise UnexpectedFallback(f"the speed layer fell back: {reason}")
