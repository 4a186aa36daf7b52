"""worktree."""
