"""``bar export --format agent-trace [-o FILE]``: a task's attribution for other tools.

The records are made by ``api.export_trace``; this writes them as JSON Lines, to
standard output or to FILE (whole or not at all: a reader never finds half a record).
"""

from __future__ import annotations

import sys
from pathlib import Path

from bar import api
from bar.base.notices import plural


def export(*, format: str, task: str | None, output: str | None) -> int:
    the_task = api.get_task(api.open_project(), task)
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
