"""OpenTelemetry spans of a task (``bar.formats.otel``) and their live export
(``bar.history.telemetry``, ``bar.formats.sender``).

``bar export --format otel`` is read back with the OpenTelemetry project's own protobuf
classes (``opentelemetry-proto``: an OTLP/JSON request parsed into
``ExportTraceServiceRequest``); live export is received by a real OTLP/HTTP receiver on
loopback (tests/support/otlp_receiver.py) that parses what the SDK's exporter sent. The
spans are checked against what bar recorded, with the GenAI semantic conventions'
names."""

from __future__ import annotations

import base64
import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    bar,
    ledger,
    new_task,
    project_dir,
    run_sh,
    run_writer,
    set_config,
    worktree,
)

pytest.importorskip("opentelemetry.sdk")
from google.protobuf.json_format import ParseDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)
from otlp_receiver import receiving

MODEL = "claude-sonnet-4-5"
SECRET = "s3cr3t-value-of-the-api-key-7788"
SCRIPT: list[dict[str, Any]] = [
    {"prompt": "Add a discount"},
    {"write": "discount.py", "text": "RATE = 0.1\n"},
    {"tool": "Bash", "input": {"command": "false"}, "result": "exit 1", "ok": False},
    {"say": "Done."},
]


def parsed(doc: dict[str, Any]) -> ExportTraceServiceRequest:
    """OTLP/JSON read back into the protobuf message: ids from hex (the OTLP/JSON
    encoding) to the bytes protobuf's own JSON mapping takes as base64."""
    doc = json.loads(json.dumps(doc))
    for resource in doc["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        raw = bytes.fromhex(span[key])
                        assert len(raw) == (16 if key == "traceId" else 8)
                        span[key] = base64.b64encode(raw).decode()
    return ParseDict(doc, ExportTraceServiceRequest())


def spans_of(request: ExportTraceServiceRequest) -> list[Any]:
    return [s for r in request.resource_spans for sc in r.scope_spans for s in sc.spans]


def attrs(span: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in span.attributes:
        which = kv.value.WhichOneof("value")
        value = getattr(kv.value, which)
        out[kv.key] = (
            [getattr(v, v.WhichOneof("value")) for v in value.values]
            if which == "array_value"
            else value
        )
    return out


@pytest.fixture
def task_with_agent(
    inited: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    """A task (the policy on): a plain step, a blocked one, an agent session."""
    monkeypatch.setenv("MY_API_KEY", SECRET)
    t = new_task(capfd)
    run_sh(capfd, f"echo {SECRET} > /dev/null; echo plain > plain.txt")
    assert bar(capfd, "run", "--", "sh", "-c", "rm -rf /").code == 126
    run_writer(worktree(t), tmp_path, SCRIPT)
    return t


def test_export_is_one_otlp_request_after_the_genai_conventions(
    task_with_agent: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    res = bar(capfd, "export", "--format", "otel")
    assert res.code == 0, res.err
    assert SECRET not in res.out
    spans = spans_of(parsed(json.loads(res.out)))
    steps = ledger(task_with_agent["id"])
    assert len({s.trace_id for s in spans}) == 1  # one trace per task
    by_name = {s.name: s for s in spans}
    task_span = by_name["bar task t1"]
    assert task_span.parent_span_id == b""
    # a span per step, each a child of the task's
    for step in steps:
        span = by_name[f"bar run {step['step_id']}"]
        a = attrs(span)
        assert span.parent_span_id == task_span.span_id
        assert a["process.exit.code"] == step["exit_code"]
        assert a["process.command_args"] == step["cmd"]
        assert a["bar.diff.files"] == step["diff_stat"]["files"]
    blocked = by_name["bar run 0002"]
    assert blocked.status.code == 2  # STATUS_CODE_ERROR
    (event,) = [e for e in blocked.events if e.name == "bar.policy"]
    assert {kv.key: kv.value.string_value for kv in event.attributes}[
        "bar.policy.action"
    ] == "block"
    # the agent's session, and its tool calls below it
    agent = by_name["invoke_agent claude"]
    a = attrs(agent)
    session = steps[2]["session"]
    assert agent.parent_span_id == by_name["bar run 0003"].span_id
    assert a["gen_ai.operation.name"] == "invoke_agent"
    assert a["gen_ai.provider.name"] == "anthropic"
    assert a["gen_ai.request.model"] == MODEL
    assert a["gen_ai.conversation.id"] == session["session_id"]
    assert a["gen_ai.usage.output_tokens"] == session["output_tokens"]
    assert a["gen_ai.usage.input_tokens"] == session["input_tokens"] + session["cache_read_tokens"]
    tools = [s for s in spans if s.name.startswith("execute_tool ")]
    assert [s.name for s in tools] == ["execute_tool Write", "execute_tool Bash"]
    write, failed = tools
    assert all(s.parent_span_id == agent.span_id for s in tools)
    assert attrs(write)["gen_ai.operation.name"] == "execute_tool"
    assert attrs(write)["bar.checkpoint"] == "0003.1"
    assert attrs(write)["gen_ai.tool.call.id"]
    assert failed.status.code == 2 and write.status.code != 2


def test_one_step_and_the_sdks_in_memory_exporter(
    task_with_agent: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from bar import api
    from bar.formats import otel

    res = bar(capfd, "export", "--format", "otel", "--step", "3")
    assert res.code == 0, res.err
    names = sorted(s.name for s in spans_of(parsed(json.loads(res.out))))
    assert names == [
        "bar run 0003",
        "execute_tool Bash",
        "execute_tool Write",
        "invoke_agent claude",
    ]
    task = api.get_task(api.open_project(), task_with_agent["id"])
    memory = InMemorySpanExporter()
    memory.export(otel.task_spans(task))
    finished = memory.get_finished_spans()
    assert len(finished) == 1 + 3 + 1 + 2  # the task, three steps, the session, two tools
    again = {s.context.span_id for s in otel.task_spans(task)}
    assert {s.context.span_id for s in finished} == again  # ids are the same every time


def test_live_export_sends_each_step_as_it_is_recorded(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    with receiving() as collector:
        set_config(telemetry={"otlp_endpoint": collector.url})
        t = new_task(capfd)
        for n in range(3):
            run_sh(capfd, f"echo {n} > f{n}.txt")

        def three(c: Any) -> bool:
            return {s.name for s in c.spans()} >= {"bar run 0001", "bar run 0002", "bar run 0003"}

        collector.wait_for(three)
        res = bar(capfd, "export", "--format", "otel")
        # the task's own span goes when the task is closed: it spans the task's life
        assert bar(capfd, "task", "close", "--force").code == 0
        collector.wait_for(lambda c: "bar task t1" in {s.name for s in c.spans()})
        live = {s.name: s for s in collector.spans()}
    exported = {s.name: s for s in spans_of(parsed(json.loads(res.out)))}
    assert live["bar task t1"].span_id == exported["bar task t1"].span_id
    assert live["bar task t1"].end_time_unix_nano >= live["bar run 0003"].end_time_unix_nano
    for name in ("bar run 0001", "bar run 0002", "bar run 0003"):
        # the same span, sent live and exported later: one span to a backend
        assert live[name].span_id == exported[name].span_id
        assert live[name].parent_span_id == exported["bar task t1"].span_id
        assert attrs(live[name])["bar.task.id"] == t["id"]
    assert not (project_dir() / "telemetry" / "dropped").exists()


def test_an_endpoint_that_refuses_never_fails_a_step_and_doctor_says_so(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    with receiving(answer=400) as collector:
        set_config(telemetry={"otlp_endpoint": collector.url})
        new_task(capfd)
        run_sh(capfd, "echo 1 > a.txt")  # exits 0 whatever the collector says
        collector.wait_for(lambda c: c.refused >= 3)  # (ATTEMPTS)
        dropped = project_dir() / "telemetry" / "dropped"
        collector.wait_for(lambda c: dropped.exists(), bound=30)
    res = bar(capfd, "doctor")
    assert "1 step not sent as OpenTelemetry spans" in res.out + res.err
    assert bar(capfd, "doctor", "--repair").code == 0
    assert not dropped.exists()


def test_an_endpoint_nobody_listens_on_costs_the_step_nothing(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # (closed again: nobody listens there)
    set_config(telemetry={"otlp_endpoint": f"http://127.0.0.1:{port}"})
    new_task(capfd)
    res = bar(capfd, "run", "--", "sh", "-c", "echo 1 > a.txt")
    assert res.code == 0 and "telemetry" not in res.err


def test_the_standard_variable_is_enough(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with receiving() as collector:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url)
        new_task(capfd)
        run_sh(capfd, "echo 1 > a.txt")
        collector.wait_for(lambda c: "bar run 0001" in {s.name for s in c.spans()})


@pytest.mark.parametrize(
    "value, said",
    [
        ("127.0.0.1:4318", "must be an http:// or https:// URL"),
        ("http://user:pw@127.0.0.1:4318", "a secret does not belong in a file"),
    ],
)
def test_a_bad_endpoint_setting_is_refused(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], value: str, said: str
) -> None:
    set_config(telemetry={"otlp_endpoint": value})
    res = bar(capfd, "status")
    assert res.code == 8 and said in res.err


def test_without_the_sdk_the_export_says_how_to_install_it(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    new_task(capfd)
    run_sh(capfd, "true")
    code = (
        "import sys; sys.modules['opentelemetry.sdk.trace'] = None\n"
        "from bar.cli.main import main; sys.exit(main(['export', '--format', 'otel']))"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 1, res.stderr
    assert "OpenTelemetry export needs the SDK" in res.stderr
    assert "pip install 'bar[otel]'" in res.stderr


def test_every_convention_name_is_the_semantic_conventions_own(
    task_with_agent: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    """Every ``gen_ai.*`` and ``process.*`` attribute bar sends, and the values of the
    enumerated ones, are named in the OpenTelemetry semantic conventions package (the
    names the SDK itself ships); bar's own attributes are under ``bar.``."""
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
    from opentelemetry.semconv._incubating.attributes import process_attributes as process

    known = {
        v
        for m in (gen_ai, process)
        for k, v in vars(m).items()
        if k.isupper() and isinstance(v, str)
    }
    res = bar(capfd, "export", "--format", "otel")
    spans = spans_of(parsed(json.loads(res.out)))
    seen: set[str] = set()
    for span in spans:
        a = attrs(span)
        seen |= set(a)
        for key in a:
            assert key.startswith("bar.") or key in known, key
        if "gen_ai.operation.name" in a:
            assert a["gen_ai.operation.name"] in {v.value for v in gen_ai.GenAiOperationNameValues}
        if "gen_ai.provider.name" in a:
            assert a["gen_ai.provider.name"] in {v.value for v in gen_ai.GenAiProviderNameValues}
        if "gen_ai.tool.type" in a:
            assert a["gen_ai.tool.type"] in ("function", "extension", "datastore")
    assert {"gen_ai.usage.input_tokens", "gen_ai.tool.call.id", "process.exit.code"} <= seen
