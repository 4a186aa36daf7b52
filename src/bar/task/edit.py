"""``bar task edit``: change what a person says about a task, its ``metadata``.

A task's metadata is the seed's free object (reference 000: ``description``, ``tags``,
anything the user sets). What the task *is* (its name, which names its branch and
worktree; its base, its status) is changed by the verbs that own it, never here.

An edit is one change of task.json under the task's lock, on the file read afresh (a
claim or a sync may have written it since the command began), and one ``task.edited``
event in events.jsonl naming each key that changed, from what to what
(``{"changed": {"owner": {"from": null, "to": "payments"}}}``). An edit that changes
nothing writes nothing. Values are stored scrubbed, as a description always was: a
value may quote a token, and a key that names a secret (``api_key``) keeps ``***``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bar.base.record import field, record
from bar.errors import Locked, UsageError
from bar.model import board
from bar.model.tasks import Task
from bar.redact import is_secret_name
from bar.redact import known as known_secrets
from bar.step import transaction
from bar.task.state import is_running

DESCRIPTION = "description"
TAGS = "tags"
# keys with options of their own: -d and --tag/--untag
RESERVED = (DESCRIPTION, TAGS)
KEY_MAX = 64


@record(frozen=True)
class Edit:
    """What to change. ``description``: None leaves it, ``""`` removes it."""

    description: str | None = None
    tags: Sequence[str] = ()  # to add
    untags: Sequence[str] = ()  # to remove
    meta: Mapping[str, str] = field(default_factory=dict)  # key -> value to set
    unset: Sequence[str] = ()  # keys to remove

    @property
    def empty(self) -> bool:
        return self.description is None and not (
            self.tags or self.untags or self.meta or self.unset
        )


@record(frozen=True)
class Edited:
    task: Task
    changed: dict[str, dict[str, Any]]  # key -> {"from": old or None, "to": new or None}


def parse_meta(pairs: Sequence[str]) -> dict[str, str]:
    """``--meta KEY=VALUE`` pairs as a mapping; a bad or repeated key is a usage error."""
    meta: dict[str, str] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq:
            raise UsageError(
                f"--meta {pair!r} is not KEY=VALUE",
                hint="e.g. --meta team=payments (an empty value: --meta team=)",
            )
        check_key(key, "--meta")
        if key in meta:
            raise UsageError(f"--meta {key} is given twice", hint="give each key once")
        meta[key] = value
    return meta


def check_key(key: str, option: str) -> str:
    """A metadata key a person can type and read back: 1 to 64 printable characters,
    no ``=``, none of the keys that have options of their own."""
    if key in RESERVED:
        other = "-d/--description" if key == DESCRIPTION else "--tag/--untag"
        raise UsageError(f"{option} {key}: {key} has its own option", hint=f"use {other}")
    if not key or len(key) > KEY_MAX or not key.isprintable() or "=" in key or key != key.strip():
        raise UsageError(
            f"{option} {key!r}: a key is 1 to {KEY_MAX} printable characters, without '=' "
            "or spaces around it",
            hint="e.g. team, ticket, reviewer",
        )
    return key


def stored_meta(meta: Mapping[str, str]) -> dict[str, str]:
    """Values as they are written: scrubbed, and ``***`` under a key that names a secret."""
    return {k: "***" if is_secret_name(k) else known_secrets.scrub(v) for k, v in meta.items()}


def edit(task: Task, change: Edit) -> Edited:
    """Apply ``change`` to the task's metadata; what changed, key by key (empty: nothing
    did, and nothing was written)."""
    if change.empty:
        raise UsageError(
            "nothing to change",
            hint="give -d DESC, --tag T, --untag T, --meta KEY=VALUE or --unset-meta KEY",
        )
    both = set(change.meta) & set(change.unset)
    if both:
        key = sorted(both)[0]
        raise UsageError(f"--meta {key} and --unset-meta {key} contradict each other")
    for key in change.unset:
        check_key(key, "--unset-meta")
    project = task.project
    if is_running(task):
        raise Locked(
            f"task {task.name} ({task.id}) is running a step",
            hint="edit it when the step has ended",
        )
    with transaction.holding(task, "bar task edit", wait=False) as task:
        before = dict(task.metadata)
        after = _changed(before, change)
        changed = {
            key: {"from": before.get(key), "to": after.get(key)}
            for key in sorted(set(before) | set(after))
            if before.get(key) != after.get(key)
        }
        if changed:
            task.metadata = after
            task.save()
            project.log_event("task.edited", task=board.task_view(task), changed=changed)
    return Edited(task, changed)


def _changed(before: dict[str, Any], change: Edit) -> dict[str, Any]:
    after = dict(before)
    if change.description is not None:
        if change.description:
            after[DESCRIPTION] = known_secrets.scrub(change.description)
        else:
            after.pop(DESCRIPTION, None)
    if change.tags or change.untags:
        old = before.get(TAGS)
        tags = [str(t) for t in old] if isinstance(old, list) else []
        for tag in change.untags:
            if known_secrets.scrub(tag) not in tags:
                raise UsageError(
                    f"--untag {tag}: the task has no such tag",
                    hint=f"its tags: {', '.join(tags)}" if tags else "it has no tags",
                )
            tags.remove(known_secrets.scrub(tag))
        for tag in change.tags:
            if not tag.strip():
                raise UsageError("--tag: a tag cannot be empty")
            scrubbed = known_secrets.scrub(tag)
            if scrubbed not in tags:
                tags.append(scrubbed)
        if tags:
            after[TAGS] = tags
        else:
            after.pop(TAGS, None)
    for key in change.unset:
        if key not in after:
            own = sorted(k for k in before if k not in RESERVED)
            raise UsageError(
                f"--unset-meta {key}: the task has no metadata key {key!r}",
                hint=f"its keys: {', '.join(own)}" if own else "it has no metadata of its own",
            )
        del after[key]
    after.update(stored_meta(change.meta))
    return after
