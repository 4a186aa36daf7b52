"""The shapes docs/json.md documents, read from the document itself, and a checker.

A shape is written as JSON: a type name (``"str"``, ``"int"``, ``"num"``, ``"bool"``,
``"null"``, ``"any"``, ``"$name"`` for a named shape; alternatives joined by ``|``), a
one-element list (a list of that), or an object (its keys; ``"key?"`` may be absent;
``"*"`` stands for any other key; ``"$extends": "$name"`` takes in that shape's keys). Each shape in the document is a fenced ``json`` block
right after a heading: `` ### `bar log --json` `` documents a command, ``### $step-run``
a named shape.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

DOC = Path(__file__).resolve().parents[2] / "docs" / "json.md"
_BLOCK = re.compile(r"^```json\n(.*?)^```", re.M | re.S)


def shapes(doc: Path = DOC) -> dict[str, Any]:
    """Heading (`` `bar log --json` `` without the backticks, or ``$name``) -> shape: the
    first ``json`` block of each ``###`` section."""
    found: dict[str, Any] = {}
    for section in re.split(r"^### ", doc.read_text(), flags=re.M)[1:]:
        heading, _, body = section.partition("\n")
        block = _BLOCK.search(body)
        if block:
            found[heading.strip().strip("`")] = json.loads(block.group(1))
    return found


class Mismatch(AssertionError):
    pass


def check(value: Any, shape: Any, defs: dict[str, Any], where: str = "$") -> None:
    """Raise Mismatch naming the place where ``value`` is not of ``shape``."""
    if isinstance(shape, str):
        errors = []
        for alt in shape.split("|"):
            try:
                _scalar(value, alt.strip(), defs, where)
                return
            except Mismatch as exc:
                errors.append(str(exc))
        raise Mismatch(" / ".join(errors))
    if isinstance(shape, list):
        if not isinstance(value, list):
            raise Mismatch(f"{where}: a list was documented, got {value!r:.80}")
        for i, item in enumerate(value):
            check(item, shape[0], defs, f"{where}[{i}]")
        return
    if not isinstance(value, dict):
        raise Mismatch(f"{where}: an object was documented, got {value!r:.80}")
    if "$extends" in shape:
        shape = {**defs[shape["$extends"]], **{k: v for k, v in shape.items() if k != "$extends"}}
    keys = {k.rstrip("?"): k for k in shape if k != "*"}
    for key, spec in keys.items():
        if key in value:
            check(value[key], shape[spec], defs, f"{where}.{key}")
        elif not spec.endswith("?"):
            raise Mismatch(f"{where}: documented key {key!r} is missing")
    for key in value:
        if key not in keys:
            if "*" not in shape:
                raise Mismatch(f"{where}: key {key!r} is not documented")
            check(value[key], shape["*"], defs, f"{where}.{key}")


def _scalar(value: Any, name: str, defs: dict[str, Any], where: str) -> None:
    if name.startswith("$"):
        check(value, defs[name], defs, where)
        return
    ok = {
        "str": isinstance(value, str),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "num": isinstance(value, int | float) and not isinstance(value, bool),
        "bool": isinstance(value, bool),
        "null": value is None,
        "any": True,
    }.get(name)
    if ok is None:
        raise KeyError(f"unknown type {name!r} in docs/json.md")
    if not ok:
        raise Mismatch(f"{where}: {name} was documented, got {value!r:.80}")
