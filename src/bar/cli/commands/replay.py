"""``bar replay STEP``: play back an interactive step's terminal session."""

from __future__ import annotations

import sys

from bar import api
from bar.errors import BarError
from bar.terminal.cast import full_cast, replay_cast


def replay(
    *, task: str | None, step: str, speed: float, max_idle: float, instant: bool, cast: bool = False
) -> int:
    the_task = api.get_task(api.open_project(), task)
    record = api.show(the_task, step)
    if not record.artifacts.cast:
        raise BarError(
            f"step {record.step_id} was not run on a terminal, so it has no terminal "
            "recording to replay",
            hint=f"`bar show {record.step_id}` prints its output; a step run on a terminal "
            "(or with `bar run --pty`) is recorded for replay",
        )
    path = api.artifact_path(the_task, record.artifacts.cast)
    if cast:  # the whole recording, for another player (the stored one refers to the text)
        for line in full_cast(path):
            sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()
        return 0
    replay_cast(
        path,
        sys.stdout.buffer,
        speed=speed,
        max_idle=max_idle,
        instant=instant,
    )
    return 0
