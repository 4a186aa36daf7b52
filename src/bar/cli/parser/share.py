"""The command line of sharing: ``bar push``, ``bar fetch``, ``bar review`` and ``bar export``
(docs/sharing.md). Part of ``bar.cli.parser``, kept apart for length."""

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

    p = sub.add_parser(
        "review",
        help="the steps, sessions and policy decisions behind a pushed branch",
        formatter_class=_Formatter,
        description="Review a branch someone pushed by the record behind it. bar apply ends\n"
        "each commit it makes with Bar-Task and Bar-Step lines, and a squash merge keeps\n"
        "them; for the commits of BRANCH that the base lacks (what a pull request would\n"
        "merge), bar names each task they come from and shows its steps up to the one\n"
        "landed: command, exit code, changes, the agent's session (model, turns, tool\n"
        "calls, tokens, cost) and what the policy decided (blocks and asks above all).\n"
        "It says too whether the commit holds the task's files as landing that state\n"
        "on the commit's parent gives them (a squash or a rebase of the applied commit\n"
        "does; a fix made on the way does not), and whether the branch changed them since.\n\n"
        "A task of another machine is read from its copy: bar fetch brings it first.\n"
        "BRANCH is a local branch, a remote-tracking one (origin/feature) or any ref\n"
        "(refs/pull/12/head, once fetched). Exit 3: no commit names a task, or none of\n"
        "the tasks named is here.",
        epilog="examples:\n"
        "  bar review feature                 a local branch, against git.default_base\n"
        "  git fetch origin && bar fetch && bar review origin/feature\n"
        "  git fetch origin pull/12/head:refs/pull/12/head && bar review refs/pull/12/head\n"
        "  bar review feature --base release  against another branch\n"
        "  bar review feature --json",
    )
    p.add_argument("branch", metavar="BRANCH", help="the branch (or any ref) to review")
    p.add_argument(
        "--base",
        metavar="BRANCH",
        help="the branch it goes onto: its commits are not reviewed "
        "(default: git.default_base in config.yaml)",
    )
    _json_opt(p)
    _cmd(p, "review:review")

    p = sub.add_parser(
        "export",
        help="write a task's record for other tools (ATIF, OpenTelemetry, Agent Trace)",
        formatter_class=_Formatter,
        description="Write what a task's record holds in a format other tools read.\n\n"
        "atif: the task's agent sessions as one ATIF trajectory (the Agent Trajectory\n"
        "Interchange Format of the Harbor project, ATIF-v1.7), JSON: bar's own steps\n"
        "each run an agent session, embedded as a trajectory of its own with its\n"
        "messages, tool calls and their results, tokens and cost per answer, and its\n"
        "subagents. --step N writes that step's session alone.\n\n"
        "otel: the task's steps, agent sessions and tool calls as OpenTelemetry spans\n"
        "(GenAI semantic conventions: invoke_agent, execute_tool, gen_ai.usage.*,\n"
        "process.exit.code; policy decisions as span events), one OTLP/JSON request any\n"
        "collector takes (POST it to /v1/traces). Needs bar[otel]. To send every step as\n"
        "it is recorded, set telemetry.otlp_endpoint in config.yaml (or the standard\n"
        "OTEL_EXPORTER_OTLP_ENDPOINT): see docs/sharing.md.\n\n"
        "agent-trace: which lines of which files the task's steps wrote, and who wrote\n"
        "them, as Agent Trace records (the open RFC of github.com/cursor/agent-trace,\n"
        "spec 0.1.0), JSON Lines, one record per commit: each bar apply whose commit is\n"
        "in the repository, and the last recorded state if no apply landed it. A tool\n"
        'call of an agent, or a step that ran one, is contributor "ai" with its model;\n'
        'a hand edit "human"; any other command "unknown". Records say version "0.1",\n'
        "the form the published schema accepts (its pattern is MAJOR.MINOR).\n\n"
        "Every format is scrubbed of the secrets bar knows, as the record is.",
        epilog="examples:\n"
        "  bar export --format atif -o trajectory.json\n"
        "  bar export --format atif --step 3 | jq .final_metrics\n"
        "  bar export --format otel -o spans.json\n"
        "  curl -H 'Content-Type: application/json' --data @spans.json \\\n"
        "      http://127.0.0.1:4318/v1/traces\n"
        "  bar export --format agent-trace --task fix-login | jq .files",
    )
    p.add_argument(
        "--format",
        dest="format",
        required=True,
        choices=("atif", "otel", "agent-trace"),
        help="the format to write: atif, otel or agent-trace",
    )
    _task_opt(p)
    p.add_argument(
        "--step",
        metavar="N",
        help="atif, otel: that step alone (atif: its agent session)",
    )
    p.add_argument(
        "--output", "-o", metavar="FILE", help="write to FILE (default: standard output)"
    )
    _cmd(p, "export:export")

    notes = sub.add_parser(
        "notes",
        help="line attribution as git-ai notes (refs/notes/ai): export, import",
        formatter_class=_Formatter,
        description="Write and read which lines of a commit an agent wrote, as git notes in\n"
        "the git-ai authorship format (authorship/3.0.0, under refs/notes/ai), so tools\n"
        "that read git-ai's notes see bar's agents, and bar blame --rev sees theirs.",
    )
    nsub = notes.add_subparsers(dest="notes_command", metavar="ACTION")
    notes.set_defaults(_help=notes)
    p = nsub.add_parser(
        "export",
        help="write a note on each commit bar apply made",
        formatter_class=_Formatter,
        description="Write a git-ai authorship note on each commit a bar apply made (in REV's\n"
        "history, with --rev): for each line the commit added, the agent session and\n"
        "the step or tool call that wrote it (an s_ key, with the agent, its session id\n"
        "and model in the note's metadata), or, for a hand edit bar recorded, you as a\n"
        "known human (h_). Lines of other commands are left unattested. A note another\n"
        "tool wrote on the commit is kept unless --force. Notes travel with\n"
        "git push origin refs/notes/ai.",
        epilog="examples:\n"
        "  bar notes export                     every applied commit of every task\n"
        "  bar notes export --rev main          those in main's history\n"
        "  git notes --ref ai show HEAD         what a note says\n"
        "  git push origin refs/notes/ai        share them",
    )
    p.add_argument("--rev", metavar="REV", help="only commits in REV's history")
    _task_opt(p)
    p.add_argument("--force", action="store_true", help="replace notes other tools wrote")
    _json_opt(p)
    _cmd(p, "notes:export_notes")
    p = nsub.add_parser(
        "import",
        help="read git-ai notes for bar blame --rev",
        formatter_class=_Formatter,
        description="Read every note of a notes ref (default refs/notes/ai) and check it\n"
        "against the git-ai standard; bar blame --rev then names, for a line no task here\n"
        "wrote, the agent, model and session (or the human) the commit's note gives. A\n"
        "note that fails the check is reported with its commit, and left out. Import\n"
        "again after new notes arrive.",
        epilog="examples:\n"
        "  git fetch origin refs/notes/ai:refs/notes/ai && bar notes import\n"
        "  bar notes import --ref refs/notes/team-ai\n"
        "  bar blame --rev main src/app.py",
    )
    p.add_argument("--ref", metavar="REF", help="the notes ref to read (default: refs/notes/ai)")
    _json_opt(p)
    _cmd(p, "notes:import_notes")
