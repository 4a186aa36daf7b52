"""Reading YAML (bar's config files and policies), at the speed of libyaml.

PyYAML's own parser is pure Python: bar's default policy (1,400 lines) takes it ~48 ms,
libyaml ~3 ms, and a fresh project reads it at its first command. libyaml is used where
PyYAML was built with it (its wheels are); it builds the same Python values, since both
hand their events to the same constructor and resolver. Its error messages are terser
(``did not find expected key``, where PyYAML says what it found instead), so a document
libyaml refuses is read again by PyYAML's parser, whose error (or, were they ever to
disagree, whose value) is the answer: a mistake costs the slow parse, never a worse
message.
"""

from __future__ import annotations

from typing import Any

import yaml

YAMLError = yaml.YAMLError
MarkedYAMLError = yaml.MarkedYAMLError
_FAST: Any = getattr(yaml, "CSafeLoader", None)


def load(text: str) -> Any:
    """The value of the YAML document ``text`` (YAML 1.1, safe types only); raises
    ``YAMLError`` (a ``MarkedYAMLError`` where it can say where) as PyYAML would."""
    if _FAST is not None:
        try:
            return yaml.load(text, Loader=_FAST)  # (the safe loader, in C)
        except yaml.YAMLError:
            pass  # (read again below, for PyYAML's own message)
    return yaml.load(text, Loader=yaml.SafeLoader)
