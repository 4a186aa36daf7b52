"""The repository's own .bar/config.yaml: shared by a team, it adds to each developer's
settings and can never loosen them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import bar, ledger, new_task, project_dir, set_config, worktree
from hypothesis import given, settings
from hypothesis import strategies as st

from bar.errors import ConfigError, ExitCode
from bar.model import config

SHARED = Path("/repo/.bar/config.yaml")


def share(repo: Path, **sections: Any) -> None:
    (repo / ".bar").mkdir(exist_ok=True)
    (repo / ".bar" / "config.yaml").write_text(yaml.safe_dump({"version": 1, **sections}))


def test_the_repositorys_hooks_run_before_the_developers(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # a log outside the checkout, $HOME and $BAR_HOME: the team's hook runs confined
    (inited.parent / "logs").mkdir()
    log = inited.parent / "logs" / "hooks.log"
    share(inited, hooks={"pre_run": [f"echo team >> {log}"]})
    # (a step's /tmp is its own: the log's directory is one the step may write)
    set_config(
        hooks={"pre_run": [f"echo mine >> {log}"]}, sandbox={"allow_write": [str(log.parent)]}
    )
    t = new_task(capfd)
    assert bar(capfd, "run", "--", "true").code == 0
    assert log.read_text() == "team\nmine\n"
    (step,) = ledger(t["id"])
    assert [h["cmd"] for h in step["hooks"]] == [f"echo team >> {log}", f"echo mine >> {log}"]


def test_a_failing_hook_of_the_repository_is_named_in_its_file(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    share(inited, hooks={"pre_run": ["echo team; exit 4"]})
    set_config(hooks={"pre_run": ["echo mine"]})
    new_task(capfd)
    res = bar(capfd, "run", "--", "true")
    assert res.code == ExitCode.HOOK_FAILED
    assert (
        f"hint: fix the hook or remove it from hooks.pre_run in {inited / '.bar/config.yaml'}\n"
        in res.err
    )
    share(inited, hooks={"pre_run": ["echo team"]})
    set_config(hooks={"pre_run": ["echo mine; exit 4"]})
    res = bar(capfd, "run", "--", "true")
    assert res.code == ExitCode.HOOK_FAILED
    assert f"hooks.pre_run in {project_dir() / 'config.yaml'}\n" in res.err


def test_a_broken_shared_file_says_how_to_get_going_again(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    (inited / ".bar").mkdir(exist_ok=True)
    (inited / ".bar" / "config.yaml").write_text("version: 1\nhooks: [\n")
    res = bar(capfd, "status")
    assert res.code == ExitCode.CORRUPT
    assert res.err.splitlines() == [
        f"bar: {inited / '.bar/config.yaml'} is not valid YAML at line 3, column 1: "
        "expected the node content, but found '<stream end>'",
        "hint: fix it, or move it away to use only your own settings",
    ]
    (inited / ".bar" / "config.yaml").rename(inited / "config.yaml.broken")
    assert bar(capfd, "status").code == 0


def test_a_copy_in_the_task_worktree_is_never_read(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    share(worktree(t), hooks={"pre_run": ["touch ../planted"]})
    assert bar(capfd, "run", "--", "true").code == 0
    assert not (worktree(t).parent / "planted").exists()


@pytest.mark.parametrize(
    "section,key,value",
    [
        ("policy", "enabled", False),
        ("policy", "path", "/dev/null"),
        ("sandbox", "enabled", False),
        ("sandbox", "allow_write", ["~"]),
        ("git", "default_base", "evil"),
        ("output", "color", False),
    ],
)
def test_what_could_loosen_or_is_personal_is_refused_with_the_file_named(
    inited: Path, capfd: pytest.CaptureFixture[str], section: str, key: str, value: Any
) -> None:
    share(inited, **{section: {key: value}})
    res = bar(capfd, "status")
    assert res.code == 8
    assert f"'{section}.{key}' cannot be set in" in res.err
    assert ".bar/config.yaml" in res.err and "hint:" in res.err


def test_status_names_both_files(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    share(inited, run={"record_env": ["CI"]})
    new_task(capfd)
    res = bar(capfd, "status")
    assert "config.yaml  (yours)" in res.out
    assert f"{inited / '.bar' / 'config.yaml'}  (the repository's" in res.out
    info = bar(capfd, "status", "--json").json()
    assert info["shared_config"] == str(inited / ".bar" / "config.yaml")
    assert info["config"].endswith("config.yaml")


def test_a_broken_shared_file_is_an_error_not_ignored(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    (inited / ".bar" / "config.yaml").write_text("hooks: [unclosed\n")
    res = bar(capfd, "status")
    assert res.code == 8 and "not valid YAML" in res.err


# --- combine: the property ------------------------------------------------------------------

paths = st.sampled_from(["~/.ssh", "~/.netrc", "/etc/secret", "~/.cache", "/opt"])
names = st.sampled_from(["make lint", "echo hi", "true", "CI", "HOME"])
own_configs = st.builds(
    lambda pre, env, req, net, deny, timeout, most: config.Config(
        hooks=config.HooksConfig(pre_run=tuple(pre), timeout=timeout),
        run=config.RunConfig(record_env=tuple(env)),
        sandbox=config.SandboxConfig(
            required=req,
            network=net,
            deny_read=tuple(dict.fromkeys(deny)),
            max_processes=most,
        ),
    ),
    st.lists(names, max_size=2),
    st.lists(names, max_size=2),
    st.booleans(),
    st.sampled_from(config.NETWORK_MODES),
    st.lists(paths, max_size=3),
    st.sampled_from([1.0, 60.0, 300.0]),
    st.sampled_from([0, 64, 4096]),
)
shared_data = st.fixed_dictionaries(
    {"version": st.just(1)},
    optional={
        "hooks": st.fixed_dictionaries(
            {},
            optional={
                "pre_run": st.lists(names, max_size=2),
                "post_run": st.lists(names, max_size=2),
                "timeout": st.sampled_from([1, 30, 600]),
            },
        ),
        "run": st.fixed_dictionaries({}, optional={"record_env": st.lists(names, max_size=2)}),
        "sandbox": st.fixed_dictionaries(
            {},
            optional={
                "required": st.booleans(),
                "network": st.sampled_from([*config.NETWORK_MODES, True, False]),
                "deny_read": st.lists(paths, max_size=3),
                "max_processes": st.sampled_from([0, 32, 100_000]),
            },
        ),
    },
)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(own=own_configs, data=shared_data)
def test_the_shared_file_only_adds_and_tightens(own: config.Config, data: dict[str, Any]) -> None:
    got = config.combine(own, data, SHARED)
    # the developer's own settings all stay, in their order, after the team's
    assert got.hooks.pre_run[len(got.hooks.pre_run) - len(own.hooks.pre_run) :] == (
        own.hooks.pre_run
    )
    assert set(own.run.record_env) <= set(got.run.record_env)
    assert set(own.sandbox.deny_read) <= set(got.sandbox.deny_read)
    assert got.sandbox.required >= own.sandbox.required
    rank = config.NETWORK_MODES.index  # (the later, the less a step reaches)
    assert rank(got.sandbox.network) >= rank(own.sandbox.network)
    assert got.hooks.timeout >= own.hooks.timeout
    unbounded = 1 << 62  # (0: no bound)
    assert (got.sandbox.max_processes or unbounded) <= (own.sandbox.max_processes or unbounded)
    # and what the file cannot hold is the developer's alone
    assert got.policy == own.policy and got.git == own.git and got.output == own.output
    assert got.sandbox.enabled == own.sandbox.enabled
    assert got.sandbox.allow_write == own.sandbox.allow_write
    # the team's settings all take effect
    shared = data.get("sandbox", {})
    if shared.get("required"):
        assert got.sandbox.required
    if shared.get("network") in ("none", False):
        assert got.sandbox.network == "none"
    if shared.get("network") in ("allow-list", True):
        assert got.sandbox.network in ("allow-list", "none")
    assert set(shared.get("deny_read", [])) <= set(got.sandbox.deny_read)
    if shared.get("max_processes"):
        assert 0 < got.sandbox.max_processes <= shared["max_processes"]
    team = tuple(data.get("hooks", {}).get("pre_run", []))
    assert got.hooks.pre_run[: len(team)] == team


def test_unknown_keys_are_named() -> None:
    with pytest.raises(ConfigError, match=r"unknown key 'hooks\.pre'"):
        config.combine(config.Config(), {"version": 1, "hooks": {"pre": []}}, SHARED)
