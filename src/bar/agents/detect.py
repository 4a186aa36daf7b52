"""Which released agent a command line starts, so ``bar run -- claude`` is supervised as
``bar run --agent claude -- claude`` would be (docs/agents.md): by the program's name, also as
a path (``~/.local/bin/claude``), behind wrappers (``env``, ``nohup``, ``timeout``…) and
behind the package runners that fetch it (``npx @anthropic-ai/claude-code``, ``bunx``,
``pnpm dlx``, ``yarn dlx``), and as the script node runs (``node …/codex.js``).
"""

from __future__ import annotations

import re
from functools import cache

from bar.agents import AGENTS
from bar.agents.base import of

_RUNNERS = frozenset({"npx", "bunx", "pnpx"})
_DLX = frozenset({"pnpm", "yarn", "bun"})  # pnpm dlx PKG, yarn dlx PKG, bun x PKG
_ASKS_ONLY = frozenset({"--version", "-v", "-V", "--help", "-h"})
_VERSIONED = re.compile(r"(@?[^@]+(?:/[^@]+)?)(?:@.*)?")


def agent_of(argv: list[str]) -> str | None:
    """The agent ``argv`` starts a session of ("claude", "codex", "gemini"), or None (also
    for ``claude --version``, ``codex --help``: no session, nothing to supervise)."""
    found = locate(argv)
    if found is None or (argv[found[1] + 1 :] and set(argv[found[1] + 1 :]) <= _ASKS_ONLY):
        return None
    return found[0]


def locate(argv: list[str]) -> tuple[str, int] | None:
    """The agent ``argv`` starts and the index of the word its own options follow (its
    program, the package a runner runs, the script node runs); None if none."""
    from bar.shell.wrappers import WRAPPERS

    i = 0
    while i < len(argv):
        while i < len(argv) and re.match(r"[A-Za-z_][A-Za-z0-9_]*=", argv[i]):
            i += 1  # VAR=value before the program
        if i >= len(argv):
            return None
        if _base(argv[i]) in _RUNNERS or _base(argv[i]) in _DLX:
            break  # (a package runner: the package it runs is read below)
        skip = WRAPPERS.get(_base(argv[i]))
        after = skip(argv, i) if skip is not None else None
        if after is None or after >= len(argv):
            break
        i = after
    if i >= len(argv):
        return None
    name, rest = _base(argv[i]), argv[i + 1 :]
    if name in _RUNNERS or (name in _DLX and rest[:1] in (["dlx"], ["x"])):
        start = i + 1 + (name in _DLX)
        return _package(argv, start)
    if name in ("node", "nodejs"):
        return _script(argv, i + 1)
    agent = _programs().get(re.sub(r"\.(?:js|mjs|cjs|exe)$", "", name))
    return (agent, i) if agent is not None else None


def _programs() -> dict[str, str]:
    """The program that starts each agent bar supervises -> the agent: its name (no
    agent's module is loaded for a command that starts none)."""
    return {name: name for name in AGENTS}


@cache
def _packages() -> dict[str, str]:
    """The npm package of each agent bar supervises -> the agent (``Agent.package``)."""
    return {of(name).package: name for name in AGENTS}


def _base(word: str) -> str:
    return word.rstrip("/").rsplit("/", 1)[-1]


def _package(argv: list[str], k: int) -> tuple[str, int] | None:
    """The agent a package runner runs: its first operand, or its ``-p``/``--package``
    (then the program named after the options)."""
    while k < len(argv):
        arg = argv[k]
        if arg in ("-p", "--package") and k + 1 < len(argv):
            agent = _named(argv[k + 1])
            if agent is not None:
                return agent, k + 1 if k + 2 >= len(argv) else _operand(argv, k + 2)
            k += 2
            continue
        if arg.startswith("--package="):
            agent = _named(arg.partition("=")[2])
            if agent is not None:
                return agent, _operand(argv, k + 1)
        elif not arg.startswith("-"):
            agent = _named(arg)
            return (agent, k) if agent is not None else None
        k += 1
    return None


def _operand(argv: list[str], k: int) -> int:
    """The first word from ``k`` on that is not an option (the program ``npx -p PKG``
    runs); ``k - 1`` if there is none."""
    for j in range(k, len(argv)):
        if not argv[j].startswith("-"):
            return j
    return k - 1


def _named(spec: str) -> str | None:
    """The agent a package or program name (``@openai/codex@0.5``, ``claude``) is."""
    match = _VERSIONED.fullmatch(spec)
    base = match.group(1) if match else spec
    return _packages().get(base) or _programs().get(base)


def _script(argv: list[str], k: int) -> tuple[str, int] | None:
    """The agent whose script ``node`` runs (``node …/@openai/codex/bin/codex.js``)."""
    at = next((j for j in range(k, len(argv)) if not argv[j].startswith("-")), None)
    if at is None:
        return None
    script = argv[at]
    for package, name in _packages().items():
        if f"/{package}/" in script:
            return name, at
    agent = _programs().get(re.sub(r"\.(?:js|mjs|cjs)$", "", _base(script)))
    return (agent, at) if agent is not None else None
