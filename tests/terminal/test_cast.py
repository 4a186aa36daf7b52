"""The asciinema v2 cast format on its own: writing, reading back, validating, replaying."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bar.errors import CorruptFile, NotFound, UnsupportedVersion, UsageError
from bar.redact import Scrubber
from bar.redact.stream import StreamScrubber
from bar.terminal import cast as cast_module
from bar.terminal.cast import CastWriter, read_cast, replay_cast


def write_cast(path: Path, *lines: object) -> Path:
    """One JSON value per line; a str is written as it is (to make broken lines)."""
    path.write_text("".join(f"{x if isinstance(x, str) else json.dumps(x)}\n" for x in lines))
    return path


HEADER = {"version": 2, "width": 80, "height": 24, "timestamp": 1700000000, "env": {}}


def test_cast_writer_decodes_utf8_across_writes(tmp_path: Path) -> None:
    writer = CastWriter(tmp_path / "c.cast", width=80, height=24)
    euro = "€".encode()
    writer.output(b"price " + euro[:1])
    writer.output(euro[1:] + b" \xff")
    writer.resize(100, 30)
    writer.output(b"\xe2\x82")  # cut short at the end: replaced, not lost
    writer.close()
    cast = read_cast(tmp_path / "c.cast")
    assert cast.output == "price € \ufffd\ufffd"
    assert [(e.code, e.data) for e in cast.events][-2:] == [("r", "100x30"), ("o", "\ufffd")]


class Clock:
    """Stands in for the cast module's ``time``: monotonic seconds set by the test."""

    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return 1700000000.0


def test_cast_events_carry_the_time_their_bytes_were_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    monkeypatch.setattr(cast_module, "time", clock)
    path = tmp_path / "c.cast"
    writer = CastWriter(path, width=80, height=24, scrubber=StreamScrubber(Scrubber(["hunter2"])))

    def at(now: float) -> list[list[object]]:
        clock.now = 100.0 + now
        return [json.loads(line) for line in path.read_text().splitlines()[1:]]

    at(1.0)
    writer.output(b"one\r\nhunt")  # "hunt" could begin the secret: held back
    assert at(2.5) == [[1.0, "o", "one\r\n"]]  # on disk already, at its time
    writer.output(b"er2 two\r\nsk")
    assert at(4.0)[1:] == [[1.0, "o", "***"], [2.5, "o", " two\r\n"]]
    writer.resize(100, 30)  # "sk" (maybe "sk-...") is still held
    clock.now = 105.0
    writer.close()
    assert at(6.0)[3:] == [[4.0, "r", "100x30"], [4.0, "o", "sk"]]  # never back in time
    assert read_cast(path).output == "one\r\n*** two\r\nsk"


def test_cast_writer_stamps_what_a_plain_filter_held_with_its_last_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class HoldsEverything:
        def __init__(self) -> None:
            self.held = b""

        def feed(self, chunk: bytes) -> bytes:
            self.held += chunk
            return b""

        def flush(self) -> bytes:
            return self.held

    clock = Clock()
    monkeypatch.setattr(cast_module, "time", clock)
    writer = CastWriter(tmp_path / "c.cast", width=80, height=24, scrubber=HoldsEverything())
    clock.now = 101.0
    writer.output(b"a")
    clock.now = 103.0
    writer.close()
    assert [(e.time, e.data) for e in read_cast(tmp_path / "c.cast").events] == [(1.0, "a")]


def test_cast_writer_is_private_and_never_writes_through_a_link(tmp_path: Path) -> None:
    writer = CastWriter(tmp_path / "c.cast", width=80, height=24)
    writer.close()
    assert (tmp_path / "c.cast").stat().st_mode & 0o777 == 0o600
    target = tmp_path / "elsewhere"
    target.write_text("untouched")
    (tmp_path / "link.cast").symlink_to(target)
    with pytest.raises(CorruptFile, match="symbolic link"):
        CastWriter(tmp_path / "link.cast", width=80, height=24)
    assert target.read_text() == "untouched"


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([], "is empty"),
        (["not json"], "line 1: not valid JSON"),
        ([[2, 80, 24]], "header is not a JSON object"),
        ([{**HEADER, "width": 0}], "width and height"),
        ([{**HEADER, "env": {"TERM": 1}}], "env must be"),
        ([HEADER, {"t": 1}], "line 2: an event must be"),
        ([HEADER, [0.1, "o"]], "line 2: an event must be"),
        ([HEADER, [-1, "o", "x"]], "line 2: event time"),
        ([HEADER, ["1", "o", "x"]], "line 2: event time"),
        ([HEADER, [1.0, "o", "x"], [0.5, "o", "y"]], "line 3: event time goes backwards"),
        ([HEADER, [1.0, "", "x"]], "event code"),
        ([HEADER, [1.0, "o", 5]], "event data"),
        ([HEADER, [1.0, "r", "wide"]], "resize event"),
    ],
)
def test_read_cast_rejects_bad_files(tmp_path: Path, lines: list[object], message: str) -> None:
    path = write_cast(tmp_path / "bad.cast", *lines)
    with pytest.raises(CorruptFile, match=message) as info:
        read_cast(path)
    assert str(path) in str(info.value)


def test_read_cast_rejects_other_versions(tmp_path: Path) -> None:
    path = write_cast(tmp_path / "v1.cast", {**HEADER, "version": 1})
    with pytest.raises(
        UnsupportedVersion, match=r"unsupported asciinema cast version 1 in .*v1\.cast"
    ):
        read_cast(path)


@pytest.mark.parametrize("version", [3, "2", 2.0, True, 0])
def test_read_cast_rejects_versions_it_does_not_know(tmp_path: Path, version: object) -> None:
    path = write_cast(tmp_path / "other.cast", {**HEADER, "version": version})
    with pytest.raises(UnsupportedVersion, match=r"asciinema cast version .* in .*other\.cast"):
        read_cast(path)


def test_read_cast_without_a_version(tmp_path: Path) -> None:
    header = {k: v for k, v in HEADER.items() if k != "version"}
    path = write_cast(tmp_path / "bare.cast", header)
    with pytest.raises(CorruptFile, match=r"no version field") as info:
        read_cast(path)
    assert str(path) in str(info.value)


def test_read_cast_torn_last_line(tmp_path: Path) -> None:
    path = write_cast(tmp_path / "torn.cast", HEADER, [0.5, "o", "ok"])
    with open(path, "a") as handle:
        handle.write('[0.7, "o", "cut sh')
    with pytest.raises(CorruptFile, match="line 3"):
        read_cast(path)


def test_read_cast_missing_file(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="does not exist"):
        read_cast(tmp_path / "nope.cast")


def test_replay_instant_plays_output_only(tmp_path: Path) -> None:
    path = write_cast(
        tmp_path / "c.cast",
        HEADER,
        [0.1, "o", "\x1b[32mhello\x1b[0m"],
        [0.2, "r", "100x30"],
        [0.3, "i", "typed"],
        [5000.0, "o", " wörld\r\n"],
    )
    out = io.BytesIO()
    header = replay_cast(path, out, instant=True)
    assert out.getvalue() == "\x1b[32mhello\x1b[0m wörld\r\n".encode()
    assert (header.width, header.height) == (80, 24)


def test_replay_caps_idle_time_and_honours_speed(tmp_path: Path) -> None:
    # Without the cap and the speed-up these would take hours; they must just finish.
    path = write_cast(tmp_path / "c.cast", HEADER, [0.0, "o", "a"], [3600.0, "o", "b"])
    out = io.BytesIO()
    replay_cast(path, out, max_idle=0.01)
    replay_cast(path, out, max_idle=None, speed=1e6)
    assert out.getvalue() == b"abab"


def test_replay_validates_before_playing(tmp_path: Path) -> None:
    path = write_cast(tmp_path / "c.cast", HEADER, [0.1, "o", "shown?"], [0.2, "o"])
    out = io.BytesIO()
    with pytest.raises(CorruptFile, match="line 3"):
        replay_cast(path, out, instant=True)
    assert out.getvalue() == b""


@pytest.mark.parametrize(("speed", "max_idle"), [(0.0, 1.0), (-1.0, None), (1.0, -0.5)])
def test_replay_rejects_bad_options(tmp_path: Path, speed: float, max_idle: float | None) -> None:
    path = write_cast(tmp_path / "c.cast", HEADER)
    with pytest.raises(UsageError):
        replay_cast(path, io.BytesIO(), speed=speed, max_idle=max_idle)


_PIECE = st.one_of(
    st.binary(max_size=40),
    st.text(max_size=20).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.sampled_from([b"\r\n", b'"\\', b"\x1b[31m", "€".encode()[:1], "€".encode()[1:], b"\xff"]),
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(pieces=st.lists(_PIECE, max_size=12))
def test_cast_lines_are_the_json_of_what_was_printed(pieces: list[bytes]) -> None:
    """Whatever bytes come, in whatever pieces: each line is what the JSON encoder writes
    (byte for byte, as asciinema spaces it), and the events add up to the bytes decoded
    as one (invalid ones replaced)."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "c.cast"
        writer = CastWriter(path, width=80, height=24)
        for piece in pieces:
            writer.output(piece)
        writer.close()
        lines = path.read_bytes().splitlines(keepends=True)
        for line in lines[1:]:
            assert line == cast_module._encode(json.loads(line))
        assert read_cast(path).output == b"".join(pieces).decode("utf-8", "replace")
