"""A base for small records on ``bar hook``'s path, where dataclasses cost too much.

``import dataclasses`` pulls in ``inspect`` and costs about 11 ms, more than everything
else ``bar hook`` imports when it answers an agent without a running step (measured in
docs/internals/fast.md, "Start-up"). A record here declares its fields as
``__slots__`` and a typed ``__init__``; equality, hashing and ``repr`` come from the
slots. Records are treated as immutable by convention.
"""

from __future__ import annotations


class Slotted:
    __slots__ = ()

    def _fields(self) -> tuple[object, ...]:
        names: tuple[str, ...] = self.__slots__
        return tuple(getattr(self, name) for name in names)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Slotted)
            and type(other) is type(self)
            and (self._fields() == other._fields())
        )

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._fields()))

    def __repr__(self) -> str:
        names: tuple[str, ...] = self.__slots__
        body = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{type(self).__name__}({body})"
