"""Giving an order (``bar.changes.orders``) to the task's one writer: sent to the running
step's ``bar run`` over the task's socket, or, with no step running, done here under the
task's lock, after what a crashed bar left is finished and hand edits are recorded."""

from __future__ import annotations

import json
from collections.abc import Mapping

from bar.changes import orders
from bar.errors import BarError
from bar.model import journals
from bar.model.tasks import Task
from bar.step import order_handlers, transaction
from bar.store.lock import is_locked


def order(
    task: Task, op: str, args: Mapping[str, object], *, wait: bool = True
) -> dict[str, object]:
    """Do ``op`` as the task's one writer: when a step is running, sent over the task's
    socket to that step's ``bar run`` (channel verb ``order``, ARG = op, BODY = JSON args;
    reply stdout = JSON result, or exit code + "message\\nhint: ..." on stderr, re-raised
    here as a BarError with that exit code); with no step running, done here under the
    task's lock, after a crash's leftovers are finished and hand edits recorded
    (``transaction.changing``)."""
    order_handlers.load()
    handler, who = orders.lookup(op)
    body = json.dumps(dict(args), ensure_ascii=False).encode()
    sent = _send(task, op, body)
    if sent is not None:
        return sent
    if who == "inside":
        error = orders.refused(op, who, running=False)
        assert error is not None
        raise error
    with transaction.changing(task, f"bar {op}", wait=wait) as fresh:
        return handler(orders.LocalContext(fresh), args)


def _send(task: Task, op: str, body: bytes) -> dict[str, object] | None:
    """The running step's answer to the order; None when no step is running."""
    from bar.step import channel

    if journals.RUN.read(task.paths) is None or not task.paths.socket.exists():
        return None
    if not is_locked(task.paths.lock):
        return None  # a crashed step's: done here, after it is recorded
    reply = channel.request(str(task.paths.socket), "order", op, body)
    if reply is None:
        return None  # the step has just ended
    if reply.exit_code != 0:
        message, _, hint = reply.stderr.decode("utf-8", "replace").partition("\nhint: ")
        error = BarError(message or f"the running step refused {op}", hint=hint or None)
        error.exit_code = reply.exit_code
        raise error
    result = json.loads(reply.stdout)
    if not isinstance(result, dict):
        raise BarError(f"the running step answered {op} with something unreadable")
    return result
