"""Who may talk to ``bar ui``: the one browser that opened the URL it printed.

The server listens on the loopback interface only (by default), but any local process and
any web page the developer visits can reach a loopback port, so every request is checked
here before a route sees it:

- **Host**: the ``Host`` header must name the address bound (``127.0.0.1:PORT``) or
  ``localhost:PORT``. A page of another site that re-points its own name at 127.0.0.1
  (DNS rebinding) sends its own name, and is refused.
- **Token**: a secret made at each launch (``secrets.token_urlsafe``) is in the URL printed.
  The first request carries it as ``?token=``; the answer sets it as an
  HttpOnly, SameSite=Strict cookie (named after the port: cookies ignore ports) and
  redirects to the same URL without it, so it stays out of the address bar and history.
  The browser bar opens gets it another way: never in a command line (any process of
  the developer's could read it there), but in a page only the developer can read
  (``launch_page``, in ``$BAR_HOME/ui``, hidden from steps), which posts it to
  ``/launch``. Any other request without the cookie is refused (403, nothing rendered).
- **Steps**: a connection made from inside a running step (``bar.api.from_a_running_step``) is
  refused, token or not: a step never acts through the review it is reviewed in.
- **Actions**: every change is a POST carrying a second per-launch secret, the CSRF token
  the server put in the page (a form field or the ``X-Bar-CSRF`` header), and whose
  ``Origin`` (when the browser sends one, as browsers do on POST) is this server.
  Nothing changes on a GET. No CORS header is ever sent.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable, Sequence
from http.cookies import SimpleCookie
from urllib.parse import parse_qsl, urlencode

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bar import api

CSRF_HEADER = "x-bar-csrf"
CSRF_FIELD = "csrf"
# what every answer carries: no framing, no sniffing, no referrer to other sites, nothing
# cached, and scripts only from this server (the terminal player compiles WebAssembly)
SECURITY_HEADERS: list[tuple[bytes, bytes]] = [
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),  # "no-referrer" makes a form's Origin "null"
    (b"cache-control", b"no-store"),
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; "
        b"style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; "
        b"frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    ),
]


class Secrets:
    """The two secrets of one launch and the addresses the server answers to."""

    def __init__(self, host: str, port: int) -> None:
        self.token = secrets.token_urlsafe(32)
        self.csrf = secrets.token_urlsafe(32)
        self.host = host
        self.port = port
        self.on_launch: list[Callable[[], None]] = []  # (once the launch page was used)

    def launched(self) -> None:
        for then in self.on_launch:
            then()

    @property
    def cookie_name(self) -> str:
        return f"bar_ui_{self.port}"

    def bind(self, port: int) -> None:
        """The port the system picked (``--port 0``)."""
        self.port = port

    def allowed_hosts(self) -> set[str]:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return {f"{host}:{self.port}", f"localhost:{self.port}"}

    def origins(self) -> set[str]:
        return {f"http://{h}" for h in self.allowed_hosts()}

    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/?token={self.token}"

    def launch_page(self) -> str:
        """A page that posts the token to ``/launch``, for the browser bar opens."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return (
            "<!doctype html><meta charset=utf-8><title>bar ui</title>"
            f'<form method=post action="http://{host}:{self.port}/launch">'
            f'<input type=hidden name=token value="{self.token}">'
            "<noscript><button>Open bar ui</button></noscript></form>"
            "<script>document.forms[0].submit()</script>\n"
        )

    def token_ok(self, value: str | None) -> bool:
        return value is not None and hmac.compare_digest(value.encode(), self.token.encode())

    def csrf_ok(self, value: str | None) -> bool:
        return value is not None and hmac.compare_digest(value.encode(), self.csrf.encode())


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


def _cookie(headers: dict[str, str], name: str) -> str | None:
    jar = SimpleCookie()
    try:
        jar.load(headers.get("cookie", ""))
    except Exception:  # a garbled Cookie header is no cookie
        return None
    morsel = jar.get(name)
    return morsel.value if morsel is not None else None


async def _plain(
    send: Send, status: int, text: str, extra: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    body = text.encode()
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        *SECURITY_HEADERS,
        *extra,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class Guard:
    """ASGI middleware: the Host, token and CSRF checks above, then the app."""

    def __init__(self, app: ASGIApp, keys: Secrets) -> None:
        self.app = app
        self.keys = keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        if headers.get("host", "") not in self.keys.allowed_hosts():
            await _plain(send, 403, "bar ui: this address is not the one bar ui serves\n")
            return
        client, server = scope.get("client"), scope.get("server")
        if client and server and api.from_a_running_step(client[1], server[1]):
            await _plain(send, 403, "bar ui: a request from inside a running bar step is refused\n")
            return
        if scope.get("path") == "/launch" and scope["method"] == "POST":
            await self._launch(receive, send)
            return
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if "token" in query:
            if not self.keys.token_ok(query["token"]):
                await _plain(send, 403, "bar ui: the token is wrong; use the URL bar ui printed\n")
                return
            await self._welcome(scope, send, query)
            return
        if not self.keys.token_ok(_cookie(headers, self.keys.cookie_name)):
            await _plain(send, 403, "bar ui: open the URL bar ui printed (it carries the token)\n")
            return
        if scope["method"] not in ("GET", "HEAD"):
            origin = headers.get("origin")
            if origin is not None and origin not in self.keys.origins():
                await _plain(send, 403, "bar ui: a request from another site is refused\n")
                return
            if scope["method"] != "POST":
                await _plain(send, 405, "bar ui: only GET and POST are served\n")
                return
            await self._checked_post(scope, headers, receive, send)
            return
        await self.app(scope, receive, self._with_headers(send))

    async def _launch(self, receive: Receive, send: Send) -> None:
        """The launch page's post: the token for the cookie, and on to the overview (by
        a page of this server's own, so the cookie goes with it)."""
        body = b""
        while len(body) < 4096:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        token = dict(parse_qsl(body.decode("latin-1"))).get("token")
        if not self.keys.token_ok(token):
            await _plain(send, 403, "bar ui: the token is wrong; use the URL bar ui printed\n")
            return
        self.keys.launched()
        page = b'<!doctype html><meta http-equiv="refresh" content="0;url=/"><a href="/">bar ui</a>'
        cookie = f"{self.keys.cookie_name}={self.keys.token}; Path=/; HttpOnly; SameSite=Strict"
        headers = [
            (b"content-type", b"text/html; charset=utf-8"),
            (b"content-length", str(len(page)).encode()),
            *SECURITY_HEADERS,
            (b"set-cookie", cookie.encode()),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": page})

    async def _welcome(self, scope: Scope, send: Send, query: dict[str, str]) -> None:
        """Trade the token in the URL for a cookie, and send the browser back without it."""
        rest = urlencode({k: v for k, v in query.items() if k != "token"})
        location = scope.get("path", "/") + (f"?{rest}" if rest else "")
        cookie = f"{self.keys.cookie_name}={self.keys.token}; Path=/; HttpOnly; SameSite=Strict"
        await _plain(
            send,
            303,
            "",
            [
                (b"location", location.encode("latin-1", "replace")),
                (b"set-cookie", cookie.encode()),
            ],
        )

    async def _checked_post(
        self, scope: Scope, headers: dict[str, str], receive: Receive, send: Send
    ) -> None:
        """Read the whole body (actions are small forms), check the CSRF token in it or in
        the header, and only then hand the body on to the app."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > 1 << 20:
                await _plain(send, 413, "bar ui: the request is too large\n")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        given = headers.get(CSRF_HEADER)
        if given is None and headers.get("content-type", "").startswith(
            "application/x-www-form-urlencoded"
        ):
            given = dict(parse_qsl(body.decode("utf-8", "replace"))).get(CSRF_FIELD)
        if not self.keys.csrf_ok(given):
            await _plain(
                send,
                403,
                "bar ui: the request lacks this page's CSRF token; reload the page and try again\n",
            )
            return
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, self._with_headers(send))

    def _with_headers(self, send: Send) -> Send:
        async def wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *SECURITY_HEADERS]}
            await send(message)

        return wrapped
