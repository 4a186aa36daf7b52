"""Tasks: making, reopening and deleting one, its worktree, where it stands, the project's events."""

from bar.task import seed_board as _seed_board  # noqa: F401  (keeps the seed layout's copy)
