"""bar.config: any YAML value either parses to a Config or is a ConfigError naming the key."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bar.ledger as ledger_module
from bar import config, records
from bar.errors import ConfigError
from bar.git import DiffStat
from bar.ledger import Ledger
from bar.records import (
    Artifacts,
    ManualStep,
    RollbackStep,
    RunStep,
    Step,
    format_step_id,
)

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)

# every field a ledger line of any kind may have
FIELDS = sorted({*records._COMMON, *(key for keys in records._OWN.values() for key in keys)})

SHA_A = "0123456789abcdef0123456789abcdef01234567"
SHA_B = "89abcdef0123456789abcdef0123456789abcdef"


def make_step(n: int) -> Step:
    step_id = format_step_id(n)
    common = {
        "step_id": step_id,
        "started_at": "2024-01-15T10:00:00.000Z",
        "ended_at": "2024-01-15T10:00:01.000Z",
        "duration_ms": n * 7,
        "snapshot_before": SHA_A,
        "snapshot": SHA_B,
        "head": SHA_A,
        "diff_stat": DiffStat(files=1, additions=n, deletions=0, file_list=(f"f{n}.txt",)),
        "artifacts": Artifacts(
            patch=f"artifacts/{step_id}.patch", output=f"artifacts/{step_id}.output"
        ),
    }
    if n % 3 == 1:
        return ManualStep(**common)
    if n % 3 == 2:
        return RollbackStep(**common, target="step", target_step="0001", hard=False)
    return RunStep(
        **common,
        cmd=["sh", "-c", f"echo {n} > f{n}.txt; echo 'quotes \" and \\\\ and ü'"],
        cwd=".",
        env={"N": str(n)},
        exit_code=n % 4,
    )


# Lines a ledger must survive: arbitrary bytes, and JSON that looks like a step but is not
# one (of a newer version, of an unknown kind, with an id of the wrong type, torn).
_BAD_WHEN_HOSTILE = st.sampled_from(
    ["kind", "step_id", "version", "snapshot", "head", "commit_sha"]
)
junk_json = st.one_of(
    st.builds(
        lambda n: {"step_id": format_step_id(n), "kind": "run", "version": 99}, st.integers(1, 40)
    ),
    st.builds(lambda n: {"step_id": format_step_id(n), "kind": "bogus"}, st.integers(1, 40)),
    st.builds(lambda n: {"step_id": n, "kind": "run"}, st.integers(-5, 40)),
    st.builds(
        lambda n, key: {**make_step(n).to_record(), key: "--output=/tmp/x"},
        st.integers(1, 40),
        _BAD_WHEN_HOSTILE,
    ),
    st.builds(
        lambda n: {**make_step(n).to_record(), "artifacts": {"patch": "../../x"}},
        st.integers(1, 40),
    ),
    st.lists(st.integers(), max_size=3),
    st.text(max_size=10),
    st.integers(),
    st.none(),
).map(lambda obj: json.dumps(obj).encode())
torn = st.builds(
    lambda n, cut: make_step(n).to_line()[: max(1, cut)], st.integers(1, 40), st.integers(1, 200)
)
junk_line = st.one_of(st.binary(max_size=60), junk_json, torn)
block_sizes = st.sampled_from([5, 97, 64 * 1024])


@contextmanager
def block_size(size: int) -> Iterator[None]:
    """Read the ledger backwards in blocks of ``size`` bytes, to cross line boundaries."""
    old = ledger_module._BLOCK
    ledger_module._BLOCK = size
    try:
        yield
    finally:
        ledger_module._BLOCK = old


def claimed_id(line: bytes) -> int | None:
    """The step id an unreadable line names (what bar must never reuse), if any."""
    try:
        rec = json.loads(line)
    except ValueError:
        return None
    value = rec.get("step_id") if isinstance(rec, dict) else None
    if isinstance(value, str) and re.fullmatch(r"[0-9]{4,9}", value):
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 10**9:
        return value
    return None


def check_reader_agrees_with_itself(path: Path, expected_min_next: int) -> list[dict[str, Any]]:
    everything = [s.to_record() for s in Ledger(path).read_all(warn=False)]
    for k in sorted({0, 1, 2, len(everything) // 2, len(everything), len(everything) + 1}):
        tail = [s.to_record() for s in Ledger(path).tail(k)]
        assert tail == (everything[-k:] if k else [])
    last = Ledger(path).last()
    assert (last.to_record() if last else None) == (everything[-1] if everything else None)
    next_id = Ledger(path).next_step_id()
    assert re.fullmatch(r"[0-9]{4,9}", next_id)
    assert int(next_id) >= expected_min_next
    if everything:
        assert int(next_id) > int(everything[-1]["step_id"])
    return everything


name_chars = st.sampled_from(
    [*"abcXYZ019", *"._-/\\@{}~^:?*[] \t\n", "é", "ß", "\u202e", "\x7f", "\x00", "\u00a0"]
)

names = st.one_of(
    st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9._@{}-]{0,20}", fullmatch=True),  # mostly accepted
    st.text(name_chars, max_size=12),
    st.text(max_size=70),
)


scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)

keys = st.sampled_from(
    [
        "version", "git", "policy", "hooks", "output", "run", "default_base", "branch_prefix",
        "enabled", "path", "pre_run", "post_run", "timeout", "color", "verbose", "record_env",
        "other",
    ]
) | st.integers(0, 3)  # fmt: skip

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


env_chars = st.sampled_from([*"AZaz09_=-. ", "é", "\x00", "²", "\n"])

pair_text = st.one_of(
    st.text(env_chars, max_size=10),
    st.builds(
        lambda k, v: f"{k}={v}", st.text(env_chars, max_size=4), st.text(env_chars, max_size=4)
    ),
)


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
