"""``bar notes export [--rev REV]`` and ``bar notes import [--ref REF]``: git-ai notes."""

from __future__ import annotations

from bar import api
from bar.base.notices import plural
from bar.cli.render import print_json, visible

TYPE_CHECKING = False
if TYPE_CHECKING:
    from bar.cli.parser import Commands


# --- the command line ------------------------------------------------------------------


def options(sub: Commands) -> None:
    """The command line of ``bar notes``: its options and help."""
    from bar.cli.parser import Formatter, json_opt, task_opt

    notes = sub.add_parser(
        "notes",
        formatter_class=Formatter,
        description="Write and read which lines of a commit an agent wrote, as git notes in\n"
        "the git-ai authorship format (authorship/3.0.0, under refs/notes/ai), so tools\n"
        "that read git-ai's notes see bar's agents, and bar blame --rev sees theirs.",
    )
    nsub = notes.add_subparsers(dest="notes_command", metavar="ACTION")
    notes.set_defaults(_help=notes)
    p = nsub.add_parser(
        "export",
        help="write a note on each commit bar apply made",
        formatter_class=Formatter,
        description="Write a git-ai authorship note on each commit a bar apply made (in REV's\n"
        "history, with --rev): for each line the commit added, the agent session and\n"
        "the step or tool call that wrote it (an s_ key, with the agent, its session id\n"
        "and model in the note's metadata), or, for a hand edit bar recorded, you as a\n"
        "known human (h_). Lines of other commands are left unattested. A note another\n"
        "tool wrote on the commit is kept unless --force. Notes travel with\n"
        "git push origin refs/notes/ai.",
        epilog="examples:\n"
        "  bar notes export                     every applied commit of every task\n"
        "  bar notes export --rev main          those in main's history\n"
        "  git notes --ref ai show HEAD         what a note says\n"
        "  git push origin refs/notes/ai        share them",
    )
    p.add_argument("--rev", metavar="REV", help="only commits in REV's history")
    task_opt(p)
    p.add_argument("--force", action="store_true", help="replace notes other tools wrote")
    json_opt(p)
    p.set_defaults(_run=export_notes)
    p = nsub.add_parser(
        "import",
        help="read git-ai notes for bar blame --rev",
        formatter_class=Formatter,
        description="Read every note of a notes ref (default refs/notes/ai) and check it\n"
        "against the git-ai standard; bar blame --rev then names, for a line no task here\n"
        "wrote, the agent, model and session (or the human) the commit's note gives. A\n"
        "note that fails the check is reported with its commit, and left out. Import\n"
        "again after new notes arrive.",
        epilog="examples:\n"
        "  git fetch origin refs/notes/ai:refs/notes/ai && bar notes import\n"
        "  bar notes import --ref refs/notes/team-ai\n"
        "  bar blame --rev main src/app.py",
    )
    p.add_argument("--ref", metavar="REF", help="the notes ref to read (default: refs/notes/ai)")
    json_opt(p)
    p.set_defaults(_run=import_notes)


# --- the command -----------------------------------------------------------------------


def export_notes(*, rev: str | None, task: str | None, force: bool, as_json: bool) -> int:
    loc = api.open_project()
    tasks = [api.get_task(loc, task)] if task is not None else None
    done = api.export_notes(loc.project, tasks, rev, force=force)
    if as_json:
        print_json(done.to_json())
        return 0
    if not (done.written or done.unchanged or done.kept):
        where = f" in {rev}'s history" if rev else ""
        print(f"No applied commit{where} has lines an agent or a hand edit wrote: no note to write")
        return 0
    for commit in done.written:
        print(f"noted  {commit[:12]}")
    for commit in done.kept:
        print(f"kept   {commit[:12]}  (another tool's note: --force replaces it)")
    print(
        f"Wrote {plural(len(done.written), 'note')} ({plural(done.lines, 'line')}) under "
        f"refs/notes/ai; {len(done.unchanged)} unchanged"
        + (f", {len(done.kept)} kept" if done.kept else "")
    )
    if done.written:
        print("Share them: git push origin refs/notes/ai")
    return 0


def import_notes(*, ref: str | None, as_json: bool) -> int:
    done = api.import_notes(api.open_project().project, ref)
    if as_json:
        print_json(done.to_json())
        return 0
    for bad in done.invalid:
        print(f"skipped {bad['commit'][:12]}: {visible(bad['why'])}")
    tools = ", ".join(f"{visible(tool)} {n}" for tool, n in sorted(done.tools.items()))
    print(
        f"Read {plural(done.notes, 'note')} from {done.ref}: {plural(done.lines, 'line')}"
        + (f" ({tools})" if tools else "")
        + (f"; {len(done.invalid)} not of the git-ai standard" if done.invalid else "")
    )
    if done.notes:
        print("bar blame --rev REV FILE now names them")
    return 1 if done.invalid and not done.notes else 0
