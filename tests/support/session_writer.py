#!/usr/bin/env python3
"""A stand-in agent that leaves a Claude Code transcript, for tests of stored sessions.

    bar run --agent claude -- python3 tests/support/session_writer.py SCRIPT.json

SCRIPT.json is a list of turns, played in order:

    {"prompt": TEXT}                            the person's prompt
    {"say": TEXT}                               a reply of the model
    {"write": PATH, "text": TEXT}               a Write tool call that writes the file and
                                                sends bar's post-tool hook (a checkpoint)
    {"tool": NAME, "input": {...},              a tool call that changes no file (no hook),
     "result": TEXT, "ok": BOOL}                with its result
    {"bash": COMMAND}                           a Bash call: bar's pre-tool hook judges it
                                                (the policy), it runs in the worktree unless
                                                bar denied it, and the post-tool hook follows
                                                (a checkpoint)
    {"interrupt": true}                         the person stopped the model mid-turn
    {"subagent": TYPE, "turns": [...]}          a Task tool call whose subagent plays
                                                ``turns`` in a transcript of its own
    {"bulk": N}                                 N prompts and replies, written at once

A tool turn may name its call's ``id``. The lines are a few milliseconds apart, so they
are read back in the order written.

Each turn of the model is one ``assistant`` line (its own ``message.id``, ``model`` and
``usage``), appended to ``$CLAUDE_CONFIG_DIR/projects/x/<session>.jsonl`` as Claude Code
writes it: every line has ``timestamp`` (ISO, milliseconds, ``Z``), ``sessionId``, its
``uuid`` and the ``parentUuid`` of the line before it (a subagent's lines chain in its own
file, ``isSidechain``).
bar's hooks (SessionStart, PostToolUse) are read from ``$CLAUDE_CONFIG_DIR/settings.json``, where ``bar run``
put it. Standard library only.
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

MODEL = "claude-sonnet-4-5"


def now() -> str:
    at = datetime.datetime.now(datetime.UTC)
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


class Transcript:
    def __init__(self, home: Path, session: str, cwd: Path, path: Path | None = None) -> None:
        self.path = path or home / "projects" / "x" / f"{session}.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.session = session
        self.cwd = cwd
        self.home = home
        self.last: str | None = None  # the uuid of the line written last: the next's parent
        self.agent = path.name[6:-6] if path is not None else None

    def line(self, rec: dict[str, Any], pause: float = 0.003) -> None:
        time.sleep(pause)
        here = str(uuid.uuid4())
        rec = {
            "parentUuid": self.last,
            "isSidechain": self.agent is not None,
            **({"agentId": self.agent} if self.agent else {}),
            **rec,
            "sessionId": self.session,
            "timestamp": now(),
            "uuid": here,
            "cwd": str(self.cwd),
            "version": "2.1.0",
        }
        self.last = here
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(rec) + "\n")

    def user(self, content: Any, pause: float = 0.003, **extra: Any) -> None:
        message = {"role": "user", "content": content}
        self.line({"type": "user", "message": message, **extra}, pause)

    def assistant(self, block: dict[str, Any], n: int, pause: float = 0.003) -> None:
        self.line(
            {
                "type": "assistant",
                "message": {
                    "id": f"msg_{uuid.uuid4().hex[:20]}",
                    "model": MODEL,
                    "role": "assistant",
                    "content": [block],
                    "usage": {
                        "input_tokens": 100 + n,
                        "output_tokens": 20 + n,
                        "cache_read_input_tokens": 1000,
                    },
                },
            },
            pause,
        )

    def hooks(self, event: str, payload: dict[str, Any]) -> str:
        """bar's hooks of ``event``, run as Claude Code runs them: what they printed."""
        settings = json.loads((self.home / "settings.json").read_text())
        env = {**os.environ, "CLAUDE_PROJECT_DIR": str(self.cwd)}
        data = json.dumps({"session_id": self.session, "cwd": str(self.cwd), **payload})
        said = ""
        for group in settings.get("hooks", {}).get(event, []):
            for hook in group.get("hooks", []):
                done = subprocess.run(
                    ["sh", "-c", hook["command"]],
                    input=data.encode(),
                    cwd=self.cwd,
                    env=env,
                    capture_output=True,
                    timeout=60,
                    check=False,
                )
                said += done.stdout.decode("utf-8", "replace")
        return said

    def pre_tool(self, name: str, args: dict[str, Any], call: str) -> bool:
        """bar's pre-tool hook: whether the call may run (not denied)."""
        said = self.hooks(
            "PreToolUse",
            {
                "transcript_path": str(self.path),
                "permission_mode": "default",
                "hook_event_name": "PreToolUse",
                "tool_name": name,
                "tool_input": args,
                "tool_use_id": call,
            },
        )
        return '"deny"' not in said

    def post_tool(self, name: str, args: dict[str, Any], call: str) -> None:
        self.hooks(
            "PostToolUse",
            {
                "transcript_path": str(self.path),
                "permission_mode": "default",
                "hook_event_name": "PostToolUse",
                "tool_name": name,
                "tool_input": args,
                "tool_use_id": call,
                "tool_response": {"success": True},
            },
        )


def play(script: list[dict[str, Any]]) -> None:
    cwd = Path.cwd()
    t = Transcript(Path(os.environ["CLAUDE_CONFIG_DIR"]), str(uuid.uuid4()), cwd)
    t.hooks("SessionStart", {"hook_event_name": "SessionStart", "source": "startup"})
    turns(t, script)


def turns(t: Transcript, script: list[dict[str, Any]]) -> None:
    cwd = t.cwd
    for n, turn in enumerate(script):
        if "prompt" in turn:
            t.user(turn["prompt"])
        elif "say" in turn:
            t.assistant({"type": "text", "text": turn["say"]}, n)
        elif "bulk" in turn:
            for k in range(turn["bulk"]):
                t.user(f"question {k}", pause=0)
                t.assistant({"type": "text", "text": f"answer {k}"}, n, pause=0)
        elif "interrupt" in turn:
            t.user([{"type": "text", "text": "[Request interrupted by user]"}])
        elif "subagent" in turn:
            call = "toolu_" + uuid.uuid4().hex[:24]
            args = {"subagent_type": turn["subagent"], "prompt": "look around"}
            t.assistant({"type": "tool_use", "id": call, "name": "Task", "input": args}, n)
            agent = uuid.uuid4().hex[:16]
            where = t.path.with_suffix("") / "subagents"
            where.mkdir(parents=True, exist_ok=True)
            (where / f"agent-{agent}.meta.json").write_text(
                json.dumps({"agentType": turn["subagent"]})
            )
            sub = Transcript(t.home, t.session, cwd, where / f"agent-{agent}.jsonl")
            turns(sub, turn["turns"])
            block = {"type": "tool_result", "tool_use_id": call, "content": "done"}
            t.user([block], toolUseResult={"agentId": agent, "status": "completed"})
        else:
            call = turn.get("id") or "toolu_" + uuid.uuid4().hex[:24]
            if "write" in turn:
                name, args = (
                    "Write",
                    {"file_path": str(cwd / turn["write"]), "content": turn["text"]},
                )
            elif "bash" in turn:
                name, args = "Bash", {"command": turn["bash"]}
            else:
                name, args = turn["tool"], turn.get("input", {})
            t.assistant({"type": "tool_use", "id": call, "name": name, "input": args}, n)
            if "write" in turn:
                (cwd / turn["write"]).write_text(turn["text"])
                t.post_tool(name, args, call)
            elif "bash" in turn:
                if t.pre_tool(name, args, call):
                    ran = subprocess.run(
                        ["sh", "-c", turn["bash"]], cwd=cwd, capture_output=True, check=False
                    )
                    turn = {"result": ran.stdout.decode("utf-8", "replace"), **turn}
                    turn.setdefault("ok", ran.returncode == 0)
                    t.post_tool(name, args, call)
                else:
                    turn = {"result": "denied by the policy", "ok": False, **turn}
            ok = turn.get("ok", True)
            result = turn.get("result", f"File created successfully at: {turn.get('write')}")
            block = {"type": "tool_result", "tool_use_id": call, "content": result}
            if not ok:
                block["is_error"] = True
            t.user([block])


if __name__ == "__main__":
    play(json.loads(Path(sys.argv[1]).read_text()))
