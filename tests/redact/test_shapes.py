"""Secrets that are not tokens (docs/internals/redact.md): an option's value, a password glued
to ``-p``, a secret-named assignment in a script, a password in a URL. Each is planted in
every channel a step has (its command line, split and in one word, a script, its output,
the task's description, the commit message of apply) and searched for on disk as raw
bytes, as ``test_secrets_planted`` does for tokens."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import bar_exe, ledger, task_dir
from test_planted import assert_nowhere

from conftest import git

OPTION = "plantedOptionValue1"
SPLIT = "plantedSplitOption2"
GLUED = "plantedGluedPassword3"
ASSIGNED = "plantedAssignment4"
EXPORTED = "plantedExported5"
IN_URL = "plantedUrlPassword6"
PRINTED = "plantedPrinted7"
DESCRIBED = "plantedDescribed8"
MESSAGE = "plantedMessage9"
ALL = [OPTION, SPLIT, GLUED, ASSIGNED, EXPORTED, IN_URL, PRINTED, DESCRIBED, MESSAGE]


@pytest.fixture
def task(repo: Path) -> dict[str, str]:
    assert bar_exe("init", cwd=repo).code == 0
    git(repo, "add", ".bar")
    git(repo, "commit", "-qm", "bar policy")
    res = bar_exe(
        "task", "new", "shapes", "-d", f"deploy with password={DESCRIBED}", "--json", cwd=repo
    )
    assert res.code == 0, res.err
    data: dict[str, str] = res.json()
    assert data["metadata"]["description"] == "deploy with password=***"  # type: ignore[index]
    return data


def test_secrets_that_are_not_tokens_never_reach_disk(repo: Path, task: dict[str, str]) -> None:
    script = (
        f"API_KEY={ASSIGNED} true; export DB_PASSWORD='{EXPORTED}'; "
        f"mysql -uroot -p{GLUED} -e 'select 1' 2>/dev/null; "
        f"echo fetching https://deploy:{IN_URL}@example.invalid/x; "
        f"echo login --password={PRINTED}; echo work > work.txt"
    )
    res = bar_exe("run", "--", "sh", "-c", script, "--token", SPLIT, f"--secret={OPTION}", cwd=repo)
    assert res.code == 0, res.err
    (step,) = ledger(task["id"])
    cmd = step["cmd"]
    assert cmd[3:] == ["--token", "***", "--secret=***"]
    for shown in ("API_KEY=*** true", "DB_PASSWORD='***'", "-p*** -e", "deploy:***@"):
        assert shown in cmd[2], cmd[2]
    out = (task_dir(task["id"]) / step["artifacts"]["output"]).read_text()
    assert "https://deploy:***@example.invalid/x" in out and "--password=***" in out
    assert bar_exe("apply", "-m", f"ship it, token={MESSAGE}", cwd=repo).code == 0
    assert "token=***" in git(repo, "log", "-1", "--format=%B", "main")
    assert_nowhere(repo, ALL, "after run and apply")


@pytest.mark.parametrize(
    "argv, recorded",
    [
        (["mysql", "-uroot", "-phunter22"], ["mysql", "-uroot", "-p***"]),
        (["/usr/bin/mariadb-dump", "-psecret9", "db"], ["/usr/bin/mariadb-dump", "-p***", "db"]),
        (["cp", "-pr", "a", "b"], ["cp", "-pr", "a", "b"]),  # -p of other programs
        (
            ["tool", "--api-key", "abc", "--token-file", "f"],
            ["tool", "--api-key", "***", "--token-file", "f"],
        ),
        (["tool", "--password", "--verbose"], ["tool", "--password", "--verbose"]),
        (["python", "-c", "sorted(x, key=len)"], ["python", "-c", "sorted(x, key=len)"]),
    ],
)
def test_a_command_line_is_masked_word_by_word(
    repo: Path, task: dict[str, str], argv: list[str], recorded: list[str]
) -> None:
    bar_exe("run", "--no-sandbox", "--", *argv, cwd=repo)
    assert ledger(task["id"])[-1]["cmd"] == recorded
