"""OpenTelemetry spans of a task, after the GenAI semantic conventions (docs/sharing.md).

One trace per task. Its spans, each a child of the one before:

- the task (``bar task NAME``): from its creation to its close, or its last recorded
  step (sent live when the task is closed);
- one span per step (``bar run 0003``, ``bar rollback 0004``, ...): the command
  (``process.command_args``, ``process.command_line``), how it ended
  (``process.exit.code``; the span's status is an error for a failed, blocked or
  interrupted step), what it changed (``bar.diff.*``), and each policy decision as a
  span event (``bar.policy``);
- for a step that ran an agent session, ``invoke_agent AGENT`` (``gen_ai.operation.name``
  ``invoke_agent``): the agent, its provider, the model, the conversation id and the
  session's token usage (``gen_ai.usage.input_tokens`` counts the cached prompt tokens
  too, as the conventions ask; ``gen_ai.usage.cache_read.input_tokens`` says how many);
- one ``execute_tool TOOL`` span per tool call of the session (or, without a session,
  per checkpoint an agent's hook made): ``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
  the checkpoint it made (``bar.checkpoint``), from the call to its result.

Ids are derived from the task's id, the step and the call, so a span sent live when its
step ended (``bar.history.telemetry``) and the same span exported later are one span to
a backend: the same trace, the same parent. Every string is scrubbed of the secrets the
process knows before it leaves.

This module imports the OpenTelemetry SDK (the ``otel`` extra); ``require()`` says how
to install it when it is missing.
"""

from __future__ import annotations

import base64
import hashlib
import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from bar import __version__
from bar.agents import AGENTS
from bar.agents.base import of
from bar.base.clock import seconds_of
from bar.base.record import record
from bar.errors import BarError
from bar.history import checkpoints
from bar.model.records import ApplyStep, RollbackStep, RunStep, Step, SyncStep
from bar.model.tasks import Task
from bar.redact import Scrubber, known
from bar.session import stored
from bar.session.events import Event, call_target

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

SCOPE = "bar"


class MissingExtra(BarError):
    """The OpenTelemetry SDK is not installed."""


def require() -> None:
    """Refuse, with the command that installs it, when the SDK is missing."""
    try:
        import opentelemetry.exporter.otlp.proto.common
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError as exc:
        raise MissingExtra(
            f"OpenTelemetry export needs the SDK, which is not installed ({exc.name})",
            hint="pip install 'bar[otel]' (the SDK and its OTLP exporter)",
        ) from exc


def trace_id(task_id: str) -> int:
    return _id(128, "task", task_id)


def _id(bits: int, *parts: str) -> int:
    digest = hashlib.sha256("\0".join(("bar", *parts)).encode()).digest()
    value = int.from_bytes(digest[: bits // 8], "big")
    return value or 1  # (an id of zeros is invalid)


def task_spans(
    task: Task, steps: Sequence[Step] | None = None, *, with_task: bool = True
) -> list[ReadableSpan]:
    """The spans of ``steps`` (default: the whole ledger) and, ``with_task``, the task's."""
    require()
    listed = list(task.ledger.read_all(warn=False) if steps is None else steps)
    maker = _Maker(task)
    specs: list[_Spec] = []
    if with_task:
        specs.append(maker.task_span(listed))
    for step in listed:
        specs += maker.step_spans(step)
    return maker.build(specs)


def task_span(task: Task) -> ReadableSpan:
    """The task's own span alone: from its creation to its close (or its last step)."""
    require()
    maker = _Maker(task)
    (span,) = maker.build([maker.task_span(task.ledger.read_all(warn=False))])
    return span


@record(frozen=True)
class _Spec:
    """A span to make: what ``ReadableSpan`` takes, before it is scrubbed."""

    name: str
    span_id: int
    parent: int | None
    start: str
    end: str
    attributes: dict[str, Any]
    status: Any = None
    events: Sequence[tuple[str, dict[str, Any], str | None]] = ()


class _Maker:
    def __init__(self, task: Task) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope

        self.task = task
        self.scrub: Scrubber = known.scrubber()
        self.trace = trace_id(task.id)
        self.resource = Resource(
            {"service.name": "bar", "service.version": __version__, "bar.task.id": task.id}
        )
        self.scope = InstrumentationScope(SCOPE, __version__)

    def span_id(self, *parts: str) -> int:
        return _id(64, self.task.id, *parts)

    def task_span(self, steps: list[Step]) -> _Spec:
        task = self.task
        end = task.closed_at or max((s.ended_at for s in steps), default=task.created_at)
        attributes: dict[str, Any] = {
            "bar.task.id": task.id,
            "bar.task.name": task.name,
            "bar.task.status": task.status,
            "bar.task.steps": len(steps),
        }
        totals = stored.totals(steps)
        if totals is not None:
            attributes |= _usage(totals)
            if isinstance(totals.get("cost_usd"), int | float):
                attributes["bar.session.cost_usd"] = float(totals["cost_usd"])
        return _Spec(
            f"bar task {task.name}",
            self.span_id("task"),
            None,
            task.created_at,
            end,
            attributes,
        )

    def step_spans(self, step: Step) -> list[_Spec]:
        from opentelemetry.trace import Status, StatusCode

        sid = self.span_id("step", step.step_id)
        attributes: dict[str, Any] = {
            "bar.task.id": self.task.id,
            "bar.step.id": step.step_id,
            "bar.step.kind": step.kind,
        }
        stat = step.diff_stat
        attributes |= {
            "bar.diff.files": stat.files,
            "bar.diff.additions": stat.additions,
            "bar.diff.deletions": stat.deletions,
        }
        status = Status(StatusCode.UNSET)
        events: list[tuple[str, dict[str, Any], str]] = []
        if isinstance(step, RunStep):
            attributes["process.command_args"] = list(step.cmd)
            attributes["process.command_line"] = shlex.join(step.cmd)
            if step.exit_code is not None:
                attributes["process.exit.code"] = step.exit_code
            if step.signal is not None:
                attributes["bar.step.signal"] = step.signal
            for flag in ("interrupted", "blocked"):
                if getattr(step, flag):
                    attributes[f"bar.step.{flag}"] = True
            failed = step.exit_code != 0 or step.blocked or step.interrupted
            if failed:
                why = "blocked by policy" if step.blocked else "interrupted"
                why = f"exit {step.exit_code}" if step.exit_code not in (None, 0) else why
                status = Status(StatusCode.ERROR, why)
            for e in step.policy_events:
                events.append(("bar.policy", _policy(e.to_record()), step.started_at))
        elif isinstance(step, RollbackStep):
            attributes["bar.rollback.target"] = step.target
        elif isinstance(step, ApplyStep):
            attributes |= {
                "bar.apply.commit": step.commit_sha,
                "bar.apply.target": step.target_branch,
                "bar.apply.mode": step.mode,
            }
        elif isinstance(step, SyncStep):
            attributes["bar.sync.onto"] = step.onto
        name = f"bar {step.kind} {step.step_id}"
        out = [
            _Spec(
                name,
                sid,
                self.span_id("task"),
                step.started_at,
                step.ended_at,
                attributes,
                status,
                events,
            )
        ]
        if isinstance(step, RunStep):
            out += self._agent_spans(step, sid)
        return out

    def _agent_spans(self, step: RunStep, parent: int) -> list[_Spec]:
        summary = stored.summary(step)
        calls = (
            _calls(stored.events(self.task, step), self.task)
            if summary is not None
            else _hook_calls(self.task, step)
        )
        if summary is None and not calls:
            return []
        agent = str((summary or {}).get("agent") or _agent_of(step) or "agent")
        aid = self.span_id("agent", step.step_id)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent,
        }
        if agent in AGENTS:  # (its models' provider: bar.agents.base.Agent.otel_provider)
            attributes["gen_ai.provider.name"] = of(agent).otel_provider
        if summary is not None:
            model = summary.get("model")
            if isinstance(model, str) and model:
                attributes["gen_ai.request.model"] = model
                attributes["gen_ai.response.model"] = model
            session_id = summary.get("session_id")
            if isinstance(session_id, str) and session_id:
                attributes["gen_ai.conversation.id"] = session_id
            version = summary.get("agent_version")
            if isinstance(version, str) and version:
                attributes["gen_ai.agent.version"] = version
            attributes |= _usage(summary)
            if isinstance(summary.get("cost_usd"), int | float):
                attributes["bar.session.cost_usd"] = float(summary["cost_usd"])
        policy = {e.tool_use_id: e for e in step.policy_events if e.tool_use_id}
        out = [
            _Spec(
                f"invoke_agent {agent}",
                aid,
                parent,
                step.started_at,
                step.ended_at,
                attributes,
            )
        ]
        for n, call in enumerate(calls, 1):
            out.append(self._tool_span(step, aid, n, call, policy.get(call.call_id or "")))
        return out

    def _tool_span(self, step: RunStep, parent: int, n: int, call: _Call, decided: Any) -> _Spec:
        from opentelemetry.trace import Status, StatusCode

        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.type": "function",
        }
        if call.call_id:
            attributes["gen_ai.tool.call.id"] = call.call_id
        if call.target:
            attributes["bar.tool.target"] = call.target
        if call.checkpoint:
            attributes["bar.checkpoint"] = call.checkpoint
        if call.agent_id:
            attributes["gen_ai.agent.id"] = call.agent_id
        status = Status(StatusCode.ERROR, "the tool failed") if call.failed else None
        events = []
        if decided is not None:
            events.append(("bar.policy", _policy(decided.to_record()), call.started))
        return _Spec(
            f"execute_tool {call.name}",
            self.span_id("tool", step.step_id, call.call_id or str(n)),
            parent,
            call.started or step.started_at,
            call.ended or call.started or step.ended_at,
            attributes,
            status,
            events,
        )

    def build(self, specs: list[_Spec]) -> list[ReadableSpan]:
        """The spans, every string in them scrubbed (in one pass over them all)."""
        from opentelemetry.sdk.trace import Event as SpanEvent
        from opentelemetry.sdk.trace import ReadableSpan
        from opentelemetry.trace import SpanContext, TraceFlags

        def context(of: int) -> SpanContext:
            return SpanContext(
                self.trace, of, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED)
            )

        texts: list[Any] = [[s.name, s.attributes, [[e[0], e[1]] for e in s.events]] for s in specs]
        clean: list[Any] = self.scrub.scrub_obj(texts)
        out = []
        for spec, (name, attributes, events) in zip(specs, clean, strict=True):
            t0 = _ns(spec.start)
            t1 = max(_ns(spec.end), t0)
            kept = [
                SpanEvent(what, attrs, _ns(at) if at else t0)
                for (what, attrs), (_, _, at) in zip(events, spec.events, strict=True)
            ]
            kwargs: dict[str, Any] = {}
            if spec.status is not None:
                kwargs["status"] = spec.status
            out.append(
                ReadableSpan(
                    name=name,
                    context=context(spec.span_id),
                    parent=context(spec.parent) if spec.parent is not None else None,
                    resource=self.resource,
                    attributes=attributes,
                    events=kept,
                    instrumentation_scope=self.scope,
                    start_time=t0,
                    end_time=t1,
                    **kwargs,
                )
            )
        return out


class _Call:
    """One tool call, from the session's events or from a checkpoint."""

    __slots__ = (
        "agent_id",
        "call_id",
        "checkpoint",
        "ended",
        "failed",
        "name",
        "started",
        "target",
    )

    def __init__(self, call_id: str | None, name: str, started: str | None) -> None:
        self.call_id = call_id
        self.name = name
        self.started = started
        self.ended: str | None = None
        self.failed = False
        self.target = ""
        self.checkpoint: str | None = None
        self.agent_id: str | None = None


def _calls(events: list[Event], task: Task) -> list[_Call]:
    out: list[_Call] = []
    by_id: dict[str, _Call] = {}
    root = str(task.worktree)
    for e in events:
        if e.get("type") == "tool_call":
            call = _Call(_str(e.get("id")), str(e.get("name") or "tool"), _str(e.get("at")))
            call.target = call_target(e.get("input"), root)
            call.checkpoint = _str(e.get("checkpoint"))
            call.agent_id = _str(e.get("agent_id"))
            out.append(call)
            if call.call_id:
                by_id[call.call_id] = call
        elif e.get("type") == "tool_result":
            found = by_id.get(str(e.get("id") or ""))
            if found is not None:
                found.ended = _str(e.get("at"))
                found.failed = e.get("ok") is False
    return out


def _hook_calls(task: Task, step: RunStep) -> list[_Call]:
    """The tool calls an agent's hook reported, where no session was kept."""
    if not step.checkpoints:
        return []
    out = []
    for cp in checkpoints.read(task, step.step_id):
        if cp.kind != "tool":
            continue
        call = _Call(cp.call_id, cp.tool or "tool", cp.started_at)
        call.ended = cp.ended_at
        call.target = cp.target_text
        call.checkpoint = cp.name
        call.agent_id = cp.agent_id
        call.failed = cp.outcome == "failed"
        out.append(call)
    return out


def _agent_of(step: RunStep) -> str | None:
    agent = step.extra.get("agent")
    if isinstance(agent, dict):
        name = agent.get("name")
        return name if isinstance(name, str) else None
    return agent if isinstance(agent, str) else None


def _usage(summary: dict[str, Any]) -> dict[str, int]:
    def count(key: str) -> int:
        value = summary.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    cached, written = count("cache_read_tokens"), count("cache_write_tokens")
    out = {
        "gen_ai.usage.input_tokens": count("input_tokens") + cached + written,
        "gen_ai.usage.output_tokens": count("output_tokens"),
        "gen_ai.usage.cache_read.input_tokens": cached,
    }
    if written:
        out["gen_ai.usage.cache_creation.input_tokens"] = written
    return out


def _policy(rec: dict[str, Any]) -> dict[str, Any]:
    """A policy decision as a span event's attributes (``bar.policy.*``)."""
    return {f"bar.policy.{k}": v for k, v in rec.items() if isinstance(v, str | int | bool)}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _ns(at: str) -> int:
    try:
        return round(seconds_of(at) * 1_000_000_000)
    except (ValueError, TypeError):
        return 0


# --- OTLP JSON ------------------------------------------------------------------------


def otlp_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """The spans as one OTLP/JSON export request (``ExportTraceServiceRequest``), as the
    OTLP specification encodes it: lowerCamelCase keys, enums as numbers, and trace and
    span ids in hex (not protobuf's base64)."""
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    data = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    for resource in data.get("resourceSpans", []):
        for scope in resource.get("scopeSpans", []):
            for span in scope.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
                for link in span.get("links", []):
                    for key in ("traceId", "spanId"):
                        if key in link:
                            link[key] = base64.b64decode(link[key]).hex()
    return data
