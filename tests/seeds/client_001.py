"""A reader of Claude Code's session transcripts, written from reference 001 alone.

It is what a user of that reference would write to find a session, follow it and
rebuild it as Claude Code does on resume, with nothing of bar: the tests run it on the
files a real ``bar run --agent claude`` left, and compare what it finds with what bar
recorded. Standard library only.

What the reference says, and this follows:

- a session lives in ``<config dir>/projects/<project key>/<sessionId>.jsonl``, its
  subagents in ``<sessionId>/subagents/agent-<agentId>.jsonl``;
- each line is an entry; ``user``, ``assistant``, ``attachment`` and ``system`` entries are
  messages, chained by ``uuid``/``parentUuid``; the others are metadata;
- resume puts the messages in a map, picks the latest leaf, walks ``parentUuid`` back
  (stopping at a cycle), reverses, and puts back the results of parallel tool calls;
  legacy ``progress`` entries in the chain are bridged to their own parent;
- the model's view starts at the last ``compact_boundary``;
- the interrupt rule: drop the tool calls without a result, thinking left alone and
  blank answers; then the last message that tells decides: an answer is done, a plain
  prompt is ``interrupted_prompt``, a meta or compaction-summary prompt is done, a tool
  result (but of Brief, SendUserMessage, SendUserFile) or an attachment is
  ``interrupted_turn``; system lines, progress and API error answers do not tell.

The reference names ``<project key>`` without saying how it is made; Claude Code makes it
from the working directory, each character but a letter or a digit turned into ``-``.
``find_session`` does not depend on that: it looks in every project.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MESSAGE_TYPES = ("user", "assistant", "attachment", "system")
TERMINAL_TOOLS = ("Brief", "SendUserMessage", "SendUserFile")
CONTINUE = "Continue from where you left off."

Entry = dict[str, Any]


def config_dir() -> Path:
    """Where Claude Code keeps its files: ``CLAUDE_CONFIG_DIR``, else ``~/.claude``."""
    named = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(named) if named else Path.home() / ".claude"


def project_key(cwd: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "-", cwd)


def session_path(config: Path, cwd: str, session_id: str) -> Path:
    return config / "projects" / project_key(cwd) / f"{session_id}.jsonl"


def find_session(config: Path, session_id: str) -> Path | None:
    """The main transcript of ``session_id``, in whichever project it is."""
    found = sorted((config / "projects").glob(f"*/{session_id}.jsonl"))
    return found[0] if found else None


def subagent_transcripts(session_file: Path) -> list[Path]:
    folder = session_file.with_suffix("") / "subagents"
    return sorted(folder.rglob("agent-*.jsonl")) if folder.is_dir() else []


@dataclass
class Transcript:
    messages: dict[str, Entry] = field(default_factory=dict)  # uuid -> message
    written: list[str] = field(default_factory=list)  # message uuids, in file order
    bridges: dict[str, str | None] = field(default_factory=dict)  # progress uuid -> parent
    metadata: list[Entry] = field(default_factory=list)


def load(path: Path) -> Transcript:
    t = Transcript()
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # (a torn last line)
        if not isinstance(entry, dict):
            continue
        kind, uid = entry.get("type"), entry.get("uuid")
        if kind in MESSAGE_TYPES and isinstance(uid, str):
            if uid not in t.messages:
                t.written.append(uid)
            t.messages[uid] = entry
        elif kind == "progress" and isinstance(uid, str):
            t.bridges[uid] = entry.get("parentUuid")
        else:
            t.metadata.append(entry)
    return t


def parent_of(t: Transcript, entry: Entry) -> str | None:
    parent = entry.get("parentUuid")
    hops = 0
    while isinstance(parent, str) and parent not in t.messages and parent in t.bridges:
        parent = t.bridges[parent]
        hops += 1
        if hops > len(t.bridges):
            return None
    return parent if isinstance(parent, str) else None


def leaves(t: Transcript, sidechain: bool = False) -> list[str]:
    """The messages no other message names as its parent, in the order written."""
    named = {parent_of(t, m) for m in t.messages.values()}
    return [
        u
        for u in t.written
        if u not in named and bool(t.messages[u].get("isSidechain")) == sidechain
    ]


def latest_leaf(t: Transcript, sidechain: bool = False) -> str | None:
    found = leaves(t, sidechain)
    return found[-1] if found else None


def build_chain(t: Transcript, leaf: str) -> list[Entry]:
    """From ``leaf`` back through ``parentUuid`` to the root, in the order said, with
    the results of parallel tool calls put back."""
    chain: list[Entry] = []
    seen: set[str] = set()
    at: str | None = leaf
    while at is not None and at in t.messages and at not in seen:
        seen.add(at)
        chain.append(t.messages[at])
        at = parent_of(t, t.messages[at])
    chain.reverse()
    return _with_parallel_results(t, chain)


def _with_parallel_results(t: Transcript, chain: list[Entry]) -> list[Entry]:
    on = {m["uuid"] for m in chain}
    ids = {(m.get("message") or {}).get("id") for m in chain if m.get("type") == "assistant"}
    ids.discard(None)
    answered = {b.get("tool_use_id") for m in chain for b in _blocks(m) if _is_result(b)}
    extra: list[Entry] = []
    for uid in t.written:
        m = t.messages[uid]
        if uid in on:
            continue
        if m.get("type") == "assistant" and (m.get("message") or {}).get("id") in ids:
            extra.append(m)
    sibling_ids = {m["uuid"] for m in extra} | on
    for uid in t.written:
        m = t.messages[uid]
        if uid in on or m.get("type") != "user":
            continue
        results = [b for b in _blocks(m) if _is_result(b)]
        ids = {b.get("tool_use_id") for b in results}
        if results and parent_of(t, m) in sibling_ids and not ids & answered:
            extra.append(m)
    if not extra:
        return chain
    keep = on | {m["uuid"] for m in extra}
    return [t.messages[u] for u in t.written if u in keep]


def after_compaction(chain: list[Entry]) -> list[Entry]:
    """The model's view: from the last compaction boundary on."""
    for i in range(len(chain) - 1, -1, -1):
        if chain[i].get("type") == "system" and chain[i].get("subtype") == "compact_boundary":
            return chain[i:]
    return chain


def _blocks(m: Entry) -> list[dict[str, Any]]:
    content = (m.get("message") or {}).get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def _is_result(block: dict[str, Any]) -> bool:
    return block.get("type") == "tool_result"


def cleaned(chain: list[Entry]) -> list[Entry]:
    """What resume keeps before it looks at the end: no tool call without its result,
    no thinking left alone, no blank answer."""
    results = {b.get("tool_use_id") for m in chain for b in _blocks(m) if _is_result(b)}
    out = []
    for m in chain:
        uses = [b for b in _blocks(m) if b.get("type") == "tool_use"]
        if m.get("type") == "assistant" and uses and all(b.get("id") not in results for b in uses):
            continue
        out.append(m)
    said = {
        (m.get("message") or {}).get("id")
        for m in out
        if m.get("type") == "assistant"
        and any(b.get("type") not in ("thinking", "redacted_thinking") for b in _blocks(m))
    }
    final = []
    for m in out:
        if m.get("type") == "assistant":
            blocks = _blocks(m)
            thinking = blocks and all(
                b.get("type") in ("thinking", "redacted_thinking") for b in blocks
            )
            if thinking and (m.get("message") or {}).get("id") not in said:
                continue
            if all(b.get("type") == "text" and not str(b.get("text", "")).strip() for b in blocks):
                continue
        final.append(m)
    return final


def interruption(chain: list[Entry]) -> str:
    """``none``, ``interrupted_prompt`` or ``interrupted_turn``."""
    messages = cleaned(chain)
    tools = {
        b.get("id"): b.get("name")
        for m in messages
        for b in _blocks(m)
        if m.get("type") == "assistant" and b.get("type") == "tool_use"
    }
    for m in reversed(messages):
        kind = m.get("type")
        if kind == "system":
            continue
        if kind == "assistant":
            if m.get("isApiErrorMessage"):
                continue
            return "none"
        if kind == "attachment":
            return "interrupted_turn"
        if m.get("isMeta") or m.get("isCompactSummary"):
            return "none"
        results = [b for b in _blocks(m) if _is_result(b)]
        if not results:
            return "interrupted_prompt"
        if all(tools.get(b.get("tool_use_id")) in TERMINAL_TOOLS for b in results):
            return "none"
        return "interrupted_turn"
    return "none"


@dataclass
class Resumed:
    session_id: str | None
    chain: list[Entry]  # the conversation, from its first prompt
    view: list[Entry]  # what the model is sent again (from the last compaction, cleaned)
    state: str  # the interrupt rule's answer
    dead: list[Entry]  # messages on no chain: dead branches


def resume(path: Path) -> Resumed:
    t = load(path)
    leaf = latest_leaf(t)
    chain = build_chain(t, leaf) if leaf else []
    on = {m["uuid"] for m in chain}
    view = cleaned(after_compaction(chain))
    state = interruption(chain)
    if state == "interrupted_turn":
        view.append({"type": "user", "isMeta": True, "message": {"content": CONTINUE}})
    dead = [
        t.messages[u] for u in t.written if u not in on and not t.messages[u].get("isSidechain")
    ]
    first = chain[0] if chain else {}
    return Resumed(first.get("sessionId"), chain, view, state, dead)


def said(chain: list[Entry]) -> list[tuple[str, str]]:
    """The conversation as a person reads it: ("user", prompt), ("assistant", reply),
    ("tool_call", id), ("tool_result", id), in order (meta prompts left out)."""
    out: list[tuple[str, str]] = []
    for m in chain:
        kind = m.get("type")
        if kind not in ("user", "assistant"):
            continue
        if kind == "user" and (m.get("isMeta") or m.get("isCompactSummary")):
            continue
        for b in _blocks(m):
            if b.get("type") == "text" and str(b.get("text", "")).strip():
                out.append((kind, str(b["text"])))
            elif b.get("type") == "tool_use":
                out.append(("tool_call", str(b.get("id"))))
            elif b.get("type") == "tool_result":
                out.append(("tool_result", str(b.get("tool_use_id"))))
    return out


def tokens(messages: list[Entry]) -> dict[str, int]:
    """The usage of the answers among ``messages``, each answer (``message.id``) once."""
    seen: dict[str, dict[str, Any]] = {}
    for m in messages:
        message = m.get("message") or {}
        usage = message.get("usage")
        if (
            m.get("type") == "assistant"
            and isinstance(usage, dict)
            and message.get("model") != "<synthetic>"
        ):
            seen[str(message.get("id") or m.get("uuid"))] = usage
    return {
        "answers": len(seen),
        "input_tokens": sum(u.get("input_tokens") or 0 for u in seen.values()),
        "output_tokens": sum(u.get("output_tokens") or 0 for u in seen.values()),
        "cache_read_tokens": sum(u.get("cache_read_input_tokens") or 0 for u in seen.values()),
    }
