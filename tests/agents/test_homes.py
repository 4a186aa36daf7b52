"""Each agent session gets a home of its own for the task (docs/agents.md, ``bar.agents.homes``).

The released CLIs (``make agents``) run against the mock models: a step cannot plant
anything in the developer's own ``~/.claude``, ``~/.codex`` or ``~/.gemini`` (which the
developer's next, unconfined session would run), bar's hooks hold when the agent is
started through a wrapper script (bar cannot see it is an agent, its home still says so),
and Codex starts ``bar mcp`` with what it needs to find the task.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from helpers import bar, ledger, new_task, task_dir, worktree
from mock_models import Answer, MockServer, Shell
from test_real_agents import DENIED, DIALECT, AgentSetup, agent_binary

# where each agent reads the developer's own hooks, and the variable naming its home
OWN_SETTINGS = {
    "claude": ".claude/settings.json",
    "codex": ".codex/config.toml",
    "gemini": ".gemini/settings.json",
}
VARIABLE = {"claude": "CLAUDE_CONFIG_DIR", "codex": "CODEX_HOME", "gemini": "GEMINI_CLI_HOME"}


def _wrapper(tmp_path: Path, program: str) -> Path:
    """A script that starts the agent, as a developer's alias or launcher would."""
    script = tmp_path / "my-agent"
    script.write_text(f'#!/bin/sh\nexec "{program}" "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini"])
def test_an_agent_cannot_plant_in_the_developers_home_and_its_hooks_hold_through_a_wrapper(
    agent: str, inited: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    program = agent_binary(agent)
    t = new_task(capfd)
    own = Path(os.environ["HOME"]) / OWN_SETTINGS[agent]
    plant = f"printf '\\n# planted\\n' >> {own}; echo planted=$?"
    mine = f'printf "\\n# the agent\'s own\\n" >> "${VARIABLE[agent]}/{OWN_SETTINGS[agent]}"'
    if agent != "gemini":  # (Claude Code's and Codex's homes hold the file directly)
        mine = f'printf "\\n# the agent\'s own\\n" >> "${VARIABLE[agent]}/{own.name}"'
    script = [Shell(plant), Shell(mine), Shell(DENIED), Answer("Done.")]
    with MockServer(script) as server:
        setup = AgentSetup(agent, server.url)
        argv = setup.argv("work")
        setup.argv = lambda prompt: [str(_wrapper(tmp_path, program)), *argv[1:]]  # type: ignore[method-assign]
        res = setup.run_in_bar(inited, "work")
        results = server.model.tool_results(DIALECT[agent])
        # (Codex may send its first turn before its MCP servers listed their tools)
        tools = [t for r in server.model.requests if r.main for t in r.body["tools"]]
    assert res.returncode == 0, res.stdout + res.stderr

    # the developer's own settings are not written (the attempt fails in the step)
    for path, data in setup.own.items():
        assert path.read_bytes() == data, path
    assert "planted=0" not in results[0], results
    # bar's hooks held through the wrapper: the dangerous command was refused
    assert not (worktree(t) / "denied-ran.txt").exists()
    (step,) = ledger(t["id"])
    outcomes = {e["command"]: e["outcome"] for e in step["policy_events"]}
    assert outcomes[DENIED] == "refused"
    assert step["agent"]["hooks"] == "home"

    # the home is the task's; what the agent wrote in it is gone at the next step
    home = task_dir(t["id"]) / "agents" / agent
    settings = home / (OWN_SETTINGS[agent] if agent == "gemini" else own.name)
    assert "the agent's own" in settings.read_text()
    with MockServer([Answer("Nothing to do.")]) as server:
        setup = AgentSetup(agent, server.url)
        res = setup.run_in_bar(inited, "nothing")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "the agent's own" not in settings.read_text()
    if agent == "gemini":  # (bar's hooks are in its system settings, above the home's)
        system = task_dir(t["id"]) / "agents" / "system" / "gemini-settings.json"
        assert " hook gemini " in system.read_text()
    else:
        assert "hook" in settings.read_text()

    # Codex starts MCP servers with a clean environment: bar's finds the task all the same
    if agent == "codex":
        server_tools = next(tool for tool in tools if tool.get("name") == "mcp__bar")
        assert t["id"] in server_tools["description"], server_tools
        assert {"status", "checkpoint", "rollback"} <= {x["name"] for x in server_tools["tools"]}


def test_a_home_is_made_from_the_developers_and_keeps_what_the_agent_refreshed(
    inited: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Credentials are copied in when the developer's change, not at every step: a token
    the agent refreshed in its home is kept. A link the agent left in its home makes bar
    neither read nor write what it points at."""
    from bar.agents import homes
    from bar.model.project import find_project
    from bar.model.tasks import load_task

    t = new_task(capfd)
    task = load_task(find_project(inited).project, t["id"])
    own = Path(os.environ["HOME"]) / ".claude"
    own.mkdir()
    (own / "settings.json").write_text(json.dumps({"env": {"MINE": "1"}}))
    (own / ".credentials.json").write_text('{"token": "first"}')
    (Path(os.environ["HOME"]) / ".claude.json").write_text('{"hasCompletedOnboarding": true}')
    mcp = ["/bin/bar", "mcp", "--task", t["id"]]

    env = homes.prepare(task, "claude", "bar hook claude", mcp, "0001")
    home = Path(env["CLAUDE_CONFIG_DIR"])
    settings = json.loads((home / "settings.json").read_text())
    assert settings["env"] == {"MINE": "1"} and "PreToolUse" in settings["hooks"]
    state = json.loads((home / ".claude.json").read_text())
    assert state["hasCompletedOnboarding"] is True
    assert state["mcpServers"]["bar"]["env"]["BAR_TASK_ID"] == t["id"]
    assert (home / ".credentials.json").read_text() == '{"token": "first"}'
    # it waits for bar mcp as long as Codex does, unless the developer said how long
    assert env["MCP_CONNECT_TIMEOUT_MS"] == "60000"

    (home / ".credentials.json").write_text('{"token": "refreshed"}')  # by the agent
    monkeypatch.setenv("MCP_CONNECT_TIMEOUT_MS", "9000")
    assert "MCP_CONNECT_TIMEOUT_MS" not in homes.prepare(
        task, "claude", "bar hook claude", mcp, "0002"
    )
    assert (home / ".credentials.json").read_text() == '{"token": "refreshed"}'
    (own / ".credentials.json").write_text('{"token": "the developer logged in again"}')
    homes.prepare(task, "claude", "bar hook claude", mcp, "0003")
    assert "logged in again" in (home / ".credentials.json").read_text()

    # links the agent left: to a secret (never read into the home), to the developer's
    # settings (never written through)
    secret = Path(os.environ["HOME"]) / "secret.json"
    secret.write_text('{"private": "do not copy"}')
    (home / ".claude.json").unlink()
    (home / ".claude.json").symlink_to(secret)
    (home / "settings.json").unlink()
    (home / "settings.json").symlink_to(own / "settings.json")
    before = (own / "settings.json").read_bytes()
    homes.prepare(task, "claude", "bar hook claude", mcp, "0004")
    assert (own / "settings.json").read_bytes() == before
    assert not (home / "settings.json").is_symlink()
    assert "do not copy" not in (home / ".claude.json").read_text()
    assert secret.read_text() == '{"private": "do not copy"}'


def test_a_developers_unreadable_settings_stop_the_step_with_a_hint(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    own = Path(os.environ["HOME"]) / ".gemini"
    own.mkdir()
    (own / "settings.json").write_text("{not json")
    res = bar(capfd, "run", "--no-pty", "--agent", "gemini", "--", "true")
    assert res.code != 0
    assert "settings.json is not valid JSON" in res.err and "fix it" in res.err, res.err
    assert not ledger(t["id"])


def test_a_link_the_agent_left_for_codexs_settings_does_not_move_the_trust_of_bars_hooks(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Codex CLI runs a hook only if its trust, kept in the settings file by the path of
    the file that holds the hook, names that file. An agent that left a link where the
    home's ``config.toml`` is must not have bar key that trust by where the link points:
    bar puts a file of its own in the link's place, so the trust names that file, and
    bar's hooks run in the next session."""
    import tomllib

    from bar.agents import homes
    from bar.model.project import find_project
    from bar.model.tasks import load_task

    t = new_task(capfd)
    task = load_task(find_project(inited).project, t["id"])
    mcp = ["/bin/bar", "mcp", "--task", t["id"]]
    env = homes.prepare(task, "codex", "bar hook codex", mcp, "0001")
    home = Path(env["CODEX_HOME"])
    elsewhere = Path(os.environ["HOME"]) / "elsewhere.toml"
    elsewhere.write_text("")
    (home / "config.toml").unlink()
    (home / "config.toml").symlink_to(elsewhere)  # by the agent, during its step
    homes.prepare(task, "codex", "bar hook codex", mcp, "0002")
    config = home / "config.toml"
    assert not config.is_symlink() and elsewhere.read_text() == ""
    trusted = tomllib.loads(config.read_text())["hooks"]["state"]
    assert trusted and all(
        key.startswith(os.path.realpath(home) + "/config.toml:") for key in trusted
    ), trusted
