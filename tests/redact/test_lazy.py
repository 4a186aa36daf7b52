"""A one-shot scrub runs only the shapes its data may hold: the same result as running
every shape, and no regex compiled for data that holds none (a plain step's ledger line)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_redact import ORDINARY, PLANTED, SHAPED

from bar.redact import _NEEDLES, _SHAPES, Scrubber, _merge, _render, shape_passes


def scrub_with_every_shape(data: bytes) -> bytes:
    spans = [hit[2:] for p in shape_passes() for hit in p.scan(data, 0)]
    return _render(data, 0, 0, _merge(spans), len(data))[0] if spans else data


CORPUS = [text.encode() for text, _, _ in SHAPED] + [t.encode() for t in ORDINARY] + PLANTED


def test_every_shape_has_its_strings() -> None:
    assert sorted(_NEEDLES) == sorted(name for name, _, _ in _SHAPES)


@pytest.mark.parametrize("data", CORPUS)
def test_a_scrub_equals_one_by_every_shape(data: bytes) -> None:
    assert Scrubber().scrub_bytes(data) == scrub_with_every_shape(data)
    assert Scrubber().scrub_text(data.decode()) == scrub_with_every_shape(data).decode()


# pieces of every secret of the corpus, so that cut and glued they make near misses
PIECES = [data[i : i + n] for data in CORPUS for i in range(0, len(data), 7) for n in (5, 19)]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(PIECES), st.binary(max_size=8)), max_size=12))
def test_glued_pieces_scrub_as_every_shape_would(parts: list[bytes]) -> None:
    data = b"".join(parts)
    assert Scrubber().scrub_bytes(data) == scrub_with_every_shape(data)


def test_a_line_without_a_secret_compiles_no_shape() -> None:
    """What a plain step records (its command, its paths) costs no regex compile."""
    probe = (
        "import re, sys\n"
        "from bar.redact import Scrubber\n"
        "compiled = []\n"
        "real = re.compile\n"
        "re.compile = lambda *a, **k: compiled.append(a) or real(*a, **k)\n"
        "s = Scrubber(['hunter2-hunter2'])\n"
        'line = \'{"cmd": ["true"], "cwd": ".", "task": "fix-login"}\'\n'
        "assert s.scrub_text(line) == line\n"
        "assert s.scrub_text('pw hunter2-hunter2') == 'pw ***'\n"
        "assert s.scrub_text('see https://u:pa55word-xyz@host/x') == 'see https://u:***@host/x'\n"
        "print(len(compiled))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=30, check=True
    )
    assert proc.stdout.split() == ["1"]  # the URL's shape only
