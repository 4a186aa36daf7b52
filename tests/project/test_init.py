"""bar init: registering a repository, on real repositories."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
import yaml
from helpers import bar, project_dir

from conftest import git

# --- init ----------------------------------------------------------------------------


def test_init_creates_the_files_of_the_spec(repo: Path, capfd: pytest.CaptureFixture[str]) -> None:
    res = bar(capfd, "init")
    assert res.code == 0, res.err
    pdir = project_dir()
    import hashlib

    digest = hashlib.sha256(str(repo.resolve()).encode()).hexdigest()[:4]
    assert pdir.name == f"{repo.name}-{digest}"
    config = yaml.safe_load((pdir / "config.yaml").read_text())
    assert config["version"] == 1
    assert config["git"] == {"default_base": "main", "branch_prefix": "bar/"}
    assert config["policy"]["path"] == ".bar/policy.yaml"
    assert config["hooks"]["pre_run"] == [] and config["hooks"]["post_run"] == []
    assert config["output"] == {"color": True, "verbose": False}
    state = json.loads((pdir / "state.json").read_text())
    assert state["version"] == 1 and state["active_task_id"] is None
    assert state["updated_at"].endswith("Z")
    assert (repo / ".bar" / "policy.yaml").exists()
    assert stat.S_IMODE(pdir.stat().st_mode) == 0o700
    assert stat.S_IMODE((pdir / "config.yaml").stat().st_mode) == 0o600
    assert stat.S_IMODE((pdir / "state.json").stat().st_mode) == 0o600


def test_init_is_idempotent(repo: Path, capfd: pytest.CaptureFixture[str]) -> None:
    assert bar(capfd, "init").code == 0
    before = (project_dir() / "config.yaml").read_bytes()
    res = bar(capfd, "init")
    assert res.code == 0 and "already registered" in res.out
    assert (project_dir() / "config.yaml").read_bytes() == before


def test_init_adopt_in_a_registered_repository_says_there_is_nothing_to_adopt(
    repo: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    assert bar(capfd, "init").code == 0
    res = bar(capfd, "init", "--adopt")
    assert res.code == 3 and res.out == ""
    assert f"{repo.resolve()} is registered as project {project_dir().name}" in res.err
    assert "nothing to adopt" in res.err and "bar task list --all" in res.err
    assert "registers it as a new project" not in res.err
    assert bar(capfd, "status").code == 0  # still registered, nothing changed


def test_init_refuses_outside_a_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    monkeypatch.chdir(plain)
    res = bar(capfd, "init")
    assert res.code == 4
    assert "not inside a git repository" in res.err
    assert "Traceback" not in res.err


def test_init_refuses_a_repository_without_commits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    monkeypatch.chdir(empty)
    res = bar(capfd, "init")
    assert res.code == 4 and "no commit" in res.err and "hint:" in res.err


def test_default_base_is_the_current_branch_without_main(
    make_repo, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo()
    git(repo, "branch", "-m", "main", "trunk")
    monkeypatch.chdir(repo)
    assert bar(capfd, "init").code == 0
    config = yaml.safe_load((project_dir() / "config.yaml").read_text())
    assert config["git"]["default_base"] == "trunk"


def test_commands_before_init_say_so(repo: Path, capfd: pytest.CaptureFixture[str]) -> None:
    res = bar(capfd, "task", "list")
    assert res.code == 4 and "bar init" in res.err


# --- tasks ---------------------------------------------------------------------------
