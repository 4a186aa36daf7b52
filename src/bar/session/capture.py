"""Following an agent's transcripts through a step, and keeping the step's part of them.

The agent writes its transcripts in its home for the task (``bar.agents.homes``), which
outlives the step: a session resumed in a later step writes on in the same file. So a
step's part is every line written since the step started: the files changed since then
are read (no link followed, only regular files, at most ``MAX_READ`` bytes of each and
``MAX_TOTAL`` in all), and lines stamped before the step are left to the steps they
belong to.

While the step runs, ``poll`` reads what was appended since the last look and keeps the
token counts (for a budget); ``finish`` reads the rest, turns the lines into events
(``bar.session.events``), links each tool call to the checkpoint it made, prices each
answer (``bar.session.prices``), scrubs secrets, and writes
``artifacts/NNNN.session.jsonl`` whole (atomically). A step recorded after its ``bar``
died gets its session the same way.
"""

from __future__ import annotations

import json
import os
import stat
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from bar.base.clock import seconds_of
from bar.base.record import record, replace
from bar.session import prices
from bar.session.events import Event, Usage, interrupt
from bar.session.found import reader
from bar.store.files import open_beneath, read_regular, write_bytes_atomic

if TYPE_CHECKING:
    from bar.history.checkpoints import Checkpoint
    from bar.model.config import Price
    from bar.redact import Scrubber

MAX_READ = 256 << 20  # bytes of one transcript read in one step (the agent writes it)
MAX_TOTAL = 512 << 20  # bytes of all its transcripts read in one step
_SLACK_NS = 2_000_000_000  # a file's mtime may lag the step's start by a coarse clock


class _Reader(Protocol):
    session_id: str | None
    model: str | None
    version: str | None
    agent_calls: dict[str, str]
    calls: set[str]
    usages: dict[str, tuple[Usage, str | None]]  # each answer's, by the agent's key
    changed: set[str]  # the keys of ``usages`` set since the last count
    reset: bool  # ``usages`` was emptied since the last count

    def feed(self, rec: dict[str, Any]) -> None: ...
    def events(self) -> list[Event]: ...
    def abandoned(self) -> list[Usage]: ...  # answers the conversation gave up
    def cut_short(self) -> bool | None: ...  # None: told from the events


@record
class Totals:
    """The step's tokens so far, and their cost where every model has a price."""

    answers: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0
    unpriced: tuple[str, ...] = ()  # models without a price: no total cost

    @property
    def tokens(self) -> int:
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
        )


class _File:
    def __init__(self, home: Path, path: Path, reader: _Reader) -> None:
        self.home = home
        self.path = path
        self.reader = reader
        self.offset = 0
        self.rest = b""
        self.unreadable = 0
        self.truncated = False
        self.earlier = 0  # lines stamped before the step: a session resumed in it
        self.counted: dict[str, Usage] = {}  # the answers in the step's totals

    def read_more(self, since: float) -> None:
        fd = open_beneath(self.home, self.path)  # (the agent writes the home: no link)
        if fd is None:
            return
        try:
            st = os.fstat(fd)
            if st.st_size <= self.offset:
                return
            if st.st_size > MAX_READ:
                self.truncated = True
            want = min(st.st_size, MAX_READ) - self.offset
            if want <= 0:
                return
            data = os.pread(fd, want, self.offset)
        except OSError:
            return
        finally:
            os.close(fd)
        self.offset += len(data)
        lines = (self.rest + data).split(b"\n")
        self.rest = lines.pop()
        for line in lines:
            self._feed(line, since)

    def end(self, since: float) -> None:
        """The last line, if the agent wrote one without its newline."""
        if self.rest.strip():
            self._feed(self.rest, since)
        self.rest = b""

    def _feed(self, line: bytes, since: float) -> None:
        if not line.strip():
            return
        try:
            rec = json.loads(line)
        except ValueError:
            self.unreadable += 1
            return
        if not isinstance(rec, dict):
            self.unreadable += 1
            return
        at = rec.get("timestamp")
        if isinstance(at, str) and _seconds(at, since) < since:
            self.earlier += 1
            return  # an earlier step's (a resumed session)
        self.reader.feed(rec)


class Capture:
    """The transcripts of ``agent`` in its ``home`` (``bar.agents.homes.path``) since
    ``started_at`` (a bar time). ``package``: the agent's npm package, whose
    ``package.json`` says its version where its transcripts do not."""

    def __init__(
        self,
        home: Path,
        agent: str,
        started_at: str,
        price_table: tuple[tuple[str, Price], ...] = (),
        *,
        package: str = "",
    ) -> None:
        self.agent = agent
        self.package = package
        self.module = reader(agent)
        self.home = home
        self.started_at = started_at
        self.since = seconds_of(started_at)
        self.prices = price_table
        self.files: dict[Path, _File] = {}
        self.truncated = False  # transcripts left unread: more than ``MAX_TOTAL``
        self.ended_mid_turn = False  # (``finish``) the session's last word: an interrupt
        self._totals = Totals()
        self._unpriced: Counter[str] = Counter()

    def poll(self) -> Totals:
        """Read what the agent wrote since the last look; the step's totals."""
        floor = int(self.since * 1e9) - _SLACK_NS
        for path in self.module.transcripts(self.home):
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode) or st.st_mtime_ns < floor:
                continue
            found = self.files.get(path)
            if found is None:
                if sum(f.offset for f in self.files.values()) >= MAX_TOTAL:
                    self.truncated = True  # (files enough: a home filled to slow bar down)
                    continue
                found = self.files[path] = _File(
                    self.home, path, self.module.Reader(path, self.home)
                )
            found.read_more(self.since)
        return self.totals()

    def has_call(self, call_id: str) -> bool:
        """Whether the transcript read so far has the model asking for ``call_id``."""
        return any(call_id in f.reader.calls for f in self.files.values())

    def totals(self) -> Totals:
        """The step's totals, kept up to date with the answers read since the last call
        (each answer counted once, again only when the agent rewrote its usage)."""
        for f in self.files.values():
            r = f.reader
            if r.reset:
                r.reset = False
                for u in f.counted.values():
                    self._add(u, -1)
                f.counted.clear()
                r.changed.update(r.usages)
            for key in r.changed:
                old = f.counted.pop(key, None)
                if old is not None:
                    self._add(old, -1)
                new = r.usages.get(key)
                if new is not None:
                    f.counted[key] = new[0]
                    self._add(new[0], +1)
            r.changed.clear()
        t = replace(self._totals)
        t.unpriced = tuple(sorted(m for m, n in self._unpriced.items() if n > 0))
        return t

    def _add(self, u: Usage, sign: int) -> None:
        t = self._totals
        t.answers += sign
        t.input_tokens += sign * u.input_tokens
        t.output_tokens += sign * u.output_tokens
        t.cache_read_tokens += sign * u.cache_read_tokens
        t.cache_write_tokens += sign * u.cache_write_tokens
        c = prices.cost(self.prices, u)
        if c is None:
            self._unpriced[u.model or "(unnamed model)"] += sign
        else:
            t.cost_usd += sign * c

    # --- the step's record -----------------------------------------------------------

    def finish(
        self,
        scrubber: Scrubber,
        path: Path,
        checkpoints: list[Checkpoint],
        argv: list[str] | None = None,
    ) -> tuple[dict[str, Any], list[tuple[int, str]]] | None:
        """Write the session's events to ``path``; the ledger's ``session`` entry and the
        checkpoints learnt to be calls (number, call id: agents whose events carry no
        id). None: the agent wrote no transcript in the step."""
        self.poll()
        for f in self.files.values():
            f.end(self.since)
        ordered: list[tuple[float, int, int, Event]] = []
        calls: dict[str, str] = {}
        mains: list[tuple[float, _File]] = []
        for fi, f in enumerate(sorted(self.files.values(), key=lambda f: str(f.path))):
            calls.update(f.reader.agent_calls)
            last = self.since
            kept: list[tuple[float, Event]] = []
            for i, event in enumerate(f.reader.events()):
                at = event.get("at")
                when = _seconds(at, last) if isinstance(at, str) else last
                if when < self.since:
                    continue
                last = when
                kept.append((when, event))
                ordered.append((when, fi, i, event))
            if kept and not getattr(f.reader, "agent_id", None):
                mains.append((min(w for w, _ in kept), f))
                if _cut_short(f.reader, [e for _, e in sorted(kept, key=lambda k: k[0])]):
                    end, final = max(kept, key=lambda k: k[0])
                    ordered.append((end, fi, 1 << 40, interrupt(final.get("at"))))
        if not ordered:
            return None
        ordered.sort(key=lambda item: item[:3])
        events = [e for *_, e in ordered]
        for e in events:
            if e["type"] == "subagent" and e.get("parent_call") is None:
                e["parent_call"] = calls.get(e["agent_id"])
        said = [
            e["type"]
            for e in events
            if e["type"] in ("message", "tool_call", "tool_result", "interrupt")
            and not e.get("agent_id")
        ]
        self.ended_mid_turn = bool(said) and said[-1] == "interrupt"
        amends = _link(events, checkpoints, scrubber)
        self._price(events)
        data = b"".join(
            json.dumps(scrubber.scrub_obj(e), ensure_ascii=False, separators=(",", ":")).encode(
                "utf-8", "backslashreplace"
            )
            + b"\n"
            for e in events
        )
        write_bytes_atomic(path, data)
        summary = self._summary(events, [f for _, f in sorted(mains, key=lambda m: m[0])])
        if summary["agent_version"] is None:
            summary["agent_version"] = installed_version(self.agent, self.package, argv or [])
        return summary, amends

    def _price(self, events: list[Event]) -> None:
        for e in events:
            if e["type"] == "usage":
                u = Usage(
                    e.get("model"),
                    e["input_tokens"],
                    e["output_tokens"],
                    e["cache_read_tokens"],
                    e.get("cache_write_tokens", 0),
                )
                cost = prices.cost(self.prices, u)
                if cost is not None:
                    e["cost_usd"] = cost

    def _summary(self, events: list[Event], mains: list[_File]) -> dict[str, Any]:
        usage = [e for e in events if e["type"] == "usage"]
        models = Counter(e.get("model") for e in usage if e.get("model") and not e.get("agent_id"))
        first = mains[0].reader if mains else None
        sessions = list(dict.fromkeys(s for f in mains if (s := f.reader.session_id)))
        summary: dict[str, Any] = {
            "agent": self.agent,
            "agent_version": next((f.reader.version for f in mains if f.reader.version), None),
            "session_id": sessions[0] if sessions else None,
            "model": models.most_common(1)[0][0] if models else (first.model if first else None),
            "turns": len(usage),
            "tool_calls": sum(1 for e in events if e["type"] == "tool_call"),
            "input_tokens": sum(e["input_tokens"] for e in usage),
            "output_tokens": sum(e["output_tokens"] for e in usage),
            "cache_read_tokens": sum(e["cache_read_tokens"] for e in usage),
        }
        if any(e.get("cache_write_tokens") for e in usage):
            summary["cache_write_tokens"] = sum(e.get("cache_write_tokens", 0) for e in usage)
        if usage and all("cost_usd" in e for e in usage):
            summary["cost_usd"] = round(sum(e["cost_usd"] for e in usage), 6)
        if len(sessions) > 1:
            summary["session_ids"] = sessions
        for key, kind in (
            ("subagents", "subagent"),
            ("interrupts", "interrupt"),
            ("unknown", "unknown"),
        ):
            count = sum(1 for e in events if e["type"] == kind)
            if count:
                summary[key] = count
        gone = [u for f in self.files.values() for u in f.reader.abandoned()]
        if gone:
            summary["abandoned"] = self._abandoned(gone)
        unreadable = sum(f.unreadable for f in self.files.values())
        if unreadable:
            summary["unreadable_lines"] = unreadable
        if self.truncated or any(f.truncated for f in self.files.values()):
            summary["truncated"] = True
        return summary

    def _abandoned(self, answers: list[Usage]) -> dict[str, Any]:
        """The answers of the step that the conversation gave up (a rewind, a branch):
        paid for, not shown, and not in the session's own counts."""
        out: dict[str, Any] = {
            "turns": len(answers),
            "input_tokens": sum(u.input_tokens for u in answers),
            "output_tokens": sum(u.output_tokens for u in answers),
            "cache_read_tokens": sum(u.cache_read_tokens for u in answers),
        }
        if any(u.cache_write_tokens for u in answers):
            out["cache_write_tokens"] = sum(u.cache_write_tokens for u in answers)
        costs = [prices.cost(self.prices, u) for u in answers]
        if all(c is not None for c in costs):
            out["cost_usd"] = round(sum(c for c in costs if c is not None), 6)
        return out

    @property
    def resumed(self) -> bool:
        """Whether a session of the step began before it (resumed here)."""
        return any(f.earlier for f in self.files.values())


def installed_version(program: str, package: str, argv: list[str]) -> str | None:
    """The version of the agent's ``package`` that ``argv`` ran, where its transcript does
    not say (Gemini CLI's): the ``package.json`` above the ``program`` it named."""
    import shutil

    for arg in argv[:4]:
        if os.path.basename(arg) != program or not package:
            continue
        ran = arg if os.sep in arg else shutil.which(arg)
        if not ran:
            continue
        here = Path(os.path.realpath(ran)).parent
        for _ in range(6):
            data = read_regular(here / "package.json")
            try:
                meta = json.loads(data) if data else None
            except ValueError:
                meta = None
            if isinstance(meta, dict) and meta.get("name") == package:
                version = meta.get("version")
                return version if isinstance(version, str) else None
            here = here.parent
    return None


def _cut_short(reader: _Reader, events: list[Event]) -> bool:
    """Whether the session ended in the middle of a turn and no event says so yet (the
    agent was stopped and wrote no word of it: Claude Code and Gemini CLI in their
    non-interactive modes). Claude Code's transcript is told by Claude Code's own rule
    (``bar.session.claude_chain.turn_state``); the others by their events: the last prompt
    or tool result got no answer."""
    last = next(
        (e for e in reversed(events) if e["type"] in ("message", "tool_result", "interrupt")),
        None,
    )
    if last is not None and last["type"] == "interrupt":
        return False  # (the agent said so itself)
    said = reader.cut_short()
    if said is not None:
        return said
    if last is None:
        return False
    return bool(last["type"] == "tool_result" or last.get("role") == "user")


def _link(
    events: list[Event], checkpoints: list[Checkpoint], scrubber: Scrubber
) -> list[tuple[int, str]]:
    """Each tool call's ``checkpoint``: by call id, or, for a checkpoint that names no
    call (Gemini CLI's events carry none), the next call of the same tool on the same
    command or file (as recorded: scrubbed). The checkpoints so matched, with the call's
    id."""
    by_id = {c.call_id: c for c in checkpoints if c.call_id and c.kind == "tool"}
    calls = [e for e in events if e["type"] == "tool_call"]
    for e in calls:
        found = by_id.get(e["id"])
        if found is not None:
            e["checkpoint"] = found.name
    amends: list[tuple[int, str]] = []
    free = [e for e in calls if "checkpoint" not in e]
    for c in checkpoints:
        if c.kind != "tool" or c.call_id:
            continue
        match = next(
            (e for e in free if e["name"] == c.tool and _same_target(e, c, scrubber)), None
        )
        if match is not None:
            free.remove(match)
            match["checkpoint"] = c.name
            if match["id"]:
                amends.append((c.n, match["id"]))
    return amends


def _same_target(call: Event, checkpoint: Checkpoint, scrubber: Scrubber) -> bool:
    args = call.get("input")
    if not isinstance(args, dict):
        return False
    if checkpoint.command is not None:
        command = args.get("command")
        return isinstance(command, str) and scrubber.scrub_text(command) == checkpoint.command
    target = args.get("file_path") or args.get("path") or args.get("absolute_path")
    return isinstance(target, str) and any(
        target == p or target.endswith("/" + p) for p in checkpoint.paths
    )


def _seconds(at: str, default: float) -> float:
    try:
        return seconds_of(at)
    except ValueError:
        return default
