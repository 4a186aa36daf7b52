"""bar.model.ledger_file: reading a ledger that holds junk, torn lines and hostile values."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from helpers import parsed_steps
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bar.model.ledger_file as ledger_module
from bar.errors import CorruptFile
from bar.git import DiffStat
from bar.model.ledger_file import Ledger
from bar.model.records import (
    Artifacts,
    ManualStep,
    RollbackStep,
    RunStep,
    Step,
    format_step_id,
)

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)

SHA_A = "0123456789abcdef0123456789abcdef01234567"
SHA_B = "89abcdef0123456789abcdef0123456789abcdef"


def make_step(n: int) -> Step:
    step_id = format_step_id(n)
    common = {
        "step_id": step_id,
        "started_at": "2024-01-15T10:00:00.000Z",
        "ended_at": "2024-01-15T10:00:01.000Z",
        "duration_ms": n * 7,
        "snapshot_before": SHA_A,
        "snapshot": SHA_B,
        "head": SHA_A,
        "diff_stat": DiffStat(files=1, additions=n, deletions=0, file_list=(f"f{n}.txt",)),
        "artifacts": Artifacts(
            patch=f"artifacts/{step_id}.patch", output=f"artifacts/{step_id}.output"
        ),
    }
    if n % 3 == 1:
        return ManualStep(**common)
    if n % 3 == 2:
        return RollbackStep(**common, target="step", target_step="0001", hard=False)
    return RunStep(
        **common,
        cmd=["sh", "-c", f"echo {n} > f{n}.txt; echo 'quotes \" and \\\\ and ü'"],
        cwd=".",
        env={"N": str(n)},
        exit_code=n % 4,
    )


# Lines a ledger must survive: arbitrary bytes, and JSON that looks like a step but is not
# one (of a newer version, of an unknown kind, with an id of the wrong type, torn).
_BAD_WHEN_HOSTILE = st.sampled_from(
    ["kind", "step_id", "version", "snapshot", "head", "commit_sha"]
)
junk_json = st.one_of(
    st.builds(
        lambda n: {"step_id": format_step_id(n), "kind": "run", "version": 99}, st.integers(1, 40)
    ),
    st.builds(lambda n: {"step_id": format_step_id(n), "kind": "bogus"}, st.integers(1, 40)),
    st.builds(lambda n: {"step_id": n, "kind": "run"}, st.integers(-5, 40)),
    st.builds(
        lambda n, key: {**make_step(n).to_record(), key: "--output=/tmp/x"},
        st.integers(1, 40),
        _BAD_WHEN_HOSTILE,
    ),
    st.builds(
        lambda n: {**make_step(n).to_record(), "artifacts": {"patch": "../../x"}},
        st.integers(1, 40),
    ),
    st.lists(st.integers(), max_size=3),
    st.text(max_size=10),
    st.integers(),
    st.none(),
).map(lambda obj: json.dumps(obj).encode())
torn = st.builds(
    lambda n, cut: make_step(n).to_line()[: max(1, cut)], st.integers(1, 40), st.integers(1, 200)
)
junk_line = st.one_of(st.binary(max_size=60), junk_json, torn)
block_sizes = st.sampled_from([5, 97, 64 * 1024])


@contextmanager
def block_size(size: int) -> Iterator[None]:
    """Read the ledger in blocks of ``size`` bytes (backwards, and into its middle), to
    cross line boundaries."""
    old = ledger_module._FIRST_BLOCK, ledger_module._BLOCK, ledger_module._PROBE
    ledger_module._FIRST_BLOCK = ledger_module._BLOCK = ledger_module._PROBE = size
    try:
        yield
    finally:
        ledger_module._FIRST_BLOCK, ledger_module._BLOCK, ledger_module._PROBE = old


def claimed_id(line: bytes) -> int | None:
    """The step id an unreadable line names (what bar must never reuse), if any."""
    try:
        rec = json.loads(line)
    except ValueError:
        return None
    value = rec.get("step_id") if isinstance(rec, dict) else None
    if isinstance(value, str) and re.fullmatch(r"[0-9]{4,9}", value):
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 10**9:
        return value
    return None


def check_reader_agrees_with_itself(path: Path, expected_min_next: int) -> list[dict[str, Any]]:
    everything = [s.to_record() for s in Ledger(path).read_all(warn=False)]
    for k in sorted({0, 1, 2, len(everything) // 2, len(everything), len(everything) + 1}):
        tail = [s.to_record() for s in Ledger(path).tail(k)]
        assert tail == (everything[-k:] if k else [])
    last = Ledger(path).last()
    assert (last.to_record() if last else None) == (everything[-1] if everything else None)
    next_id = Ledger(path).next_step_id()
    assert re.fullmatch(r"[0-9]{4,9}", next_id)
    assert int(next_id) >= expected_min_next
    if everything:
        assert int(next_id) > int(everything[-1]["step_id"])
    return everything


@SETTINGS
@given(
    n=st.integers(0, 10),
    junk=st.lists(st.tuples(st.integers(0, 10), junk_line), max_size=6),
    final_newline=st.booleans(),
    block=block_sizes,
)
def test_junk_lines_never_hide_a_step_nor_reuse_an_id(
    tmp_path: Path,
    n: int,
    junk: list[tuple[int, bytes]],
    final_newline: bool,
    block: int,
) -> None:
    steps = [make_step(i) for i in range(1, n + 1)]
    lines: list[tuple[bytes, bool]] = [(s.to_line(), True) for s in steps]
    for where, line in junk:
        lines.insert(min(where, len(lines)), (line, False))
    content = b"\n".join(line for line, _ in lines) + (b"\n" if final_newline else b"")
    path = tmp_path / "ledger.jsonl"
    path.write_bytes(content)
    # the junk after the last valid line names ids a new step must not take
    last_valid = max((i for i, (_, ok) in enumerate(lines) if ok), default=-1)
    claims = [
        claimed_id(piece)
        for line, ok in lines[last_valid + 1 :]
        if not ok
        for piece in line.split(b"\n")
    ]
    with block_size(block):
        everything = check_reader_agrees_with_itself(path, n + 1)
        assert everything == [s.to_record() for s in steps]
        next_id = int(Ledger(path).next_step_id())
        assert next_id == max([n, *(c for c in claims if c is not None)]) + 1
        for step in steps:
            assert Ledger(path).get(step.step_id).to_record() == step.to_record()


@SETTINGS
@given(
    n=st.integers(1, 8),
    splices=st.lists(
        st.tuples(st.integers(0, 10**6), st.binary(min_size=1, max_size=30)), min_size=1, max_size=4
    ),
    block=block_sizes,
)
def test_bytes_spliced_anywhere_never_crash_and_spare_untouched_lines(
    tmp_path: Path, n: int, splices: list[tuple[int, bytes]], block: int
) -> None:
    steps = [make_step(i) for i in range(1, n + 1)]
    original = b"".join(s.to_line() + b"\n" for s in steps)
    spans = []  # (first byte, newline byte) of each line in the original
    start = 0
    for s in steps:
        end = start + len(s.to_line())
        spans.append((start, end))
        start = end + 1
    positions = sorted(((pos % (len(original) + 1), data) for pos, data in splices), reverse=True)
    content = original
    touched = set()
    for pos, data in positions:  # from the end, so positions stay those of the original
        content = content[:pos] + data + content[pos:]
        touched |= {i for i, (a, b) in enumerate(spans) if a <= pos <= b}
    path = tmp_path / "ledger.jsonl"
    path.write_bytes(content)
    with block_size(block):
        everything = check_reader_agrees_with_itself(path, 1)
    records = [s.to_record() for s in steps]
    # every untouched step comes back, in order (a touched line may still parse, as
    # another step: bytes inside a JSON string are just text)
    untouched = [rec for i, rec in enumerate(records) if i not in touched]
    assert [r for r in everything if r in untouched] == untouched
    assert len(everything) <= n
    with block_size(block):  # (and each is found by its id, the file halved or read)
        for rec in untouched:
            assert Ledger(path).get(str(rec["step_id"])).to_record() == rec


@SETTINGS
@given(
    actions=st.lists(
        st.sampled_from(["append", "append elsewhere", "junk", "rewrite", "read"]),
        max_size=12,
    )
)
def test_a_ledger_read_again_and_again_answers_as_a_fresh_reader(
    tmp_path: Path, actions: list[str]
) -> None:
    """One reader, asked again and again while steps are appended (through it or another
    reader), junk is appended, or the file is rewritten in place with the newest step
    changed (same size): its newest step, next id and recorded state are always those a
    new reader finds."""
    path = tmp_path / f"ledger-{len(list(tmp_path.iterdir()))}.jsonl"
    path.write_bytes(b"")
    kept = Ledger(path)
    n = 0
    for action in ["read", *actions, "read"]:
        if action in ("append", "append elsewhere"):
            n += 1
            (kept if action == "append" else Ledger(path)).append(make_step(n))
        elif action == "junk":
            with path.open("ab") as f:
                f.write(b'{"step_id": "0999", "kind": "bogus"}\n')
        elif action == "rewrite" and n:
            lines = path.read_bytes().split(b"\n")
            newest = max(i for i, line in enumerate(lines) if line and b"bogus" not in line)
            other = make_step(n).to_line().replace(SHA_B.encode(), SHA_A.encode())
            assert len(other) == len(lines[newest])
            lines[newest] = other
            path.write_bytes(b"\n".join(lines))
        fresh = Ledger(path)
        newest_step = kept.last()
        expected = fresh.last()
        assert (newest_step.to_record() if newest_step else None) == (
            expected.to_record() if expected else None
        )
        assert kept.next_step_id() == Ledger(path).next_step_id()
        assert kept.last_snapshot() == Ledger(path).last_snapshot()


def test_a_ledger_that_is_a_link_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "elsewhere.jsonl"
    real.write_bytes(make_step(1).to_line() + b"\n")
    link = tmp_path / "ledger.jsonl"
    link.symlink_to(real)
    for read in (lambda: Ledger(link).read_all(), lambda: Ledger(link).last()):
        with pytest.raises(CorruptFile, match="symbolic link"):
            read()
    with pytest.raises(CorruptFile, match="symbolic link"):
        Ledger(link).append(make_step(2))
    assert real.read_bytes() == make_step(1).to_line() + b"\n"


@pytest.mark.parametrize("wanted", [1, 2, 150, 299, 300])
def test_one_step_of_a_long_ledger_is_found_by_parsing_a_few_lines(
    tmp_path: Path, wanted: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # rollback --to 1 of a 100,000-step task must not parse every line: the lines bar
    # wrote name their step first, and the step is read from the nearer end
    path = tmp_path / "ledger.jsonl"
    ledger = Ledger(path)
    for n in range(1, 301):
        ledger.append(make_step(n))
    parsed = parsed_steps(monkeypatch)
    fresh = Ledger(path)
    assert fresh.get(f"{wanted:04d}").to_record() == make_step(wanted).to_record()
    assert len(parsed) <= 4, len(parsed)


def _bytes_read() -> int:
    """What this process has read from files so far (every read and pread counted)."""
    with open("/proc/self/io", "rb") as fh:
        fields = dict(line.split(b": ") for line in fh.read().splitlines())
    return int(fields[b"rchar"])


@pytest.mark.parametrize("wanted", [1, 2, 1234, 2500, 4999, 5000])
def test_any_step_of_a_long_ledger_is_found_in_a_few_reads(tmp_path: Path, wanted: int) -> None:
    # bar show 50000 of a 100,000-step task: the file halved until the line is found,
    # not read from its nearer end (half of it, in the middle)
    path = tmp_path / "ledger.jsonl"
    path.write_bytes(b"".join(make_step(n).to_line() + b"\n" for n in range(1, 5001)))
    ledger = Ledger(path)
    before = _bytes_read()
    found = ledger.get(format_step_id(wanted))
    read = _bytes_read() - before
    assert found.to_record() == make_step(wanted).to_record()
    assert read < path.stat().st_size // 20, read


def test_a_line_that_only_looks_like_a_later_step_is_read_all_the_same(tmp_path: Path) -> None:
    # a line claims step 9 at its start but holds step 2's id again as a later key
    # (JSON keeps the last): it is parsed, not passed over on its first words
    path = tmp_path / "ledger.jsonl"
    ledger = Ledger(path)
    ledger.append(make_step(1))
    rec = make_step(2).to_record()
    line = '{"step_id":"0009",' + json.dumps(rec, separators=(",", ":"))[1:]
    with path.open("a") as fh:
        fh.write(line + "\n")
    for n in range(3, 6):
        Ledger(path).append(make_step(n))
    assert Ledger(path).get("0002").to_record() == rec


_KEYS = st.sampled_from(["snapshot", "snapshot_before", "kind", "step_id", "PATH", 'a"snapshot'])


@SETTINGS
@given(
    n=st.integers(1, 9),
    same=st.booleans(),
    blocked=st.booleans(),
    env=st.dictionaries(_KEYS, st.sampled_from([SHA_A, SHA_B, "run", "0001"]), max_size=3),
    cut=st.integers(0, 2000),
)
def test_a_step_that_changed_nothing_is_never_mistaken_by_its_bytes(
    n: int, same: bool, blocked: bool, env: dict[str, str], cut: int
) -> None:
    # whatever its fields and whatever a caller's environment is named, a line said to be
    # an unchanging run's or hand edit's is one (or, cut short, no step at all)
    rec = make_step(n).to_record()
    if same:
        rec["snapshot"] = rec["snapshot_before"]
    if blocked:
        rec.pop("snapshot", None)
    if rec["kind"] == "run":
        rec["env"] = env
    line = ledger_module._parse(json.dumps(rec).encode(), "test").to_line()  # (as bar writes)
    for candidate in (line, line[:cut]):
        if not ledger_module.surely_unchanged(candidate):
            continue
        try:
            step = ledger_module._parse(candidate, "test")
        except CorruptFile:
            continue
        assert step.kind in ("run", "manual") and step.snapshot == step.snapshot_before
    unchanged = rec["kind"] in ("run", "manual") and same and not blocked
    if unchanged and not ({"snapshot", "snapshot_before"} & set(env)):
        assert ledger_module.surely_unchanged(line)  # (what bar writes is known)
