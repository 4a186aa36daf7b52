"""bar's clock against the standard library's: the times it writes read back exactly."""

from __future__ import annotations

import calendar
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bar.base.clock import iso_of, ms_between


@given(st.integers(-2_208_988_800_000, 253_402_300_799_999))
def test_a_time_read_back_equals_the_standard_library_reading(ms: int) -> None:
    iso = iso_of(ms * 1_000_000)
    whole = calendar.timegm(time.strptime(iso[:19], "%Y-%m-%dT%H:%M:%S"))
    assert iso[:19] == time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))
    assert ms_between(iso_of(0), iso) == max(0, ms)


@pytest.mark.parametrize(
    "bad",
    [
        "2026-02-29T00:00:00.000Z",
        "2026-13-01T00:00:00.000Z",
        "+026-01-01T00:00:00.000Z",
        "2026-01-01 00:00:00.000Z",
        "2026-01-01T24:00:00.000Z",
        "",
        "yesterday",
    ],
)
def test_a_time_bar_did_not_write_counts_as_unreadable(bad: str) -> None:
    assert ms_between(bad, "2026-01-01T00:00:00.000Z") == 0
    assert ms_between("2024-02-29T00:00:00.000Z", "2024-03-01T00:00:00.000Z") == 86_400_000
