"""Applies a JSON list of file operations in the current directory, like an agent would.

Used by the property tests: `python edit_agent.py OPS.json`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def main() -> None:
    ops = json.loads(Path(sys.argv[1]).read_text())
    for op in ops:
        kind, path = op["op"], Path(op["path"])
        if kind in ("write", "binary"):
            if path.is_symlink() or (path.exists() and not path.is_dir()):
                path.unlink()
            if path.is_dir():
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            data = op["text"].encode() if kind == "write" else bytes(op["bytes"])
            path.write_bytes(data)
        elif kind == "delete":
            if path.is_symlink() or path.is_file():
                path.unlink()
        elif kind == "rename":
            dest = Path(op["dest"])
            if (
                (path.is_file() or path.is_symlink())
                and not dest.exists()
                and not dest.is_symlink()
            ):
                dest.parent.mkdir(parents=True, exist_ok=True)
                os.replace(path, dest)
        elif kind == "chmod":
            if path.is_file() and not path.is_symlink():
                path.chmod(0o755 if op["exec"] else 0o644)
        elif kind == "symlink":
            if path.is_symlink() or path.is_file():
                path.unlink()
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                os.symlink(op["target"], path)


if __name__ == "__main__":
    main()
