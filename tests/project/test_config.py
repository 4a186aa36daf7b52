"""bar.model.config: any YAML value either parses to a Config or is a ConfigError naming the key."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bar.errors import ConfigError
from bar.model import config

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)

keys = st.sampled_from(
    [
        "version",
        "git",
        "policy",
        "hooks",
        "output",
        "run",
        "default_base",
        "branch_prefix",
        "enabled",
        "path",
        "pre_run",
        "post_run",
        "timeout",
        "color",
        "verbose",
        "record_env",
        "other",
    ]
) | st.integers(0, 3)

config_data = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=5),
    max_leaves=15,
)


@st.composite
def plausible_configs(draw: st.DrawFn) -> dict[Any, Any]:
    """Mostly the real shape, with wrong values in places."""
    data: dict[Any, Any] = {"version": draw(st.sampled_from([1, 1, 1, 2, 0, "1", None, 1.0]))}
    for section, fields in config._SCHEMA.items():
        if draw(st.booleans()):
            data[section] = {k: draw(config_data) for k in fields if draw(st.booleans())}
    return data


@SETTINGS
@given(data=st.one_of(config_data, plausible_configs()))
def test_parse_config_returns_config_or_config_error(data: Any) -> None:
    try:
        cfg = config.parse_config(data, Path("/p/config.yaml"))
    except ConfigError as exc:
        assert "config.yaml" in str(exc)
        return
    assert isinstance(cfg, config.Config)
    for value in (cfg.git.default_base, cfg.git.branch_prefix, cfg.policy.path):
        assert isinstance(value, str) and value and not value.startswith("-")
    assert isinstance(cfg.policy.enabled, bool)
    assert math.isfinite(cfg.hooks.timeout) and cfg.hooks.timeout > 0
    for hooks in (cfg.hooks.pre_run, cfg.hooks.post_run, cfg.run.record_env):
        assert isinstance(hooks, tuple) and all(isinstance(h, str) and h for h in hooks)


# --- the migration registry -----------------------------------------------------------------
