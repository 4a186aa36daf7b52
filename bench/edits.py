"""Deterministic edits that benchmark steps make to a worktree.

Every tool under test is given the same edits in the same order, so the work each one
records is identical. The files to edit come from a *pool*: a list of tracked text files
chosen once per repository (``make_pool``), so a step never has to list the repository.

Used both as a library by run.py and as the command a step runs:

    python bench/edits.py many POOL N TAG   # change N files: modify pool files, add the rest
"""

from __future__ import annotations

import os
import random
import shlex
import subprocess
import sys
from pathlib import Path

TEXT_SUFFIXES = (".py", ".ts", ".tsx", ".go", ".c", ".h", ".rs", ".md", ".txt", ".json", ".sh")


def make_pool(worktree: Path, out: Path, size: int = 5000, seed: int = 1) -> list[str]:
    """Pick up to ``size`` tracked text files (deterministically) and write them to ``out``."""
    raw = subprocess.run(
        ["git", "ls-files", "-z"], cwd=worktree, capture_output=True, check=True
    ).stdout
    names = sorted(
        p
        for p in (os.fsdecode(b) for b in raw.split(b"\0") if b)
        if p.endswith(TEXT_SUFFIXES) and not os.path.islink(worktree / p)
    )
    pool = random.Random(seed).sample(names, min(size, len(names)))
    out.write_text("\n".join(pool) + "\n", encoding="utf-8")
    return pool


def read_pool(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line]


def step_script(pool: list[str], k: int) -> str:
    """A shell command for step ``k``: append to three pool files, every third step add a
    new file, every fifth step delete the file added six steps before (if present)."""
    parts = []
    for i in range(3):
        path = pool[(3 * k + i) % len(pool)]
        parts.append(f"printf 'edit %s of step %s\\n' {i} {k} >> {shlex.quote(path)}")
    if k % 3 == 0:
        parts.append(f"mkdir -p bench-new && printf 'new file %s\\n' {k} > bench-new/f{k}.txt")
    if k % 5 == 0:
        parts.append(f"rm -f bench-new/f{k - 6}.txt")
    return " && ".join(parts)


def small_change(worktree: Path, pool: list[str], k: int) -> None:
    """One line appended to one file: the 'small change in the tree' of figure 1."""
    with open(worktree / pool[0], "a", encoding="utf-8") as fh:
        fh.write(f"small change {k}\n")


def change_many(pool: list[str], n: int, tag: str = "many") -> None:
    """Change ``n`` files in the current directory: modify up to half of them from the
    pool, create the rest under bench-many/."""
    modify = pool[: min(len(pool), n // 2)]
    for path in modify:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(f"{tag}: appended line\n")
    rest = n - len(modify)
    for i in range(rest):
        d = f"bench-many/{tag}/{i // 100:03d}"
        if i % 100 == 0:
            os.makedirs(d, exist_ok=True)
        with open(f"{d}/file{i}.txt", "w", encoding="utf-8") as fh:
            fh.write(f"{tag} {i}\n" * 8)


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[0] == "many":
        change_many(read_pool(Path(argv[1])), int(argv[2]), argv[3])
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
