"""``bar ui [--port N] [--no-open] [--host ADDR]``: the review page in the browser."""

from __future__ import annotations


def ui(*, port: int, no_open: bool, host: str) -> int:
    # the web server and its framework load only here: no other command pays for them
    from bar.ui.server import serve

    return serve(host=host, port=port, open_browser=not no_open)
