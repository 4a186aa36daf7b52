"""Long options as programs read them, and git settings that run commands.

GNU ``getopt_long`` and git's option parser both accept any unambiguous prefix of a
long option: ``rm --rec`` is ``rm --recursive``, ``git reset --har`` is ``git reset
--hard``. ``expand_long`` writes such prefixes out in full for the programs listed in
``LONG_OPTIONS``, so a rule only has to know the full name. A prefix of several
options (``git push --forc``: ``--force``, ``--force-with-lease``…) makes the program
stop with an error; here it is read as the first of them in the table, which lists the
destructive options first: a rule sees the most dangerous reading of a command that
cannot do anything else.
"""

from __future__ import annotations

import re


def _table(text: str, prefix: str = "--") -> tuple[str, ...]:
    return tuple(prefix + name for name in text.split())


# Per program (or "git SUBCOMMAND"): every long option, destructive ones first.
LONG_OPTIONS: dict[str, tuple[str, ...]] = {
    "rm": _table(
        "recursive force no-preserve-root dir interactive one-file-system preserve-root "
        "verbose help version"
    ),
    "chmod": _table(
        "recursive no-preserve-root changes preserve-root quiet reference silent verbose help "
        "version"
    ),
    "chown": _table(
        "recursive no-preserve-root changes dereference from no-dereference preserve-root quiet "
        "reference silent verbose help version"
    ),
    "git push": _table(
        "force mirror delete prune all atomic dry-run exec follow-tags force-with-lease "
        "force-if-includes ipv4 ipv6 no-verify porcelain progress push-option quiet "
        "receive-pack recurse-submodules repo set-upstream signed tags thin verbose verify"
    ),
    "git send-pack": _table(
        "force mirror all atomic dry-run exec force-with-lease force-if-includes "
        "helper-status progress push-option quiet receive-pack remote signed stateless-rpc "
        "stdin thin verbose"
    ),
    "git reset": _table(
        "hard merge intent-to-add keep mixed no-refresh patch pathspec-file-nul "
        "pathspec-from-file quiet recurse-submodules refresh soft"
    ),
    "git clean": _table("force dry-run exclude interactive quiet"),
    "git branch": _table(
        "delete force abbrev all color column contains copy create-reflog edit-description "
        "format ignore-case list merged move no-contains no-merged points-at quiet "
        "recurse-submodules remotes set-upstream-to show-current sort track unset-upstream "
        "verbose"
    ),
    "git restore": _table(
        "source worktree conflict ignore-skip-worktree-bits ignore-unmerged merge ours overlay "
        "patch pathspec-file-nul pathspec-from-file progress quiet recurse-submodules staged "
        "theirs"
    ),
    "git gc": _table("prune aggressive auto cruft force keep-largest-pack quiet"),
    "git reflog": _table(
        "expire expire-unreachable all dry-run rewrite single-worktree stale-fix updateref verbose"
    ),
}
LONG_OPTIONS["chgrp"] = LONG_OPTIONS["chown"]


def expand_long(args: list[str], options: tuple[str, ...] | None) -> list[str]:
    """``args`` with each abbreviated long option written out (up to ``--``)."""
    if not options:
        return args
    out = list(args)
    for k, arg in enumerate(args):
        if arg == "--":
            break
        if not arg.startswith("--") or len(arg) < 3:
            continue
        name, eq, value = arg.partition("=")
        if name in options:
            continue
        full = next((option for option in options if option.startswith(name)), None)
        if full is not None:
            out[k] = full + eq + value
    return out


# git settings whose value is a command git runs (lower case, as git compares them).
# `alias.*` is handled on its own: a value starting with `!` is a shell script, any
# other value is a git command line.
_GIT_COMMAND_KEY = (
    r"core\.(?:sshcommand|pager|editor|askpass|fsmonitor|gitproxy)|sequence\.editor"
    r"|diff\.external|gpg\.(?:[^.=]+\.)?program|credential\.(?:.+\.)?helper"
    r"|(?:filter|diff|merge|difftool|mergetool)\..+\.(?:clean|smudge|process|textconv"
    r"|command|driver|cmd)|remote\..+\.(?:uploadpack|receivepack)|uploadpack\.packobjectshook"
    r"|pager\..+|sendemail\.(?:.+\.)?(?:smtpserver|tocmd|cccmd)"
)


_BOOLEANS = frozenset(_table("true false yes no on off 1 0", ""))


def git_setting(key: str, value: str, scripts: list[str], nested: list[list[str]]) -> bool:
    """Collect what a git setting ``key=value`` runs; True if ``value`` is such code
    (and should be shown masked)."""
    low = key.lower()
    if low.startswith("alias."):
        if value.startswith("!"):
            scripts.append(value[1:])
        else:
            nested.append(["git", *value.split()])
        return True
    if low == "core.fsmonitor" and value.lower() in _BOOLEANS:
        return False  # git's own monitor, or none
    if re.fullmatch(_GIT_COMMAND_KEY, low):
        scripts.append(value[1:] if value.startswith("!") else value)
        return True
    return False


# What `git config` does other than setting a value: `git config get KEY` (and the
# older `git config --get KEY`), listing, removing...
_CONFIG_READS = (
    "get get-all get-regexp get-urlmatch unset unset-all list edit rename-section "
    "remove-section get-color get-colorbool"
)
_CONFIG_ACTIONS = frozenset(_table(_CONFIG_READS, ""))
_CONFIG_ACTION_OPTIONS = frozenset(_table(_CONFIG_READS)) | {"-l", "-e"}
_CONFIG_VALUE_OPTIONS = frozenset(["-f", "--file", "--blob", "--type", "--default", "--comment"])


def git_config(args: list[str], scripts: list[str], nested: list[list[str]]) -> int | None:
    """``git config [opts] [set] KEY VALUE``: collect what the value runs, if it is code,
    and return its index (to be masked)."""
    positional: list[int] = []
    k = 0
    while k < len(args):
        if args[k] in _CONFIG_VALUE_OPTIONS:
            k += 2
            continue
        if not args[k].startswith("-"):
            positional.append(k)
        k += 1
    reads = positional and args[positional[0]] in _CONFIG_ACTIONS
    if reads or not _CONFIG_ACTION_OPTIONS.isdisjoint(args):
        return None  # reading, listing or removing sets nothing
    if positional and args[positional[0]] == "set":
        positional = positional[1:]
    if len(positional) >= 2:
        key, value = args[positional[0]], args[positional[1]]
        if git_setting(key, value, scripts, nested):
            return positional[1]
    return None
