"""bar.base.proc: children get bar's environment minus every git variable that could point
git elsewhere; an enclosing `git -c` (a hook, an alias) cannot change what bar records."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import bar, ledger, new_task, replay_patches, worktree

from bar.base.proc import clean_env, exit_status


def test_clean_env_keeps_identity_and_drops_redirections(monkeypatch: pytest.MonkeyPatch) -> None:
    kept = {
        "GIT_AUTHOR_NAME": "a",
        "GIT_COMMITTER_DATE": "2024-01-01",
        "PATH": "/bin",
        "GIT_CONFIG_GLOBAL": "/g",
        "HOME": "/h",
    }
    dropped = {
        "GIT_DIR": "/x",
        "GIT_WORK_TREE": "/y",
        "GIT_INDEX_FILE": "/i",
        "GIT_CONFIG_PARAMETERS": "'core.bare'='true'",
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "diff.noprefix",
        "GIT_CONFIG_VALUE_0": "true",
        "GIT_OBJECT_DIRECTORY": "/o",
        "GIT_NAMESPACE": "n",
        "GIT_SOMETHING_NEW": "z",
    }
    for name, value in {**kept, **dropped}.items():
        monkeypatch.setenv(name, value)
    env = clean_env({"EXTRA": "1"})
    assert all(env[name] == value for name, value in kept.items())
    assert not set(dropped) & set(env)
    assert env["EXTRA"] == "1"


def test_exit_status_reads_signals_as_128_plus_n() -> None:
    assert exit_status(0) == (0, None)
    assert exit_status(3) == (3, None)
    assert exit_status(-9) == (137, 9)


def test_git_configuration_from_an_enclosing_git_c_does_not_reach_bar(
    repo: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`git -c diff.noprefix=true` passes the setting down in the environment; had bar's
    git seen it, the step's patch would lack its a/ b/ prefixes and not replay."""
    assert bar(capfd, "init").code == 0
    t = new_task(capfd)
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "diff.noprefix")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "true")
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'diff.mnemonicprefix'='true'")
    res = bar(
        capfd, "run", "--no-pty", "--", "sh", "-c", "echo changed > README.md; echo n > new.txt"
    )
    assert res.code == 0, res.err
    patch = Path(worktree(t)).parent.parent / "tasks" / t["id"] / "artifacts" / "0001.patch"
    assert b"--- a/README.md" in patch.read_bytes()
    steps = ledger(t["id"])
    replayed = replay_patches(repo, t["id"], t["base_commit"], repo.parent / "replay")
    assert replayed["new.txt"] == b"-:n\n" and steps[0]["diff_stat"]["files"] == 2
