"""A scripted stand-in for an AI coding agent, used by `make demo`.

Each turn edits the repository the way an agent would: it changes, adds, deletes and
renames files and talks about it on stdout and stderr.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path


def say(text: str) -> None:
    print(f"agent> {text}", flush=True)
    time.sleep(0.05)


def implement() -> None:
    say("reading shop/cart.py ...")
    cart = Path("shop/cart.py")
    cart.write_text(
        cart.read_text()
        + "\n\ndef apply_discount(total: float, percent: float) -> float:\n"
        + '    """Return the total after taking off ``percent`` per cent."""\n'
        + "    if not 0 <= percent <= 100:\n"
        + '        raise ValueError("percent must be between 0 and 100")\n'
        + "    return round(total * (100 - percent) / 100, 2)\n"
    )
    say("adding tests/test_discount.py")
    Path("tests").mkdir(exist_ok=True)
    Path("tests/test_discount.py").write_text(
        "from shop.cart import apply_discount\n\n\n"
        "def test_ten_percent() -> None:\n"
        "    assert apply_discount(200.0, 10) == 180.0\n"
    )
    say("removing the obsolete shop/legacy.py")
    Path("shop/legacy.py").unlink()
    say("renaming shop/utils.py to shop/helpers.py")
    Path("shop/utils.py").rename("shop/helpers.py")
    print("warning: 1 file renamed; update imports if needed", file=sys.stderr)
    say("done: discount support added")


def overreach() -> None:
    say("tidying up ...")
    Path("README.md").write_text("# shop\n\n(rewritten)\n")
    Path("tests/test_discount.py").unlink()
    say("deleted a test that looked redundant")


TURNS = {"implement": implement, "overreach": overreach}

if __name__ == "__main__":
    TURNS[sys.argv[1]]()
