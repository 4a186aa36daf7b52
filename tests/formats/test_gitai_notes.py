"""``bar notes export|import``: line attribution as git-ai authorship notes
(``bar.formats.gitai``).

The format is checked two ways: the standard's own three complete examples
(tests/data/gitai, from the git-ai standard v3.0.0) read and written back unchanged, and
every note bar writes checked here line by line against the standard's rules (two
sections around ``---``, paths at the start of a line, two-space entries, key shapes and
how session keys are derived, ascending ranges inside the file, the metadata's required
fields). The round trip is real: an agent session, a hand edit and a plain command in a
task, applied; notes exported, pushed to a remote with git, fetched by a second clone
that has no task of its own, imported there, and read back through ``bar blame --rev``.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    DATA,
    bar,
    bar_exe,
    ledger,
    new_task,
    run_claude,
    run_sh,
    worktree,
)

from bar.formats import gitai

PROMPT = "Write the notes."
EXAMPLES = DATA / "gitai"


# --- the standard's rules, as a reader of notes applies them -----------------------------


def check_note(text: str, repo: Path, commit: str) -> dict[str, Any]:
    """``text`` is an authorship log of the standard whose lines lie inside the files as
    ``commit`` has them; returns {path: {key: [line numbers]}} and the metadata."""
    head, divider, tail = text.partition("\n---\n")
    assert divider, "the divider is a line of its own"
    meta = json.loads(tail)
    assert meta["schema_version"] == "authorship/3.0.0"
    assert meta["base_commit_sha"] == commit
    assert isinstance(meta["prompts"], dict)
    found: dict[str, dict[str, list[int]]] = {}
    path = None
    for line in head.split("\n"):
        if not line.startswith(" "):
            path = line[1:-1] if line.startswith('"') else line
            assert path not in found
            found[path] = {}
            continue
        assert line.startswith("  ") and not line.startswith("   ")
        key, spec = line[2:].split(" ")
        assert re.fullmatch(r"[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*", spec)
        numbers: list[int] = []
        for part in spec.split(","):
            a, _, b = part.partition("-")
            numbers += range(int(a), int(b or a) + 1)
        assert numbers == sorted(set(numbers)) and numbers[0] >= 1
        assert path is not None
        lines = subprocess.run(
            ["git", "show", f"{commit}:{path}"], cwd=repo, capture_output=True, check=True
        ).stdout.splitlines()
        assert numbers[-1] <= len(lines)
        if key.startswith("s_"):
            sid, sep, tid = key.partition("::")
            assert (
                sep
                and re.fullmatch(r"s_[0-9a-f]{14}", sid)
                and re.fullmatch(r"t_[0-9a-f]{14}", tid)
            )
            session = meta["sessions"][sid]
            agent = session["agent_id"]
            assert set(agent) == {"tool", "id", "model"}
            derived = "s_" + hashlib.sha256(f"{agent['tool']}:{agent['id']}".encode()).hexdigest()
            assert sid == derived[:16]  # "s_" + SHA256("<tool>:<conversation_id>")[0..14]
            assert not {"messages", "messages_url", "total_additions"} & set(session)
        else:
            assert re.fullmatch(r"h_[0-9a-f]{14}", key)
            author = meta["humans"][key]["author"]
            assert key == "h_" + hashlib.sha256(author.encode()).hexdigest()[:14]
        found[path][key] = numbers
    return {"files": found, "meta": meta}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()


# --- the format ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["sessions", "legacy", "mixed"])
def test_the_standards_own_examples_read_and_write_back_unchanged(name: str) -> None:
    text = (EXAMPLES / f"{name}.note").read_text()
    log = gitai.parse(text)
    assert log.render() == text
    assert [f.path for f in log.files] == ["src/main.rs", "src/lib.rs"]
    for f in log.files:
        for e in f.entries:
            assert log.who(e.key) is not None  # every key resolves to its table


@pytest.mark.parametrize(
    "text, why",
    [
        ("a.py\n  h_31dce776f88375 1-3\n", "no line '---'"),
        ("a.py\n  h_31dce776f88375 3-1\n---\n{}", "schema_version"),
        (
            'a.py\n   h_1 1\n---\n{"schema_version":"authorship/3.0.0","base_commit_sha":"x","prompts":{}}',
            "exactly two spaces",
        ),
        (
            'a.py\n  h_31dce776f88375 1,1\n---\n{"schema_version":"authorship/3.0.0","base_commit_sha":"x","prompts":{},"humans":{"h_31dce776f88375":{"author":"A <a@b>"}}}',
            "ascending",
        ),
        (
            'a.py\n  zz 1\n---\n{"schema_version":"authorship/3.0.0","base_commit_sha":"x","prompts":{}}',
            "not an attestation key",
        ),
        (
            'a.py\n  h_31dce776f88375 1\n---\n{"schema_version":"authorship/3.0.0","base_commit_sha":"x","prompts":{}}',
            "no record in metadata.humans",
        ),
    ],
)
def test_a_note_against_the_standard_is_refused_with_why(text: str, why: str) -> None:
    with pytest.raises(gitai.BadNote, match=re.escape(why)):
        gitai.parse(text)


# --- a real round trip ----------------------------------------------------------------------


@pytest.fixture
def applied(
    inited_clean: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> dict[str, Any]:
    """A task applied to main: an agent wrote notes.txt (two tool calls), a hand edit
    README.md, a plain command plain.txt."""
    repo = inited_clean
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    t = new_task(capfd)
    wt = worktree(t)
    run_claude(wt, tmp_path, PROMPT, "write:notes.txt=alpha", "echo beta >> notes.txt")
    (wt / "README.md").write_text("hello\nedited by hand\n")
    run_sh(capfd, "echo plain > plain.txt")
    assert bar(capfd, "apply", "--task", t["id"]).code == 0
    return {"task": t, "repo": repo, "remote": remote, "commit": git(repo, "rev-parse", "HEAD")}


def test_export_writes_the_standards_note_on_the_applied_commit(
    applied: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    repo, commit = applied["repo"], applied["commit"]
    res = bar(capfd, "notes", "export")
    assert res.code == 0, res.err
    assert "Wrote 1 note (3 lines) under refs/notes/ai" in res.out
    note = check_note(git(repo, "notes", "--ref", "ai", "show", commit) + "\n", repo, commit)
    files, meta = note["files"], note["meta"]
    assert set(files) == {"notes.txt", "README.md"}  # the plain command's file: unattested
    (human,) = files["README.md"].items()
    assert human[1] == [2] and meta["humans"][human[0]]["author"].endswith(">")
    # two checkpoints of one session: one session key, two traces
    session = ledger(applied["task"]["id"])[0]["session"]
    keys = sorted(files["notes.txt"], key=lambda k: files["notes.txt"][k])
    assert [files["notes.txt"][k] for k in keys] == [[1], [2]]
    assert len({k.split("::")[0] for k in keys}) == 1 and len(set(keys)) == 2
    (sid,) = meta["sessions"]
    agent = meta["sessions"][sid]["agent_id"]
    assert agent == {"tool": "claude", "id": session["session_id"], "model": session["model"]}
    assert meta["sessions"][sid]["custom_attributes"]["bar_task"] == applied["task"]["id"]
    # again: the same note, nothing written
    res = bar(capfd, "notes", "export", "--json")
    assert res.json()["unchanged"] == [commit] and res.json()["written"] == []


def test_another_tools_note_is_kept_unless_forced(
    applied: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    repo, commit = applied["repo"], applied["commit"]
    theirs = (EXAMPLES / "sessions.note").read_text()
    subprocess.run(
        ["git", "notes", "--ref", "ai", "add", "-F", "-", commit],
        cwd=repo,
        input=theirs.encode(),
        check=True,
    )
    res = bar(capfd, "notes", "export", "--json")
    assert res.json()["kept"] == [commit]
    assert git(repo, "notes", "--ref", "ai", "show", commit) + "\n" == theirs
    res = bar(capfd, "notes", "export", "--force", "--json")
    assert res.json()["written"] == [commit]


def test_rev_limits_the_commits(applied: dict[str, Any], capfd: pytest.CaptureFixture[str]) -> None:
    repo = applied["repo"]
    git(repo, "branch", "old", f"{applied['commit']}~1")
    res = bar(capfd, "notes", "export", "--rev", "old")
    assert res.code == 0 and "no note to write" in res.out
    assert bar(capfd, "notes", "export", "--rev", "nothing-here").code == 3


def test_notes_travel_to_a_clone_that_blames_with_them(
    applied: dict[str, Any], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    repo, commit = applied["repo"], applied["commit"]
    session = ledger(applied["task"]["id"])[0]["session"]  # (before a second project is made)
    assert bar(capfd, "notes", "export").code == 0
    git(repo, "push", "-q", "origin", "main", "refs/notes/ai")
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(applied["remote"]), str(other))
    git(other, "fetch", "-q", "origin", "refs/notes/ai:refs/notes/ai")
    assert bar_exe("init", cwd=other).code == 0
    # a note of another shape beside bar's: read; a broken one: reported, left out
    git(other, "commit", "-q", "--allow-empty", "-m", "later")
    later = git(other, "rev-parse", "HEAD")
    subprocess.run(
        ["git", "notes", "--ref", "ai", "add", "-m", "not a note of the standard", later],
        cwd=other,
        check=True,
    )
    res = bar_exe("notes", "import", "--json", cwd=other)
    assert res.code == 0, res.err
    done = res.json()
    assert done["notes"] == 1 and done["lines"] == 3
    assert done["tools"] == {"claude": 2, "human": 1}
    (bad,) = done["invalid"]
    assert bad["commit"] == later and "---" in bad["why"]
    # the clone has no task: the lines are traced by the notes alone
    blamed = bar_exe("blame", "--rev", "HEAD", "notes.txt", "--json", cwd=other).json()
    for line in blamed["lines"]:
        assert line["commit"] == commit and line["task_id"] == applied["task"]["id"]
        said = line["authorship"]
        assert (said["kind"], said["tool"], said["model"]) == ("ai", "claude", session["model"])
        assert said["conversation"] == session["session_id"]
    readme = bar_exe("blame", "--rev", "HEAD", "README.md", "--json", cwd=other).json()
    assert "authorship" not in readme["lines"][0]  # the base's line: nobody's note
    assert readme["lines"][1]["authorship"]["kind"] == "human"
    shown = bar_exe("blame", "--rev", "HEAD", "notes.txt", cwd=other).out
    assert "git-ai" in shown and "claude" in shown


def test_import_without_notes_says_how_to_get_them(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    res = bar(capfd, "notes", "import")
    assert res.code == 3 and "no notes under refs/notes/ai" in res.err
    assert "git fetch origin refs/notes/ai:refs/notes/ai" in res.err


def test_a_note_too_large_to_read_is_reported_and_left_out(
    applied: dict[str, Any], capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert bar(capfd, "notes", "export").code == 0
    monkeypatch.setattr(gitai, "MAX_NOTE", 100)  # (bar's own note is larger than that)
    done = bar(capfd, "notes", "import", "--json").json()
    assert done["notes"] == 0
    assert done["invalid"] == [{"commit": applied["commit"], "why": "larger than 100 bytes"}]


def test_a_hostile_notes_escape_sequences_never_reach_the_terminal(
    applied: dict[str, Any], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A fetched note is anyone's words: its tool, model and paths are shown, never
    sent to the terminal as control characters."""
    repo, commit = applied["repo"], applied["commit"]
    evil = "\x1b]0;owned\x07\x1b[31m"
    meta = {
        "schema_version": "authorship/3.0.0",
        "base_commit_sha": commit,
        "prompts": {},
        "sessions": {"s_0123456789abcd": {"agent_id": {"tool": evil, "id": "x", "model": evil}}},
    }
    good = "notes.txt\n  s_0123456789abcd::t_0123456789abcd 1\n---\n" + json.dumps(meta)
    bad = good.replace("---", f"{evil}.txt\n  h_31dce776f88375 1\n---")  # no such human
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(repo), str(other))
    assert bar_exe("init", cwd=other).code == 0
    for text in (bad, good):
        subprocess.run(
            ["git", "notes", "--ref", "ai", "add", "-f", "-F", "-", commit],
            cwd=other,
            input=text.encode(),
            check=True,
        )
        res = bar_exe("notes", "import", cwd=other)
        assert "\x1b" not in res.out and "\\x1b" in res.out, res.out
    shown = bar_exe("blame", "--rev", "HEAD", "notes.txt", cwd=other).out
    assert "git-ai" in shown and "\x1b" not in shown and "\\x1b" in shown
