"""What decides git's conversions, and whether it changed since a task's last look.

``git add`` stores a file through its conversions: line endings (``core.autocrlf``,
``core.eol``, the ``text`` and ``eol`` attributes), ``working-tree-encoding`` and filters
(``filter.<name>.clean``). Their inputs live outside the files themselves: the
configuration, ``info/attributes``, the global attributes file and the worktree's
``.gitattributes`` files. When one of them changes and no file is touched, the side index's
stat cache still says every file is clean, so git never reads them again, yet a fresh
``git add -A`` would store other blobs. A look therefore notices a change of those inputs
and has every file hashed anew (``git add --renormalize``; docs/internals/git.md, "Exact
bytes where git converts").

Outside the worktree, the inputs are fingerprinted in two steps, kept beside the side
index (``<index>.conversions``): the identities (inode, size, times) of the files that
hold them, cheap to stat on every look, and, only when one of those moved, the values
themselves (the configuration keys git's conversions read, the attribute files' bytes),
so that an unrelated change of ``.git/config`` costs one ``git config`` and no re-hash.
A configuration file another one includes is not statted (its values are read whenever
a statted one moves). The worktree's own ``.gitattributes`` files are part of the tree:
a snapshot whose tree changes one of them renormalizes (``touches_attributes``).
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from bar import git
from bar.store.files import write_bytes_atomic

# the configuration git's conversions read (``core.attributesFile`` names another input)
_KEYS = (
    r"^core\.(autocrlf|eol|safecrlf|attributesfile|checkroundtripencoding"
    r"|bigfilethreshold)$|^filter\."
)
# configuration a process carries in its environment
_ENV_CONFIG = ("GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT")
# how ``_values`` hashes: 2 hashes the attribute files' bytes, not their names (a
# ``HOME`` or ``XDG_CONFIG_HOME`` of another name, with no attributes file in either,
# read as a switched conversion: every file of the task hashed again at the next look)
_VERSION = 2


def record_path(index: Path) -> Path:
    return index.with_name(index.name + ".conversions")


def _xdg() -> str:
    return os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")


def _config_files(worktree: Path, common: str) -> list[str]:
    """The configuration files git reads in ``worktree`` (bar's git: pinned directories),
    whose repository's git directory is ``common``."""
    env = git.pinned_env(worktree)
    own = env.get("GIT_DIR")
    found = [os.path.join(common, "config")]
    if own:
        found.append(os.path.join(own, "config.worktree"))
    if os.environ.get("GIT_CONFIG_GLOBAL"):
        found.append(os.environ["GIT_CONFIG_GLOBAL"])
    else:
        found += [os.path.expanduser("~/.gitconfig"), os.path.join(_xdg(), "git", "config")]
    if not os.environ.get("GIT_CONFIG_NOSYSTEM"):
        found.append(os.environ.get("GIT_CONFIG_SYSTEM") or "/etc/gitconfig")
    found.append(os.path.join(common, "info", "attributes"))
    # where the user's attributes are unless the configuration names a file (noted then
    # as ``extra``): a ``HOME`` or ``XDG_CONFIG_HOME`` that moved is looked at
    found.append(os.path.join(_xdg(), "git", "attributes"))
    return found


def _common(worktree: Path) -> str:
    """The repository's git directory: as bar pinned it, else as git says."""
    pinned = git.pinned_common_dir(worktree)
    if pinned is not None:
        return str(pinned)
    return git.out(worktree, "rev-parse", "--path-format=absolute", "--git-common-dir")


def _identity(path: str) -> list[int]:
    try:
        st = os.stat(path)
    except OSError:
        return []
    return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _values(worktree: Path, common: str) -> tuple[str, list[str], str]:
    """A hash of what the conversions read outside the worktree, the attribute files
    outside the configuration files it read (to be statted next time), and the hash as a
    note made before ``_VERSION`` had it (which also hashed the attribute files' names)."""
    import hashlib  # (only when a file moved: a plain step imports none)

    said = git.git(worktree, "config", "-z", "--get-regexp", _KEYS, check=False)
    digest, before = hashlib.sha256(said.stdout), hashlib.sha256(said.stdout)
    named = None
    for item in said.stdout.split(b"\0"):
        key, _, value = item.partition(b"\n")
        if key == b"core.attributesfile":
            named = os.path.expanduser(os.fsdecode(value))
    files = [named or os.path.join(_xdg(), "git", "attributes")]
    for path in (os.path.join(common, "info", "attributes"), *files):
        before.update(b"\0" + os.fsencode(path) + b"\0")
        try:
            with open(path, "rb") as f:
                content = f.read()
        except OSError:  # (none there, whatever its name: git reads nothing)
            digest.update(b"\0-")
            continue
        before.update(content)
        digest.update(b"\0+%d\0" % len(content) + content)
    return digest.hexdigest(), files, before.hexdigest()


def _stats(worktree: Path, common: str, extra: list[str]) -> list[list[object]]:
    env: list[list[object]] = [[name, os.environ.get(name, "")] for name in _ENV_CONFIG]
    return [*env, *([p, *_identity(p)] for p in [*_config_files(worktree, common), *extra])]


def moved(worktree: Path, index: Path) -> bool:
    """Whether the conversions' inputs outside the worktree changed since the last
    ``note`` for ``index`` (noted when the side index is made: ``side_index.seed_index``).
    With nothing noted (lost, unreadable, a task from before) nothing vouches for the
    stat cache: yes. Their files' identities are noted anew where only those moved; a
    change of values, or a first note, is noted by the caller once it recorded what it
    renormalized, so that a crash in between leaves it to the next look."""
    try:
        before = json.loads(record_path(index).read_bytes())
    except (OSError, ValueError):
        return True
    if not isinstance(before, dict):
        return True
    extra = [str(p) for p in before.get("extra", []) if isinstance(p, str)]
    common = _common(worktree)
    if _stats(worktree, common, extra) == before.get("stats"):
        return False
    values, extra, as_before = _values(worktree, common)
    said = before.get("values")
    if said != values and (before.get("version") == _VERSION or said != as_before):
        return True  # (noted once the look that renormalizes is recorded: ``note``)
    _write(index, _stats(worktree, common, extra), values, extra)
    return False


def note(worktree: Path, index: Path, git_dir: Path | None = None) -> str:
    """Note the conversions' inputs as they are now for ``index``; their values' hash.
    ``git_dir``: the repository's git directory, where the caller knows it."""
    # (statted first: a change while the values are read moves them next time)
    common = _common(worktree) if git_dir is None else str(git_dir)
    values, extra, _ = _values(worktree, common)
    _write(index, _stats(worktree, common, extra), values, extra)
    return values


def _write(index: Path, stats: list[list[object]], values: str, extra: list[str]) -> None:
    record = {"stats": stats, "values": values, "extra": extra, "version": _VERSION}
    with contextlib.suppress(OSError):
        write_bytes_atomic(record_path(index), json.dumps(record).encode(), durable=False)


def forget(index: Path) -> None:
    """Take the noted inputs away: the next look notes them without comparing."""
    record_path(index).unlink(missing_ok=True)


def may_touch_attributes(worktree: Path, scope: list[str] | None, had: bool | None) -> bool:
    """Whether a look that rescanned ``scope`` (None: everything) may have found a
    ``.gitattributes`` added, changed or removed: it named one, or a directory (where one
    may have been made, or, if the recorded tree ``had`` any, removed). An edit in place
    names only its file: no git is asked then (``touches_attributes`` asks)."""
    if scope is None:
        return True
    for rel in scope:
        if rel == ".gitattributes" or rel.endswith("/.gitattributes"):
            return True
        full = os.path.join(os.fsencode(worktree), os.fsencode(rel))
        if os.path.isdir(full) and not os.path.islink(full):
            if had is not False or os.path.lexists(os.path.join(full, b".gitattributes")):
                return True
        elif had is not False and not os.path.lexists(full):
            return True  # (a directory removed, with what it held)
    return False


def touches_attributes(worktree: Path, before_tree: str, tree: str) -> bool:
    """Whether ``tree`` adds, changes or removes a ``.gitattributes`` of ``before_tree``."""
    if before_tree == tree:
        return False
    res = git.git(
        worktree,
        "diff-tree",
        "-r",
        "--name-only",
        "-z",
        "--no-renames",
        before_tree,
        tree,
        "--",
        ":(glob).gitattributes",
        ":(glob)**/.gitattributes",
        check=False,
    )
    return res.returncode != 0 or bool(res.stdout.strip(b"\0"))
