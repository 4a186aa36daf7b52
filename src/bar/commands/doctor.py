"""``bar doctor [--repair] [--json]``."""

from __future__ import annotations

from bar import api
from bar.errors import ExitCode
from bar.project import locate
from bar.render import Painter, print_json


def doctor(*, repair: bool, as_json: bool) -> int:
    project = locate().project
    doc = api.doctor(project, repair=repair)
    code = ExitCode.OK if doc.ok else ExitCode.CORRUPT
    if as_json:
        print_json({"project": project.name, "findings": [f.to_json() for f in doc.findings],
                    "ok": doc.ok})  # fmt: skip
        return code
    paint = Painter()
    if not doc.findings:
        print(f"{project.name}: everything checks out")
        return code
    for f in doc.findings:
        label = paint(f.severity, "red" if f.severity == "error" else "yellow")
        print(f"{label}: {f.where}: {f.message}")
        if f.repaired:
            print(paint(f"  repaired: {f.repaired}", "green"))
        elif f.repair_error:
            print(paint(f"  repair failed: {f.repair_error}", "red"))
        elif f.repair is not None and not repair:
            print("  repairable: run `bar doctor --repair`")
    fixed = sum(1 for f in doc.findings if f.repaired)
    print(f"{len(doc.findings)} problem(s) found" + (f", {fixed} repaired" if repair else ""))
    return code
