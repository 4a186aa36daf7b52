"""bar: hand work to AI coding agents without fear.

Every piece of work is a task with its own git worktree; every command run in it is a
step recorded in an append-only ledger with the exact patch it made and what it printed.
"""

__version__ = "0.1.0"
# the version of what --json prints (docs/json.md): raised only by a change that would
# break a reader (a key removed, renamed or retyped), never for a key added
JSON_VERSION = 1
VERSION_LINE = f"bar {__version__} (json {JSON_VERSION})"
