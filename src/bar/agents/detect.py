"""Which released agent a command line starts, so ``bar run -- claude`` is supervised as
``bar run --agent claude -- claude`` would be (SPEC §8): by the program's name, also as
a path (``~/.local/bin/claude``), behind wrappers (``env``, ``nohup``, ``timeout``…) and
behind the package runners that fetch it (``npx @anthropic-ai/claude-code``, ``bunx``,
``pnpm dlx``, ``yarn dlx``), and as the script node runs (``node …/codex.js``).
"""

from __future__ import annotations

import re

# program names and npm packages of the agents bar supervises
_PROGRAMS = {"claude": "claude", "codex": "codex", "gemini": "gemini"}
_PACKAGES = {
    "@anthropic-ai/claude-code": "claude",
    "@openai/codex": "codex",
    "@google/gemini-cli": "gemini",
}
_RUNNERS = frozenset({"npx", "bunx", "pnpx"})
_DLX = frozenset({"pnpm", "yarn", "bun"})  # pnpm dlx PKG, yarn dlx PKG, bun x PKG
_VERSIONED = re.compile(r"(@?[^@]+(?:/[^@]+)?)(?:@.*)?")


def agent_of(argv: list[str]) -> str | None:
    """The agent ``argv`` starts ("claude", "codex", "gemini"), or None."""
    from bar.shell.wrappers import WRAPPERS

    i = 0
    while i < len(argv):
        while i < len(argv) and re.match(r"[A-Za-z_][A-Za-z0-9_]*=", argv[i]):
            i += 1  # VAR=value before the program
        if i >= len(argv):
            return None
        name = argv[i].rstrip("/").rsplit("/", 1)[-1]
        skip = WRAPPERS.get(name)
        after = skip(argv, i) if skip is not None else None
        if after is None or after >= len(argv):
            break
        i = after
    if i >= len(argv):
        return None
    name = argv[i].rstrip("/").rsplit("/", 1)[-1]
    rest = argv[i + 1 :]
    if name in _RUNNERS or (name in _DLX and rest[:1] in (["dlx"], ["x"])):
        return _package(rest[1:] if name in _DLX else rest)
    if name in ("node", "nodejs") and rest:
        return _script(rest)
    return _PROGRAMS.get(re.sub(r"\.(?:js|mjs|cjs|exe)$", "", name))


def _package(args: list[str]) -> str | None:
    """The agent a package runner runs: its first operand, or its ``-p``/``--package``."""
    k = 0
    while k < len(args):
        arg = args[k]
        if arg in ("-p", "--package") and k + 1 < len(args):
            found = _named(args[k + 1])
            if found is not None:
                return found
            k += 2
            continue
        if arg.startswith("--package="):
            found = _named(arg.partition("=")[2])
            if found is not None:
                return found
        elif not arg.startswith("-"):
            return _named(arg)
        k += 1
    return None


def _named(spec: str) -> str | None:
    """The agent a package or program name (``@openai/codex@0.5``, ``claude``) is."""
    match = _VERSIONED.fullmatch(spec)
    base = match.group(1) if match else spec
    return _PACKAGES.get(base) or _PROGRAMS.get(base)


def _script(args: list[str]) -> str | None:
    """The agent whose script ``node`` runs (``node …/@openai/codex/bin/codex.js``)."""
    script = next((a for a in args if not a.startswith("-")), None)
    if script is None:
        return None
    for package, agent in _PACKAGES.items():
        if f"/{package}/" in script:
            return agent
    name = script.rsplit("/", 1)[-1]
    return _PROGRAMS.get(re.sub(r"\.(?:js|mjs|cjs)$", "", name))
