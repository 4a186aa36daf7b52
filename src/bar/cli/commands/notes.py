"""``bar notes export [--rev REV]`` and ``bar notes import [--ref REF]``: git-ai notes."""

from __future__ import annotations

from bar import api
from bar.base.notices import plural
from bar.cli.render import print_json, visible


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
