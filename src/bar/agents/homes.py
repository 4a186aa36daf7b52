"""Each agent session's own home, made for the task from the developer's (docs/agents.md).

An agent keeps its settings, hooks, MCP servers, credentials and transcripts in a
directory of its own in ``~`` (``~/.claude`` with ``~/.claude.json``, ``~/.codex``,
``~/.gemini``). A step that could write there could plant a hook or an MCP server that
the developer's next session, unconfined, would run. So an agent that ``bar run`` starts
gets a home of its own, ``TASK_DIR/agents/AGENT``, named by the variable the agent reads
(``CLAUDE_CONFIG_DIR``, ``CODEX_HOME``, ``GEMINI_CLI_HOME``); the developer's own stay
read-only, like the rest of ``~``.

Before each step bar brings the home up to date:

- the settings file is the developer's, with bar's hooks and ``bar mcp`` merged in (the
  server's entry carries the environment it needs: Codex starts MCP servers with a clean
  one). What the agent changed in it during the last step is replaced: the hooks in a
  home are the developer's and bar's, never the agent's own. Hooks and server live in
  the home, not on the command line, so they hold however the agent is started (a
  wrapper script, ``npx``, an alias);
- the developer's credentials and instructions (``.credentials.json``, ``auth.json``,
  ``oauth_creds.json``, ``CLAUDE.md``, ...) are copied when they changed since the last
  copy: a token the agent refreshed in the home is kept until the developer's changes.
  They live in the task's directory, never in the ledger or a snapshot;
- what the agent keeps there itself (transcripts, history, caches) stays from one step to
  the next, so a session can be resumed in the task.

Confined steps write the home. bar reads from it only with ``O_NOFOLLOW`` and writes by
renaming a new file over the old, so a link the agent leaves there never makes bar read
or write anything else.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bar.agents import AGENTS
from bar.agents.base import Agent, HomeStep, of
from bar.base import notices
from bar.errors import AgentSettingsError
from bar.model.tasks import Task
from bar.store.files import read_beneath, read_regular, write_bytes_atomic
from bar.store.layout import bar_home

_STAMPS = ".bar-copied.json"  # what was copied from the developer's, and when
MCP_STARTUP_S = 60  # seconds an agent waits for bar's MCP server to start


def secret_files(agents: Path) -> list[Path]:
    """The credential files in the homes under a task's ``agents`` directory: only the
    owner may read them, whatever the home's mode (``bar doctor`` checks)."""
    found = []
    for name in AGENTS:
        home = of(name).home
        found += [agents / name / home.inner / secret for secret in sorted(home.secrets)]
    return found


def path(task: Task, agent: str) -> Path:
    """The agent's home in ``task`` (made, private, if missing)."""
    home = task.dir / "agents" / agent
    if not home.is_dir():
        home.parent.mkdir(mode=0o700, exist_ok=True)  # (private all the way: credentials)
        home.mkdir(mode=0o700, exist_ok=True)
    return home


def developers(agent: str) -> Path:
    """The developer's own directory of ``agent`` (as the agent itself would find it)."""
    return of(agent).developers_dir(os.environ)


def prepare(
    task: Task,
    agent: str,
    hook_command: str,
    mcp: list[str],
    step_id: str,
    *,
    own_tmp: bool = False,
) -> dict[str, str]:
    """Bring the task's home of ``agent`` up to date for step ``step_id`` with bar's hook
    ``hook_command`` and ``bar mcp`` (``mcp``; ``own_tmp``: the step has a ``/tmp`` of
    its own, ``bar.agents.managed``); returns what the agent's environment
    gets (the variable that names the home, and the agent's own run settings)."""
    found = of(agent)
    kind = found.home
    home = path(task, agent)
    inside = _directory(home, kind.inner)
    mine = developers(agent)
    step = HomeStep(
        task=task,
        mine=mine,
        inside=inside,
        hook_command=hook_command,
        mcp_argv=mcp,
        mcp_env=_server_env(task, step_id),
        own_tmp=own_tmp,
    )
    data, extra = found.home_settings(step)
    _copy_changed(mine, inside, kind.copied)
    write_bytes_atomic(inside / kind.settings, data, mode=0o600)  # (bar's, last)
    extra = {**extra, **found.home_state(step)}
    return {kind.variable: str(home), **found.protocol.run_env, **extra}


def json_settings(agent: Agent, step: HomeStep) -> dict[str, Any]:
    """The developer's JSON settings file (none: ``{}``) with bar's hooks and ``bar mcp``
    merged in."""
    from bar.agents import settings

    mine = step.mine / agent.home.settings
    own = read_json(mine, what=f"your {mine}")
    return settings.merge_hook_settings(agent.name, own, step.hook_command, step.mcp_argv)


def _server_env(task: Task, step_id: str) -> dict[str, str]:
    """What ``bar mcp`` needs to find the task, whatever environment the agent gives it."""
    return {
        "BAR_HOME": str(bar_home()),
        "BAR_PROJECT": task.project.name,
        "BAR_TASK_ID": task.id,
        "BAR_TASK_NAME": task.name,
        "BAR_STEP_ID": step_id,
        "BAR_WORKSPACE": str(task.worktree),
    }


def _directory(home: Path, inner: str) -> Path:
    """``home/inner``, a real directory: a link the agent put in its place is removed."""
    if not inner:
        return home
    inside = home / inner
    if inside.is_symlink() or (inside.exists() and not inside.is_dir()):
        inside.unlink()
    inside.mkdir(mode=0o700, exist_ok=True)
    return inside


def _copy_changed(mine: Path, inside: Path, names: tuple[str, ...]) -> None:
    """Copy each of the developer's files ``names`` into the home when it changed since
    bar last copied it (or is missing there); one the developer removed goes too."""
    stamps_path = inside / _STAMPS
    stamps = read_json(stamps_path, what=None) or {}
    changed = False
    for name in names:
        try:
            st = os.stat(mine / name)
        except OSError:
            if name in stamps:
                (inside / name).unlink(missing_ok=True)
                del stamps[name]
                changed = True
            continue
        seen = [st.st_size, st.st_mtime_ns, st.st_ino]
        if stamps.get(name) == seen and lexists(inside / name):
            continue
        data = read_regular(mine / name)
        if data is None:
            continue
        write_bytes_atomic(inside / name, data, mode=0o600)
        stamps[name] = seen
        changed = True
    if changed:
        write_bytes_atomic(stamps_path, json.dumps(stamps).encode(), mode=0o600)


def lexists(p: Path) -> bool:
    return os.path.lexists(p)


def read_json(p: Path, *, what: str | None) -> dict[str, Any] | None:
    """The JSON object in ``p`` (None: missing). Not an object: an error naming ``what``
    (the developer's file), or None (a file of the home, made again)."""
    raw = read_regular(p)
    if raw is None:
        return None
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        if what is None:
            return None
        raise AgentSettingsError(
            f"{what} is not valid JSON: {exc}", hint="fix it, then run again"
        ) from None
    if not isinstance(value, dict):
        if what is None:
            return None
        raise AgentSettingsError(f"{what} holds no JSON object", hint="fix it, then run again")
    return value


_MASK_LIMIT = 64 << 20  # bytes of one file of the home masked; a bigger one is said


def mask_secrets(task: Task, agent: str, since: float, scrub: Callable[[bytes], bytes]) -> int:
    """Once a session ended: mask the known secret values (``scrub``) in what the agent
    wrote to its home for ``task`` since ``since`` (a time): its transcripts, its history
    of prompts, its logs. A secret given in a prompt or read by a tool otherwise stays on
    disk under ``$BAR_HOME``. Only the value is replaced, inside the text that held it, so
    a JSON line stays JSON and the session can be resumed. The developer's files copied
    in (credentials) and bar's settings are left alone. How many files were masked."""
    kind = of(agent).home
    home = path(task, agent)
    kept = {*kind.copied, kind.settings, _STAMPS, ".claude.json"}
    masked = 0
    for root, _dirs, files in os.walk(home):  # (never into a link: walk does not follow)
        for name in files:
            file = Path(root, name)
            if name in kept and file.parent == home / kind.inner:
                continue
            try:
                st = file.lstat()
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode) or st.st_mtime < since:
                continue
            if st.st_size > _MASK_LIMIT:
                notices.warn(f"{file} is too big to mask secrets in ({st.st_size} bytes)")
                continue
            masked += _mask_file(home, file, scrub)
    return masked


def _mask_file(home: Path, file: Path, scrub: Callable[[bytes], bytes]) -> int:
    data = read_beneath(home, file)
    if data is None:
        return 0
    lines = data.split(b"\n")
    out = [_mask_line(line, scrub) for line in lines]
    if out == lines:
        return 0
    _replace_beneath(home, file.relative_to(home), b"\n".join(out))
    return 1


def _replace_beneath(home: Path, rel: Path, data: bytes) -> None:
    """Put ``data`` in place of the file ``rel`` of ``home``, reached with no link followed
    on the way (the home is the step's to write), through a new file renamed over it."""
    from bar.base.beneath import open_beneath, replace_at

    if rel.parent == Path("."):
        folder = os.open(home, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    else:
        folder = open_beneath(home, str(rel.parent), os.O_RDONLY | os.O_DIRECTORY)
    try:
        mode = stat.S_IMODE(os.stat(rel.name, dir_fd=folder, follow_symlinks=False).st_mode)
        replace_at(folder, rel.name, data, mode, sync=True)
    finally:
        os.close(folder)


def _mask_line(line: bytes, scrub: Callable[[bytes], bytes]) -> bytes:
    """``line`` with the secrets masked; a JSON line stays JSON (its strings are masked
    one by one where masking the bytes would break it)."""
    masked = scrub(line)
    if masked == line or not line.lstrip().startswith((b"{", b"[")):
        return masked
    try:
        json.loads(masked)
        return masked
    except ValueError:
        pass
    try:
        value = json.loads(line)
    except ValueError:
        return masked
    return json.dumps(_mask_value(value, scrub), ensure_ascii=False).encode()


def _mask_value(value: object, scrub: Callable[[bytes], bytes]) -> object:
    if isinstance(value, str):
        return scrub(value.encode("utf-8", "surrogatepass")).decode("utf-8", "surrogatepass")
    if isinstance(value, list):
        return [_mask_value(v, scrub) for v in value]
    if isinstance(value, dict):
        return {k: _mask_value(v, scrub) for k, v in value.items()}
    return value
