#!/usr/bin/env python3
"""Generate benchmark repositories by script.

A generated repository looks like a real project: nested packages of source files in a
few languages, tests, docs, vendored code, binary assets, executable scripts, a few
symlinks and names with spaces or non-ASCII characters, and a ``.gitignore`` whose build
directories, caches and logs are actually present (untracked and ignored) in the tree.
It has one commit on ``main``.

Everything is drawn from one seeded ``random.Random`` in a fixed order, so the same size
and seed always give the same commit id.

Speed: the content goes straight from Python into ``git fast-import`` (one pack, no loose
objects, as in a cloned repository), then ``git reset --hard`` writes the files and the
index in one pass. Writing the files from Python and running ``git add -A`` is kept as
``--method add`` so the two can be compared; see bench/README.md for the measurement.

    python bench/genrepo.py --size medium OUT
    python bench/genrepo.py --files 5000 --seed 7 OUT
    python bench/genrepo.py --repo ~/src/project OUT     # copy a real repository
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# Bump when the layout or content changes, so cached repositories are rebuilt.
GENERATOR_VERSION = 3

SIZES = {"small": 1_000, "medium": 40_000, "large": 200_000}
DEFAULT_SEED = 20240115

# Fixed identity and date: the commit id depends only on size and seed.
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Bench Author",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_AUTHOR_DATE": "1705312800 +0000",
    "GIT_COMMITTER_NAME": "Bench Author",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
    "GIT_COMMITTER_DATE": "1705312800 +0000",
}

GITIGNORE = """\
# Build output
/build/
/dist/
*.o
*.so
*.a
*.class

# Language caches and dependencies
__pycache__/
*.pyc
node_modules/
.cache/
.venv/
target/

# Test and coverage reports
coverage/
.coverage
*.log

# Local settings
.env
.env.local
*.swp
.DS_Store
"""

ROOT_FILES = {
    "README.md": "markdown",
    "LICENSE": "text",
    "CHANGELOG.md": "markdown",
    "CONTRIBUTING.md": "markdown",
    "Makefile": "make",
    "pyproject.toml": "toml",
    "package.json": "json",
    "tsconfig.json": "json",
    ".editorconfig": "ini",
}

# Share of tracked files per top-level directory; the rest of the count goes to src/.
BUCKETS = [
    ("tests", 0.16),
    ("docs", 0.06),
    ("assets", 0.035),
    ("vendor", 0.15),
    ("tools", 0.025),
    ("config", 0.02),
]

SOURCE_LANGS = [("python", 0.35), ("typescript", 0.25), ("go", 0.15), ("c", 0.13), ("rust", 0.12)]
EXTENSIONS = {
    "python": [(".py", 0.92), (".pyi", 0.03), (".txt", 0.05)],
    "typescript": [(".ts", 0.6), (".tsx", 0.25), (".json", 0.05), (".css", 0.1)],
    "go": [(".go", 0.95), (".mod", 0.05)],
    "c": [(".c", 0.55), (".h", 0.45)],
    "rust": [(".rs", 0.97), (".toml", 0.03)],
    "markdown": [(".md", 0.75), (".rst", 0.15), (".txt", 0.1)],
    "config": [(".json", 0.35), (".yaml", 0.35), (".toml", 0.2), (".ini", 0.1)],
    "shell": [(".sh", 0.7), (".py", 0.3)],
}
BINARY_EXTENSIONS = [
    (".png", 0.4),
    (".jpg", 0.15),
    (".gif", 0.05),
    (".ico", 0.05),
    (".woff2", 0.1),
    (".ttf", 0.05),
    (".pdf", 0.1),
    (".bin", 0.1),
]
BINARY_MAGIC = {
    ".png": b"\x89PNG\r\n\x1a\n",
    ".jpg": b"\xff\xd8\xff\xe0\x00\x10JFIF\x00",
    ".gif": b"GIF89a",
    ".ico": b"\x00\x00\x01\x00",
    ".woff2": b"wOF2",
    ".ttf": b"\x00\x01\x00\x00",
    ".pdf": b"%PDF-1.5\n%\xe2\xe3\xcf\xd3\n",
    ".bin": b"\x7fBIN",
}


def _words(text: str) -> list[str]:
    return text.split()


SYLLABLES = _words(
    "ab ac ad al am an ar as at ba be bi bo ca ce ci co da de di do el em en er es et "
    "fa fe fi fo ga ge gi go ha he hi ho id il im in io is ka ke ki ko la le li lo ma me "
    "mi mo na ne ni no ob od ol om on op or os pa pe pi po ra re ri ro sa se si so ta te "
    "ti to ul um un ur us va ve vi vo za ze zi zo"
)
WORDS = _words(
    "core util api model view handler parser config client server cache store auth http "
    "event task job queue db schema index render layout widget form io net log metrics "
    "plugin session user account order payment invoice report search filter sort page "
    "route middleware codec stream buffer pool worker scheduler timer clock file path "
    "image font theme style token lexer ast compiler runtime vm gc alloc hash map set list "
    "tree graph node edge walker visitor builder factory adapter proxy bridge registry "
    "loader plugin hook signal channel socket frame packet crypto cipher key cert policy"
)


@dataclass(frozen=True)
class Entry:
    path: str
    mode: str  # git file mode: 100644, 100755 or 120000
    kind: str  # "text", "binary" or "symlink"
    lang: str
    size: int


def _weighted(rng: random.Random, choices: list[tuple[str, float]]) -> str:
    names = [c[0] for c in choices]
    weights = [c[1] for c in choices]
    return rng.choices(names, weights)[0]


def _word(rng: random.Random) -> str:
    if rng.random() < 0.75:
        return rng.choice(WORDS)
    return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4)))


def _name(rng: random.Random, taken: set[str], ext: str = "", prefix: str = "") -> str:
    for _ in range(100):
        base = _word(rng)
        if rng.random() < 0.4:
            base += rng.choice("_-") + _word(rng)
        name = prefix + base + ext
        if name not in taken:
            taken.add(name)
            return name
    n = len(taken)
    name = f"{prefix}{_word(rng)}{n}{ext}"
    taken.add(name)
    return name


def _text_size(rng: random.Random) -> int:
    # Log-normal: median ~2.2 kB, mean ~3.6 kB, a long tail of big modules.
    return int(min(300_000, max(40, rng.lognormvariate(math.log(2200), 1.0))))


def _binary_size(rng: random.Random) -> int:
    return int(min(4_000_000, max(200, rng.lognormvariate(math.log(8000), 1.3))))


class _Dir:
    __slots__ = ("children", "depth", "files", "lang", "path")

    def __init__(self, path: str, depth: int, lang: str) -> None:
        self.path = path
        self.depth = depth
        self.lang = lang
        self.children: set[str] = set()
        self.files: set[str] = set()


def _grow_tree(rng: random.Random, root: str, n_files: int, lang_of_top: bool) -> list[_Dir]:
    """Directories under ``root``: a random recursive tree, ~11 files per directory."""
    top = _Dir(root, 1, "")
    dirs = [top]
    want = max(1, n_files // 11)
    while len(dirs) < want:
        parent = rng.choice(dirs)
        if parent.depth >= 8:
            continue
        name = _name(rng, parent.children)
        lang = parent.lang
        if parent is top and lang_of_top:
            lang = _weighted(rng, SOURCE_LANGS)
        dirs.append(_Dir(f"{parent.path}/{name}", parent.depth + 1, lang))
    if lang_of_top and not top.lang:
        top.lang = "python"
    return dirs


def plan(n_files: int, seed: int) -> list[Entry]:
    """The list of tracked files, in a deterministic order."""
    rng = random.Random(f"bar-bench-{seed}-{n_files}")
    entries: list[Entry] = [Entry(".gitignore", "100644", "gitignore", "text", len(GITIGNORE))]
    for name, lang in ROOT_FILES.items():
        entries.append(Entry(name, "100644", "text", lang, _text_size(rng)))
    remaining = max(0, n_files - len(entries))
    counts = {name: int(remaining * share) for name, share in BUCKETS}
    counts["src"] = remaining - sum(counts.values())
    n_links = max(2, n_files // 2000)
    counts["src"] -= n_links

    for bucket in ("src", "tests", "vendor", "docs", "assets", "tools", "config"):
        n = counts.get(bucket, 0)
        if n <= 0:
            continue
        code = bucket in ("src", "tests", "vendor")
        dirs = _grow_tree(rng, bucket, n, lang_of_top=code)
        weights = [rng.paretovariate(1.6) for _ in dirs]
        for d in rng.choices(dirs, weights, k=n):
            entries.append(_plan_file(rng, bucket, d))

    # A few symlinks, as real trees have (docs pointing at the README, shared configs).
    regular = [e for e in entries if e.kind == "text" and "/" in e.path]
    for i in range(n_links):
        target = rng.choice(regular)
        link_dir = rng.choice(regular).path.rsplit("/", 1)[0]
        up = "../" * link_dir.count("/") + "../"
        entries.append(Entry(f"{link_dir}/link-{i}", "120000", "symlink", up + target.path, 0))
    # Names that need care: spaces and non-ASCII.
    entries.append(Entry("docs/Design Notes.md", "100644", "text", "markdown", 3000))
    entries.append(Entry("docs/résumé modèle.md", "100644", "text", "markdown", 1500))
    seen: set[str] = set()
    unique = []
    for e in entries:
        if e.path not in seen:
            seen.add(e.path)
            unique.append(e)
    return unique


def _plan_file(rng: random.Random, bucket: str, d: _Dir) -> Entry:
    if bucket == "assets" or (bucket == "docs" and rng.random() < 0.08):
        ext = _weighted(rng, BINARY_EXTENSIONS)
        return Entry(
            f"{d.path}/{_name(rng, d.files, ext)}", "100644", "binary", ext, _binary_size(rng)
        )
    if bucket == "docs":
        ext = _weighted(rng, EXTENSIONS["markdown"])
        return Entry(
            f"{d.path}/{_name(rng, d.files, ext)}", "100644", "text", "markdown", _text_size(rng)
        )
    if bucket == "config":
        ext = _weighted(rng, EXTENSIONS["config"])
        return Entry(
            f"{d.path}/{_name(rng, d.files, ext)}", "100644", "text", ext[1:], _text_size(rng) // 3
        )
    if bucket == "tools":
        ext = _weighted(rng, EXTENSIONS["shell"])
        mode = "100755" if rng.random() < 0.8 else "100644"
        lang = "shell" if ext == ".sh" else "python"
        return Entry(f"{d.path}/{_name(rng, d.files, ext)}", mode, "text", lang, _text_size(rng))
    lang = d.lang or "python"
    if bucket == "vendor" and rng.random() < 0.03:
        size = int(min(400_000, rng.lognormvariate(math.log(60_000), 0.8)))
        return Entry(
            f"{d.path}/{_name(rng, d.files, '.min.js')}", "100644", "text", "minified", size
        )
    if bucket == "src" and rng.random() < 0.01:
        ext = _weighted(rng, BINARY_EXTENSIONS)
        return Entry(
            f"{d.path}/{_name(rng, d.files, ext)}", "100644", "binary", ext, _binary_size(rng)
        )
    ext = _weighted(rng, EXTENSIONS[lang])
    prefix = ""
    if bucket == "tests":
        prefix = {"python": "test_", "go": "", "rust": "", "c": "test_", "typescript": ""}[lang]
        if lang == "typescript" and ext in (".ts", ".tsx"):
            ext = ".test" + ext
        elif lang == "go" and ext == ".go":
            ext = "_test.go"
    return Entry(
        f"{d.path}/{_name(rng, d.files, ext, prefix)}", "100644", "text", lang, _text_size(rng)
    )


# --- content ---------------------------------------------------------------------------

_LINE_SHAPES = {
    "python": [
        "def {a}({b}, {c}={n}):",
        "    {a} = {b}.{c}({d})",
        "    if {a} is None:",
        "        return {b}",
        "    for {a} in {b}:",
        "        {a}.{b}({c}, {d}={n})",
        "class {A}({B}):",
        '    """{words}."""',
        "    # {words}",
        "from {a}.{b} import {A}, {c}",
        "import {a}",
        '    raise {A}Error(f"{words} {{{a}!r}}")',
        "",
    ],
    "typescript": [
        "export function {a}({b}: {A}, {c}: number): {B} {{",
        "  const {a} = {b}.{c}({d}, {n});",
        "  if (!{a}) {{ return {b}; }}",
        "  for (const {a} of {b}) {{",
        "    {a}.{b}({c});",
        "}}",
        "export interface {A} {{ {a}: string; {b}?: {B}; }}",
        "import {{ {A}, {B} }} from './{a}/{b}';",
        "  // {words}",
        "  return <{A} {a}={{{b}}} />;",
        "",
    ],
    "go": [
        "func ({a} *{A}) {B}({b} {C}) (int, error) {{",
        "\t{a} := {b}.{C}({c}, {n})",
        "\tif err != nil {{",
        '\t\treturn 0, fmt.Errorf("{words}: %w", err)',
        "\t}}",
        "}}",
        "type {A} struct {{",
        "\t{B} {c}.{C}",
        "// {A} {words}.",
        "",
    ],
    "c": [
        "static int {a}_{b}(struct {c} *{d}, size_t {a})",
        "{{",
        "\tif ({a} == NULL)",
        "\t\treturn -E{A};",
        "\t{a}->{b} = {c}({d}, {n});",
        "}}",
        "/* {words} */",
        "#include <{a}/{b}.h>",
        "#define {A}_{B} {n}",
        "",
    ],
    "rust": [
        "pub fn {a}(&self, {b}: &{A}) -> Result<{B}, Error> {{",
        "    let {a} = self.{b}.{c}({d})?;",
        "    match {a} {{",
        "        {A}::{B}({c}) => {c}.{d}({n}),",
        "    }}",
        "}}",
        "/// {words}.",
        "use crate::{a}::{{{A}, {B}}};",
        "",
    ],
    "markdown": [
        "# {A} {words}",
        "{words}. {words}.",
        "- `{a}`: {words}",
        "```",
        "{a} --{b} {c}",
        "",
    ],
    "shell": [
        "set -euo pipefail",
        '{a}="${{{B}:-{c}}}"',
        'if [ -f "${a}" ]; then',
        '  {a} --{b} "${c}"',
        "fi",
        "# {words}",
        "",
    ],
    "generic": [
        "{a} = {n}",
        '"{a}": "{b}",',
        "{a}: {b}",
        "[{a}.{b}]",
        "# {words}",
        "",
    ],
}
_COMMENT = {"python": "#", "shell": "#", "go": "//", "c": "//", "rust": "//", "typescript": "//"}


class Corpus:
    """Per-language pools of plausible source lines; files are slices of a pool."""

    def __init__(self, rng: random.Random) -> None:
        self.pools: dict[str, tuple[str, list[int]]] = {}
        for lang, shapes in _LINE_SHAPES.items():
            lines = []
            for _ in range(5000):
                shape = rng.choice(shapes)
                lines.append(
                    shape.format(
                        a=_word(rng),
                        b=_word(rng),
                        c=_word(rng),
                        d=_word(rng),
                        A=_word(rng).capitalize(),
                        B=_word(rng).capitalize(),
                        C=_word(rng).capitalize(),
                        n=rng.randint(0, 4096),
                        words=" ".join(_word(rng) for _ in range(rng.randint(3, 10))),
                    )
                )
            starts = [0]
            for line in lines:
                starts.append(starts[-1] + len(line) + 1)
            self.pools[lang] = ("\n".join(lines) + "\n", starts)

    def text(self, rng: random.Random, lang: str, size: int, path: str) -> bytes:
        pool, starts = self.pools.get(lang) or self.pools["generic"]
        mark = _COMMENT.get(lang, "#")
        parts = [f"{mark} {path} -- generated {rng.getrandbits(48):012x}\n"]
        total = len(parts[0])
        last = len(starts) - 1
        while total < size:
            i = rng.randrange(last)
            j = min(last, i + rng.randint(4, 80))
            chunk = pool[starts[i] : starts[j]]
            parts.append(chunk)
            total += len(chunk)
        out = "".join(parts)
        if lang == "minified":
            out = out.replace("\n", ";")
        return out[: max(size, len(parts[0]))].encode()


def binary(rng: random.Random, ext: str, size: int) -> bytes:
    magic = BINARY_MAGIC.get(ext, b"")
    # Half random (incompressible pixels), half repetitive (headers, palettes, padding).
    body = rng.randbytes(max(0, size - len(magic)) // 2 + 1)
    return (magic + body + bytes(len(body) // 2) + body[: len(body) // 2])[:size]


def contents(entries: list[Entry], seed: int) -> Iterator[tuple[Entry, bytes]]:
    rng = random.Random(f"bar-bench-content-{seed}")
    corpus = Corpus(rng)
    for e in entries:
        if e.kind == "gitignore":
            yield e, GITIGNORE.encode()
        elif e.kind == "symlink":
            yield e, e.lang.encode()
        elif e.kind == "binary":
            yield e, binary(rng, e.lang, e.size)
        else:
            yield e, corpus.text(rng, e.lang, e.size, e.path)


# --- ignored files ---------------------------------------------------------------------


def populate_ignored(root: Path, seed: int = DEFAULT_SEED, share: float = 0.15) -> int:
    """Write build output, caches and logs that ``.gitignore`` ignores: ~15% of the tracked
    file count, so ``git status`` and snapshots must skip them. Returns the file count."""
    rng = random.Random(f"bar-bench-ignored-{seed}")
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True
    ).stdout.split(b"\0")
    py_dirs = sorted(
        {os.fsdecode(p).rsplit("/", 1)[0] for p in tracked if p.endswith(b".py") and b"/" in p}
    )
    n = max(50, int(len(tracked) * share))
    written = 0

    def put(rel: str, data: bytes) -> None:
        nonlocal written
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        written += 1

    # node_modules: many small packages; build/ and dist/: objects and bundles.
    for i in range(int(n * 0.4)):
        pkg = f"node_modules/{WORDS[i % len(WORDS)]}-{i // len(WORDS)}"
        put(
            f"{pkg}/index.js",
            f"module.exports = require('./lib/{i}');\n".encode() * rng.randint(1, 40),
        )
        if i % 4 == 0:
            put(f"{pkg}/package.json", b'{"name": "pkg", "version": "1.0.0"}\n')
    for i in range(int(n * 0.25)):
        put(f"build/obj/{i % 37}/unit{i}.o", rng.randbytes(rng.randint(200, 20_000)))
    for i in range(int(n * 0.05)):
        put(f"dist/bundle{i}.js", b"var a=1;" * rng.randint(10, 2000))
    # __pycache__ next to Python sources, logs scattered through the tree.
    for d in py_dirs[: int(n * 0.2)]:
        put(f"{d}/__pycache__/mod.cpython-311.pyc", rng.randbytes(rng.randint(300, 8000)))
    for i in range(int(n * 0.03)):
        d = rng.choice(py_dirs) if py_dirs else "."
        put(f"{d}/debug-{i}.log", b"INFO started\n" * rng.randint(1, 300))
    for i in range(20):
        put(f".cache/tool/{i:02x}.cache", rng.randbytes(512))
        put(f"coverage/lcov-{i}.info", b"SF:src/core.py\nDA:1,1\n" * 50)
    put(".env", b"DATABASE_URL=postgres://localhost/dev\n")
    return written


# --- writing a repository --------------------------------------------------------------


def _git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_IDENTITY)
    env["GIT_CONFIG_NOSYSTEM"] = "1"
    return env


def _git(cwd: Path, *args: str, input: bytes | None = None) -> bytes:
    proc = subprocess.run(["git", *args], cwd=cwd, input=input, capture_output=True, env=_git_env())
    if proc.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed: {proc.stderr.decode(errors='replace')}")
    return proc.stdout


def _progress(msg: str) -> None:
    print(f"genrepo: {msg}", file=sys.stderr, flush=True)


def _fast_import_path(path: str) -> bytes:
    raw = path.encode()
    if b'"' in raw[:1] or b"\n" in raw:
        return json.dumps(path).encode()
    return raw


def generate(
    out: Path,
    n_files: int,
    seed: int = DEFAULT_SEED,
    method: str = "fast-import",
    quiet: bool = False,
) -> dict[str, object]:
    """Create a repository with ``n_files`` tracked files at ``out`` (must not exist)."""
    t0 = time.perf_counter()
    out.mkdir(parents=True)
    _git(out, "init", "-q", "-b", "main")
    entries = plan(n_files, seed)
    total_bytes = 0
    step = max(1000, len(entries) // 10)
    if method == "fast-import":
        proc = subprocess.Popen(
            ["git", "fast-import", "--quiet", "--done"],
            cwd=out,
            stdin=subprocess.PIPE,
            env=_git_env(),
        )
        assert proc.stdin is not None
        w = proc.stdin
        marks: list[tuple[Entry, int]] = []
        for i, (e, data) in enumerate(contents(entries, seed), 1):
            w.write(b"blob\nmark :%d\ndata %d\n" % (i, len(data)))
            w.write(data)
            w.write(b"\n")
            marks.append((e, i))
            total_bytes += len(data)
            if not quiet and i % step == 0:
                _progress(f"{i}/{len(entries)} blobs")
        msg = b"Initial import\n"
        w.write(b"commit refs/heads/main\n")
        for who in ("author", "committer"):
            w.write(f"{who} Bench Author <bench@example.com> 1705312800 +0000\n".encode())
        w.write(b"data %d\n%s" % (len(msg), msg))
        for e, mark in marks:
            w.write(b"M %s :%d %s\n" % (e.mode.encode(), mark, _fast_import_path(e.path)))
        w.write(b"\ndone\n")
        w.close()
        if proc.wait() != 0:
            raise SystemExit("git fast-import failed")
        if not quiet:
            _progress("checking out")
        _git(out, "reset", "-q", "--hard", "main")
    elif method == "add":
        for i, (e, data) in enumerate(contents(entries, seed), 1):
            path = out / e.path
            path.parent.mkdir(parents=True, exist_ok=True)
            if e.kind == "symlink":
                os.symlink(data.decode(), path)
            else:
                path.write_bytes(data)
                if e.mode == "100755":
                    path.chmod(0o755)
            total_bytes += len(data)
            if not quiet and i % step == 0:
                _progress(f"{i}/{len(entries)} files")
        _git(out, "add", "-A")
        _git(out, "commit", "-q", "-m", "Initial import")
        _git(out, "repack", "-a", "-d", "-q")
    else:
        raise SystemExit(f"unknown method {method!r}")
    t_commit = time.perf_counter() - t0
    ignored = populate_ignored(out, seed)
    status = _git(out, "status", "--porcelain")
    if status:
        raise SystemExit(f"generated tree is not clean:\n{status.decode()[:2000]}")
    head = _git(out, "rev-parse", "HEAD").decode().strip()
    stats = {
        "files": len(entries),
        "ignored_files": ignored,
        "bytes": total_bytes,
        "dirs": len({e.path.rsplit("/", 1)[0] for e in entries if "/" in e.path}),
        "head": head,
        "seed": seed,
        "method": method,
        "generator_version": GENERATOR_VERSION,
        "seconds_commit": round(t_commit, 2),
        "seconds_total": round(time.perf_counter() - t0, 2),
    }
    if not quiet:
        _progress(
            f"{stats['files']} files ({total_bytes / 1e6:.0f} MB), {ignored} ignored, "
            f"{stats['seconds_total']} s, HEAD {head[:12]}"
        )
    return stats


def copy_repo(src: Path, out: Path, quiet: bool = False) -> dict[str, object]:
    """Clone a real repository the user points at; its own checkout is never touched."""
    t0 = time.perf_counter()
    if not (src / ".git").exists() and not (src / "HEAD").exists():
        raise SystemExit(f"{src} is not a git repository")
    out.parent.mkdir(parents=True, exist_ok=True)
    _git(out.parent, "clone", "-q", "--no-hardlinks", str(src.resolve()), str(out))
    branch = _git(out, "rev-parse", "--abbrev-ref", "HEAD").decode().strip()
    if branch != "main":
        _git(out, "branch", "-q", "-M", branch, "main")
    _git(out, "remote", "remove", "origin")
    files = _git(out, "ls-files", "-z").count(b"\0")
    stats = {
        "files": files,
        "ignored_files": 0,
        "source": str(src.resolve()),
        "head": _git(out, "rev-parse", "HEAD").decode().strip(),
        "seconds_total": round(time.perf_counter() - t0, 2),
    }
    if not quiet:
        _progress(f"cloned {src} ({files} files) in {stats['seconds_total']} s")
    return stats


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = p.add_mutually_exclusive_group()
    g.add_argument("--size", choices=sorted(SIZES), default="small")
    g.add_argument("--files", type=int, help="exact number of tracked files")
    g.add_argument("--repo", type=Path, help="copy this existing repository instead")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED)
    p.add_argument("--method", choices=["fast-import", "add"], default="fast-import")
    p.add_argument("--force", action="store_true", help="replace OUT if it exists")
    p.add_argument("--json", action="store_true", help="print the statistics as JSON")
    p.add_argument("out", type=Path)
    args = p.parse_args(argv)
    if args.out.exists():
        if not args.force:
            p.error(f"{args.out} exists (use --force to replace it)")
        shutil.rmtree(args.out)
    if args.repo:
        stats = copy_repo(args.repo, args.out)
    else:
        n = args.files or SIZES[args.size]
        stats = generate(args.out, n, args.seed, args.method)
    if args.json:
        print(json.dumps(stats, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
