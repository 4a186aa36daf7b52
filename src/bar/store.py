"""Where bar keeps its data, and how it writes it so that a crash never leaves half a file.

Layout (SPEC §1): ``$BAR_HOME/projects/<name>-<hash4>/`` holds config.yaml, state.json,
events.jsonl, ``tasks/<id>/`` and ``workspaces/<id>/``. Directories are 0700 and files 0600
whatever the umask: outputs can hold secrets. JSON state files are replaced atomically
(temp file in the same directory, fsync, rename, fsync of the directory); line logs are
appended with one ``write()`` of a whole line followed by fsync.
"""

from __future__ import annotations

import datetime as _dt
import errno
import json
import os
from pathlib import Path
from typing import Any

from bar import faults
from bar.errors import BarError, CorruptFile

DIR_MODE = 0o700
FILE_MODE = 0o600

_NANOID_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"


def bar_home() -> Path:
    value = os.environ.get("BAR_HOME")
    return Path(value).expanduser() if value else Path.home() / ".bar"


def now_iso() -> str:
    """The current time as ISO 8601 UTC with a ``Z``, to the millisecond (so records made
    within one second still sort in the order they were made)."""
    now = _dt.datetime.now(_dt.UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def new_id(size: int = 8) -> str:
    """An 8-character nanoid. Never starts with ``-`` so it can't be mistaken for a flag."""
    while True:
        import secrets

        value = "".join(secrets.choice(_NANOID_ALPHABET) for _ in range(size))
        if not value.startswith("-"):
            return value


def ensure_dir(path: Path) -> Path:
    """Create ``path`` (and missing parents) with mode 0700."""
    if path.is_dir():
        return path
    if not path.parent.exists():
        ensure_dir(path.parent)
    try:
        path.mkdir(mode=DIR_MODE)
    except FileExistsError:
        if not path.is_dir():
            raise BarError(f"{path} exists and is not a directory") from None
        return path
    os.chmod(path, DIR_MODE)  # mkdir's mode is filtered by the umask
    return path


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so readers see the old or the new file, never a mix."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        # a leftover of a crashed process of the same pid, or a planted link: never
        # written through
        tmp.unlink(missing_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
        try:
            os.fchmod(fd, FILE_MODE)
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        faults.point(f"before replacing {path.name}")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise BarError(f"could not write {path}: {exc.strerror or exc}") from exc
    _fsync_dir(path.parent)
    faults.point(f"after replacing {path.name}")


def write_json_atomic(path: Path, obj: Any) -> None:
    write_bytes_atomic(path, (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode())


def write_text_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(path, text.encode())


def append_line(path: Path, line: bytes) -> None:
    """Append one complete line with a single ``write()``, then fsync.

    If the file ends in a torn line (a crash mid-write), a newline is written first so the
    torn text stays a line of its own that readers skip, instead of corrupting this one.
    """
    if b"\n" in line:
        raise ValueError("a ledger line must not contain a newline")
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, FILE_MODE)
    except OSError as exc:
        raise BarError(f"could not open {path}: {exc.strerror or exc}") from exc
    try:
        os.fchmod(fd, FILE_MODE)
        size = os.fstat(fd).st_size
        prefix = b""
        if size and os.pread(fd, 1, size - 1) != b"\n":
            prefix = b"\n"
        data = prefix + line + b"\n"
        faults.point(f"before appending to {path.name}")
        written = os.write(fd, data)
        if written != len(data):
            raise OSError(28, "short write")
        os.fsync(fd)
    except OSError as exc:
        raise BarError(f"could not append to {path}: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)
    faults.point(f"after appending to {path.name}")


def create_file(path: Path, data: bytes = b"") -> None:
    """Create or truncate ``path`` with mode 0600 and write ``data``."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
        if data:
            os.write(fd, data)
    finally:
        os.close(fd)


def read_json(path: Path, what: str | None = None) -> dict[str, Any]:
    """Read a JSON object from ``path``; a broken file is a ``CorruptFile`` naming it."""
    label = what or path.name
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            raw = b""
            while chunk := os.read(fd, 1 << 20):
                raw += chunk
        finally:
            os.close(fd)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise CorruptFile(
                f"{label} at {path} is a symbolic link; bar does not follow links in its files",
                hint="run `bar doctor` to check the project",
            ) from None
        raise CorruptFile(f"cannot read {label} at {path}: {exc.strerror or exc}") from exc
    if not raw.strip():
        raise CorruptFile(
            f"{label} at {path} is empty", hint="run `bar doctor` to check the project"
        )
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CorruptFile(
            f"{label} at {path} is not valid JSON ({exc})",
            hint="run `bar doctor` to check the project",
        ) from exc
    if not isinstance(data, dict):
        raise CorruptFile(f"{label} at {path} must hold a JSON object")
    return data
