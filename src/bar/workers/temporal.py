"""The one door to Temporal: which server, the client, and the SDK's quirks.

``temporalio`` is the optional extra ``bar[workers]``; it is imported here, by the
commands that talk to a server, and nowhere on the local path.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bar.base.record import field, record
from bar.errors import ConfigError, Unreachable
from bar.model.config import address

if TYPE_CHECKING:
    from temporalio.client import Client

    from bar.model.project import Project

ENV = "BAR_TEMPORAL"
# where the API key of a server that asks for one is read (Temporal Cloud): bar's own
# name first, then the one Temporal's CLI reads; never from a file that may be shared
API_KEY_VARS = ("BAR_TEMPORAL_API_KEY", "TEMPORAL_API_KEY")


@record(frozen=True)
class Access:
    """How this machine reaches its server: plain, or over TLS with the server checked
    against ``ca`` (else the system's roots), this machine's certificate for mTLS, and
    an API key (sent as a bearer token; it turns TLS on unless ``tls`` is false)."""

    tls: bool = False
    ca: Path | None = None
    cert: Path | None = None
    key: Path | None = None
    server_name: str | None = None
    api_key: str | None = field(default=None, repr=False)

    def describe(self) -> str:
        """In words, for what a command says (never the key)."""
        if not self.tls:
            return "plain"
        said = ["TLS"]
        if self.cert is not None:
            said.append("client certificate")
        if self.api_key:
            said.append("API key")
        return " + ".join(said)


def access_of(project: Project | None) -> Access:
    """``workers.tls*`` of config.yaml and the API key of the environment."""
    api_key = next((os.environ[v] for v in API_KEY_VARS if os.environ.get(v)), None)
    if project is None:
        return Access(tls=bool(api_key), api_key=api_key)
    w = project.config.workers
    named = any(x is not None for x in (w.tls_ca, w.tls_cert, w.tls_key, w.tls_server_name))
    tls = w.tls if w.tls is not None else bool(named or api_key)
    return Access(
        tls=tls,
        ca=_path(w.tls_ca),
        cert=_path(w.tls_cert),
        key=_path(w.tls_key),
        server_name=w.tls_server_name,
        api_key=api_key,
    )


def _path(value: str | None) -> Path | None:
    """A setting's file (absolute, or in ``~``: the home the sandbox hides it in too)."""
    if not value:
        return None
    from bar.store.layout import home_dir

    return home_dir() / value[2:] if value.startswith("~/") else Path(value)


def _tls(access: Access) -> Any:
    """The SDK's TLS setting: False, True (the system's roots), or a ``TLSConfig`` with
    the PEM files read now (a file that cannot be read is said by its setting's name)."""
    if not access.tls:
        return False
    if access.ca is None and access.cert is None and access.server_name is None:
        return True
    from temporalio.service import TLSConfig

    def pem(path: Path | None, setting: str) -> bytes | None:
        if path is None:
            return None
        try:
            return path.read_bytes()
        except OSError as exc:
            raise ConfigError(
                f"workers.{setting} names {path}, which cannot be read ({exc.strerror})"
            ) from None

    return TLSConfig(
        server_root_ca_cert=pem(access.ca, "tls_ca"),
        client_cert=pem(access.cert, "tls_cert"),
        client_private_key=pem(access.key, "tls_key"),
        domain=access.server_name,
    )


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
        from bar.workers import extra

        raise Unreachable(
            "running steps on workers needs Temporal's client (the temporalio SDK of bar's "
            "workers extra), which is not installed",
            hint=f"install it for this bar: {extra.install_command(extra.SDK, extra.CLI)}",
        ) from None


async def connect(server: str, namespace: str, access: Access) -> Client:
    require_sdk()
    from temporalio.client import Client

    tls = _tls(access)
    try:
        return await asyncio.wait_for(
            Client.connect(
                server,
                namespace=namespace,
                identity=identity(),
                tls=tls,
                api_key=access.api_key,
            ),
            timeout=5,
        )
    except (TimeoutError, RuntimeError, OSError) as exc:
        said = _refused(exc, access)
        if said is not None:
            raise Unreachable(
                f"the Temporal server at {server} did not let this machine in: {said}",
                hint="workers.tls, tls_ca, tls_cert, tls_key and tls_server_name in "
                "config.yaml, and TEMPORAL_API_KEY in the environment, say how this machine "
                "reaches it (docs/workers.md)",
            ) from None
        raise Unreachable(
            f"no Temporal server answers at {server} ({_short(exc)})",
            hint=_start_one(server),
        ) from None


def _start_one(server: str) -> str:
    """How to get a server to answer at ``server``."""
    host, _, port = server.rpartition(":")
    named = "or name yours with --server HOST:PORT, BAR_TEMPORAL or workers.server in config.yaml"
    if host not in ("127.0.0.1", "localhost"):
        return f"is it up? {named}"
    given = "" if port == "7233" else f" --port {port}"
    return f"start one on this machine, in another terminal: bar worker dev-server{given}; {named}"


def identity() -> str:
    """How this machine's process is named to Temporal (and in ``bar status``)."""
    import socket

    return os.environ.get("BAR_WORKER_NAME") or f"{socket.gethostname()}:{os.getpid()}"


# what rustls and gRPC say when TLS or the credentials fail, in words
_REFUSALS = (
    (
        "UnknownIssuer",
        "its certificate is signed by no authority this machine trusts "
        "(workers.tls_ca names the one that does)",
    ),
    (
        "NotValidForName",
        "its certificate is not for the name dialled "
        "(workers.tls_server_name names the one it is for)",
    ),
    ("InvalidCertificate(Expired", "its certificate has expired"),
    ("InvalidCertificate(NotValidYet", "its certificate is not valid yet (a clock is wrong?)"),
    ("InvalidContentType", "it does not speak TLS (workers.tls: false)"),
    ("CertificateRequired", "it asks for a client certificate (workers.tls_cert, tls_key)"),
    (
        "Unauthenticated",
        "it refused this machine's credentials (TEMPORAL_API_KEY, or the client certificate)",
    ),
    ("PermissionDenied", "its credentials may not use this namespace (workers.namespace)"),
)


def _refused(exc: BaseException, access: Access) -> str | None:
    """Why the server did not let this machine in, when TLS or credentials are why."""
    text = str(exc)
    for needle, said in _REFUSALS:
        if needle in text:
            return said
    if access.tls and access.cert is None and "after connection" in text:
        # TLS 1.3: the handshake ends on this side before the server checks what this
        # side showed; a server that wanted a client certificate then drops the call
        return (
            "it dropped the connection once TLS was set up, as a server that asks for a "
            "client certificate does (workers.tls_cert, tls_key)"
        )
    if not access.tls and "transport error" in text and "broken pipe" in text:
        return (
            "it dropped a plain connection, as a server that asks for TLS does "
            "(workers.tls: true, or its files)"
        )
    return None


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
