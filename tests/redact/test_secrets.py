"""Secrets never reach disk, whichever way they enter a step."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import bar, held_bytes, ledger, new_task, set_config, task_dir, walk

# --- policy in bar run --------------------------------------------------------------


def test_secrets_never_reach_disk(
    inited: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    secret_env = "s3cr3t-value-from-the-environment"
    monkeypatch.setenv("MY_API_TOKEN", secret_env)
    set_config(run={"record_env": ["MY_API_TOKEN", "HOME"]})
    t = new_task(capfd)
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    given = "given-with-e-flag-secret"
    script = (
        f"echo token {token}; echo env $MY_API_TOKEN; echo given $DB_PASSWORD >&2; "
        # split the secret across two writes
        f"printf '{secret_env[:10]}'; sleep 0.2; printf '{secret_env[10:]}\\n'"
    )
    res = bar(capfd, "run", "-e", f"DB_PASSWORD={given}", "--", "sh", "-c", script)
    assert res.code == 0
    assert token in res.out  # shown live to the developer ...
    for path in walk(Path(os.environ["BAR_HOME"])):
        data = held_bytes(path)
        if data is not None and path.suffix not in (".pack", ".idx"):
            for secret in (token, secret_env, given):
                assert secret.encode() not in data, f"{secret} leaked into {path}"
    (step,) = ledger(t["id"])
    assert step["env"]["DB_PASSWORD"] == "***" and step["env"]["MY_API_TOKEN"] == "***"
    assert "HOME" in step["env"]
    out = (task_dir(t["id"]) / "artifacts/0001.output").read_text()
    assert "token ***" in out and "given ***" in out


# --- agents -------------------------------------------------------------------------
