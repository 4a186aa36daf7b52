"""Git object ids as bar passes them around: a commit's and a tree's are told apart by the
type checker (``CommitId``, ``TreeId``: plain strings at run time), and shown short."""

from typing import NewType

CommitId = NewType("CommitId", str)  # 40 (or 64) hex digits naming a commit
TreeId = NewType("TreeId", str)  # ... naming a tree


def short(sha: str | None) -> str:
    """An object id as people read it."""
    return sha[:10] if sha else "-"
