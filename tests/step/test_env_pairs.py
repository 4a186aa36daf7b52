"""bar run -e NAME=VALUE: accepted pairs give usable variables."""

from __future__ import annotations

import re
import subprocess

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bar.cli.commands.run import env_from_pairs
from bar.errors import UsageError

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)

env_chars = st.sampled_from([*"AZaz09_=-. ", "é", "\x00", "²", "\n"])

pair_text = st.one_of(
    st.text(env_chars, max_size=10),
    st.builds(
        lambda k, v: f"{k}={v}", st.text(env_chars, max_size=4), st.text(env_chars, max_size=4)
    ),
)


@SETTINGS
@given(pairs=st.lists(st.one_of(pair_text, st.text(max_size=10)), max_size=4))
def test_env_pairs_give_usable_variables_or_usage_error(pairs: list[str]) -> None:
    try:
        env = env_from_pairs(pairs)
    except UsageError as exc:
        assert "-e" in str(exc)
        return
    for name, value in env.items():
        assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name), name
        assert "\x00" not in value
    # and a child process really gets them
    if env:
        res = subprocess.run(["env", "-0"], env=env, capture_output=True, check=True)
        got = dict(item.split("=", 1) for item in res.stdout.decode().split("\0") if item)
        for name, value in env.items():
            assert got[name] == value


@SETTINGS
@given(
    name=st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True),
    value=st.text(max_size=10).filter(lambda v: "\x00" not in v),
)
def test_env_pairs_keep_every_value(name: str, value: str) -> None:
    assert env_from_pairs([f"{name}={value}"]) == {name: value}
