"""``bar export --format atif|otel|agent-trace [--step N] [-o FILE]``: a task's record
for other tools.

The documents are made by ``bar.api`` (``export_atif``, ``export_otel``,
``export_trace``); this writes them, to standard output or to FILE (whole or not at all:
a reader never finds half a document).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bar import api
from bar.base.notices import plural
from bar.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from bar.cli.parser import Commands


# --- the command line ------------------------------------------------------------------


def options(sub: Commands) -> None:
    """The command line of ``bar export``: its options and help."""
    from bar.cli.parser import Formatter, task_opt

    p = sub.add_parser(
        "export",
        formatter_class=Formatter,
        description="Write what a task's record holds in a format other tools read.\n\n"
        "atif: the task's agent sessions as one ATIF trajectory (the Agent Trajectory\n"
        "Interchange Format of the Harbor project, ATIF-v1.7), JSON: bar's own steps\n"
        "each run an agent session, embedded as a trajectory of its own with its\n"
        "messages, tool calls and their results, tokens and cost per answer, and its\n"
        "subagents. --step N writes that step's session alone.\n\n"
        "otel: the task's steps, agent sessions and tool calls as OpenTelemetry spans\n"
        "(GenAI semantic conventions: invoke_agent, execute_tool, gen_ai.usage.*,\n"
        "process.exit.code; policy decisions as span events), one OTLP/JSON request any\n"
        "collector takes (POST it to /v1/traces). Needs bar[otel]. To send every step as\n"
        "it is recorded, set telemetry.otlp_endpoint in config.yaml (or the standard\n"
        "OTEL_EXPORTER_OTLP_ENDPOINT): see docs/sharing.md.\n\n"
        "agent-trace: which lines of which files the task's steps wrote, and who wrote\n"
        "them, as Agent Trace records (the open RFC of github.com/cursor/agent-trace,\n"
        "spec 0.1.0), JSON Lines, one record per commit: each bar apply whose commit is\n"
        "in the repository, and the last recorded state if no apply landed it. A tool\n"
        'call of an agent, or a step that ran one, is contributor "ai" with its model;\n'
        'a hand edit "human"; any other command "unknown". Records say version "0.1",\n'
        "the form the published schema accepts (its pattern is MAJOR.MINOR).\n\n"
        "Every format is scrubbed of the secrets bar knows, as the record is.",
        epilog="examples:\n"
        "  bar export --format atif -o trajectory.json\n"
        "  bar export --format atif --step 3 | jq .final_metrics\n"
        "  bar export --format otel -o spans.json\n"
        "  curl -H 'Content-Type: application/json' --data @spans.json \\\n"
        "      http://127.0.0.1:4318/v1/traces\n"
        "  bar export --format agent-trace --task fix-login | jq .files",
    )
    p.add_argument(
        "--format",
        dest="format",
        required=True,
        choices=("atif", "otel", "agent-trace"),
        help="the format to write: atif, otel or agent-trace",
    )
    task_opt(p)
    p.add_argument(
        "--step",
        metavar="N",
        help="atif, otel: that step alone (atif: its agent session)",
    )
    p.add_argument(
        "--output", "-o", metavar="FILE", help="write to FILE (default: standard output)"
    )
    p.set_defaults(_run=export)


# --- the command -----------------------------------------------------------------------


def export(*, format: str, task: str | None, step: str | None, output: str | None) -> int:
    the_task = api.get_task(api.open_project(), task)
    if format == "agent-trace":
        if step is not None:
            raise UsageError(
                "--step goes with --format atif or otel",
                hint="Agent Trace records are per commit: bar export --format agent-trace",
            )
        return _agent_trace(the_task, output)
    if format == "atif":
        doc = api.export_atif(the_task, step)
        what = "an ATIF trajectory"
        count = plural(len(doc.get("subagent_trajectories") or [doc]), "agent session")
    else:
        doc = api.export_otel(the_task, step)
        what = "OTLP/JSON"
        spans = sum(
            len(s.get("spans", []))
            for r in doc.get("resourceSpans", [])
            for s in r.get("scopeSpans", [])
        )
        count = plural(spans, "span")
    text = json.dumps(doc, ensure_ascii=False, indent=2) + "\n"
    if output is None:
        sys.stdout.write(text)
        return 0
    _write(Path(output), text)
    print(f"Wrote {what} ({count}) of task {the_task.name} to {output}")
    return 0


def _agent_trace(the_task: api.Task, output: str | None) -> int:
    records = api.export_trace(the_task)
    text = "".join(r.to_line() for r in records)
    if not records:
        print(
            f"bar: task {the_task.name} ({the_task.id}) wrote no lines of text yet: "
            "no record to export",
            file=sys.stderr,
        )
    if output is None:
        sys.stdout.write(text)
        return 0
    _write(Path(output), text)
    files = len({f.path for r in records for f in r.files})
    print(
        f"Wrote {plural(len(records), 'Agent Trace record')} ({plural(files, 'file')}) "
        f"of task {the_task.name} to {output}"
    )
    return 0


def _write(path: Path, text: str) -> None:
    """Write beside the file, then move it in place: an old export stays whole until the
    new one is."""
    part = path.with_name(f".{path.name}.part")
    part.write_text(text, encoding="utf-8")
    part.replace(path)
