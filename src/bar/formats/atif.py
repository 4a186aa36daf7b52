"""``bar export --format atif``: a task's agent sessions as an ATIF trajectory.

ATIF (the Agent Trajectory Interchange Format, RFC 0001 of the Harbor project) holds one
agent's run as a list of steps: what the user said, each answer of the model with its
tool calls, the tools' results (the observation) and the answer's tokens and cost. bar
writes ``ATIF-v1.7``, the version that added ``trajectory_id``, ``llm_call_count`` and
``extra`` on tool calls and results, all of which are used here; it writes no audio, so
a reader of v1.8 reads it unchanged.

The document of a task is bar's own trajectory: one step per agent step of the task, a
dispatch made without a model (``llm_call_count: 0``) whose tool call is ``bar.run``
with the command, and whose result says how the step ended and refers to the session
it ran. Each session is a complete trajectory of its own, embedded in
``subagent_trajectories`` and named ``bar://task/<id>/step/<step>``; a subagent the
agent started (Claude Code's Task tool) is embedded the same way in its session, and
the tool call that started it refers to it. ``--step`` writes one session alone.

A session's steps come from its events (``bar.session.events``) in order: a prompt is a
``user`` step; the model's words and tool calls up to the end of one answer (its
``usage`` event) are one ``agent`` step, with the answer's tokens as ``metrics``
(``prompt_tokens`` counts the cached ones too, as ATIF asks); a tool's result joins the
step that asked for it as an observation. A turn the person stopped is a ``system``
step. What ATIF has no field for (the checkpoint a call made, whether a tool failed)
goes in ``extra``. Token totals are the ledger's (``final_metrics``), the cost only when
every answer's price is known.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bar import __version__
from bar.errors import NotFound
from bar.model.records import RunStep, Step, parse_step_ref
from bar.model.tasks import Task
from bar.redact import known
from bar.session import stored
from bar.session.events import Event

VERSION = "ATIF-v1.7"
RUN_TOOL = "bar.run"  # the tool call of bar's own steps: one agent step it ran


def export(task: Task, step_ref: str | None = None) -> dict[str, Any]:
    """The task's agent sessions as one ATIF document (``step_ref``: that step's session
    alone), scrubbed of every secret this process knows."""
    if step_ref is not None:
        step = task.ledger.get(parse_step_ref(step_ref))
        if not isinstance(step, RunStep) or stored.summary(step) is None:
            raise NotFound(
                f"step {step.step_id} of task {task.name} kept no agent session",
                hint="`bar log` marks the agent steps; `bar run --agent NAME -- ...` keeps one",
            )
        doc = _session(task, step)
    else:
        doc = _task(task)
    scrubbed: dict[str, Any] = known.scrubber().scrub_obj(doc)
    return scrubbed


def _task(task: Task) -> dict[str, Any]:
    ran = agent_steps(task.ledger.read_all(warn=False))
    if not ran:
        raise NotFound(
            f"task {task.name} ({task.id}) has no agent session to export",
            hint="`bar run --agent claude -- claude ...` keeps the agent's session",
        )
    sessions = [_session(task, s) for s in ran]
    pairs = zip(ran, sessions, strict=True)
    steps = [_dispatch(n, step, session) for n, (step, session) in enumerate(pairs, 1)]
    doc: dict[str, Any] = {
        "schema_version": VERSION,
        "session_id": f"bar-task-{task.id}",
        "trajectory_id": f"bar://task/{task.id}",
        "agent": {
            "name": "bar",
            "version": __version__,
            "extra": {"task_id": task.id, "task_name": task.name},
        },
        "steps": steps,
        "final_metrics": _sum_metrics([d.get("final_metrics") or {} for d in sessions], steps),
        "subagent_trajectories": sessions,
        "notes": "Each step is one `bar run` of an agent; its session is the embedded "
        "trajectory its observation refers to.",
    }
    return doc


def _dispatch(n: int, step: RunStep, session: dict[str, Any]) -> dict[str, Any]:
    """bar's own step that ran ``session``: a dispatch, no model asked."""
    call = f"step-{step.step_id}"
    ended = "exit " + str(step.exit_code) if step.exit_code is not None else "no exit status"
    if step.interrupted:
        ended = "interrupted"
    stat = step.diff_stat
    said = f"{ended}; {stat.files} file(s) +{stat.additions} -{stat.deletions}"
    out = _said("agent", f"bar run step {step.step_id}", step.started_at, n)
    out |= {
        "llm_call_count": 0,
        "tool_calls": [
            {
                "tool_call_id": call,
                "function_name": RUN_TOOL,
                "arguments": {"cmd": list(step.cmd), "cwd": step.cwd},
            }
        ],
        "observation": {
            "results": [
                {
                    "source_call_id": call,
                    "content": said,
                    "subagent_trajectory_ref": [
                        {
                            "trajectory_id": session["trajectory_id"],
                            "session_id": session.get("session_id"),
                        }
                    ],
                    "extra": {
                        "exit_code": step.exit_code,
                        "signal": step.signal,
                        "interrupted": step.interrupted,
                        "diff_stat": stat.to_record(),
                        "checkpoints": step.checkpoints,
                    },
                }
            ]
        },
        "extra": {"bar_step": step.step_id, "ended_at": step.ended_at},
    }
    return out


def _session(task: Task, step: RunStep) -> dict[str, Any]:
    summary = stored.summary(step) or {}
    agent = str(summary.get("agent") or "agent")
    tid = f"bar://task/{task.id}/step/{step.step_id}"
    events = stored.events(task, step)
    main = [e for e in events if not e.get("agent_id")]
    built = _Steps(summary.get("model") if isinstance(summary.get("model"), str) else None)
    built.feed(main)
    subs: list[dict[str, Any]] = []
    for agent_id, parent_call, agent_type in _subagents(events):
        own = [e for e in events if e.get("agent_id") == agent_id and e.get("type") != "subagent"]
        sub = _Steps(None)
        sub.feed(own)
        if not sub.steps:
            continue  # (it began and said nothing: no trajectory to refer to)
        sub_id = f"{tid}/agent/{agent_id}"
        subs.append(
            _trajectory(
                sub_id,
                None,
                {"name": agent_type or f"{agent} subagent", "version": _version(summary)},
                sub,
                None,
                {"agent_id": agent_id},
            )
        )
        built.refer(parent_call, sub_id, agent_type)
    session_id = summary.get("session_id")
    doc = _trajectory(
        tid,
        session_id
        if isinstance(session_id, str) and session_id
        else f"bar-{task.id}-{step.step_id}",
        {"name": agent, "version": _version(summary), "model_name": summary.get("model")},
        built,
        summary,
        {"task_id": task.id, "step": step.step_id, "cmd": list(step.cmd)},
    )
    if subs:
        doc["subagent_trajectories"] = subs
    if summary.get("truncated"):
        doc["notes"] = "The agent's transcript was longer than bar reads: its end is missing."
    return doc


def _trajectory(
    tid: str,
    session_id: str | None,
    agent: dict[str, Any],
    built: _Steps,
    summary: dict[str, Any] | None,
    extra: dict[str, Any],
) -> dict[str, Any]:
    steps = built.steps or [_said("system", "The session recorded no event.", None, 1)]
    doc: dict[str, Any] = {
        "schema_version": VERSION,
        "trajectory_id": tid,
        "agent": {k: v for k, v in agent.items() if v is not None},
        "steps": steps,
    }
    if session_id is not None:
        doc["session_id"] = session_id
    metrics = (
        _summary_metrics(summary, steps)
        if summary
        else _sum_metrics([s.get("metrics") or {} for s in steps], steps, per_step=True)
    )
    doc["final_metrics"] = metrics
    if built.unknown:
        extra = {**extra, "unknown_events": built.unknown}
    doc["extra"] = extra
    return doc


class _Steps:
    """A session's events made into ATIF steps (see the module's docstring)."""

    def __init__(self, model: str | None) -> None:
        self.model = model
        self.steps: list[dict[str, Any]] = []
        self.open: dict[str, Any] | None = None  # the answer being read
        self.by_call: dict[str, dict[str, Any]] = {}  # call id -> the step that made it
        self.unknown = 0

    def feed(self, events: list[Event]) -> None:
        for e in events:
            kind = e.get("type")
            at = e.get("at") if isinstance(e.get("at"), str) else None
            if kind == "message" and e.get("role") == "user":
                self.open = None
                self.steps.append(_said("user", str(e.get("text") or ""), at, len(self.steps) + 1))
            elif kind == "message":
                step = self._answer(at)
                text = str(e.get("text") or "")
                step["message"] = f"{step['message']}\n\n{text}" if step["message"] else text
            elif kind == "tool_call":
                self._call(e, at)
            elif kind == "tool_result":
                self._result(e)
            elif kind == "usage":
                self._usage(e, at)
            elif kind == "interrupt":
                self.open = None
                stopped = "The person stopped the agent mid-turn."
                self.steps.append(_said("system", stopped, at, len(self.steps) + 1))
            elif kind != "subagent":
                self.unknown += 1

    def _answer(self, at: str | None) -> dict[str, Any]:
        if self.open is None:
            self.open = {
                "step_id": len(self.steps) + 1,
                "source": "agent",
                "message": "",
            }
            if (when := _time(at)) is not None:
                self.open["timestamp"] = when
            if self.model:
                self.open["model_name"] = self.model
            self.steps.append(self.open)
        return self.open

    def _call(self, e: Event, at: str | None) -> None:
        step = self._answer(at)
        call_id = str(e.get("id") or f"call-{step['step_id']}-{len(step.get('tool_calls', []))}")
        args = e.get("input")
        call: dict[str, Any] = {
            "tool_call_id": call_id,
            "function_name": str(e.get("name") or "tool"),
            "arguments": args if isinstance(args, dict) else {"input": args},
        }
        if isinstance(e.get("checkpoint"), str):
            call["extra"] = {"checkpoint": e["checkpoint"]}
        step.setdefault("tool_calls", []).append(call)
        self.by_call[call_id] = step

    def _result(self, e: Event) -> None:
        call_id = str(e.get("id") or "")
        step = self.by_call.get(call_id)
        result: dict[str, Any] = {
            "content": str(e.get("summary") or ""),
            "extra": {"ok": bool(e.get("ok"))},
        }
        if step is not None:
            result["source_call_id"] = call_id
        else:
            step = self.steps[-1] if self.steps else self._answer(None)
        step.setdefault("observation", {"results": []})["results"].append(result)

    def _usage(self, e: Event, at: str | None) -> None:
        step = self.open
        if step is None:
            last = next((s for s in reversed(self.steps) if s["source"] == "agent"), None)
            step = last if last is not None and "metrics" not in last else self._answer(at)
        read = _tokens(e)
        metrics: dict[str, Any] = {
            "prompt_tokens": read["input"] + read["cache_read"] + read["cache_write"],
            "completion_tokens": read["output"],
            "cached_tokens": read["cache_read"],
        }
        if isinstance(e.get("cost_usd"), int | float):
            metrics["cost_usd"] = float(e["cost_usd"])
        if read["cache_write"]:
            metrics["extra"] = {"cache_write_tokens": read["cache_write"]}
        if "metrics" in step:  # (a second answer counted on one step)
            old = step["metrics"]
            for key in ("prompt_tokens", "completion_tokens", "cached_tokens"):
                metrics[key] += old.get(key) or 0
            step["llm_call_count"] = step.get("llm_call_count", 1) + 1
        else:
            step["llm_call_count"] = 1
        step["metrics"] = metrics
        if isinstance(e.get("model"), str) and e["model"]:
            step["model_name"] = e["model"]
        self.open = None  # the answer ends with its usage

    def refer(self, parent_call: str | None, sub_id: str, agent_type: str | None) -> None:
        """Make the tool call that started a subagent refer to its trajectory; one that
        names no call the session made is a ``system`` step of its own."""
        ref = {"trajectory_id": sub_id}
        step = self.by_call.get(parent_call or "")
        if step is None:
            began = f"A subagent ({agent_type or 'of no named kind'}) began."
            step = _said("system", began, None, len(self.steps) + 1)
            step["observation"] = {"results": [{"subagent_trajectory_ref": [ref]}]}
            self.steps.append(step)
            return
        results = step.setdefault("observation", {"results": []})["results"]
        mine = next((r for r in results if r.get("source_call_id") == parent_call), None)
        if mine is None:
            mine = {"source_call_id": parent_call}
            results.append(mine)
        mine.setdefault("subagent_trajectory_ref", []).append(ref)


def _subagents(events: list[Event]) -> list[tuple[str, str | None, str | None]]:
    """(agent id, the call that started it, its kind) of each subagent, in order."""
    out: dict[str, tuple[str, str | None, str | None]] = {}
    for e in events:
        agent_id = e.get("agent_id")
        if not isinstance(agent_id, str) or not agent_id:
            continue
        if e.get("type") == "subagent":
            parent = e.get("parent_call")
            kind = e.get("agent_type")
            out[agent_id] = (
                agent_id,
                parent if isinstance(parent, str) else None,
                kind if isinstance(kind, str) else None,
            )
        else:
            out.setdefault(agent_id, (agent_id, None, None))
    return list(out.values())


def _said(source: str, text: str, at: str | None, n: int) -> dict[str, Any]:
    step: dict[str, Any] = {"step_id": n, "source": source, "message": text}
    if (when := _time(at)) is not None:
        step["timestamp"] = when
    return step


def _tokens(e: Event) -> dict[str, int]:
    def count(key: str) -> int:
        value = e.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    return {
        "input": count("input_tokens"),
        "output": count("output_tokens"),
        "cache_read": count("cache_read_tokens"),
        "cache_write": count("cache_write_tokens"),
    }


def _summary_metrics(summary: dict[str, Any], steps: list[dict[str, Any]]) -> dict[str, Any]:
    """A session's totals, as the ledger's ``session`` has them."""
    read = _tokens(summary)
    out: dict[str, Any] = {
        "total_prompt_tokens": read["input"] + read["cache_read"] + read["cache_write"],
        "total_completion_tokens": read["output"],
        "total_cached_tokens": read["cache_read"],
        "total_steps": len(steps),
    }
    if isinstance(summary.get("cost_usd"), int | float):
        out["total_cost_usd"] = float(summary["cost_usd"])
    extra = {
        k: summary[k]
        for k in ("turns", "tool_calls", "cache_write_tokens", "subagents", "interrupts")
        if isinstance(summary.get(k), int)
    }
    if extra:
        out["extra"] = extra
    return out


def _sum_metrics(
    parts: list[dict[str, Any]], steps: list[dict[str, Any]], *, per_step: bool = False
) -> dict[str, Any]:
    """The sum of several trajectories' ``final_metrics`` (or, ``per_step``, of steps'
    ``metrics``); the cost only when every part has one."""
    names = (
        ("prompt_tokens", "completion_tokens", "cached_tokens", "cost_usd")
        if per_step
        else (
            "total_prompt_tokens",
            "total_completion_tokens",
            "total_cached_tokens",
            "total_cost_usd",
        )
    )
    totals = ("total_prompt_tokens", "total_completion_tokens", "total_cached_tokens")
    out: dict[str, Any] = {
        t: sum(int(p.get(n) or 0) for p in parts) for t, n in zip(totals, names, strict=False)
    }
    counted = [p for p in parts if p]
    if counted and all(isinstance(p.get(names[3]), int | float) for p in counted):
        out["total_cost_usd"] = round(sum(float(p[names[3]]) for p in counted), 6)
    out["total_steps"] = len(steps)
    return out


def _version(summary: dict[str, Any]) -> str:
    version = summary.get("agent_version")
    return version if isinstance(version, str) and version else "unknown"


def _time(at: str | None) -> str | None:
    """``at`` if ATIF's readers can parse it (ISO 8601), else nothing."""
    if not at:
        return None
    try:
        datetime.fromisoformat(at.replace("Z", "+00:00"))
    except ValueError:
        return None
    return at


def agent_steps(steps: list[Step]) -> list[RunStep]:
    """The steps that kept an agent session."""
    return [s for s in steps if isinstance(s, RunStep) and stored.summary(s) is not None]
