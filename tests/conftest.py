"""Shared fixtures: every test is sealed off from the machine through its environment.

HOME, XDG_CONFIG_HOME and BAR_HOME live in the test's tmp_path, git reads no system or
global config, and authors and dates are fixed. Child processes and git hooks inherit all
of this, so nothing is mocked.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# the helpers every test shares (tests/support), importable as ``helpers``, ``ptys``...;
# and each package's tests, whose file names are unique, for the few that share a fixture
_TESTS = Path(__file__).resolve().parent
_PACKAGES = sorted(
    str(d)
    for d in _TESTS.rglob("*")
    if d.is_dir() and not ({"data", "support", "__pycache__"} & set(d.relative_to(_TESTS).parts))
)
sys.path[:0] = [str(_TESTS / "support"), *_PACKAGES]

# timing belongs in the benchmarks: no property test fails for being slow on a busy machine
# (Hypothesis's default deadline is 200 ms an example)
from hypothesis import settings  # noqa: E402

settings.register_profile("bar", deadline=None)
settings.load_profile("bar")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Which points the SIGKILL sweeps crashed at (``helpers.sweep``): how to pick them again."""
    from helpers import SWEEP_SEED, SWEEP_SHARE

    terminalreporter.write_line(
        f"SIGKILL sweeps: {SWEEP_SHARE:g} of each sweep's points, seed {SWEEP_SEED} "
        f"(TEST_SWEEP_SHARE={SWEEP_SHARE:g} TEST_SWEEP_SEED={SWEEP_SEED} picks them again)"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests ``tests/data/long_tests.txt`` names are marked ``long``: ``make test`` runs
    them (first), ``make test-fast`` (work in progress) does not (``long_tests``)."""
    from long_tests import listed

    names = listed()
    for item in items:
        if item.nodeid in names:
            item.add_marker(pytest.mark.long)
    # the modules that hold tests of seconds first (whole, so that a module's fixtures are
    # made once): spread over the workers while the quick ones fill the gaps, rather than
    # one of them starting last and the others waiting for it
    heavy = {name.split("::")[0] for name in names}
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in heavy)


@pytest.fixture(autouse=True)
def hermetic_seal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    home = tmp_path / "home"
    home.mkdir()
    for name in list(os.environ):
        # BAR_SANDBOX_UNAVAILABLE stays: make test runs the suite once more with it set
        if name.startswith(("GIT_", "BAR_")) and name != "BAR_SANDBOX_UNAVAILABLE":
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("BAR_HOME", str(tmp_path / "barhome"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Test Author")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "author@example.com")
    monkeypatch.setenv("GIT_AUTHOR_DATE", "2024-01-15T10:00:00Z")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Test Committer")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "committer@example.com")
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2024-01-15T10:00:00Z")
    monkeypatch.setenv("GIT_EDITOR", "false")
    monkeypatch.setenv("NO_COLOR", "1")
    # a shortcut of the speed layer that breaks (a git command it relies on fails) raises
    # instead of falling back in silence (``bar.changes.fast.speed.fallback``)
    monkeypatch.setenv("BAR_STRICT_FALLBACK", "1")
    # git's automatic packing, and bar's after a step (``bar.git.packing``), in the
    # foreground: nothing left running when a test looks at the object store or ends
    (home / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n[gc]\n\tautoDetach = false\n")
    # a task's watcher outlives the commands (``bar.changes.fast.watcher``): the test's are stopped
    # when it ends, and would give up on their own after a minute
    monkeypatch.setenv("BAR_WATCHER_IDLE", "60")
    # so does the bar home's resident (``bar.changes.fast.resident``): the same for it
    monkeypatch.setenv("BAR_RESIDENT_IDLE", "60")
    yield
    from bar.changes.fast import resident, watcher

    watcher.stop_all(tmp_path / "barhome")
    resident.stop(str(tmp_path / "barhome"))


@pytest.fixture(scope="session", autouse=True)
def no_watcher_left(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The watchers and residents of homes a test made on its own (module fixtures, a test's own
    BAR_HOME) are stopped when the run ends, not left to their idle time."""
    yield
    from bar.changes.fast import resident, watcher

    for sock in tmp_path_factory.getbasetemp().rglob(watcher.SOCKET):
        watcher.stop(sock.parent / "index")
    for sock in tmp_path_factory.getbasetemp().rglob(resident.SOCKET):
        resident.stop(str(sock.parent))


@pytest.fixture(autouse=True)
def short_racy_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process snapshots distrust a directory changed within 0.1 s of them, not 2 s:
    a directory's ctime cannot be set back, so tests that want trusted stamps wait
    ``helpers.SETTLE`` instead of the production window (which covers coarse clocks of
    other file systems; the local ones here tick in milliseconds)."""
    from bar.changes.fast import stamps

    monkeypatch.setattr(stamps, "RACY_NS", 100_000_000)


def git(repo: Path, *args: str, input: bytes | None = None) -> str:
    """Run real git in ``repo`` and return its stdout (raises on failure)."""
    proc = subprocess.run(["git", *args], cwd=repo, input=input, capture_output=True, check=True)
    return proc.stdout.decode()


MakeRepo = Callable[..., Path]


@pytest.fixture
def make_repo(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[MakeRepo]:
    """Build a real repository with one commit per ``files`` mapping given. When the
    test ends, ``git fsck`` of each must be clean (SPEC §8: nothing a step does breaks
    the developer's history), unless the test breaks it on purpose (``breaks_history``)."""
    counter = iter(range(1000))
    made: list[Path] = []

    def factory(files: dict[str, str | bytes] | None = None, name: str | None = None) -> Path:
        repo = tmp_path / (name or f"repo{next(counter)}")
        made.append(repo)
        repo.mkdir(parents=True)
        git(repo, "init", "-q", "-b", "main")
        content = files if files is not None else {"README.md": "hello\n"}
        for rel, data in content.items():
            path = repo / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(data, bytes):
                path.write_bytes(data)
            else:
                path.write_text(data)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "initial")
        return repo

    yield factory
    if request.node.get_closest_marker("breaks_history") is not None:
        return
    for repo in made:
        if (repo / ".git").is_dir():
            checked = subprocess.run(
                ["git", "fsck", "--no-progress", "--no-dangling"],
                cwd=repo,
                capture_output=True,
                text=True,
            )
            assert checked.returncode == 0 and not checked.stdout.strip(), (
                f"git fsck of {repo.name} after the test: {checked.stdout}{checked.stderr}"
            )


@pytest.fixture
def repo(make_repo: MakeRepo, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh repository that is also the current directory."""
    path = make_repo()
    monkeypatch.chdir(path)
    return path


@pytest.fixture
def inited(repo: Path, capfd: pytest.CaptureFixture[str]) -> Path:
    """``repo`` after ``bar init``: a registered project, the current directory."""
    from helpers import bar

    assert bar(capfd, "init").code == 0
    return repo


@pytest.fixture
def inited_clean(repo: Path, capfd: pytest.CaptureFixture[str]) -> Path:
    """``inited`` with the policy off and the policy file ``bar init`` wrote committed,
    so the checkout is clean (as ``bar apply`` wants it)."""
    from helpers import init_clean

    return init_clean(repo, capfd)
