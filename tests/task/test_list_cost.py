"""``bar task list`` says what each task's agents cost once their models are priced
(``agents.prices``): a column of its own, and ``cost_usd`` in ``--json``."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import bar, new_task, run_fake_agent, set_config, worktree


def test_the_list_shows_what_the_agents_cost(
    inited: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    set_config(policy={"enabled": False})
    plain = new_task(capfd, "plain")
    assert bar(capfd, "run", "--", "true").code == 0
    listed = bar(capfd, "task", "list").out
    assert "$" not in listed  # no cost known: no column
    assert [t["cost_usd"] for t in bar(capfd, "task", "list", "--json").json()] == [None]

    priced = new_task(capfd, "priced")
    set_config(agents={"prices": {"claude-*": {"input": 3, "output": 15, "cache_read": 0.3}}})
    run_fake_agent("claude", worktree(priced), tmp_path, "go", "echo a > a.txt")
    run_fake_agent("claude", worktree(priced), tmp_path, "again", "echo b > b.txt")
    rows = {t["name"]: t for t in bar(capfd, "task", "list", "--json").json()}
    # two answers a session (a tool call, then words) of 100 in, 20 out, 1000 cached:
    # 2 sessions x 2 x (100 x 3 + 20 x 15 + 1000 x 0.3) / 1e6
    assert rows["priced"]["cost_usd"] == pytest.approx(0.0036)
    assert rows["plain"]["cost_usd"] is None
    shown = bar(capfd, "task", "show", "priced", "--json").json()
    assert shown["cost_usd"] == pytest.approx(shown["session_totals"]["cost_usd"])
    out = bar(capfd, "task", "list").out.splitlines()
    lines = {name: next(x for x in out if f" {name} " in x) for name in ("plain", "priced")}
    assert "$0.0036" in lines["priced"] and "$" not in lines["plain"]
    # the column is as wide in every row: the changes start at one place
    assert lines["priced"].index("file") == lines["plain"].index("file")
    assert plain["id"] in lines["plain"]
