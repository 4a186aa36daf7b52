"""A Temporal frontend behind TLS, as a team's cluster or Temporal Cloud is, for tests.

``temporal server start-dev`` speaks plain gRPC only. ``TlsFront`` listens on a free
port of 127.0.0.1, ends TLS there (HTTP/2 by ALPN, as gRPC asks), optionally requires a
client certificate signed by the test's CA (mTLS), and passes the bytes on to the dev
server: a client that gets through it has done what a real cluster asks. Certificates
are made by ``trustme`` for the test alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import trustme


@dataclass
class Pki:
    """The files a machine names in ``workers.tls_*``."""

    ca: Path
    cert: Path  # a client certificate signed by ``ca``
    key: Path
    authority: trustme.CA


def make_pki(root: Path) -> Pki:
    root.mkdir(parents=True, exist_ok=True)
    authority = trustme.CA()
    ca = root / "ca.pem"
    authority.cert_pem.write_to_path(str(ca))
    client = authority.issue_cert("worker@example.test")
    cert, key = root / "client.pem", root / "client.key"
    for blob in client.cert_chain_pems:
        blob.write_to_path(str(cert), append=True)
    client.private_key_pem.write_to_path(str(key))
    key.chmod(0o600)
    return Pki(ca, cert, key, authority)


class TlsFront:
    """TLS on ``address``, plain to ``upstream`` (``host:port``)."""

    def __init__(self, pki: Pki, upstream: str, *, client_cert: bool = True) -> None:
        self.upstream_host, port = upstream.rsplit(":", 1)
        self.upstream_port = int(port)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        pki.authority.issue_cert("127.0.0.1", "localhost").configure_cert(context)
        if client_cert:
            context.verify_mode = ssl.CERT_REQUIRED
            pki.authority.configure_trust(context)
        context.set_alpn_protocols(["h2"])
        self.context = context
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="tls-front")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._pass, "127.0.0.1", self.port, ssl=self.context)
        )
        self._server = server
        self._ready.set()
        self._loop.run_forever()
        server.close()
        self._loop.run_until_complete(server.wait_closed())

    async def _pass(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(
                self.upstream_host, self.upstream_port
            )
        except OSError:
            writer.close()
            return

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, asyncio.IncompleteReadError, ssl.SSLError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            with contextlib.suppress(OSError, RuntimeError):
                dst.close()

        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))

    def start(self) -> TlsFront:
        # (a client that cannot show what is asked fails its handshake: no traceback)
        self._loop.set_exception_handler(lambda loop, context: None)
        self._thread.start()
        assert self._ready.wait(10), "the TLS front did not start"
        return self

    def stop(self) -> None:
        def end() -> None:
            for task in asyncio.all_tasks(self._loop):
                task.cancel()
            self._loop.call_soon(self._loop.stop)

        self._loop.call_soon_threadsafe(end)
        self._thread.join(timeout=10)


@contextlib.contextmanager
def tls_front(pki: Pki, upstream: str, *, client_cert: bool = True) -> Iterator[TlsFront]:
    front = TlsFront(pki, upstream, client_cert=client_cert).start()
    try:
        yield front
    finally:
        front.stop()
