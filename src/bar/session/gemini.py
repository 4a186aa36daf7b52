"""Gemini CLI's chat files, read into session events.

Gemini CLI keeps each session in ``.gemini/tmp/<project>/chats/session-<time>-<id>.jsonl``
in its home (``GEMINI_CLI_HOME``). The first line describes the session (``sessionId``,
``startTime``); then each line is a message record, written again whole whenever it
grows (the last line with an ``id`` wins, in the order ids first appeared), or an
``{"$set": {...}}`` of session fields (a ``messages`` list there is the history the
session started from: the context the CLI set up, or a resumed session's past). A
``user`` record holds the prompt's parts, a ``gemini`` record the reply, its ``tokens``
and ``model`` and its ``toolCalls`` with their results and ``status``; ``info`` records
say what the CLI told the person (``Request cancelled.`` when they stopped the turn).
Gemini counts cached prompt tokens inside ``input`` and thinking apart from ``output``;
here cached tokens are apart and thinking is output. Observed with Gemini CLI 0.61.

``run_shell_command`` answers the model in lines (inside ``<untrusted_context>``):
``Output: …`` (``(empty)`` when it printed nothing), then, when they apply, ``Error:``,
``Exit Code:``, ``Signal:``, ``Background PIDs:``, ``Process Group PGID:``; a command
the person stopped reads ``Command was cancelled by user …``, one the CLI would not run
only why. ``answer`` reads the output and the exit code out of them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from bar.session import events as ev
from bar.session import found
from bar.session.events import Event, Usage

NAME = "gemini"

_KINDS = frozenset({"user", "gemini", "info", "error", "warning"})
# the lines ``run_shell_command`` writes after a command's output (``Exit Code``: it
# failed, though the call itself succeeded)
_TRAILER = re.compile(r"(Error|Exit Code|Signal|Background PIDs|Process Group PGID): (.*)", re.S)
_SHELL = "run_shell_command"
_WRAP = ("<untrusted_context>", "</untrusted_context>")
_CANCELLED = "Command was cancelled by user"
_BEFORE = "Below is the output before it was cancelled: "


def transcripts(home: Path) -> list[Path]:
    return found.transcripts(
        home / ".gemini" / "tmp",
        3,
        lambda d, f: d == "chats" and f.startswith("session-") and f.endswith(".jsonl"),
    )


class Reader:
    def __init__(self, path: Path, home: Path) -> None:
        self.path = path
        self.home = home
        self.messages: dict[str, dict[str, Any]] = {}  # by id, in the order first seen
        self.usages: dict[str, tuple[Usage, str | None]] = {}  # by message id
        self.changed: set[str] = set()  # usages added or changed since the last count
        self.reset = False
        self.unknown: list[Event] = []
        self.session_id: str | None = None
        self.model: str | None = None
        self.version: str | None = None
        self.agent_calls: dict[str, str] = {}
        self.calls: set[str] = set()  # (its hook events name no call: never looked up)

    def feed(self, rec: dict[str, Any]) -> None:
        if "$set" in rec:
            return  # session fields; a history it starts from is not this step's
        mid = ev.string(rec.get("id"))
        if mid is None:
            self.session_id = self.session_id or ev.string(rec.get("sessionId"))
            return
        if rec.get("type") not in _KINDS:
            self.unknown.append(ev.unknown(rec.get("type"), ev.string(rec.get("timestamp"))))
            return
        self.messages[mid] = rec
        if rec.get("type") == "gemini":
            self.model = ev.string(rec.get("model")) or self.model
            if isinstance(rec.get("tokens"), dict):
                self.usages[mid] = (_usage(rec), ev.string(rec.get("timestamp")))
                self.changed.add(mid)

    def abandoned(self) -> list[Usage]:
        """Answers given up by the conversation: none in this format."""
        return []

    def cut_short(self) -> bool | None:
        """None: the format does not say; told from the events (``capture``)."""
        return None

    def events(self) -> list[Event]:
        out: list[Event] = list(self.unknown)
        for rec in self.messages.values():
            kind, at = rec.get("type"), ev.string(rec.get("timestamp"))
            if kind == "user":
                parts = rec.get("content")
                text = "\n".join(
                    t
                    for p in (parts if isinstance(parts, list) else [parts])
                    if isinstance(p, dict | str) and (t := _part_text(p))
                )
                if text:
                    out.append(ev.message("user", text, at))
            elif kind == "gemini":
                text = ev.text_of(rec.get("content"))
                if text:
                    out.append(ev.message("assistant", text, at))
                for call in rec.get("toolCalls") or []:
                    if isinstance(call, dict):
                        out += _call(call, at)
                if isinstance(rec.get("tokens"), dict):
                    out.append(ev.usage(_usage(rec), at))
            elif kind == "info" and "cancel" in ev.text_of(rec.get("content")).lower():
                out.append(ev.interrupt(at))
        return out


def _part_text(part: dict[str, Any] | str) -> str:
    if isinstance(part, str):
        return part
    return ev.text_of(part["text"]) if "text" in part else ""


def _call(call: dict[str, Any], at: str | None) -> list[Event]:
    cid = str(call.get("id") or "")
    out = [ev.tool_call(cid, str(call.get("name") or ""), call.get("args"), at)]
    done = ev.string(call.get("timestamp")) or at
    status = call.get("status")
    if status in ("success", "error", "cancelled"):
        texts = []
        for r in call.get("result") or []:
            response = (
                r.get("functionResponse", {}).get("response") if isinstance(r, dict) else None
            )
            if isinstance(response, dict):
                texts.append(ev.text_of(response) or json.dumps(response))
        text = "\n".join(texts)
        if call.get("name") != _SHELL:
            out.append(ev.tool_result(cid, status == "success", text, done))
            return out
        said = answer(text)
        # (a command it would not run says only why: no output, no exit code)
        ran = said.interrupted or said.exit_code is not None or _ran(text)
        out.append(ev.answered(cid, status == "success" and ran, said, done))
    return out


def _ran(text: str) -> bool:
    body = _unwrapped(text)
    return body.startswith("Output:")


def _unwrapped(text: str) -> str:
    body = text.strip()
    if body.startswith(_WRAP[0]) and body.endswith(_WRAP[1]):
        body = body[len(_WRAP[0]) : -len(_WRAP[1])].strip("\n")
    return body


def settle(events: list[Event]) -> None:
    """Events an older bar kept, read as this one keeps them: as they are (each tool
    result is read again by ``answer``, ``bar.session.stored``)."""


def answer(text: str, ok: bool = True) -> ev.Answer:
    """What ``run_shell_command`` answered, read out of its lines (see the module's
    notes): the output, the exit code (0 when it names none: it says only a failure)."""
    body = _unwrapped(text)
    if body.startswith(_CANCELLED):
        _, _, before = body.partition(_BEFORE)
        return ev.Answer(before, None, True)
    if not body.startswith("Output:"):
        return ev.Answer(body)
    lines = body[len("Output:") :].removeprefix(" ").split("\n")
    code = 0
    while len(lines) > 1 and (trailer := _TRAILER.fullmatch(lines[-1])) is not None:
        if trailer.group(1) == "Exit Code" and trailer.group(2).lstrip("-").isdigit():
            code = int(trailer.group(2))
        elif trailer.group(1) == "Signal" and code == 0:
            code = 128 + int(trailer.group(2)) if trailer.group(2).isdigit() else code
        lines.pop()
    output = "\n".join(lines)
    return ev.Answer("" if output.strip() == "(empty)" else output, code)


def _usage(rec: dict[str, Any]) -> Usage:
    tokens = rec.get("tokens")
    t = tokens if isinstance(tokens, dict) else {}
    cached = ev.number(t.get("cached"))
    return Usage(
        ev.string(rec.get("model")),
        input_tokens=max(0, ev.number(t.get("input")) - cached),
        output_tokens=ev.number(t.get("output")) + ev.number(t.get("thoughts")),
        cache_read_tokens=cached,
    )
