"""Scripted model servers for the released agent CLIs, on 127.0.0.1.

One HTTP server speaks the three wire protocols the agents use: Anthropic Messages
(``POST /v1/messages``), OpenAI Responses (``POST /v1/responses``) and Gemini
(``POST /v1beta/models/<model>:streamGenerateContent`` / ``:generateContent``), all
streamed as server-sent events. What the "model" does is a script: a list of turns, each
a shell command, a file write, a call of another of the agent's tools (an MCP
server's), or a final answer. The server is stateless about the
conversation: the turn it plays is the number of tool results the request already
carries, so a retried request gets the same answer and the agent's own side requests
(titles, routing, next-speaker checks: requests without the agent's tools) get a short
plain answer and do not advance the script.

It is bounded: after ``max_requests`` it answers 429 to everything, and every request is
kept (``requests``) for the test to read what the agent sent back (a denial's text, a
command's output). ``stall``: the model never answers (until the server closes), for a
test that stops an agent while it waits.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Shell:
    """The model asks the agent's shell tool to run ``command``."""

    command: str


@dataclass(frozen=True)
class WriteFile:
    """The model asks the agent's file tool to write ``content`` to ``path`` (absolute,
    or relative to the agent's working directory where the agent's tool allows it)."""

    path: str
    content: str


@dataclass(frozen=True)
class Answer:
    """The model ends the turn with ``text``."""

    text: str


@dataclass(frozen=True)
class Tool:
    """The model calls the agent's tool ``name`` with ``args``: an MCP server's tool, as
    the agent names it (Claude Code: ``mcp__bar__status``)."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Stall:
    """The model never answers this turn (until the server closes): the agent waits, as
    it does on a slow model, for a test that stops it there."""


Turn = Shell | WriteFile | Tool | Answer | Stall


@dataclass
class Request:
    dialect: str  # "anthropic" | "openai" | "gemini" | "other"
    method: str
    path: str
    body: dict[str, Any]
    main: bool  # carried the agent's tools: a turn of the scripted conversation


@dataclass
class MockModel:
    script: Sequence[Turn]
    max_requests: int = 60
    stall: bool = False
    # tokens each answer reports: (input not from a cache, output, input read from a
    # cache), in each dialect's own way of counting them
    usage: tuple[int, int, int] = (10, 5, 0)
    # a conversation whose first prompt holds a key plays its script instead (a subagent's)
    subscripts: dict[str, Sequence[Turn]] = field(default_factory=dict)
    # a request whose last prompt holding a key (the person's, or what a hook said back)
    # plays that key's script, counting the tool results since that prompt: one session
    # that goes on with several prompts (Anthropic dialect)
    prompts: dict[str, Sequence[Turn]] = field(default_factory=dict)
    stalled: bool = False  # the last turn played was a Stall
    requests: list[Request] = field(default_factory=list)
    closing: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def turn(self, done: int, first_prompt: str = "", prompt_key: str = "") -> Turn:
        script = next(
            (sub for key, sub in self.subscripts.items() if key in first_prompt), self.script
        )
        script = self.prompts.get(prompt_key, script) if prompt_key else script
        turn = script[done] if done < len(script) else Answer("Done.")
        self.stalled = isinstance(turn, Stall)
        return Answer("") if isinstance(turn, Stall) else turn

    def tool_results(self, dialect: str) -> list[str]:
        """The tool results the agent sent back, in order, from its last main request
        of ``dialect`` (each as the text the model would read)."""
        for req in reversed(self.requests):
            if req.main and req.dialect == dialect:
                return list(_results(dialect, req.body))
        return []


# --- the three dialects ---------------------------------------------------------------


def _results(dialect: str, body: dict[str, Any]) -> Iterator[str]:
    if dialect == "anthropic":
        for message in body.get("messages", []):
            content = message.get("content")
            if not isinstance(content, list):
                continue
            for block in content:
                if block.get("type") == "tool_result":
                    yield _text_of(block.get("content")) + (
                        " [is_error]" if block.get("is_error") else ""
                    )
    elif dialect == "openai":
        for item in body.get("input", []):
            if item.get("type") in ("function_call_output", "custom_tool_call_output"):
                yield _text_of(item.get("output"))
    elif dialect == "gemini":
        for content in body.get("contents", []):
            for part in content.get("parts", []):
                if "functionResponse" in part:
                    yield json.dumps(part["functionResponse"].get("response"))


def _text_of(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(_text_of(v.get("text", v)) if isinstance(v, dict) else str(v) for v in value)
    if isinstance(value, dict):
        return str(value.get("text") or value.get("content") or json.dumps(value))
    return "" if value is None else str(value)


def _keyed_prompt(messages: list[dict[str, Any]], keys: Sequence[str]) -> tuple[str, int]:
    """The last user message whose text holds one of ``keys``: the key, and where it is
    ("" where none does)."""
    for at in range(len(messages) - 1, -1, -1):
        message = messages[at]
        if message.get("role") != "user":
            continue
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        text = "\n".join(
            str(b.get("text") or "")
            for b in blocks or []
            if isinstance(b, dict) and b.get("type") == "text"
        )
        key = next((k for k in keys if k in text), None)
        if key is not None:
            return key, at
    return "", 0


def _sse(event: str | None, data: dict[str, Any]) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def _anthropic(model: MockModel, body: dict[str, Any]) -> tuple[bool, list[bytes]]:
    tools = {t.get("name") for t in body.get("tools", []) if isinstance(t, dict)}
    main = "Bash" in tools
    done = len(list(_results("anthropic", body)))
    messages = body.get("messages") or [{}]
    key, at = _keyed_prompt(messages, list(model.prompts))
    if key:
        done = len(list(_results("anthropic", {"messages": messages[at:]})))
    turn = model.turn(done, _text_of(messages[0].get("content")), key) if main else Answer("ok")
    msg_id = f"msg_{len(model.requests)}"
    if isinstance(turn, Answer):
        block: dict[str, Any] = {"type": "text", "text": ""}
        delta: dict[str, Any] = {"type": "text_delta", "text": turn.text}
        stop = "end_turn"
    else:
        if isinstance(turn, Tool):
            name, args = turn.name, turn.args
        elif isinstance(turn, Shell):
            name, args = "Bash", {"command": turn.command, "description": "step"}
        else:
            name, args = "Write", {"file_path": turn.path, "content": turn.content}
        block = {"type": "tool_use", "id": f"toolu_{done:02d}", "name": name, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(args)}
        stop = "tool_use"
    fresh, out, cached = model.usage
    usage = {"input_tokens": fresh, "output_tokens": out, "cache_read_input_tokens": cached}
    events = [
        _sse(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": msg_id,
                    "type": "message",
                    "role": "assistant",
                    "model": body.get("model"),
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": usage,
                },
            },
        ),
        _sse(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": block},
        ),
        _sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        _sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": out},
            },
        ),
        _sse("message_stop", {"type": "message_stop"}),
    ]
    return main, events


def _openai(model: MockModel, body: dict[str, Any]) -> tuple[bool, list[bytes]]:
    tools = {t.get("name") for t in body.get("tools", []) if isinstance(t, dict)}
    main = bool(tools & {"exec_command", "shell", "shell_command"})
    done = len(list(_results("openai", body)))
    turn = model.turn(done) if main else Answer("ok")
    resp_id = f"resp_{len(model.requests)}"
    if isinstance(turn, Answer):
        item: dict[str, Any] = {
            "type": "message",
            "role": "assistant",
            "id": f"msg_{done}",
            "content": [{"type": "output_text", "text": turn.text, "annotations": []}],
        }
    elif isinstance(turn, Tool):
        item = {
            "type": "function_call",
            "id": f"fc_{done}",
            "call_id": f"call_{done:02d}",
            "name": turn.name,
            "arguments": json.dumps(turn.args),
        }
    elif isinstance(turn, Shell):
        shell = "exec_command" if "exec_command" in tools else "shell_command"
        key = "cmd" if shell == "exec_command" else "command"
        item = {
            "type": "function_call",
            "id": f"fc_{done}",
            "call_id": f"call_{done:02d}",
            "name": shell,
            "arguments": json.dumps({key: turn.command}),
        }
    else:
        # Codex edits files with apply_patch; this build offers no separate tool for it to
        # an unknown model, and takes the patch through its shell tool, applying it
        # itself (the command never reaches a shell)
        patch = "*** Begin Patch\n*** Add File: {}\n{}\n*** End Patch".format(
            turn.path, "\n".join("+" + line for line in turn.content.splitlines())
        )
        item = {
            "type": "function_call",
            "id": f"fc_{done}",
            "call_id": f"call_{done:02d}",
            "name": "exec_command",
            "arguments": json.dumps({"cmd": f"apply_patch <<'PATCH'\n{patch}\nPATCH\n"}),
        }
    fresh, out, cached = model.usage
    usage = {
        "input_tokens": fresh + cached,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": out,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": fresh + cached + out,
    }
    events = [
        _sse(
            "response.created",
            {"type": "response.created", "response": {"id": resp_id, "status": "in_progress"}},
        ),
        _sse(
            "response.output_item.done",
            {"type": "response.output_item.done", "output_index": 0, "item": item},
        ),
        _sse(
            "response.completed",
            {
                "type": "response.completed",
                "response": {
                    "id": resp_id,
                    "status": "completed",
                    "output": [item],
                    "usage": usage,
                },
            },
        ),
    ]
    return main, events


def _gemini(model: MockModel, body: dict[str, Any]) -> tuple[bool, list[bytes]]:
    names = {
        decl.get("name")
        for tool in body.get("tools", []) or []
        for decl in tool.get("functionDeclarations", []) or []
    }
    main = "run_shell_command" in names
    done = len(list(_results("gemini", body)))
    if main:
        turn = model.turn(done)
    elif (body.get("generationConfig") or {}).get("responseMimeType") == "application/json":
        turn = Answer(
            json.dumps(
                {
                    "reasoning": "done",
                    "next_speaker": "user",
                    "model_choice": "flash",
                    "complexity_reasoning": "simple",
                    "complexity_score": 1,
                }
            )
        )
    else:
        turn = Answer("ok")
    if isinstance(turn, Answer):
        part: dict[str, Any] = {"text": turn.text}
    elif isinstance(turn, Tool):
        part = {"functionCall": {"name": turn.name, "args": turn.args}}
    elif isinstance(turn, Shell):
        part = {
            "functionCall": {
                "name": "run_shell_command",
                "args": {"command": turn.command, "description": "step"},
            }
        }
    else:
        part = {
            "functionCall": {
                "name": "write_file",
                "args": {"file_path": turn.path, "content": turn.content},
            }
        }
    fresh, out, cached = model.usage
    chunk = {
        "candidates": [
            {"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": fresh + cached,
            "candidatesTokenCount": out,
            "cachedContentTokenCount": cached,
            "totalTokenCount": fresh + cached + out,
        },
        "modelVersion": "gemini-mock",
    }
    return main, [f"data: {json.dumps(chunk)}\r\n\r\n".encode()]


# --- the server -----------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._record("other", {}, main=False)
        if self.path.rstrip("/").endswith("/models"):
            self._json(200, {"object": "list", "data": [], "models": []})
        else:
            self._json(404, {"error": {"message": f"mock model: no {self.path}"}})

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        model = self.server.model
        with model._lock:
            if len(model.requests) >= model.max_requests:
                self._json(429, {"error": {"message": "mock model: request budget spent"}})
                return
            path = self.path.split("?")[0]
            if path.endswith("/messages/count_tokens"):
                self._record("anthropic", body, main=False)
                self._json(200, {"input_tokens": 10})
                return
            if path.endswith("/messages"):
                dialect, (main, events) = "anthropic", _anthropic(model, body)
                content_type = "text/event-stream"
            elif path.endswith("/responses"):
                dialect, (main, events) = "openai", _openai(model, body)
                content_type = "text/event-stream"
            elif ":streamGenerateContent" in path or ":generateContent" in path:
                dialect, (main, events) = "gemini", _gemini(model, body)
                if ":generateContent" in path:
                    self._record(dialect, body, main)
                    chunk = json.loads(events[0].decode().removeprefix("data: "))
                    self._json(200, chunk)
                    return
                content_type = "text/event-stream"
            else:
                self._record("other", body, main=False)
                self._json(404, {"error": {"message": f"mock model: no {self.path}"}})
                return
            self._record(dialect, body, main)
            stalled = model.stalled and main
            model.stalled = False
        if (model.stall and main) or stalled:
            model.closing.wait(timeout=300)
            self._json(503, {"error": {"message": "mock model: closed"}})
            return
        if not body.get("stream", True) and dialect == "anthropic":
            self._json(200, _anthropic_message(events))
            return
        payload = b"".join(events)
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _record(self, dialect: str, body: dict[str, Any], main: bool) -> None:
        self.server.model.requests.append(Request(dialect, self.command, self.path, body, main))

    def _json(self, status: int, data: dict[str, Any]) -> None:
        payload = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def _anthropic_message(events: list[bytes]) -> dict[str, Any]:
    """The non-streamed form of one scripted Anthropic answer."""
    datas = [json.loads(e.decode().split("data: ", 1)[1]) for e in events]
    message = dict(datas[0]["message"])
    block = dict(datas[1]["content_block"])
    delta = datas[2]["delta"]
    if block["type"] == "text":
        block["text"] = delta["text"]
    else:
        block["input"] = json.loads(delta["partial_json"])
    message["content"] = [block]
    message["stop_reason"] = datas[4]["delta"]["stop_reason"]
    return message


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    model: MockModel


class MockServer:
    """``with MockServer(script) as server:`` serves on ``server.url`` until the block ends."""

    def __init__(
        self,
        script: Sequence[Turn],
        max_requests: int = 60,
        stall: bool = False,
        usage: tuple[int, int, int] = (10, 5, 0),
        subscripts: dict[str, Sequence[Turn]] | None = None,
        prompts: dict[str, Sequence[Turn]] | None = None,
    ) -> None:
        self.model = MockModel(
            list(script), max_requests, stall, usage, dict(subscripts or {}), dict(prompts or {})
        )
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.model = self.model
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> MockServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.model.closing.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
