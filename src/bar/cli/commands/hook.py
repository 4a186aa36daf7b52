"""``bar hook AGENT [--socket PATH]``: an agent asks whether it may run a shell command,
or reports what became of one.

Claude Code, Codex and Gemini CLI run this before and after every shell command and when
a session starts, with the event as JSON on stdin, and read the answer in their own
format (docs/agents.md). Inside a step,
``bar run`` is listening on the task's channel (``--socket``, which ``bar run --agent``
writes into the hook command, or ``BAR_SOCKET``, which it gives the step): the event is
handed over as it is and the reply printed, so this path imports only ``os``, ``sys`` and
``socket`` and leaves judging and recording to the one process that writes the task's
files. With no ``bar run`` to ask, the command is judged here with the policy of the
project the agent works in (bar's default policy outside one) and nothing is recorded.

Anything that goes wrong blocks the command with a message (fail closed). The compiled
``bar`` (``bar.cli.launcher``) hands the event to ``bar run`` itself; when the one it
reached took it and gave no answer, it runs this with ``--unanswered WHY`` (the event on
stdin), which blocks the call as this would have, and sends nothing again.
"""

from __future__ import annotations

import os
import sys

from bar.agents import AGENTS
from bar.step import channel

TYPE_CHECKING = False
if TYPE_CHECKING:
    from bar.cli.parser import Commands

USAGE = "usage: bar hook claude|codex|gemini [--socket PATH]  (reads the agent's event on stdin)"
HELP = f"""{USAGE}

Called by Claude Code, Codex CLI or Gemini CLI before each shell command (and after it,
and when a session starts), with the agent's event as JSON on stdin; answers in the
agent's own format (JSON on stdout, reason on stderr, exit code 2 to block). Inside
`bar run`, the running step judges and records the command and what became of it
(--socket, or BAR_SOCKET in the step's environment); otherwise the policy of the
repository the agent works in decides and nothing is recorded. `bar run --agent AGENT`
gives the agent this hook for a run; `bar agent setup AGENT` prints the settings to
install it yourself. See docs/agents.md.
"""


# --- the command line ------------------------------------------------------------------


def options(sub: Commands) -> None:
    """The command line of ``bar hook``: its help only (``bar.cli.main`` runs the hook
    before any parsing)."""
    from bar.cli.parser import Formatter

    sub.add_parser(
        "hook",
        description="Called by Claude Code, Codex or Gemini CLI before each shell command\n"
        "with the event JSON on stdin; answers in the agent's format. See docs/agents.md.\n"
        "usage: bar hook claude|codex|gemini",
        formatter_class=Formatter,
    )


# --- the command -----------------------------------------------------------------------


def hook_main(argv: list[str]) -> int:
    if not argv or "-h" in argv or "--help" in argv:
        if argv:
            sys.stdout.write(HELP)
        else:
            print(USAGE, file=sys.stderr)
        return 0 if argv else 2
    agent, rest = argv[0], argv[1:]
    if agent in AGENTS and rest[:1] == ["--unanswered"] and len(rest) == 2:
        sys.stdin.buffer.read()
        return _fail_closed(agent, rest[1])
    if agent not in AGENTS or (rest and (rest[0] != "--socket" or len(rest) != 2)):
        print(USAGE, file=sys.stderr)
        print(
            f"bar: unknown agent {agent!r}" if agent not in AGENTS else "bar: bad arguments",
            file=sys.stderr,
        )
        return 2
    socket_path = rest[1] if rest else os.environ.get("BAR_SOCKET")
    payload = sys.stdin.buffer.read()
    try:
        reply = channel.request(socket_path, "hook", agent, payload) if socket_path else None
    except OSError as exc:
        return _fail_closed(agent, f"bar run did not answer ({exc})")
    if reply is None:
        return _judge_here(agent, payload)
    return _emit(reply.stdout, reply.stderr, reply.exit_code)


def _judge_here(agent: str, payload: bytes) -> int:
    """No ``bar run`` answered: ask the running step of the task the agent works in, if
    any, else judge with the policy of its project."""
    from pathlib import Path

    from bar.agents.protocol import parse_event
    from bar.errors import BarError, HookInputError
    from bar.model.project import policy_and_channel  # not bar.api: all the verbs' modules
    from bar.policy.places import Places
    from bar.step import gate

    try:
        cwd = parse_event(agent, payload).cwd
    except HookInputError:
        cwd = None  # judge() answers an unreadable event itself
    try:
        where = Path(cwd) if cwd and os.path.isdir(cwd) else None
        policy, running = policy_and_channel(where)
        if running is not None:
            reply = channel.request(str(running), "hook", agent, payload)
            if reply is not None:
                return _emit(reply.stdout, reply.stderr, reply.exit_code)
    except (BarError, OSError) as exc:
        return _fail_closed(agent, f"{exc.__class__.__name__}: {exc}")
    # (no bar run to ask: the agent's directory stands for the worktree, the homes are ~)
    judgement = gate.judge(agent, payload, policy, places=Places.of(worktree=where))
    r = judgement.reply
    return _emit(r.stdout.encode(), r.stderr.encode(), r.exit_code)


def _fail_closed(agent: str, why: str) -> int:
    from bar.agents.protocol import render_input_error

    reply = render_input_error(agent, f"bar could not check this command ({why})")
    return _emit(reply.stdout.encode(), reply.stderr.encode(), reply.exit_code)


def _emit(stdout: bytes, stderr: bytes, code: int) -> int:
    if stdout:
        sys.stdout.buffer.write(stdout)
        sys.stdout.flush()
    if stderr:
        sys.stderr.buffer.write(stderr)
        sys.stderr.flush()
    return code
