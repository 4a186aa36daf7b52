"""``bar ui [--port N] [--no-open] [--host ADDR]``: the review page in the browser."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from bar.cli.parser import Commands


# --- the command line ------------------------------------------------------------------


def options(sub: Commands) -> None:
    """The command line of ``bar ui``: its options and help."""
    from bar.cli.parser import Formatter

    p = sub.add_parser(
        "ui",
        formatter_class=Formatter,
        description="Serve a review page on this machine and open it in the browser: every\n"
        "registered project and its tasks; a task's timeline of steps, checkpoints, policy\n"
        "decisions and hooks, live while a step runs; a step's diff file by file (unified\n"
        "or side by side), its output in colour and its terminal recording played back;\n"
        "the diff between any two states; rollback, undo and apply, each previewed (as\n"
        "--dry-run) before you confirm it.\n\n"
        "It listens on 127.0.0.1 only, and prints a URL carrying a secret made for this\n"
        "launch: only a browser that opened it gets in (see docs/ui.md). It runs until\n"
        "Ctrl-C. Everything it serves comes from bar's package: it works offline.",
        epilog="examples:\n"
        "  bar ui                        on port 8765, and open the browser\n"
        "  bar ui --port 0 --no-open     any free port; print the URL, open nothing\n"
        "  bar ui --port 9000            another port (when 8765 is taken)",
    )
    p.add_argument(
        "--port",
        type=_port,
        default=8765,
        metavar="N",
        help="the port to listen on (default 8765; 0: any free port)",
    )
    p.add_argument("--no-open", action="store_true", help="print the URL but do not open a browser")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        metavar="ADDR",
        help="the address to listen on (default 127.0.0.1, this machine only)",
    )
    p.set_defaults(_run=ui)


def _port(text: str) -> int:
    import argparse

    """A TCP port number, 0 (any free one) to 65535."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number (0 to 65535)")
    return port


# --- the command -----------------------------------------------------------------------


def ui(*, port: int, no_open: bool, host: str) -> int:
    # the web server and its framework load only here: no other command pays for them
    from bar.ui.server import serve

    return serve(host=host, port=port, open_browser=not no_open)
