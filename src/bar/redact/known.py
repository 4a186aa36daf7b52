"""The secrets a bar process knows, for text written where no step's scrubber reaches.

A step scrubs what it records with a ``Scrubber`` made from the environment and the run's
``-e`` pairs. Some text reaches disk outside that step, though: the task lock names its
holder's command as soon as the lock is taken (before the step exists), a task's
description is stored when the task is made, and a ledger line may be written by a
process that is not running a step (crash recovery, rollback, hand edits). ``scrubber()``
knows everything this process was told: the values of secret-named variables in its
environment, token shapes, and the values of secret-named ``-e`` pairs, which a run
request hands to ``learn`` when it is made, before any lock is taken. (Recovery does not
depend on it: the running marker holds the command already scrubbed by the run.)

What is learned stays for the life of the process (one command, for the CLI); a
long-lived process keeps only the most recent values, so scrubbing never slows down
without bound.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Final

from bar.redact import Scrubber, is_secret_name

_KEEP: Final = 256

# insertion-ordered, so the oldest value is the first to go
_learned: dict[str, None] = {}


def learn(env: Mapping[str, str]) -> None:
    """Remember the values of the secret-named variables in ``env`` (``-e`` pairs)."""
    for name, value in env.items():
        if is_secret_name(name) and value:
            _learned.pop(value, None)
            _learned[value] = None
    while len(_learned) > _KEEP:
        del _learned[next(iter(_learned))]


def scrubber() -> Scrubber:
    """A scrubber for every secret this process knows of."""
    from_environ = [value for name, value in os.environ.items() if is_secret_name(name)]
    return Scrubber([*from_environ, *_learned])


def scrub(text: str) -> str:
    """``text`` with every secret this process knows of replaced by ``***``."""
    return scrubber().scrub_text(text)
