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

TYPE_CHECKING = False
if TYPE_CHECKING:
    from bar.cli.parser import Commands


# --- the command line ------------------------------------------------------------------


def options(sub: Commands) -> None:
    """The command line of ``bar doctor``: its options and help."""
    from bar.cli.parser import Formatter, json_opt

    p = sub.add_parser(
        "doctor",
        formatter_class=Formatter,
        description="Check the project's files, the policy file, every task's ledger, journals,\n"
        "artifacts, snapshot ref, side index, worktree and permissions. --repair fixes what\n"
        "can be fixed without losing anything: unreadable ledger lines are moved to\n"
        "ledger.jsonl.corrupt, interrupted steps are recorded, a journal too garbled to\n"
        "finish is moved aside (<name>.corrupt), a stale git lock on the snapshot ref is\n"
        "removed, a garbled side index is rebuilt, a missing worktree is recreated at its\n"
        "last recorded state. Refs under refs/bar/ of a task that no project has (left by\n"
        "an older bar's `task delete`) are a warning; --repair deletes them. So is a\n"
        "failed packing of the loose objects steps leave (pack.log); --repair packs them.\n"
        "The policy file is yours: a broken one is reported, never rewritten. On a\n"
        "terminal, it says on stderr which task it is checking. The same problem in\n"
        "many files is one line, with how many and one of them (--verbose, --json: each).\n"
        "Permissions: bar's files are 0600, its directories 0700; in a task's agent homes\n"
        "the agents choose their files' modes, and what matters is that the homes are\n"
        "0700 (no one else reaches them) and the credentials bar copies in 0600.\n\n"
        "exit status:\n"
        "  0    nothing remains (warnings alone do not count)\n"
        "  8    a problem remains: check-only, an error was found; with --repair, an error\n"
        '       it could not repair, or a repair that failed (--json: "ok": false and\n'
        '       the problems under "remaining")',
        epilog="examples:\n"
        "  bar doctor                 check; change nothing\n"
        "  bar doctor --repair        fix what can be fixed without loss\n"
        "  bar doctor --verbose       every finding on its own line\n"
        "  bar doctor --json          the problems as fields",
    )
    p.add_argument("--repair", action="store_true", help="fix what can be fixed without loss")
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="list every finding (the same problem in many files is one line otherwise)",
    )
    json_opt(p)
    p.set_defaults(_run=doctor)


# --- the command -----------------------------------------------------------------------


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
