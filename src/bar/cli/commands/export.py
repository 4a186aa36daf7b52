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
