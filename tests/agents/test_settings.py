"""Agents' settings files: bar's hook merged in, and taken out again byte for byte."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bar.agents import AGENTS, managed
from bar.agents.settings import (
    install_hook,
    merge_hook_settings,
    remove_hook_settings,
    settings_path,
    setup_text,
)
from bar.errors import AgentSettingsError

# --- reading events -------------------------------------------------------------------


def user_settings(agent: str) -> dict[str, Any]:
    """Settings a developer might already have: other keys, other hooks, other events."""
    event = "BeforeTool" if agent == "gemini" else "PreToolUse"
    shell = "run_shell_command" if agent == "gemini" else "Bash"
    return {
        "permissions": {"allow": ["Bash(npm test:*)"], "deny": ["Read(.env)"]},
        "env": {"NODE_ENV": "test"},
        "hooks": {
            event: [
                {"matcher": shell, "hooks": [{"type": "command", "command": "audit-log.sh"}]},
                {"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "fmt.sh"}]},
            ],
            "SessionStart": [{"hooks": [{"type": "command", "command": "hello.sh"}]}],
        },
    }


json_leaf = st.none() | st.booleans() | st.integers() | st.text(max_size=8)

json_value = st.recursive(
    json_leaf,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=10,
)

other_hook = st.fixed_dictionaries(
    {
        "type": st.just("command"),
        "command": st.text(min_size=1, max_size=10).filter(lambda c: not c.startswith("bar")),
    },
    optional={"timeout": st.integers(1, 600)},
)

group = st.fixed_dictionaries(
    {"hooks": st.lists(other_hook, min_size=1, max_size=3)},
    optional={"matcher": st.sampled_from(["Bash", "*", "", "Edit|Write", "run_shell_command"])},
)

hooks_table = st.dictionaries(
    st.sampled_from(["PreToolUse", "BeforeTool", "PostToolUse", "SessionStart", "Stop"]),
    st.lists(group, min_size=1, max_size=3),
    min_size=1,
)

settings_files = st.builds(
    lambda other, hooks: {**other, **({"hooks": hooks} if hooks is not None else {})},
    st.dictionaries(st.text(max_size=8).filter(lambda k: k != "hooks"), json_value, max_size=4),
    st.none() | hooks_table,
)


@pytest.mark.parametrize("agent", AGENTS)
def test_merge_adds_bar_and_keeps_everything_else(agent: str) -> None:
    existing = user_settings(agent)
    before = json.loads(json.dumps(existing))
    merged = merge_hook_settings(agent, existing, "bar hook " + agent)
    assert existing == before  # the argument is not modified
    event = "BeforeTool" if agent == "gemini" else "PreToolUse"
    groups = merged["hooks"][event]
    assert groups[:2] == before["hooks"][event]
    assert len(groups) == 3
    assert groups[2]["hooks"][0]["command"] == "bar hook " + agent
    assert groups[2]["hooks"][0]["type"] == "command"
    for key in ("permissions", "env"):
        assert merged[key] == before[key]
    # the developer's session hook stays first; bar's follows, with no matcher
    starts = merged["hooks"]["SessionStart"]
    assert starts[0] == before["hooks"]["SessionStart"][0]
    assert starts[1:] == [{"hooks": [groups[2]["hooks"][0]]}]


@pytest.mark.parametrize("agent", AGENTS)
def test_merge_is_idempotent_and_remove_undoes_it(agent: str) -> None:
    existing = user_settings(agent)
    once = merge_hook_settings(agent, existing, "bar hook " + agent)
    assert merge_hook_settings(agent, once, "bar hook " + agent) == once
    assert remove_hook_settings(agent, once, "bar hook " + agent) == existing


@pytest.mark.parametrize("agent", AGENTS)
def test_remove_keeps_other_hooks_in_a_shared_group(agent: str) -> None:
    event = "BeforeTool" if agent == "gemini" else "PreToolUse"
    shared = {
        "hooks": {
            event: [
                {
                    "matcher": "*",
                    "hooks": [
                        {"type": "command", "command": "bar hook x"},
                        {"type": "command", "command": "mine.sh", "timeout": 5},
                    ],
                }
            ]
        }
    }
    assert remove_hook_settings(agent, shared, "bar hook x") == {
        "hooks": {
            event: [
                {"matcher": "*", "hooks": [{"type": "command", "command": "mine.sh", "timeout": 5}]}
            ]
        }
    }


@pytest.mark.parametrize("agent", AGENTS)
def test_removing_the_only_hook_leaves_nothing(agent: str) -> None:
    merged = merge_hook_settings(agent, None, "bar hook " + agent)
    assert remove_hook_settings(agent, merged, "bar hook " + agent) is None
    kept = remove_hook_settings(agent, {**merged, "model": "x"}, "bar hook " + agent)
    assert kept == {"model": "x"}


def test_the_entries_bar_installs() -> None:
    entry = {"type": "command", "command": "bar hook claude", "timeout": 60}
    assert merge_hook_settings("claude", None, "bar hook claude") == {
        "hooks": {
            # before every tool that can change files: the policy judges the shell's
            # commands, and what changed before an edit is not the edit's
            "PreToolUse": [{"matcher": "Bash|Edit|Write|MultiEdit|NotebookEdit", "hooks": [entry]}],
            # after every tool that can change files: a checkpoint each
            "PostToolUse": [
                {"matcher": "Bash|Edit|Write|MultiEdit|NotebookEdit", "hooks": [entry]}
            ],
            "PostToolUseFailure": [
                {"matcher": "Bash|Edit|Write|MultiEdit|NotebookEdit", "hooks": [entry]}
            ],
            "SessionStart": [{"hooks": [entry]}],
        }
    }
    codex = merge_hook_settings("codex", None, "bar hook codex")
    assert sorted(codex["hooks"]) == ["PostToolUse", "PreToolUse", "SessionStart"]
    assert codex["hooks"]["PreToolUse"][0]["hooks"][0]["timeout"] == 60  # seconds
    gemini = merge_hook_settings("gemini", None, "bar hook gemini")
    assert sorted(gemini["hooks"]) == ["AfterTool", "BeforeTool", "SessionStart"]
    (group,) = gemini["hooks"]["BeforeTool"]
    assert group["matcher"] == "run_shell_command|write_file|replace"
    assert group["hooks"][0]["timeout"] == 60_000  # milliseconds
    (after,) = gemini["hooks"]["AfterTool"]
    assert after["matcher"] == "run_shell_command|write_file|replace"
    assert after["hooks"] == group["hooks"]
    assert [settings_path(a) for a in AGENTS] == [
        ".claude/settings.local.json",
        ".codex/hooks.json",
        ".gemini/settings.json",
    ]


@pytest.mark.parametrize("agent", AGENTS)
def test_setup_text_is_a_complete_settings_file(agent: str) -> None:
    path, content = setup_text(agent, "bar hook " + agent)
    assert path == settings_path(agent)
    assert content.endswith("\n")
    assert json.loads(content) == merge_hook_settings(agent, None, "bar hook " + agent)


@pytest.mark.parametrize(
    ("existing", "message"),
    [
        ({"hooks": []}, r"'hooks' in \.claude/settings\.local\.json is a JSON array"),
        ({"hooks": {"PreToolUse": {}}}, r"'hooks\.PreToolUse' in .* expected an array"),
    ],
)
def test_merge_refuses_settings_of_an_odd_shape(existing: dict[str, Any], message: str) -> None:
    with pytest.raises(AgentSettingsError, match=message):
        merge_hook_settings("claude", existing, "bar hook claude")


@settings(max_examples=200, deadline=None)
@given(agent=st.sampled_from(AGENTS), existing=settings_files)
def test_merge_then_remove_gives_back_the_same_settings(
    agent: str, existing: dict[str, Any]
) -> None:
    merged = merge_hook_settings(agent, existing, "bar hook --task abc")
    assert merge_hook_settings(agent, merged, "bar hook --task abc") == merged
    restored = remove_hook_settings(agent, merged, "bar hook --task abc")
    assert (restored or {}) == existing


# --- installing for a run -------------------------------------------------------------


def test_a_missing_file_is_missing_again_afterwards(tmp_path: Path) -> None:
    worktree = tmp_path / "wt"
    worktree.mkdir()
    for agent in AGENTS:
        with install_hook(agent, worktree, "bar hook " + agent) as installed:
            path = worktree / settings_path(agent)
            assert installed.path == path
            assert json.loads(path.read_text()) == merge_hook_settings(
                agent, None, "bar hook " + agent
            )
        assert installed.outcome == "removed"
        assert not path.exists()
        assert not path.parent.exists()  # the directory bar created is gone too
    assert list(worktree.iterdir()) == []


@pytest.mark.parametrize("agent", AGENTS)
def test_an_existing_file_comes_back_byte_for_byte(tmp_path: Path, agent: str) -> None:
    path = tmp_path / settings_path(agent)
    path.parent.mkdir()
    (path.parent / "other.md").write_text("keep me\n")
    original = '{"permissions":{"allow":["Bash(ls)"]},\t"note": "caf\u00e9 \u2713"}'.encode()
    path.write_bytes(original)  # odd spacing, no final newline, non-ASCII
    path.chmod(0o640)
    with install_hook(agent, tmp_path, "bar hook " + agent):
        assert "bar hook" in path.read_text()
    assert path.read_bytes() == original
    assert path.stat().st_mode & 0o777 == 0o640
    assert (path.parent / "other.md").read_text() == "keep me\n"


def test_the_file_is_restored_when_the_run_fails(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "settings.local.json"
    path.parent.mkdir()
    path.write_bytes(b"{}")
    with pytest.raises(RuntimeError), install_hook("claude", tmp_path, "bar hook claude"):
        raise RuntimeError("agent crashed")
    assert path.read_bytes() == b"{}"


@pytest.mark.parametrize("existed", [True, False])
def test_edits_made_during_the_run_are_kept_without_bar(tmp_path: Path, existed: bool) -> None:
    path = tmp_path / ".gemini" / "settings.json"
    if existed:
        path.parent.mkdir()
        path.write_text(json.dumps(user_settings("gemini")))
    with install_hook("gemini", tmp_path, "bar hook gemini") as installed:
        during = json.loads(path.read_text())
        during["model"] = {"name": "gemini-2.5-pro"}  # the agent edits its settings
        path.write_text(json.dumps(during))
    after = json.loads(path.read_text())
    expected = {**(user_settings("gemini") if existed else {}), "model": {"name": "gemini-2.5-pro"}}
    assert after == expected
    assert installed.outcome == "merged"
    assert "bar hook" not in path.read_text()


def test_an_edit_that_only_moved_keys_gives_back_the_original_bytes(tmp_path: Path) -> None:
    path = tmp_path / ".codex" / "hooks.json"
    path.parent.mkdir()
    original = b'{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "x"}]}]}, "a": 1}\n'
    path.write_bytes(original)
    with install_hook("codex", tmp_path, "bar hook codex") as installed:
        during = json.loads(path.read_text())
        path.write_text(json.dumps(dict(reversed(list(during.items()))), indent=4))
    assert path.read_bytes() == original
    assert installed.outcome == "restored"


def test_a_file_broken_during_the_run_is_replaced_and_reported(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "settings.local.json"
    with install_hook("claude", tmp_path, "bar hook claude") as installed:
        path.write_text('{"hooks": ')
    assert not path.exists()
    assert installed.outcome == "replaced-unreadable"
    assert installed.discarded == b'{"hooks": '


def test_a_file_deleted_during_the_run_comes_back(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "settings.local.json"
    path.parent.mkdir()
    path.write_bytes(b'{"model": "opus"}\n')
    with install_hook("claude", tmp_path, "bar hook claude") as installed:
        path.unlink()
    assert path.read_bytes() == b'{"model": "opus"}\n'
    assert installed.outcome == "restored"


def test_a_symlink_planted_during_the_run_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "home-settings.json"
    outside.write_text('{"mine": true}')
    worktree = tmp_path / "wt"
    worktree.mkdir()
    path = worktree / ".claude" / "settings.local.json"
    with install_hook("claude", worktree, "bar hook claude"):
        path.unlink()
        path.symlink_to(outside)
    assert outside.read_text() == '{"mine": true}'
    assert not path.exists() and not path.is_symlink()


def test_a_hook_set_up_by_the_developer_is_left_alone(tmp_path: Path) -> None:
    path_text, content = setup_text("claude", "bar hook claude")
    path = tmp_path / path_text
    path.parent.mkdir()
    path.write_text(content)
    with install_hook("claude", tmp_path, "bar hook claude") as installed:
        assert path.read_text() == content
    assert installed.outcome == "untouched"
    assert path.read_text() == content


def test_settings_that_are_not_json_are_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / ".codex" / "hooks.json"
    path.parent.mkdir()
    path.write_bytes(b"# not json\n")
    with pytest.raises(AgentSettingsError, match=r"\.codex/hooks\.json is not valid JSON"):
        install_hook("codex", tmp_path, "bar hook codex")
    assert path.read_bytes() == b"# not json\n"


def test_a_symlinked_settings_directory_is_refused(tmp_path: Path) -> None:
    home_claude = tmp_path / "home" / ".claude"
    home_claude.mkdir(parents=True)
    worktree = tmp_path / "wt"
    worktree.mkdir()
    (worktree / ".claude").symlink_to(home_claude)
    with pytest.raises(AgentSettingsError, match="symbolic link"):
        install_hook("claude", worktree, "bar hook claude")
    assert list(home_claude.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="Gemini CLI honours system settings only of root's")
@pytest.mark.parametrize("shared", ["/tmp", "/var/tmp", "/dev/shm"])
def test_gemini_system_settings_in_any_of_the_machines_temporary_folders_rank_above(
    shared: str,
) -> None:
    """Gemini CLI skips system settings in a folder others may write; where the step
    has its own /tmp, /var/tmp and /dev/shm (each root's and private in its view), a
    bar home under any of them still holds bar's hooks above the repository's
    settings (a bar home under /dev/shm lost them, and a repository's switch was refused)."""
    if not os.path.isdir(shared) or not os.stat(shared).st_mode & 0o002:
        pytest.skip(f"{shared} is not a folder others may write here")
    path = Path(shared) / "home" / "tasks" / "T" / "system" / "gemini-settings.json"
    assert managed._honoured(path, own_tmp=True)
    assert not managed._honoured(path, own_tmp=False)
