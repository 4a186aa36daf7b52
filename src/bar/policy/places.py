"""Where a command runs, so the rules can speak of ``~`` whatever a shell expanded.

Rules are written in the words people type: ``rm -rf ~``, ``rm -rf ./build``. What a
program receives is expanded: ``rm -rf /home/me`` (and at exec, with the relative names
a glob made: ``rm -rf Documents Music`` run in ``/home/me``). ``Places`` names the
directories that matter and writes a path in the rules' words before they are tried:

- inside the task's worktree: ``./rel`` (``.`` for the worktree itself): what a step does
  there is recorded and undoable;
- inside a temporary directory of the step's (its ``TMPDIR``): ``/tmp/rel``;
- inside a home directory (the developer's, and the ``HOME`` a step was given): ``~/rel``
  (``~`` for the home itself);
- at exec, an argument that names an entry of the program's working directory, when
  that directory is outside the worktree, is first made absolute (``words``).

The innermost place wins: a worktree kept under the home is the worktree.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence

from bar.base.record import record

# a path starts a word, or follows what joins it to an option or a name (--out=, f=@, host:)
_BEFORE = r"(?<![^\s'\"=@:])"
_AFTER = r"(?=/|[\s'\"]|$)"


def home_dirs(*extra: str) -> tuple[str, ...]:
    """The developer's home (``$HOME`` and the password database's) and ``extra``."""
    found = [os.environ.get("HOME", "")]
    try:
        import pwd

        found.append(pwd.getpwuid(os.getuid()).pw_dir)
    except (ImportError, KeyError):
        pass
    found += extra
    homes = (h.rstrip("/") for h in found if h)
    # (a HOME that is a temporary directory, as some containers set it, is not one)
    return tuple(dict.fromkeys(h for h in homes if h and h not in _TEMPORARY))


_TEMPORARY = frozenset({"/tmp", "/var/tmp", "/dev/shm", "/private/tmp"})


@record(frozen=True)
class Places:
    """The homes, the worktree (None: not in a task) and the step's temporary
    directories, each also under its real name (links resolved)."""

    homes: tuple[str, ...] = ()
    worktree: str | None = None
    temps: tuple[str, ...] = ()

    @classmethod
    def of(
        cls,
        *,
        worktree: str | os.PathLike[str] | None = None,
        homes: Sequence[str] = (),
        temps: Sequence[str] = (),
    ) -> Places:
        return cls(
            homes=home_dirs(*homes),
            worktree=str(worktree).rstrip("/") if worktree else None,
            temps=tuple(t.rstrip("/") for t in temps if t and t.rstrip("/")),
        )

    def forms(self) -> tuple[tuple[str, str], ...]:
        """Each path of a place and what it is written as, in the order they are tried
        (longest first: the innermost place wins)."""
        return tuple(self._table())

    def _table(self) -> list[tuple[str, str]]:
        """(prefix, what it is written as), longest first (the innermost place wins)."""
        pairs: list[tuple[str, str]] = []
        for prefixes, said in (
            ((self.worktree,) if self.worktree else (), "."),
            (self.temps, "/tmp"),
            (self.homes, "~"),
        ):
            for prefix in prefixes:
                for form in dict.fromkeys((prefix, os.path.realpath(prefix))):
                    if form and form != "/" and form != said:
                        pairs.append((form, said))
        pairs.sort(key=lambda p: -len(p[0]))
        return pairs

    def pattern(self) -> tuple[re.Pattern[str], dict[str, str]] | None:
        table = self._table()
        if not table:
            return None
        alternatives = "|".join(re.escape(prefix) for prefix, _ in table)
        return re.compile(f"{_BEFORE}(?:{alternatives}){_AFTER}"), dict(table)

    def text(self, view: str) -> str:
        """``view`` with every path of a place written in the rules' words."""
        found = _compiled(self)
        if found is None:
            return view
        regex, said = found
        return regex.sub(lambda m: said[m.group(0)], view)

    def words(self, argv: Sequence[str], cwd: str, exists: Callable[[str], bool]) -> list[str]:
        """At exec: each argument naming an entry of ``cwd`` (``exists``, given the
        argument) made absolute, where ``cwd`` is outside the worktree and the temporary
        directories; the program's own name is left as it is."""
        if not cwd or not argv or self._inside(cwd):
            return list(argv)
        out = [argv[0]]
        for word in argv[1:]:
            if word and not word.startswith(("-", "/", "~")) and "=" not in word and exists(word):
                out.append(os.path.normpath(os.path.join(cwd, word)))
            else:
                out.append(word)
        return out

    def rooms(self) -> tuple[tuple[str, bool], ...]:
        """The directories ``words`` tells apart, in the order it tries them, and
        whether a program run there keeps its relative words (the worktree and the
        temporary directories) or not (a home)."""
        return (
            *((root, True) for root in ((self.worktree,) if self.worktree else ())),
            *((root, True) for root in (*self.temps, "/tmp", "/var/tmp", "/dev/shm")),
            *((root, False) for root in self.homes),
        )

    def _inside(self, path: str) -> bool:
        """Whether ``path`` is in the worktree or a temporary directory (and not in a
        home kept there: the innermost place counts)."""
        best, safe = -1, False
        for root, is_safe in self.rooms():
            inside = path == root or path.startswith(root.rstrip("/") + "/")
            if inside and len(root) > best:
                best, safe = len(root), is_safe
        return safe


_CACHE: dict[Places, tuple[re.Pattern[str], dict[str, str]] | None] = {}


def _compiled(places: Places) -> tuple[re.Pattern[str], dict[str, str]] | None:
    if places not in _CACHE:
        if len(_CACHE) > 32:
            _CACHE.clear()
        _CACHE[places] = places.pattern()
    return _CACHE[places]
