"""The files the page loads: ours (``static/``) and the browser libraries copied into
``static/vendor`` by ``make ui-assets`` (never from a CDN: the page works offline).

``BAR_UI_ASSETS`` names another directory to take the libraries from (read only here):
a packager who ships them elsewhere points bar at them, and an empty directory shows the
page as it is without them (plain-text diffs and outputs).
"""

from __future__ import annotations

import os
from pathlib import Path

STATIC = Path(__file__).resolve().parent / "static"
SCRIPTS = ("diff2html-ui-slim.min.js", "asciinema-player.min.js", "ansi_up.js")
STYLES = ("github.min.css", "diff2html.min.css", "asciinema-player.css")
OVERRIDE = "BAR_UI_ASSETS"


def vendor() -> Path:
    """The directory the libraries are served from (``/static/vendor``)."""
    given = os.environ.get(OVERRIDE)
    return Path(given).resolve() if given else STATIC / "vendor"


def present() -> bool:
    """Whether every library file is there (else the page falls back to plain text)."""
    where = vendor()
    return all((where / name).is_file() for name in (*SCRIPTS, *STYLES))
