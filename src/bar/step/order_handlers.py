"""Every order bar knows (``bar.changes.orders``): each handler registers itself as its module
loads, and ``load`` loads them all, for who is about to look one up.

The modules are named, not imported: the handlers live in the layers that own what they
change (the aide's decisions and flows, a step's checkpoints and rollbacks, the board's
operations, which may send a task to workers), above the registry the running step's
order server looks them up in (docs/internals.md, "Layers")."""

from __future__ import annotations

import importlib

HANDLERS = (
    "bar.aide.answers",  # decide.take
    "bar.aide.decide",  # decide.submit, decide.answer, decide.clean
    "bar.aide.flow",  # flow
    "bar.step.order_ops",  # checkpoint, rollback
    "bar.api.board_orders",  # board
)


def load() -> None:
    """Register the handler of every order."""
    for name in HANDLERS:
        importlib.import_module(name)
