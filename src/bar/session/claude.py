"""Claude Code's transcripts, read into session events.

Claude Code appends one JSON object per line to ``projects/<project key>/<session>.jsonl``
in its config directory (the task's home, ``CLAUDE_CONFIG_DIR``). A ``user`` line holds a
prompt or the results of tool calls, an ``assistant`` line one block of the model's answer
(text, thinking or a ``tool_use``); the blocks of one answer share ``message.id`` and its
``usage``, which is counted once. A subagent (the Agent/Task tool) writes its own file,
``<session>/subagents/agent-<id>.jsonl``, beside ``agent-<id>.meta.json`` (its
``agentType``); the parent's tool result names it (``toolUseResult.agentId``). Lines of
metadata (titles, snapshots, queue operations, compaction markers) tell nothing of the
conversation and are passed over; a ``type`` not known here is counted as unknown.

The file's order is not the conversation: a rewind leaves the answers it gave up in the
file. Only the lines on the chain from the latest leaf are read into events
(``bar.session.claude_chain``); the answers off it are ``abandoned`` (paid for, counted
apart). An answer of the ``<synthetic>`` model is Claude Code's own filler ("No response
requested." when it resumes a cut turn), not the model's: left out, but for an API
error. Observed with Claude Code 2.1 (the version pinned in the Makefile).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from bar.session import claude_chain, found
from bar.session import events as ev
from bar.session.events import Event, Usage
from bar.store.files import read_beneath

NAME = "claude"

# what Claude Code writes when the person stops it mid-turn (Esc, Ctrl-C); the second
# follows the result of the tool call it stopped
_INTERRUPTED = ("[Request interrupted by user]", "[Request interrupted by user for tool use]")
_REJECTED = "The user doesn't want to proceed with this tool use."
# how its Bash tool tells the model a command failed: this line, then the output
_EXIT = re.compile(r"Exit code (-?\d+)")

_METADATA = frozenset(
    {
        "system",
        "attachment",
        "summary",
        "custom-title",
        "ai-title",
        "tag",
        "mode",
        "permission-mode",
        "worktree-state",
        "pr-link",
        "agent-setting",
        "agent-name",
        "agent-color",
        "file-history-snapshot",
        "attribution-snapshot",
        "content-replacement",
        "marble-origami-commit",
        "marble-origami-snapshot",
        "queue-operation",
        "task-summary",
        "speculation-accept",
        "last-prompt",
        "progress",
    }
)


def transcripts(home: Path) -> list[Path]:
    """Every transcript in the home: sessions and their subagents."""
    return found.transcripts(home / "projects", 4, lambda _, f: f.endswith(".jsonl"))


class Reader:
    """One transcript file, fed line by line."""

    def __init__(self, path: Path, home: Path) -> None:
        self.path = path
        self.home = home
        self.records: list[dict[str, Any]] = []
        self.usages: dict[str, tuple[Usage, str | None]] = {}  # by message id
        self.changed: set[str] = set()  # usages added or changed since the last count
        self.reset = False
        self.session_id: str | None = None
        self.model: str | None = None
        self.version: str | None = None
        self.agent_calls: dict[str, str] = {}  # subagent id -> the call that started it
        self.calls: set[str] = set()  # the ids of the tool calls asked for so far
        self._live: list[bool] | None = None
        name = path.name
        self.agent_id = (
            name[6:-6] if name.startswith("agent-") and name.endswith(".jsonl") else None
        )

    def feed(self, rec: dict[str, Any]) -> None:
        self.records.append(rec)
        self.session_id = self.session_id or ev.string(rec.get("sessionId"))
        self.version = ev.string(rec.get("version")) or self.version
        message = rec.get("message")
        if rec.get("type") == "assistant" and isinstance(message, dict):
            model = ev.string(message.get("model"))
            raw = message.get("usage")
            key = _key(rec)
            if model and model != "<synthetic>" and isinstance(raw, dict) and key:
                self.model = model
                self.usages[key] = (_usage(model, raw), ev.string(rec.get("timestamp")))
                self.changed.add(key)
            for block in message.get("content") or []:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    self.calls.add(str(block.get("id")))
        result = rec.get("toolUseResult")
        if rec.get("type") == "user" and isinstance(result, dict) and isinstance(message, dict):
            agent = ev.string(result.get("agentId"))
            call = next(
                (
                    b.get("tool_use_id")
                    for b in message.get("content") or []
                    if isinstance(b, dict) and b.get("type") == "tool_result"
                ),
                None,
            )
            if agent and isinstance(call, str):
                self.agent_calls[agent] = call

    def live(self) -> list[bool]:
        """Which of the lines read are the conversation (``bar.session.claude_chain``)."""
        if self._live is None or len(self._live) != len(self.records):
            self._live = claude_chain.live(self.records)
        return self._live

    def abandoned(self) -> list[Usage]:
        """The answers on no line of the conversation: given up by a rewind, a branch or
        a retry. The model gave them, and they were paid for."""
        on = self.live()
        kept = {_key(rec) for rec, yes in zip(self.records, on, strict=True) if yes} - {None}
        return [u for key, (u, _) in self.usages.items() if key not in kept]

    def cut_short(self) -> bool:
        """Whether the session ended in the middle of a turn (``turn_state``)."""
        return self.turn_state() != "none"

    def turn_state(self) -> claude_chain.TurnState:
        """How the conversation ended, as Claude Code tells it when resuming it."""
        on = self.live()
        order = [
            i for i, rec in enumerate(self.records) if on[i] and rec.get("isSidechain") is not True
        ]
        return claude_chain.turn_state(self.records, order)

    def events(self) -> list[Event]:
        out: list[Event] = []
        agent = self.agent_id
        on = self.live()
        last = {}  # message id -> its last line: the answer's usage follows its blocks
        for i, rec in enumerate(self.records):
            if on[i] and (key := _key(rec)) is not None:
                last[key] = i
        first = self._first_time()
        if agent is not None and first is not None:  # (a subagent of an earlier step: none)
            out.append(ev.subagent(agent, self._agent_type(), None, first))
        for i, rec in enumerate(self.records):
            if not on[i]:
                continue  # (a dead branch: not what was said, in the end)
            kind = rec.get("type")
            at = ev.string(rec.get("timestamp"))
            message = rec.get("message")
            if kind == "user" and isinstance(message, dict):
                if not rec.get("isMeta") and not rec.get("isCompactSummary"):
                    for event in _user(message.get("content"), at, agent, rec.get("toolUseResult")):
                        if event.pop("tool_use", False):
                            _stopped(out)
                        out.append(event)
            elif kind == "assistant" and isinstance(message, dict):
                if message.get("model") == "<synthetic>" and not rec.get("isApiErrorMessage"):
                    continue  # (what Claude Code says in the model's place to resume a turn)
                out += _assistant(message.get("content"), at, agent)
                key = _key(rec)
                if key in self.usages and last.get(key) == i:
                    out.append(ev.usage(self.usages[key][0], at, agent))
            elif kind not in _METADATA:
                out.append(ev.unknown(kind, at))
        return out

    def _agent_type(self) -> str | None:
        meta_path = self.path.with_name(self.path.name[:-6] + ".meta.json")
        data = read_beneath(self.home, meta_path, 1 << 20)
        try:
            meta = json.loads(data) if data else None
        except ValueError:
            meta = None
        return ev.string(meta.get("agentType")) if isinstance(meta, dict) else None

    def _first_time(self) -> str | None:
        return next((t for r in self.records if (t := ev.string(r.get("timestamp")))), None)


def _key(rec: dict[str, Any]) -> str | None:
    """The answer an ``assistant`` line is a block of: its ``message.id`` (else the line)."""
    message = rec.get("message")
    if rec.get("type") != "assistant" or not isinstance(message, dict):
        return None
    return ev.string(message.get("id")) or ev.string(rec.get("uuid"))


def _usage(model: str, raw: dict[str, Any]) -> Usage:
    return Usage(
        model,
        input_tokens=ev.number(raw.get("input_tokens")),
        output_tokens=ev.number(raw.get("output_tokens")),
        cache_read_tokens=ev.number(raw.get("cache_read_input_tokens")),
        cache_write_tokens=ev.number(raw.get("cache_creation_input_tokens")),
    )


def settle(events: list[Event]) -> None:
    """Events an older bar kept, read as this one keeps them: the results of the calls
    the person stopped (Claude Code's refusal of them, then an ``interrupt``) marked as
    ``_stopped`` does now."""
    for i, event in enumerate(events):
        if event["type"] == "interrupt" and i and _REJECTED in str(events[i - 1].get("summary")):
            _stopped(events[:i])


def _stopped(before: list[Event]) -> None:
    """The person stopped a tool call (``[Request interrupted by user for tool use]``):
    the failed results just before it are of the calls it stopped."""
    for event in reversed(before):
        if event["type"] == "usage":
            continue
        if event["type"] != "tool_result" or event.get("ok"):
            break
        event["interrupted"] = True
        if event["summary"].startswith(_REJECTED):
            event["summary"] = ""  # (what it tells the model of any stopped call: no output)


def answer(text: str, ok: bool = True) -> ev.Answer:
    """What a tool answered: a failed (not ``ok``) Bash command's ``Exit code N`` line
    read apart from its output."""
    first, _, rest = text.partition("\n")
    exited = _EXIT.fullmatch(first) if not ok else None
    if exited is None:
        return ev.Answer(text)
    return ev.Answer(rest, int(exited.group(1)))


def _user(content: Any, at: str | None, agent: str | None, result: Any = None) -> list[Event]:
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    out: list[Event] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            text = ev.text_of(block.get("text"))
            if text.strip() in _INTERRUPTED:
                out.append(ev.interrupt(at, agent))
                if text.strip() == _INTERRUPTED[1]:
                    out[-1]["tool_use"] = True  # (``_stopped``: not kept)
            elif text:
                out.append(ev.message("user", text, at, agent))
        elif block.get("type") == "tool_result":
            call = str(block.get("tool_use_id") or "")
            failed = bool(block.get("is_error"))
            said = answer(ev.text_of(block.get("content")), not failed)
            if isinstance(result, dict) and result.get("interrupted") is True:
                said = ev.Answer(said.output, said.exit_code, True)  # (its Bash tool's)
            out.append(ev.answered(call, not failed, said, at, agent))
    return out


def _assistant(content: Any, at: str | None, agent: str | None) -> list[Event]:
    out: list[Event] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and (text := ev.text_of(block.get("text"))):
            out.append(ev.message("assistant", text, at, agent))
        elif block.get("type") == "tool_use":
            name = str(block.get("name") or "")
            out.append(
                ev.tool_call(str(block.get("id") or ""), name, block.get("input"), at, agent)
            )
    return out
