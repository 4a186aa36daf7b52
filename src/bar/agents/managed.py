"""bar's hooks where an agent gives them the highest precedence (docs/sandbox.md, "What bar
does on the step's behalf").

An agent reads its settings from several places and lets the nearer ones switch hooks
off: a repository's ``.claude/settings.local.json`` holding ``"disableAllHooks": true``
turns off every hook Claude Code's user settings hold, bar's among them, and a step can
write that file. Only the settings a machine's administrator sets (Claude Code's
managed settings, ``/etc/claude-code/managed-settings.json`` on Linux) rank above the
repository's: Claude Code runs their hooks whatever a project says.

So a confined agent step sees ``/etc`` with a layer of the task's in front of it
(``system_files``, laid as an overlay in the step's own mount namespace: ``bar.sandbox.plan``):
the managed settings the developer's machine has, if any, with bar's hooks merged in.
Nothing outside the step changes, and the step cannot write the layer (it sits in the
task's directory under ``$BAR_HOME``). Gemini CLI takes its system settings from a file
an environment variable names (``gemini_system``), but only one that is root's all the
way up. Codex CLI reads no project file of a worktree its configuration does not trust,
and the home bar makes for it names the worktree untrusted and switches its hooks
feature on (``bar.agents.homes``). Where bar's hooks cannot rank above the repository's settings (no layer,
no root), they stay in the agent's home, and ``hooks_in_force`` refuses a session that
a settings file of the worktree's would run without them (``switched_off``).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from bar.base.record import record
from bar.errors import AgentSettingsError
from bar.model.tasks import Task
from bar.store.files import ensure_dir, open_regular, read_regular, write_bytes_atomic
from bar.store.layout import TEMPORARY

TARGET = "/etc"  # what the layer lies over
LAYER = "agents/system"  # the layer, in the task's directory (also Gemini CLI's settings)


@record(frozen=True)
class SystemLayer:
    """What the layer over ``TARGET`` holds for an agent: its managed settings ``data``
    at ``rel`` below ``TARGET``; ``mode``: ``TARGET``'s own (the step sees the layer's
    folder, ``LAYER`` in the task's directory, as ``TARGET`` itself)."""

    rel: str
    data: bytes
    mode: int
    folder: str = LAYER


def system_files(agent: str, hook_command: str) -> SystemLayer | None:
    """The layer for ``agent``: the machine's managed settings with bar's hook
    ``hook_command`` merged in; None where the agent has no such settings.
    ``bar.sandbox.plan.ground`` writes it."""
    from bar.agents import settings
    from bar.agents.base import of

    rel = of(agent).managed_settings
    if rel is None:
        return None
    merged = settings.merge_hook_settings(agent, _read_object(Path(TARGET) / rel), hook_command)
    return SystemLayer(rel, settings.dump(merged), stat.S_IMODE(os.stat(TARGET).st_mode))


# Gemini CLI reads its system settings (above the workspace's and the user's) from the
# file this variable names, else /etc/gemini-cli/settings.json
GEMINI_SYSTEM = "GEMINI_CLI_SYSTEM_SETTINGS_PATH"
_GEMINI_ETC = "/etc/gemini-cli/settings.json"


def gemini_system(
    task: Task, hook_command: str, theirs: str | None, *, own_tmp: bool
) -> dict[str, str]:
    """Gemini CLI's system settings for a step: those the developer's machine has
    (``theirs``: the file the developer's own environment names, else the machine's),
    with bar's hooks and ``hooksConfig.enabled: true``, which rank above every settings
    file the step can write. Hooks listed in ``hooksConfig.disabled`` of any file are
    switched off (the lists are united), so bar's entry has a name of this step's own,
    which no file written before the step can know. ``own_tmp``: the step has a ``/tmp``
    of its own (``_honoured``). What the agent's environment gets."""
    from bar.agents import settings

    layer = task.dir / LAYER
    path = layer / "gemini-settings.json"
    if not _honoured(path, own_tmp):
        return {}
    ensure_dir(layer)
    base = _read_object(Path(theirs or _GEMINI_ETC))
    merged = settings.merge_hook_settings("gemini", base, hook_command)
    name_entries(merged, hook_command)
    config = merged.setdefault("hooksConfig", {})
    if isinstance(config, dict):
        config["enabled"] = True
    write_bytes_atomic(path, settings.dump(merged), mode=0o600)
    return {GEMINI_SYSTEM: str(path)}


def name_entries(merged: dict[str, Any], hook_command: str) -> None:
    """Give bar's entries in Gemini CLI settings ``merged`` a name of this step's own."""
    import secrets

    name = f"bar-policy-{secrets.token_hex(6)}"
    hooks = merged.get("hooks")
    for groups in hooks.values() if isinstance(hooks, dict) else ():
        for group in groups if isinstance(groups, list) else ():
            for entry in group.get("hooks", ()) if isinstance(group, dict) else ():
                if isinstance(entry, dict) and entry.get("command") == hook_command:
                    entry["name"] = name


def _honoured(path: Path, own_tmp: bool) -> bool:
    """Whether Gemini CLI would read ``path`` as system settings: it skips one that is not
    root's, or that sits in a folder (all the way up) that is not root's or that others
    may write. So only where bar runs as root; ``/tmp``, ``/var/tmp`` and ``/dev/shm``
    count as the step's own (made root's and private) where the step gets them
    (``own_tmp``: ``bar.sandbox.plan``'s view of ``TEMPORARY``)."""
    if os.geteuid() != 0:
        return False
    for folder in (path.parent, *path.parents):
        if own_tmp and str(folder) in TEMPORARY:
            continue
        try:
            st = os.stat(folder)
        except FileNotFoundError:
            continue  # (made, root's and private, before the agent reads it)
        except OSError:
            return False
        if st.st_uid != 0 or st.st_mode & 0o022:
            return False
    return True


def _read_object(path: Path) -> dict[str, Any] | None:
    """The machine's own managed settings (None: none, or none an agent would read)."""
    raw = read_regular(path)
    if raw is None:
        return None
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def hooks_in_force(task: Task, agent: str, *, layered: bool, own_tmp: bool) -> None:
    """Refuse (``AgentSettingsError``) an ``agent``'s session that would run without bar's
    hooks: where they sit neither in the step's layer over ``/etc`` (``layered``) nor
    above the repository's settings by other means (``ranks_above``), a settings file of
    the worktree's that switches hooks off stops the step before it starts."""
    if layered or ranks_above(task, agent, own_tmp=own_tmp):
        return
    switch = switched_off(agent, task.worktree)
    if switch is not None:
        raise AgentSettingsError(
            f"{switch}, which would switch bar's hooks off: the session would run "
            "with no policy and no checkpoints",
            hint=f"remove the setting from {task.worktree / switch.split()[0]} "
            "(docs/sandbox.md says where bar's hooks rank above it)",
        )


def ranks_above(task: Task, agent: str, *, own_tmp: bool) -> bool:
    """Whether bar's hooks for ``agent`` sit where no file of the task's worktree can
    switch them off without a mount namespace's layer (Gemini CLI's system settings)."""
    from bar.agents.base import of

    path = task.dir / LAYER / "gemini-settings.json"
    return of(agent).own_system_settings and _honoured(path, own_tmp)


def switched_off(agent: str, worktree: Path) -> str | None:
    """The repository's settings file that switches ``agent``'s hooks off (bar's
    included, where they are not above it), or None."""
    from bar.agents.base import of

    found = of(agent).hooks_switch
    if found is None:
        return None
    files, key, on = found
    for rel in files:
        fd = None
        try:
            fd = open_regular(worktree / rel)
            raw = os.read(fd, 1 << 20)
        except OSError:
            continue
        finally:
            if fd is not None:
                os.close(fd)
        try:
            value = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            continue
        for part in key.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if value not in (None, on):
            return f"{rel} sets {key}"
    return None
