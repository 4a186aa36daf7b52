"""``bar doctor [--repair] [--verbose] [--json]``.

Exits 0 when nothing remains, ``ExitCode.CORRUPT`` (8) while a problem remains: check-only,
any error found; with ``--repair``, any error it could not repair or whose repair failed.
The text and the JSON say the same: ``ok``, ``remaining`` and ``exit_code``. Findings
alike (the same problem in many files) are one line of the text with how many and one of
them (``api.doctor_groups``); ``--verbose`` and the JSON list each.
"""

from __future__ import annotations

from bar import api
from bar.cli.render import Painter, print_json
from bar.errors import BarError, ExitCode
from bar.project.doctor import Finding, Group


def doctor(*, repair: bool, as_json: bool, verbose: bool = False) -> int:
    project = api.locate().project
    doc = api.doctor(project, repair=repair)
    remaining = doc.remaining
    code = ExitCode.CORRUPT if remaining else ExitCode.OK
    if as_json:
        print_json(
            {
                "project": project.name,
                "findings": [f.to_json() for f in doc.findings],
                "ok": not remaining,
                "remaining": [f.to_json() for f in remaining],
                "exit_code": code,
            }
        )
        return code
    try:
        paint = Painter(project.config.output.color)
    except BarError:  # a broken config.yaml is one of the findings
        paint = Painter()
    if not doc.findings:
        print(f"{project.name}: everything checks out")
        return code
    shown: list[Finding | Group] = list(doc.findings) if verbose else api.doctor_groups(doc)
    for item in shown:
        f = item.first if isinstance(item, Group) else item
        label = paint(f.severity, "red" if f.severity == "error" else "yellow")
        if isinstance(item, Group):
            print(f"{label}: {len(item.findings)} paths under {item.under}: {f.message}")
            print(f"  e.g. {f.where} (`bar doctor --verbose` lists every one)")
        else:
            print(f"{label}: {f.where}: {f.message}")
        if f.repaired:
            print(paint(f"  repaired: {f.repaired}", "green"))
        elif f.repair_error:
            print(paint(f"  repair failed: {f.repair_error}", "red"))
        elif f.repair is not None and not repair:
            print("  repairable: run `bar doctor --repair`")
        if f.hint and not f.repaired:
            print(f"  hint: {f.hint}")
    for f in doc.still:
        if f in remaining:
            print(
                paint(
                    f"{f.severity}: {f.where}: {f.message} (still there after the repairs)", "red"
                )
            )
    fixed = sum(1 for f in doc.findings if f.repaired)
    print(f"{len(doc.findings)} problem(s) found" + (f", {fixed} repaired" if repair else ""))
    if remaining:
        print(paint(f"{len(remaining)} problem(s) remain", "red"))
    return code
