"""The exec check's listener in C (``exec_quick.c``), for the calls it can answer alone.

Every ``execve`` of a confined step waits for bar's answer (``bar.sandbox.exec_watch``).
A round trip to a thread of Python costs about 120 µs on a small machine, and a build
makes thousands of calls, most of which name no program (a search along ``PATH`` tries
each directory) or start a compiler no rule is about. The compiled loop takes every call
and answers those two kinds itself:

- no program where the call names one: it fails with ``ENOENT``, as the kernel fails it;
- a program no rule can match whatever it is called with (``Shortcut``): it runs.

Every other call goes to the Python judge, unchanged. The library is built with bar when
a C compiler is at hand (``setup.py``: optional); without it, or with
``BAR_EXEC_LISTENER=python`` in bar's environment, the Python listener answers every call.
"""

from __future__ import annotations

import ctypes
import importlib.machinery
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bar.base.record import record

# ``counts`` of a served listener: answered here (run, no program), and sent to the judge
RUN, MISSING, JUDGED = 0, 1, 2

_JUDGE = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_int32, ctypes.POINTER(ctypes.c_uint64)
)
_PLAIN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p)
_Strings = ctypes.POINTER(ctypes.c_char_p)


@record(frozen=True)
class Shortcut:
    """What lets a program run without the judge: ``exact`` and ``folded`` (compared
    without regard to ASCII case) are the strings some rule needs in the text it reads
    (``Policy.needed``); ``places`` the paths written in the rules' words, longest first,
    with what they are written as (``Places.forms``); ``roots`` the directories a
    program may run from for its relative words to stand (the innermost wins; whether it
    is the worktree or a temporary one: ``Places.rooms``); ``system`` the directories
    whose files are what their names say; ``plain`` whether the shell analysis reads a
    program of that name as its words alone."""

    exact: tuple[str, ...]
    folded: tuple[str, ...]
    places: tuple[tuple[str, str], ...]
    roots: tuple[tuple[str, bool], ...]
    system: tuple[str, ...]
    plain: Callable[[str], bool]


class _Quick(ctypes.Structure):
    _fields_ = [
        ("enabled", ctypes.c_int),
        ("exact", _Strings),
        ("n_exact", ctypes.c_int),
        ("folded", _Strings),
        ("n_folded", ctypes.c_int),
        ("prefixes", _Strings),
        ("said", _Strings),
        ("n_places", ctypes.c_int),
        ("roots", _Strings),
        ("safe", ctypes.POINTER(ctypes.c_int)),
        ("n_roots", ctypes.c_int),
        ("system", _Strings),
        ("n_system", ctypes.c_int),
        ("hidden", _Strings),
        ("n_hidden", ctypes.c_int),
    ]


_LOADED: list[ctypes.CDLL | None] = []


def library() -> ctypes.CDLL | None:
    """The compiled listener, once loaded; None where it was not built (or is not
    wanted: ``BAR_EXEC_LISTENER=python``)."""
    if os.environ.get("BAR_EXEC_LISTENER") == "python":
        return None
    if not _LOADED:
        _LOADED.append(_load())
    return _LOADED[0]


def _load() -> ctypes.CDLL | None:
    here = Path(__file__).parent
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        found = here / f"_exec_quick{suffix}"
        if found.is_file():
            try:
                lib = ctypes.CDLL(str(found))
            except OSError:
                return None
            serve = lib.bar_exec_serve
            serve.restype = ctypes.c_int
            serve.argtypes = [
                ctypes.c_int,
                ctypes.c_int,
                ctypes.POINTER(_Quick),
                _JUDGE,
                _PLAIN,
                ctypes.POINTER(ctypes.c_uint64),
            ]
            return lib
    return None


def _quick(shortcut: Shortcut | None, hidden: Sequence[str], keep: list[object]) -> _Quick:
    """The C form of ``shortcut``; what it points at is kept alive in ``keep``."""
    quick = _Quick()
    quick.enabled = 1 if shortcut is not None else 0
    quick.hidden, quick.n_hidden = _strings(hidden, keep), len(hidden)
    if shortcut is None:
        return quick
    quick.exact, quick.n_exact = _strings(shortcut.exact, keep), len(shortcut.exact)
    quick.folded, quick.n_folded = _strings(shortcut.folded, keep), len(shortcut.folded)
    quick.prefixes = _strings([p for p, _ in shortcut.places], keep)
    quick.said = _strings([s for _, s in shortcut.places], keep)
    quick.n_places = len(shortcut.places)
    quick.roots = _strings([r for r, _ in shortcut.roots], keep)
    safe = (ctypes.c_int * max(len(shortcut.roots), 1))(*(int(s) for _, s in shortcut.roots))
    keep.append(safe)
    quick.safe = ctypes.cast(safe, ctypes.POINTER(ctypes.c_int))
    quick.n_roots = len(shortcut.roots)
    quick.system, quick.n_system = _strings(shortcut.system, keep), len(shortcut.system)
    return quick


def lets_run(lib: ctypes.CDLL, shortcut: Shortcut, name: str, argv: Sequence[str]) -> bool:
    """Whether the compiled listener lets a program called ``name`` (a base name whose
    file is in the system's directories and no script) run with ``argv`` without the
    judge, as it decides it for a call (the tests hold it to the policy's judgment)."""
    made = _MADE.get(id(shortcut))
    if made is None or made[0] is not shortcut:
        kept: list[object] = []
        made = _MADE[id(shortcut)] = (shortcut, _quick(shortcut, (), kept), kept)
    quick = made[1]
    keep: list[object] = []
    words = _strings(list(argv) or [name], keep)
    test = lib.bar_exec_unjudged
    test.restype = ctypes.c_int
    test.argtypes = [ctypes.c_char_p, _Strings, ctypes.c_int, ctypes.POINTER(_Quick)]
    named = name.encode("utf-8", "surrogateescape")
    return bool(test(named, words, len(argv), ctypes.byref(quick))) and shortcut.plain(name)


_MADE: dict[int, tuple[Shortcut, _Quick, list[object]]] = {}


def _strings(items: Sequence[str], keep: list[object]) -> Any:
    array = (ctypes.c_char_p * max(len(items), 1))(
        *(item.encode("utf-8", "surrogateescape") for item in items)
    )
    keep.append(array)
    return ctypes.cast(array, _Strings)


def serve(
    lib: ctypes.CDLL,
    listener: int,
    wake: int,
    shortcut: Shortcut | None,
    hidden: Sequence[str],
    judge: Callable[[int, int, int, tuple[int, ...]], int],
    counts: ctypes.Array[ctypes.c_uint64],
) -> None:
    """Answer the calls of ``listener`` until it hangs up or ``wake`` is readable:
    ``judge(ident, pid, nr, args)`` gives the error (0: it runs) of each call the loop
    does not answer itself. ``judge`` must never raise (a raise would let the call run);
    what it raises is taken as a refusal here all the same."""
    keep: list[object] = []
    quick = _quick(shortcut, hidden, keep)
    plain = shortcut.plain if shortcut is not None else None

    def judged(ident: int, pid: int, nr: int, args: ctypes._Pointer[ctypes.c_uint64]) -> int:
        try:
            return judge(ident, pid, nr, tuple(args[k] for k in range(6)))
        except BaseException:  # (never a call let through by a failure)
            return 1  # EPERM

    def is_plain(name: bytes) -> int:
        try:
            return 1 if plain is not None and plain(name.decode("utf-8", "strict")) else 0
        except BaseException:
            return 0

    lib.bar_exec_serve(
        listener, wake, ctypes.byref(quick), _JUDGE(judged), _PLAIN(is_plain), counts
    )
