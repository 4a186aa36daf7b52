"""How ``bar log`` and ``bar show`` say a step: the latest step by default, a command as
it was typed, a duration as a person says it, tool names as a column, and the filters
that choose which steps the log lists."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from helpers import bar, new_task, run_fake_agent, set_config, task_dir, worktree


@pytest.fixture
def task(inited: Path, capfd: pytest.CaptureFixture[str]) -> dict[str, object]:
    set_config(policy={"enabled": False})
    return new_task(capfd)


def rewrite_ledger(task_id: str, **by_step: dict[str, object]) -> None:
    """Set fields of recorded steps (``by_step``: step id -> fields), as an older day's
    steps would have them."""
    path = task_dir(task_id) / "ledger.jsonl"
    lines = []
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        rec.update(by_step.get(f"s{rec['step_id']}", {}))
        lines.append(json.dumps(rec))
    path.write_text("\n".join(lines) + "\n")


def test_show_with_no_step_shows_the_latest(
    task: dict[str, object], capfd: pytest.CaptureFixture[str]
) -> None:
    none = bar(capfd, "show")
    assert none.code == 3 and "has no steps yet" in none.err and "bar run -- CMD" in none.err
    assert bar(capfd, "run", "--", "sh", "-c", "echo first").code == 0
    assert bar(capfd, "run", "--", "sh", "-c", "echo second > b.txt").code == 0
    latest = bar(capfd, "show")
    assert latest.code == 0 and latest.out.startswith("step 0002  run")
    assert latest.out == bar(capfd, "show", "2").out
    assert bar(capfd, "show", "--json").json()["step_id"] == "0002"
    said = bar(capfd, "show", "--session")
    assert said.code == 0 and "Step 0002 kept no agent session" in said.out
    assert "bar show              the latest step" in bar(capfd, "show", "--help").out


def test_a_command_is_written_back_as_it_was_typed(
    task: dict[str, object], capfd: pytest.CaptureFixture[str]
) -> None:
    argvs = [
        ["sh", "-c", "echo 'on' > on.txt"],
        ["python3", "-c", "print('it''s')"],
        ["sh", "-c", "echo \"$HOME\" `pwd` \\ done; : 'x'"],
        ["echo", "it's loud!"],
        ["echo", "", "two words", "plain-word_1.txt"],
    ]
    for argv in argvs:
        assert bar(capfd, "run", "--", *argv).code == 0
    lines = bar(capfd, "log").out.splitlines()
    said = [re.split(r"\s{2}(?=\S)", line, maxsplit=5)[-1] for line in lines]
    assert said[0] == "sh -c \"echo 'on' > on.txt\""
    assert said[1] == "python3 -c \"print('it''s')\""
    assert said[4] == "echo '' 'two words' plain-word_1.txt"
    assert all("'\"'\"'" not in line for line in said)  # never shlex's nested quotes
    for argv, line in zip(argvs, said, strict=True):  # each gives back its words exactly
        words = subprocess.run(
            ["bash", "-c", f'for w in {line}; do printf "%s\\0" "$w"; done'],
            capture_output=True,
            check=True,
        ).stdout.split(b"\0")[:-1]
        assert [w.decode() for w in words] == argv, line
    assert "  command   sh -c \"echo 'on' > on.txt\"\n" in bar(capfd, "show", "1").out


def test_durations_are_said_as_a_person_says_them(
    task: dict[str, object], capfd: pytest.CaptureFixture[str]
) -> None:
    for n in range(4):
        assert bar(capfd, "run", "--", "sh", "-c", f"echo {n}").code == 0
    rewrite_ledger(
        str(task["id"]),
        s0001={"duration_ms": 553},
        s0002={"duration_ms": 72_000},
        s0003={"duration_ms": 7_380_000},
        s0004={"duration_ms": 9},
    )
    log = bar(capfd, "log").out.splitlines()
    assert [re.search(r"\s(\d[\d.]* [a-z]+(?: \d+ [a-z]+)?)  sh -c", line)[1] for line in log] == [
        "0.6 s",
        "1 min 12 s",
        "2 h 3 min",
        "9 ms",
    ]
    # one column, right-aligned: the commands start at one place
    assert len({line.index("sh -c") for line in log}) == 1
    assert "  duration  0.6 s\n" in bar(capfd, "show", "1").out
    assert "  duration  1 min 12 s\n" in bar(capfd, "show", "2").out


def test_tool_names_are_a_column_as_wide_as_the_longest(
    task: dict[str, object], capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run_fake_agent(
        "gemini",
        worktree(task),
        tmp_path,
        "make files",
        "echo x > f.txt",
        "write:g.txt=hello",
        "echo y > h.txt",
    )
    listed = [line for line in bar(capfd, "log", "--tools").out.splitlines() if "0001." in line]
    assert [line.split()[1] for line in listed] == [
        "run_shell_command",
        "write_file",
        "run_shell_command",
    ]
    # the stats and the targets each start at one place, whatever the tool's name
    assert len({line.index("1 file") for line in listed}) == 1
    targets = [line.index(t) for line, t in zip(listed, ("echo x", "g.txt", "echo y"), strict=True)]
    assert len(set(targets)) == 1
    shown = bar(capfd, "show", "1").out
    checkpoints = [line for line in shown.splitlines() if line.startswith("  0001.")]
    assert [c.strip() for c in checkpoints] == [c.strip() for c in listed]
    session = bar(capfd, "show", "--session").out
    calls = [line for line in session.splitlines() if line.startswith("tool ")]
    assert len(calls) == 3
    starts = [line.index(t) for line, t in zip(calls, ("echo x", "g.txt", "echo y"), strict=True)]
    assert len(set(starts)) == 1


def test_the_log_lists_the_steps_that_match_its_filters(
    task: dict[str, object], capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert bar(capfd, "run", "--", "sh", "-c", "echo a > a.txt").code == 0  # 1
    failing = "echo b > b.txt; echo '2 FAILED, 9 passed'; exit 1"
    assert bar(capfd, "run", "--", "sh", "-c", failing).code == 1  # 2
    assert bar(capfd, "run", "--", "sh", "-c", "echo all good >&2").code == 0  # 3
    assert bar(capfd, "rollback", "--to", "1").code == 0  # 4
    assert bar(capfd, "undo").code == 0  # 5: of step 0004
    run_fake_agent("claude", worktree(task), tmp_path, "hi", "echo c > c.txt")  # 6
    rewrite_ledger(
        str(task["id"]),
        s0001={"started_at": "2020-01-01T10:00:00.000Z"},
        s0002={"started_at": "2020-01-02T10:00:00.000Z"},
    )

    def ids(*args: str) -> list[str]:
        res = bar(capfd, "log", *args, "--json")
        assert res.code == 0, res.err
        listed = [s["step_id"] for s in res.json()]
        text = bar(capfd, "log", *args).out
        assert [line[:4] for line in text.splitlines() if line[:4].isdigit()] == listed
        return listed

    assert ids("--grep", "FAILED") == ["0002"]  # in the output
    assert ids("--grep", "failed") == []
    assert ids("--grep", "failed", "-i") == ["0002"]
    assert ids("--grep", "all good") == ["0003"]  # stderr too
    assert ids("--grep", r"a\.txt") == ["0001"]  # the command
    assert ids("--grep", "rollback to step 0001") == ["0004", "0005"]  # as the log says them
    assert ids("--kind", "rollback") == ["0004", "0005"]
    assert ids("--kind", "rollback", "--kind", "run", "-n", "2") == ["0005", "0006"]
    assert ids("--agent", "claude") == ["0006"]
    assert ids("--agent", "codex") == []
    assert ids("--since", "2020-01-02") == ["0002", "0003", "0004", "0005", "0006"]
    assert ids("--since", "2020-01-02T10:00:01Z") == ["0003", "0004", "0005", "0006"]
    assert ids("--since", "1h") == ["0003", "0004", "0005", "0006"]
    assert ids("--since", "2020-01-01", "--kind", "run", "--grep", r"> [ac]\.txt") == [
        "0001",
        "0006",
    ]
    assert ids("--kind", "run", "-n", "0") == []

    none = bar(capfd, "log", "--kind", "sync")
    assert none.code == 0 and "matches --kind sync" in none.out
    for args, said in (
        (["--since", "3ms"], "neither a moment nor a length of time"),
        (["--since", "yesterday"], "neither a moment nor a length of time"),
        (["--grep", "("], "is not a regular expression"),
        (["-i"], "-i/--ignore-case goes with --grep"),
    ):
        res = bar(capfd, "log", *args)
        assert res.code == 2 and said in res.err and "hint:" in res.err, (args, res.err)
    bad = bar(capfd, "log", "--kind", "tool")
    assert bad.code == 2 and "invalid choice" in bad.err
    assert "--since WHEN" in bar(capfd, "log", "--help").out
