"""Which lines of a Claude Code transcript are the conversation, and how it ended.

Claude Code only appends. A rewind (``--resume-session-at``, Esc Esc in the terminal), a
branch or a retried answer leaves the lines it gave up in the file, and each new message
names the one before it by ``parentUuid``. So the file's order is not the conversation:
the conversation is the chain from the latest leaf back through ``parentUuid``, and the
lines off it are dead branches (how Claude Code rebuilds a session it resumes). bar keeps
the same conversation:

- the links are the messages: ``user``, ``assistant``, ``attachment`` and ``system``
  lines with a ``uuid``. Any other line with a ``uuid`` (``progress``, which older versions
  chained) is passed through to its own parent;
- the latest leaf is the last message written that no other names as its parent, and
  whose chain holds a prompt or an answer (a lone ``system`` line is no conversation);
- a compaction starts its boundary on a new chain; the boundary's ``logicalParentUuid``
  names the message before it, and bar follows it: what was said before a compaction was
  said in the step (Claude Code's scrollback keeps it; only the model's context drops it);
- the blocks of one answer share ``message.id``, and with parallel tool calls each block
  and its result may hang off another line: every line of an answer on the chain is on
  it, and so are the results of its calls;
- a subagent's lines (``isSidechain``, ``agentId``) make a chain of their own.

A line with no ``uuid`` or no ``parentUuid`` key (metadata, or a writer that does not
chain its lines) takes no part in this and is kept where it was written.

``turn_state`` is Claude Code's own test, on resume, of whether the conversation was cut
short: the last message that tells (after the ones it would not send the model again are
dropped) is a prompt with no answer, a tool result, or an ``attachment``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

MESSAGES = frozenset({"user", "assistant", "attachment", "system"})

# tools whose result ends a turn: the model's last word to the person
_TERMINAL_TOOLS = frozenset({"Brief", "SendUserMessage", "SendUserFile"})
_THINKING = frozenset({"thinking", "redacted_thinking"})

TurnState = Literal["none", "interrupted_prompt", "interrupted_turn"]

Record = dict[str, Any]


def live(records: Sequence[Record]) -> list[bool]:
    """For each of ``records`` (one transcript's lines, in the order written), whether it
    is part of the conversation: on a chain, or outside the chains altogether."""
    nodes: dict[str, int] = {}  # a message's uuid: its line
    passes: dict[str, str | None] = {}  # another line's uuid: the parent it passes to
    for i, rec in enumerate(records):
        uid = rec.get("uuid")
        if not isinstance(uid, str) or "parentUuid" not in rec:
            continue
        if rec.get("type") in MESSAGES:
            nodes[uid] = i
        else:
            passes[uid] = _parent_uuid(rec)
    on = [True] * len(records)
    if not nodes:
        return on
    for i in nodes.values():
        on[i] = False
    parents = _parents(records, nodes, passes)
    named = {p for p in parents.values() if p is not None}
    talking = _talking(records, parents)
    latest: dict[tuple[bool, str | None], int] = {}
    for i in sorted(parents):
        if i not in named and i in talking:
            latest[_group(records[i])] = i
    chain: list[int] = []
    for leaf in latest.values():
        at: int | None = leaf
        while at is not None and not on[at]:  # (a parent seen before ends the walk)
            on[at] = True
            chain.append(at)
            at = parents.get(at)
    for i in _siblings(records, chain, parents):
        on[i] = True
    return on


def turn_state(records: Sequence[Record], order: Iterable[int]) -> TurnState:
    """How the conversation of ``records`` (the lines at ``order``, in the order written:
    the main chain's) ended, as Claude Code tells it when it resumes a session."""
    messages = [records[i] for i in order if records[i].get("type") in MESSAGES]
    messages = _sendable(messages)
    tools = {
        str(b.get("id")): str(b.get("name"))
        for rec in messages
        if rec.get("type") == "assistant"
        for b in _blocks(rec)
        if b.get("type") == "tool_use"
    }
    for rec in reversed(messages):
        kind = rec.get("type")
        if kind == "system" or (kind == "assistant" and rec.get("isApiErrorMessage")):
            continue
        if kind == "assistant":
            return "none"
        if kind == "attachment":
            return "interrupted_turn"
        if kind == "user":
            if rec.get("isMeta") or rec.get("isCompactSummary"):
                return "none"
            results = [b for b in _blocks(rec) if b.get("type") == "tool_result"]
            if not results:
                return "interrupted_prompt"
            if all(tools.get(str(b.get("tool_use_id"))) in _TERMINAL_TOOLS for b in results):
                return "none"
            return "interrupted_turn"
    return "none"


# --- the chain -------------------------------------------------------------------------


def _parent_uuid(rec: Record) -> str | None:
    for key in ("parentUuid", "logicalParentUuid"):
        value = rec.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _parents(
    records: Sequence[Record], nodes: dict[str, int], passes: dict[str, str | None]
) -> dict[int, int | None]:
    """Each message's parent message (its line), through the lines that only pass it on
    (each such line followed once)."""
    through: dict[str, str | None] = {}  # a passing line's uuid: the message it leads to

    def message(uid: str | None) -> str | None:
        path: list[str] = []
        while uid is not None and uid not in nodes and uid in passes and uid not in through:
            through[uid] = None  # (for now: a cycle leads nowhere)
            path.append(uid)
            uid = passes[uid]
        if uid is not None and uid not in nodes:
            uid = through.get(uid)
        for u in path:
            through[u] = uid
        return uid

    out: dict[int, int | None] = {}
    for i in nodes.values():
        found = message(_parent_uuid(records[i]))
        out[i] = nodes.get(found) if found is not None else None
    return out


def _group(rec: Record) -> tuple[bool, str | None]:
    side = rec.get("isSidechain") is True
    agent = rec.get("agentId")
    return side, agent if side and isinstance(agent, str) else None


def _talking(records: Sequence[Record], parents: dict[int, int | None]) -> set[int]:
    """The messages whose chain holds a prompt or an answer (each line looked at once)."""
    known: dict[int, bool] = {}
    for start in parents:
        path: list[int] = []
        at: int | None = start
        found = False
        while at is not None and at not in known:
            if records[at].get("type") in ("user", "assistant"):
                found = True
                break
            known[at] = False  # (for now: a cycle through it talks of nothing)
            path.append(at)
            at = parents.get(at)
        else:
            found = at is not None and known[at]
        for i in path:
            known[i] = found
        if found and at is not None:
            known[at] = True
    return {i for i, yes in known.items() if yes}


def _siblings(
    records: Sequence[Record], chain: list[int], parents: dict[int, int | None]
) -> list[int]:
    """The lines of the chain's answers that hang off it (parallel tool calls), and the
    results of their calls not answered on it."""
    on = set(chain)
    answers = {_answer_id(records[i]) for i in chain} - {None}
    if not answers:
        return []
    lines = [i for i in parents if _answer_id(records[i]) in answers and i not in on]
    found = set(lines)
    kin = on | found
    calls = {
        b.get("id") for i in kin if records[i].get("type") == "assistant" for b in _uses(records[i])
    }
    answered = {b.get("tool_use_id") for i in chain for b in _results(records[i])}
    for i, parent in parents.items():
        if i in kin or parent not in kin or records[parent].get("type") != "assistant":
            continue
        results = _results(records[i])
        ids = {b.get("tool_use_id") for b in results}
        if results and ids <= calls and not ids & answered:
            found.add(i)
            answered |= ids
    return sorted(found)


def _answer_id(rec: Record) -> str | None:
    message = rec.get("message")
    if rec.get("type") != "assistant" or not isinstance(message, dict):
        return None
    value = message.get("id")
    return value if isinstance(value, str) and value else None


def _blocks(rec: Record) -> list[dict[str, Any]]:
    message = rec.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _uses(rec: Record) -> list[dict[str, Any]]:
    return [b for b in _blocks(rec) if b.get("type") == "tool_use"]


def _results(rec: Record) -> list[dict[str, Any]]:
    if rec.get("type") != "user":
        return []
    return [b for b in _blocks(rec) if b.get("type") == "tool_result"]


# --- what Claude Code would send the model again ---------------------------------------


def _sendable(messages: list[Record]) -> list[Record]:
    """``messages`` without the answers Claude Code drops before it resumes: tool calls
    that got no result, thinking left without its answer, answers of only whitespace."""
    results = {b.get("tool_use_id") for rec in messages for b in _results(rec)}

    def resolved(rec: Record) -> bool:
        uses = _uses(rec) if rec.get("type") == "assistant" else []
        return not uses or any(b.get("id") in results for b in uses)

    kept = [rec for rec in messages if resolved(rec)]
    spoken = {
        _answer_id(rec)
        for rec in kept
        if rec.get("type") == "assistant"
        and any(b.get("type") not in _THINKING for b in _blocks(rec))
    }

    def orphan_thought(rec: Record) -> bool:
        blocks = _blocks(rec)
        return (
            rec.get("type") == "assistant"
            and bool(blocks)
            and all(b.get("type") in _THINKING for b in blocks)
            and _answer_id(rec) not in spoken
        )

    def blank(rec: Record) -> bool:
        return rec.get("type") == "assistant" and all(
            b.get("type") == "text" and not str(b.get("text") or "").strip() for b in _blocks(rec)
        )

    return [rec for rec in kept if not orphan_thought(rec) and not blank(rec)]
