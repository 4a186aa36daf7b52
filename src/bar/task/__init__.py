"""Tasks: making, reopening and deleting one, its worktree, where it stands, the project's events."""
