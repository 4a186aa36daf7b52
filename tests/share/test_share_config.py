"""config.yaml's ``share:`` section (docs/sharing.md): ``max_blob`` a size in bytes, given as a
whole number or with a unit; ``remote`` a remote's name or a URL that never reads as an
option. Both are the developer's alone: the repository's .bar/config.yaml cannot set them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import project_dir

from bar.errors import ConfigError
from bar.model import config

PATH = Path("/p/config.yaml")


def share(**values: Any) -> config.ShareConfig:
    return config.parse_config({"version": 1, "share": values}, PATH).share


def test_the_defaults_are_origin_and_ten_megabytes() -> None:
    assert config.parse_config({"version": 1}, PATH).share == config.ShareConfig(None, 10_000_000)
    assert config.parse_config({"version": 1, "share": None}, PATH).share.max_blob == 10_000_000
    assert share().remote is None


@pytest.mark.parametrize(
    ("given", "size"),
    [
        (1, 1),
        (1000, 1000),
        (10_000_000, 10_000_000),
        ("1000", 1000),
        ("10MB", 10_000_000),
        ("10mb", 10_000_000),
        ("10 MB", 10_000_000),
        (" 10MB ", 10_000_000),
        ("10M", 10_000_000),
        ("1.5MB", 1_500_000),
        ("512KiB", 524_288),
        ("512 kib", 524_288),
        ("2KB", 2000),
        ("2k", 2000),
        ("1MiB", 1_048_576),
        ("1GB", 1_000_000_000),
        ("1GiB", 1_073_741_824),
        ("100B", 100),
        ("100b", 100),
    ],
)
def test_max_blob_sizes(given: Any, size: int) -> None:
    assert share(max_blob=given).max_blob == size


@pytest.mark.parametrize(
    "given",
    [0, -1, "0", "0MB", "0.5", "ten", "10XB", "10 M B", "MB", "", "-5MB", "1e6", 1.5, 2.0, True,
     False, None, [], {}, "10MB extra"],
)  # fmt: skip
def test_max_blob_rejects_what_is_no_size(given: Any) -> None:
    with pytest.raises(ConfigError) as err:
        share(max_blob=given)
    assert "share.max_blob in /p/config.yaml must be a size in bytes" in str(err.value)
    assert err.value.hint is not None and "10MB" in err.value.hint


@pytest.mark.parametrize(
    "given",
    [
        "origin",
        "logs",
        "git@example.com:team/agent-logs.git",
        "https://example.com/team/agent-logs.git",
        "file:///srv/git/logs.git",
        "/srv/git/logs.git",
    ],
)
def test_remote_names_and_urls(given: str) -> None:
    assert share(remote=given).remote == given


@pytest.mark.parametrize(
    "given",
    ["", "-x", "--upload-pack=touch /tmp/x", "two words", "tab\there", "new\nline", 3, True, []],
)
def test_remote_rejects_what_could_be_an_option_or_is_no_name(given: Any) -> None:
    with pytest.raises(ConfigError) as err:
        share(remote=given)
    assert "share.remote in /p/config.yaml must name a git remote or a repository URL" in str(
        err.value
    )


def test_an_unknown_key_of_share_is_named() -> None:
    with pytest.raises(ConfigError) as err:
        share(max_size="10MB")
    assert "unknown key 'share.max_size'" in str(err.value)
    assert err.value.hint == "known keys of share: max_blob, remote"


def test_the_repositorys_file_cannot_set_share(tmp_path: Path) -> None:
    own = tmp_path / "config.yaml"
    own.write_text("version: 1\nshare:\n  max_blob: 5MB\n")
    shared = tmp_path / "repo-config.yaml"
    shared.write_text("version: 1\nshare:\n  remote: git@evil.example.com:x.git\n")
    assert config.load_config(own).share.max_blob == 5_000_000
    with pytest.raises(ConfigError) as err:
        config.load_config(own, shared=shared)
    assert "'share.remote' cannot be set in" in str(err.value)


def test_the_file_bar_init_writes_parses_to_the_defaults(inited: Path) -> None:
    written = project_dir() / "config.yaml"
    text = written.read_text()
    assert "share:" in text and "max_blob: 10MB" in text and "# remote: origin" in text
    assert config.load_config(written).share == config.ShareConfig(None, 10_000_000)
