"""bar.base.migrate: the registry brings any file to its current version or names the file."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bar.base import migrate
from bar.errors import CorruptFile

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)


@SETTINGS
@given(
    kind=st.sampled_from(sorted(migrate.CURRENT)),
    version=st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-3, 200),
        st.floats(),
        st.text(max_size=4),
        st.lists(st.integers(), max_size=2),
    ),
    has_version=st.booleans(),
    default=st.one_of(st.none(), st.integers(0, 3)),
    rest=st.dictionaries(st.text(max_size=5), scalars, max_size=4),
)
def test_upgrade_reaches_the_current_version_or_names_the_file(
    kind: str, version: Any, has_version: bool, default: int | None, rest: dict[str, Any]
) -> None:
    data = {k: v for k, v in rest.items() if k != "version"}
    if has_version:
        data["version"] = version
    current, label = migrate.CURRENT[kind]
    try:
        out = migrate.upgrade(kind, dict(data), "/p/file", default=default)
    except CorruptFile as exc:
        assert "/p/file" in str(exc) and label in str(exc)
        return
    assert out["version"] == current if "version" in out else default == current
    if data.get("version", default) == current:  # nothing to migrate: nothing changed
        assert {k: v for k, v in out.items() if k != "version"} == {
            k: v for k, v in data.items() if k != "version"
        }


# --- -e NAME=VALUE ----------------------------------------------------------------------------
