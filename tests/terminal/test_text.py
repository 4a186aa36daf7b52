"""The text cleaner: what a reader of the terminal saw, from the bytes a program wrote."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bar.terminal.text import TextCleaner, clean_text


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        (b"plain\n", "plain\n"),
        (b"\x1b[1;31mred\x1b[0m and \x1b[38;2;1;2;3mrgb\x1b[m\n", "red and rgb\n"),
        (b"\x1b[?1049h\x1b[?25lscreen\x1b[?25h\n", "screen\n"),
        (b"a\x1b]0;title\x07b\x1b]2;other\x1b\\c\n", "abc\n"),
        (b"\x1b]8;;https://example.com\x1b\\link\x1b]8;;\x1b\\\n", "link\n"),
        (b"\x1bP1$r0m\x1b\\dcs gone\n", "dcs gone\n"),
        (b"\x1b(B\x1b)0\x1b#8\x1b=\x1b>\x1bMx\n", "x\n"),
        (b"abc\rX\n", "Xbc\n"),
        (b"10%\r20%\r100%\r\n", "100%\n"),
        (b"one\r\ntwo\r\n", "one\ntwo\n"),
        (b"abc\b\bX\n", "aXc\n"),
        (b"ab\b \b\n", "a\n"),
        (b"\b\bstart\n", "start\n"),
        (b"hello\rhi\x1b[K\n", "hi\n"),
        (b"hello\x1b[2K\rbye\n", "bye\n"),
        (b"hello\x1b[3D\x1b[1KX\n", "  Xlo\n"),
        (b"abcdef\x1b[4G\x1b[2P\n", "abcf\n"),
        (b"a\tb\n", "a       b\n"),
        (b"x\x1b[5Cy\n", "x     y\n"),
        (b"bell\x07 and nul\x00\n", "bell and nul\n"),
        (b"first\x1b[Asecond\n", "first\n     second\n"),  # same column, row above
        (b"row\x1b[5;3Hcol\n", "row\n  col\n"),
        (b"trailing   \n", "trailing\n"),
        (b"\xff\xfebad\n", "\ufffd\ufffdbad\n"),
        (b"no newline", "no newline\n"),
        (b"", ""),
        (b"\x1b[31m\x1b[0m", ""),
    ],
)
def test_cleaner(raw: bytes, text: str) -> None:
    assert clean_text(raw) == text


def test_cleaner_utf8_split_across_chunks() -> None:
    raw = "naïve café — 日本 🎉\n".encode()
    cleaner = TextCleaner()
    pieces = [cleaner.feed(raw[i : i + 1]) for i in range(len(raw))]
    assert "".join(pieces) + cleaner.finish() == "naïve café — 日本 🎉\n"
    assert "\ufffd" not in "".join(pieces)


def test_cleaner_escape_split_across_chunks() -> None:
    cleaner = TextCleaner()
    out = cleaner.feed(b"\x1b[3") + cleaner.feed(b"1mred\x1b]0;ti") + cleaner.feed(b"tle\x1b")
    out += cleaner.feed(b"\\x\r\nnext")
    assert out == "redx\n"
    assert cleaner.finish() == "next\n"


def test_cleaner_holds_only_the_current_line() -> None:
    cleaner = TextCleaner()
    for i in range(100_000):
        assert cleaner.feed(f"\r{i:6d} items".encode()) == ""
    assert cleaner.finish() == " 99999 items\n"


FRAGMENTS = [
    "a",
    "word ",
    "é",
    "日本",
    "\r",
    "\n",
    "\r\n",
    "\b",
    "\t",
    "\x07",
    "\x1b[31m",
    "\x1b[K",
    "\x1b[2K",
    "\x1b[1K",
    "\x1b[3D",
    "\x1b[2C",
    "\x1b[G",
    "\x1b[A",
    "\x1b[2P",
    "\x1b[3@",
    "\x1b]0;t\x07",
    "\x1b]8;;u\x1b\\",
    "\x1bP$q\x1b\\",
    "\x1b(B",
    "\x1b7",
    "\x1b8",
    "\x1b=",
    "\x9b1m",
    "\x1b",
    "\x1b[",
]


@given(
    st.lists(st.sampled_from(FRAGMENTS) | st.binary(max_size=3), max_size=40),
    st.lists(st.integers(min_value=0, max_value=400), max_size=8),
)
def test_cleaner_result_does_not_depend_on_chunking(
    parts: list[str | bytes], cuts: list[int]
) -> None:
    raw = b"".join(p.encode() if isinstance(p, str) else p for p in parts)
    whole = clean_text(raw)
    cleaner = TextCleaner()
    bounds = [0, *sorted(c for c in cuts if c < len(raw)), len(raw)]
    chunked = "".join(cleaner.feed(raw[a:b]) for a, b in itertools.pairwise(bounds))
    assert chunked + cleaner.finish() == whole
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]", whole)
    assert whole == "" or whole.endswith("\n")


@given(
    st.lists(
        st.sampled_from(["ok", "  ", "x" * 30, "\r", "\r\n", "\n", "\t", "é", "\x1b[1m", "\b"]),
        max_size=60,
    )
)
def test_whole_plain_lines_cleaned_at_once_read_as_a_character_at_a_time(
    parts: list[str],
) -> None:
    # whole lines of plain text are cleaned in one go (``_plain_lines``); fed a character
    # at a time, no whole line is ever seen at once
    text = "".join(parts)
    at_once = TextCleaner()
    slowly = TextCleaner()
    whole = at_once.feed_str(text) + at_once.finish()
    assert "".join(slowly.feed_str(ch) for ch in text) + slowly.finish() == whole


def test_plain_lines_longer_than_a_window_are_cleaned_whole() -> None:
    line = "y" * 1000 + "   \r\n"
    cleaner = TextCleaner()
    assert cleaner.feed_str(line * 2000) == ("y" * 1000 + "\n") * 2000
    assert not cleaner.holding
