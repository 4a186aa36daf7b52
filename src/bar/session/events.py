"""The events of a stored session (docs/sessions.md), whatever agent they came from.

Each is one JSON object on one line of ``artifacts/NNNN.session.jsonl``:

- ``message`` {role: user | assistant, text, at}: a prompt or a reply;
- ``tool_call`` {id, name, input, checkpoint?, at}: the model asked for a tool;
  ``checkpoint`` is the state after it (``STEP.N``) when it changed files;
- ``tool_result`` {id, ok, summary, exit_code?, interrupted?, at}: what the tool
  answered, its output without the agent's framing (Codex's ``Process exited with code
  0`` header, Gemini CLI's ``Output:``/``Exit Code:`` lines, Claude Code's ``Exit code
  N``), cut to ``SUMMARY`` characters, its first and its last lines kept (the verdict of
  a test run is at its end); ``exit_code``: the shell command's, when the agent said it;
  ``interrupted``: the person stopped the call (Esc, Ctrl-C);
- ``usage`` {model, input_tokens, output_tokens, cache_read_tokens, cost_usd?, at}: one
  answer of the model. ``input_tokens`` counts the prompt tokens not read from a cache,
  whatever the agent's API counts, so the three numbers add up to what was processed;
- ``interrupt`` {at}: the person stopped the agent mid-turn (Esc, Ctrl-C);
- ``subagent`` {agent_id, agent_type, parent_call, at}: a subagent began; its own events
  carry ``agent_id``;
- ``unknown`` {agent_type: the line's own type, at?}: a line of a kind this version of
  bar does not know, counted, never a failure.

``at`` is the time the agent wrote (ISO 8601 UTC). Readers order events by it.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from bar.base.record import record

Event = dict[str, Any]

TYPES = ("message", "tool_call", "tool_result", "usage", "interrupt", "subagent", "unknown")
SUMMARY = 2000  # characters of a tool result kept (the tool's output is the agent's)
_TAIL = 500  # of them, from its end
_LEFT_OUT = "… ({:,} characters left out) …"
_LEFT_OUT_RE = re.compile(r"… \([\d,]+ characters left out\) …")


@record(frozen=True)
class Answer:
    """What a tool call answered, read out of the agent's framing: the output itself,
    the shell command's exit code if the agent said it, and whether the person stopped
    the call."""

    output: str
    exit_code: int | None = None
    interrupted: bool = False


@record
class Usage:
    """Tokens of one model answer."""

    model: str | None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


def message(role: str, text: str, at: str | None, agent_id: str | None = None) -> Event:
    return _with({"type": "message", "role": role, "text": text, "at": at}, agent_id)


def tool_call(
    call_id: str, name: str, args: Any, at: str | None, agent_id: str | None = None
) -> Event:
    return _with(
        {"type": "tool_call", "id": call_id, "name": name, "input": args, "at": at}, agent_id
    )


def tool_result(
    call_id: str,
    ok: bool,
    text: str,
    at: str | None,
    agent_id: str | None = None,
    *,
    exit_code: int | None = None,
    interrupted: bool = False,
) -> Event:
    rec: Event = {"type": "tool_result", "id": call_id, "ok": ok, "summary": cut(text)}
    if exit_code is not None:
        rec["exit_code"] = exit_code
    if interrupted:
        rec["interrupted"] = True
    rec["at"] = at
    return _with(rec, agent_id)


def answered(
    call_id: str, ok: bool, answer: Answer, at: str | None, agent_id: str | None = None
) -> Event:
    """The ``tool_result`` of ``answer``: not ok when its command failed or was stopped."""
    failed = answer.interrupted or answer.exit_code not in (None, 0)
    return tool_result(
        call_id,
        ok and not failed,
        answer.output,
        at,
        agent_id,
        exit_code=answer.exit_code,
        interrupted=answer.interrupted,
    )


def status(result: Event) -> str:
    """A tool result in one word: ``interrupted`` (the person stopped the call), ``exit
    N`` (its command failed), ``ok`` or ``failed``."""
    code = result.get("exit_code")
    if result.get("interrupted"):
        return "interrupted"
    if isinstance(code, int) and not isinstance(code, bool) and code != 0:
        return f"exit {code}"
    return "ok" if result.get("ok") is not False else "failed"


def cut(text: str) -> str:
    """``text`` within ``SUMMARY`` characters: its beginning and its last lines, with what
    was left out between them said."""
    if len(text) <= SUMMARY:
        return text
    tail = text[-_TAIL:]
    tail = tail[tail.find("\n") + 1 :] if "\n" in tail[:-1] else tail  # (from a line's start)
    head = text[: SUMMARY - len(tail) - len(_LEFT_OUT) - 10]  # (10: the number)
    head = head[: head.rfind("\n")] if "\n" in head else head  # (to a line's end)
    left = len(text) - len(head) - len(tail)
    return f"{head}\n{_LEFT_OUT.format(left)}\n{tail}"


def preview(text: str, lines: int = 3) -> list[str]:
    """A tool's output in a few lines: its first ``lines`` lines of substance, and when
    there are more, how many, and its last line (where a test run says how it went)."""
    said = [line.rstrip() for line in text.splitlines() if line.strip()]
    if len(said) <= lines + 2:
        return said
    hidden = said[lines:-1]
    cut_out = [line for line in hidden if _LEFT_OUT_RE.fullmatch(line)]
    more = f"{len(hidden) - len(cut_out)}{'+' if cut_out else ''}"
    return [*said[:lines], f"… ({more} more lines)", said[-1]]


def usage(u: Usage, at: str | None, agent_id: str | None = None) -> Event:
    rec: Event = {
        "type": "usage",
        "model": u.model,
        "input_tokens": u.input_tokens,
        "output_tokens": u.output_tokens,
        "cache_read_tokens": u.cache_read_tokens,
    }
    if u.cache_write_tokens:
        rec["cache_write_tokens"] = u.cache_write_tokens
    rec["at"] = at
    return _with(rec, agent_id)


def interrupt(at: str | None, agent_id: str | None = None) -> Event:
    return _with({"type": "interrupt", "at": at}, agent_id)


def subagent(
    agent_id: str, agent_type: str | None, parent_call: str | None, at: str | None
) -> Event:
    return {
        "type": "subagent",
        "agent_id": agent_id,
        "agent_type": agent_type,
        "parent_call": parent_call,
        "at": at,
    }


def unknown(kind: object, at: str | None) -> Event:
    return {"type": "unknown", "agent_type": str(kind)[:200], "at": at}


def _with(rec: Event, agent_id: str | None) -> Event:
    if agent_id:
        rec["agent_id"] = agent_id
    return rec


def text_of(value: Any) -> str:
    """The text in a message's content, whatever shape the agent gave it."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(t for v in value if (t := text_of(v)))
    if isinstance(value, dict):
        for key in ("text", "output", "content", "error"):
            if key in value:
                return text_of(value[key])
    return ""


def number(value: Any) -> int:
    """A token count as the agent wrote it (0 where it wrote none)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def string(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


# the files of Codex's ``apply_patch``, which its shell tool runs
_PATCHED = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.M)


def call_target(args: Any, root: str = "") -> str:
    """What a tool call acted on, in one line: its command (an ``apply_patch``: the files
    it patches), its file (under the worktree ``root``: relative to it), its pattern or
    prompt, else its whole input."""
    if isinstance(args, str):
        return _first_of(args)
    if not isinstance(args, dict):
        return ""
    for key in ("command", "cmd"):
        value = args.get(key)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return _one_line(shlex.join(value))
        if isinstance(value, str):
            patched = _PATCHED.findall(value) if value.startswith("apply_patch") else []
            return f"apply_patch {', '.join(patched)}" if patched else _first_of(value)
    for key in ("file_path", "path", "absolute_path", "notebook_path"):
        value = args.get(key)
        if isinstance(value, str):
            prefix = root.rstrip("/") + "/" if root else ""
            return value.removeprefix(prefix) if prefix else value
    for key in ("pattern", "query", "url", "description", "prompt", "subagent_type"):
        value = args.get(key)
        if isinstance(value, str):
            return _first_of(value)
    return _one_line(json.dumps(args, ensure_ascii=False, separators=(",", ":")))


def _first_of(text: str) -> str:
    first, *rest = text.strip().splitlines() or [""]
    return first + (" …" if rest else "")


def _one_line(text: str) -> str:
    return text.replace("\r", "\\r").replace("\n", "\\n").replace("\t", "\\t")
