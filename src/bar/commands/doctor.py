"""``bar doctor [--repair] [--json]``."""

from __future__ import annotations

import argparse

from bar.doctor import Doctor
from bar.errors import ExitCode
from bar.project import locate
from bar.render import Painter, print_json


def doctor(args: argparse.Namespace) -> int:
    from bar.errors import NotInitialized

    project = locate().project
    if not project.dir.is_dir():
        raise NotInitialized(
            f"{project.root} is not registered with bar", hint="run `bar init` first"
        )
    doc = Doctor(project)
    findings = doc.check()
    if args.repair:
        doc.repair()
    remaining = [f for f in findings if f.severity == "error" and not f.repaired]
    if args.json:
        print_json({"project": project.name, "findings": [f.to_json() for f in findings],
                    "ok": not remaining})  # fmt: skip
        return ExitCode.CORRUPT if remaining else ExitCode.OK
    paint = Painter()
    if not findings:
        print(f"{project.name}: everything checks out")
        return ExitCode.OK
    for f in findings:
        label = paint(f.severity, "red" if f.severity == "error" else "yellow")
        print(f"{label}: {f.where}: {f.message}")
        if f.repaired:
            print(paint(f"  repaired: {f.repaired}", "green"))
        elif f.repair_error:
            print(paint(f"  repair failed: {f.repair_error}", "red"))
        elif f.repair is not None and not args.repair:
            print("  repairable: run `bar doctor --repair`")
    fixed = sum(1 for f in findings if f.repaired)
    print(f"{len(findings)} problem(s) found" + (f", {fixed} repaired" if args.repair else ""))
    return ExitCode.CORRUPT if remaining else ExitCode.OK
