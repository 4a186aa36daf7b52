"""``bar hook AGENT [--task-dir DIR]``: the agent-side policy check of each inner command.

An agent (Claude Code, Codex, Gemini CLI) runs this before every shell command it is about
to execute, with the event as JSON on stdin. We evaluate the command with the project's
policy, answer in the agent's own format, and append the decision to the policy events of
the step that is running in that worktree (``artifacts/<step>.policy.jsonl``, merged into
the step's ledger line when the step ends).

It runs thousands of times a day, so it starts no git process, and imports neither YAML,
argparse, pathlib nor dataclasses when the config and policy caches are current: the
task is found from ``--task-dir`` (written into the hook command by ``bar run --agent``),
from the ``BAR_*`` variables ``bar run`` gives its child, or, failing both, from the
directory the agent works in.

Failure mode: anything that goes wrong (bad event, broken policy, a bug) blocks the
command with a message (fail closed). A policy that cannot be read must not become a
policy that allows everything without anyone noticing.
"""

from __future__ import annotations

import json
import os
import sys

USAGE = "usage: bar hook claude|codex|gemini [--task-dir DIR]  (reads the agent's event on stdin)"

_join = os.path.join


def _task_dir_from_env() -> str | None:
    home = os.environ.get("BAR_HOME")
    project = os.environ.get("BAR_PROJECT")
    task_id = os.environ.get("BAR_TASK_ID")
    if home and project and task_id:
        return _join(home, "projects", project, "tasks", task_id)
    return None


def _task_dir_from_cwd(cwd: str | None) -> str | None:
    """A directory inside ``<home>/projects/<p>/workspaces/<id>`` names its task directly."""
    if not cwd:
        return None
    parts = os.path.normpath(cwd).split(os.sep)
    for i in range(len(parts) - 3, -1, -1):
        if parts[i] == "projects" and i + 3 < len(parts) and parts[i + 2] == "workspaces":
            candidate = os.sep.join([*parts[: i + 2], "tasks", parts[i + 3]])
            if os.path.isfile(_join(candidate, "task.json")):
                return candidate
    return None


def _policy_settings(project_dir: str) -> tuple[bool, str]:
    """``policy.enabled`` and ``policy.path`` of the project, from the cached parse of
    config.yaml when it is current (the full loader otherwise)."""
    config_path = _join(project_dir, "config.yaml")
    try:
        st = os.stat(config_path)
        with open(_join(project_dir, "cache", "config.json"), "rb") as fh:
            cached = json.loads(fh.read())
        if cached.get("key") == [st.st_mtime_ns, st.st_size, st.st_ino]:
            policy = (cached.get("data") or {}).get("policy") or {}
            enabled, path = policy.get("enabled", False), policy.get("path", ".bar/policy.yaml")
            if isinstance(enabled, bool) and isinstance(path, str) and path:
                return enabled, path
    except (OSError, ValueError, AttributeError):
        pass
    from pathlib import Path

    from bar.config import load_config

    config = load_config(Path(config_path), Path(project_dir) / "cache" / "config.json")
    return config.policy.enabled, config.policy.path


def _policy_for_task(task_dir: str) -> object | None:
    """The policy of the task's project, from its cached compiled form when current."""
    from bar.policy import load_policy

    project_dir = os.path.dirname(os.path.dirname(task_dir))
    with open(_join(task_dir, "task.json"), "rb") as fh:
        task = json.loads(fh.read())
    enabled, rel = _policy_settings(project_dir)
    if not enabled:
        return None
    path = rel if os.path.isabs(rel) else _join(str(task["repo_root"]), rel)
    return load_policy(path, cache_dir=_join(project_dir, "cache"))


def _policy_for_cwd(cwd: str | None) -> object | None:
    """Outside a bar task: the project's policy if the repository is registered, else
    bar's default policy (an agent wired to bar is never left unchecked)."""
    from pathlib import Path

    from bar.errors import BarError
    from bar.policy import default_policy
    from bar.store import bar_home, ensure_dir

    try:
        from bar.policy_gate import load_project_policy
        from bar.project import locate

        project = locate(Path(cwd) if cwd else None).project
        if project.initialized:
            return load_project_policy(project) if project.config.policy.enabled else None
    except BarError:
        pass
    return default_policy(cache_dir=ensure_dir(bar_home() / "cache"))


def _running_step(task_dir: str) -> str | None:
    try:
        with open(_join(task_dir, "running.json"), "rb") as fh:
            marker = json.loads(fh.read())
    except (OSError, ValueError):
        return None
    step_id = marker.get("step_id") if isinstance(marker, dict) else None
    if not isinstance(step_id, str) or not step_id.isdigit():
        return None
    wanted = os.environ.get("BAR_STEP_ID")
    if wanted and wanted != step_id:
        return None  # our step has ended; a later one is not ours to write into
    return step_id


def _record(task_dir: str, step_id: str, records: list[dict[str, object]]) -> None:
    from bar.redact import Scrubber

    scrubber = Scrubber.from_environ(os.environ)
    data = b"".join(
        json.dumps(scrubber.scrub_obj(r), ensure_ascii=False, separators=(",", ":")).encode()
        + b"\n"
        for r in records
    )
    path = _join(task_dir, "artifacts", f"{step_id}.policy.jsonl")
    # One O_APPEND write per decision: concurrent hooks never interleave their lines; a
    # link planted in its place is not followed.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def _emit(reply: object) -> int:
    stdout, stderr = getattr(reply, "stdout", ""), getattr(reply, "stderr", "")
    if stdout:
        sys.stdout.write(stdout)
        sys.stdout.flush()
    if stderr:
        sys.stderr.write(stderr)
        sys.stderr.flush()
    return int(getattr(reply, "exit_code", 2))


def hook_main(argv: list[str]) -> int:
    from bar.agents import AGENTS, HookInputError, parse_event, render_input_error, render_reply

    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    if argv[0] not in AGENTS:
        print(USAGE, file=sys.stderr)
        print(f"bar: unknown agent {argv[0]!r}", file=sys.stderr)
        return 2
    agent = argv[0]
    rest = argv[1:]
    task_dir = rest[1] if rest[:1] == ["--task-dir"] and len(rest) >= 2 else None
    try:
        event = parse_event(agent, sys.stdin.buffer.read())
    except HookInputError as exc:
        return _emit(render_input_error(agent, str(exc)))
    if event.command is None:
        return _emit(render_reply(agent, "allow", ""))  # not a shell command: no opinion
    try:
        task_dir = task_dir or _task_dir_from_env() or _task_dir_from_cwd(event.cwd)
        policy: object | None
        if task_dir is not None and os.path.isfile(_join(task_dir, "task.json")):
            policy = _policy_for_task(task_dir)
        else:
            task_dir = None
            policy = _policy_for_cwd(event.cwd)
        events: list[object] = []
        if policy is None:
            action, reason = "allow", ""
        else:
            decision = policy.evaluate_line(event.command)  # type: ignore[attr-defined]
            action = decision.action
            reasons = [e.reason for e in decision.events if e.action == decision.action]
            reason = "; ".join(dict.fromkeys(reasons)) or ""
            events = list(decision.events)
        step_id = _running_step(task_dir) if task_dir is not None else None
        if task_dir is not None and step_id is not None:
            base = {
                "source": f"hook:{agent}",
                "session_id": event.session_id,
                "tool_use_id": event.tool_use_id,
                "command": event.command,
                "decision": action,
            }
            records = [{**e.to_record(), **base} for e in events] or [  # type: ignore[attr-defined]
                {"rule": None, "action": "allow", "matched": event.command, **base}
            ]
            _record(task_dir, step_id, records)
        if action in ("warn", "block"):
            reason = f"bar policy: {reason}" if reason else "bar policy"
        return _emit(render_reply(agent, action, reason))
    except Exception as exc:  # fail closed: never let a broken check allow a command
        message = f"bar could not check this command ({exc.__class__.__name__}: {exc})"
        return _emit(render_input_error(agent, message))
