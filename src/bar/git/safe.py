"""git for the developer's repository that runs nothing an agent planted.

The developer's checkout shares ``.git/config`` and ``.git/hooks`` with the task worktrees,
so an agent could have planted a filter, a merge driver, an fsmonitor command, a hook or a
``core.worktree`` there. Every git command ``bar.changes.apply`` and
``bar.changes.checkout`` run to compute and land a commit, and ``bar.changes.sync``'s, go
through ``SafeGit``, which switches all of it off (docs/sandbox.md, "What bar does on the
step's behalf"). The configuration of every directory git will run in is read at once, by
one git each, begun together (``SafeGit.ask``, ``SafeGit.read``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from bar import git
from bar.base import faults
from bar.base.proc import Result, Started
from bar.base.record import record
from bar.errors import GitError

# git's own three-way text merge, for a path whose attributes name a merge driver
_TEXT_MERGE = "git merge-file --marker-size=%L %A %O %B"
# per driver named in the configuration: what switches it off (an empty command is no
# filter; ``required`` would make its absence an error)
_DRIVERS_OFF = {
    "filter": (("smudge", ""), ("clean", ""), ("process", ""), ("required", "false")),
    "merge": (("driver", _TEXT_MERGE),),
}
_ALWAYS_OFF = (
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("merge.default", "text"),
    ("submodule.recurse", "false"),
)
# no transport at all (a lazy fetch of a missing object would run ssh, a remote helper or
# remote.<name>.uploadpack), no pager, no editor
_ENV_OFF = {"GIT_ALLOW_PROTOCOL": "", "GIT_PAGER": "cat", "GIT_EDITOR": ":"}


@record(frozen=True)
class SafeGit:
    """git for the developer's repository with everything an agent could have planted
    switched off: no hooks, no clean, smudge or process filter, no merge driver (git's
    text merge instead), no fsmonitor, no transport, no pager or editor; the work tree is
    always the directory git runs in, whatever ``core.worktree`` says. Files are read and
    written as git stores them. The overrides go in through ``GIT_CONFIG_COUNT``, not
    ``-c``: a driver's name may hold a ``=``, which ``-c`` cannot express. The
    configuration is read once, by ``read``, in every directory git will run in (each
    worktree may add its own ``config.worktree``); a driver defined after that is not
    covered, which is why the sandbox keeps ``.git/config`` read-only as well.

    What needs no override: ``diff`` drivers (bar's diffs pass ``--no-ext-diff
    --no-textconv``) and signing (``commit-tree`` signs only when told with ``-S``)."""

    dirs: tuple[Path, ...]
    env: Mapping[str, str]

    @classmethod
    def ask(cls, *dirs: Path | None) -> dict[Path, Started]:
        """Begin reading the configuration seen from ``dirs``, for ``read`` to finish."""
        return {d: _ask_drivers(d) for d in _existing(dirs)}

    @classmethod
    def read(cls, *dirs: Path | None, asked: Mapping[Path, Started] | None = None) -> SafeGit:
        where = _existing(dirs)
        # every directory's git at once (or begun before: ``asked``)
        started = [(asked or {}).get(d) or _ask_drivers(d) for d in where]
        named = dict.fromkeys(driver for one in started for driver in _drivers(one))
        pairs = [*_ALWAYS_OFF]
        for section, name in named:
            pairs += [(f"{section}.{name}.{var}", value) for var, value in _DRIVERS_OFF[section]]
        env = {**_ENV_OFF, "GIT_CONFIG_COUNT": str(len(pairs))}
        for i, (key, value) in enumerate(pairs):
            env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = key, value
        return cls(where, env)

    def including(self, where: Path) -> SafeGit:
        """This one, or one that also covers the configuration seen from ``where``."""
        return self if Path(where) in self.dirs else SafeGit.read(*self.dirs, where)

    def git(
        self,
        where: Path,
        *args: str,
        env: Mapping[str, str] | None = None,
        check: bool = True,
        input: bytes | None = None,
    ) -> Result:
        return git.git(
            where,
            f"--work-tree={os.path.abspath(where)}",
            *args,
            env=self._with(env),
            check=check,
            input=input,
        )

    def entries(
        self, where: Path, *args: str, env: Mapping[str, str] | None = None
    ) -> Iterator[bytes]:
        """``git.entries``: a ``-z`` listing read in blocks of whole entries as it comes."""
        return git.entries(
            where, f"--work-tree={os.path.abspath(where)}", *args, env=self._with(env)
        )

    def start(
        self, where: Path, *args: str, env: Mapping[str, str] | None = None, check: bool = True
    ) -> Started:
        """``git`` begun now, its result read later (``Started.result()``: for a small
        output), while the caller does something else."""
        return git.start(
            where, f"--work-tree={os.path.abspath(where)}", *args, env=self._with(env), check=check
        )

    def _with(self, env: Mapping[str, str] | None) -> dict[str, str]:
        """Its environment with ``env``'s; settings ``env`` gives git (``GIT_CONFIG_*``,
        as ``git.TREES_ONLY`` does) follow its own, and may set none of its own keys."""
        extra = dict(env or {})
        count = int(extra.pop("GIT_CONFIG_COUNT", "0"))
        pairs = [
            (extra.pop(f"GIT_CONFIG_KEY_{i}"), extra.pop(f"GIT_CONFIG_VALUE_{i}"))
            for i in range(count)
        ]
        out = {**self.env, **extra}
        mine = int(out["GIT_CONFIG_COUNT"])
        own = {out[f"GIT_CONFIG_KEY_{i}"].lower() for i in range(mine)}
        for n, (key, value) in enumerate(pairs, start=mine):
            assert key.lower() not in own, f"SafeGit's {key} overridden"
            out[f"GIT_CONFIG_KEY_{n}"], out[f"GIT_CONFIG_VALUE_{n}"] = key, value
        out["GIT_CONFIG_COUNT"] = str(mine + len(pairs))
        return out

    def update_ref(self, where: Path, ref: str, new: str, old: str, message: str) -> None:
        """``git.update_ref`` (compare-and-swap, same crash points), with no
        ``reference-transaction`` hook."""
        faults.point(f"before moving {ref}")
        self.git(where, "update-ref", "-m", message, ref, new, old, env=git.as_common(where))
        faults.point(f"after moving {ref}")

    def commit_tree(
        self,
        where: Path,
        tree: str,
        parents: Sequence[str],
        message: str,
        *,
        identity: Mapping[str, str] | None = None,
    ) -> str:
        return self.start_commit_tree(where, tree, parents, message, identity=identity)()

    def start_commit_tree(
        self,
        where: Path,
        tree: str,
        parents: Sequence[str],
        message: str,
        *,
        identity: Mapping[str, str] | None = None,
    ) -> Callable[[], str]:
        """``commit_tree`` begun now: the returned function waits for the commit's id
        (a message longer than a pipe holds at once is written before it returns)."""
        args = ["commit-tree", tree, *(a for parent in parents for a in ("-p", parent))]
        data = message.encode("utf-8", "backslashreplace")
        if len(data) > 4096:
            done = self.git(where, *args, env=identity, input=data).out.strip()
            return lambda: done
        started = git.start(
            where,
            f"--work-tree={os.path.abspath(where)}",
            *args,
            env=self._with(identity),
            input=data,
        )
        return lambda: started.result().out.strip()

    def is_ancestor(self, where: Path, a: str, b: str) -> bool:
        res = self.git(where, "merge-base", "--is-ancestor", a, b, check=False)
        return res.returncode == 0


def _existing(dirs: Sequence[Path | None]) -> tuple[Path, ...]:
    return tuple(dict.fromkeys(Path(d) for d in dirs if d is not None and Path(d).is_dir()))


def _ask_drivers(where: Path) -> Started:
    """Begin reading the configuration seen from ``where`` for ``_drivers``."""
    return git.start(where, "config", "-z", "--get-regexp", r"^(filter|merge)\.", check=False)


def _drivers(asked: Started) -> list[tuple[str, str]]:
    """(section, name) of every filter and merge driver the configuration read by
    ``_ask_drivers`` defines (includes followed, as git follows them)."""
    res = asked.result()
    if res.returncode not in (0, 1):  # 1: none
        raise GitError(res.cmd, res.returncode, res.stdout, res.stderr)
    found: list[tuple[str, str]] = []
    for item in res.stdout.split(b"\0"):
        key = item.split(b"\n", 1)[0].decode("utf-8", "surrogateescape")
        section, _, rest = key.partition(".")
        name, dot, _var = rest.rpartition(".")
        if dot and section in _DRIVERS_OFF:  # (merge.default and the like name no driver)
            found.append((section, name))
    return found
