"""bar.model.records: any JSON either reads as a step or is a CorruptFile; step ids."""

from __future__ import annotations

import json
import re
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from bar.errors import CorruptFile, UsageError
from bar.model import records
from bar.model.records import (
    format_step_id,
    parse_step_ref,
)

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)

# every field a ledger line of any kind may have
FIELDS = sorted({*records._COMMON, *(key for keys in records._OWN.values() for key in keys)})


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


@SETTINGS
@given(
    rec=st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(st.sampled_from([*FIELDS, "version", "x"]), inner, max_size=6)
        ),
        max_leaves=12,
    )
)
def test_step_from_record_returns_a_step_or_corrupt_file(rec: Any) -> None:
    try:
        step = records.step_from_record(rec, "a line")
    except CorruptFile:
        return
    assert re.fullmatch(r"[0-9]{4,9}", step.step_id)
    assert step.kind in records.KINDS
    # what was accepted is written back and read again unchanged
    again = records.step_from_record(json.loads(step.to_line()), "again")
    assert again.to_record() == step.to_record()


# --- step ids ------------------------------------------------------------------------------


@SETTINGS
@given(text=st.one_of(st.text(max_size=12), st.from_regex(r"#?0*[0-9]{1,10}", fullmatch=True)))
def test_parse_step_ref_returns_a_canonical_id_or_usage_error(text: str) -> None:
    try:
        step_id = parse_step_ref(text)
    except UsageError:
        return
    assert re.fullmatch(r"[0-9]{4,9}", step_id) and int(step_id) >= 1
    assert int(step_id) == int(text.strip().lstrip("#"))


@SETTINGS
@given(number=st.integers(1, 10**9 - 1), zeros=st.integers(0, 3), hash_=st.booleans())
def test_every_way_of_writing_a_step_id_means_the_same_step(
    number: int, zeros: int, hash_: bool
) -> None:
    text = ("#" if hash_ else "") + "0" * zeros + str(number)
    assume(len(text.lstrip("#")) <= 9)
    assert parse_step_ref(text) == format_step_id(number)


# --- task names ------------------------------------------------------------------------------
