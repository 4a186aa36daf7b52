"""The settings of workers (docs/workers.md): config.yaml's ``workers`` section, which server a
command talks to, and the words a ``--claim`` command gets."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from bar.errors import BarError, ConfigError, UsageError
from bar.model.config import parse_config
from bar.worker.process import check_queue
from bar.workers import temporal

HERE = Path("config.yaml")


def test_the_defaults_are_a_local_server_and_no_retry() -> None:
    workers = parse_config({"version": 1}, HERE).workers
    assert workers.server == "127.0.0.1:7233"
    assert (workers.namespace, workers.remote, workers.retry) == ("default", None, 0)
    assert (workers.on_stop, workers.heartbeat) == ("finish", 10.0)


def test_every_setting_is_read() -> None:
    got = parse_config(
        {
            "version": 1,
            "workers": {
                "server": "temporal.internal:7233",
                "namespace": "agents",
                "remote": "agent-logs",
                "retry": 2,
                "on_stop": "interrupt",
                "heartbeat": 30,
            },
        },
        HERE,
    ).workers
    assert got.server == "temporal.internal:7233" and got.retry == 2
    assert got.remote == "agent-logs" and got.on_stop == "interrupt" and got.heartbeat == 30.0


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("server", "no-port", "HOST:PORT"),
        ("server", "host:99999", "HOST:PORT"),
        ("server", "-x:1", "HOST:PORT"),
        ("retry", -1, "whole number"),
        ("retry", True, "whole number"),
        ("on_stop", "later", "finish or interrupt"),
        ("heartbeat", 0, "positive number"),
        ("remote", "--upload-pack=x", "git remote"),
        ("nonsense", 1, "unknown key 'workers.nonsense'"),
        ("allow_unconfined", "yes", "true or false"),
        ("tls", "on", "true or false"),
        ("tls_ca", "certs/ca.pem", "absolute path or one in ~"),
        ("tls_server_name", "a name", "host name"),
        ("api_key", "k-123", "a secret does not belong in a file"),
    ],
)
def test_a_bad_setting_is_named(key: str, value: object, said: str) -> None:
    with pytest.raises(ConfigError, match=said):
        parse_config({"version": 1, "workers": {key: value}}, HERE)


def test_the_server_is_the_option_then_the_environment_then_the_config(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("BAR_TEMPORAL", raising=False)
    assert temporal.server_of(None, None) == "127.0.0.1:7233"
    monkeypatch.setenv("BAR_TEMPORAL", "env-host:1234")
    assert temporal.server_of(None, None) == "env-host:1234"
    assert temporal.server_of(None, "opt-host:99") == "opt-host:99"
    monkeypatch.setenv("BAR_TEMPORAL", "not an address")
    with pytest.raises(ConfigError, match="BAR_TEMPORAL"):
        temporal.server_of(None, None)


@pytest.mark.parametrize("bad", ["", "two words", "tab\tq", "x" * 201])
def test_a_queue_name_is_one_printable_word(bad: str) -> None:
    with pytest.raises(UsageError):
        check_queue(bad)
    assert check_queue("gpu-a.1") == "gpu-a.1"


def test_a_claim_command_gets_the_task_s_words() -> None:
    from bar.workers.attempt import claim_command

    task = SimpleNamespace(name="ui-login", id="abcd1234", metadata={"description": "do it"})
    got = claim_command(["sh", "-c", "echo '{description}' > {name}-{id}.txt"], task)  # type: ignore[arg-type]
    assert got == ["sh", "-c", "echo 'do it' > ui-login-abcd1234.txt"]
    plain = SimpleNamespace(name="x", id="y", metadata={})
    assert claim_command(["{description}"], plain) == ["x"]  # type: ignore[arg-type]


def test_tls_settings_are_read_and_turn_tls_on(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in temporal.API_KEY_VARS:
        monkeypatch.delenv(var, raising=False)
    plain = parse_config({"version": 1}, HERE).workers
    assert (plain.tls, plain.allow_unconfined) == (None, False)
    files = {"tls_ca": "/etc/ca.pem", "tls_cert": "~/c.pem", "tls_key": "~/c.key"}
    got = parse_config({"version": 1, "workers": files}, HERE).workers
    assert got.tls_cert == "~/c.pem" and got.tls_key == "~/c.key"

    def access(workers: object) -> temporal.Access:
        project = SimpleNamespace(config=SimpleNamespace(workers=workers))
        return temporal.access_of(project)  # type: ignore[arg-type]

    assert access(plain) == temporal.Access()
    assert access(plain).describe() == "plain"
    on = access(got)
    assert on.tls and on.ca == Path("/etc/ca.pem") and on.cert == Path("~/c.pem").expanduser()
    assert on.describe() == "TLS + client certificate"
    # an API key turns TLS on (as Temporal Cloud asks), unless tls is false; never shown
    monkeypatch.setenv("TEMPORAL_API_KEY", "k-from-temporal")
    assert access(plain).tls and access(plain).api_key == "k-from-temporal"
    monkeypatch.setenv("BAR_TEMPORAL_API_KEY", "k-of-bar")
    assert access(plain).api_key == "k-of-bar"
    assert "k-of-bar" not in repr(access(plain))
    off = parse_config({"version": 1, "workers": {"tls": False}}, HERE).workers
    assert not access(off).tls


@pytest.mark.parametrize(
    ("workers", "said"),
    [
        ({"tls_cert": "/c.pem"}, "go together"),
        ({"tls_key": "/c.key"}, "go together"),
        ({"tls": False, "tls_ca": "/ca.pem"}, "yet TLS files are named"),
    ],
)
def test_tls_settings_that_contradict_are_named(workers: dict[str, object], said: str) -> None:
    with pytest.raises(ConfigError, match=said):
        parse_config({"version": 1, "workers": workers}, HERE)


def test_an_unreadable_tls_file_is_named_by_its_setting(tmp_path: Path) -> None:
    import asyncio

    gone = tmp_path / "missing.pem"
    access = temporal.Access(tls=True, ca=gone)
    with pytest.raises(ConfigError, match=r"workers.tls_ca names .*missing.pem"):
        asyncio.run(temporal.connect("127.0.0.1:1", "default", access))


# --- what the developer's bar, the workflow and a worker pass each other -------------


def _wire(**changed: object) -> dict[str, object]:
    good: dict[str, object] = {
        "request": "r1",
        "task_id": "Ab3_x-9z",
        "name": "fix",
        "remote": "/srv/repo.git",
        "argv": ["make", "test"],
        "history": None,
        "env": {"CI": "1"},
    }
    return {**good, **changed}


def test_an_order_goes_over_the_wire_and_comes_back_the_same() -> None:
    from bar.workers.contract import Order

    wire = _wire(history="a" * 40, network="none", max_tokens=5, round=1)
    order = Order.from_wire(wire)
    assert (order.argv, order.env, order.max_tokens, order.round) == (
        ["make", "test"],
        {"CI": "1"},
        5,
        1,
    )
    assert Order.from_wire(order.to_wire()) == order
    assert "claim" not in Order.from_wire(_wire()).to_wire()  # a first order's wire: unchanged
    assert Order.from_wire(_wire(argv=[], claim=True)).claim  # (its command: the claimer's)


@pytest.mark.parametrize(
    ("changed", "said"),
    [
        ({"task_id": "../../x"}, "no valid task id"),
        ({"argv": "rm -rf /"}, "not a list of strings"),
        ({"argv": ["a\0b"]}, "not a list of strings"),
        ({"history": "HEAD"}, "no valid history commit"),
        ({"env": {"A": 1}}, "not a mapping of names to strings"),
        ({"env": {"A=B": "C"}}, "not a mapping of names to strings"),
        ({"env": {"-e": "x"}}, "not a mapping of names to strings"),
        ({"env": {"A": "a\0b"}}, "not a mapping of names to strings"),
        ({"env": []}, "not a mapping of names to strings"),
        ({"argv": []}, "command is empty"),
        ({"history": "a" * 40 + "\n"}, "no valid history commit"),
        ({"cwd": "sub\0dir"}, "cwd is not a string"),
        ({"agent": "claude\0"}, "agent is not a string"),
        ({"max_tokens": float("inf")}, "max_tokens is out of range"),
        ({"max_cost_usd": float("nan")}, "max_cost_usd is out of range"),
        ({"max_cost_usd": 10**400}, "max_cost_usd is out of range"),
        ({"max_tokens": -1}, "max_tokens is out of range"),
        ({"round": -1000000}, "round is out of range"),
        ({"round": True}, "round is not a number"),
        ({"cwd": ["x"]}, "cwd is not a string"),
        ({"max_tokens": "many"}, "max_tokens is not a number"),
        ({"max_tokens": 2.5}, "not a whole number"),
    ],
)
def test_a_wrong_word_in_an_order_is_named(changed: dict[str, object], said: str) -> None:
    from bar.workers.contract import Order

    with pytest.raises(BarError, match=said):
        Order.from_wire(_wire(**changed))


def test_an_outcome_on_the_wire_holds_what_docs_json_lists() -> None:
    from bar.workers.contract import Outcome

    bare = Outcome(task_id="Ab3_x-9z", worker="w1").to_wire()
    assert bare == {
        "task_id": "Ab3_x-9z",
        "worker": "w1",
        "status": "recorded",
        "step_id": None,
        "exit_code": None,
    }
    pushed = Outcome(task_id="t", worker="w", pushed=True, history=None, sticky="").to_wire()
    assert pushed["pushed"] is True and pushed["history"] is None and pushed["sticky"] == ""
    lost = Outcome(task_id="t", worker="w", status="interrupted", lost=True).to_wire()
    assert lost["lost"] is True and "history" not in lost


def test_the_workers_core_loads_no_temporal_and_no_face() -> None:
    """The developer's side and what an attempt does to a task load without Temporal's
    SDK; the worker's face is what loads it."""
    import subprocess
    import sys

    code = (
        "import sys, pkgutil, importlib, bar.workers\n"
        "for m in pkgutil.iter_modules(bar.workers.__path__):\n"
        "    importlib.import_module('bar.workers.' + m.name)\n"
        "import bar.api.attempts\n"
        "assert 'temporalio' not in sys.modules, 'temporalio was imported'\n"
        "assert not [m for m in sys.modules if m.startswith('bar.worker.')], 'a face loaded'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
