"""Task names: every accepted name makes a valid branch."""

from __future__ import annotations

import subprocess
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bar.errors import UsageError
from bar.model import tasks

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)

name_chars = st.sampled_from(
    [*"abcXYZ019", *"._-/\\@{}~^:?*[] \t\n", "é", "ß", "\u202e", "\x7f", "\x00", "\u00a0"]
)

names = st.one_of(
    st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9._@{}-]{0,20}", fullmatch=True),  # mostly accepted
    st.text(name_chars, max_size=12),
    st.text(max_size=70),
)


@SETTINGS
@given(name=names)
def test_accepted_task_names_make_valid_branches(name: str, tmp_path: Path) -> None:
    try:
        assert tasks.validate_name(name) == name
    except UsageError as exc:
        assert "invalid task name" in str(exc)
        return
    for branch in (name, f"bar/{name}-AbCd_-12"):
        res = subprocess.run(
            ["git", "check-ref-format", "--branch", branch], cwd=tmp_path, capture_output=True
        )
        assert res.returncode == 0, (branch, res.stderr)


# --- config.yaml ------------------------------------------------------------------------------
