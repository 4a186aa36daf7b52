"""Every file bar reads, broken every way we can think of, and every user input gone wrong.

For each file (config.yaml, the repository's .bar/policy.yaml, state.json, task.json,
ledger.jsonl lines, the running marker, the rollback journal, artifacts) we write each
broken variant — missing, empty, truncated, of the wrong type, of an unknown version, not
UTF-8, hostile — and run the commands that read it. bar must answer with the documented
exit code (8 for a broken file), one ``bar: ...`` sentence naming the file, never a
traceback or an internal error (70), and must write nothing outside BAR_HOME and the task
worktree: the developer's checkout, HOME and a canary directory next to BAR_HOME are
compared byte for byte (and by mtime) before and after.

Building a project with tasks and steps costs more than all the checks of one variant,
so it is built once at a fixed path and copied back before each test.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import Ran, bar

from bar.changes.fast import resident, watcher
from bar.history import steps
from conftest import git

CANARY_SECRET = "CANARY-SECRET-7f3a"

# name -> argv; read-only commands first, writing ones last
COMMANDS: dict[str, tuple[str, ...]] = {
    "status": ("status",),
    "log": ("log", "-p"),
    "show": ("show", "1"),
    "tasks": ("task", "list"),
    "diff": ("diff", "--to", "2"),
    "policy-check": ("policy", "check", "--", "ls"),
    "policy-test": ("policy", "test"),
    "run": ("run", "--no-pty", "--", "sh", "-c", "echo printed; echo z > z.txt"),
    "rollback": ("rollback",),
}


@dataclass
class World:
    live: Path  # holds repo/, barhome/, canary/
    home: Path  # the test's HOME
    tid: str = ""  # the active task, with three steps
    other: str = ""  # a second task

    @property
    def repo(self) -> Path:
        return self.live / "repo"

    @property
    def barhome(self) -> Path:
        return self.live / "barhome"

    @property
    def canary(self) -> Path:
        return self.live / "canary"

    @property
    def pdir(self) -> Path:
        (pdir,) = (self.barhome / "projects").iterdir()
        return pdir

    @property
    def tdir(self) -> Path:
        return self.pdir / "tasks" / self.tid

    def path(self, file: str) -> Path:
        return {
            "config.yaml": self.pdir / "config.yaml",
            "policy.yaml": self.repo / ".bar" / "policy.yaml",
            "state.json": self.pdir / "state.json",
            "task.json": self.tdir / "task.json",
            "ledger.jsonl": self.tdir / "ledger.jsonl",
            "running.json": self.tdir / "running.json",
            "rollback.json": self.tdir / "rollback.json",
            "apply.json": self.tdir / "apply.json",
        }[file]

    def steps(self) -> list[dict[str, Any]]:
        lines = self.path("ledger.jsonl").read_bytes().splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    def last_snapshot(self) -> str:
        return str(self.steps()[-1]["snapshot"])


def _build(world: World, capfd: pytest.CaptureFixture[str]) -> None:
    repo = world.repo
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main", "--template=")  # no sample hooks: less to copy
    (repo / "README.md").write_text("hello\n")
    (repo / "src").mkdir()
    (repo / "src" / "app.py").write_text("print('app')\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "initial")
    os.chdir(repo)
    assert bar(capfd, "init").code == 0
    git(repo, "add", ".bar")
    git(repo, "commit", "-q", "-m", "add bar policy")
    res = bar(capfd, "task", "new", "other", "--json")
    assert res.code == 0, res.err
    world.other = res.json()["id"]
    res = bar(capfd, "task", "new", "t1", "--json")
    assert res.code == 0, res.err
    world.tid = res.json()["id"]
    for script in (
        "echo changed >> README.md; echo step-one-output",
        "echo new > new.txt",
        "echo newer >> new.txt; echo step-three-output",
    ):
        res = bar(capfd, "run", "--no-pty", "--", "sh", "-c", script)
        assert res.code == 0, res.err
    world.canary.mkdir()
    (world.canary / "secret.txt").write_text(CANARY_SECRET + "\n")
    (world.canary / "target.txt").write_text("canary target\n")
    for name in ("config.yaml", "task.json", "ledger.jsonl", "state.json"):
        shutil.copyfile(world.path(name), world.canary / name)


@pytest.fixture(scope="module")
def world_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bad-input")
    (root / "used").mkdir()
    return root


_built: dict[Path, tuple[str, str]] = {}


@pytest.fixture
def world(
    world_root: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> World:
    """A project with two tasks, the active one with three steps, fresh for each test."""
    live, stored = world_root / "live", world_root / "stored"
    monkeypatch.setenv("BAR_HOME", str(live / "barhome"))
    w = World(live=live, home=tmp_path / "home")
    # as on any machine: bar makes a missing sandbox.allow_write directory (~/.cache)
    (w.home / ".cache").mkdir(exist_ok=True)
    if live.exists():  # set aside the last test's copy (pytest's own clean-up removes it)
        live.rename(world_root / "used" / str(len(list((world_root / "used").iterdir()))))
    if world_root not in _built:
        live.mkdir()
        monkeypatch.chdir(live)  # restored after the test
        _build(w, capfd)
        watcher.stop_all(live / "barhome")  # (a copy has none: its socket is not copied)
        resident.stop(str(live / "barhome"))
        shutil.copytree(live, stored, symlinks=True, ignore=shutil.ignore_patterns("*.sock"))
        _built[world_root] = (w.tid, w.other)
    else:
        shutil.copytree(stored, live, symlinks=True)
    w.tid, w.other = _built[world_root]
    monkeypatch.chdir(w.repo)
    return w


# --- what "nothing written outside" means ------------------------------------------------

# Inside the repository's .git, bar (through git) may add objects, move its own refs under
# refs/bar/ (and their reflogs) and keep the task worktrees' administrative entries.
_GIT_OWNED_BY_BAR = ("objects", "refs/bar", "logs/refs/bar", "worktrees")


def outside_state(world: World) -> dict[str, tuple[str, bytes, int]]:
    """Every file, directory and link outside BAR_HOME: content and mtime."""
    state: dict[str, tuple[str, bytes, int]] = {}
    for top in (world.live, world.home):
        for dirpath, dirnames, filenames in os.walk(top):
            here = Path(dirpath)
            rel_dir = here.relative_to(top)
            if here == world.barhome:
                dirnames.clear()
                continue
            if rel_dir.parts[:2] == ("repo", ".git"):
                inner = Path(*rel_dir.parts[2:]).as_posix()
                if any(inner == p or inner.startswith(p + "/") for p in _GIT_OWNED_BY_BAR):
                    dirnames.clear()
                    continue
            for name in [*dirnames, *filenames]:
                p = here / name
                key = f"{top.name}/{p.relative_to(top)}"
                st = p.lstat()
                if p.is_symlink():
                    state[key] = ("link", os.readlink(p).encode(), st.st_mtime_ns)
                elif p.is_dir():
                    state[key] = ("dir", b"", 0)
                else:
                    state[key] = ("file", p.read_bytes(), st.st_mtime_ns)
    return state


def assert_nothing_written_outside(before: dict[str, Any], after: dict[str, Any]) -> None:
    added = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    changed = sorted(k for k in set(before) & set(after) if before[k] != after[k])
    assert (added, removed, changed) == ([], [], []), "bar wrote outside BAR_HOME"


# --- how an answer must look ----------------------------------------------------------------


def assert_clear_answer(res: Ran, code: int, names: tuple[str, ...], cmd: str) -> None:
    where = f"bar {cmd} -> {res.code}\nstdout: {res.out[-2000:]}\nstderr: {res.err}"
    assert "Traceback" not in res.err + res.out, where
    assert res.code != 70, where
    assert res.code == code, where
    lines = res.err.splitlines()
    # every line bar writes to stderr is one of its own sentences or a hint
    assert all(line.startswith(("bar: ", "hint: ")) for line in lines), where
    if code != 0:
        errors = [x for x in lines if x.startswith("bar: ") and not x.startswith("bar: warning")]
        assert errors, where
        assert any(name in errors[-1] for name in names), where
    for line in lines:
        if line.startswith("bar: warning") and names:
            assert any(name in line for name in names), where
    assert CANARY_SECRET not in res.out + res.err, where


# --- the matrix ------------------------------------------------------------------------------

Breaker = Callable[[World], None]


@dataclass(frozen=True)
class Case:
    file: str
    variant: str
    breaker: Breaker
    expect: dict[str, int]  # command -> exit code
    names: tuple[str, ...] = ()  # what the message must name (default: the file's name)
    after: Callable[[World], None] | None = None  # further checks once the commands ran

    @property
    def id(self) -> str:
        return f"{self.file}-{self.variant}"


def write(file: str, data: bytes | str) -> Breaker:
    def breaker(w: World) -> None:
        path = w.path(file)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)
        path.write_bytes(data.encode() if isinstance(data, str) else data)

    return breaker


def remove(file: str) -> Breaker:
    return lambda w: w.path(file).unlink()


def truncate(file: str, *, at_line: bool = False) -> Breaker:
    def breaker(w: World) -> None:
        data = w.path(file).read_bytes()
        end = len(data) // 2
        if at_line:
            end = data.rindex(b"\n", 0, end) + 1
        w.path(file).write_bytes(data[:end])

    return breaker


def truncate_in_a_string(file: str) -> Breaker:
    """Cut the file at its first quote past the middle: whatever the cut rules were, the
    text ends inside a quoted string (a cut between whole rules would be a valid policy)."""

    def breaker(w: World) -> None:
        data = w.path(file).read_bytes()
        w.path(file).write_bytes(data[: data.index(b"'", len(data) // 2) + 1])

    return breaker


def json_edit(file: str, edit: Callable[[World, dict[str, Any]], None]) -> Breaker:
    def breaker(w: World) -> None:
        rec = json.loads(w.path(file).read_text())
        edit(w, rec)
        w.path(file).write_text(json.dumps(rec))

    return breaker


def symlink_to_canary(file: str) -> Breaker:
    """Replace the file with a link to a copy of its valid self outside BAR_HOME."""

    def breaker(w: World) -> None:
        path = w.path(file)
        path.unlink()
        path.symlink_to(w.canary / file)

    return breaker


def then(*breakers: Breaker) -> Breaker:
    def breaker(w: World) -> None:
        for b in breakers:
            b(w)

    return breaker


def setting(key: str, value: Any) -> Callable[[World, dict[str, Any]], None]:
    def edit(w: World, rec: dict[str, Any]) -> None:
        rec[key] = value(w) if callable(value) else value

    return edit


def pwned(w: World) -> str:
    return f"--output={w.canary / 'pwned'}"


def all_cmds(code: int, *names: str) -> dict[str, int]:
    return dict.fromkeys(names, code)


_READERS = ("status", "log", "show", "tasks", "run")


def config_cases() -> list[Case]:
    f = "config.yaml"
    broken = all_cmds(8, *_READERS)
    cases = [
        Case(f, "missing", remove(f), broken),
        Case(f, "empty", write(f, ""), broken),
        # the first half of the commented default config, cut after a line, is itself a
        # valid config
        Case(f, "truncated", truncate(f, at_line=True), all_cmds(0, *_READERS)),
        Case(f, "yaml-scalar", write(f, "42\n"), broken),
        Case(f, "yaml-list", write(f, "- version\n- 1\n"), broken),
        Case(f, "section-not-mapping", write(f, "version: 1\ngit: yes\n"), broken),
        Case(f, "number-for-string", write(f, "version: 1\ngit:\n  branch_prefix: 7\n"), broken),
        Case(f, "unknown-key", write(f, "version: 1\ngti:\n  default_base: main\n"), broken),
        Case(f, "version-99", write(f, "version: 99\n"), broken),
        Case(f, "version-string", write(f, "version: one\n"), broken),
        Case(f, "not-utf8", write(f, b"version: 1\ngit:\n  default_base: \xff\xfe\n"), broken),
        Case(f, "invalid-yaml", write(f, "version: 1\ngit: [unclosed\n"), broken),
        Case(f, "symlink-outside", symlink_to_canary(f), broken),
        Case(f, "directory", then(remove(f), lambda w: w.path(f).mkdir()), broken),
        Case(
            f,
            "hostile-default-base",
            lambda w: w.path(f).write_text(
                w.path(f).read_text().replace('"main"', json.dumps(pwned(w)))
            ),
            broken,
        ),
    ]
    return cases


def policy_cases() -> list[Case]:
    f = "policy.yaml"
    cmds = ("policy-check", "policy-test", "run")
    broken = all_cmds(8, *cmds)
    return [
        Case(f, "missing", remove(f), broken),
        Case(f, "empty", write(f, ""), broken),
        Case(f, "truncated", truncate_in_a_string(f), broken),
        Case(f, "yaml-scalar", write(f, "block everything\n"), broken),
        Case(f, "yaml-list", write(f, "- version: 1\n"), broken),
        Case(f, "rules-not-list", write(f, "version: 1\nrules: 5\n"), broken),
        Case(
            f,
            "number-for-string",
            write(f, "version: 1\nrules:\n  - {name: r, pattern: 5, action: block, reason: x}\n"),
            broken,
        ),
        Case(f, "version-99", write(f, "version: 99\nrules: []\n"), broken),
        Case(f, "not-utf8", write(f, b"version: 1\nrules: []\n# \xff\xfe\n"), broken),
        Case(f, "invalid-yaml", write(f, "version: 1\nrules: [\n"), broken),
    ]


def state_cases() -> list[Case]:
    f = "state.json"
    broken = all_cmds(8, *_READERS)
    no_active = {"status": 0, "log": 3, "show": 3, "tasks": 0, "run": 3}
    return [
        Case(f, "missing", remove(f), no_active, names=("no active task",)),
        Case(f, "empty", write(f, ""), broken),
        Case(f, "truncated", truncate(f), broken),
        Case(f, "json-list", write(f, "[]"), broken),
        Case(f, "json-string", write(f, '"state"'), broken),
        Case(f, "number-for-string", json_edit(f, setting("active_task_id", 5)), broken),
        Case(f, "version-99", json_edit(f, setting("version", 99)), broken),
        Case(f, "no-version", json_edit(f, lambda w, r: r.pop("version")), broken),
        Case(f, "not-utf8", write(f, b'{"version": 1, "active_task_id": "\xff"}'), broken),
        Case(
            f,
            "hostile-active-id",
            json_edit(f, setting("active_task_id", "../../../canary")),
            broken,
        ),
        Case(
            f,
            "dangling-active-id",
            json_edit(f, setting("active_task_id", "Zz9Zz9Zz")),
            no_active,
            names=("Zz9Zz9Zz",),
        ),
    ]


def task_cases() -> list[Case]:
    f = "task.json"
    # `task list` goes on listing the other tasks, with a warning naming the broken file
    broken = {**all_cmds(8, "status", "log", "show", "run", "diff"), "tasks": 0}

    def edit(key: str, value: Any) -> Breaker:
        return json_edit(f, setting(key, value))

    return [
        Case(f, "missing", remove(f), broken),
        Case(f, "empty", write(f, ""), broken),
        Case(f, "truncated", truncate(f), broken),
        Case(f, "json-list", write(f, '["id", "name"]'), broken),
        Case(f, "json-number", write(f, "7"), broken),
        Case(f, "number-for-string", edit("name", 5), broken),
        Case(f, "null-for-string", edit("base_commit", None), broken),
        Case(f, "version-99", edit("version", 99), broken),
        Case(f, "version-string", edit("version", "1"), broken),
        Case(f, "not-utf8", write(f, b'{"version": 1, "id": "\xff\xfe"}'), broken),
        Case(f, "unknown-status", edit("status", "paused"), broken),
        Case(f, "wrong-id", edit("id", "AAAAAAAA"), broken),
        Case(f, "workspace-dotdot", edit("workspace_path", "../../etc"), broken),
        Case(f, "workspace-absolute", edit("workspace_path", "/etc"), broken),
        Case(f, "hostile-base-commit", edit("base_commit", pwned), broken),
        Case(f, "hostile-branch", edit("branch", pwned), broken),
        Case(f, "hostile-snapshot-ref", edit("snapshot_ref", "refs/heads/main"), broken),
        Case(f, "relative-repo-root", edit("repo_root", "../../canary"), broken),
        Case(f, "symlink-outside", symlink_to_canary(f), broken),
        Case(f, "task-dir-symlink", move_to_canary(lambda w: w.tdir), broken, names=("tasks/",)),
    ]


def move_to_canary(where: Callable[[World], Path]) -> Breaker:
    """Move a directory of bar's outside BAR_HOME and leave a link to it in its place."""

    def breaker(w: World) -> None:
        path = where(w)
        dest = w.canary / f"moved-{path.name}"
        shutil.copytree(path, dest, symlinks=True)
        shutil.rmtree(path)
        path.symlink_to(dest)

    return breaker


def _step_line(w: World, n: int, **changes: Any) -> bytes:
    """A valid ledger line for step ``n`` (a copy of the last one), with ``changes``."""
    rec = dict(w.steps()[-1])
    rec.update({"step_id": f"{n:04d}", **changes})
    return json.dumps(rec).encode()


def append_line(make: Callable[[World], bytes]) -> Breaker:
    def breaker(w: World) -> None:
        with w.path("ledger.jsonl").open("ab") as fh:
            fh.write(make(w) + b"\n")

    return breaker


def edit_step(n: int, edit: Callable[[World, dict[str, Any]], None]) -> Breaker:
    def breaker(w: World) -> None:
        lines = w.path("ledger.jsonl").read_bytes().splitlines()
        rec = json.loads(lines[n - 1])
        edit(w, rec)
        lines[n - 1] = json.dumps(rec).encode()
        w.path("ledger.jsonl").write_bytes(b"\n".join(lines) + b"\n")

    return breaker


def artifact(w: World, n: int, key: str, value: Any) -> None:
    path = w.path("ledger.jsonl")
    lines = path.read_bytes().splitlines()
    rec = json.loads(lines[n - 1])
    rec["artifacts"][key] = value
    lines[n - 1] = json.dumps(rec).encode()
    path.write_bytes(b"\n".join(lines) + b"\n")


def ledger_ids_are_unique(w: World) -> None:
    ids = []
    for line in w.path("ledger.jsonl").read_bytes().splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and isinstance(rec.get("step_id"), str):
            ids.append(rec["step_id"])
    assert len(ids) == len(set(ids)), ids


def ledger_cases() -> list[Case]:
    f = "ledger.jsonl"
    ok = all_cmds(0, "status", "log", "show", "tasks", "diff", "run")
    skipped = {**ok}  # a bad line is skipped with a warning naming the file
    return [
        Case(f, "missing", remove(f), {**ok, "show": 3, "diff": 3}, names=("0001", "0002")),
        Case(f, "empty", write(f, ""), {**ok, "show": 3, "diff": 3}, names=("0001", "0002")),
        # half the bytes: the first line survives, the second is torn, the third gone
        Case(f, "truncated", truncate(f), {**ok, "diff": 3}, names=("ledger.jsonl", "0002")),
        Case(f, "json-list-line", append_line(lambda w: b"[1, 2, 3]"), skipped),
        Case(f, "json-string-line", append_line(lambda w: b'"step"'), skipped),
        Case(
            f,
            "number-for-string",
            append_line(lambda w: _step_line(w, 4, step_id=4)),
            skipped,
            after=ledger_ids_are_unique,
        ),
        Case(
            f,
            "version-99-line",
            append_line(lambda w: _step_line(w, 4, version=99)),
            skipped,
            after=ledger_ids_are_unique,
        ),
        Case(
            f,
            "not-utf8-line",
            append_line(lambda w: _step_line(w, 4)[:-2] + b',"x":"\xff\xfe"}'),
            skipped,
            after=ledger_ids_are_unique,
        ),
        Case(f, "nul-bytes-line", append_line(lambda w: b"\0" * 64), skipped),
        Case(
            f,
            "artifact-dotdot",
            lambda w: artifact(w, 1, "output", "../../../../../canary/secret.txt"),
            {**ok, "show": 8},
        ),
        Case(
            f,
            "artifact-absolute",
            lambda w: artifact(w, 1, "patch", str(w.canary / "secret.txt")),
            {**ok, "show": 8},
        ),
        Case(
            f,
            "hostile-snapshot",
            edit_step(2, lambda w, r: r.update(snapshot=pwned(w))),
            {**ok, "diff": 8},
        ),
        Case(
            f,
            "hostile-snapshot-before",
            edit_step(3, lambda w, r: r.update(snapshot_before=pwned(w))),
            ok,
        ),
        Case(f, "symlink-outside", symlink_to_canary(f), all_cmds(8, *_READERS)),
    ]


def artifact_cases() -> list[Case]:
    f = "artifacts"

    def plant(*names: str, target: str = "secret.txt") -> Breaker:
        def breaker(w: World) -> None:
            for name in names:
                path = w.tdir / "artifacts" / name
                path.unlink(missing_ok=True)
                path.symlink_to(w.canary / target)

        return breaker

    def next_step_is_real(w: World) -> None:
        step = w.steps()[-1]
        assert step["step_id"] == "0004" and step["exit_code"] == 0
        out = w.tdir / step["artifacts"]["output"]
        assert not out.is_symlink() and "printed" in out.read_text()
        patch = w.tdir / step["artifacts"]["patch"]
        assert not patch.is_symlink() and "z.txt" in patch.read_text()
        assert not [p.name for p in (w.tdir / "artifacts").glob("0004.*") if p.is_symlink()]

    ok = all_cmds(0, "status", "log", "show", "tasks", "run")
    return [
        Case(f, "output-symlink", plant("0001.output"), {**ok, "show": 8}, names=("0001.output",)),
        Case(
            f,
            "patch-symlink",
            plant("0001.patch"),
            {**ok, "show": 8, "log": 8},
            names=("0001.patch",),
        ),
        Case(
            f,
            "output-missing",
            lambda w: (w.tdir / "artifacts" / "0001.output").unlink(),
            ok,
            names=("0001.output",),
        ),
        Case(
            f,
            "dir-symlink",
            move_to_canary(lambda w: w.tdir / "artifacts"),
            {**ok, "show": 8, "log": 8, "run": 8},
            names=("artifacts",),
        ),
        Case(
            f,
            "planted-for-next-step",
            plant(*(f"0004.{suffix}" for suffix in steps.WRITTEN), target="target.txt"),
            ok,
            after=next_step_is_real,
        ),
    ]


def _valid_marker(w: World) -> dict[str, Any]:
    return {
        "version": 1,
        "pid": 999999,
        "step_id": "0004",
        "started_at": "2024-01-15T10:00:00.000Z",
        "cmd": ["sh", "-c", "crashed"],
        "cwd": ".",
        "snapshot_before": w.last_snapshot(),
        "env": {},
        "pty": False,
        "excludes": [],
    }


def _valid_journal(w: World) -> dict[str, Any]:
    first = w.steps()[0]
    return {
        "version": 1,
        "step_id": "0004",
        "target": "step",
        "target_step": "0001",
        "target_commit": first["snapshot"],
        "target_head": first["head"],
        "hard": False,
        "snapshot_before": w.last_snapshot(),
        "started_at": "2024-01-15T10:00:00.000Z",
    }


def state_file_cases(
    f: str, valid: Callable[[World], dict[str, Any]], cmds: dict[str, int], ok: dict[str, int]
) -> list[Case]:
    def put(edit: Callable[[World, dict[str, Any]], None] | None = None) -> Breaker:
        def breaker(w: World) -> None:
            rec = valid(w)
            if edit:
                edit(w, rec)
            w.path(f).write_text(json.dumps(rec))

        return breaker

    def put_truncated(w: World) -> None:
        put()(w)
        truncate(f)(w)

    return [
        Case(f, "valid", put(), ok, names=("0004",)),
        Case(f, "empty", write(f, ""), cmds),
        Case(f, "truncated", put_truncated, cmds),
        Case(f, "json-list", write(f, "[]"), cmds),
        Case(f, "number-for-string", put(setting("step_id", 4)), cmds),
        Case(f, "version-99", put(setting("version", 99)), cmds),
        Case(f, "not-utf8", write(f, b'{"version": 1, "step_id": "\xff\xfe"}'), cmds),
        Case(f, "step-id-dotdot", put(setting("step_id", "../../../../../canary/x")), cmds),
        Case(f, "step-id-zero", put(setting("step_id", "0000")), cmds),
        Case(f, "hostile-snapshot-before", put(setting("snapshot_before", pwned)), cmds),
        Case(f, "missing-field", put(lambda w, r: r.pop("snapshot_before")), cmds),
    ]


def marker_cases() -> list[Case]:
    broken = {"status": 8, "log": 0, "run": 8, "rollback": 8}
    ok = {"status": 0, "log": 0, "run": 0}

    def check_recovered(w: World) -> None:
        steps = w.steps()
        assert [s["step_id"] for s in steps] == ["0001", "0002", "0003", "0004", "0005"]
        assert steps[3]["interrupted"] is True and steps[3]["cmd"] == ["sh", "-c", "crashed"]

    cases = state_file_cases("running.json", _valid_marker, broken, ok)
    cases[0] = Case(**{**cases[0].__dict__, "after": check_recovered})
    return cases


def journal_cases() -> list[Case]:
    broken = {"status": 0, "log": 0, "run": 8, "rollback": 8}
    ok = {"status": 0, "log": 0, "run": 0}

    def check_finished(w: World) -> None:
        steps = w.steps()
        assert [s["kind"] for s in steps] == ["run", "run", "run", "rollback", "run"]
        assert steps[3]["target_step"] == "0001"

    cases = state_file_cases("rollback.json", _valid_journal, broken, ok)
    cases[0] = Case(**{**cases[0].__dict__, "after": check_finished})
    f = "rollback.json"

    def put(key: str, value: Any) -> Breaker:
        def breaker(w: World) -> None:
            rec = _valid_journal(w)
            rec[key] = value(w) if callable(value) else value
            w.path(f).write_text(json.dumps(rec))

        return breaker

    cases += [
        Case(f, "hostile-target-commit", put("target_commit", pwned), broken),
        Case(f, "hostile-target-head", put("target_head", pwned), broken),
        Case(f, "string-for-bool", put("hard", "yes"), broken),
        Case(f, "unknown-target", put("target", "elsewhere"), broken),
    ]
    return cases


def _apply_journal(w: World) -> dict[str, Any]:
    """An apply that never landed: its commit is no ancestor of main."""
    step = {
        "step_id": "0004",
        "kind": "apply",
        "started_at": "2024-01-15T10:00:00.000Z",
        "ended_at": "2024-01-15T10:00:00.000Z",
        "duration_ms": 0,
        "mode": "commit",
        "commit_sha": w.last_snapshot(),
        "commit_message": "never landed",
        "target_branch": "main",
        "snapshot": w.last_snapshot(),
        "version": 1,
    }
    return {"version": 1, "step": step}


def apply_journal_cases() -> list[Case]:
    f = "apply.json"
    broken = {"status": 0, "log": 0, "run": 8, "rollback": 8}

    def put(edit: Callable[[dict[str, Any]], None]) -> Breaker:
        def breaker(w: World) -> None:
            rec = _apply_journal(w)
            edit(rec)
            w.path(f).write_text(json.dumps(rec))

        return breaker

    def forgotten(w: World) -> None:
        assert not w.path(f).exists()
        assert [s["kind"] for s in w.steps()] == ["run", "run", "run", "run"]

    return [
        Case(f, "valid-not-landed", put(lambda r: None), {"run": 0}, after=forgotten),
        Case(f, "empty", write(f, ""), broken),
        Case(f, "truncated", then(put(lambda r: None), truncate(f)), broken),
        Case(f, "json-list", write(f, "[]"), broken),
        Case(f, "step-not-object", put(lambda r: r.update(step="0004")), broken),
        Case(f, "step-version-99", put(lambda r: r["step"].update(version=99)), broken),
        Case(f, "not-utf8", write(f, b'{"version": 1, "step": "\xff"}'), broken),
        Case(
            f,
            "hostile-commit",
            put(lambda r: r["step"].update(commit_sha="--output=../../../../../canary/pwned")),
            broken,
        ),
        Case(f, "step-id-dotdot", put(lambda r: r["step"].update(step_id="../x")), broken),
    ]


CASES = [
    *config_cases(),
    *policy_cases(),
    *state_cases(),
    *task_cases(),
    *ledger_cases(),
    *artifact_cases(),
    *marker_cases(),
    *journal_cases(),
    *apply_journal_cases(),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_broken_file(world: World, capfd: pytest.CaptureFixture[str], case: Case) -> None:
    case.breaker(world)
    names = case.names or (
        case.file,
        str(world.path(case.file)) if case.file != "artifacts" else "",
    )
    before = outside_state(world)
    for name, code in case.expect.items():
        res = bar(capfd, *COMMANDS[name])
        assert_clear_answer(res, code, tuple(n for n in names if n), name)
    assert_nothing_written_outside(before, outside_state(world))
    assert not (world.canary / "pwned").exists()
    if case.after:
        case.after(world)


# --- user input ----------------------------------------------------------------------------

USER_INPUT: list[tuple[str, tuple[str, ...], int, str]] = [
    # (id, argv, exit code, what the message must contain)
    ("name-dotdot-slash", ("task", "new", "--", "../x"), 2, "invalid task name"),
    ("name-slash", ("task", "new", "a/b"), 2, "slash"),
    ("name-dotdot", ("task", "new", "a..b"), 2, "'..'"),
    ("name-empty", ("task", "new", ""), 2, "empty"),
    ("name-dash", ("task", "new", "--", "-rf"), 2, "starts with"),
    ("name-dot", ("task", "new", ".hidden"), 2, "starts with"),
    ("name-lock", ("task", "new", "x.lock"), 2, ".lock"),
    ("name-newline", ("task", "new", "a\nb"), 2, "whitespace"),
    ("name-escape", ("task", "new", "a\x1b[31m"), 2, "control"),
    ("name-long", ("task", "new", "x" * 65), 2, "at most 64"),
    ("name-at-brace", ("task", "new", "a@{1}"), 2, "'@'"),
    ("name-colon", ("task", "new", "a:b"), 2, "':'"),
    ("base-hostile", ("task", "new", "ok", "--base", "--output=../canary/pwned"), 2, "base"),
    ("show-dotdot", ("show", "../../x"), 2, "not a step id"),
    ("show-zero", ("show", "0"), 2, "not a step id"),
    ("show-letters", ("show", "abc"), 2, "not a step id"),
    ("show-negative", ("show", "--", "-1"), 2, "not a step id"),
    ("show-empty", ("show", ""), 2, "not a step id"),
    ("show-superscript", ("show", "\u00b2"), 2, "not a step id"),
    ("show-arabic-digit", ("show", "\u0661"), 2, "not a step id"),
    ("show-huge", ("show", "9" * 40), 2, "not a step id"),
    ("show-absent", ("show", "99"), 3, "no step 0099"),
    ("diff-dotdot", ("diff", "--from", "../x"), 2, "not a step id"),
    ("rollback-dotdot", ("rollback", "--to", "../../x"), 2, "not a step id"),
    ("rollback-dry-letters", ("rollback", "--dry-run", "--to", "x"), 2, "not a step id"),
    ("replay-dotdot", ("replay", "../x"), 2, "not a step id"),
    ("target-dotdot", ("apply", "--target", "bad..name"), 2, "bad..name"),
    ("target-option", ("apply", "--target=--output=../canary/pwned"), 2, "--output"),
    ("target-space", ("apply", "--dry-run", "--target", "a b"), 2, "a b"),
    ("cwd-up", ("run", "--cwd", "../..", "--", "true"), 2, "outside the task worktree"),
    ("cwd-absolute", ("run", "--cwd", "/", "--", "true"), 2, "outside the task worktree"),
    ("cwd-missing", ("run", "--cwd", "nope", "--", "true"), 2, "not a directory"),
    ("task-dotdot", ("log", "--task", "../x"), 3, "'../x'"),
    ("task-empty", ("run", "--task", "", "--", "true"), 2, "task"),
    ("task-absent", ("run", "--task", "nosuch", "--", "true"), 3, "'nosuch'"),
    ("switch-dotdot", ("task", "switch", "../../etc"), 3, "'../../etc'"),
    ("env-no-equals", ("run", "-e", "NAME", "--", "true"), 2, "NAME=VALUE"),
    ("env-bad-name", ("run", "-e", "1X=y", "--", "true"), 2, "'1X=y'"),
    ("env-empty-name", ("run", "-e", "=y", "--", "true"), 2, "'=y'"),
    ("log-negative", ("log", "-n", "-1"), 2, "0 or more"),
    ("run-nothing", ("run", "--"), 2, "no command"),
]


@pytest.mark.parametrize(
    ("argv", "code", "says"), [c[1:] for c in USER_INPUT], ids=[c[0] for c in USER_INPUT]
)
def test_bad_user_input(
    world: World, capfd: pytest.CaptureFixture[str], argv: tuple[str, ...], code: int, says: str
) -> None:
    steps_before = world.path("ledger.jsonl").read_bytes()
    tasks_before = sorted(p.name for p in (world.pdir / "tasks").iterdir())
    before = outside_state(world)
    res = bar(capfd, *argv)
    assert "Traceback" not in res.err and res.code != 70, res.err
    assert res.code == code, res.err
    if res.err.startswith("usage:"):  # rejected by the argument parser itself
        assert says in res.err.splitlines()[-1]
    else:
        lines = res.err.splitlines()
        assert lines and lines[0].startswith("bar: ") and says in lines[0], res.err
        assert all(x.startswith(("bar: ", "hint: ")) for x in lines), res.err
    assert_nothing_written_outside(before, outside_state(world))
    assert world.path("ledger.jsonl").read_bytes() == steps_before
    assert sorted(p.name for p in (world.pdir / "tasks").iterdir()) == tasks_before
    assert not (world.live / "canary" / "pwned").exists()
    assert not (world.repo.parent / "canary" / "pwned").exists()


def test_the_installed_executable_reports_a_broken_file_the_same_way(world: World) -> None:
    """One end-to-end check: a real process, a real broken file."""
    world.path("task.json").write_bytes(b'{"version": 1, "id": ')
    env = dict(os.environ)
    proc = subprocess.run(
        [str(Path(os.sys.executable).parent / "bar"), "log"],
        cwd=world.repo,
        env=env,
        capture_output=True,
        timeout=120,
    )
    err = proc.stderr.decode()
    assert proc.returncode == 8, err
    assert err.startswith("bar: task.json at ") and str(world.path("task.json")) in err
    assert "Traceback" not in err


def test_a_bad_ledger_line_is_reported_once_per_command(world: World) -> None:
    with world.path("ledger.jsonl").open("ab") as fh:
        fh.write(b"{torn\n")
    proc = subprocess.run(
        [str(Path(os.sys.executable).parent / "bar"), "run", "--no-pty", "--", "true"],
        cwd=world.repo,
        capture_output=True,
        timeout=120,
    )
    err = proc.stderr.decode()
    assert proc.returncode == 0, err
    warnings = [x for x in err.splitlines() if x.startswith("bar: warning")]
    assert len(warnings) == 1 and "ledger.jsonl" in warnings[0], err
