"""A real recorded session and a real ``bar ui`` serving it, for the ``bar ui`` tests.

Built once per test module (``session()``): a repository, ``bar init``, a task with steps
that change files and print in colour, a command the policy blocks, an interactive step
with a terminal recording, and a rollback, all by the installed ``bar`` in child
processes. ``bar ui --no-open --port 0`` is then started as a child and its URL read from
the first line it prints. The environment is sealed like conftest's (a module-scoped
fixture cannot use its per-test one), and passed to every child explicitly.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers import BAR_EXE

# Debian's chromium (`make browser`): Playwright's own browser download is not reachable
CHROMIUM = Path("/usr/bin/chromium")
NO_CHROMIUM = "needs Debian's chromium at /usr/bin/chromium (make browser)"


@contextmanager
def chromium() -> Iterator[Any]:
    """Chromium launched by Playwright (headless), closed after."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as play:
        launched = play.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


@dataclass
class Session:
    root: Path
    repo: Path
    env: dict[str, str]
    task_id: str
    project: str

    def bar(
        self, *args: str, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [BAR_EXE, *args],
            cwd=self.repo,
            env=self.env,
            text=True,
            capture_output=True,
            timeout=timeout,
        )
        if check:
            assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
        return proc

    def git(self, *args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=self.repo, env=self.env, text=True, capture_output=True, check=True
        ).stdout

    def ledger(self) -> list[dict[str, Any]]:
        path = self.root / "home" / "projects" / self.project / "tasks" / self.task_id
        text = (path / "ledger.jsonl").read_text()
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    @property
    def task_dir(self) -> Path:
        return self.root / "home" / "projects" / self.project / "tasks" / self.task_id

    def task_url(self, base: str, rest: str = "") -> str:
        return f"{base}/p/{self.project}/t/{self.task_id}{rest}"


def sealed_env(root: Path) -> dict[str, str]:
    home = root / "userhome"
    home.mkdir(parents=True, exist_ok=True)
    (home / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "BAR_"))}
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        BAR_HOME=str(root / "home"),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=str(home / ".gitconfig"),
        GIT_AUTHOR_NAME="Test Author",
        GIT_AUTHOR_EMAIL="author@example.com",
        GIT_COMMITTER_NAME="Test Committer",
        GIT_COMMITTER_EMAIL="committer@example.com",
        GIT_EDITOR="false",
    )
    return env


def session(root: Path) -> Session:
    repo = root / "shop"
    repo.mkdir(parents=True)
    env = sealed_env(root)
    s = Session(root, repo, env, "", "")
    s.git("init", "-q", "-b", "main")
    (repo / "cart.py").write_text("def total(items):\n    return sum(items)\n")
    s.git("add", "-A")
    s.git("commit", "-qm", "initial")
    s.bar("init")
    s.git("add", ".bar")
    s.git("commit", "-qm", "bar policy")
    task = json.loads(s.bar("task", "new", "add-discounts", "--json").stdout)
    s.task_id = task["id"]
    s.project = Path(task["worktree"]).parent.parent.name
    s.bar(
        "run",
        "--no-pty",
        "--",
        "sh",
        "-c",
        "printf 'RATE = 0.1\\n' > discount.py; printf '\\033[32mall green\\033[0m\\n'",
    )
    s.bar(
        "run",
        "--no-pty",
        "--",
        "sh",
        "-c",
        "sed -i s/0.1/0.15/ discount.py; printf 'def cut(x):\\n    return x\\n' >> cart.py",
    )
    blocked = s.bar("run", "--no-pty", "--", "sh", "-c", "rm -rf / --no-preserve-root", check=False)
    assert blocked.returncode == 126, blocked.stderr
    s.bar("run", "--pty", "--", "sh", "-c", "echo one; sleep 1; echo two; sleep 1; echo three")
    s.bar("rollback", "--to", "1")
    return s


@contextmanager
def serving(s: Session) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``bar ui --no-open --port 0`` as a child: (the process, its URL with the token)."""
    proc = subprocess.Popen(
        [BAR_EXE, "ui", "--no-open", "--port", "0"],
        cwd=s.repo,
        env=s.env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("bar ui: http://127.0.0.1:"), (line, proc.stderr)
        yield proc, line.split(": ", 1)[1].strip()
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def base_of(url: str) -> str:
    return url.split("/?", 1)[0]


def wait_until(check: Any, timeout: float = 60) -> Any:
    end = time.monotonic() + timeout
    while True:
        found = check()
        if found or time.monotonic() > end:
            return found
        time.sleep(0.1)
