"""Typed records that cost nothing to declare: what ``dataclasses`` does, minus its start-up.

``@dataclass`` writes and compiles each class's ``__init__``, ``__repr__``, ``__eq__``
(and, when frozen, ``__setattr__``, ``__hash__``) as the module is imported, and its
import pulls in ``inspect``: about 1 ms per class and 10 ms for the import on this
project's machines, some 60 ms of every ``bar run`` before it did anything
(docs/internals/fast.md, "Start-up"). ``@record`` gives the same classes — fields from the
annotations, defaults, ``field(default_factory=...)``, ``kw_only``, ``frozen``,
inheritance, ``__post_init__`` — but makes a class's first instances with one shared
``__init__`` and compiles the class's own only when it is made often, and shares one
``__repr__``, ``__eq__`` and ``__hash__`` among all of them.
Type checkers read it as a dataclass (``dataclass_transform``, PEP 681). It loads no
module at all, ``typing`` included: ``bar hook``, on every shell command an agent runs,
makes its records with it too.

    @record(frozen=True)
    class Point:
        x: int
        y: int = 0
        tags: list[str] = field(default_factory=list)

    replace(Point(1), y=2)  # Point(x=1, y=2, tags=[])
"""

from __future__ import annotations

TYPE_CHECKING = False  # (``typing`` itself is not loaded: ``bar hook`` makes records too)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar, dataclass_transform, overload

    _T = TypeVar("_T")
else:

    def dataclass_transform(**_: object) -> object:
        return lambda function: function

    def overload(function: object) -> object:
        return function


_MISSING: Any = object()


class FrozenError(AttributeError):
    """An attempt to change a field of a frozen record."""


class Field:
    """What ``field()`` declares; the class attribute is replaced by the default."""

    __slots__ = ("compare", "default", "factory", "kw_only", "name", "repr")

    def __init__(self, default: Any, factory: Any, repr: bool, compare: bool) -> None:
        self.default, self.factory = default, factory
        self.repr, self.compare = repr, compare
        self.name, self.kw_only = "", False


def field(
    *,
    default: Any = _MISSING,
    default_factory: Callable[[], Any] | None = None,
    repr: bool = True,
    compare: bool = True,
) -> Any:
    """A field with a default made per instance, or left out of ``repr`` or ``==``."""
    return Field(default, default_factory, repr, compare)


@overload
def record(cls: type[_T], /) -> type[_T]: ...


@overload
def record(*, frozen: bool = False, kw_only: bool = False) -> Callable[[type[_T]], type[_T]]: ...  # noqa: F811


@dataclass_transform(field_specifiers=(field,))
def record(  # noqa: F811
    cls: type[_T] | None = None, /, *, frozen: bool = False, kw_only: bool = False
) -> type[_T] | Callable[[type[_T]], type[_T]]:
    """Make ``cls`` a record (see the module docstring)."""

    def wrap(klass: type[_T]) -> type[_T]:
        return _make(klass, frozen=frozen, kw_only=kw_only)

    return wrap if cls is None else wrap(cls)


def replace(obj: _T, /, **changes: Any) -> _T:
    """A copy of the record ``obj`` with some fields changed (``dataclasses.replace``)."""
    fields: tuple[Field, ...] = obj.__record_fields__  # type: ignore[attr-defined]
    args = {f.name: getattr(obj, f.name) for f in fields}
    unknown = set(changes) - set(args)
    if unknown:
        raise TypeError(f"{type(obj).__name__} has no field {sorted(unknown)[0]!r}")
    args.update(changes)
    return type(obj)(**args)


def as_dict(obj: object) -> dict[str, Any]:
    """The record's fields and their values (not copied, nested records left as they are)."""
    fields: tuple[Field, ...] = type(obj).__record_fields__  # type: ignore[attr-defined]
    return {f.name: getattr(obj, f.name) for f in fields}


def is_record(obj: object) -> bool:
    return hasattr(type(obj), "__record_fields__")


# --- making a class a record -----------------------------------------------------


def _make(klass: type[_T], *, frozen: bool, kw_only: bool) -> type[_T]:
    cls: Any = klass  # its methods are set here
    inherited: dict[str, Field] = {}
    for base in reversed(cls.__mro__[1:]):
        for f in getattr(base, "__record_fields__", ()):
            inherited[f.name] = f
    own = cls.__dict__.get("__annotations__", {})  # noqa: RUF063 - no inspect import
    for name, annotation in own.items():
        if _is_class_var(annotation):
            continue
        value = cls.__dict__.get(name, _MISSING)
        f = value if isinstance(value, Field) else Field(value, None, True, True)
        f.name, f.kw_only = name, kw_only
        if f.factory is None and f.default is not _MISSING:
            setattr(cls, name, f.default)
        elif name in cls.__dict__:
            delattr(cls, name)  # a factory field has no class-level default
        inherited[name] = f  # a redeclared field keeps its place
    fields = tuple(inherited.values())
    cls.__record_fields__ = fields
    cls.__record_frozen__ = frozen
    if "__init__" not in cls.__dict__:
        cls.__init__ = _lazy_init(cls)
    if "__repr__" not in cls.__dict__:
        cls.__repr__ = _repr
    if "__eq__" not in cls.__dict__:
        cls.__eq__ = _eq
        if frozen:
            cls.__hash__ = _hash
        elif "__hash__" not in cls.__dict__:
            cls.__hash__ = None
    if frozen:
        cls.__setattr__ = _frozen_setattr
        cls.__delattr__ = _frozen_delattr
    _MADE.append(cls)
    return klass


# Every record class made, for ``compile_all``.
_MADE: list[type] = []


def compile_all() -> None:
    """Give every record class made so far its own compiled ``__init__`` now. For a
    process that forks commands (``bar.changes.fast.resident_daemon``): its forks then make their
    records at full speed from the first one, and share the code."""
    for cls in _MADE:
        init = cls.__dict__.get("__init__")
        if getattr(init, "__record_lazy__", False):
            try:
                setattr(cls, "__init__", _compile_init(cls))  # noqa: B010 - in place
            except TypeError:
                continue  # a declaration error: the shared __init__ reports it when called


def _is_class_var(annotation: object) -> bool:
    text = annotation if isinstance(annotation, str) else repr(annotation)
    return text.startswith(("ClassVar", "typing.ClassVar"))


# Instances of a class made by the shared ``__init__`` before its own is compiled. Compiling
# costs about 0.2 ms a class, and a command makes most of its records only a few times
# (``bar run`` some 25 classes), while reading a ledger makes thousands of a few: those
# classes get their own ``__init__`` after this many.
_COMPILE_AFTER = 32


def _lazy_init(cls: type) -> Callable[..., None]:
    """An ``__init__`` that binds arguments itself for a class's first instances, then
    compiles the class's own and puts it in its place."""
    made = 0

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        nonlocal made
        made += 1
        if made <= _COMPILE_AFTER:
            _init_slowly(cls, self, args, kwargs)
            return
        real = _compile_init(cls)
        if cls.__dict__.get("__init__") is __init__:
            setattr(cls, "__init__", real)  # noqa: B010 - it replaces itself
        real(self, *args, **kwargs)

    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    __init__.__record_lazy__ = True  # type: ignore[attr-defined]
    return __init__


def _init_slowly(cls: type, obj: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """What the compiled ``__init__`` of ``cls`` does, argument errors included."""
    fields: tuple[Field, ...] = cls.__record_fields__  # type: ignore[attr-defined]
    where = f"{cls.__qualname__}.__init__()"
    positional = [f for f in fields if not f.kw_only]
    seen_default = False
    for f in positional:
        required = f.factory is None and f.default is _MISSING
        if required and seen_default:
            raise TypeError(f"{cls.__name__}: non-default field {f.name!r} follows a default")
        seen_default = seen_default or not required
    if len(args) > len(positional):
        raise TypeError(
            f"{where} takes {len(positional) + 1} positional arguments but "
            f"{len(args) + 1} were given"
        )
    given = {f.name: value for f, value in zip(positional, args, strict=False)}
    names = {f.name for f in fields}
    for name, value in kwargs.items():
        if name not in names:
            raise TypeError(f"{where} got an unexpected keyword argument {name!r}")
        if name in given:
            raise TypeError(f"{where} got multiple values for argument {name!r}")
        given[name] = value
    missing = [
        f.name
        for f in fields
        if f.name not in given and f.factory is None and f.default is _MISSING
    ]
    if missing:
        raise TypeError(
            f"{where} missing {len(missing)} required argument(s): "
            + ", ".join(repr(name) for name in missing)
        )
    put = object.__setattr__ if cls.__record_frozen__ else setattr  # type: ignore[attr-defined]
    for f in fields:
        value = given.get(f.name, _MISSING)
        if value is _MISSING:
            value = f.factory() if f.factory is not None else f.default
        put(obj, f.name, value)
    if hasattr(cls, "__post_init__"):
        obj.__post_init__()


def _compile_init(cls: type) -> Callable[..., None]:
    fields: tuple[Field, ...] = cls.__record_fields__  # type: ignore[attr-defined]
    frozen: bool = cls.__record_frozen__  # type: ignore[attr-defined]
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    namespace: dict[str, Any] = {"_MISSING": _MISSING, "_set": object.__setattr__}
    seen_default = False
    for i, f in enumerate(fields):
        if f.factory is not None:
            namespace[f"_factory{i}"] = f.factory
            param = f"{f.name}=_MISSING"
            value = f"_factory{i}() if {f.name} is _MISSING else {f.name}"
        elif f.default is not _MISSING:
            namespace[f"_default{i}"] = f.default
            param, value = f"{f.name}=_default{i}", f.name
        else:
            param, value = f.name, f.name
            if seen_default and not f.kw_only:
                raise TypeError(f"{cls.__name__}: non-default field {f.name!r} follows a default")
        if not f.kw_only and param != f.name:
            seen_default = True
        (keyword if f.kw_only else positional).append(param)
        body.append(f"_set(self, {f.name!r}, {value})" if frozen else f"self.{f.name} = {value}")
    if hasattr(cls, "__post_init__"):
        body.append("self.__post_init__()")
    params = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    source = f"def __init__({params}):\n    " + "\n    ".join(body or ["pass"])
    exec(source, namespace)
    init: Callable[..., None] = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


def _values(obj: object, *, compare: bool = False) -> tuple[Any, ...]:
    fields: tuple[Field, ...] = type(obj).__record_fields__  # type: ignore[attr-defined]
    return tuple(getattr(obj, f.name) for f in fields if f.compare or not compare)


def _repr(self: object) -> str:
    fields: tuple[Field, ...] = type(self).__record_fields__  # type: ignore[attr-defined]
    body = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields if f.repr)
    return f"{type(self).__qualname__}({body})"


def _eq(self: object, other: object) -> Any:
    if other.__class__ is not self.__class__:
        return NotImplemented
    return _values(self, compare=True) == _values(other, compare=True)


def _hash(self: object) -> int:
    return hash(_values(self, compare=True))


def _frozen_setattr(self: object, name: str, value: object) -> None:
    raise FrozenError(f"cannot assign to field {name!r} of a frozen {type(self).__name__}")


def _frozen_delattr(self: object, name: str) -> None:
    raise FrozenError(f"cannot delete field {name!r} of a frozen {type(self).__name__}")
