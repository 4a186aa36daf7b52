"""The remote a history goes to or comes from, and git's network commands.

A remote is named as git knows it (``origin``) or given as a URL (``share.remote`` may name
a separate repository, for teams that keep agents' records out of the code's). bar's
git runs no hooks (``bar.git.NO_PROGRAMS``), so its own push never starts the pre-push
hook that called it. Credentials are git's business: its credential helpers and ssh agent
work as for any push; without a terminal, git is told not to prompt.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from pathlib import Path

from bar import git
from bar.base.proc import Result
from bar.base.record import record
from bar.errors import BarError, UsageError
from bar.model.project import Project

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@record(frozen=True)
class Remote:
    name: str  # as given (a remote's name, or the URL)
    url: str
    key: str  # a ref-safe name: refs/bar/fetched/<task>/<key>

    def __str__(self) -> str:
        return self.name


def resolve(project: Project, given: str | None) -> Remote:
    """``given``, else ``share.remote``, else ``origin``; a name git knows or a URL."""
    name = given or project.config.share.remote or "origin"
    if name.startswith("-"):
        raise UsageError(
            f"{name!r} is not a remote", hint="name a remote (git remote -v) or give a URL"
        )
    repo = project.root
    url = git.git(repo, "config", "--get", f"remote.{name}.url", check=False).out.strip()
    if url:
        key = name if _NAME.match(name) and not name.endswith(".lock") else _hashed(url)
        return Remote(name, url, key)
    if _looks_like_url(name):
        return Remote(name, name, _hashed(name))
    if name.startswith(("/", "./", "../", "~")):
        raise UsageError(
            f"no repository at {name}",
            hint=f"make one with `git init --bare {name}`, or give a remote's name or a URL",
        )
    known = git.git(repo, "remote", check=False).out.split()
    raise UsageError(
        f"no remote named {name!r} in {repo}",
        hint=(f"known remotes: {', '.join(known)}; " if known else "")
        + "give a remote's name or a repository URL, or set share.remote in config.yaml",
    )


def _looks_like_url(value: str) -> bool:
    return "://" in value or (":" in value and not value.startswith("/")) or os.path.isdir(value)


def _hashed(url: str) -> str:
    return "url-" + hashlib.sha256(url.encode()).hexdigest()[:12]


def _env() -> dict[str, str]:
    return {} if sys.stdin.isatty() else {"GIT_TERMINAL_PROMPT": "0"}


# a remote's URL runs no program of its choosing: `ext::` transports stay off whatever
# the configuration says (git's default too), and so does an upload or receive program
# named by a remote's settings
_SAFE = ("-c", "protocol.ext.allow=never", "-c", "protocol.fd.allow=never")


def _failed(what: str, remote: Remote, result: Result) -> BarError:
    said = result.err.strip().splitlines()
    return BarError(
        f"{what} {remote.url} failed: {said[-1] if said else f'git exited {result.returncode}'}",
        hint="check the remote's URL and your access to it (`git ls-remote " + remote.name + "`)",
    )


def listed(repo: Path, remote: Remote, patterns: list[str]) -> dict[str, str]:
    """The remote's refs matching ``patterns``: name -> object id (one round trip)."""
    said = git.git(
        repo,
        *_SAFE,
        "ls-remote",
        "--refs",
        remote.url,
        *patterns,
        env=_env(),
        check=False,
        network=True,
    )
    if said.returncode != 0:
        raise _failed("reading", remote, said)
    refs = {}
    for line in said.out.splitlines():
        sha, _, name = line.partition("\t")
        if git.is_object_id(sha):
            refs[name] = sha
    return refs


def present(repo: Path, shas: list[str]) -> list[str]:
    """Those of ``shas`` this repository has."""
    if not shas:
        return []
    said = git.git(
        repo,
        "cat-file",
        "--batch-check=%(objectname) %(objecttype)",
        input="".join(f"{s}\n" for s in shas).encode(),
        check=False,
    ).out
    return [line.split()[0] for line in said.splitlines() if not line.endswith("missing")]


@record(frozen=True)
class RefResult:
    ref: str
    ok: bool
    summary: str  # git's (``[rejected] (non-fast-forward)`` and so on)


def push(repo: Path, remote: Remote, refspecs: list[str]) -> list[RefResult]:
    """Push ``refspecs`` (never forced), one git push; each ref's outcome."""
    said = git.git(
        repo,
        *_SAFE,
        "push",
        "--porcelain",
        "--no-verify",
        remote.url,
        *refspecs,
        env=_env(),
        check=False,
        network=True,
    )
    results = []
    for line in said.out.splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and len(parts[0]) == 1:
            flag, spec, summary = parts[0], parts[1], parts[2]
            results.append(RefResult(spec.split(":", 1)[-1], flag in " +*=", summary))
    if not results and said.returncode != 0:
        raise _failed("pushing to", remote, said)
    return results


def fetch(repo: Path, remote: Remote, refspecs: list[str]) -> None:
    said = git.git(
        repo,
        *_SAFE,
        "fetch",
        "--no-tags",
        "--no-write-fetch-head",
        "--quiet",
        remote.url,
        *refspecs,
        env=_env(),
        check=False,
        network=True,
    )
    if said.returncode != 0:
        raise _failed("fetching from", remote, said)
