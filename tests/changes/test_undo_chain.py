"""The undo chain read from rows kept beside the ledger is the chain a replay of the ledger's
steps gives, whatever the ledger holds (undos and redos naming any step, two lines of one
id, junk) and however it changed since the rows were kept."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bar.changes import undo
from bar.model.ledger_file import Ledger
from bar.model.records import RollbackStep, Step, step_from_record

SHA = [f"0123456789abcdef0123456789abcdef0123456{i}" for i in range(4)]


def line(n: int, what: str, named: int, snap: int) -> bytes:
    rec: dict[str, Any] = {
        "step_id": f"{n:04d}",
        "kind": "run" if what in ("run", "same") else "rollback",
        "started_at": "2024-01-15T10:00:00.000Z",
        "ended_at": "2024-01-15T10:00:01.000Z",
        "duration_ms": 5,
        "snapshot_before": SHA[snap],
        "snapshot": SHA[snap] if what == "same" else SHA[(snap + 1) % 4],
        "diff_stat": {"files": 0, "additions": 0, "deletions": 0, "file_list": []},
        "artifacts": {},
    }
    if rec["kind"] == "run":
        rec.update(cmd=["true"], cwd=".", env={}, exit_code=0, policy_events=[])
    else:
        rec.update(target="step", target_step="0001", hard=False)
        if what in ("undo", "redo"):
            rec[f"{what}_of"] = f"{named:04d}"
    return json.dumps(rec).encode() + b"\n"


def replayed(path: Path) -> tuple[list[Step], list[Step]]:
    """The chain as a replay of the steps gives it (what ``undo.chain`` must agree with)."""
    done: list[Step] = []
    undone: list[Step] = []
    by_id: dict[str, Step] = {}
    for step in Ledger(path).read_all(warn=False):
        by_id[step.step_id] = step
        if isinstance(step, RollbackStep) and (step.undo_of or step.redo_of):
            source, dest = (done, undone) if step.undo_of else (undone, done)
            named = by_id.get(step.undo_of or step.redo_of or "")
            if named is not None and named in source:
                source.remove(named)
                dest.append(named)
            continue
        if step.snapshot_before != step.snapshot:
            done.append(step)
            undone.clear()
    return done, undone


_entry = st.tuples(
    st.sampled_from(["run", "same", "undo", "redo", "rollback", "junk", "again"]),
    st.integers(1, 12),
    st.integers(0, 3),
)


@settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(first=st.lists(_entry, max_size=12), then=st.lists(_entry, max_size=6), cut=st.booleans())
def test_the_kept_chain_is_the_replayed_chain(
    tmp_path_factory: Any, first: list[Any], then: list[Any], cut: bool
) -> None:
    folder = tmp_path_factory.mktemp("chain")
    path = folder / "ledger.jsonl"
    task = SimpleNamespace(
        ledger=None, paths=SimpleNamespace(kept_rows=lambda name: folder / f"{name}.rows")
    )
    number = 0

    def write(entries: list[Any]) -> None:
        nonlocal number
        with path.open("ab") as fh:
            for what, named, snap in entries:
                if what == "junk":
                    fh.write(b'{"step_id": "00x"\n')
                elif what == "again" and number:  # a second line of an id already written
                    fh.write(line(number, "run", 0, snap))
                else:
                    number += 1
                    fh.write(line(number, what, named, snap))

    for entries in (first, then):
        write(entries)
        if cut and entries is then:
            data = path.read_bytes()
            path.write_bytes(data[: len(data) * 2 // 3])
        task.ledger = Ledger(path)
        got = undo.chain(task)  # type: ignore[arg-type]
        done, undone = replayed(path)
        assert [undo._step(task, k) for k in got.done] == done  # type: ignore[arg-type]
        assert [undo._step(task, k) for k in got.undone] == undone  # type: ignore[arg-type]


def test_a_key_names_one_line_of_two_of_the_same_id(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    path.write_bytes(line(1, "run", 0, 0) + line(1, "run", 0, 2))
    steps = Ledger(path).read_all()
    task = SimpleNamespace(ledger=Ledger(path))
    keys = [undo._key(s) for s in steps]
    assert keys[0] != keys[1]
    assert [undo._step(task, k) for k in keys] == steps  # type: ignore[arg-type]
    assert step_from_record(json.loads(line(1, "run", 0, 0)), "x") == steps[0]
