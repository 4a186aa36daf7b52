"""The shape of the code: every import counted (those inside functions too), no circle,
the faces (the command line, ``bar mcp``, ``bar ui``) on top of the library surface
``bar.api``, the core never importing a face, and ``bar hook`` light on its hot path.
These read the sources (and, for the hook, run it), so a change that breaks the structure
fails here, not in a review.

``python tests/test_architecture.py`` prints the module graph: modules per package, the
circles, the longest chain of imports."""

from __future__ import annotations

import ast
import os
import socket
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

from bar.step import channel

SRC = Path(__file__).resolve().parent.parent / "src" / "bar"
# the faces: what a person, an agent or a Temporal server drives; each calls the library
# (``bar.api``)
FACES = ("bar.cli", "bar.mcp", "bar.ui", "bar.worker")
# what a face may import besides ``bar.api`` and the faces: the errors it reports, the
# basic types and helpers every part uses, and libraries that only read and present (the
# aide formats, whose writes are orders given through ``bar.api.orders``; the policy,
# which ``bar policy`` checks; the terminal recordings ``bar replay`` plays)
FACE_MAY_IMPORT = ("bar.api", "bar.errors", "bar.base", "bar.aide", "bar.policy", "bar.terminal")
# the types a face names (``from bar.model.tasks import Task``) are the records ``bar.api``
# returns: a face may import a class or a constant from anywhere, never a function or a
# module. And the hot paths, where loading ``bar.api`` would cost more than the work:
HOT_PATHS = {
    # the ``bar`` command's first code: the resident's client, nothing more
    "bar.cli.entry": {"bar.changes.fast.resident"},
    # the resident process: hands the daemon (through the speed layer's door) the command
    # line to run in its forks
    "bar.cli.warm": {
        "bar.changes.fast",
        "bar.sandbox.namespace",  # (the kernel's answer, asked once for every fork)
    },
    # every command: the look for hand edits starts while the command's code loads (the
    # speed layer's door), and a crash's traceback is written under the bar home
    "bar.cli.main": {"bar.changes.fast", "bar.store.files", "bar.store.layout"},
    # ``bar hook``, before every shell command an agent runs: the channel to the running
    # step, else the gate, the policy and the agent's protocol, and the project found
    "bar.cli.commands.hook": {
        "bar.step.channel",
        "bar.step.gate",
        "bar.model.project",
        "bar.agents",
        "bar.agents.protocol",
    },
    # shell completion, at every TAB: the task list read from the bar home's files
    "bar.cli.candidates": {"bar.store", "bar.store.layout"},
}
# what a face reaches beside ``bar.api`` that is no part of bar's work: the worker's way
# to its Temporal server (the connection, the worker's identity)
FACE_PLUMBING = {
    "bar.worker.process": {"bar.workers.temporal"},
    "bar.worker.activities": {"bar.workers.temporal"},
}


def in_any(name: str, packages: tuple[str, ...] | set[str]) -> bool:
    """``name`` is one of ``packages`` or a module in one (``bar.worker`` holds
    ``bar.worker.process``, not ``bar.workers``)."""
    return any(name == p or name.startswith(p + ".") for p in packages)


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _type_checking_only(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and ast.unparse(node.test) in (
        "TYPE_CHECKING",
        "typing.TYPE_CHECKING",
    )


def imports_of(path: Path, known: set[str]) -> set[str]:
    """The bar modules the file imports anywhere (in functions too), but for the type
    checker only (``if TYPE_CHECKING:``, which never runs)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if _type_checking_only(node):
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = {f"{node.module}.{a.name}" for a in node.names} & known
            found.update(subs or {node.module})
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    resolved = set()
    for name in found:
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name.startswith("bar"):
            resolved.add(name)
    return resolved


@cache
def import_graph() -> dict[str, frozenset[str]]:
    """Module -> the bar modules it imports. A package's ``__init__`` and its own
    submodules are one thing (how a package shows its surface), not a circle."""
    mods = modules()
    known = set(mods)
    graph = {}
    for name, path in mods.items():
        edges = imports_of(path, known)
        graph[name] = frozenset(
            m
            for m in edges
            if m != name and not m.startswith(name + ".") and not name.startswith(m + ".")
        )
    return graph


def circles(graph: dict[str, frozenset[str]]) -> list[list[str]]:
    """The strongly connected sets of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            part = []
            while True:
                top = stack.pop()
                part.append(top)
                if top == node:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph)))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def longest_chain(graph: dict[str, frozenset[str]]) -> list[str]:
    """The longest path of imports (the graph has no circle)."""
    longest: dict[str, list[str]] = {}

    def walk(node: str) -> list[str]:
        if node not in longest:
            longest[node] = [node]
            best = max((walk(nxt) for nxt in graph[node]), key=len, default=[])
            longest[node] = [node, *best]
        return longest[node]

    return max((walk(node) for node in sorted(graph)), key=len)


def test_no_import_circle() -> None:
    found = circles(import_graph())
    assert not found, "import circles:\n" + "\n".join(" ".join(c) for c in found)


# a sub-package counted as a package of its own: a layer apart from the one it sits in
OWN_PACKAGES = ("bar.changes.fast",)
# The packages, one layer per line, lowest first: a package imports only packages of its
# own line or the lines beneath it, counting the imports inside functions
# (docs/internals.md, "Layers"). Within a line, packages do not import each other.
LAYERS = (
    ("bar", "bar.errors", "bar.redact"),
    ("bar.base",),
    ("bar.shell", "bar.store"),
    ("bar.git", "bar.policy", "bar.terminal"),
    ("bar.model",),
    ("bar.agents", "bar.ledger", "bar.session", "bar.worktree"),
    ("bar.sandbox",),
    ("bar.changes.fast",),
    ("bar.history",),
    ("bar.changes", "bar.formats"),
    ("bar.aide",),
    ("bar.step",),
    ("bar.task",),
    ("bar.project", "bar.share"),
    ("bar.workers",),
    ("bar.api",),
    ("bar.mcp", "bar.ui", "bar.worker"),
    ("bar.cli",),
    ("bar.__main__",),
)


def package_of(module: str) -> str:
    """The package a module counts in: ``bar.<package>`` (a module at the top, as
    ``bar.errors``, is one of its own), or one of ``OWN_PACKAGES``."""
    for own in OWN_PACKAGES:
        if module == own or module.startswith(own + "."):
            return own
    return ".".join(module.split(".")[:2])


@cache
def package_graph() -> dict[str, dict[str, list[str]]]:
    """Package -> the packages it imports -> the imports that do (``a -> b``)."""
    graph: dict[str, dict[str, list[str]]] = {}
    for name, imports in import_graph().items():
        mine = package_of(name)
        edges = graph.setdefault(mine, {})
        for other in sorted(imports):
            theirs = package_of(other)
            if theirs != mine and name != "bar":
                edges.setdefault(theirs, []).append(f"{name} -> {other}")
                graph.setdefault(theirs, {})
    return graph


def test_no_package_loop() -> None:
    graph = package_graph()
    loops = circles({p: frozenset(edges) for p, edges in graph.items()})
    inside = {p for loop in loops for p in loop}
    closing = [
        f"  {imp}"
        for p in sorted(inside)
        for q in sorted(graph[p])
        if q in inside
        for imp in graph[p][q]
    ]
    assert not loops, "packages in an import loop:\n" + "\n".join(closing)


def test_each_package_imports_only_its_layer_and_those_beneath() -> None:
    graph = package_graph()
    level = {p: n for n, line in enumerate(LAYERS) for p in line}
    unplaced = sorted(set(graph) - set(level))
    assert not unplaced, f"packages LAYERS does not place: {unplaced}"
    upward = [
        f"  {imp}"
        for p, edges in sorted(graph.items())
        for q, imps in sorted(edges.items())
        if level[q] >= level[p]
        for imp in imps
    ]
    assert not upward, "imports of a layer above (or beside) the importer:\n" + "\n".join(upward)


# The speed layer is a guest of the record: the rest of bar meets it through its door
# (``bar.changes.fast``, the package's own module) and never imports its modules, except
# the ``bar`` command's first code, which asks the resident's client before anything loads.
SPEED_LAYER = "bar.changes.fast"
SPEED_LAYER_OPEN_TO = {"bar.cli.entry": {"bar.changes.fast.resident"}}


def test_the_speed_layer_is_met_through_its_door_only() -> None:
    inside = [
        f"  {name} -> {other}"
        for name, imports in sorted(import_graph().items())
        if name != SPEED_LAYER and not name.startswith(SPEED_LAYER + ".")
        for other in sorted(imports)
        if other.startswith(SPEED_LAYER + ".") and other not in SPEED_LAYER_OPEN_TO.get(name, set())
    ]
    assert not inside, "imports of the speed layer's modules (ask its door):\n" + "\n".join(inside)


def test_the_speed_layers_door_names_what_it_opens() -> None:
    """The door's typed names (its imports for the type checker), its table and its
    ``__all__`` are the same list."""
    from bar.changes import fast

    door = modules()[SPEED_LAYER]
    typed = {
        alias.asname or alias.name: (node.module.rpartition(".")[2], alias.name)
        for node in ast.walk(ast.parse(door.read_text()))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(SPEED_LAYER + ".")
        for alias in node.names
    }
    assert typed == fast.DOOR
    assert sorted(fast.__all__) == sorted(fast.DOOR)
    for name in fast.DOOR:
        assert getattr(fast, name) is not None, name


# A task's lock is taken in one place, the transaction (``bar.step.transaction``): every
# verb that changes a task holds it through there. A project's lock is the project's.
LOCK_TAKERS = {
    "bar.step.transaction": "a task's lock",
    "bar.model.project": "a project's lock",
    "bar.project.relocated": "the lock of a project's old place, as it is adopted",
}


def test_a_tasks_lock_is_taken_by_the_transaction_only() -> None:
    takers = sorted(
        f"  {name} ({path.relative_to(SRC.parent)}:{node.lineno})"
        for name, path in modules().items()
        if name not in LOCK_TAKERS and name != "bar.store.lock"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and ast.unparse(node.func).rpartition(".")[2] == "FileLock"
    )
    assert not takers, "locks taken outside the transaction (ask bar.step.transaction):\n" + (
        "\n".join(takers)
    )


def test_the_core_never_imports_a_face() -> None:
    for name, imports in import_graph().items():
        if in_any(name, FACES) or name == "bar.__main__":
            continue
        faces = sorted(m for m in imports if in_any(m, FACES))
        assert not faces, f"{name} (core) imports the face(s) {faces}"


def _functions_a_face_imports(path: Path, known: set[str]) -> set[str]:
    """What the face's imports bring in that is not a type: whole modules, and functions
    (lower-case names) imported from a module."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("bar"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("bar"):
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                if sub in known:
                    found.add(sub)  # a module
                elif alias.name[:1].islower() or alias.name.startswith("_"):
                    found.add(node.module)  # a function
    resolved = set()
    for name in found:
        while name not in known:
            name = name.rpartition(".")[0]
        resolved.add(name)
    return resolved


def test_a_face_calls_the_library_surface_only() -> None:
    mods = modules()
    for name, path in mods.items():
        if not in_any(name, FACES):
            continue
        allowed = (*FACES, *FACE_MAY_IMPORT, *HOT_PATHS.get(name, ()), *FACE_PLUMBING.get(name, ()))
        used = _functions_a_face_imports(path, set(mods))
        below = sorted(m for m in used if m not in (name, "bar") and not in_any(m, allowed))
        assert not below, f"{name} (a face) calls below bar.api: {below}"


def test_every_module_says_what_it_is_for() -> None:
    """A newcomer reads the first line of a module (or a package's ``__init__``) to know
    what it holds; none is left without one."""
    silent = [
        name
        for name, path in modules().items()
        if not (ast.get_docstring(ast.parse(path.read_text())) or "").strip()
    ]
    assert not silent, f"modules without a docstring: {silent}"


def report() -> str:
    """The module graph in a few lines: ``python tests/test_architecture.py``."""
    graph = import_graph()
    packages = Counter(
        name.split(".")[1] if (SRC / name.split(".")[1]).is_dir() else "(top level)"
        for name in graph
        if name != "bar"
    )
    lines = [
        f"modules: {len(graph)}",
        "per package: " + ", ".join(f"{p} {n}" for p, n in sorted(packages.items())),
    ]
    found = circles(graph)
    lines.append(f"circles: {len(found)}" + "".join(f"\n  {' '.join(c)}" for c in found))
    if not found:
        chain = longest_chain(graph)
        lines.append(f"longest chain ({len(chain) - 1} imports): " + " -> ".join(chain))
    return "\n".join(lines)


# The one exception: the client of the resident (``bar.changes.fast.resident``) runs before anything
# else on every ``bar run``, and the public ``socket`` and ``signal`` load ``enum``, which
# costs more than all the rest of it; ``_socket`` and ``_signal`` are what they wrap.
_PRIVATE_ALLOWED = {"bar.changes.fast.resident": ("_socket", "_signal")}


def test_no_private_module_of_the_standard_library() -> None:
    private = ("re._", "sre_", "_socket", "_signal", "_json", "_pickle", "_sha")
    for name, path in modules().items():
        text = path.read_text()
        for word in private:
            if word in _PRIVATE_ALLOWED.get(name, ()):
                continue
            assert f"import {word}" not in text and f'"{word}' not in text, (name, word)


# --- bar hook's hot path ----------------------------------------------------------------


@pytest.fixture
def answering_socket(tmp_path: Path) -> Iterator[Path]:
    """A stand-in for a running step's ``bar run``: answers every request with a deny."""
    path = tmp_path / "bar.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            while conn.recv(65536):
                pass
            conn.sendall(channel.encode_reply(channel.Reply(2, b'{"deny": 1}\n', b"no\n")))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield path
    thread.join(timeout=10)
    server.close()


def test_the_hook_relays_to_bar_run_importing_almost_nothing(answering_socket: Path) -> None:
    """Inside a step, ``bar hook`` hands the event to ``bar run`` and prints its reply;
    it must not pay for JSON, regexes, dataclasses, pathlib or typing on the way."""
    probe = (
        "import sys\n"
        "from bar.cli.main import main\n"
        f"code = main(['hook', 'claude', '--socket', {str(answering_socket)!r}])\n"
        "sys.stdout.flush()\n"
        "sys.stderr.write('MODULES ' + ' '.join(sorted(sys.modules)) + '\\n')\n"
        "sys.exit(code)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        input=b'{"hook_event_name": "PreToolUse"}',
        capture_output=True,
        timeout=30,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert proc.returncode == 2
    assert proc.stdout == b'{"deny": 1}\n'
    assert proc.stderr.startswith(b"no\n")
    loaded = set(proc.stderr.split(b"MODULES ", 1)[1].decode().split())
    heavy = {
        "json",
        "re",
        "dataclasses",
        "pathlib",
        "typing",
        "subprocess",
        "yaml",
        "inspect",
        "mcp",
        "bar.mcp.server",
    }
    assert not loaded & heavy, f"the relay imported {sorted(loaded & heavy)}"


# What `bar run -- true` must not import (docs/performance.md, "Start-up"): each costs
# milliseconds on every step, for work a plain step does not do.
RUN_PATH_DENIED = {
    "dataclasses",
    "inspect",
    "yaml",
    "tempfile",
    "shutil",
    "hashlib",
    "secrets",
    "random",
    "calendar",
    "datetime",
    "_strptime",
    "termios",
    "tty",
    "asyncio",
    "email",
    "http",
    "urllib.request",
    "bar.changes.apply",
    "bar.changes.rollback",
    "bar.changes.checkout",
    "bar.project.doctor",
    "bar.history.blame",
    "bar.terminal.pty",
    "bar.task.new",
    "bar.migrate_all",
    "mcp",
    "pydantic",
    "bar.mcp.server",
    "bar.mcp.tools",
    "starlette",
    "uvicorn",
    "bar.ui",
    # an agent's protocol, settings files and launch, and the gate of its hook events:
    # for a step with an agent (--agent) or when its first hook event arrives
    "bar.agents.protocol",
    "bar.agents.settings",
    "bar.agents.launch",
    "bar.agents.mcp_entry",
    "bar.step.gate",
    # the other commands' modules: only bar run's options are built (``bar.cli.parser``)
    "bar.cli.commands.task",
    "bar.cli.commands.log",
    "bar.cli.commands.policy",
    "bar.cli.commands.decide",
    "bar.cli.commands.mcp",
    "bar.cli.commands.help",
}


def test_a_plain_step_imports_nothing_on_the_deny_list(
    repo: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """``bar run -- true`` in a task, in a fresh interpreter: the modules it loaded, and
    what it compiled at run time (a record's ``__init__``, a secret shape's regex: each
    a fraction of a millisecond that a plain step does not need)."""
    from helpers import bar, new_task

    assert bar(capfd, "init").code == 0
    wt = Path(new_task(capfd)["worktree"])
    probe = (
        "import sys\n"
        "from bar.cli.main import main\n"
        "code = main(['run', '--no-pty', '--', 'true'])\n"
        "from bar import redact\n"
        "inits = [c for m in list(sys.modules.values()) for c in vars(m).values()\n"
        "         if isinstance(c, type) and '__record_fields__' in c.__dict__\n"
        "         and c.__dict__['__init__'].__code__.co_filename == '<string>']\n"
        "sys.stderr.write('COMPILED %d %d\\n' % (len(redact._compiled), len(inits)))\n"
        "sys.stderr.write('MODULES ' + ' '.join(sorted(sys.modules)) + '\\n')\n"
        "sys.exit(code)\n"
    )
    for _ in range(2):  # the second step is the usual one: stamps, a watch, no hand edits
        proc = subprocess.run(
            [sys.executable, "-c", probe], cwd=wt, capture_output=True, timeout=60
        )
        assert proc.returncode == 0, proc.stderr
    loaded = set(proc.stderr.split(b"MODULES ", 1)[1].decode().split())
    assert not loaded & RUN_PATH_DENIED, f"bar run imported {sorted(loaded & RUN_PATH_DENIED)}"
    assert b"COMPILED 0 0\n" in proc.stderr  # no shape regex, no record __init__


def test_the_hook_with_no_step_to_ask_loads_no_verb(
    repo: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``bar hook`` in a task with no running step (an agent wired by ``bar agent setup``)
    judges the command itself: one look for the project (at most one git process), the policy,
    the gate; not ``bar.api`` and the verbs' modules behind it."""
    import json

    from helpers import bar, new_task

    assert bar(capfd, "init").code == 0
    wt = Path(new_task(capfd)["worktree"])
    event = {
        "session_id": "s1",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "rm -rf /"},
        "cwd": str(wt),
    }
    probe = (
        "import sys\n"
        "from bar.cli.main import main\n"
        "code = main(['hook', 'claude'])\n"
        "sys.stdout.flush()\n"
        "sys.stderr.write('MODULES ' + ' '.join(sorted(sys.modules)) + '\\n')\n"
        "sys.exit(code)\n"
    )
    trace = tmp_path / "trace.json"
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=wt,
        input=json.dumps(event).encode(),
        capture_output=True,
        timeout=60,
        env={**os.environ, "GIT_TRACE2_EVENT": str(trace)},
    )
    assert proc.returncode == 2, proc.stderr  # the default policy blocks it
    assert proc.stderr.startswith(b"bar policy: Recursive delete")
    loaded = set(proc.stderr.split(b"MODULES ", 1)[1].decode().split())
    heavy = {
        "bar.api",
        "bar.model.journals",
        "bar.history.snapshot",
        "bar.history.checkpoints",
        "ctypes",
    }
    assert not loaded & heavy, f"the hook imported {sorted(loaded & heavy)}"
    lines = trace.read_text().splitlines() if trace.exists() else []  # none: no git at all
    starts = [line for line in lines if '"event":"start"' in line]
    assert len(starts) <= 1, starts


def test_only_bar_mcp_loads_the_mcp_sdk() -> None:
    """``bar --version`` and the parser of every command never import the SDK."""
    probe = (
        "import sys\n"
        "from bar.cli.main import main\n"
        "main(['--version'])\n"
        "from bar.cli.parser import build_parser\n"
        "build_parser(whole=True)\n"
        "sys.stderr.write('MODULES ' + ' '.join(sorted(sys.modules)) + '\\n')\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    loaded = set(proc.stderr.split(b"MODULES ", 1)[1].decode().split())
    assert not loaded & {"mcp", "pydantic", "bar.mcp.server", "bar.mcp.tools"}


@pytest.mark.parametrize("argv", [["--version"], ["hook", "claude"], ["log", "--help"]])
def test_only_bar_ui_loads_the_web_server(argv: list[str]) -> None:
    """starlette, uvicorn and bar.ui load when ``bar ui`` runs, never for another command."""
    probe = (
        "import sys\n"
        "from bar.cli.main import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "sys.stderr.write('MODULES ' + ' '.join(sorted(sys.modules)) + '\\n')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], input=b"{}", capture_output=True, timeout=30
    )
    loaded = set(proc.stderr.split(b"MODULES ", 1)[1].decode().split())
    web = {
        m for m in loaded if m.split(".")[0] in ("starlette", "uvicorn") or m.startswith("bar.ui")
    }
    assert not web, f"bar {' '.join(argv)} imported {sorted(web)}"


if __name__ == "__main__":
    print(report())
