"""Human output: colour only on a terminal (and never with NO_COLOR), JSON for scripts."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

_CODES = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}


def use_color(enabled: bool = True) -> bool:
    return (
        enabled
        and "NO_COLOR" not in os.environ
        and os.environ.get("TERM") != "dumb"
        and sys.stdout.isatty()
    )


class Painter:
    def __init__(self, enabled: bool = True) -> None:
        self.enabled = use_color(enabled)

    def __call__(self, text: str, *styles: str) -> str:
        if not self.enabled or not styles:
            return text
        codes = ";".join(_CODES[s] for s in styles)
        return f"\033[{codes}m{text}\033[0m"


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def short(sha: str | None) -> str:
    return sha[:10] if sha else "-"


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")
