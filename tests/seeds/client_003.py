"""A client of aide decide's storage, written from its design document alone
(reference 003, ``aide-program/docs/commands/decide/storage.md``), as a user of aide
would write one: nothing of bar in it.

It is the document's ``DecideStorage`` (§7) over ``.aide/decisions/`` in the project's
root (§1.1), with the document's operations: what aide's CLI does (``save_pending``,
§3.1; ``result``, §3.3) and what aide's web server does (``load_pending`` to show the
questions, ``save_result`` to keep the person's answer, §3.2), each file written
atomically through ``{path}.tmp`` (§4.1), JSON indented by 2 (§4.3), and the document's
errors (§6).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from pathlib import Path
from typing import Any

# §2.2: session ids name the history files; §2.1: created_at is ISO 8601
SESSION_ID = re.compile(r"^\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d$")
ISO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d([+-]\d\d:\d\d|Z)$")


class DecideError(Exception):
    """One of the document's errors (§6), in its words."""


def find_root(start: Path) -> Path:
    """The project root: the nearest directory at or above ``start`` holding ``.aide/``
    (§1.1: everything is kept under the project root's ``.aide/decisions/``)."""
    for folder in (start, *start.parents):
        if (folder / ".aide").is_dir():
            return folder
    raise DecideError(".aide 目录不存在，请先执行 aide init")


class DecideStorage:
    """§7: the storage of pending items and decision records."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.decisions_dir = root / ".aide" / "decisions"
        self.pending_path = self.decisions_dir / "pending.json"
        self._ensure_dir()

    # --- §7's methods ---------------------------------------------------------------

    def save_pending(self, data: dict[str, Any]) -> str:
        """§3.1: a session id, ``_meta`` added, ``pending.json`` written atomically."""
        now = dt.datetime.now().astimezone().replace(microsecond=0)
        session_id = now.strftime("%Y-%m-%dT%H-%M-%S")
        meta = {"created_at": now.isoformat(), "session_id": session_id}
        self._save_atomic(self.pending_path, {**data, "_meta": meta})
        return session_id

    def load_pending(self) -> dict[str, Any] | None:
        return self._load_json(self.pending_path)

    def get_session_id(self) -> str | None:
        pending = self.load_pending()
        if pending is None:
            return None
        meta = pending.get("_meta") or {}
        session_id = meta.get("session_id")
        return session_id if isinstance(session_id, str) else None

    def save_result(self, output: dict[str, Any]) -> None:
        """§3.2, what the web server does with the person's answer: read pending.json
        for the input and the session id, build the DecisionRecord, write
        ``{session_id}.json`` atomically."""
        pending = self.load_pending()
        if pending is None:
            raise DecideError("未找到待定项数据，请先执行 aide decide '<json>'")
        session_id = self.get_session_id()
        if session_id is None:
            raise DecideError("无法解析 pending.json: 没有 _meta.session_id")
        record = {
            "input": pending,  # a DecideInput; §7 lets it carry its _meta
            "output": output,
            "completed_at": dt.datetime.now().astimezone().replace(microsecond=0).isoformat(),
        }
        self._save_atomic(self.decisions_dir / f"{session_id}.json", record)

    def load_result(self) -> dict[str, Any] | None:
        session_id = self.get_session_id()
        if session_id is None:
            return None
        record = self._load_json(self.decisions_dir / f"{session_id}.json")
        if record is None:
            return None
        output = record.get("output")
        return output if isinstance(output, dict) else None

    def has_pending(self) -> bool:
        return self.pending_path.is_file()

    def has_result(self) -> bool:
        session_id = self.get_session_id()
        return session_id is not None and (self.decisions_dir / f"{session_id}.json").is_file()

    # --- §3.3: what `aide decide result` does ---------------------------------------

    def result(self) -> list[dict[str, Any]]:
        """``output.decisions`` of the record that pending.json's session names, or the
        document's error."""
        if not self.has_pending():
            raise DecideError("未找到待定项数据，请先执行 aide decide '<json>'")
        session_id = self.get_session_id()
        record = self._load_json(self.decisions_dir / f"{session_id}.json")
        if record is None:
            raise DecideError("尚无决策结果，请等待用户完成操作")
        decisions = record["output"]["decisions"]
        assert isinstance(decisions, list)
        return decisions

    def history(self) -> list[str]:
        """The session ids of the history records (§2.2), oldest first."""
        return sorted(
            p.stem
            for p in self.decisions_dir.glob("*.json")
            if p.name != "pending.json" and SESSION_ID.match(p.stem)
        )

    # --- the document's checks of what it reads (§2, §7's types) --------------------

    def check_pending(self, pending: dict[str, Any]) -> None:
        """What a front end relies on before it shows the questions."""
        assert isinstance(pending["task"], str) and isinstance(pending["source"], str)
        assert isinstance(pending["items"], list) and pending["items"]
        for item in pending["items"]:
            assert isinstance(item["id"], int) and isinstance(item["title"], str)
            assert len(item["options"]) >= 2
            for option in item["options"]:
                assert isinstance(option["value"], str) and isinstance(option["label"], str)
        meta = pending["_meta"]
        assert SESSION_ID.match(meta["session_id"]), meta
        assert ISO_TIME.match(meta["created_at"]), meta

    def check_record(self, record: dict[str, Any]) -> None:
        """§2.2's DecisionRecord."""
        assert set(record) == {"input", "output", "completed_at"}, sorted(record)
        assert ISO_TIME.match(record["completed_at"]), record["completed_at"]
        for decision in record["output"]["decisions"]:
            assert set(decision) <= {"id", "chosen", "note"}, decision

    # --- §4, §5.3 ---------------------------------------------------------------------

    def _ensure_dir(self) -> None:
        if not (self.root / ".aide").is_dir():
            raise DecideError(".aide 目录不存在，请先执行 aide init")
        self.decisions_dir.mkdir(exist_ok=True)

    def _save_atomic(self, path: Path, data: dict[str, Any]) -> None:
        temporary = path.with_name(path.name + ".tmp")
        with open(temporary, "w", encoding="utf-8", newline="\n") as f:
            f.write(json.dumps(data, ensure_ascii=False, indent=2))
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)

    def _load_json(self, path: Path) -> dict[str, Any] | None:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise DecideError(f"无法解析 {path.name}: {exc}") from None
        return data if isinstance(data, dict) else None
