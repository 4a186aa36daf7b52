"""A snapshot's commit and the move of its ref, written the way git writes them, without
starting git.

Every recorded snapshot ran ``git commit-tree`` then ``git update-ref``: two processes,
~3 ms each from a Python parent, one after the other, for a few hundred bytes. Both are
simple where bar uses them: a commit object is its text, deflated into
``objects/xx/yyyy…``; a loose ref is one line, replaced through ``<ref>.lock``. So
``Writer`` writes them itself, but only where the result is exactly git's:

- the commit: SHA-1 or SHA-256 objects (``extensions.objectFormat``), no signing
  (``commit.gpgSign``), no ``i18n.commitEncoding``, no date taken from the environment,
  a message git would keep as it is (``_git_keeps``), parents and tree stored as loose
  objects (so known to exist, as git checks); written to a temporary file in the
  object's directory, then linked to its name, at git's mode (0444, less the umask);
- the ref: the files backend (no ``extensions.refStorage``), no shared-repository
  permissions, no fsync asked for (``core.fsync…``: git's default fsyncs neither loose
  objects nor refs), no reflog to append to (``core.logAllRefUpdates=always``, or one
  already there), the ref a loose file holding exactly the value expected; taken with
  git's lock file (``O_EXCL``), so that git and bar never move it at once.

Anything else (``Writer.commit`` returns None, ``Writer.move`` False) is left to git,
which does it, or refuses it, as it always did. The configuration comes from the
``git config`` the snapshot reads anyway (``exact.ask``): no process of its own.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
import zlib
from collections.abc import Sequence
from pathlib import Path

from bar.base import faults
from bar.git import BAR_IDENTITY

# the configuration read beside the snapshot's ``git add`` (``exact.ask``), of which the
# keys below decide whether the writer may stand in for git
CONFIG_PATTERN = (
    r"^(core\.(sharedrepository|logallrefupdates|fsync|fsyncobjectfiles"
    r"|fsyncmethod|compression|loosecompression|createobject)"
    r"|extensions\..*|commit\.gpgsign|i18n\.commitencoding)$"
)
_FALSE = ("false", "no", "off", "0")
_HARMLESS = {
    ("extensions.refstorage", "files"),
    ("i18n.commitencoding", "utf-8"),
    ("i18n.commitencoding", "utf8"),
    ("core.sharedrepository", "umask"),
}
# extensions that change nothing in how a commit or a loose ref is written
_HARMLESS_EXTENSIONS = (
    "extensions.worktreeconfig",
    "extensions.preciousobjects",
    "extensions.partialclone",
    "extensions.noop",
)
# read with these keys for the snapshot's other needs (``bar.git.exact``): no part of a commit
_READ_BESIDE = ("core.autocrlf", "core.eol", "core.attributesfile", "core.excludesfile")
_HASHES = {"sha1": 40, "sha256": 64}  # digits of an object id
# what git takes from the environment when it writes a commit, other than the identity
# bar sets (``git.BAR_IDENTITY``)
_DATES = ("GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE")


class Writer:
    """Writes commits and moves refs in the repository whose common git directory is
    ``common``, as git would (see the module's text); built by ``for_repository``."""

    __slots__ = ("_digits", "_format", "_level", "common", "objects")

    def __init__(self, common: Path, object_format: str, level: int) -> None:
        self.common = common
        self.objects = common / "objects"
        self._format, self._digits = object_format, _HASHES[object_format]
        self._level = level

    @classmethod
    def for_repository(cls, common: Path | None, config: str) -> Writer | None:
        """The writer for the repository at ``common`` given the ``git config
        --get-regexp`` lines ``config`` (read with ``CONFIG_PATTERN`` among its
        keys); None where git must write."""
        if common is None or any(_date(os.environ.get(n)) is None for n in _DATES):
            return None
        settings: dict[str, str] = {}
        for line in config.splitlines():
            key, _, value = line.partition(" ")
            settings[key.lower()] = value.strip().lower()
        object_format = "sha1"
        level = zlib.Z_BEST_SPEED  # git's core.looseCompression by default
        for key, value in settings.items():
            if key == "extensions.objectformat" and value in _HASHES:
                object_format = value
            elif (key, value) in _HARMLESS or key in _HARMLESS_EXTENSIONS or key in _READ_BESIDE:
                pass
            elif key in ("commit.gpgsign", "core.sharedrepository", "core.fsyncobjectfiles"):
                if value not in _FALSE:
                    return None
            elif key == "core.logallrefupdates":
                if value == "always":
                    return None
            elif key in ("core.compression", "core.loosecompression"):
                try:
                    chosen = int(value)
                except ValueError:
                    return None
                if chosen == -1:
                    chosen = zlib.Z_DEFAULT_COMPRESSION
                if not -1 <= chosen <= 9:
                    return None
                if key == "core.loosecompression" or "core.loosecompression" not in settings:
                    level = chosen
            elif key.startswith(("extensions.", "core.", "i18n.")):
                return None  # (another extension, fsync asked for, an encoding named)
        return cls(common, object_format, level)

    # --- the commit ---------------------------------------------------------------

    def commit(self, tree: str, parents: Sequence[str], message: str) -> str | None:
        """``git commit-tree TREE -p PARENT… < MESSAGE`` as bar (``git.BAR_IDENTITY``),
        dated now: the new commit's id, or None (git must write it)."""
        if not _git_keeps(message) or not all(self._is_loose(oid) for oid in (tree, *parents)):
            return None
        now = int(time.time())
        east = time.localtime(now).tm_gmtoff
        minutes = abs(east) // 60  # (git: whole minutes, towards zero)
        dated = f"{now} {'-' if east < 0 else '+'}{minutes // 60:02d}{minutes % 60:02d}"
        who = BAR_IDENTITY
        author = f"{who['GIT_AUTHOR_NAME']} <{who['GIT_AUTHOR_EMAIL']}>"
        committer = f"{who['GIT_COMMITTER_NAME']} <{who['GIT_COMMITTER_EMAIL']}>"
        head = [
            f"tree {tree}",
            *(f"parent {p}" for p in parents),
            f"author {author} {_date(os.environ.get('GIT_AUTHOR_DATE')) or dated}",
            f"committer {committer} {_date(os.environ.get('GIT_COMMITTER_DATE')) or dated}",
        ]
        body = ("\n".join(head) + "\n\n").encode() + message.encode("utf-8", "backslashreplace")
        return self._write_object(b"commit", body)

    def _is_loose(self, oid: str) -> bool:
        if len(oid) != self._digits:
            return False
        with contextlib.suppress(OSError):
            return os.stat(self.objects / oid[:2] / oid[2:]).st_size > 0
        return False

    def _write_object(self, kind: bytes, body: bytes) -> str | None:
        import hashlib  # (when a commit is written: a step that changes nothing has none)

        data = kind + b" %d\0" % len(body) + body
        oid = (hashlib.sha1 if self._format == "sha1" else hashlib.sha256)(data).hexdigest()
        folder = self.objects / oid[:2]
        final = folder / oid[2:]
        if os.path.lexists(final):
            with contextlib.suppress(OSError):
                os.utime(final)  # (git freshens an object it would have written)
            return oid
        try:
            folder.mkdir(exist_ok=True)
        except OSError:
            return None
        deflated = zlib.compress(data, self._level)
        for attempt in range(100):
            tmp = folder / f"tmp_obj_{os.getpid()}_{attempt}"
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o444)
            except FileExistsError:
                continue
            except OSError:
                return None
            break
        else:
            return None
        try:
            try:
                view = memoryview(deflated)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
            try:
                os.link(tmp, final)
            except FileExistsError:
                pass  # (written meanwhile by another: the same bytes, by its name)
        except OSError:
            return None
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        return oid

    # --- the ref ------------------------------------------------------------------

    def move(self, ref: str, new: str, old: str) -> bool:
        """``git update-ref REF NEW OLD``, where git would only replace a loose file
        (see the module's text); False when git must (the ref is then as it was)."""
        if not ref.startswith("refs/") or ".." in ref or len(new) != self._digits:
            return False
        path = self.common / ref
        lock = path.with_name(path.name + ".lock")
        if os.path.lexists(self.common / "logs" / ref):
            return False  # (git appends to a reflog that is there)
        faults.point(f"before moving {ref}")  # (as ``git.update_ref``: before the lock)
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
        except OSError:
            return False  # (taken: git says by whom; no folder: git makes it)
        moved = False
        try:
            try:
                with open(path, "rb", opener=_no_follow) as f:
                    now = f.read(self._digits + 2)
            except OSError:
                now = b""
            if now == old.encode() + b"\n":
                os.write(fd, new.encode() + b"\n")
                os.close(fd)
                fd = -1
                os.rename(lock, path)
                moved = True
                faults.point(f"after moving {ref}")
        except OSError:
            pass  # (a full disk: git tries, and says what failed)
        finally:
            if fd >= 0:
                os.close(fd)
            if not moved:
                with contextlib.suppress(OSError):
                    os.unlink(lock)
        return moved


_INTERNAL = re.compile(r"@?(\d{1,10}) ([+-]\d{4})")
_ISO = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(Z|[+-]\d\d:?\d\d)")


def _date(value: str | None) -> str | None:
    """A commit's date as git writes it (``SECONDS ±HHMM``) from a ``GIT_*_DATE``
    value: "" when unset (dated now); None for a form this does not read exactly as
    git does (git's own parser then writes the commit). Read: git's internal form
    (``[@]SECONDS ±HHMM``) and ISO 8601 with an explicit zone."""
    if value is None:
        return ""
    if m := _INTERNAL.fullmatch(value):
        return f"{int(m[1])} {m[2]}"
    m = _ISO.fullmatch(value)
    if m is None:
        return None
    import calendar
    import datetime

    zone = "+0000" if m[7] == "Z" else m[7].replace(":", "")
    fields = [int(m[i]) for i in range(1, 7)]
    try:
        datetime.date(*fields[:3])  # (no 30 February)
    except ValueError:
        return None
    if not 1970 <= fields[0] <= 2099 or fields[3] > 23 or fields[4] > 59 or fields[5] > 59:
        return None
    if int(zone[3:]) >= 60 or int(zone[1:3]) >= 24:
        return None
    east = (int(zone[1:3]) * 60 + int(zone[3:])) * (-1 if zone[0] == "-" else 1)
    seconds = calendar.timegm((*fields, 0, 0, 0)) - east * 60
    return f"{seconds} {zone}"


def _no_follow(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_NOFOLLOW)


def _git_keeps(message: str) -> bool:
    """Whether git stores ``message`` byte for byte: valid UTF-8 with no character its
    check replaces (``commit.c``: the non-characters U+FDD0..U+FDEF and U+xxFFFE/
    U+xxFFFF; a surrogate is written as a ``\\u`` escape, in ASCII, as for git); anything
    else is git's to write."""
    for ch in message:
        code = ord(ch)
        if code < 0xFDD0:
            if code == 0:
                return False
            continue
        if code <= 0xFDEF or (code & 0xFFFE) == 0xFFFE:
            return False
    return True
