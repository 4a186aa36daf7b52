"""``bar.base.record`` against ``dataclasses``: the same class declared both ways behaves alike,
whether its instances are made by the shared ``__init__`` or by its compiled one."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import pytest

from bar.base import record as record_module
from bar.base.record import FrozenError, as_dict, field, is_record, record, replace


@pytest.fixture(autouse=True, params=["shared", "compiled"])
def init_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test twice: records made before their class compiles its ``__init__``, and
    after (from the first instance on)."""
    if request.param == "compiled":
        monkeypatch.setattr(record_module, "_COMPILE_AFTER", 0)
    return str(request.param)


def _factory_pair() -> tuple[type, type]:
    @dataclasses.dataclass
    class A:
        name: str
        tags: list[str] = dataclasses.field(default_factory=list)
        hidden: int = dataclasses.field(default=3, repr=False, compare=False)

    @record
    class B:
        name: str
        tags: list[str] = field(default_factory=list)
        hidden: int = field(default=3, repr=False, compare=False)

    return A, B


def test_init_defaults_and_factories_as_dataclasses() -> None:
    for cls in _factory_pair():
        one, two = cls("x"), cls("x")
        assert one.tags == [] and one.tags is not two.tags
        assert one.hidden == 3
        assert one == two and cls("x", ["a"]) != one
        assert cls("x", hidden=9) == one  # left out of ==
        assert "hidden" not in repr(one)
        assert cls.__hash__ is None  # mutable and compared: unhashable
    a, b = _factory_pair()
    assert repr(a("x", ["t"])).split("(", 1)[1] == repr(b("x", ["t"])).split("(", 1)[1]
    assert as_dict(b("y")) == {"name": "y", "tags": [], "hidden": 3}
    assert is_record(b("y")) and not is_record(a("y"))


def test_frozen_kw_only_inheritance_and_replace() -> None:
    @record(kw_only=True)
    class Base:
        step_id: str
        extra: dict[str, Any] = field(default_factory=dict)

    @record(kw_only=True)
    class Child(Base):
        code: int | None = None

    @record(frozen=True)
    class Point:
        x: int
        y: int = 0
        LIMIT: ClassVar[int] = 10

        def __post_init__(self) -> None:
            if self.x > self.LIMIT:
                raise ValueError("too far")

    child = Child(step_id="0001", code=3)
    assert (child.step_id, child.extra, child.code) == ("0001", {}, 3)
    with pytest.raises(TypeError):
        Child("0001")  # type: ignore[misc]
    assert replace(child, code=4) == Child(step_id="0001", code=4)
    with pytest.raises(TypeError):
        replace(child, nope=1)

    p = Point(1)
    assert p == Point(1, 0) and hash(p) == hash(Point(1, 0)) and {p, Point(1)} == {p}
    with pytest.raises(FrozenError):
        p.x = 2  # type: ignore[misc]
    with pytest.raises(AttributeError):  # FrozenError is one, as with dataclasses
        del p.y  # type: ignore[misc]
    with pytest.raises(ValueError):
        Point(11)
    assert replace(p, y=5) == Point(1, 5) and p.y == 0
    assert Point(1) != (1, 0) and Point.LIMIT == 10


def test_a_default_before_a_required_field_is_refused() -> None:
    @record
    class Bad:
        a: int = 0
        b: int  # type: ignore[misc]

    with pytest.raises(TypeError, match="follows a default"):
        Bad(1, 2)


def test_argument_errors_are_type_errors_either_way() -> None:
    @record
    class P:
        x: int
        y: int = 0
        z: list[int] = field(default_factory=list)

    for call in (lambda: P(), lambda: P(1, 2, [], 4), lambda: P(1, x=1), lambda: P(1, w=2)):
        with pytest.raises(TypeError):
            call()
    assert P(1, z=[2]) == P(x=1, y=0, z=[2]) and P(1).z is not P(1).z


def test_a_class_made_many_times_compiles_its_own_init() -> None:
    @record(frozen=True)
    class Q:
        x: int

    first = Q.__init__
    made = [Q(i) for i in range(40)]
    assert Q.__init__ is not first and [q.x for q in made] == list(range(40))
    with pytest.raises(FrozenError):
        made[-1].x = 1  # type: ignore[misc]


def test_compile_all_gives_every_class_its_own_init() -> None:
    @record(frozen=True)
    class Point:
        x: int
        y: int = 0
        tags: list[str] = field(default_factory=list)

    before = Point(1)
    record_module.compile_all()
    init = Point.__dict__["__init__"]
    assert not getattr(init, "__record_lazy__", False)
    assert Point(1) == before and Point(1).tags is not before.tags
    with pytest.raises(TypeError):
        Point()  # type: ignore[call-arg]
    record_module.compile_all()  # again: nothing left to do
    assert Point.__dict__["__init__"] is init
