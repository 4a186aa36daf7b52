"""The files the page loads: ours (``static/``) and the browser libraries copied into
``static/vendor`` by ``make ui-assets`` (never from a CDN: the page works offline)."""

from __future__ import annotations

from pathlib import Path

STATIC = Path(__file__).resolve().parent / "static"
VENDOR = STATIC / "vendor"
SCRIPTS = ("diff2html-ui-slim.min.js", "asciinema-player.min.js", "ansi_up.js")
STYLES = ("github.min.css", "diff2html.min.css", "asciinema-player.css")


def present() -> bool:
    """Whether every library file is there (else the page falls back to plain text)."""
    return all((VENDOR / name).is_file() for name in (*SCRIPTS, *STYLES))
