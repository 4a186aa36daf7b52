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

from bar.agents.base import of
from bar.agents.protocol import protocol
from bar.base import notices
from bar.base.record import record
from bar.errors import AgentSettingsError
from bar.model.tasks import Task
from bar.store.files import read_beneath, read_regular, write_bytes_atomic
from bar.store.layout import bar_home, home_dir

_CODEX_LABELS = {
    "PreToolUse": "pre_tool_use",
    "PostToolUse": "post_tool_use",
    "SessionStart": "session_start",
}

_STAMPS = ".bar-copied.json"  # what was copied from the developer's, and when
MCP_STARTUP_S = 60  # seconds an agent waits for bar's MCP server to start


@record(frozen=True)
class Kind:
    variable: str  # what names the home to the agent
    inner: str  # where in the home the agent keeps what it keeps in its own directory
    settings: str  # the settings file (in ``inner``) with bar's hooks
    copied: tuple[str, ...]  # the developer's files copied in, when they changed


KINDS = {
    "claude": Kind("CLAUDE_CONFIG_DIR", "", "settings.json", (".credentials.json", "CLAUDE.md")),
    "codex": Kind("CODEX_HOME", "", "config.toml", ("auth.json", "AGENTS.md")),
    "gemini": Kind(
        "GEMINI_CLI_HOME",
        ".gemini",
        "settings.json",
        ("oauth_creds.json", "google_accounts.json", "GEMINI.md", ".env"),
    ),
}


# the credentials among the files copied in: only the owner may read them, whatever
# the home's mode (``bar doctor`` checks)
SECRETS = frozenset(
    {".credentials.json", "auth.json", "oauth_creds.json", "google_accounts.json", ".env"}
)


def secret_files(agents: Path) -> list[Path]:
    """The credential files in the homes under a task's ``agents`` directory."""
    return [
        agents / agent / kind.inner / name
        for agent, kind in KINDS.items()
        for name in kind.copied
        if name in SECRETS
    ]


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
    kind = KINDS[agent]
    home = path(task, agent)
    inside = _directory(home, kind.inner)
    mine = developers(agent)
    server = {"argv": mcp, "env": _server_env(task, step_id)}
    extra: dict[str, str] = {}  # (what the agent's environment gets besides)
    if agent == "codex":
        data = _codex_config(
            mine / kind.settings, inside / kind.settings, hook_command, server, task.worktree
        )
    else:
        from bar.agents import settings

        own = _read_json(mine / kind.settings, what=f"your {mine / kind.settings}")
        merged = settings.merge_hook_settings(agent, own, hook_command, mcp)
        if agent == "gemini":
            from bar.agents import managed

            merged["mcpServers"]["bar"]["env"] = server["env"]
            theirs = os.environ.get(managed.GEMINI_SYSTEM)
            extra = managed.gemini_system(task, hook_command, theirs, own_tmp=own_tmp)
            if extra:  # (bar's hooks are in its system settings, above this file: not twice)
                merged = settings.remove_hook_settings(agent, merged, hook_command) or {}
            else:
                managed.name_entries(merged, hook_command)
        data = settings.dump(merged)
    write_bytes_atomic(inside / kind.settings, data, mode=0o600)
    _copy_changed(mine, inside, kind.copied)
    if agent == "claude":
        _claude_state(mine, inside, server)
        extra = _claude_waits()
    return {kind.variable: str(home), **protocol(agent).run_env, **extra}


def _claude_waits() -> dict[str, str]:
    """Claude Code waits ``MCP_CONNECT_TIMEOUT_MS`` (5 seconds by default) for the servers
    whose entry says ``alwaysLoad`` before its first request, then asks the model without
    their tools: on a loaded machine ``bar mcp`` can take longer to start, so it waits
    ``MCP_STARTUP_S`` (as long as Codex does), unless the developer set a time."""
    if os.environ.get("MCP_CONNECT_TIMEOUT_MS"):
        return {}
    return {"MCP_CONNECT_TIMEOUT_MS": str(MCP_STARTUP_S * 1000)}


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


def _claude_state(mine: Path, inside: Path, server: dict[str, Any]) -> None:
    """Claude Code's ``.claude.json`` (its account, what it was told, MCP servers): the
    developer's at first, then the agent's own, with bar's server put in each step."""
    # (beside the settings where CLAUDE_CONFIG_DIR names them, else in ~ itself)
    source = (mine if os.environ.get("CLAUDE_CONFIG_DIR") else home_dir()) / ".claude.json"
    target = inside / ".claude.json"
    state = _read_json(target, what=None) if _lexists(target) else None
    if state is None:
        state = _read_json(source, what=f"your {source}") or {}
    servers = state.get("mcpServers")
    if not isinstance(servers, dict):
        servers = state["mcpServers"] = {}
    argv = server["argv"]
    servers["bar"] = {
        "type": "stdio",
        "command": argv[0],
        "args": argv[1:],
        "env": server["env"],
        "alwaysLoad": True,
    }
    write_bytes_atomic(target, (json.dumps(state, indent=2) + "\n").encode(), mode=0o600)


def _codex_config(
    mine: Path, target: Path, hook_command: str, server: dict[str, Any], worktree: Path
) -> bytes:
    """The developer's ``config.toml`` with bar's hooks (trusted, as a person trusts them
    in Codex's /hooks panel: by the hash of each entry, keyed by the file that holds it)
    and ``bar mcp``. The developer's own trusted hooks stay trusted in the home.

    Codex runs no hook at all where its ``hooks`` feature is off, in any layer it reads,
    a project's ``.codex/config.toml`` included; and it reads a project's files only in a
    trusted project. So the home switches the feature on and names the task's
    ``worktree`` untrusted, whatever the developer's file says of the folders above it."""
    import tomllib

    import tomli_w

    raw = read_regular(mine)
    try:
        config: dict[str, Any] = tomllib.loads(raw.decode("utf-8")) if raw is not None else {}
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise AgentSettingsError(
            f"your {mine} is not valid TOML: {exc}", hint="fix it, then run again"
        ) from None
    hooks = config.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise AgentSettingsError(f"'hooks' in your {mine} is not a table")
    source, theirs = os.path.realpath(target), os.path.realpath(mine)
    trust = {}
    for key, value in (hooks.pop("state", None) or {}).items():
        if isinstance(key, str) and key.startswith(theirs + ":"):
            trust[source + key[len(theirs) :]] = value
    features = config.setdefault("features", {})
    if isinstance(features, dict):
        features.pop("codex_hooks", None)  # (the feature's former name)
        features["hooks"] = True
    projects = config.setdefault("projects", {})
    if isinstance(projects, dict):
        projects[str(worktree)] = {"trust_level": "untrusted"}
    proto = protocol("codex")
    for event, matcher in proto.events():
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise AgentSettingsError(f"'hooks.{event}' in your {mine} is not an array")
        group: dict[str, Any] = {} if matcher is None else {"matcher": matcher}
        group["hooks"] = [{"type": "command", "command": hook_command, "timeout": proto.timeout}]
        trust[f"{source}:{codex_label(event)}:{len(groups)}:0"] = {
            "trusted_hash": codex_trust_hash(event, matcher, hook_command, proto.timeout)
        }
        groups.append(group)
    hooks["state"] = trust
    servers = config.setdefault("mcp_servers", {})
    if isinstance(servers, dict):
        argv = server["argv"]
        servers["bar"] = {
            "command": argv[0],
            "args": argv[1:],
            "env": server["env"],
            # Codex lists no tool of a server that starts slower than this (10 s by
            # default), and begins its first turn without an optional server that is not
            # up within a second: a loaded machine must not take bar's tools from the
            # agent, so bar's server is required (Codex waits for it)
            "startup_timeout_sec": MCP_STARTUP_S,
            "required": True,
        }
    return tomli_w.dumps(config).encode("utf-8")


def _copy_changed(mine: Path, inside: Path, names: tuple[str, ...]) -> None:
    """Copy each of the developer's files ``names`` into the home when it changed since
    bar last copied it (or is missing there); one the developer removed goes too."""
    stamps_path = inside / _STAMPS
    stamps = _read_json(stamps_path, what=None) or {}
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
        if stamps.get(name) == seen and _lexists(inside / name):
            continue
        data = read_regular(mine / name)
        if data is None:
            continue
        write_bytes_atomic(inside / name, data, mode=0o600)
        stamps[name] = seen
        changed = True
    if changed:
        write_bytes_atomic(stamps_path, json.dumps(stamps).encode(), mode=0o600)


def _lexists(p: Path) -> bool:
    return os.path.lexists(p)


def _read_json(p: Path, *, what: str | None) -> dict[str, Any] | None:
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


def codex_label(event: str) -> str:
    """The name Codex gives a hook event in its trust keys."""
    return _CODEX_LABELS[event]


def codex_trust_hash(event: str, matcher: str | None, command: str, timeout: int) -> str:
    """The hash Codex records when a person trusts this hook in its /hooks panel: SHA-256
    of the entry's normalised identity as JSON with sorted keys, unset fields left out."""
    import hashlib

    handler = {"type": "command", "command": command, "timeout": timeout, "async": False}
    identity: dict[str, object] = {"event_name": _CODEX_LABELS[event], "hooks": [handler]}
    if matcher is not None:
        identity["matcher"] = matcher
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


_MASK_LIMIT = 64 << 20  # bytes of one file of the home masked; a bigger one is said


def mask_secrets(task: Task, agent: str, since: float, scrub: Callable[[bytes], bytes]) -> int:
    """Once a session ended: mask the known secret values (``scrub``) in what the agent
    wrote to its home for ``task`` since ``since`` (a time): its transcripts, its history
    of prompts, its logs. A secret given in a prompt or read by a tool otherwise stays on
    disk under ``$BAR_HOME``. Only the value is replaced, inside the text that held it, so
    a JSON line stays JSON and the session can be resumed. The developer's files copied
    in (credentials) and bar's settings are left alone. How many files were masked."""
    kind = KINDS[agent]
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
    from bar.base.beneath import open_beneath

    if rel.parent == Path("."):
        folder = os.open(home, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    else:
        folder = open_beneath(home, str(rel.parent), os.O_RDONLY | os.O_DIRECTORY)
    try:
        mode = stat.S_IMODE(os.stat(rel.name, dir_fd=folder, follow_symlinks=False).st_mode)
        temporary = f".{rel.name}.bar-masked"
        fd = os.open(
            temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode, dir_fd=folder
        )
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(temporary, rel.name, src_dir_fd=folder, dst_dir_fd=folder)
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
