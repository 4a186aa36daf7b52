"""A step that is not recorded yet, on the command line: ``bar show STEP`` of the running
step (what it runs, since when, its output and checkpoints so far) and ``bar show
--follow`` (its output as it is written, stdout on stdout and stderr on stderr, its
checkpoints as they are taken, then how it ended). The reading is ``bar.step.live``'s,
through ``bar.api``; this module only prints.

``--follow --json`` prints one JSON object a line, as it comes (docs/json.md,
``$follow-event``): ``running``, then ``output`` and ``checkpoint``, and last ``step`` (the
step's record) or ``lost``.
"""

from __future__ import annotations

import codecs
import json
import sys
import time
from typing import Any

from bar import api
from bar.api import shapes
from bar.base.cmdline import line_of
from bar.cli.pager import paging
from bar.cli.render import (
    Painter,
    checkpoint_columns,
    checkpoint_line,
    duration,
    outcome,
    stat_text,
)
from bar.errors import BarError, StepNotFound
from bar.model.records import Step
from bar.model.tasks import Task
from bar.step.live import INTERRUPTED, RECORDING, LiveStep, Lost, Output, Recorded, Taken

POLL = 0.1  # seconds between two looks while following


def state_text(live: LiveStep) -> str:
    """How a step not recorded yet stands, in words."""
    if live.state == INTERRUPTED:
        return f"interrupted: {live.left()}\nnot recorded yet"
    if live.state == RECORDING:
        ended = f"exit {live.exit_code}" + (f" (signal {live.signal})" if live.signal else "")
        return f"{ended}; bar is recording the step"
    return f"running for {duration(live.running_ms())} (pid {live.pid}); not recorded yet"


def lost_hint(task: Task) -> str:
    return (
        f"the next command that changes task {task.name} records it as interrupted, with "
        "what it printed and changed until then; `bar doctor --repair` does it now"
    )


# --- bar show STEP, of the step running -----------------------------------------------


def show_live(task: Task, ref: str, as_json: bool) -> int | Step | None:
    """``bar show`` of a step not in the ledger: shown if it is the running one (0), its
    record if it ended meanwhile, None if it is not the running one either."""
    live = api.live_step(task)
    if live is None or live.step_id != api.parse_step_ref(ref):
        return None
    seen = api.glance_step(task, live.step_id)
    if seen.recorded is not None:
        return seen.recorded
    if as_json:
        print(json.dumps(shapes.live_show_entry(task, live, seen), indent=2, ensure_ascii=False))
        return 0
    paint = Painter(task.project.config.output.color)
    colour = "red" if live.state == INTERRUPTED else "yellow"
    with paging():
        print(
            f"{paint('step ' + live.step_id, 'bold')}  run  {paint(live.state, colour)}  "
            f"{line_of(live.cmd)}"
        )
        rows = [
            ("started", live.started_at),
            ("command", line_of(live.cmd)),
            ("cwd", live.cwd),
        ]
        result = state_text(live).splitlines()
        rows += [("result", paint(result[0], colour))]
        rows += [("", paint(line, colour)) for line in result[1:]]
        if live.pty:
            rows.append(("terminal", "interactive (pty)"))
        if isinstance(live.agent, dict) and live.agent.get("name"):
            rows.append(("agent", str(live.agent["name"])))
        for key, value in rows:
            print(f"  {key:<9} {value}")
        if seen.checkpoints:
            print(
                paint(
                    f"\n--- checkpoints so far ({len(seen.checkpoints)}; "
                    f"`bar show {live.step_id}.N` for one)",
                    "cyan",
                )
            )
            columns = checkpoint_columns(seen.checkpoints)
            for cp in seen.checkpoints:
                print(f"  {checkpoint_line(cp, paint, None, columns)}".rstrip())
        output = seen.output()
        if output is not None:
            print(paint(f"\n--- output so far (artifacts/{live.step_id}.output)", "cyan"))
            sys.stdout.flush()
            sys.stdout.buffer.write(output)
            sys.stdout.buffer.flush()
        if live.state == INTERRUPTED:
            print(paint(f"\n({lost_hint(task)})", "dim"))
        else:
            print(
                paint(
                    f"\n(bar show {int(live.step_id)} --follow streams the rest and ends "
                    "when the step is recorded)",
                    "dim",
                )
            )
    return 0


# --- bar show --follow ------------------------------------------------------------------


def follow(task: Task, ref: str | None, as_json: bool) -> int | None:
    """``bar show [STEP] --follow``: the step (default: the one running, else the next to
    start) followed to its end. None: text was asked of a step recorded before the follow
    began, which ``bar show`` shows as it is."""
    if ref is None:
        live = api.live_step(task)
        if live is None:
            api.steps_run_here(task)  # (else nothing would come)
            print(
                f"bar: no step of task {task.name} runs now; waiting for the next one "
                "(Ctrl-C stops waiting)",
                file=sys.stderr,
                flush=True,
            )
            try:
                live = api.wait_for_step(task)
            except KeyboardInterrupt:
                return 0
        ref = live.step_id
    follower = api.follower_of(task, ref)
    if not as_json:
        try:
            api.show(task, follower.step_id)
            return None
        except StepNotFound:
            pass
    printer = _Json(task) if as_json else _Text(task)
    try:
        while True:
            if not printer.headed:
                live = api.live_step(task)
                if live is not None and live.step_id == follower.step_id:
                    printer.head(live)
            for event in follower.poll():
                if isinstance(event, Output):
                    printer.output(event)
                elif isinstance(event, Taken):
                    printer.taken(event)
                elif isinstance(event, Recorded):
                    printer.recorded(event.step)
                    return 0
                elif isinstance(event, Lost):
                    printer.lost(event)
                    raise BarError(event.reason, hint=lost_hint(task) if event.live else None)
            if not follower.behind:
                time.sleep(POLL)
    except KeyboardInterrupt:  # (following ends; the step goes on)
        return 0
    finally:
        follower.close()


class _Text:
    """What ``--follow`` prints for a person: the step's head, then its output as it
    comes (stderr on stderr), each checkpoint on a line of its own, and how it ended."""

    def __init__(self, task: Task) -> None:
        self.task = task
        self.paint = Painter(task.project.config.output.color)
        self.headed = False
        self.step_id = ""
        self._line_start = True  # stdout's last byte ended a line

    def head(self, live: LiveStep) -> None:
        self.headed = True
        self.step_id = live.step_id
        paint = self.paint
        print(f"{paint('step ' + live.step_id, 'bold')}  run  {line_of(live.cmd)}")
        print(f"  started   {live.started_at}")
        print(
            paint("--- output as it is written (stderr on stderr); Ctrl-C stops following", "cyan")
        )
        sys.stdout.flush()

    def output(self, event: Output) -> None:
        stream = sys.stdout if event.stream == "stdout" else sys.stderr
        stream.flush()
        stream.buffer.write(event.data)
        stream.buffer.flush()
        if event.stream == "stdout" and event.data:
            self._line_start = event.data.endswith(b"\n")

    def _own_line(self) -> None:
        if not self._line_start:
            sys.stdout.buffer.write(b"\n")
            self._line_start = True

    def taken(self, event: Taken) -> None:
        self._own_line()
        text = checkpoint_line(event.checkpoint, self.paint)
        print(f"{self.paint('--- checkpoint', 'cyan')} {text}".rstrip(), flush=True)

    def recorded(self, step: Step) -> None:
        self._own_line()
        said = outcome(step, self.paint) or step.kind
        print(
            self.paint(f"--- step {step.step_id} recorded: ", "cyan")
            + f"{said}, {stat_text(step.diff_stat)}, {duration(step.duration_ms)}"
            + self.paint(f" (bar show {int(step.step_id)} for its patch)", "dim"),
            flush=True,
        )

    def lost(self, event: Lost) -> None:
        self._own_line()
        sys.stdout.flush()


class _Json:
    """What ``--follow --json`` prints: one JSON object a line (``$follow-event``)."""

    def __init__(self, task: Task) -> None:
        self.task = task
        self.headed = False
        self._decoders = {
            name: codecs.getincrementaldecoder("utf-8")(errors="replace")
            for name in ("stdout", "stderr")
        }

    def _emit(self, obj: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
        sys.stdout.flush()

    def head(self, live: LiveStep) -> None:
        self.headed = True
        self._emit({"event": "running", "step": shapes.live_entry(self.task, live, None)})

    def output(self, event: Output) -> None:
        text = self._decoders[event.stream].decode(event.data)
        if text:
            self._emit({"event": "output", "stream": event.stream, "text": text})

    def taken(self, event: Taken) -> None:
        rec = event.checkpoint.to_record()
        rec["task_dir"] = str(self.task.dir)
        self._emit({"event": "checkpoint", "checkpoint": rec})

    def recorded(self, step: Step) -> None:
        for name, decoder in self._decoders.items():
            if text := decoder.decode(b"", final=True):
                self._emit({"event": "output", "stream": name, "text": text})
        self._emit({"event": "step", "step": shapes.log_entry(self.task, step, False)})

    def lost(self, event: Lost) -> None:
        live = shapes.live_entry(self.task, event.live, None) if event.live else None
        self._emit(
            {"event": "lost", "step_id": event.step_id, "reason": event.reason, "step": live}
        )
