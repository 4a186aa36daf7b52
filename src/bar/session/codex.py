"""Codex's rollouts, read into session events.

Codex writes each session to ``sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`` in its
home (``CODEX_HOME``), one ``{"timestamp", "type", "payload"}`` per line:
``session_meta`` (the session's id, ``cli_version``), ``turn_context`` (the model),
``response_item`` (what went to and came from the model: ``function_call`` and
``custom_tool_call`` with their ``call_id``, their outputs, messages), ``event_msg``
(what the person saw: ``item_completed`` of a ``UserMessage`` or ``AgentMessage``,
``turn_aborted`` when the person stopped the turn) and ``token_usage_record`` (one per
model response, by ``response_id``). Prompts and replies are taken from the events the
person saw (the model's side also carries the instructions Codex sends); where a version
writes only ``user_message``/``agent_message`` events, those. Codex counts cached prompt
tokens inside ``input_tokens``; here they are apart. Observed with Codex CLI 0.169.

A shell call's output (``function_call_output``) is framed for the model: 0.169 writes
``Chunk ID: …``, ``Wall time: …``, ``Process exited with code N`` (or ``Process running
with session ID …``), ``Original token count: …``, ``Output:`` and then the output, or
``Wall time: …`` and ``aborted by user`` for a call the person stopped; earlier
versions ``Exit code: N``, ``Wall time: …``, ``Output:``, or a JSON string with
``output`` and ``metadata.exit_code``. ``answer`` reads the output and its exit code out
of any of them, so no header stands for what the command printed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from bar.session import events as ev
from bar.session import found
from bar.session.events import Event, Usage

NAME = "codex"

_KNOWN = frozenset(
    {
        "session_meta",
        "turn_context",
        "response_item",
        "event_msg",
        "token_usage_record",
        "world_state",
        "compacted",
    }
)
_EXIT = re.compile(r"^(?:Process exited with code|Exit code:) (-?\d+)$")
# the lines Codex puts before a command's output
_HEADER = re.compile(
    r"(?:Chunk ID|Wall time|Original token count|Total output lines|Exit code): .*"
    r"|Process exited with code -?\d+|Process running with session ID \S+"
)
_ABORTED = "aborted by user"
# what Codex tells the model of a call its PreToolUse hook refused (0.169's words)
_BLOCKED = ("Command blocked by PreToolUse hook: ", "Tool call blocked by PreToolUse hook: ")


def transcripts(home: Path) -> list[Path]:
    return found.transcripts(
        home / "sessions", 4, lambda _, f: f.startswith("rollout-") and f.endswith(".jsonl")
    )


class Reader:
    def __init__(self, path: Path, home: Path) -> None:
        self.path = path
        self.home = home
        self.records: list[dict[str, Any]] = []
        self.usages: dict[str, tuple[Usage, str | None]] = {}
        self.changed: set[str] = set()  # usages added or changed since the last count
        self.reset = False  # every usage counted so far is void
        self.session_id: str | None = None
        self.model: str | None = None
        self.version: str | None = None
        self.agent_calls: dict[str, str] = {}
        self.calls: set[str] = set()
        self._by_record = False  # usage from token_usage_record (else token_count events)

    def feed(self, rec: dict[str, Any]) -> None:
        self.records.append(rec)
        kind, payload = rec.get("type"), rec.get("payload")
        if not isinstance(payload, dict):
            return
        at = ev.string(rec.get("timestamp"))
        if kind == "response_item" and payload.get("call_id"):
            self.calls.add(str(payload["call_id"]))
        if kind == "session_meta":
            self.session_id = self.session_id or ev.string(payload.get("id"))
            self.version = ev.string(payload.get("cli_version")) or self.version
        elif kind == "turn_context":
            self.model = ev.string(payload.get("model")) or self.model
        elif kind == "token_usage_record" and isinstance(payload.get("usage"), dict):
            # a resumed session writes on in its rollout with no new ``session_meta``: each
            # answer's record names the session too
            self.session_id = self.session_id or ev.string(payload.get("session_id"))
            if not self._by_record:
                self._by_record = True
                self.usages.clear()  # (counted from token_count events before)
                self.reset = True
            key = ev.string(payload.get("response_id")) or f"#{len(self.records)}"
            self.usages[key] = (_usage(self.model, payload["usage"]), at)
            self.changed.add(key)
        elif kind == "event_msg" and payload.get("type") == "token_count" and not self._by_record:
            info = payload.get("info")
            last = info.get("last_token_usage") if isinstance(info, dict) else None
            if isinstance(last, dict):
                self.usages[f"#{len(self.records)}"] = (_usage(self.model, last), at)
                self.changed.add(f"#{len(self.records)}")

    def abandoned(self) -> list[Usage]:
        """Answers given up by the conversation: none in this format."""
        return []

    def cut_short(self) -> bool | None:
        """None: the format does not say; told from the events (``capture``)."""
        return None

    def events(self) -> list[Event]:
        out: list[Event] = []
        seen_items = any(
            isinstance(p := r.get("payload"), dict)
            and p.get("type") == "item_completed"
            and isinstance(i := p.get("item"), dict)
            and i.get("type") in ("UserMessage", "AgentMessage")
            for r in self.records
        )
        usages = dict(self.usages)
        model = self.model
        for index, rec in enumerate(self.records, 1):
            kind, payload = rec.get("type"), rec.get("payload")
            at = ev.string(rec.get("timestamp"))
            if kind not in _KNOWN:
                out.append(ev.unknown(kind, at))
                continue
            if not isinstance(payload, dict):
                continue
            sub = payload.get("type")
            if kind == "turn_context":
                model = ev.string(payload.get("model")) or model
            elif kind == "response_item":
                out += _item(payload, at)
            elif kind == "event_msg":
                out += _event(payload, at, seen_items)
            if kind == "token_usage_record":
                key = ev.string(payload.get("response_id")) or f"#{index}"
            elif kind == "event_msg" and sub == "token_count":
                key = f"#{index}"
            else:
                continue
            found = usages.pop(key, None)
            if found is not None:
                out.append(ev.usage(found[0], at))
        return out


def _usage(model: str | None, raw: dict[str, Any]) -> Usage:
    cached = ev.number(raw.get("cached_input_tokens"))
    return Usage(
        model,
        input_tokens=max(0, ev.number(raw.get("input_tokens")) - cached),
        output_tokens=ev.number(raw.get("output_tokens")),
        cache_read_tokens=cached,
        cache_write_tokens=ev.number(raw.get("cache_write_input_tokens")),
    )


def _item(payload: dict[str, Any], at: str | None) -> list[Event]:
    sub = payload.get("type")
    call = str(payload.get("call_id") or "")
    if sub in ("function_call", "custom_tool_call", "local_shell_call"):
        raw = payload.get("arguments", payload.get("input", payload.get("action")))
        args: Any = raw
        if isinstance(raw, str):
            try:
                args = json.loads(raw)
            except ValueError:
                args = {"input": raw}
        return [ev.tool_call(call, str(payload.get("name") or sub), args, at)]
    if sub in ("function_call_output", "custom_tool_call_output"):
        output = payload.get("output")
        text = output if isinstance(output, str) else ev.text_of(output) or json.dumps(output)
        ok = not text.startswith(_BLOCKED)
        if isinstance(output, dict) and output.get("success") is False:
            ok = False
        return [ev.answered(call, ok, answer(text), at)]
    return []


def settle(events: list[Event]) -> None:
    """Events an older bar kept, read as this one keeps them: as they are (each tool
    result is read again by ``answer``, ``bar.session.stored``)."""


def answer(text: str, ok: bool = True) -> ev.Answer:
    """A tool call's output as Codex framed it for the model, read out of its framing
    (see the module's notes); a text with no framing is the output itself."""
    framed = _json_output(text)
    if framed is not None:
        return framed
    lines = text.split("\n")
    code: int | None = None
    at = 0
    while at < len(lines) and _HEADER.fullmatch(lines[at]):
        if (exited := _EXIT.fullmatch(lines[at])) is not None:
            code = int(exited.group(1))
        at += 1
    if at == 0:
        return ev.Answer(text)
    rest = lines[at:]
    if rest and rest[0] == "Output:":
        rest = rest[1:]
    output = "\n".join(rest)
    stopped = output.strip() == _ABORTED
    return ev.Answer("" if stopped else output, code, stopped)


def _json_output(text: str) -> ev.Answer | None:
    """Earlier versions' ``{"output": …, "metadata": {"exit_code": …}}``."""
    if not text.startswith("{"):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("output"), str):
        return None
    meta = data.get("metadata")
    code = meta.get("exit_code") if isinstance(meta, dict) else None
    known = isinstance(code, int) and not isinstance(code, bool)
    return ev.Answer(data["output"], code if known else None)


def _event(payload: dict[str, Any], at: str | None, seen_items: bool) -> list[Event]:
    sub = payload.get("type")
    if sub == "turn_aborted":
        return [ev.interrupt(at)]
    if seen_items and sub == "item_completed":
        item = payload.get("item")
        kind = item.get("type") if isinstance(item, dict) else None
        if kind in ("UserMessage", "AgentMessage"):
            assert isinstance(item, dict)
            text = ev.text_of(item.get("content"))
            role = "user" if kind == "UserMessage" else "assistant"
            return [ev.message(role, text, at)] if text else []
    if not seen_items and sub in ("user_message", "agent_message"):
        text = ev.text_of(payload.get("message"))
        role = "user" if sub == "user_message" else "assistant"
        return [ev.message(role, text, at)] if text else []
    return []
