"""``bar replay STEP``: play back an interactive step's terminal session."""

from __future__ import annotations

import sys

from bar import api
from bar.errors import BarError
from bar.terminal.cast import full_cast, replay_cast

TYPE_CHECKING = False
if TYPE_CHECKING:
    from bar.cli.parser import Commands


# --- the command line ------------------------------------------------------------------


def options(sub: Commands) -> None:
    """The command line of ``bar replay``: its options and help."""
    from bar.cli.parser import Formatter, task_opt

    p = sub.add_parser(
        "replay",
        formatter_class=Formatter,
        description="Play back the terminal recording (asciinema v2) of a step run in a pty\n"
        "(on a terminal, or with `bar run --pty`). A step run without one has no\n"
        "recording: replay exits 1, and `bar show STEP` prints its output.\n\n"
        "The stored recording (artifacts/NNNN.cast) keeps the timing and the escapes and\n"
        "refers to the step's output file (NNNN.output) for the text, so the output is\n"
        "stored once; --cast prints it whole, for asciinema or another player.",
        epilog="examples:\n"
        "  bar replay 3                 as fast as it happened, pauses cut to 2 s\n"
        "  bar replay 3 --speed 4\n"
        "  bar replay 3 --instant       the whole screen output at once\n"
        "  bar replay 3 --cast > 3.cast && asciinema play 3.cast",
    )
    task_opt(p)
    p.add_argument("step", metavar="STEP")
    p.add_argument("--speed", type=float, default=1.0, help="playback speed (default 1)")
    p.add_argument(
        "--max-idle", type=float, default=2.0, metavar="S", help="cap pauses at S seconds"
    )
    p.add_argument("--instant", action="store_true", help="print everything without pauses")
    p.add_argument(
        "--cast",
        action="store_true",
        help="print the whole recording as an asciinema v2 file instead of playing it",
    )
    p.set_defaults(_run=replay)


# --- the command -----------------------------------------------------------------------


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
