#!/usr/bin/env python3
"""``claude_answer.py SESSION TEXT``: the ``uuid`` of the first answer holding TEXT in
Claude Code's transcript of SESSION (in ``$CLAUDE_CONFIG_DIR``), what a step passes to
``claude --resume-session-at`` to rewind there. Standard library only."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def answer_uuid(session: str, text: str) -> str:
    home = Path(os.environ["CLAUDE_CONFIG_DIR"])
    for path in sorted(home.glob(f"projects/*/{session}.jsonl")):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            message = rec.get("message") or {}
            if rec.get("type") == "assistant" and text in json.dumps(message.get("content")):
                return str(rec["uuid"])
    raise SystemExit(f"no answer holding {text!r} in session {session}")


if __name__ == "__main__":
    print(answer_uuid(sys.argv[1], sys.argv[2]))
