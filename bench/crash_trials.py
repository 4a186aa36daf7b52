#!/usr/bin/env python3
"""Randomised SIGKILL trials: bar killed at a random moment of an operation loses nothing.

    python bench/crash_trials.py --trials 200 --seed 7
    python bench/crash_trials.py --trials 50 --seed 7 --files 800 --keep-failures /tmp/kept
    python bench/crash_trials.py --seed 7 --trial 12 -v      # rerun one trial of that run

A trial builds a fresh repository (--files files: text, binary, executable, symlinks,
names with spaces and non-ASCII characters) and a fresh BAR_HOME, runs `bar init`, creates
a task and records a few steps of random edits: some through `bar run -- sh -c SCRIPT`,
some made by hand between steps (recorded as `manual` steps), some committed on the task
branch as an agent would; sometimes hand edits are left for the operation to find. The
developer then commits on main and leaves staged, unstaged, untracked and ignored files in
paths the task never touches. One operation is drawn:

- run:      `bar run -- sh -c SCRIPT`, a script changing a hundred-odd files;
- rollback: `bar rollback --hard --to STATE`, an earlier step or base;
- apply:    `bar apply` onto main, checked out in the repository itself;
- close:    `bar task close --force`, which records what is pending and removes the
            worktree (its nested repositories and ignored files go to the trash).

The operation first runs to completion on a copy of the trial, to measure how long it
takes; the copy sits at the trial's own path (bar's files name absolute paths) while the
original waits aside, so the killed run then meets exactly the files, inodes and stat data
the setup left. The original is given the same command and its process group is sent
SIGKILL after a delay drawn uniformly from [0, that duration]. In most trials the
developer then edits files by hand at once (new files and files the operation touches),
before any bar command; in some, the first command after the crash (the one that finishes
what bar left) is itself killed at a random moment, and edits made by hand again. Then come
`bar doctor` (its findings are reported), in half of the trials `bar doctor --repair`,
`bar status`, `bar run -- true`, a final `bar doctor`, and the invariants below are checked.

bar's own code does all the work in every step, through ``bar.cli.main.main`` in this process
for the setup and the commands after the crash (an interpreter start for each of those
adds about half to a trial's time; --processes starts one anyway), and as a process of its
own for the measured and the killed operation. Everything a trial draws comes from one generator
seeded with the run's seed and the trial's number, and is drawn before anything is timed:
`--seed S --trial N` rebuilds the same trial and kills it at the same fraction of the
operation; only where that fraction lands in bar's code depends on the machine.

Exit status: 0 if every invariant held in every trial, 1 if any failed, 2 on a bad
command line.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from lost_bytes import NESTED_GIT, every_byte, lost_bytes, recorded_blobs  # noqa: E402

OPS = ("run", "rollback", "undo", "apply", "close")
NESTED = "vendor"  # --new-ops: where a step makes a nested repository
JOURNALS = ("running.json", "rollback.json", "apply.json", "removing.json")
TIMEOUT = 120  # seconds a bar process may take before the trial counts it as hung

INVARIANTS = {
    "setup": "building the trial through bar worked (init, task new, steps)",
    "uncrashed-op": "the operation, run to completion to measure it, exits 0",
    "hang": "the killed bar and every process of its group are gone within seconds",
    "doctor-check": "`bar doctor` right after the crash exits 0 or 8 (found something)",
    "doctor-repair": "`bar doctor --repair` right after the crash exits 0",
    "next-command": "`bar status` and `bar run -- true` after the crash exit 0",
    "doctor-final": "`bar doctor` after the next command exits 0",
    "ledger-parses": "every ledger line is a complete JSON object",
    "step-ids": "step ids are 0001, 0002, ... without a gap",
    "replay": "every step's patch, applied in order to base_commit, gives the last snapshot",
    "worktree": "the task worktree, hashed afresh, is exactly the last snapshot's tree",
    "snapshot-ref": "refs/bar/tasks/<id> contains the ledger's last snapshot",
    "journals": "no running.json, rollback.json or apply.json is left",
    "attribution": "the steps added are the op's and `true`, with manual steps only for edits "
    "nobody recorded (pending, made after a kill, or an interrupted run's last instant)",
    "hand-edits": "every edit made by hand after a kill is in a recorded state, never in the op's",
    "hand-kept": "a file made by hand after a kill, and an edit of a file the op does not "
    "write (equal in both its states), are on disk at the end as the hand left them",
    "rollback-state": "a recorded rollback reached its target's tree (but files edited by hand "
    "after a kill) and HEAD; else nothing moved",
    "apply-checkout": "the developer's checkout is exactly as before the apply or exactly after",
    "apply-ledger": "an apply step is recorded iff main moved, and names main's new commit",
    "lost-bytes": "with --new-ops: every byte the worktree held before the operation (ignored "
    "files and nested repositories included) is there after it, in a recorded state or in "
    "the task's trash",
    "nested-git": "with --new-ops: bar writes nothing inside a nested repository's .git",
}


# --- bar and git -----------------------------------------------------------------------


def sealed_env(work: Path) -> dict[str, str]:
    """Nothing inherited that could change git's or bar's behaviour; a fixed identity."""
    home = work / "user"
    home.mkdir(parents=True, exist_ok=True)
    # automatic gc or maintenance would start background processes that outlive a trial
    (home / ".gitconfig").write_text(
        "[init]\n\tdefaultBranch = main\n[user]\n\tname = Trial Author\n"
        "\temail = trial@example.com\n[gc]\n\tauto = 0\n[maintenance]\n\tauto = false\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "BAR_", "PYTHON"))}
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        GIT_CONFIG_NOSYSTEM="1",
        NO_COLOR="1",
        BAR_HOME=str(work / "t" / "home"),
        BAR_LOCK_TIMEOUT="30",  # a lock still held after the crash fails the trial, not the run
        # a trial kills bar's process group; a confined command has a session of its own
        # and would go on writing after its bar died
        BAR_SANDBOX_UNAVAILABLE="1",
    )
    return env


@dataclass
class Ran:
    code: int
    out: str
    err: str

    def tail(self, limit: int = 600) -> str:
        text = (self.out.strip() + "\n" + self.err.strip()).strip()
        return text if len(text) <= limit else "..." + text[-limit:]


class Bar:
    """bar as a process of its own, or through ``bar.cli.main.main`` in this one."""

    def __init__(self, exe: Path, env: dict[str, str], repo: Path, processes: bool) -> None:
        from bar.cli.main import main

        self.exe = exe
        self.env = env
        self.repo = repo
        self.processes = processes  # run() starts a process too
        self._main = main

    def run(self, *args: str) -> Ran:
        return self.process(*args) if self.processes else self.inproc(*args)

    def process(self, *args: str) -> Ran:
        try:
            proc = subprocess.run(
                [str(self.exe), *args],
                cwd=self.repo,
                env=self.env,
                capture_output=True,
                stdin=subprocess.DEVNULL,
                timeout=TIMEOUT,
            )
        except subprocess.TimeoutExpired as exc:
            return Ran(-1, "", f"timed out after {exc.timeout} s")
        out, err = proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace")
        return Ran(proc.returncode, out, err)

    def inproc(self, *args: str) -> Ran:
        """Output is caught at file descriptors 1 and 2: the commands bar runs write there."""
        os.chdir(self.repo)
        sys.stdout.flush()
        sys.stderr.flush()
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            saved = os.dup(1), os.dup(2)
            os.dup2(out.fileno(), 1)
            os.dup2(err.fileno(), 2)
            try:
                code = self._main(list(args))
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                for fd, old in ((1, saved[0]), (2, saved[1])):
                    os.dup2(old, fd)
                    os.close(old)
            out.seek(0)
            err.seek(0)
            return Ran(
                code, out.read().decode(errors="replace"), err.read().decode(errors="replace")
            )


def git(
    cwd: Path, *args: str, env: dict[str, str] | None = None, input: bytes | None = None
) -> bytes:
    proc = subprocess.run(["git", *args], cwd=cwd, env=env, input=input, capture_output=True)
    if proc.returncode != 0:
        raise RuntimeError(
            f"git {shlex.join(args)} in {cwd} exited {proc.returncode}: "
            f"{proc.stderr.decode(errors='replace').strip()}"
        )
    return proc.stdout


def rev(cwd: Path, name: str, env: dict[str, str] | None = None) -> str:
    return git(cwd, "rev-parse", name, env=env).decode().strip()


def is_ancestor(repo: Path, a: str, b: str) -> bool:
    res = subprocess.run(
        ["git", "merge-base", "--is-ancestor", a, b], cwd=repo, capture_output=True
    )
    return res.returncode == 0


# --- repositories and edits ------------------------------------------------------------

WORDS = (
    "alpha",
    "beta",
    "gamma",
    "delta",
    "cart",
    "price",
    "total",
    "discount",
    "apply",
    "rollback",
    "ledger",
    "step",
    "patch",
    "worktree",
    "branch",
    "commit",
    "tree",
    "blob",
    "index",
    "merge",
    "snapshot",
    "journal",
    "recover",
    "doctor",
    "sum",
    "count",
    "value",
    "item",
    "order",
    "user",
    "name",
    "path",
    "file",
    "line",
    "byte",
    "mode",
    "link",
)
TEXT_DIRS = ("src/core", "src/util", "src/net/io", "lib/äpfel", "docs", "docs/guide", "tests")
DEV_DIR = "dev"  # the developer's own files: no task edit ever touches them


def text_blob(rng: random.Random, lines: int) -> bytes:
    counts = [rng.randint(1, 9) for _ in range(lines)]
    words = iter(rng.choices(WORDS, k=sum(counts)))
    out = [" ".join(next(words) for _ in range(n)) for n in counts]
    return ("\n".join(out) + "\n").encode()


def read_files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` but .git: content after an executable mark, or a symlink's
    target."""
    files: dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if dirpath == str(root):  # a checkout's .git directory, a worktree's .git file
            dirnames[:] = [d for d in dirnames if d != ".git"]
            filenames = [f for f in filenames if f != ".git"]
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            if os.path.islink(path):
                files[rel] = b"-> " + os.readlink(path).encode()
            elif name in filenames:
                with open(path, "rb") as fh:
                    files[rel] = (b"x:" if os.access(path, os.X_OK) else b"-:") + fh.read()
    return files


def make_repo(repo: Path, rng: random.Random, n_files: int) -> None:
    repo.mkdir(parents=True)
    (repo / "README.md").write_bytes(b"# trial repository\n" + text_blob(rng, 5))
    (repo / ".gitignore").write_bytes(b"*.log\nbuild/\n")
    n_dev = max(3, n_files // 20)
    for i in range(n_files - 4):
        roll = rng.random()
        if i >= n_dev and roll < 0.05:
            path = repo / "assets" / f"blob{i}.bin"
            data = rng.randbytes(rng.randint(16, 3000))
        elif i >= n_dev and roll < 0.08:
            path = repo / "bin" / f"tool{i}.sh"
            data = b"#!/bin/sh\necho tool " + str(i).encode() + b"\n"
        else:
            folder = DEV_DIR if i < n_dev else rng.choice(TEXT_DIRS)
            name = rng.choice((f"f{i}", f"file {i}", f"café{i}", f"m{i}"))
            path = repo / folder / f"{name}.{rng.choice(('py', 'md', 'txt'))}"
            data = text_blob(rng, rng.randint(2, 40))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        if path.suffix == ".sh":
            path.chmod(0o755)
    (repo / "docs").mkdir(exist_ok=True)
    (repo / "docs" / "latest.md").symlink_to("../README.md")
    (repo / "src" / "link").symlink_to("core")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "initial")


@dataclass(frozen=True)
class Edit:
    kind: str  # write | delete | rename | chmod | symlink
    path: str
    data: bytes = b""
    dest: str = ""  # rename: the new path; symlink: the target
    executable: bool = False

    def apply(self, root: Path) -> None:
        """Make the edit by hand (what ``shell()`` does through `bar run`)."""
        p = root / self.path
        if self.kind == "write":
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(self.data)
        elif self.kind == "delete":
            p.unlink()
        elif self.kind == "rename":
            (root / self.dest).parent.mkdir(parents=True, exist_ok=True)
            p.rename(root / self.dest)
        elif self.kind == "chmod":
            mode = p.stat().st_mode
            p.chmod(mode | 0o111 if self.executable else mode & ~0o111)
        else:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.symlink_to(self.dest)

    def shell(self) -> str:
        q = shlex.quote
        mkdir = f"mkdir -p {q(str(Path(self.path).parent))}"
        if self.kind == "write":
            return f"{mkdir} && printf -- {printf_format(self.data)} > {q(self.path)}"
        if self.kind == "delete":
            return f"rm -f -- {q(self.path)}"
        if self.kind == "rename":
            into = q(str(Path(self.dest).parent))
            return f"mkdir -p {into} && mv -- {q(self.path)} {q(self.dest)}"
        if self.kind == "chmod":
            return f"chmod {'+x' if self.executable else '-x'} -- {q(self.path)}"
        return f"{mkdir} && ln -s -- {q(self.dest)} {q(self.path)}"


def printf_format(data: bytes) -> str:
    """A single-quoted printf format that prints exactly ``data``, whatever its bytes."""
    out = []
    for b in data:
        c = chr(b)
        if c == "%":
            out.append("%%")
        elif c == "\\":
            out.append("\\\\")
        elif c == "'":
            out.append("'\\''")
        elif c == "\n" or 0x20 <= b < 0x7F:
            out.append(c)
        else:
            out.append(f"\\{b:03o}")
    return "'" + "".join(out) + "'"


@dataclass
class Files:
    """The task's files as the edits drawn so far leave them (sorted where drawn from, so
    a seed always draws the same edits)."""

    regular: dict[str, bool]  # path -> executable
    links: set[str]
    binary: set[str]
    made: int = 0

    @classmethod
    def scan(cls, root: Path) -> Files:
        regular: dict[str, bool] = {}
        links: set[str] = set()
        for rel, data in read_files(root).items():
            if rel.startswith((DEV_DIR + "/", ".bar/")) or rel == ".gitignore":
                continue
            if rel.startswith(NESTED + "/") or rel.endswith(".log"):
                continue  # (--new-ops: a nested repository's, and ignored files: never recorded)
            if data.startswith(b"-> "):
                links.add(rel)
            else:
                regular[rel] = data.startswith(b"x:")
        return cls(regular, links, {p for p in regular if p.endswith(".bin")})

    def texts(self) -> list[str]:
        return sorted(p for p in self.regular if p not in self.binary)

    def new_path(self, rng: random.Random, suffix: str) -> str:
        self.made += 1
        folder = rng.choice((*TEXT_DIRS, "new", "new/deep er", "assets"))
        stem = rng.choice(("n", "new file ", "neu-ü"))
        return f"{folder}/{stem}{self.made}-{rng.randint(0, 9999)}{suffix}"

    def draw(self, rng: random.Random, count: int, *, binary_max: int = 400) -> list[Edit]:
        kinds = ("add", "modify", "delete", "rename", "binary", "chmod", "symlink")
        edits: list[Edit] = []
        for _ in range(count):
            files, texts = sorted(self.regular), self.texts()
            kind = rng.choices(kinds, (3, 6, 2, 2, 1.5, 1, 0.5))[0]
            if kind == "add" or not texts:
                path = self.new_path(rng, rng.choice((".py", ".txt", ".md")))
                edits.append(Edit("write", path, text_blob(rng, rng.randint(1, 20))))
                self.regular[path] = False
            elif kind == "modify":
                path = rng.choice(texts)
                edits.append(Edit("write", path, text_blob(rng, rng.randint(1, 30))))
            elif kind == "delete":
                path = rng.choice(files + sorted(self.links))
                edits.append(Edit("delete", path))
                self.regular.pop(path, None)
                self.links.discard(path)
                self.binary.discard(path)
            elif kind == "rename":
                path = rng.choice(files)
                dest = self.new_path(rng, Path(path).suffix)
                edits.append(Edit("rename", path, dest=dest))
                self.regular[dest] = self.regular.pop(path)
                if path in self.binary:
                    self.binary.remove(path)
                    self.binary.add(dest)
            elif kind == "binary":
                known = sorted(self.binary)
                use_old = known and rng.random() < 0.5
                path = rng.choice(known) if use_old else self.new_path(rng, ".bin")
                edits.append(Edit("write", path, rng.randbytes(rng.randint(1, binary_max))))
                self.regular.setdefault(path, False)
                self.binary.add(path)
            elif kind == "chmod":
                path = rng.choice(files)
                self.regular[path] = not self.regular[path]
                edits.append(Edit("chmod", path, executable=self.regular[path]))
            else:
                path = self.new_path(rng, ".lnk")
                target = rng.choice(("../README.md", "nowhere", "core/x.py"))
                edits.append(Edit("symlink", path, dest=target))
                self.links.add(path)
        return edits


def many_changes(rng: random.Random, files: Files) -> str:
    """The script of the killed `bar run`: a hundred-odd files created, changed, deleted."""
    q = shlex.quote
    tag = rng.randint(0, 10**6)
    texts = files.texts()
    appended = rng.sample(texts, min(len(texts), rng.randint(20, 80)))
    parts = [
        f"mkdir -p gen/{tag} && i=0 && while [ $i -lt {rng.randint(60, 160)} ]; do "
        f'printf "generated %s {tag}\\n" $i > "gen/{tag}/f$i.txt"; i=$((i+1)); done',
        f"for f in {' '.join(q(p) for p in appended)}; do printf 'more {tag}\\n' >> \"$f\"; done",
    ]
    parts += [e.shell() for e in files.draw(rng, rng.randint(5, 15), binary_max=2000)]
    if rng.random() < 0.3:
        parts.append(f"git add -A && git commit -q --allow-empty -m 'agent work {tag}'")
    return " && ".join(parts)


# --- the state of a trial --------------------------------------------------------------


def read_ledger(tdir: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The steps, and every line that is not a complete JSON object."""
    path = tdir / "ledger.jsonl"
    if not path.exists():
        return [], []
    lines = path.read_bytes().split(b"\n")
    problems = [] if lines[-1] == b"" else [f"last line has no newline: {lines[-1][:80]!r}"]
    steps = []
    for n, line in enumerate(lines[:-1], 1):
        try:
            rec = json.loads(line)
        except ValueError:
            problems.append(f"line {n} is not JSON: {line[:80]!r}")
            continue
        if isinstance(rec, dict):
            steps.append(rec)
        else:
            problems.append(f"line {n} is not an object: {line[:80]!r}")
    return steps, problems


def _near(path: str, kept: set[str]) -> bool:
    """Whether ``path`` is one of ``kept``, or above or beneath one of them."""
    return any(path == k or k.startswith(path + "/") or path.startswith(k + "/") for k in kept)


def replayed_tree(
    repo: Path, scratch: Path, base: str, tdir: Path, steps: list[dict[str, Any]]
) -> str:
    """What every step's patch, applied in order with `git apply` to ``base`` in a scratch
    index, gives: a tree id, or why a patch did not apply."""
    scratch.unlink(missing_ok=True)
    env = {**os.environ, "GIT_INDEX_FILE": str(scratch)}
    git(repo, "read-tree", base, env=env)
    for step in steps:
        patch = step.get("artifacts", {}).get("patch")
        if not patch:
            continue
        res = subprocess.run(
            ["git", "apply", "--cached", "--binary", "--whitespace=nowarn", str(tdir / patch)],
            cwd=repo,
            env=env,
            capture_output=True,
        )
        if res.returncode:
            why = res.stderr.decode(errors="replace").strip()[:200]
            return f"(step {step.get('step_id')}'s patch does not apply: {why})"
    return git(repo, "write-tree", env=env).decode().strip()


def tree_on_disk(wt: Path, scratch: Path) -> str:
    """The tree of the files in ``wt`` (ignored ones aside), hashed afresh through a new
    index: nothing of bar's side index or of its stat records is trusted."""
    scratch.unlink(missing_ok=True)
    env = {**os.environ, "GIT_INDEX_FILE": str(scratch)}
    git(wt, "add", "-A", env=env)
    return git(wt, "write-tree", env=env).decode().strip()


@dataclass
class Checkout:
    """The developer's checkout as its owner would judge it."""

    head: str
    branch: str
    status: str
    files: dict[str, bytes]

    @classmethod
    def read(cls, repo: Path) -> Checkout:
        status = git(repo, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignored")
        return cls(
            rev(repo, "HEAD"),
            git(repo, "symbolic-ref", "-q", "HEAD").decode().strip(),
            status.decode(errors="surrogateescape"),
            read_files(repo),
        )


def updated_files(repo: Path, files: dict[str, bytes], old: str, new: str) -> dict[str, bytes]:
    """``files`` with every path that differs between commits ``old`` and ``new`` as in
    ``new`` (read_files' form)."""
    raw = git(repo, "diff-tree", "-r", "-z", "--no-renames", old, new).split(b"\0")
    changes: list[tuple[str, str, str, str]] = []
    for meta, name in zip(raw[0:-1:2], raw[1::2], strict=True):
        _, mode, _, sha, status = meta.decode().lstrip(":").split()
        changes.append((mode, sha, status, name.decode(errors="surrogateescape")))
    # a gitlink (a nested repository the task recorded) is no file: git makes an empty
    # directory there, and its commit is not in this repository
    changes = [(m, sha, "D" if m == "160000" else st, p) for m, sha, st, p in changes]
    shas = [sha for _, sha, status, _ in changes if status != "D"]
    data = git(repo, "cat-file", "--batch", input="".join(s + "\n" for s in shas).encode())
    blobs: dict[str, bytes] = {}
    pos = 0
    for sha in shas:  # "<sha> blob <size>\n<content>\n" each
        end = data.index(b"\n", pos)
        size = int(data[pos:end].split()[2])
        blobs[sha] = data[end + 1 : end + 1 + size]
        pos = end + 2 + size
    out = dict(files)
    for mode, sha, status, path in changes:
        if status == "D":
            out.pop(path, None)
        elif mode == "120000":
            out[path] = b"-> " + blobs[sha]
        else:
            out[path] = (b"x:" if mode == "100755" else b"-:") + blobs[sha]
    return out


def group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` still runs. Zombies do not count: the killed
    bar's children are reaped by init, which may take its time, and cannot write."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def stop_watchers(root: Path) -> None:
    """Every watcher the last trial left under ``root`` has exited before the directory
    goes (as ``bar task delete`` stops a task's first): one still staging would write
    its git directory again into a task directory removed under it."""
    from bar.changes.fast import watcher

    for sock in root.glob(f"home/projects/*/tasks/*/{watcher.SOCKET}"):
        index = sock.parent / "index"
        said = watcher.status(index) or {}
        watcher.stop(index)
        pid = int(said.get("pid") or 0)
        deadline = time.monotonic() + 10
        while pid and time.monotonic() < deadline and alive(pid):
            time.sleep(0.02)


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie does not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def wait_for_group(pgid: int, limit: float = 10.0) -> bool:
    """Whether every process of the killed group is gone within ``limit`` seconds."""
    deadline = time.monotonic() + limit
    while group_alive(pgid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def remove_tree(path: Path) -> None:
    """Remove a trial's copy, once the watchers of its tasks (which remove their own
    sockets as they exit) are gone."""
    from bar.changes.fast import watcher

    watcher.stop_all(path / "home")
    for _ in range(50):
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            return
        time.sleep(0.05)
    shutil.rmtree(path)


def json_of(ran: Ran) -> dict[str, Any]:
    try:
        data = json.loads(ran.out)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


# --- one trial -------------------------------------------------------------------------


@dataclass
class Trial:
    number: int
    op: str
    argv: list[str] = field(default_factory=list)
    killed_during: bool = False
    delay_ms: float = 0.0
    duration_ms: float = 0.0
    kill_point: str = ""
    landed: str = ""  # what the files showed right after the kill
    doctor_findings: list[str] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)  # seconds
    recoveries: int = 0  # recovering commands killed before the one that finished

    @property
    def ok(self) -> bool:
        return not self.failures

    def fail(self, invariant: str, message: str) -> None:
        self.failures.append((invariant, message))

    def to_json(self) -> dict[str, Any]:
        return {
            "trial": self.number,
            "op": self.op,
            "command": "bar " + shlex.join(self.argv)[:200],
            "ok": self.ok,
            "killed_during": self.killed_during,
            "delay_ms": round(self.delay_ms, 1),
            "duration_ms": round(self.duration_ms, 1),
            "kill_point": self.kill_point,
            "landed": self.landed,
            "doctor_findings": self.doctor_findings,
            "failures": [{"invariant": i, "message": m} for i, m in self.failures],
            "notes": self.notes,
            "seconds": {k: round(v, 3) for k, v in self.phases.items()},
        }


class SetupFailed(Exception):
    pass


@dataclass
class Setup:
    task: dict[str, Any]
    tdir: Path
    argv: list[str]  # the operation, for bar
    pending: bool  # hand edits left unrecorded, for the operation to find
    steps: list[dict[str, Any]]  # the ledger before the operation
    task_head: str  # the task branch before the operation
    target: tuple[str, str] = ("", "")  # rollback: the snapshot and the HEAD to reach


class Runner:
    def __init__(self, args: argparse.Namespace, work: Path, env: dict[str, str]) -> None:
        self.args = args
        self.work = work
        self.trial_dir = work / "t"
        self.repo = self.trial_dir / "repo"
        self.home = self.trial_dir / "home"
        self.bar = Bar(args.bar, env, self.repo, args.processes)

    def trial(self, seed: int, number: int) -> Trial:
        rng = random.Random(f"{seed}:{number}")
        op, fraction, repair_first = rng.choice(self.args.ops), rng.random(), rng.random() < 0.5
        result = Trial(number, op)
        clock = time.perf_counter()

        def phase(name: str) -> None:
            nonlocal clock
            now = time.perf_counter()
            result.phases[name] = now - clock
            clock = now

        os.chdir(self.work)
        for d in ("t", "t.copy", "t.orig", "t.crashed"):
            stop_watchers(self.work / d)
            shutil.rmtree(self.work / d, ignore_errors=True)
        try:
            setup = self.build(rng, op)
        except (SetupFailed, RuntimeError) as exc:
            result.fail("setup", str(exc))
            return result
        result.argv = setup.argv
        before = Checkout.read(self.repo) if op == "apply" else None
        phase("setup")
        calibrated = self.calibrate(setup, result)
        phase("calibrate")
        held = every_byte(Path(setup.task["worktree"])) if self.args.new_ops else {}
        self.kill(setup, fraction, result)
        hand: dict[str, bytes] = {}
        kept: dict[str, bytes] = {}  # what the op does not write: left as the hand left it
        if rng.random() < self.args.hand_edits:
            hand.update(self.edit_by_hand(rng, setup, number, "after the kill", kept))
        if rng.random() < self.args.kill_recovery:
            result.recoveries += 1
            self.kill_recovery(rng.random(), result)
            hand.update(self.edit_by_hand(rng, setup, number, "after the recovery's kill", kept))
        phase("kill")
        self.recover(repair_first, result)
        phase("recover")
        self.check(setup, result, before, calibrated, hand)
        if result.op != "close":  # (closed: in a recorded state or the trash, check_hand_edits)
            self.check_kept(setup, kept, result)
        if self.args.new_ops:
            self.check_lost(setup, held, hand, result)
        phase("check")
        return result

    # -- building the trial

    def ok(self, ran: Ran, what: str) -> Ran:
        if ran.code != 0:
            raise SetupFailed(f"{what} exited {ran.code}: {ran.tail()}")
        return ran

    def build(self, rng: random.Random, op: str) -> Setup:
        repo, bar = self.repo, self.bar
        make_repo(repo, rng, self.args.files)
        self.ok(bar.inproc("init"), "bar init")
        git(repo, "add", ".bar")
        git(repo, "commit", "-q", "-m", "bar policy")
        task = json.loads(self.ok(bar.inproc("task", "new", "crash", "--json"), "bar task new").out)
        (project,) = (self.home / "projects").iterdir()
        tdir = project / "tasks" / task["id"]
        wt = Path(task["worktree"])
        files = Files.scan(wt)
        pending = False
        for n in range(rng.randint(2, 4)):
            edits = files.draw(rng, rng.randint(1, 12))
            if rng.random() < 0.5:
                script = " && ".join(e.shell() for e in edits)
                if rng.random() < 0.35:  # an agent commits its work on the task branch
                    script += f" && git add -A && git commit -q --allow-empty -m 'agent {n}'"
                self.ok(bar.inproc("run", "--no-pty", "--", "sh", "-c", script), "bar run")
                pending = False
            else:  # by hand: the next bar command records a manual step
                for e in edits:
                    e.apply(wt)
                pending = True
        if self.args.new_ops:
            pending = self.new_shapes(rng, wt) or pending
        if pending and rng.random() < 0.5:
            self.ok(bar.inproc("run", "--no-pty", "--", "true"), "bar run -- true")
            pending = False
        elif not pending and rng.random() < 0.3:
            for e in files.draw(rng, rng.randint(1, 5)):
                e.apply(wt)
            pending = True
        self.developer_moves(rng)
        steps = read_ledger(tdir)[0]
        setup = Setup(task, tdir, [], pending, steps, rev(wt, "HEAD"))
        if op == "run":
            setup.argv = ["run", "--no-pty", "--", "sh", "-c", many_changes(rng, files)]
        elif op == "rollback":
            to = rng.choice(["base"] + [s["step_id"] for s in steps[:-1]])
            setup.argv = ["rollback", "--hard", "--to", to]
            if to == "base":
                setup.target = (task["base_commit"], task["base_commit"])
            else:
                step = next(s for s in steps if s["step_id"] == to)
                setup.target = (step["snapshot"], step["head"])
        elif op == "undo":  # a hard rollback done, then its undo is the one killed
            # to a state of other files: a rollback that changes none is no step to undo
            # (the undo would undo the one before it)
            now = rev(repo, f"{steps[-1]['snapshot'] if steps else task['base_commit']}^{{tree}}")
            states = [("base", task["base_commit"])] + [
                (s["step_id"], s["snapshot"]) for s in steps[:-1]
            ]
            other = [name for name, c in states if rev(repo, f"{c}^{{tree}}") != now]
            to = rng.choice(other or [name for name, _ in states])
            self.ok(bar.inproc("rollback", "--hard", "--to", to), "bar rollback")
            before, undone = setup.task_head, read_ledger(tdir)[0][-1]
            setup.steps, setup.pending = read_ledger(tdir)[0], False
            setup.task_head = rev(wt, "HEAD")
            setup.argv = ["undo"]
            if undone["snapshot_before"] != undone["snapshot"]:  # (else: not checked)
                setup.target = (str(undone["snapshot_before"]), before)
        elif op == "close":
            setup.argv = ["task", "close", "crash", "--force"]
        else:
            setup.argv = ["apply", "-m", f"crash trial {rng.randint(0, 10**6)}"]
        return setup

    def new_shapes(self, rng: random.Random, wt: Path) -> bool:
        """With --new-ops, what docs/internals/record.md, "Nothing is destroyed that was not
        recorded" is about: a nested repository a step made and committed in, with
        uncommitted work inside; a directory that was a file in an earlier state, with an
        ignored file in it; an ignored file in a directory of the base. True: hand edits are
        left."""
        bar, pending = self.bar, False
        if rng.random() < 0.5:
            who = "-c user.name=t -c user.email=t@localhost"
            self.ok(
                bar.inproc(
                    "run", "--no-pty", "--", "sh", "-c",
                    f"git init -q {NESTED} && echo lib > {NESTED}/lib.c && git -C {NESTED} add -A "
                    f"&& git -C {NESTED} {who} commit -qm vendored",
                ),
                "bar run (a nested repository)",
            )  # fmt: skip
            (wt / NESTED / "wip.c").write_bytes(f"uncommitted {rng.random()}\n".encode())
        if rng.random() < 0.4:
            self.ok(bar.inproc("run", "--no-pty", "--", "sh", "-c", "echo a file > made"), "made")
            self.ok(
                bar.inproc(
                    "run", "--no-pty", "--", "sh", "-c",
                    "rm made && mkdir made && echo inside > made/a.txt",
                ),
                "made/",
            )  # fmt: skip
            (wt / "made" / "cache.log").write_bytes(f"ignored {rng.random()}\n".encode())
        dirs = [d for d in TEXT_DIRS if (wt / d).is_dir() and not (wt / d).is_symlink()]
        if dirs and rng.random() < 0.5:
            (wt / rng.choice(dirs) / "cache.log").write_bytes(f"ignored {rng.random()}\n".encode())
        return pending

    def developer_moves(self, rng: random.Random) -> None:
        """The developer's checkout moves on, in paths no task edit touches."""
        dev = self.repo / DEV_DIR
        names = sorted(p.name for p in dev.iterdir())
        if rng.random() < 0.5:
            (dev / rng.choice(names)).write_bytes(text_blob(rng, 4))
            (dev / f"added {rng.randint(0, 999)}.txt").write_bytes(text_blob(rng, 3))
            git(self.repo, "add", "-A")
            git(self.repo, "commit", "-q", "-m", "developer work")
        if rng.random() < 0.6:
            unstaged, staged = rng.sample(names, 2)
            (dev / unstaged).write_bytes(text_blob(rng, 3))
            (dev / staged).write_bytes(text_blob(rng, 3))
            git(self.repo, "add", "--", f"{DEV_DIR}/{staged}")
            (dev / "scratch notes.txt").write_bytes(b"untracked\n")
            (self.repo / "build").mkdir(exist_ok=True)
            (self.repo / "build" / "out.log").write_bytes(b"ignored\n")

    # -- measuring, killing, recovering

    def swap(self, a: str, b: str) -> None:
        """Move ``t`` aside as ``a`` and ``b`` in as ``t`` (renames: inodes and stat data kept)."""
        os.chdir(self.work)
        self.trial_dir.rename(self.work / a)
        (self.work / b).rename(self.trial_dir)

    def calibrate(self, setup: Setup, result: Trial) -> str:
        """Run the operation to completion on a copy of the trial at the trial's path; it
        bounds the kill delay. Returns main's tree afterwards (the copy's objects go with it)."""
        copy = self.work / "t.copy"
        for attempt in range(5):  # a background process's temp file may vanish mid-copy
            done = subprocess.run(["cp", "-a", str(self.trial_dir), str(copy)], check=False)
            if done.returncode == 0:
                break
            shutil.rmtree(copy, ignore_errors=True)  # (no watcher of its own: a plain copy)
            if attempt == 4:
                done.check_returncode()
            time.sleep(0.05)
        self.swap("t.orig", "t.copy")
        start = time.perf_counter()
        ran = self.bar.process(*setup.argv)
        result.duration_ms = (time.perf_counter() - start) * 1000
        if ran.code != 0:
            result.fail("uncrashed-op", f"bar {result.op} exited {ran.code}: {ran.tail()}")
        main_tree = rev(self.repo, "refs/heads/main^{tree}")
        remove_tree(self.trial_dir)
        (self.work / "t.orig").rename(self.trial_dir)
        return main_tree

    def kill(self, setup: Setup, fraction: float, result: Trial) -> None:
        delay = fraction * result.duration_ms / 1000
        main_before = rev(self.repo, "refs/heads/main")
        start = time.perf_counter()
        proc = subprocess.Popen(
            [str(self.args.bar), *setup.argv],
            cwd=self.repo,
            env=self.bar.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        time.sleep(max(0.0, start + delay - time.perf_counter()))
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            result.killed_during = True
        result.delay_ms = (time.perf_counter() - start) * 1000
        try:
            proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            result.fail("hang", "the killed bar did not exit")
        if not wait_for_group(proc.pid):
            result.fail("hang", "a process of the killed bar's group outlived it")
        # where the kill landed, as the files tell it
        left = [j for j in JOURNALS if (setup.tdir / j).exists()]
        grown = len(read_ledger(setup.tdir)[0]) - len(setup.steps)
        how = "killed" if result.killed_during else f"bar had exited {proc.returncode}"
        result.landed = (
            f"{', '.join(left) or 'no journal'}, ledger +{grown}"
            if result.killed_during
            else "after bar exited"
        )
        result.kill_point = (
            f"{how} at {result.delay_ms:.0f} of {result.duration_ms:.0f} ms: "
            f"{', '.join(left) or 'no journal'}, ledger +{grown}"
        )
        if result.op == "apply":
            moved = ", main " + (
                "moved" if rev(self.repo, "refs/heads/main") != main_before else "not moved"
            )
            result.kill_point += moved
            result.landed += moved if result.killed_during else ""
        if self.args.keep_failures:
            subprocess.run(["cp", "-a", str(self.trial_dir), str(self.work / "t.crashed")])

    def edit_by_hand(
        self,
        rng: random.Random,
        setup: Setup,
        number: int,
        when: str,
        kept: dict[str, bytes],
    ) -> dict[str, bytes]:
        """Edit files by hand, as a developer would right after a crash: one the operation
        may write, a new one (in a new directory, sometimes) and one of the developer's
        files, which no step and no operation writes (equal in every state), each with
        bytes no step writes. Returns what was written; ``kept`` gains what the operation
        does not write, which must stay as it is."""
        wt = Path(setup.task["worktree"])
        if not wt.exists() and not (setup.tdir / "removing.json").exists():
            return {}  # closed: the place is nobody's
        wt.mkdir(parents=True, exist_ok=True)  # (a close cut short: made again by hand)
        texts = Files.scan(wt).texts()
        files = [p for p in texts if not p.startswith(DEV_DIR)]
        dev = [p for p in texts if p.startswith(DEV_DIR + "/")]
        new = f"by hand {rng.randint(0, 99)}.txt"
        if rng.random() < 0.5:
            new = f"hand made/{rng.choice(('deep/', ''))}{new}"
        theirs = [rng.choice(files)] if files else []
        ours = [new] + ([rng.choice(dev)] if dev else [])
        written: dict[str, bytes] = {}
        for rel in theirs + ours:
            path = wt / rel
            if path.is_symlink() or path.is_dir():
                continue
            data = f"edited by hand {when}, trial {number}: {rng.random()}\n".encode()
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            written[rel] = data
            if rel in ours:
                kept[rel] = data
            else:
                kept.pop(rel, None)
        return written

    def kill_recovery(self, fraction: float, result: Trial) -> None:
        """Kill the first command after the crash (which finishes what bar left) at a
        random moment of the time the crashed operation took."""
        delay = fraction * max(result.duration_ms, 50.0) / 1000
        again = ["task", "close", "crash", "--force"] if result.op == "close" else None
        proc = subprocess.Popen(
            [str(self.args.bar), *(again or ["run", "--no-pty", "--", "true"])],
            cwd=self.repo,
            env=self.bar.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        time.sleep(delay)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            result.kill_point += "; recovery killed too"
        try:
            proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            result.fail("hang", "the killed recovery did not exit")
        wait_for_group(proc.pid)

    def recover(self, repair_first: bool, result: Trial) -> None:
        doc = self.bar.run("doctor", "--json")
        if doc.code not in (0, 8):
            result.fail("doctor-check", f"bar doctor exited {doc.code}: {doc.tail()}")
        result.doctor_findings = [f["message"] for f in json_of(doc).get("findings", [])]
        if repair_first:
            rep = self.bar.run("doctor", "--repair")
            if rep.code != 0:
                result.fail("doctor-repair", f"bar doctor --repair exited {rep.code}: {rep.tail()}")
        last = ("task", "close", "crash", "--force") if result.op == "close" else None
        for args in (("status", "--json"), last or ("run", "--no-pty", "--", "true")):
            ran = self.bar.run(*args)
            if last and args == last and ran.code == 2 and "already closed" in ran.err:
                continue  # (the close had finished before the kill)
            if ran.code != 0:
                result.fail(
                    "next-command", f"bar {shlex.join(args)} exited {ran.code}: {ran.tail()}"
                )
            warnings = [ln for ln in ran.err.splitlines() if ln.startswith("bar: warning:")]
            result.notes += [w.replace(str(self.work), "$WORK") for w in warnings]

    # -- the invariants

    def check(
        self,
        setup: Setup,
        result: Trial,
        before: Checkout | None,
        main_tree: str,
        hand: dict[str, bytes],
    ) -> None:
        task, tdir, repo = setup.task, setup.tdir, self.repo
        # first, so that the files checked below are also those a check-only doctor left
        final = self.bar.run("doctor", "--json")
        if final.code != 0:
            result.fail("doctor-final", f"bar doctor exited {final.code}: {final.tail()}")
        for finding in json_of(final).get("findings", []):
            where = Path(str(finding.get("where", ""))).name  # (the summary counts by message)
            result.notes.append(f"final doctor: {finding['message']} [{where}]")
        steps, problems = read_ledger(tdir)
        for problem in problems:
            result.fail("ledger-parses", problem)
        ids = [s.get("step_id") for s in steps]
        if ids != [f"{i:04d}" for i in range(1, len(ids) + 1)]:
            result.fail("step-ids", f"step ids are {ids}")
        last = next((s["snapshot"] for s in reversed(steps) if s.get("snapshot")), None)
        last = last or task["base_commit"]
        last_tree = rev(repo, f"{last}^{{tree}}")
        replayed = replayed_tree(
            repo, self.work / "scratch.index", task["base_commit"], tdir, steps
        )
        if replayed != last_tree:
            result.fail("replay", f"the patches give {replayed}, snapshot {last[:10]} {last_tree}")
        if result.op == "close":
            self.check_closed(setup, result)
        elif (
            on_disk := tree_on_disk(Path(task["worktree"]), self.work / "scratch.index")
        ) != last_tree:
            diff = git(repo, "diff-tree", "-r", "--name-status", last_tree, on_disk)
            shown = diff.decode(errors="replace").strip().replace("\n", "; ")
            result.fail("worktree", f"differs from snapshot {last[:10]}: {shown[:400]}")
        ref = task["snapshot_ref"]
        if not is_ancestor(repo, last, ref):
            result.fail("snapshot-ref", f"{ref} does not contain the last snapshot {last[:10]}")
        left = [j for j in JOURNALS if (tdir / j).exists()]
        if left:
            result.fail("journals", f"left after the next command: {', '.join(left)}")
        for stray in sorted(self.home.rglob("*.tmp")):
            result.notes.append(f"temporary file left: {stray.name}")
        new = steps[len(setup.steps) :]
        self.check_attribution(setup, new, result)
        self.check_hand_edits(setup, new, hand, result)
        if result.op in ("rollback", "undo"):
            self.check_rollback(setup, new, result, set(hand))
        if result.op == "apply" and before is not None:
            self.check_apply(new, before, main_tree, result)

    def check_attribution(self, setup: Setup, new: list[dict[str, Any]], result: Trial) -> None:
        """The op's step (if it was recorded) and `true`, in that order, and manual steps
        only where edits were left unrecorded: pending before the op, made by hand after a
        kill, or written by an interrupted run in the instant before it died."""
        op_cmd = setup.argv[3:] if result.op == "run" else None
        op_kind = {"undo": "rollback", "close": "manual"}.get(result.op, result.op)
        kinds = [
            "op"
            if s.get("kind") == op_kind and (op_cmd is None or s.get("cmd") == op_cmd)
            else "true"
            if s.get("kind") == "run" and s.get("cmd") == ["true"]
            else str(s.get("kind"))
            for s in new
        ]
        # a recovery that was killed may have recorded its own `true` before it died
        trues = kinds.count("true")
        ok = (
            kinds.count("op") <= 1
            and kinds[-1:] == ["true"]
            and 1 <= trues <= 1 + result.recoveries
        )
        if result.op == "close":  # what was pending, and hand edits: manual steps alone
            ok = set(kinds) <= {"op"} and len(kinds) <= 4
        ok = ok and all(k in ("op", "manual", "true") for k in kinds) and kinds.count("manual") <= 4
        if ok and kinds[:1] == ["manual"] and not setup.pending and op_kind != "rollback":
            ok = "op" not in kinds  # (a manual before the op: edits the op's look found)
        if not ok:
            shown = [f"{s.get('step_id')} {s.get('kind')} {s.get('cmd', '')}"[:60] for s in new]
            result.fail("attribution", f"steps added: {shown}, hand edits pending: {setup.pending}")

    def check_lost(
        self, setup: Setup, held: dict[str, bytes], hand: dict[str, bytes], result: Trial
    ) -> None:
        """What the worktree held before the operation, less what was edited by hand
        after the kill, is there, in a recorded state or in the task's trash."""
        now = every_byte(Path(setup.task["worktree"]))
        held = {k: v for k, v in held.items() if k not in hand}
        steps = read_ledger(setup.tdir)[0]
        states = [c for s in steps for c in (s.get("snapshot"), s.get("snapshot_before"))]
        lost = lost_bytes(held, now, recorded_blobs(self.repo, states), setup.tdir / "trash")
        inside = [p for p in lost if NESTED_GIT in p]
        if inside:
            result.fail("nested-git", f"{len(inside)} files: {'; '.join(inside)[:300]}")
        files = [p for p in lost if p not in inside]
        if files:
            result.fail("lost-bytes", f"{len(files)} files: {'; '.join(files)[:400]}")

    def check_hand_edits(
        self, setup: Setup, new: list[dict[str, Any]], hand: dict[str, bytes], result: Trial
    ) -> None:
        """What was edited by hand after a kill is in a recorded state (the last one, or
        one a rollback went on from), and in none of the op's own steps; after a close, it
        may be in the trash (made where the worktree was while the close was cut short)."""
        repo = self.repo
        for rel, data in hand.items():
            holders = []
            for step in new:
                if not step.get("snapshot"):
                    continue
                held = subprocess.run(
                    ["git", "cat-file", "blob", f"{step['snapshot']}:{rel}"],
                    cwd=repo,
                    capture_output=True,
                )
                if held.returncode == 0 and held.stdout == data:
                    holders.append(step)
            if not holders and not (result.op == "close" and self.in_trash(setup, rel, data)):
                result.fail(
                    "hand-edits", f"{rel!r}, edited by hand after the kill, is in no recorded state"
                )
            holding = {step["snapshot"] for step in holders}
            for step in holders:
                # an interrupted run that changed it (a later step holds what an earlier
                # one recorded: a recovery killed after its look recorded the edits)
                if (
                    step.get("kind") == "run"
                    and step.get("interrupted")
                    and step.get("snapshot_before") not in holding
                ):
                    result.fail(
                        "hand-edits",
                        f"{rel!r}, edited by hand after the kill, is "
                        f"credited to the interrupted step {step['step_id']}",
                    )

    def in_trash(self, setup: Setup, rel: str, data: bytes) -> bool:
        trash = setup.tdir / "trash"
        entries = sorted(trash.iterdir()) if trash.is_dir() else []
        return any(
            (e / "files" / rel).is_file() and (e / "files" / rel).read_bytes() == data
            for e in entries
        )

    def check_closed(self, setup: Setup, result: Trial) -> None:
        """The close finished: the task closed, its worktree gone whole, nothing of the
        removal left beside it."""
        wt = Path(setup.task["worktree"])
        status = json.loads((setup.tdir / "task.json").read_text()).get("status")
        if status != "closed":
            result.fail("closed", f"the task is {status!r} after the close ran again")
        if os.path.lexists(wt):
            shown = sorted(os.listdir(wt))[:8] if wt.is_dir() else "not a directory"
            result.fail("closed", f"the worktree is still there: {shown}")
        left = [p.name for p in setup.tdir.iterdir() if p.name.startswith("removing")]
        if left:
            result.fail("closed", f"left in the task's directory: {', '.join(left)}")
        listed = git(self.repo, "worktree", "list", "--porcelain").decode(errors="replace")
        if f"worktree {wt}\n" in listed:
            result.fail("closed", "git still lists the worktree")

    def check_kept(self, setup: Setup, kept: dict[str, bytes], result: Trial) -> None:
        """What was made or edited by hand after a kill where the operation writes nothing
        is on disk as the hand left it: recovery finished only the operation's own writes."""
        wt = Path(setup.task["worktree"])
        for rel, data in sorted(kept.items()):
            try:
                now = (wt / rel).read_bytes()
            except OSError as exc:
                result.fail("hand-kept", f"{rel!r}, made by hand after the kill, is gone: {exc}")
                continue
            if now != data:
                result.fail("hand-kept", f"{rel!r}, edited by hand after the kill, was rewritten")

    def check_rollback(
        self, setup: Setup, new: list[dict[str, Any]], result: Trial, hand: set[str]
    ) -> None:
        """The rollback reached its target, but where a file was edited by hand after a
        kill: recovery keeps such an edit and finishes the rest."""
        head = rev(Path(setup.task["worktree"]), "HEAD")
        done = [s for s in new if s.get("kind") == "rollback"]
        if not done:
            if head != setup.task_head:
                result.fail(
                    "rollback-state", f"none recorded, yet the task branch moved to {head[:10]}"
                )
            return
        step, (target, target_head) = done[0], setup.target
        if not target:
            return  # (an undo whose target the trial does not know)
        want, got = (
            rev(self.repo, f"{target}^{{tree}}"),
            rev(self.repo, f"{step['snapshot']}^{{tree}}"),
        )
        differ = (
            git(self.repo, "diff-tree", "-r", "-z", "--name-only", want, got).decode().split("\0")
            if got != want
            else []
        )
        # a path edited by hand is kept, and so the target's entry at a path above it or
        # beneath it cannot be written (a file the target has where the kept edit needs
        # a directory, or the other way round): that entry is in the target's state
        if {p for p in differ if p and not _near(p, hand)}:
            result.fail(
                "rollback-state", f"step {step['step_id']} recorded tree {got}, target {want}"
            )
        if step.get("head") != target_head or head != target_head:
            result.fail(
                "rollback-state",
                f"the task branch is at {head[:10]}, step {step['step_id']} recorded "
                f"{str(step.get('head'))[:10]}, the target's HEAD is {target_head[:10]}",
            )

    def check_apply(
        self, new: list[dict[str, Any]], before: Checkout, main_tree: str, result: Trial
    ) -> None:
        repo = self.repo
        applied = [s for s in new if s.get("kind") == "apply"]
        after = Checkout.read(repo)
        moved = after.head != before.head
        if bool(applied) != moved or len(applied) > 1:
            where = f"moved to {after.head[:10]}" if moved else "did not move"
            result.fail("apply-ledger", f"main {where}; {len(applied)} apply step(s) recorded")
        elif applied and applied[0].get("commit_sha") != after.head:
            named = str(applied[0].get("commit_sha"))[:10]
            result.fail(
                "apply-ledger", f"the apply step names {named}, main is at {after.head[:10]}"
            )
        if after.branch != before.branch:
            result.fail("apply-checkout", f"HEAD was {before.branch}, is {after.branch}")
        expected = before.files
        if moved:
            parent = rev(repo, f"{after.head}^")
            if parent != before.head:
                result.fail("apply-checkout", f"main's new commit has parent {parent[:10]}")
            if rev(repo, f"{after.head}^{{tree}}") != main_tree:
                result.fail("apply-checkout", "main's new tree is not the uncrashed apply's")
            expected = updated_files(repo, before.files, before.head, after.head)
        if after.files != expected:
            differ = sorted(
                p for p in {*after.files, *expected} if after.files.get(p) != expected.get(p)
            )
            result.fail(
                "apply-checkout",
                f"the files are neither as before nor as after ({len(differ)} differ from "
                f"{'after' if moved else 'before'}: {differ[:5]})",
            )
        if after.status != before.status:
            result.fail("apply-checkout", f"git status was {before.status!r}, is {after.status!r}")
        if (repo / ".git" / "index.lock").exists():
            result.fail("apply-checkout", ".git/index.lock is left in the developer's checkout")


# --- the run ---------------------------------------------------------------------------


def reproduce(args: argparse.Namespace, number: int) -> str:
    extra = f" --files {args.files}" if args.files != 300 else ""
    extra += f" --ops {','.join(args.ops)}" if args.ops != OPS else ""
    extra += " --new-ops" if args.new_ops else ""
    return f"python bench/crash_trials.py --seed {args.seed} --trial {number}{extra} -v"


def summary(trials: list[Trial], args: argparse.Namespace) -> str:
    lines = [f"{'op':<10}{'trials':>7}{'killed during':>15}{'ended first':>13}{'failed':>8}"]
    for op in (*args.ops, "all"):
        mine = [t for t in trials if op in (t.op, "all")]
        killed = sum(t.killed_during for t in mine)
        failed = sum(not t.ok for t in mine)
        lines.append(f"{op:<10}{len(mine):>7}{killed:>15}{len(mine) - killed:>13}{failed:>8}")
    lines += ["", "where the kills landed (what the task's files showed right after)"]
    for op in args.ops:
        landed = Counter(t.landed for t in trials if t.op == op and t.landed)
        shown = "; ".join(f"{k}: {n}" for k, n in sorted(landed.items()))
        lines.append(f"  {op:<9} {shown}")
    lines.append("")
    by_invariant = Counter(inv for t in trials for inv in {inv for inv, _ in t.failures})
    if by_invariant:
        lines.append(f"{'invariant':<16}{'trials failing':>16}")
        lines += [f"{inv:<16}{by_invariant[inv]:>16}" for inv in INVARIANTS if by_invariant[inv]]
    else:
        lines.append(f"every invariant held ({len(INVARIANTS)} checked in each trial)")
    for t in trials:
        if t.ok:
            continue
        lines += ["", f"trial {t.number} ({t.op}), {t.kill_point or 'not started'}"]
        lines += [f"  {inv}: {message}" for inv, message in t.failures]
        if t.doctor_findings:
            lines.append(
                f"  bar doctor right after the crash: {'; '.join(t.doctor_findings)[:300]}"
            )
        lines.append(f"  reproduce: {reproduce(args, t.number)}")
    # the same note in many trials differs only in ids, pids and numbers
    notes = Counter(
        re.sub(r"\b[0-9a-f]{7,40}\b|\d+|(?<=\()[\w-]{8}(?=\))", "N", note)
        for t in trials
        for note in set(t.notes)
    )
    if notes:
        lines.append("")
        lines += [f"note, {count} trial(s): {text}" for text, count in notes.most_common(10)]
    total = sum(sum(t.phases.values()) for t in trials)
    lines += ["", f"{len(trials)} trial(s) in {total:.1f} s, {total / len(trials):.2f} s each"]
    return "\n".join(lines)


def keep(work: Path, trial: Trial, args: argparse.Namespace) -> Path:
    """Copy the failed trial (right after the crash, and at the end) with its record."""
    dest: Path = args.keep_failures / f"seed{args.seed}-trial{trial.number}-{trial.op}"
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    subprocess.run(["cp", "-a", str(work / "t"), str(dest / "after")], check=True)
    if (work / "t.crashed").exists():
        subprocess.run(["cp", "-a", str(work / "t.crashed"), str(dest / "crashed")], check=True)
    record = {
        "seed": args.seed,
        **trial.to_json(),
        "reproduce": reproduce(args, trial.number),
        "paths_were_under": str(work / "t"),
    }
    (dest / "failure.json").write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    return dest


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    doc = __doc__ or ""
    p = argparse.ArgumentParser(
        description=doc.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=doc.split("\n\n", 1)[1],
    )
    p.add_argument("--trials", type=int, default=20, help="how many trials (default 20)")
    p.add_argument("--seed", type=int, default=1, help="the run's seed (default 1)")
    p.add_argument("--trial", type=int, metavar="N", help="run only trial N of the seed")
    p.add_argument("--files", type=int, default=300, help="files per repository (default 300)")
    p.add_argument(
        "--ops",
        default=",".join(OPS),
        help="the operations to draw from (default run,rollback,apply)",
    )
    p.add_argument("--keep-failures", type=Path, metavar="DIR", help="copy failed trials here")
    p.add_argument("--json", action="store_true", help="print every trial as JSON")
    p.add_argument(
        "--hand-edits",
        type=float,
        default=0.7,
        metavar="P",
        help="how often files are edited by hand right after the kill (default 0.7)",
    )
    p.add_argument(
        "--kill-recovery",
        type=float,
        default=0.25,
        metavar="P",
        help="how often the command that recovers is killed too (default 0.25)",
    )
    p.add_argument(
        "--processes",
        action="store_true",
        help="run the commands after the crash as processes of their own",
    )
    p.add_argument(
        "--workdir",
        type=Path,
        metavar="DIR",
        help="where trials are built (default: /dev/shm if writable, else $TMPDIR)",
    )
    p.add_argument(
        "--new-ops",
        action="store_true",
        help="add nested repositories, ignored files in directories that were files, and "
        "check that no byte is lost (lost-bytes, nested-git)",
    )
    p.add_argument("--bar", type=Path, help="the bar executable (default: beside this Python)")
    p.add_argument("-v", "--verbose", action="store_true", help="a line per trial on stderr")
    args = p.parse_args(argv)
    args.ops = tuple(op.strip() for op in args.ops.split(",") if op.strip())
    if not args.ops or set(args.ops) - set(OPS):
        p.error(f"--ops takes some of {','.join(OPS)}")
    if args.files < 20:
        p.error("--files must be at least 20")
    if args.trials < 1 or (args.trial is not None and args.trial < 1):
        p.error("--trials and --trial count from 1")
    args.bar = (args.bar or Path(sys.executable).parent / "bar").absolute()
    if args.workdir is None and os.access("/dev/shm", os.W_OK):
        # creating a file on a disk costs ~10x more, and a SIGKILL (unlike a power cut)
        # loses nothing that reached the page cache: memory shows the same crash states
        args.workdir = Path("/dev/shm")
    for name in ("keep_failures", "workdir"):
        if getattr(args, name) is not None:
            setattr(args, name, getattr(args, name).absolute())
    return args


@contextmanager
def workdir(parent: Path | None) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="bar-crash-", dir=parent)).resolve()
    try:
        yield path
    finally:
        os.chdir(path.parent)
        shutil.rmtree(path, ignore_errors=True)


def ensure_bar_importable() -> None:
    """Run under the project's interpreter (.venv) if this one cannot import bar."""
    try:
        import bar  # noqa: F401
    except ImportError:
        venv_python = ROOT / ".venv" / "bin" / "python"
        if venv_python.exists() and Path(sys.executable) != venv_python:
            os.execv(venv_python, [str(venv_python), __file__, *sys.argv[1:]])
        sys.exit("crash_trials: cannot import bar: run `make install`, or use bar's Python")


def main(argv: Sequence[str] | None = None) -> int:
    ensure_bar_importable()
    args = parse_args(sys.argv[1:] if argv is None else argv)
    numbers = [args.trial] if args.trial is not None else range(1, args.trials + 1)
    trials: list[Trial] = []
    with workdir(args.workdir) as work:
        env = sealed_env(work)
        os.environ.clear()
        os.environ.update(env)  # for bar in this process, and for git
        runner = Runner(args, work, env)
        for n in numbers:
            trial = runner.trial(args.seed, n)
            trials.append(trial)
            if not trial.ok and args.keep_failures:
                trial.notes.append(f"kept in {keep(work, trial, args)}")
            if args.verbose:
                took = " ".join(f"{k} {v:.2f}" for k, v in trial.phases.items())
                verdict = "ok" if trial.ok else "FAILED " + ",".join(i for i, _ in trial.failures)
                print(
                    f"trial {n:>4} {trial.op:<9} {trial.kill_point or 'not started'}; {took}; {verdict}",
                    file=sys.stderr,
                    flush=True,
                )
    if args.json:
        record = {"seed": args.seed, "files": args.files, "trials": [t.to_json() for t in trials]}
        print(json.dumps(record, indent=2, ensure_ascii=False))
    else:
        print(summary(trials, args))
    return 0 if all(t.ok for t in trials) else 1


if __name__ == "__main__":
    sys.exit(main())
