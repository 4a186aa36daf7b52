#!/usr/bin/env python3
"""Figure 15: what keeping an agent's session costs per tool call, against the checkpoint
that call takes.

A step run with ``--agent`` takes a checkpoint after every tool call of its agent
(``bar.history.checkpoints.Recorder.take``) and, since sessions are kept, reads the
agent's transcript (``bar.session.capture``): once at the step's end, in a fresh reader
(``Capture.finish``: every line read, folded into events, linked to the checkpoints,
scrubbed, written); and with a budget (``--max-tokens``, ``--max-cost``) also at every
hook event and every half second between (``Capture.poll``: the lines appended since the
last look, and the step's totals). Every checkpoint
also looks for its call in the transcript (``bar.agents.transcripts.verified``).

All of this runs in bar's own process, so it is timed there, under bar's interpreter,
on a simulated Claude Code session in a real task: each call's lines are appended to
``<task dir>/agents/claude/projects/k/<session>.jsonl`` in Claude Code's format (an
answer's text, thinking and ``tool_use`` lines sharing its id and usage; a tool result
of a few kB with its ``toolUseResult``; a prompt every 50 calls; a system-reminder
attachment now and then), then, as bar meets them: a poll at the call's ``PreToolUse``
event; the tool's one-file edit; at its ``PostToolUse`` event the look for the call, the
checkpoint and a poll; then the result's lines. The step's end is the finish. One round
is one session; the figure's samples are its totals, and its ratios those of per-call
costs (each side is N calls). Writing the lines and the edits is never timed.

    python bench/sessions.py                       # the figure alone on the small repository
    python bench/sessions.py --sizes small,medium  # any option of run.py (--only 15 implied)
    python bench/sessions.py measure WORKTREE POOL CALLS ROUNDS WARMUP SEED
        (what the figure starts under bar's interpreter: the samples as JSON on stdout)
"""

from __future__ import annotations

import json
import random
import shutil
import sys
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import edits  # noqa: E402
from figures import Params, Row, ratio_row  # noqa: E402
from harness import BenchError, Fixture, log, median  # noqa: E402

NUMBER = 15
CALLS = 200  # tool calls in one session (a long afternoon's task)
QUICK_CALLS = 20
BUDGET_POLL = 0.5  # seconds between the budget's looks (bar.step.supervisor._BUDGET_POLL)
IDLE_POLLS = 10  # polls with nothing new at a session's end, timed together
MODEL = "claude-sonnet-4-5-20250929"
VERSION = "2.1.0"
# a secret in the step's environment, as a user's holds one: the scrubber has it to find
SECRET_ENV = {"ANTHROPIC_API_KEY": "sk-ant-api03-bench-" + "x" * 80}


# --- the simulated transcript -----------------------------------------------------------


def _corpus(rng: random.Random, size: int = 1 << 18) -> str:
    """Code-like text to cut tool results from: identifiers, punctuation, quotes, tabs
    and newlines, so that JSON escaping costs what it costs on real output."""
    words = [
        "def",
        "return",
        "self",
        "import",
        "class",
        "if",
        "else",
        "for",
        "in",
        "None",
        "path",
        "value",
        "config",
        "task",
        "worktree",
        "index",
        "snapshot",
        "(",
        ")",
        ":",
        "=",
        "==",
        "[",
        "]",
        "{",
        "}",
        '"name"',
        "'x'",
        "->",
        "\t",
        "0",
        "42",
        "#",
        "TODO",
        "error:",
        "src/bar/session/capture.py",
        "tests/test_capture.py::test_poll",
        "PASSED",
        "ok",
    ]
    out: list[str] = []
    size_now = 0
    while size_now < size:
        line = " " * rng.choice((0, 4, 8, 12)) + " ".join(
            rng.choice(words) for _ in range(rng.randint(1, 12))
        )
        out.append(line)
        size_now += len(line) + 1
    return "\n".join(out)


class Session:
    """A Claude Code session of tool calls, appended as Claude Code 2.1 writes them."""

    def __init__(self, path: Path, cwd: Path, pool: list[str], seed: int) -> None:
        self.path = path
        self.cwd = cwd
        self.pool = pool
        self.rng = random.Random(seed)
        self.text = _corpus(self.rng)
        self.id = str(uuid.UUID(int=self.rng.getrandbits(128)))
        self.parent: str | None = None
        self.lines = 0
        self._pending: tuple[str, str, dict[str, Any]] = ("", "", {})
        path.parent.mkdir(parents=True, exist_ok=True)

    def _cut(self, median: int, cap: int) -> str:
        n = min(cap, max(40, int(self.rng.lognormvariate(0, 1.0) * median)))
        start = self.rng.randrange(0, len(self.text) - n)
        return self.text[start : start + n]

    def _uuid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128)))

    def _write(self, recs: list[dict[str, Any]]) -> None:
        at = time.time_ns()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at // 10**9))
        stamp += f".{at // 10**6 % 1000:03d}Z"
        data = []
        for rec in recs:
            line_id = self._uuid()
            full = {
                "parentUuid": self.parent,
                "isSidechain": False,
                "userType": "external",
                "cwd": str(self.cwd),
                "sessionId": self.id,
                "version": VERSION,
                "gitBranch": "bar/task",
                **rec,
                "uuid": line_id,
                "timestamp": stamp,
            }
            self.parent = line_id
            data.append(json.dumps(full, ensure_ascii=False, separators=(",", ":")) + "\n")
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write("".join(data))
        self.lines += len(recs)

    def prompt(self) -> None:
        text = "Please " + self._cut(300, 2000)
        self._write(
            [
                {"type": "user", "message": {"role": "user", "content": text}},
                {
                    "type": "file-history-snapshot",
                    "messageId": self._uuid(),
                    "snapshot": {"trackedFileBackups": {}, "timestamp": "now"},
                    "isSnapshotUpdate": False,
                },
            ]
        )

    def call(self, k: int) -> tuple[str, str, str | None, list[str]]:
        """Call ``k``'s answer lines (text, thinking, tool_use); its id, tool, command and
        the paths it names (relative to the worktree)."""
        call = f"toolu_01{self.rng.getrandbits(96):024x}"
        target = self.pool[0]  # the file the call's edit changes (edits.small_change)
        tool = self.rng.choices(
            ("Bash", "Read", "Edit", "Grep", "Write"), weights=(40, 25, 20, 10, 5)
        )[0]
        command: str | None = None
        paths: list[str] = []
        if tool == "Bash":
            command = f"python -m pytest -q tests/ -k case_{k} && git diff --stat"
            args: dict[str, Any] = {"command": command, "description": "Run the tests"}
        elif tool == "Read":
            args = {"file_path": str(self.cwd / target)}
        elif tool == "Edit":
            args = {
                "file_path": str(self.cwd / target),
                "old_string": self._cut(150, 2000),
                "new_string": self._cut(200, 2000),
            }
            paths = [target]
        elif tool == "Grep":
            args = {"pattern": f"def case_{k}", "path": str(self.cwd), "output_mode": "content"}
        else:
            args = {"file_path": str(self.cwd / target), "content": self._cut(2500, 30_000)}
            paths = [target]
        usage = {
            "input_tokens": self.rng.randint(2, 12),
            "cache_creation_input_tokens": self.rng.randint(200, 3000),
            "cache_read_input_tokens": 18_000 + 350 * k,
            "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
            "output_tokens": self.rng.randint(40, 600),
            "service_tier": "standard",
        }
        message = {"model": MODEL, "id": f"msg_01{self.rng.getrandbits(96):024x}"}
        blocks: list[dict[str, Any]] = []
        if self.rng.random() < 0.2:
            blocks.append(
                {
                    "type": "thinking",
                    "thinking": self._cut(800, 6000),
                    "signature": f"{self.rng.getrandbits(2048):x}" * 2,
                }
            )
        if self.rng.random() < 0.4:
            blocks.append({"type": "text", "text": self._cut(200, 1500)})
        blocks.append({"type": "tool_use", "id": call, "name": tool, "input": args})
        request = f"req_011{self.rng.getrandbits(96):024x}"
        self._write(
            [
                {
                    "message": {
                        **message,
                        "type": "message",
                        "role": "assistant",
                        "content": [block],
                        "stop_reason": "tool_use" if block["type"] == "tool_use" else None,
                        "stop_sequence": None,
                        "usage": usage,
                    },
                    "requestId": request,
                    "type": "assistant",
                }
                for block in blocks
            ]
        )
        self._pending = (call, tool, args)
        return call, tool, command, paths

    def result(self) -> None:
        """The result of the last call (and, now and then, a system reminder)."""
        call, tool, args = self._pending
        if tool == "Bash":
            out = self._cut(800, 30_000)
            content, extra = out, {"stdout": out, "stderr": "", "interrupted": False}
            extra["isImage"] = False
        elif tool == "Read":
            body = self._cut(3000, 40_000)
            numbered = "\n".join(f"{i + 1:6d}→{x}" for i, x in enumerate(body.split("\n")))
            content = numbered
            extra = {
                "type": "text",
                "file": {
                    "filePath": args["file_path"],
                    "content": body,
                    "numLines": body.count("\n") + 1,
                    "startLine": 1,
                    "totalLines": body.count("\n") + 1,
                },
            }
        elif tool == "Edit":
            original = self._cut(3000, 40_000)
            content = f"The file {args['file_path']} has been updated.\n" + self._cut(600, 3000)
            extra = {
                "filePath": args["file_path"],
                "oldString": args["old_string"],
                "newString": args["new_string"],
                "originalFile": original,
                "structuredPatch": [
                    {
                        "oldStart": 10,
                        "oldLines": 3,
                        "newStart": 10,
                        "newLines": 4,
                        "lines": self._cut(300, 3000).split("\n"),
                    }
                ],
                "userModified": False,
                "replaceAll": False,
            }
        elif tool == "Grep":
            content = self._cut(900, 20_000)
            extra = {"mode": "content", "numFiles": 7, "filenames": [], "content": content}
        else:
            content = f"File created successfully at: {args['file_path']}"
            extra = {"type": "create", "filePath": args["file_path"], "content": args["content"]}
        block = {"tool_use_id": call, "type": "tool_result", "content": content}
        recs: list[dict[str, Any]] = [
            {
                "type": "user",
                "message": {"role": "user", "content": [block]},
                "toolUseResult": extra,
            }
        ]
        if self.rng.random() < 0.12:
            recs.append(
                {
                    "type": "attachment",
                    "attachment": {
                        "type": "todo_reminder",
                        "content": "<system-reminder>\n" + self._cut(900, 4000),
                    },
                }
            )
        self._write(recs)


# --- the timing, under bar's interpreter -------------------------------------------------


def measure(
    worktree: Path, pool_file: Path, calls: int, rounds: int, warmup: int, seed: int
) -> dict[str, Any]:
    """``warmup`` + ``rounds`` sessions of ``calls`` tool calls in the worktree's task;
    the totals of each measured one (seconds), and what was checked."""
    from bar import api
    from bar.agents import homes
    from bar.agents.protocol import HookEvent
    from bar.agents.transcripts import verified
    from bar.base.clock import now_iso
    from bar.changes.fast import watcher
    from bar.history import checkpoints
    from bar.redact import Scrubber
    from bar.session.capture import Capture
    from bar.step import transaction
    from bar.step.run import watch_worktree

    pool = edits.read_pool(pool_file)
    task = api.get_task(api.open_project(worktree))
    home = homes.path(task, "claude")
    scrubber = Scrubber.from_environ(SECRET_ENV)
    samples: dict[str, list[float]] = {
        name: [] for name in ("finish", "polls", "checkpoints", "looks", "idle", "first", "last")
    }
    facts: dict[str, Any] = {"calls": calls}
    first_id = int(task.ledger.next_step_id())
    per = max(1, calls // 10)  # the first and last tenth of a session's polls
    k = 0
    with transaction.task_lock(task, "bench: sessions"):
        claim = watcher.claim_for(task)  # (its share of bar's inotify watches)
        watch = watch_worktree(task, claim)  # the step's own watch, as bar.step.run makes it
        if watch is not None:
            watch.begin()
        last = task.recorded_snapshot()
        try:
            for r in range(warmup + rounds):
                step_id = f"{first_id + r:04d}"
                shutil.rmtree(home / "projects", ignore_errors=True)  # (the last round's)
                started = now_iso()
                recorder = checkpoints.Recorder(task, step_id, last, (), scrubber, watch)
                session = Session(
                    home / "projects" / "k" / f"{uuid.uuid4()}.jsonl", worktree, pool, seed + r
                )
                capture = Capture(home, "claude", started)
                polls: list[float] = []
                took = looked = 0.0
                session.prompt()
                for i in range(calls):
                    if i and i % 50 == 0:
                        session.prompt()
                    call, tool, command, paths = session.call(i)
                    t0 = time.perf_counter()
                    capture.poll()  # (the PreToolUse event: the answer asking for the call)
                    there = capture.has_call(call)
                    polls.append(time.perf_counter() - t0)
                    if not there:
                        raise BenchError(f"the poll did not see call {call}")
                    k += 1
                    edits.small_change(worktree, pool, 1_000_000 + k)
                    event = HookEvent(
                        agent="claude",
                        event_name="PostToolUse",
                        tool_name=tool,
                        command=command,
                        session_id=session.id,
                        tool_use_id=call,
                        cwd=str(worktree),
                        kind="post",
                        outcome="ran",
                        paths=tuple(paths),
                        transcript=str(session.path),
                    )
                    t0 = time.perf_counter()
                    found = verified(task, event)
                    t1 = time.perf_counter()
                    recorder.take(
                        "tool",
                        tool=tool,
                        call_id=call,
                        session_id=session.id,
                        command=command,
                        paths=paths,
                        decision="allow",
                        answer=None,
                        outcome="ran",
                        agent_id=None,
                        agent_type=None,
                        verified=found,
                    )
                    t2 = time.perf_counter()
                    totals = capture.poll()  # (the PostToolUse event)
                    t3 = time.perf_counter()
                    polls[-1] += t3 - t2
                    looked += t1 - t0
                    took += t2 - t1
                    if not found:
                        raise BenchError(f"call {call} was not found in the transcript")
                    session.result()
                if totals.answers != calls:
                    raise BenchError(f"the polls counted {totals.answers} answers of {calls}")
                t0 = time.perf_counter()
                for _ in range(IDLE_POLLS):  # (the budget's look while the agent thinks)
                    capture.poll()
                idle = (time.perf_counter() - t0) / IDLE_POLLS
                # the step's end (bar.step.complete._session): a fresh reader of it all
                t0 = time.perf_counter()
                found_session = Capture(home, "claude", started).finish(
                    scrubber,
                    task.dir / "artifacts" / f"{step_id}.session.jsonl",
                    checkpoints.read(task, step_id),
                    ["claude"],
                )
                finished = time.perf_counter() - t0
                if found_session is None:
                    raise BenchError("the session's finish found no transcript")
                summary, _ = found_session
                written = (task.dir / "artifacts" / f"{step_id}.session.jsonl").read_bytes()
                linked = written.count(b'"checkpoint":')
                if summary["tool_calls"] != calls or linked != calls:
                    raise BenchError(
                        f"the session kept {summary['tool_calls']} calls, {linked} linked "
                        f"to a checkpoint, of {calls}"
                    )
                new = [
                    c for c in checkpoints.read(task, step_id) if c.snapshot != c.snapshot_before
                ]
                if len(new) != calls:
                    raise BenchError(f"{len(new)} of {calls} checkpoints saw the call's edit")
                last = recorder.last
                if r < warmup:
                    continue
                samples["finish"].append(finished)
                samples["polls"].append(sum(polls))
                samples["checkpoints"].append(took)
                samples["looks"].append(looked)
                samples["idle"].append(idle)
                samples["first"].append(sum(polls[:per]))
                samples["last"].append(sum(polls[-per:]))
                facts["transcript_bytes"] = session.path.stat().st_size
                facts["transcript_lines"] = session.lines
                facts["session_events"] = written.count(b"\n")
                facts["watched"] = watch is not None
        finally:
            if watch is not None:
                watch.close()
            claim.release()
    return {"samples": samples, "facts": facts}


# --- the figure --------------------------------------------------------------------------


def fig15(f: Fixture, p: Params) -> list[Row]:
    repo = f.clone()
    f.init(repo)
    task, wt = f.new_task(repo, "sessions")
    pool = edits.make_pool(wt, f.dir / "pool.txt")
    edits.small_change(wt, pool, 0)
    f.bar(wt, "run", "--task", task, "--no-pty", "--", "true")  # stamps, as a task has them
    f.stop_watchers()  # a running step holds its task's watch itself: no watcher runs
    calls = QUICK_CALLS if p.quick else CALLS
    out = f.run(
        [
            f.tools.python,
            HERE / "sessions.py",
            "measure",
            wt,
            f.dir / "pool.txt",
            str(calls),
            str(p.repeat),
            str(p.warmup),
            str(f.seed),
        ],
        wt,
        capture=True,
    )
    got = json.loads(out.stdout)
    raw, facts = got["samples"], got["facts"]
    tenth = max(1, calls // 10)
    kept, budget, taken, looks = (
        f"session kept ({calls} calls)",
        f"polls + session kept ({calls} calls)",
        f"checkpoints ({calls} calls)",
        f"transcript looks ({calls} calls)",
    )
    first, last = f"polls, calls 1-{tenth}", f"polls, calls {calls - tenth + 1}-{calls}"
    s = {
        kept: raw["finish"],
        budget: [a + b for a, b in zip(raw["polls"], raw["finish"], strict=True)],
        taken: raw["checkpoints"],
        looks: raw["looks"],
        first: raw["first"],
        last: raw["last"],
        f"a poll, nothing new, at call {calls}": raw["idle"],
        "a checkpoint (their mean)": [x / calls for x in raw["checkpoints"]],
    }
    per_call = {name: median(raw[name]) / calls * 1e6 for name in ("finish", "polls", "looks")}
    per_call["checkpoints"] = median(raw["checkpoints"]) / calls * 1e6
    per_call[f"(one poll, nothing new, at call {calls})"] = median(raw["idle"]) * 1e6
    log(
        ("  the step's watch; " if facts.get("watched") else "  no watch (BAR_FAST=0); ")
        + f"a transcript of {facts.get('transcript_bytes', 0) / 1e6:.1f} MB in "
        f"{facts.get('transcript_lines')} lines; per call (context): "
        + ", ".join(f"{name} {us:.0f} µs" for name, us in per_call.items())
    )
    what = f"a {calls}-call Claude Code session"
    return [
        ratio_row(
            "15",
            f"{what}, kept (`Capture.finish`, at the step's end) ÷ its checkpoints "
            "(`Recorder.take` after a one-file edit), per tool call",
            s,
            kept,
            taken,
            None,
        ),
        ratio_row(
            "15-budget",
            f"{what} with a budget: `Capture.poll` at each hook event, and kept ÷ "
            "its checkpoints, per tool call",
            s,
            budget,
            taken,
            None,
        ),
        ratio_row(
            "15-flat",
            f"{what} with a budget: the polls of its last tenth of calls ÷ of its first",
            s,
            last,
            first,
            None,
        ),
        ratio_row(
            "15-idle",
            f"{what} with a budget: the look bar takes every {BUDGET_POLL} s while the agent "
            "thinks (a poll, nothing new), at its end ÷ one of its checkpoints",
            s,
            f"a poll, nothing new, at call {calls}",
            "a checkpoint (their mean)",
            None,
        ),
        ratio_row(
            "15-look",
            f"{what}: each checkpoint's look for its call in the transcript "
            "(`agents.transcripts.verified`) ÷ the checkpoints",
            s,
            looks,
            taken,
            None,
        ),
    ]


FIGURE = ("session capture ÷ checkpoints per tool call", fig15)


def main(argv: list[str]) -> int:
    if argv[:1] == ["measure"] and len(argv) == 7:
        wt, pool, calls, rounds, warmup, seed = argv[1:]
        result = measure(Path(wt), Path(pool), int(calls), int(rounds), int(warmup), int(seed))
        print(json.dumps(result))
        return 0
    if argv[:1] == ["measure"]:
        print(__doc__, file=sys.stderr)
        return 2
    import run

    return run.one_figure(NUMBER, argv)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
