"""``bar agent setup AGENT [--write]``: wire an agent's hook to bar by hand.

For developers who start the agent some other way than ``bar run --agent``: prints the
agent's project settings with bar's PreToolUse hook (or merges it into the file with
``--write``). ``hook_command()`` is also what ``bar run --agent`` installs.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
from pathlib import Path


def bar_executable() -> str:
    """An absolute command that runs this bar, whatever PATH the agent has."""
    argv0 = Path(sys.argv[0])
    if argv0.name == "bar" and argv0.exists():
        return shlex.quote(str(argv0.resolve()))
    found = shutil.which("bar")
    if found:
        return shlex.quote(str(Path(found).resolve()))
    return f"{shlex.quote(sys.executable)} -m bar"


def hook_command(agent: str, task_dir: Path | None = None) -> str:
    cmd = f"{bar_executable()} hook {agent}"
    if task_dir is not None:
        cmd += f" --task-dir {shlex.quote(str(task_dir))}"
    return cmd


def setup(args: argparse.Namespace) -> int:
    from bar.agents import merge_hook_settings, settings_path, setup_text

    command = hook_command(args.agent)
    if not args.write:
        rel, content = setup_text(args.agent, command)
        print(f"# {rel} (merge into the file if it exists; or run with --write)")
        print(content, end="" if content.endswith("\n") else "\n")
        return 0
    from bar.project import locate

    root = locate().project.root
    path = root / settings_path(args.agent)
    import json

    existing = json.loads(path.read_text()) if path.exists() else None
    merged = merge_hook_settings(args.agent, existing, command)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(merged, indent=2) + "\n")
    print(f"wrote bar's hook into {path}")
    return 0
