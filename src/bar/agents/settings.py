"""Agents' settings files: bar's hook entry merged in, and taken out again exactly.

``bar run --agent`` installs bar's hook into the agent's project-local settings file in
the task worktree for the length of the run (``install_hook``) and puts the file back
exactly as it was afterwards; ``bar agent setup`` prints or writes the same entry for a
developer who starts the agent another way. A settings file that is not a JSON object,
or a symbolic link on the way to it, is refused before anything is written, so a
repository cannot redirect the write into the developer's own settings.
"""

from __future__ import annotations

import json
import shlex
import stat
import sys
from pathlib import Path
from types import TracebackType
from typing import Any

from bar.agents import mcp_entry
from bar.agents.base import Protocol
from bar.agents.protocol import json_type, protocol
from bar.errors import AgentSettingsError
from bar.store.files import write_bytes_atomic


def bar_executable() -> str:
    """An absolute command that runs this bar, whatever PATH the agent has."""
    import shutil

    argv0 = Path(sys.argv[0])
    if argv0.name == "bar" and argv0.exists():
        return shlex.quote(str(argv0.resolve()))
    found = shutil.which("bar")
    if found:
        return shlex.quote(str(Path(found).resolve()))
    return f"{shlex.quote(sys.executable)} -m bar"


def hook_command(agent: str, socket: Path | None = None) -> str:
    """The command an agent runs as bar's hook; with ``socket``, it asks the ``bar run``
    listening there (the one that installed it) and nothing else."""
    cmd = f"{bar_executable()} hook {agent}"
    if socket is not None:
        cmd += f" --socket {shlex.quote(str(socket))}"
    return cmd


def settings_path(agent: str) -> str:
    """The project-local settings file bar installs its hook into, relative to the worktree."""
    return protocol(agent).settings_path


def _bar_entry(proto: Protocol, hook_command: str) -> dict[str, Any]:
    entry: dict[str, Any] = {}
    if proto.entry_name is not None:
        entry["name"] = proto.entry_name
    entry.update(type="command", command=hook_command, timeout=proto.timeout)
    return entry


def _is_bar_entry(entry: object, hook_command: str) -> bool:
    return isinstance(entry, dict) and entry.get("command") == hook_command


def _copy_settings(settings: object, where: str) -> dict[str, Any]:
    # A JSON round trip is a deep copy that also proves the value can be written back.
    try:
        copied = json.loads(json.dumps(settings))
    except (TypeError, ValueError) as exc:
        raise AgentSettingsError(f"{where} holds a value that is not JSON: {exc}") from None
    if not isinstance(copied, dict):
        raise AgentSettingsError(f"{where} holds a JSON {json_type(copied)}, expected an object")
    return copied


def merge_hook_settings(
    agent: str,
    existing: dict[str, Any] | None,
    hook_command: str,
    mcp: list[str] | None = None,
) -> dict[str, Any]:
    """Settings with bar's hook added for each of its events (``Protocol.events``: the
    shell tool before and after it runs, session start); every other key and hook is
    kept as it was. ``mcp``: the command of ``bar mcp``, whose entries the file gets too
    (``mcp_entry.settings_entries``).

    Idempotent: an event whose list already holds bar's command in a group with bar's
    matcher is left as it is.
    """
    proto = protocol(agent)
    if not hook_command.strip():
        raise ValueError("hook command is empty")
    where = proto.settings_path
    settings = _copy_settings(existing if existing is not None else {}, where)
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise AgentSettingsError(
            f"'hooks' in {where} is a JSON {json_type(hooks)}, expected an object"
        )
    for event, matcher in proto.events():
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise AgentSettingsError(
                f"'hooks.{event}' in {where} is a JSON {json_type(groups)}, expected an array"
            )
        if not any(_is_bar_group(group, matcher, hook_command) for group in groups):
            groups.append(_bar_group(proto, matcher, hook_command))
    if mcp is not None:
        mcp_entry.merge(settings, agent, mcp)
    return settings


def _bar_group(proto: Protocol, matcher: str | None, hook_command: str) -> dict[str, Any]:
    group: dict[str, Any] = {} if matcher is None else {"matcher": matcher}
    group["hooks"] = [_bar_entry(proto, hook_command)]
    return group


def _is_bar_group(group: object, matcher: str | None, hook_command: str) -> bool:
    return (
        isinstance(group, dict)
        and group.get("matcher") == matcher
        and isinstance(group.get("hooks"), list)
        and any(_is_bar_entry(entry, hook_command) for entry in group["hooks"])
    )


def remove_hook_settings(
    agent: str, current: dict[str, Any], hook_command: str, mcp: list[str] | None = None
) -> dict[str, Any] | None:
    """Settings with bar's hook entries removed; None when nothing else is left.

    Only what removing bar's entries emptied is pruned (its group, then the event's list,
    then ``hooks``); everything else, other hooks in a shared group included, stays.
    """
    proto = protocol(agent)
    settings = _copy_settings(current, proto.settings_path)
    if mcp is not None:
        mcp_entry.remove(settings, agent, mcp)
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        return settings or None
    for event in dict.fromkeys(name for name, _ in proto.events()):
        if not isinstance(hooks.get(event), list):
            continue
        kept_groups: list[Any] = []
        removed = False
        for group in hooks[event]:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                entries = group["hooks"]
                kept = [entry for entry in entries if not _is_bar_entry(entry, hook_command)]
                if len(kept) != len(entries):
                    removed = True
                    if not kept:
                        continue
                    group = {**group, "hooks": kept}
            kept_groups.append(group)
        if removed:
            if kept_groups:
                hooks[event] = kept_groups
            else:
                del hooks[event]
    if not hooks:
        del settings["hooks"]
    return settings or None


def dump(settings: dict[str, Any]) -> bytes:
    return (json.dumps(settings, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _load(data: bytes, where: str) -> dict[str, Any]:
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise AgentSettingsError(
            f"{where} is not valid JSON, so bar cannot add its hook to it: {exc}",
            hint="fix or remove the file, then run again",
        ) from None
    if not isinstance(value, dict):
        raise AgentSettingsError(
            f"{where} holds a JSON {json_type(value)}, expected an object",
            hint="fix or remove the file, then run again",
        )
    return value


def setup_text(agent: str, hook_command: str, mcp: list[str] | None = None) -> tuple[str, str]:
    """(relative path, content) of a settings file holding only bar's hook (and the
    entries of ``bar mcp``)."""
    content = dump(merge_hook_settings(agent, None, hook_command, mcp)).decode("utf-8")
    return settings_path(agent), content


def write_setup(agent: str, root: Path, hook_command: str, mcp: list[str] | None = None) -> Path:
    """Merge bar's hook into the agent's settings file under ``root`` for good (``bar
    agent setup --write``); returns the file. Refuses links and unreadable files, as
    ``install_hook`` does."""
    rel = settings_path(agent)
    _refuse_symlinks(root, rel)
    path = root / rel
    try:
        prior: bytes | None = path.read_bytes()
    except FileNotFoundError:
        prior = None
    existing = _load(prior, str(path)) if prior is not None else None
    merged = merge_hook_settings(agent, existing, hook_command, mcp)
    if merged != existing:
        mode = stat.S_IMODE(path.stat().st_mode) if prior is not None else 0o644
        _write_atomic(path, dump(merged), mode)
    return path


def write_claude_mcp(root: Path, mcp: list[str]) -> Path:
    """Merge ``bar mcp`` into the repository's ``.mcp.json`` for Claude Code (``bar agent
    setup claude --write``); links refused, other servers kept."""
    _refuse_symlinks(root, ".mcp.json")
    path = root / ".mcp.json"
    try:
        prior: bytes | None = path.read_bytes()
    except FileNotFoundError:
        prior = None
    existing = _load(prior, str(path)) if prior is not None else {}
    servers = existing.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise AgentSettingsError(
            f"'mcpServers' in {path} is a JSON {json_type(servers)}, expected an object"
        )
    servers.update(mcp_entry.claude_config(mcp)["mcpServers"])
    mode = stat.S_IMODE(path.stat().st_mode) if prior is not None else 0o644
    _write_atomic(path, dump(existing), mode)
    return path


# --- installing for one run -----------------------------------------------------------


class InstalledHook:
    """bar's hook in an agent's settings file inside a worktree, removed on exit.

    On exit the file gets back exactly its earlier bytes and mode, or disappears (with
    any directory the install created) if it did not exist. If the file was changed
    meanwhile (by the agent, say), only bar's entry is taken out and the rest kept; if
    the change left the file unreadable, the earlier content is put back and the
    unreadable bytes are kept in ``discarded`` for the caller to report.
    """

    def __init__(
        self,
        agent: str,
        worktree: Path,
        hook_command: str,
        *,
        prior: bytes | None,
        prior_mode: int | None,
        written: bytes,
        added: bool,
        created_dirs: list[Path],
        mcp: list[str] | None = None,
    ) -> None:
        self.agent = agent
        self.mcp = mcp
        self.worktree = worktree
        self.relative_path = settings_path(agent)
        self.path = worktree / self.relative_path
        self.hook_command = hook_command
        self.outcome: str | None = None  # set by restore(); see _finish
        self.discarded: bytes | None = None
        self._prior = prior
        self._prior_mode = prior_mode
        self._written = written
        self._added = added
        self._created_dirs = created_dirs

    def __enter__(self) -> InstalledHook:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.restore()

    def restore(self) -> None:
        """Put the settings file back. Safe to call more than once."""
        if self.outcome is not None:
            return
        if not self._added:
            # bar's entry was there before the run (``bar agent setup``): nothing to undo.
            self.outcome = "untouched"
            return
        link = _first_link(self.worktree, self.relative_path)
        if link is not None:
            # Never follow a link the agent may have planted, the file's or a directory's
            # on the way: it could point at the developer's own settings.
            link.unlink()
            self._put_back_prior("replaced-unreadable")
            return
        try:
            current: bytes | None = self.path.read_bytes()
        except FileNotFoundError:
            current = None
        if current is None or current == self._written:
            self._put_back_prior("restored" if self._prior is not None else "removed")
            return
        try:
            edited = _load(current, self.relative_path)
        except AgentSettingsError:
            self.discarded = current
            self._put_back_prior("replaced-unreadable")
            return
        cleaned = remove_hook_settings(self.agent, edited, self.hook_command, self.mcp)
        if self._prior is not None and (cleaned or {}) == _load(self._prior, self.relative_path):
            self._put_back_prior("restored")
        elif self._prior is None and cleaned is None:
            self._put_back_prior("removed")
        else:
            mode = self._prior_mode if self._prior_mode is not None else 0o600
            _write_atomic(self.path, dump(cleaned or {}), mode)
            self.outcome = "merged"

    def _put_back_prior(self, outcome: str) -> None:
        if self._prior is None:
            try:
                self.path.unlink()
            except FileNotFoundError:
                pass
            for directory in reversed(self._created_dirs):
                try:
                    directory.rmdir()
                except OSError:
                    break  # not empty: the agent put something there; leave it
        else:
            mode = self._prior_mode if self._prior_mode is not None else 0o600
            _write_atomic(self.path, self._prior, mode)
        self.outcome = outcome


def install_hook(
    agent: str, worktree: Path, hook_command: str, mcp: list[str] | None = None
) -> InstalledHook:
    """Add bar's hook to the agent's project-local settings in ``worktree`` now.

    Use the result as a context manager around the agent's run. Refuses (before writing
    anything) a settings file that is not a JSON object and any symlink on the way to
    it, so a repository cannot redirect the write into the developer's own settings.
    """
    proto = protocol(agent)
    rel = proto.settings_path
    path = worktree / rel
    _refuse_symlinks(worktree, rel)
    try:
        prior: bytes | None = path.read_bytes()
        prior_mode: int | None = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        prior, prior_mode = None, None
    existing = _load(prior, rel) if prior is not None else None
    merged = merge_hook_settings(agent, existing, hook_command, mcp)
    if existing is not None and merged == existing:
        return InstalledHook(
            agent,
            worktree,
            hook_command,
            prior=prior,
            prior_mode=prior_mode,
            written=prior or b"",
            added=False,
            created_dirs=[],
            mcp=mcp,
        )
    created = _make_dirs(worktree, rel)
    written = dump(merged)
    _write_atomic(path, written, prior_mode if prior_mode is not None else 0o600)
    return InstalledHook(
        agent,
        worktree,
        hook_command,
        prior=prior,
        prior_mode=prior_mode,
        written=written,
        added=True,
        created_dirs=created,
        mcp=mcp,
    )


def _refuse_symlinks(worktree: Path, rel: str) -> None:
    link = _first_link(worktree, rel)
    if link is not None:
        raise AgentSettingsError(
            f"refusing to install bar's hook: {link} is a symbolic link",
            hint="bar writes agent settings only inside the task worktree",
        )


def _first_link(worktree: Path, rel: str) -> Path | None:
    """The first symbolic link on the way from ``worktree`` to ``rel`` (None: none)."""
    current = worktree
    for part in rel.split("/"):
        current = current / part
        if current.is_symlink():
            return current
    return None


def _make_dirs(worktree: Path, rel: str) -> list[Path]:
    created: list[Path] = []
    current = worktree
    for part in rel.split("/")[:-1]:
        current = current / part
        if not current.is_dir():
            current.mkdir(mode=0o700)
            created.append(current)
    return created


def _write_atomic(path: Path, data: bytes, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(path, data, mode=mode)
