"""bar.ledger.rows: rows kept beside the ledger are used only while they are the ledger's.

Whatever happens to the ledger (steps appended, junk or torn lines, a rewrite by hand or by
``bar doctor --repair``, a cut) and to the kept rows (torn, planted, made by another bar),
the rows given are those made from the ledger as it is now."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_jsonl import SETTINGS, junk_line, make_step

from bar.ledger import rows as rows_module
from bar.model.ledger_file import Ledger
from bar.model.records import Step


class Maker:
    """A row maker that counts the steps it is given."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, step: Step) -> list[Any]:
        self.calls += 1
        return [step.step_id, step.kind, step.duration_ms, step.started_at]


def fresh(path: Path) -> list[list[Any]]:
    """The rows as made from every readable line, nothing kept."""
    make = Maker()
    return [make(step) for step in Ledger(path).read_all(warn=False)]


def given_rows(path: Path, tag: str = "t/1") -> tuple[list[list[Any]], int]:
    make = Maker()
    kept = rows_module.rows(Ledger(path), path.with_suffix(".rows"), make, tag, fits)
    return kept, make.calls


def fits(row: list[Any]) -> bool:
    return len(row) == 4 and isinstance(row[0], str)


def write(path: Path, *numbers: int) -> None:
    with path.open("ab") as fh:
        for n in numbers:
            fh.write(make_step(n).to_line() + b"\n")


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.jsonl"
    write(path, *range(1, 31))
    return path


def test_rows_are_kept_and_made_only_for_new_steps(ledger: Path) -> None:
    got, made = given_rows(ledger)
    assert got == fresh(ledger) and made == 30
    assert ledger.with_suffix(".rows").exists()
    assert given_rows(ledger) == (got, 0)
    write(ledger, 31, 32)
    got, made = given_rows(ledger)
    assert got == fresh(ledger) and made == 2 and len(got) == 32


def test_a_rewritten_ledger_has_its_rows_made_again(ledger: Path) -> None:
    given_rows(ledger)
    data = ledger.read_bytes()
    # the same length, one step's duration changed: only the digest can tell
    changed = data.replace(b'"duration_ms":7,', b'"duration_ms":8,', 1)
    assert changed != data and len(changed) == len(data)
    ledger.write_bytes(changed)
    got, made = given_rows(ledger)
    assert made == 30 and got == fresh(ledger) and got[0][2] == 8


def test_a_cut_ledger_has_its_rows_made_again(ledger: Path) -> None:
    given_rows(ledger)
    lines = ledger.read_bytes().splitlines(keepends=True)
    ledger.write_bytes(b"".join(lines[:10]))
    got, made = given_rows(ledger)
    assert got == fresh(ledger) and len(got) == 10 and made == 10


def test_rows_of_another_maker_or_bar_are_not_used(
    ledger: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    given_rows(ledger, "t/1")
    assert given_rows(ledger, "t/2")[1] == 30
    import bar

    monkeypatch.setattr(bar, "__version__", "99.0")
    assert given_rows(ledger, "t/2")[1] == 30


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[: len(data) // 2],
        lambda data: b"",
        lambda data: b"garbage\n[[1]]\n",
        lambda data: data.replace(b'"rows":30', b'"rows":29'),
        lambda data: data.replace(b'"0002"', b'"0002"]'),
        lambda data: data.replace(b"[[", b"[{", 1),
        lambda data: data.replace(b'[["0001"', b"[[1", 1),
    ],
    ids=["torn", "empty", "garbage", "wrong-count", "bad-json", "not-a-row", "malformed-row"],
)
def test_damaged_rows_are_made_again(ledger: Path, damage: Any) -> None:
    given_rows(ledger)
    kept = ledger.with_suffix(".rows")
    kept.write_bytes(damage(kept.read_bytes()))
    got, made = given_rows(ledger)
    assert got == fresh(ledger) and made == 30
    assert given_rows(ledger) == (got, 0)  # (and kept again)


def test_a_link_in_place_of_the_rows_is_neither_read_nor_written_through(
    ledger: Path, tmp_path: Path
) -> None:
    given_rows(ledger)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(ledger.with_suffix(".rows").read_bytes())
    ledger.with_suffix(".rows").unlink()
    os.symlink(elsewhere, ledger.with_suffix(".rows"))
    before = elsewhere.read_bytes()
    write(ledger, 31)
    got, made = given_rows(ledger)
    assert got == fresh(ledger) and made == 31
    assert elsewhere.read_bytes() == before
    assert not ledger.with_suffix(".rows").is_symlink()


def test_rows_are_not_kept_past_an_unreadable_or_unfinished_line(ledger: Path) -> None:
    with ledger.open("ab") as fh:
        fh.write(b"{not json\n")
    write(ledger, 31)
    got, made = given_rows(ledger)
    assert got == fresh(ledger) and made == 31
    header = json.loads(ledger.with_suffix(".rows").read_bytes().split(b"\n")[0])
    assert header["rows"] == 30 and header["lines"] == 30
    assert given_rows(ledger)[1] == 1  # the step after the junk, made each time
    # a line still being written is shown, and kept once it is whole
    with ledger.open("ab") as fh:
        fh.write(make_step(32).to_line()[:-9])
    assert given_rows(ledger)[0] == fresh(ledger)


def test_an_unfinished_last_line_is_kept_once_whole(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    write(path, 1, 2)
    with path.open("ab") as fh:
        fh.write(make_step(3).to_line())  # (whole but for its newline)
    assert given_rows(path) == (fresh(path), 3)
    with path.open("ab") as fh:
        fh.write(b"\n")
    assert given_rows(path) == (fresh(path), 1)
    assert given_rows(path) == (fresh(path), 0)


def test_warnings_name_the_line_as_an_uncached_read_does(
    ledger: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    given_rows(ledger)
    with ledger.open("ab") as fh:
        fh.write(b"{not json\n")
    capfd.readouterr()
    given_rows(ledger)
    assert f"skipping line 31 of {ledger}" in capfd.readouterr().err


# what may happen to a ledger between two reads
_change = st.one_of(
    st.tuples(st.just("append"), st.integers(1, 5)),
    st.tuples(st.just("junk"), junk_line),
    st.tuples(st.just("cut"), st.integers(0, 4000)),
    st.tuples(st.just("flip"), st.integers(0, 4000)),
    st.tuples(st.just("drop-rows"), st.none()),
)


@SETTINGS
@given(changes=st.lists(_change, max_size=8))
def test_rows_always_match_the_ledger_as_it_is(tmp_path_factory: Any, changes: list[Any]) -> None:
    path = tmp_path_factory.mktemp("rows") / "ledger.jsonl"
    write(path, 1, 2, 3)
    number = 3
    for what, arg in changes:
        if what == "append":
            write(path, *range(number + 1, number + 1 + arg))
            number += arg
        elif what == "junk":
            with path.open("ab") as fh:
                fh.write(arg + b"\n")
        elif what == "cut":
            data = path.read_bytes()
            path.write_bytes(data[: arg % (len(data) + 1)])
        elif what == "flip":
            data = bytearray(path.read_bytes())
            if data:
                data[arg % len(data)] ^= 0x01
            path.write_bytes(bytes(data))
        else:
            path.with_suffix(".rows").unlink(missing_ok=True)
        assert given_rows(path)[0] == fresh(path)


def test_a_step_holding_a_lone_surrogate_is_kept(tmp_path: Path) -> None:
    """A command line that was not UTF-8 reads back from its ledger line's ``\\udc80``."""
    path = tmp_path / "ledger.jsonl"
    rec = make_step(3).to_record()
    rec["cmd"] = ["echo", "caf\udce9"]
    path.write_bytes(json.dumps(rec).encode() + b"\n")

    def make(step: Step) -> list[Any]:
        return [step.step_id, step.cmd[1]]  # type: ignore[union-attr]

    for _ in range(2):
        got = rows_module.rows(Ledger(path), path.with_suffix(".rows"), make, "t", fits_two)
        assert got == [["0003", "caf\udce9"]]
    assert json.loads(path.with_suffix(".rows").read_bytes().split(b"\n")[0])["rows"] == 1


def fits_two(row: list[Any]) -> bool:
    return len(row) == 2
