"""The verbs that change a task's files or a branch: rollback, apply, undo, sync, each with its journal and its recovery."""
