"""The compiled ``bar`` (``launcher.c``): built where a C compiler is at hand, in place of
the Python script the install wrote (``bin/bar``), which it keeps beside it as
``bar-python`` and runs for every command it does not serve itself.

``python -m bar.cli.launcher [BIN]`` builds it into the folder of bar's installed script
(by default the folder of this Python); ``make install`` does it. Nothing changes in
what bar does: the compiled ``bar`` hands a command to the resident exactly as the Python
client would (``bar.changes.fast.resident``), and ``bar hook`` to the running step
(``bar.step.channel``); anything else, and anything it is unsure of, runs in Python. It
saves Python's start (~15 ms) on every served command and every hook an agent runs. Run
it again after the install moves (the paths of the Python and of bar's code are built
in: a launcher that finds its Python gone says so)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE = Path(__file__).with_name("launcher.c")
PYTHON_NAME = "bar-python"  # the Python script, beside the compiled ``bar``
# the line of bin/bar that runs bar: what tells bar's script from another program
_ENTRY = b"from bar.cli.entry import main"
_ELF = b"\x7fELF"
# what bar-python adds to it: the compiled bar beside it ran it
_NAMED = (
    b"\n\n# the compiled bar beside this script ran it: the command is that bar's\n"
    b'sys.argv[0] = sys.argv[0].removesuffix("-python")'
)


class LauncherError(Exception):
    """Why the compiled ``bar`` was not built (bar stays the Python script)."""


def python_script(folder: Path) -> Path:
    """The Python script the compiled ``bar`` in ``folder`` runs: ``bar-python``, made
    from the install's ``bar`` the first time (its shebang names the Python)."""
    script, installed = folder / PYTHON_NAME, folder / "bar"
    try:
        text = installed.read_bytes()
    except OSError as exc:
        raise LauncherError(f"no bar in {folder} ({exc.strerror})") from None
    if text.startswith(_ELF):
        if not script.is_file():
            raise LauncherError(f"{installed} is compiled and {script} is missing: reinstall bar")
        return script
    first, _, rest = text.partition(b"\n")
    if not first.startswith(b"#!") or _ENTRY not in rest:
        raise LauncherError(f"{installed} is not bar's script")
    body = rest if _NAMED in rest else rest.replace(_ENTRY, _ENTRY + _NAMED, 1)
    _write(script, first + b"\n" + body, 0o755)
    return script


def interpreter(script: Path) -> str:
    """The Python a script's shebang names."""
    first = script.read_bytes().partition(b"\n")[0]
    words = first[2:].split()
    if not words or not words[0].startswith(b"/"):
        raise LauncherError(f"{script}: its first line names no Python by its path")
    if len(words) > 1:
        raise LauncherError(f"{script}: its Python is started with options ({first.decode()!r})")
    return os.fsdecode(words[0])


def build(folder: Path, compiler: str | None = None, source: Path = SOURCE) -> Path:
    """Build the compiled ``bar`` into ``folder`` (where the install put bar's script)
    from ``source``; its path. ``LauncherError`` says why not (no compiler among them).
    The build notes which source it was (its size and time): once that file changes (bar
    updated in place without a new build), the compiled ``bar`` runs every command in
    Python, whose protocols may have changed with it."""
    cc = compiler or os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise LauncherError("no C compiler (cc) found")
    script = python_script(folder)
    python = interpreter(script)
    package = _package_of(python)
    found = source.stat()
    defines = {
        "BAR_PYTHON": python,
        "BAR_SCRIPT": str(script),
        "BAR_PACKAGE": package,
        "BAR_SOURCE": str(source.absolute()),
        "BAR_SOURCE_ID": f"{found.st_size}:{found.st_mtime_ns}",
    }
    for name, value in defines.items():
        if '"' in value or "\\" in value or "\n" in value:
            raise LauncherError(f"{name} {value!r}: a path a C string cannot hold plainly")
    fd, built = tempfile.mkstemp(prefix=".bar-", dir=folder)
    os.close(fd)
    try:
        command = [cc, "-O2", "-Wall", "-Wextra", "-Werror=implicit-function-declaration"]
        command += [f'-D{name}="{value}"' for name, value in defines.items()]
        command += ["-o", built, str(source)]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise LauncherError(f"{cc} failed:\n{done.stderr.strip()}")
        os.chmod(built, 0o755)
        os.replace(built, folder / "bar")
    finally:
        if os.path.exists(built):
            os.unlink(built)
    return folder / "bar"


def _package_of(python: str) -> str:
    """Where ``python`` imports bar from (the resident compares it with its own)."""
    try:
        done = subprocess.run(
            [python, "-I", "-c", "import bar, os; print(os.path.dirname(bar.__file__))"],
            capture_output=True,
            text=True,
            check=False,
            cwd="/",
        )
    except OSError as exc:
        raise LauncherError(f"{python} cannot import bar ({exc.strerror})") from None
    found = done.stdout.strip()
    if done.returncode != 0 or not os.path.isabs(found):
        raise LauncherError(f"{python} cannot import bar ({done.stderr.strip()[-200:]})")
    # -I leaves out the user's site-packages and PYTHONPATH, as bar's script does not:
    # the same folder either way for an install in a virtual environment
    return found


def _write(path: Path, data: bytes, mode: int) -> None:
    fd, temporary = tempfile.mkstemp(prefix=".bar-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def main(argv: list[str]) -> int:
    if argv[:1] in (["-h"], ["--help"]) or len(argv) > 1:
        print("usage: python -m bar.cli.launcher [BIN]\n\n" + (__doc__ or ""))
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    folder = Path(argv[0]) if argv else Path(sys.executable).parent
    try:
        built = build(folder.absolute())
    except LauncherError as exc:
        print(f"bar: the compiled bar was not built, bar stays the Python script: {exc}")
        # (optional where the install asks for it: bar works the same without it; a folder
        # named by hand that could not take it is an error)
        return 1 if argv else 0
    print(f"bar: built {built} (runs {folder.absolute() / PYTHON_NAME} for what it does not serve)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
