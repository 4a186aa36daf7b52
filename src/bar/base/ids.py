"""Git object ids as bar passes them around: a commit's and a tree's are told apart by the
type checker (``CommitId``, ``TreeId``: plain strings at run time), known for what they
are (``is_object_id``) and shown short."""

import re
from typing import NewType

CommitId = NewType("CommitId", str)  # 40 (or 64) hex digits naming a commit
TreeId = NewType("TreeId", str)  # ... naming a tree

_OBJECT_ID_RE = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def is_object_id(value: object) -> bool:
    """True for a full SHA-1 or SHA-256 object id: what bar's records may hand to git
    (anything else, such as ``--output=FILE``, could be read by git as an option)."""
    return isinstance(value, str) and _OBJECT_ID_RE.fullmatch(value) is not None


def short(sha: str | None) -> str:
    """An object id as people read it."""
    return sha[:10] if sha else "-"
