"""What a task's record holds: snapshots, checkpoints, named states, bases, blame and diffs."""
