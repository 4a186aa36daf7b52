"""Output reaches disk as it comes: where a match could still be under way at the end of
a stream (``bar.redact.partial_match``), and a piped step's output surviving a crash of bar."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from helpers import BAR_EXE, new_task, task_dir
from hypothesis import given, settings
from hypothesis import strategies as st

from bar.redact import shape_passes
from bar.redact.partial_match import lead_in, prefix_at, unfinished

# --------------------------------------------------------------------------- partial match


def first_unfinished(pattern: bytes, data: bytes) -> int | None:
    found = unfinished(pattern)
    m = found.search(data) if found is not None else None
    return None if m is None else m.start()


@pytest.mark.parametrize(
    ("pattern", "data", "expected"),
    [
        (rb"abc", b"xxab", 2),  # a prefix at the end
        (rb"abc", b"xxabc", None),  # a whole match reads nothing past its end
        (rb"abc", b"xxabd", None),
        (rb"ab{2,4}", b"xabbb", 1),  # a run that could go on
        (rb"ab{2,4}", b"xabbbb", None),  # ... or not
        (rb"ab(?!c)", b"xab", 1),  # a lookahead reads the next byte
        (rb"ab(?!c)", b"xabd", None),
        (rb"a(?<=xa)b", b"ya", None),  # a lookbehind only reads what came before
        (rb"a(?<=xa)b", b"xa", 1),
        (rb"a(?=[0-9]{0,3}z)[0-9]+", b"a12", 0),  # inside a lookahead
        (rb"a(?=[0-9]{0,3}z)[0-9]+", b"a12y", None),
        (rb"a(?:bc|b)+d", b"abcbcb", 0),
        (rb"a(?:bc|b)+d", b"abcbcx", None),
        (rb"a(?P<mark>)b|c[^/]{1,3}?/", b"xc12", 1),
        (rb"a.{0,5}b", b"axxbyy", 0),  # a greedy run reads on past the "b" ...
        (rb"a.{0,5}?b", b"axxbyy", None),  # ... a lazy one stops at it
        (rb"a.{0,5}?b", b"axx", 0),
        (rb"a.{2,5}?b(?!c)", b"abb", 0),  # the lowest count comes first
        (rb"a", b"a", None),  # nothing to wait for
    ],
)
def test_unfinished_finds_the_attempts_more_data_could_change(
    pattern: bytes, data: bytes, expected: int | None
) -> None:
    assert first_unfinished(pattern, data) == expected


@pytest.mark.parametrize("pattern", [rb"(a)\1", rb"(?i)abc", rb"a(?P=x)", rb"a(b", rb"a)b", b"a\\"])
def test_unfinished_refuses_what_it_does_not_understand(pattern: bytes) -> None:
    with pytest.raises(ValueError):
        unfinished(pattern)
    with pytest.raises(ValueError):
        unfinished(b"a b", re.VERBOSE)


@pytest.mark.parametrize(
    ("pattern", "back", "data", "expected"),
    [
        (rb"k(?:-(?<=sk-)[a-z]+|_(?<=sk_)[0-9]+)", 1, b"a dis", 4),
        (rb"k(?:-(?<=sk-)[a-z]+|_(?<=sk_)[0-9]+)", 1, b"a disk", None),  # "k": unfinished
        (rb"J(?<=eyJ)[a-z]+", 2, b"x=ey", 2),
        (rb"J(?<=eyJ)[a-z]+", 2, b"x=e", 2),  # "e" then "yJ..." to come
        (rb"J(?<=eyJ)[a-z]+", 2, b"x=y", None),
        (rb"J[a-z]+", 1, b"x=y", 2),  # nothing says what comes before: any byte
    ],
)
def test_lead_in_finds_what_a_match_yet_to_start_would_redact(
    pattern: bytes, back: int, data: bytes, expected: int | None
) -> None:
    found = lead_in(pattern, back)
    assert found is not None
    m = found.search(data, max(len(data) - back, 0))
    assert (m and m.start()) == expected


def test_prefix_at() -> None:
    assert prefix_at(b"say hunt", b"hunter2", 0) == 4
    assert prefix_at(b"say hunter2", b"hunter2", 0) == 11  # whole: a match, not a prefix
    assert prefix_at(b"hhh", b"hhhh", 0) == 0
    assert prefix_at(b"hhh", b"hhhh", 1) == 1
    assert prefix_at(b"abc", b"x", 0) == 3


FRAGMENTS = [
    *(b"sk-", b"sk-proj-", b"ghp_", b"github_pat_", b"AKIA", b"AIza", b"xoxb-", b"eyJ"),
    *(b"Bearer ", b"Authorization: Basic ", b"secret_access_key = ", b"https://u:p"),
    *(b"-----BEGIN RSA PRIVATE KEY-----\n", b"-----END RSA PRIVATE KEY-----", b"@"),
    *(b"a", b"Z", b"0", b"9", b"_", b"-", b".", b"=", b"/", b" ", b"\n", b"\x1b"),
    b"A1b2C3d4E5f6G7h8I9j0",
]
PATTERNS = [
    *(rb"ab{2,4}c?", rb"a(?:bc|b)+(?!c)", rb"a(?=b{2})b", rb"b(?<=ab)a{1,2}", rb"a[^b]{0,3}?b"),
    *(rb"a.{1,4}?(?:bc|d)", rb"a(?:-|-a)*?a(?!Z)", rb"a(?:[0-9]{0,2}?_|b)+?9"),
    *(p.regex.pattern for p in shape_passes()),
]
TEXT = st.lists(st.sampled_from(FRAGMENTS), max_size=12).map(b"".join)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(PATTERNS), TEXT, TEXT)
def test_attempts_before_the_first_unfinished_one_are_final(
    pattern: bytes, data: bytes, more: bytes
) -> None:
    regex = re.compile(pattern)
    first = first_unfinished(pattern, data)
    for pos in range(len(data) if first is None else first):
        now, later = regex.match(data, pos), regex.match(data + more, pos)
        assert (now and now.regs) == (later and later.regs), pos


# --------------------------------------------------------------------------- a crash of bar


def test_piped_output_is_on_disk_before_bar_is_killed(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    output = task_dir(t["id"]) / "artifacts/0001.output"
    script = "echo printed-before-the-kill; exec sleep 60"
    # unconfined: the test kills bar's group, and a confined command has a session of its own
    bar_proc = subprocess.Popen(
        [BAR_EXE, "run", "--no-pty", "--no-sandbox", "--", "sh", "-c", script],
        cwd=inited,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            if output.exists() and b"printed-before-the-kill\n" in output.read_bytes():
                break
            time.sleep(0.05)
    finally:
        os.killpg(bar_proc.pid, signal.SIGKILL)  # bar and the step it runs
        bar_proc.wait(timeout=60)
    assert output.read_text() == "=== STDOUT ===\nprinted-before-the-kill\n"
