"""Sharing task histories through git remotes (docs/sharing.md).

A task's record (``task.json``, ``ledger.jsonl``, ``artifacts/``) is written as a git tree
and wrapped in a *history commit* on ``refs/bar/history/<id>``, one ref per task, each
commit the child of the one pushed before, so a push is always a fast-forward and two
machines never race on one ref. The history commit's other parents are the commits the
record names (the snapshot chain's tip, the task branch's head, the commits rollbacks
keep), so the one ref carries every object a reader needs.

* ``record``   builds a history commit from a task's directory, and reads one back;
* ``scan``     finds what must not leave the machine (secrets, ignored or hidden files,
  files too big to cut), before anything does;
* ``remotes``  names the remote and talks to it;
* ``push``, ``fetch``, ``adopt`` are the commands; ``prepush`` the git hook that pushes
  histories with a branch.
"""
