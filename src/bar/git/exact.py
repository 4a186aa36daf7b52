"""Exact bytes under git's conversions: line endings and filters.

A snapshot's tree holds what ``git add`` stores: with ``core.autocrlf`` or ``text``/
``eol``/``filter`` attributes, that is not always the bytes on disk (an LF file written
under ``autocrlf=true`` is stored as is, and git's checkout would write it back CRLF; a
CRLF file under ``* text=auto`` comes back LF). The tree is right for everything git
does with it (patches, apply); a rollback must also bring back the bytes.

So a snapshot whose files differ from what git's checkout of its tree would write carries
those files' raw bytes (stored with ``--no-filters``) in a second tree, the "raw tree",
reached as the snapshot commit's second parent (a parentless commit, so gc keeps it and
no history changes meaning). A rollback stages the raw bytes where git's checkout
staged its own (``stage_exact``), before each file is moved in.
Nothing of this runs in a repository without conversions: ``converts`` is checked first.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from bar import git
from bar.base.proc import Result, Started
from bar.git import BAR_IDENTITY, racy
from bar.git.object_writer import CONFIG_PATTERN
from bar.store.files import open_beneath

_REGULAR = ("100644", "100755")


# worktree -> whether its configuration converts, while ``configuration_read_once`` holds
_CONFIGURED: dict[str, bool] | None = None


# (with what the snapshot's commit and ref need, read in the same process: ``bar.git.object_writer``)
_CONFIG_KEYS = (
    "config",
    "--get-regexp",
    r"^core\.(autocrlf|eol|attributesfile|excludesfile)$|" + CONFIG_PATTERN,
)
# what a checkout's line endings depend on beside the attributes (which come with the
# tree), and git's defaults for them
_CHECKOUT_KEYS = {"core.autocrlf": "false", "core.eol": "native"}


def converting(checkout: Mapping[str, str]) -> bool:
    """Whether git's checkout converts line endings by ``checkout`` (a configuration
    ``checkout_config`` read), where the files' attributes ask for none."""
    return dict(checkout) != _CHECKOUT_KEYS


_RAW_MESSAGE = "bar: the bytes on disk where git converts"


def ask(worktree: Path) -> Started | None:
    """Begin reading the configuration ``converts`` needs, for it to be answered later
    without waiting for git (None: nothing to read, known within
    ``configuration_read_once``)."""
    if _CONFIGURED is not None and str(worktree) in _CONFIGURED:
        return None
    return git.start(worktree, *_CONFIG_KEYS, check=False)


def read(worktree: Path) -> list[object]:
    """What ``ask`` reads, read now, as JSON carries it: what a task's watcher hands the
    command with a staging (``bar.changes.fast.staging``), read as the staging's tree was written."""
    res = git.git(worktree, *_CONFIG_KEYS, check=False)
    return [res.returncode, res.out]


def answered(said: object) -> Started | None:
    """``ask``'s answer from what ``read`` returned (None: it is not one)."""
    if not (
        isinstance(said, list)
        and len(said) == 2
        and type(said[0]) is int
        and isinstance(said[1], str)
    ):
        return None
    out = said[1].encode("utf-8", "surrogateescape")
    return Started.finished(Result(("git", *_CONFIG_KEYS), said[0], out, b""))


def converts(worktree: Path, has_attributes: bool, asked: Started | None = None) -> bool:
    """Whether git may store files other than byte for byte here: ``core.autocrlf``,
    an attributes file (``has_attributes``: the tree holds a ``.gitattributes``), or
    ``core.attributesFile`` / ``info/attributes``. ``asked``: ``ask(worktree)``, begun
    before."""
    res = asked.result() if asked is not None else None  # (reaped in any case)
    if has_attributes:
        return True
    if _CONFIGURED is not None and str(worktree) in _CONFIGURED:
        return _CONFIGURED[str(worktree)]
    if res is None:
        res = git.git(worktree, *_CONFIG_KEYS, check=False)
    found = any(
        key == "core.attributesfile"
        or (key == "core.autocrlf" and value.lower() in ("true", "input"))
        for key, _, value in (line.partition(" ") for line in res.out.splitlines())
    )
    found = found or os.path.isfile(_common_dir(worktree) / "info" / "attributes")
    if _CONFIGURED is not None:
        _CONFIGURED[str(worktree)] = found
    return found


def checkout_config(worktree: Path, asked: Started | None = None) -> dict[str, str]:
    """The configuration git's checkout converts line endings by here, each key with its
    value (git's default where unset). ``asked``: ``ask(worktree)``, begun before."""
    res = asked.result() if asked is not None else None
    out = res.out if res is not None else git.git(worktree, *_CONFIG_KEYS, check=False).out
    found = dict(_CHECKOUT_KEYS)
    for key, _, value in (line.partition(" ") for line in out.splitlines()):
        if key in found:
            found[key] = value.lower()
    return found


def recorded_checkout(repo: Path | str, commit: str) -> dict[str, str] | None:
    """The configuration git's checkout converted line endings by when the snapshot
    ``commit`` was recorded, for a restore to write the bytes it recorded whatever the
    configuration says now (docs/internals/git.md, "Exact bytes where git converts"): the
    one its raw parent names; for a snapshot of bar's with none, git's defaults (it was
    recorded where git converts nothing); None where it is not known (a commit not of bar's,
    as the task's base, or a raw parent that names none): the configuration as it is."""
    if commit in _RECORDED_CHECKOUT:
        found = _RECORDED_CHECKOUT[commit]
        return dict(found) if found is not None else None
    found = _read_recorded_checkout(repo, commit)
    if git.is_object_id(commit):  # (a commit never changes)
        if len(_RECORDED_CHECKOUT) >= _RAW_KEPT:
            _RECORDED_CHECKOUT.clear()
        _RECORDED_CHECKOUT[commit] = found
    return dict(found) if found is not None else None


_RECORDED_CHECKOUT: dict[str, dict[str, str] | None] = {}


def _read_recorded_checkout(repo: Path | str, commit: str) -> dict[str, str] | None:
    said = git.git(repo, "cat-file", "commit", commit, check=False)
    if said.returncode != 0:
        return None
    head = said.stdout.split(b"\n\n", 1)[0].split(b"\n")
    parents = [line[7:].decode() for line in head if line.startswith(b"parent ")]
    if not any(line.startswith(b"author bar <bar@localhost>") for line in head):
        return None
    if len(parents) < 2:
        return dict(_CHECKOUT_KEYS)
    raw = git.git(repo, "cat-file", "commit", parents[1], check=False)
    found = {}
    for line in raw.stdout.split(b"\n\n", 1)[-1].decode("utf-8", "replace").splitlines():
        key, eq, value = line.partition("=")
        if eq and key in _CHECKOUT_KEYS:
            found[key] = value
    return found or None


def with_config(env: Mapping[str, str], pairs: Mapping[str, str]) -> dict[str, str]:
    """``env`` with ``pairs`` added to the configuration it gives git (``GIT_CONFIG_*``)."""
    out = dict(env)
    count = int(out.get("GIT_CONFIG_COUNT") or 0)
    for key, value in pairs.items():
        out[f"GIT_CONFIG_KEY_{count}"], out[f"GIT_CONFIG_VALUE_{count}"] = key, value
        count += 1
    if count:
        out["GIT_CONFIG_COUNT"] = str(count)
    return out


def ignore_sources(worktree: Path, asked: Started | None) -> list[str]:
    """The files outside the worktree that decide what git ignores in it: the
    repository's ``info/exclude`` and the file ``core.excludesFile`` names (git's
    default one where ``asked``, the configuration read beside the snapshot, is not
    given; a snapshot that records a change reads it again). A look that found a
    file's directory unchanged can only trust that the file is still ignored while
    neither changed (``bar.changes.fast.rescan``)."""
    out = asked.result().out if asked is not None else ""
    named = next(
        (
            value
            for key, _, value in (line.partition(" ") for line in out.splitlines())
            if key == "core.excludesfile"
        ),
        None,
    )
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    common = _common_dir(worktree)
    return [
        str(common / "info" / "exclude"),
        os.path.expanduser(named) if named else os.path.join(xdg, "git", "ignore"),
    ]


@contextlib.contextmanager
def configuration_read_once() -> Iterator[None]:
    """Within: ``converts`` reads a worktree's configuration once. For one operation
    under the task lock (a rollback reads it for the stamps and for the snapshot), not
    across them: a long-lived process must see a configuration changed in between."""
    global _CONFIGURED
    outer = _CONFIGURED
    _CONFIGURED = {} if outer is None else outer
    try:
        yield
    finally:
        _CONFIGURED = outer


def _common_dir(worktree: Path) -> Path:
    """The repository's git directory: as bar pinned it for a task worktree (never read
    from files a step can write), else as git says."""
    return git.pinned_common_dir(worktree) or Path(
        git.out(worktree, "rev-parse", "--path-format=absolute", "--git-common-dir")
    )


_RAW_TREES: dict[str, str | None] = {}  # commit -> its raw tree: a commit never changes
_RAW_KEPT = 4096  # a long-lived process starts over past this many


def raw_tree_of(repo: Path | str, commit: str) -> str | None:
    """The raw tree a snapshot carries (its second parent's tree), if any."""
    if commit in _RAW_TREES:
        return _RAW_TREES[commit]
    raw = git.rev_parse(repo, f"{commit}^2^{{tree}}")
    return _remember(commit, raw) if raw is not None else None  # (None: or no such commit)


def _remember(commit: str, raw: str | None) -> str | None:
    if git.is_object_id(commit):
        if len(_RAW_TREES) >= _RAW_KEPT:
            _RAW_TREES.clear()
        _RAW_TREES[commit] = raw
    return raw


def look_up_trees(repo: Path | str, commits: Sequence[str]) -> None:
    """Find the tree and the raw tree of each of ``commits`` (snapshot ids) with one git
    process, for ``git.tree_of`` and ``raw_tree_of`` to answer from memory."""
    revs = [rev for c in commits for rev in (f"{c}^{{tree}}", f"{c}^2^{{tree}}")]
    res = git.git(
        repo,
        "cat-file",
        "--batch-check=%(objectname)",
        check=False,
        input="".join(rev + "\n" for rev in revs).encode(),
    )
    found = res.out.split("\n")
    if res.returncode != 0 or len(found) < len(revs):
        return  # each is then asked for on its own
    for i, commit in enumerate(commits):
        tree, raw = found[2 * i].strip(), found[2 * i + 1].strip()
        if git.is_object_id(tree):  # the commit exists: whether it has a raw tree is known
            git.note_tree(commit, tree)
            _remember(commit, raw if git.is_object_id(raw) else None)


def raw_entries(repo: Path | str, raw_tree: str | None) -> dict[str, tuple[str, str]]:
    """path -> (mode, blob) of a raw tree: its regular files (a raw tree recorded before
    a fix may hold another kind of entry where a file became a nested repository)."""
    if raw_tree is None:
        return {}
    out = git.git(repo, "ls-tree", "-r", "-z", raw_tree).stdout
    entries: dict[str, tuple[str, str]] = {}
    for item in out.split(b"\0"):
        if item:
            meta, _, path = item.partition(b"\t")
            mode, _type, sha = meta.decode().split()
            if mode in _REGULAR:
                entries[path.decode("utf-8", "surrogateescape")] = (mode, sha)
    return entries


def raw_parent_made_of(worktree: Path, tree: str, sources: Sequence[str]) -> str | None:
    """The raw parent of a snapshot whose ``tree`` bar made of entries of the snapshots
    ``sources`` rather than read from the worktree (a step's tree with the saves made
    after its start taken out: ``bar.step.interrupted``): each file's raw bytes are
    those of the first source whose tree holds the same entry there. None where none of
    them has a raw parent (git converts nothing: nor does the made one need one)."""
    raws = [raw_tree_of(worktree, source) for source in sources]
    if all(raw is None for raw in raws):
        return None
    pending = raw_entries(worktree, tree)  # (the made tree's regular files)
    entries: dict[str, tuple[str, str]] = {}
    for source, raw in zip(sources, raws, strict=True):
        held = raw_entries(worktree, f"{source}^{{tree}}")
        own = raw_entries(worktree, raw)
        for path, entry in list(pending.items()):
            if held.get(path) == entry:
                if path in own:
                    entries[path] = own[path]
                del pending[path]
    recorded = (recorded_checkout(worktree, source) for source in sources)
    checkout = next((c for c in recorded if c is not None), None) or checkout_config(worktree)
    return raw_parent(worktree, entries, checkout)


def _checked_out(worktree: Path, index: Path, paths: list[str]) -> dict[str, bytes | None]:
    """What git's checkout of the side ``index`` would write for each path (None: not a
    regular file there). git writes them into a scratch directory (``cat-file --batch
    --filters`` would be one process, but git 2.39 gives the unconverted size in its
    header)."""
    import tempfile

    found: dict[str, bytes | None] = {}
    with tempfile.TemporaryDirectory(prefix="bar-checkout-", dir=index.parent) as tmp:
        git.git(
            worktree,
            "checkout-index",
            "-f",
            "-z",
            "--stdin",
            f"--prefix={tmp}/",
            env=without_smudge(worktree, git.index_env(index)),
            check=False,
            input=b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in paths),
        )
        base = os.fsencode(tmp) + b"/"
        for p in paths:
            full = base + p.encode("utf-8", "surrogateescape")
            if os.path.islink(full) or not os.path.isfile(full):
                found[p] = None
                continue
            with open(full, "rb") as f:
                found[p] = f.read()
    return found


def without_smudge(worktree: Path, env: Mapping[str, str]) -> dict[str, str]:
    """``env`` (an index's: ``git.index_env``) for a checkout that runs no filter: every
    filter driver the configuration seen from ``worktree`` names gets no smudge and no
    process command, as ``bar.git.safe`` does for apply. A checkout writes the blob
    (line endings converted); where the bytes on disk were other, the raw tree holds
    them (``raw_differences``), so a clean and a smudge that are not each other's
    inverse change no byte, and no program planted in the shared configuration runs."""
    said = git.git(
        worktree, "config", "-z", "--name-only", "--get-regexp", r"^filter\.", check=False
    )
    named: dict[str, set[str]] = {}
    for key in said.stdout.split(b"\0"):
        name, _, var = key.decode("utf-8", "surrogateescape")[len("filter.") :].rpartition(".")
        if name:
            named.setdefault(name, set()).add(var)
    off: dict[str, str] = {}
    for name, has in named.items():
        # (a process switched off only where there is one: an empty one is a driver
        # still, and the checkout's own check of the files it replaces would no longer
        # clean them)
        off[f"filter.{name}.smudge"] = ""
        if "process" in has:
            off[f"filter.{name}.process"] = ""
            off[f"filter.{name}.required"] = "false"
    return with_config(env, off)


def unfiltered(worktree: Path, paths: list[str]) -> list[str]:
    """``paths`` without those a ``filter`` attribute names: their conversion is a
    program's (LFS, or one planted in the shared config), which bar never runs, so
    ``bar verify`` cannot say what a checkout of them would write."""
    if not paths:
        return []
    out = git.git(
        worktree,
        "check-attr",
        "-z",
        "--stdin",
        "filter",
        input=b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in paths),
    ).stdout
    fields = out.split(b"\0")
    filtered = {
        fields[i].decode("utf-8", "surrogateescape")
        for i in range(0, len(fields) - 2, 3)
        if fields[i + 2] not in (b"unspecified", b"unset")
    }
    return [p for p in paths if p not in filtered]


def raw_differences(
    worktree: Path, index: Path, paths: Iterable[str]
) -> tuple[dict[str, str], set[str]]:
    """Among ``paths``, the regular files of the side ``index`` whose bytes on disk differ
    from git's checkout of them: path -> the blob of the bytes on disk (written to the
    store), each file read once, and those bytes stored. And the files that changed
    since git added them (``_changed_since_added``): their bytes are not what git
    hashed, so they are no raw bytes of the tree the index holds (a save in place racing
    the look: the next look hashes them again, ``racy.add``)."""
    candidates = sorted({p for p in paths if p})
    if not candidates:
        return {}, set()
    expected = _checked_out(worktree, index, candidates)
    differ: dict[str, bytes] = {}
    moved: set[str] = set()
    seen: dict[str, os.stat_result] = {}
    for p in candidates:
        want = expected.get(p)
        if want is None:
            continue
        # (never through a link: the step may swap a directory for one at any time)
        read = _read_once(worktree, p)
        if read is None:
            continue
        have, st = read
        if st is None:
            moved.add(p)  # (written while read)
        elif have != want:
            differ[p], seen[p] = have, st
    moved |= _changed_since_added(worktree, index, seen)
    for p in moved:
        differ.pop(p, None)
    if moved:
        racy.add(index, sorted(moved))
    return _store(worktree, index, differ), moved


def _read_once(worktree: Path, rel: str) -> tuple[bytes, os.stat_result | None] | None:
    """The bytes of the regular file ``rel`` (None: no such file, or behind a link) and
    its stat as they were read: None where it changed while read."""
    fd = open_beneath(worktree, worktree / rel)
    if fd is None:
        return None
    try:
        before = os.fstat(fd)
        chunks = []
        at = 0
        while chunk := os.pread(fd, 1 << 20, at):
            chunks.append(chunk)
            at += len(chunk)
        after = os.fstat(fd)
    except OSError:
        return None
    finally:
        os.close(fd)
    same = _stat_key(before) == _stat_key(after)
    return b"".join(chunks), before if same else None


def _stat_key(st: os.stat_result) -> tuple[int, ...]:
    """What git notes of a file's stat in an index entry (its 32-bit fields)."""
    return (
        st.st_ctime_ns // 1_000_000_000,
        st.st_ctime_ns % 1_000_000_000,
        st.st_mtime_ns // 1_000_000_000,
        st.st_mtime_ns % 1_000_000_000,
        st.st_ino & 0xFFFFFFFF,
        st.st_size & 0xFFFFFFFF,
    )


def _changed_since_added(
    worktree: Path, index: Path, seen: Mapping[str, os.stat_result]
) -> set[str]:
    """Of the files read (``seen``: path -> the stat they were read with), those whose
    stat is not the one git noted in ``index`` when it added them: changed since (or
    while) git read them."""
    if not seen:
        return set()
    noted = racy.noted_stats(worktree, index, sorted(seen) if len(seen) <= 500 else None)
    return {p for p, st in seen.items() if noted.get(p) != _stat_key(st)}


def _store(worktree: Path, index: Path, files: Mapping[str, bytes]) -> dict[str, str]:
    """Write ``files``' bytes (path -> bytes) to the store as they are: path -> blob."""
    if not files:
        return {}
    import tempfile

    shas: list[str] = []
    order = sorted(files)
    with tempfile.TemporaryDirectory(prefix="bar-raw-", dir=index.parent) as tmp:
        names = []
        for n, p in enumerate(order):
            name = os.path.join(tmp, str(n))
            with open(name, "wb") as f:
                f.write(files[p])
            names.append(name)
        said = git.git(
            worktree,
            "hash-object",
            "-w",
            "--no-filters",
            "--stdin-paths",
            input="".join(n + "\n" for n in names).encode(),
        )
        shas = said.out.split()
    return dict(zip(order, shas, strict=True))


def raw_parent(
    worktree: Path, entries: dict[str, tuple[str, str]], checkout: Mapping[str, str]
) -> str:
    """A parentless commit whose tree holds ``entries`` (maybe none), its message naming
    the ``checkout`` configuration (``checkout_config``) the bytes of the files it does
    not hold are git's checkout by (``recorded_checkout``)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="bar-raw-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        info = b"".join(
            f"{mode} {sha}\t".encode() + p.encode("utf-8", "surrogateescape") + b"\0"
            for p, (mode, sha) in sorted(entries.items())
        )
        git.git(worktree, "update-index", "-z", "--index-info", env=env, input=info)
        tree = git.out(worktree, "write-tree", env=env)
    named = "".join(f"{key}={value}\n" for key, value in sorted(checkout.items()))
    return git.commit_tree(worktree, tree, [], f"{_RAW_MESSAGE}\n\n{named}", identity=BAR_IDENTITY)


def next_entries(
    worktree: Path,
    index: Path,
    tree_modes: dict[str, str],
    before: dict[str, tuple[str, str]],
    candidates: Iterable[str],
    changed: Iterable[str] = (),
) -> dict[str, tuple[str, str]]:
    """The raw entries of a new snapshot (the tree the side ``index`` holds, whose files'
    modes are ``tree_modes``): the previous ones still holding for paths that did not
    change, plus the differences among ``candidates``. ``changed``: the paths whose tree
    entries differ from the state before's."""
    changed = set(changed)
    candidates = set(candidates)
    entries = {
        p: e for p, e in before.items() if p not in candidates and tree_modes.get(p) in _REGULAR
    }
    files = [p for p in candidates if tree_modes.get(p) in _REGULAR]
    found, moved = raw_differences(worktree, index, files)
    for p, sha in found.items():
        entries[p] = (tree_modes.get(p, "100644"), sha)
    for p in moved:
        # (changed since git added it: where the tree holds what the state before did
        # there, that state's raw bytes still stand for it; the next look hashes it again)
        if p not in changed and p in before and tree_modes.get(p) in _REGULAR:
            entries[p] = before[p]
    return entries


def stage_exact(
    worktree: Path,
    index: Path,
    staging: Path,
    files: Sequence[str],
    raw: Mapping[str, tuple[str, str]],
    checkout: Mapping[str, str] | None,
) -> None:
    """Give the files git's checkout of the side ``index`` wrote into ``staging`` (a
    directory of bar's, laid out as the worktree) the exact bytes of the state they are
    written for: its raw bytes (``raw``: path -> (mode, blob)) where it has them, else
    git's checkout by the ``checkout`` configuration the state was recorded with
    (``recorded_checkout``; None: the configuration of now, as staged). Nothing here
    writes the worktree: the caller moves each staged file in, compared before replaced
    (``bar.changes.guarded``)."""
    again = [p for p in files if p not in raw] if checkout is not None else []
    if again:
        git.git(
            worktree,
            "checkout-index",
            "-f",
            "-z",
            "--stdin",
            f"--prefix={staging}/",
            env=without_smudge(worktree, with_config(git.index_env(index), checkout or {})),
            input=b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in again),
            check=False,
        )
    for p in files:
        if p in raw:
            _write_staged(staging / p, git.git(worktree, "cat-file", "blob", raw[p][1]).stdout)


def _write_staged(path: Path, data: bytes) -> None:
    """Give the staged regular file ``path`` the bytes ``data`` (its mode kept)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return  # (git staged no file there: nothing is written for it)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
