"""A project with a board to show, for the tests of ``bar ui``'s lists: the overview, the
board, the search, the timeline's calls and filters, the pickers of the Actions page.

All made by the installed ``bar`` in child processes, in a sealed environment
(``ui_session.sealed_env``):

- ``add-discounts`` (described, the active task): step 0001 writes ``discount.py``;
  step 0002 is an agent (``session_writer.py`` playing Claude Code, with a price for its
  model) that writes ``test_cart.py``, runs ``echo hi > hi.txt`` and ``ls`` (each judged
  by the policy, each a checkpoint) and asks for ``rm -rf /`` (blocked: no checkpoint);
- ``fix-login`` planned, nobody's; ``ui-login`` planned and claimed by ``agent-b``;
  ``docs`` claimed by ``alice`` and started, one step; ``old-thing`` closed;
- the branches ``feature/x`` and ``release`` beside ``main``.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml
from helpers import SUPPORT
from ui_session import Session, sealed_env

MODEL = "claude-sonnet-4-5"
AGENT_SCRIPT = [
    {"prompt": "Add a test and look around"},
    {"write": "test_cart.py", "text": "def test_total():\n    assert True\n"},
    {"bash": "echo hi > hi.txt"},
    {"bash": "ls"},
    {"bash": "rm -rf / --no-preserve-root"},
    {"say": "done"},
]


@dataclass
class Board:
    s: Session
    ids: dict[str, str]  # task name -> id

    def url(self, base: str, task: str, rest: str = "") -> str:
        return f"{base}/p/{self.s.project}/t/{self.ids[task]}{rest}"


def board_session(root: Path) -> Board:
    repo = root / "shop"
    repo.mkdir(parents=True)
    s = Session(root, repo, sealed_env(root), "", "")
    s.git("init", "-q", "-b", "main")
    (repo / "cart.py").write_text("def total(items):\n    return sum(items)\n")
    s.git("add", "-A")
    s.git("commit", "-qm", "initial")
    s.bar("init")
    s.git("add", ".bar")
    s.git("commit", "-qm", "bar policy")
    ids: dict[str, str] = {}

    def new(name: str, *args: str) -> None:
        ids[name] = json.loads(s.bar("task", "new", name, *args, "--json").stdout)["id"]

    new("add-discounts", "-d", "Discounts for loyal customers")
    task = json.loads(s.bar("task", "show", "add-discounts", "--json").stdout)
    s.task_id = task["id"]
    s.project = Path(task["worktree"]).parent.parent.name
    config = root / "home" / "projects" / s.project / "config.yaml"
    data = yaml.safe_load(config.read_text())
    data.setdefault("agents", {})["prices"] = {MODEL: {"input": 3, "output": 15, "cache_read": 0.3}}
    config.write_text(yaml.safe_dump(data))
    s.bar("run", "--no-pty", "--", "sh", "-c", "printf 'RATE = 0.1\\n' > discount.py")
    script = root / "agent.json"
    script.write_text(json.dumps(AGENT_SCRIPT))
    writer = str(SUPPORT / "session_writer.py")
    s.bar("run", "--no-pty", "--agent", "claude", "--", sys.executable, writer, str(script))
    new("fix-login", "--plan", "-d", "The login page loops on a bad password")
    new("ui-login", "--plan", "-d", "Login page on the new API")
    s.bar("task", "claim", "ui-login", "--owner", "agent-b")
    new("docs", "--plan")
    s.bar("task", "claim", "docs", "--owner", "alice", "--start")
    s.bar("run", "--task", "docs", "--no-pty", "--", "sh", "-c", "echo docs > README")
    new("old-thing")
    s.bar("run", "--task", "old-thing", "--no-pty", "--", "sh", "-c", "echo x > x.txt")
    s.bar("task", "close", "old-thing", "--force")
    s.bar("task", "switch", "add-discounts")
    s.git("branch", "feature/x")
    s.git("branch", "release")
    return Board(s, ids)
