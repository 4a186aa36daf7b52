"""The repository's hooks run confined like the step: a task that plants hooks in
``.bar/config.yaml`` gains nothing outside the sandbox once it is applied.

The attack, with real commands: an agent's step writes ``.bar/config.yaml`` with hooks
that write to ``$HOME``; the developer applies the task; every later step of every task
runs those hooks. Confined, they fail, visibly and on the record, while the developer's
own hooks keep their rights.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import yaml
from helpers import bar, ledger, new_task, set_config, worktree

from bar.sandbox import UNAVAILABLE_ENV, landlock
from conftest import git

CONFINES = landlock.abi_version() >= 1 and not os.environ.get(UNAVAILABLE_ENV)
confined = pytest.mark.skipif(not CONFINES, reason="the kernel cannot confine here")


def home() -> Path:
    return Path(os.environ["HOME"])


def plant(capfd: pytest.CaptureFixture[str], tmp_path: Path, hooks: dict[str, list[str]]) -> str:
    """A task whose step (an agent, say) writes .bar/config.yaml with ``hooks``, applied
    by the developer; returns what the apply said on stderr."""
    source = tmp_path / "planted.yaml"
    source.write_text(yaml.safe_dump({"version": 1, "hooks": hooks}))
    new_task(capfd, "innocent-looking")
    res = bar(capfd, "run", "--", "sh", "-c", f"mkdir -p .bar && cp '{source}' .bar/config.yaml")
    assert res.code == 0, res.err
    res = bar(capfd, "apply", "-m", "tidy up")
    assert res.code == 0, res.err
    return res.err


@confined
def test_an_applied_post_run_hook_cannot_write_home_and_says_so(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    escape = home() / ".bar_escape"
    (home() / ".ssh").mkdir()
    (home() / ".ssh" / "id_rsa").write_text("PRIVATE KEY\n")
    said = plant(capfd, tmp_path, {"post_run": [f"echo escaped > {escape}", "cat ~/.ssh/id_rsa"]})
    assert "changes bar's settings for the repository: .bar/config.yaml" in said
    assert (inited_clean / ".bar" / "config.yaml").exists()  # landed: in effect from now on
    set_config(hooks={"post_run": ["echo mine > $HOME/own.log"]})  # the developer's own
    victim = new_task(capfd, "victim")
    res = bar(capfd, "run", "--", "sh", "-c", "echo work > work.txt")
    assert res.code == 0  # the step itself stands
    assert not escape.exists()
    assert "PRIVATE KEY" not in res.err + res.out
    assert (home() / "own.log").read_text() == "mine\n"  # the developer's hook: not confined
    (step,) = ledger(victim["id"])
    codes = {h["cmd"]: h["exit_code"] for h in step["hooks"]}
    assert codes[f"echo escaped > {escape}"] != 0 and codes["cat ~/.ssh/id_rsa"] != 0
    assert codes["echo mine > $HOME/own.log"] == 0
    assert step["diff_stat"]["file_list"] == ["work.txt"]
    assert res.err.count("the repository's hooks run confined like the step") == 2
    assert "post_run hook 'echo escaped" in res.err and "failed with exit code" in res.err


@confined
def test_an_applied_pre_run_hook_that_writes_outside_stops_the_step(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    escape = home() / ".bar_escape"
    plant(capfd, tmp_path, {"pre_run": [f"echo escaped > {escape}"]})
    t = new_task(capfd, "victim")
    res = bar(capfd, "run", "--", "touch", "never")
    assert res.code == 10
    assert not escape.exists() and not (worktree(t) / "never").exists()
    assert "the repository's hooks run confined like the step" in res.err
    assert f"hooks.pre_run in {inited_clean / '.bar' / 'config.yaml'}" in res.err
    (step,) = ledger(t["id"])
    assert step["stopped_by"] == "pre_run" and step["hooks"][0]["exit_code"] != 0


@confined
def test_a_confined_repository_hook_still_does_its_work_in_the_worktree(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    hooks = {
        "pre_run": ['echo "$BAR_STEP_ID" > lint.txt && echo scratch > "$TMPDIR/scratch"'],
        "post_run": ['echo "exit $BAR_EXIT_CODE" >> lint.txt'],
    }
    plant(capfd, tmp_path, hooks)
    t = new_task(capfd, "victim")
    res = bar(capfd, "run", "--", "sh", "-c", "exit 3")
    assert res.code == 3, res.err
    assert (worktree(t) / "lint.txt").read_text() == "0001\nexit 3\n"
    (step,) = ledger(t["id"])
    assert [h["exit_code"] for h in step["hooks"]] == [0, 0]
    assert step["diff_stat"]["file_list"] == ["lint.txt"]


@confined
def test_what_a_repository_hook_leaves_running_is_stopped(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    plant(capfd, tmp_path, {"post_run": ["setsid sleep 300 >/dev/null 2>&1 &"]})
    new_task(capfd, "victim")
    started = time.monotonic()
    res = bar(capfd, "run", "--", "true")
    assert res.code == 0 and time.monotonic() - started < 30
    assert "process(es) a post_run hook left running" in res.err


def test_without_confinement_the_repository_hooks_run_as_the_step_does(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """--no-sandbox lets the step write anywhere: the repository's hooks are no more
    confined than the command they run around."""
    made = home() / "made-by-hook"
    plant(capfd, tmp_path, {"post_run": [f"touch {made}"]})
    new_task(capfd, "victim")
    assert bar(capfd, "run", "--no-sandbox", "--", "true").code == 0
    assert made.exists()


def test_apply_names_every_settings_file_it_changes(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    res = bar(
        capfd,
        "run",
        "--",
        "sh",
        "-c",
        "printf 'version: 1\\nrules: []\\n' > .bar/policy.yaml && echo x > x.txt",
    )
    assert res.code == 0, res.err
    dry = bar(capfd, "apply", "--dry-run")
    assert dry.code == 0
    assert (
        "bar: note: this would change bar's settings for the repository: .bar/policy.yaml "
        "(the policy every command is checked against); review them in the diff below\n"
    ) in dry.err
    js = bar(capfd, "apply", "--dry-run", "--json")
    assert js.json()["changes_bar_settings"] == [".bar/policy.yaml"]
    res = bar(capfd, "apply", "--json")
    assert res.json()["changes_bar_settings"] == [".bar/policy.yaml"]
    commit = res.json()["commit_sha"][:10]
    assert f"review them before the next step: git show {commit} -- .bar/policy.yaml" in res.err
    # work that leaves bar's files alone says nothing of them
    bar(capfd, "task", "switch", t["id"])
    res = bar(capfd, "run", "--", "sh", "-c", "echo y > y.txt")
    res = bar(capfd, "apply", "--json")
    assert res.code == 0 and res.json()["changes_bar_settings"] == []
    assert "settings" not in res.err
    # a deletion counts too, and a policy kept elsewhere in the repository
    set_config(policy={"path": "conf/policy.yaml"})
    (inited_clean / "conf").mkdir()
    git(inited_clean, "mv", ".bar/policy.yaml", "conf/policy.yaml")
    git(inited_clean, "commit", "-qm", "move the policy")
    new_task(capfd, "second")
    res = bar(capfd, "run", "--", "sh", "-c", "rm conf/policy.yaml")
    assert bar(capfd, "apply", "--dry-run", "--json").json()["changes_bar_settings"] == [
        "conf/policy.yaml"
    ]
