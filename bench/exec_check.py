#!/usr/bin/env python3
"""Figure 22: the policy's check of every program a step starts (``policy.exec_check``).

The same steps with the exec check on and off (the project's config switched between the
rounds, which are interleaved), each a whole ``bar run``:

* 22-build: ``make -j2`` of 300 small C files (20 with ``--quick``; about 30 lines each;
  each ``cc -c`` starts the compiler's own programs too), built into the step's temporary
  directory; with ÷ without (target ≤ 1.05).
* 22-loop: a shell loop that starts 1,000 programs (200 with ``--quick``; ``/bin/true N``),
  nothing else: the check's cost alone, with ÷ without, and the time it adds to each
  program.
* 22-floor, 22-read: the same loop outside any step, under a listener that answers at
  once (the round trip alone) and under bar's listener reading each call whole without
  judging it, ÷ no listener: what is the mechanism's and what is the policy's.

    python bench/exec_check.py                      # the figure alone
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from figures import Params, Row, ratio_row  # noqa: E402
from harness import Fixture, interleave  # noqa: E402

NUMBER = 22
PROGRAMS = 1000
QUICK_PROGRAMS = 200  # (--quick: a smoke test, the same figure smaller)
QUICK_FILES = 20

_MAKEFILE = """\
SRCS := $(wildcard src/*.c)
OBJS := $(patsubst src/%.c,$(OUT)/%.o,$(SRCS))
all: $(OUT)/prog
$(OUT)/prog: $(OBJS)
\t$(CC) -o $@ $^
$(OUT)/%.o: src/%.c
\t$(CC) -O0 -c $< -o $@
"""


_BODY = """\
#include <stdio.h>
#include <string.h>
struct item{k} {{ int id; double weight; char name[32]; }};
static int compare{k}(const struct item{k} *a, const struct item{k} *b) {{
    if (a->weight < b->weight) return -1;
    return a->weight > b->weight;
}}
static void sort{k}(struct item{k} *items, int n) {{
    for (int i = 1; i < n; i++) {{
        struct item{k} key = items[i];
        int j = i - 1;
        while (j >= 0 && compare{k}(&items[j], &key) > 0) {{ items[j + 1] = items[j]; j--; }}
        items[j + 1] = key;
    }}
}}
int f{k}(int x) {{
    struct item{k} items[16];
    for (int i = 0; i < 16; i++) {{
        items[i].id = i; items[i].weight = (x * 31 + i * {k}) % 97;
        snprintf(items[i].name, sizeof items[i].name, "item-%d-%d", {k}, i);
    }}
    sort{k}(items, 16);
    return items[0].id + (int)strlen(items[15].name);
}}
"""


def _sources(root: Path, count: int) -> None:
    """``count`` small C files (a sort and a loop each: about 30 lines, as a project's
    files are, not empty ones), a main that calls them, and a Makefile."""
    src = root / "src"
    src.mkdir(parents=True, exist_ok=True)
    for k in range(count):
        (src / f"f{k}.c").write_text(_BODY.format(k=k))
    calls = " + ".join(f"f{k}(1)" for k in range(count))
    decls = "".join(f"int f{k}(int);\n" for k in range(count))
    (src / "main.c").write_text(f"{decls}int main(void) {{ return ({calls}) == 0; }}\n")
    (root / "Makefile").write_text(_MAKEFILE)


def fig22(f: Fixture, p: Params) -> list[Row]:
    if shutil.which("make") is None or shutil.which("cc") is None:
        return [Row(key="22-build", label="make and cc are not installed here", note="skipped")]
    repo = f.clone()
    f.init(repo)
    _, wt = f.new_task(repo, "exec-check")
    files = QUICK_FILES if p.quick else 300
    programs = QUICK_PROGRAMS if p.quick else PROGRAMS
    _sources(wt, files)
    f.bar(wt, "run", "--", "true")  # (the sources, recorded once as a hand edit)
    config = f.project_dir() / "config.yaml"
    on = config.read_text()
    off = on.replace("exec_check: true", "exec_check: false", 1)
    if on == off:
        raise SystemExit("bench: config.yaml has no policy.exec_check to switch")
    build = 'rm -rf "$TMPDIR/b"; mkdir -p "$TMPDIR/b" && make -s -j2 OUT="$TMPDIR/b"'
    loop = f"i=0; while [ $i -lt {programs} ]; do /bin/true $i; i=$((i+1)); done"

    def step(script: str, checked: bool) -> float:
        config.write_text(on if checked else off)
        return f.t([f.tools.bar, "run", "--", "sh", "-c", script], wt)

    s = interleave(
        {
            "build, checked": lambda: step(build, True),
            "build, unchecked": lambda: step(build, False),
            "loop, checked": lambda: step(loop, True),
            "loop, unchecked": lambda: step(loop, False),
        },
        p.repeat,
        p.warmup,
    )
    config.write_text(on)
    loop_row = ratio_row(
        "22-loop",
        f"a shell loop starting {programs} programs, every one judged ÷ none judged "
        "(the check's cost alone)",
        s,
        "loop, checked",
        "loop, unchecked",
        None,
        extra_ms=True,
    )
    if loop_row.extra_ms is not None:
        per = loop_row.extra_ms * 1000 / programs
        loop_row.note = f"{per:.0f} µs a program"
    return [
        ratio_row(
            "22-build",
            f"make -j2 of {files} C files (about {3 * files} programs), every program judged "
            "÷ none judged (target ≤ 1.05)",
            s,
            "build, checked",
            "build, unchecked",
            1.05,
        ),
        loop_row,
    ]


def _floor(p: Params) -> list[Row]:
    """The mechanism's own cost, outside any step: the loop under a listener that answers
    every call at once, reading nothing (the round trip to a thread of a Python process),
    and under bar's listener reading every call whole but judging nothing, each ÷ no
    listener at all."""
    import contextlib
    import fcntl
    import os
    import struct
    import subprocess
    import time

    from bar.sandbox import exec_watch, landlock

    class _Bare(exec_watch.Watch):
        def _answer_one(self) -> None:
            buf = bytearray(80)
            try:
                fcntl.ioctl(self._listener, 0xC0502100, buf, True)
            except OSError:
                return
            ident = struct.unpack_from("=Q", buf, 0)[0]
            with contextlib.suppress(OSError):
                fcntl.ioctl(self._listener, 0xC0182101, struct.pack("=QqiI", ident, 0, 0, 1))

    programs = QUICK_PROGRAMS if p.quick else PROGRAMS
    loop = f"i=0; while [ $i -lt {programs} ]; do /bin/true $i; i=$((i+1)); done"

    from bar.policy import default_policy
    from bar.policy.places import Places
    from bar.step.exec_judge import ExecJudge

    judge = ExecJudge(default_policy(), Places.of(worktree=os.getcwd()), lambda *e: None)

    def timed(kind: str) -> float:
        watch = None
        if kind == "quick":
            watch = exec_watch.Watch(judge, shortcut=judge.shortcut())
            watch.begin()
        elif kind != "none":
            kept = _Bare if kind == "bare" else exec_watch.Watch
            watch = kept(lambda found: None, compiled=False)
            watch.begin()

        def inside() -> None:
            landlock.prctl(38, 1)  # (no_new_privs, as Landlock sets it in a step)
            if watch is not None:
                watch.inside()

        began = time.perf_counter()
        proc = subprocess.Popen(["sh", "-c", loop], preexec_fn=inside)
        if watch is not None:
            watch.started()
        proc.wait()
        took = time.perf_counter() - began
        if watch is not None:
            watch.close()
        return took

    s = interleave(
        {
            "no listener": lambda: timed("none"),
            "answered at once": lambda: timed("bare"),
            "read whole, not judged": lambda: timed("read"),
            "compiled, judged": lambda: timed("quick"),
        },
        p.repeat,
        p.warmup,
    )
    rows = []
    for key, name, label in (
        (
            "22-floor",
            "answered at once",
            "a listener in Python answering every call at once, reading nothing",
        ),
        (
            "22-read",
            "read whole, not judged",
            "bar's listener in Python reading every call whole, judging nothing",
        ),
        (
            "22-quick",
            "compiled, judged",
            "the compiled listener with the default policy's shortcut (what a step has)",
        ),
    ):
        row = ratio_row(
            key,
            f"the same loop outside a step: {label} ÷ no listener (the mechanism's floor)",
            s,
            name,
            "no listener",
            None,
            extra_ms=True,
        )
        if row.extra_ms is not None:
            row.note = f"{row.extra_ms * 1000 / programs:.0f} µs a program"
        rows.append(row)
    return rows


def fig22_all(f: Fixture, p: Params) -> list[Row]:
    return [*fig22(f, p), *_floor(p)]


FIGURE = ("the policy's check of every program a step starts", fig22_all)


def main(argv: list[str]) -> int:
    import run

    return run.one_figure(NUMBER, argv)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
