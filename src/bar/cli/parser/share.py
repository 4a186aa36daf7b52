"""The command line of sharing: ``bar push``, ``bar fetch``, ``bar review`` and ``bar export``
(SPEC §14). Part of ``bar.cli.parser``, kept apart for length."""

from __future__ import annotations

import argparse
from typing import Any

from bar.cli.parser import _cmd, _Formatter, _json_opt, _task_opt


def commands(sub: Any) -> None:
    p = sub.add_parser(
        "push",
        help="publish task histories to a git remote (scanned for secrets first)",
        formatter_class=_Formatter,
        description="Publish a task's history to a git remote, so a reviewer or a teammate on\n"
        "another machine can read it (bar fetch) and go on with it (bar task adopt). Its\n"
        "record (task.json, ledger, outputs, patches, sessions, checkpoints) goes as one\n"
        "commit on refs/bar/history/<id>, its states on refs/bar/tasks/<id>: one ref per\n"
        "task, fast-forward only, so machines never race.\n\n"
        "Nothing leaves before it is scanned: a secret (a token, or the value of a secret\n"
        "variable you have set), a file your .gitignore ignores or sandbox.deny_read hides,\n"
        "a file of the task's states over share.max_blob: any of them refuses the push\n"
        "(exit 12), naming the file and line and an id; --allow ID lets that one through.\n"
        "Outputs and other record files over share.max_blob (default 10MB) are cut, with a\n"
        "marker, in the pushed copy; yours stay whole.\n\n"
        "REMOTE is a remote's name or a URL; default: share.remote in config.yaml, else\n"
        "origin. It may be a repository of its own for agents' records.",
        epilog="examples:\n"
        "  bar push                         the current task, to origin\n"
        "  bar push --all                   every task of this machine\n"
        "  bar push logs --task fix-login   to the remote named logs\n"
        "  bar push --dry-run               scan and say what would go\n"
        "  bar push --allow 3fa9c2d1e0      after checking that finding is no secret",
    )
    p.add_argument("remote", nargs="?", metavar="REMOTE", help="a remote's name or a URL")
    _task_opt(p)
    p.add_argument("--all", action="store_true", help="every task of this machine")
    p.add_argument(
        "--allow",
        action="append",
        default=[],
        metavar="ID",
        help="let the finding with this id through (again for more)",
    )
    p.add_argument("--dry-run", action="store_true", help="scan, and push nothing")
    # the pre-push hook's (bar init --share): the remote git pushes to, refs on stdin
    p.add_argument("--hook", metavar="REMOTE", help=argparse.SUPPRESS)
    _json_opt(p)
    _cmd(p, "share:push")

    p = sub.add_parser(
        "fetch",
        help="bring other machines' task histories here, as read-only tasks",
        formatter_class=_Formatter,
        description="Fetch the task histories on a git remote. A task of another machine\n"
        "arrives as a read-only copy: bar task list marks it with its origin, and log,\n"
        "show, diff, blame, show --session and ui read it as any task; nothing changes it\n"
        "but the next fetch. bar task adopt ID continues it here. A task of this machine\n"
        "is never changed: the fetch says if the remote is behind it (bar push), went on\n"
        "with it elsewhere (bar task adopt), or holds another line of work (diverged).",
        epilog="examples:\n"
        "  bar fetch                  from share.remote, else origin\n"
        "  bar fetch logs\n"
        "  bar fetch --json",
    )
    p.add_argument("remote", nargs="?", metavar="REMOTE", help="a remote's name or a URL")
    _json_opt(p)
    _cmd(p, "share:fetch")
