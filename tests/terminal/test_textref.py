"""A pty step's recording that refers to its text: whatever is printed, in whatever
pieces, the recording reads back byte for byte, the text file is the text bar derives
from the stream, every line written so far reads back (a crash loses nothing written),
and a broken reference is a clear error."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bar.errors import BarError, CorruptFile, NotFound
from bar.redact import Scrubber
from bar.redact.stream import StreamScrubber
from bar.terminal import cast as cast_module
from bar.terminal.cast import CastWriter, full_cast, read_cast, text_of_cast

FRAGMENTS = [
    "plain line\r\n",
    "\r\n",
    "\n",
    "\r",
    "  \t",
    "\x1b[31m",
    "\x1b[0m",
    "\x1b[2K",
    "\x1b[3D",
    "\x1b[A",
    "\x1b[5;3H",
    "\x1b]0;title\x07",
    "\b",
    "é日本",
    "x" * 40,
    "progress 50%\rprogress 100%",
    "sk-",
    "trailing   ",
]
_PIECE = st.one_of(
    st.lists(st.sampled_from(FRAGMENTS), max_size=6).map(lambda f: "".join(f).encode()),
    st.binary(max_size=12),
)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    pieces=st.lists(_PIECE, max_size=25),
    resizes=st.sets(st.integers(0, 25), max_size=3),
    scrubbed=st.booleans(),
)
def test_the_recording_reads_back_whole_and_the_text_is_the_derived_text(
    pieces: list[bytes], resizes: set[int], scrubbed: bool
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        cast, text = Path(folder) / "0001.cast", Path(folder) / "0001.output"

        # (the text is scrubbed again whether the stream was or not, as text_of_cast does)
        writer = CastWriter(
            cast,
            width=80,
            height=24,
            scrubber=StreamScrubber(Scrubber()) if scrubbed else None,
            text=text,
            text_scrubber=StreamScrubber(Scrubber()),
        )
        for n, piece in enumerate(pieces):
            writer.output(piece)
            if n in resizes:
                writer.resize(100, 30)
            # every line written so far reads back: a bar killed here loses none of it
            written = cast.read_bytes()
            partial = cast.with_name("0002.cast")  # (its header names 0001.output)
            partial.write_bytes(written[: written.rfind(b"\n") + 1])
            read_cast(partial)
        writer.close()
        raw = b"".join(pieces)
        printed = Scrubber().scrub_bytes(raw) if scrubbed else raw
        assert read_cast(cast).output == printed.decode("utf-8", "replace")
        whole = Path(folder) / "whole.cast"
        whole.write_bytes(b"".join(full_cast(cast)))
        assert text.read_bytes() == b"".join(text_of_cast(whole))
        for line in whole.read_bytes().splitlines(keepends=True):
            assert line == cast_module._encode(json.loads(line))  # asciinema's own spacing


def test_a_plain_line_is_one_reference_and_escapes_stay_in_the_recording(
    tmp_path: Path,
) -> None:
    writer = CastWriter(tmp_path / "0001.cast", width=80, height=24, text=tmp_path / "0001.output")
    writer.output(b"first line\r\n")
    writer.output(b"second line\r\n")  # (the same frame: the same event)
    time.sleep(0.05)
    writer.output(b"\x1b[32mok\x1b[0m  tests passed\r\n")
    writer.close()
    lines = (tmp_path / "0001.cast").read_text().splitlines()
    assert json.loads(lines[0])["text_file"] == "0001.output"
    assert [json.loads(x)[2] for x in lines[1:]] == [[25], ["\x1b[32m", 2, "\x1b[0m", 16]]
    assert (tmp_path / "0001.output").read_text() == (
        "=== STDOUT ===\nfirst line\nsecond line\nok  tests passed\n=== STDERR ===\n"
    )


def test_a_prompt_waits_for_its_line_at_most_a_second(tmp_path: Path) -> None:
    writer = CastWriter(tmp_path / "0001.cast", width=80, height=24, text=tmp_path / "0001.output")
    writer.output(b"Password: ")
    writer.tick()
    assert len((tmp_path / "0001.cast").read_text().splitlines()) == 1  # held: no line yet
    time.sleep(1.1)
    writer.tick()
    lines = (tmp_path / "0001.cast").read_text().splitlines()
    assert json.loads(lines[1])[2] == "Password: "  # written as it stands
    writer.output(b"secret typed\r\nwelcome\r\n")
    writer.close()
    assert read_cast(tmp_path / "0001.cast").output == "Password: secret typed\r\nwelcome\r\n"


def test_a_line_waits_no_longer_than_its_frame(tmp_path: Path) -> None:
    cast = tmp_path / "0001.cast"
    writer = CastWriter(cast, width=80, height=24, text=tmp_path / "0001.output")
    writer.output(b"done\r\n")
    time.sleep(0.05)
    writer.tick()  # (the step's loop, which asks at every turn)
    assert json.loads(cast.read_text().splitlines()[1])[2] == [6]
    writer.close()


def test_held_output_comes_before_a_resize(tmp_path: Path) -> None:
    writer = CastWriter(tmp_path / "0001.cast", width=80, height=24, text=tmp_path / "0001.output")
    writer.output(b"drawing")
    writer.resize(120, 40)
    writer.output(b" done\r\n")
    writer.close()
    events = read_cast(tmp_path / "0001.cast").events
    assert [(e.code, e.data) for e in events] == [
        ("o", "drawing"),
        ("r", "120x40"),
        ("o", " done\r\n"),
    ]


def _referring_cast(tmp_path: Path) -> Path:
    writer = CastWriter(tmp_path / "0001.cast", width=80, height=24, text=tmp_path / "0001.output")
    writer.output(b"some text of the step\r\n")
    writer.close()
    return tmp_path / "0001.cast"


def test_a_recording_whose_text_is_gone_or_short_says_so(tmp_path: Path) -> None:
    cast = _referring_cast(tmp_path)
    text = tmp_path / "0001.output"
    text.write_text("=== STDOUT ===\nsome\n")
    with pytest.raises(CorruptFile, match="refers past the end of its text"):
        read_cast(cast)
    text.write_text("not an output file\n")
    with pytest.raises(CorruptFile, match="does not begin with === STDOUT ==="):
        read_cast(cast)
    text.unlink()
    with pytest.raises(NotFound, match=r"refers to its text 0001\.output, which does not exist"):
        read_cast(cast)
    (tmp_path / "elsewhere").write_text("=== STDOUT ===\nsome text of the step\n")
    text.symlink_to(tmp_path / "elsewhere")  # bar's files are never read through a link
    with pytest.raises(BarError, match=r"cannot read .*0001\.output"):
        read_cast(cast)


@pytest.mark.parametrize(
    ("header", "event", "message"),
    [
        ({}, [0.1, "o", [5]], "event data must be a string"),  # no text named
        ({"text_file": "../x.output"}, [0.1, "o", [5]], "must name a step's output file"),
        ({"text_file": "0001.output"}, [0.1, "o", [0]], "strings or non-zero counts"),
        ({"text_file": "0001.output"}, [0.1, "o", [True]], "strings or non-zero counts"),
        ({"text_file": "0001.output"}, [0.1, "r", [5]], "event data must be a string"),
    ],
)
def test_a_bad_reference_is_a_clear_error(
    tmp_path: Path, header: dict[str, str], event: list[object], message: str
) -> None:
    (tmp_path / "0001.output").write_text("=== STDOUT ===\nhello\n=== STDERR ===\n")
    head = {"version": 2, "width": 80, "height": 24, **header}
    cast = tmp_path / "0001.cast"
    cast.write_text(json.dumps(head) + "\n" + json.dumps(event) + "\n")
    with pytest.raises(CorruptFile, match=message):
        read_cast(cast)
