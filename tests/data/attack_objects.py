"""Run inside a step: try to change the repository's existing objects, or to slip
objects and refs into it that git would not have made (tests/sandbox/test_quarantine.py).

``store``: every way to change an existing object file, by every path the step can name;
prints ``changed: none`` or what it managed.
``forge``: writes a file named by another content's hash, a malformed commit, a tree
naming a missing blob and a commit onto it, and moves the task branch there; prints the
names as JSON.
"""

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import zlib


def git(*args: str, data: bytes | None = None) -> str:
    return (
        subprocess.run(["git", *args], input=data, capture_output=True, check=False)
        .stdout.decode()
        .strip()
    )


common = git("rev-parse", "--path-format=absolute", "--git-common-dir")
store = os.path.join(common, "objects")
with open(os.path.join(store, "info", "alternates")) as f:
    views = [line.strip() for line in f if line.strip()]


def existing() -> list[str]:
    found = []
    for base in (store, *views):
        for folder in os.listdir(base):
            if len(folder) == 2:
                found += [
                    os.path.join(base, folder, n) for n in os.listdir(os.path.join(base, folder))
                ]
        pack = os.path.join(base, "pack")
        if os.path.isdir(pack):
            found += [os.path.join(pack, n) for n in os.listdir(pack)]
    return found


def attempts(path: str) -> dict[str, object]:
    body = b"blob 4\0evil"
    return {
        "unlink": lambda: os.unlink(path),
        "chmod": lambda: os.chmod(path, 0o644),
        "truncate": lambda: os.truncate(path, 0),
        "rewrite": lambda: open(path, "r+b").write(zlib.compress(body)),
        "rename": lambda: os.rename(path, path + ".x"),
        "link-over": lambda: os.link(__file__, path),
    }


def store_attack() -> None:
    changed = []
    for path in existing():
        for what, act in attempts(path).items():
            try:
                act()  # type: ignore[operator]
                changed.append(f"{what} {path}")
            except OSError:
                pass
    for view in views:
        for name in ("info/commit-graph", "info/alternates", "pack/multi-pack-index", "xx"):
            try:
                with open(os.path.join(view, name), "wb") as f:
                    f.write(b"planted")
                changed.append(f"wrote {view}/{name}")
            except OSError:
                pass
    graph = os.path.join(store, "info", "commit-graph")  # (the step's own view's)
    with contextlib.suppress(OSError), open(graph, "wb") as f:
        f.write(b"CGPH planted")
    for args in (("gc", "--prune=now", "-q"), ("prune",), ("repack", "-a", "-d", "-q")):
        git(*args)
    print("changed:", ", ".join(changed) or "none")


def forge() -> None:
    other = b"blob 5\0other"
    lying = hashlib.sha1(b"blob 4\0evil").hexdigest()
    os.makedirs(os.path.join(store, lying[:2]), exist_ok=True)
    with open(os.path.join(store, lying[:2], lying[2:]), "wb") as f:
        f.write(zlib.compress(other))
    bomb = "b" * 40  # claims 5 GiB: its ten kilobytes would inflate to that
    os.makedirs(os.path.join(store, bomb[:2]), exist_ok=True)
    with open(os.path.join(store, bomb[:2], bomb[2:]), "wb") as f:
        f.write(zlib.compress(b"blob %d\0" % (5 << 30) + bytes(10 << 20)))
    malformed = git(
        "hash-object", "-t", "commit", "--literally", "-w", "--stdin", data=b"not a commit"
    )
    tree = git("mktree", "--missing", data=b"100644 blob " + b"1" * 40 + b"\tghost.txt\n")
    commit = git("commit-tree", tree, "-p", "HEAD", "-m", "onto a ghost")
    branch = git("symbolic-ref", "HEAD")
    git("update-ref", branch, commit)
    print(
        json.dumps(
            {"bomb": bomb, "lying": lying, "malformed": malformed, "tree": tree, "commit": commit}
        )
    )


if __name__ == "__main__":
    {"store": store_attack, "forge": forge}[sys.argv[1]]()
