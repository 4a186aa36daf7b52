"""How machines reach a Temporal server that asks for TLS, and what a worker lets an
order do (docs/workers.md): a real dev server behind a real mTLS front
(``tls_front``), real ``bar worker`` processes, as a team's cluster would have them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from tls_front import Pki, TlsFront, make_pki, tls_front
from two_machines import Machine

from bar.workers.devserver import DevServer
from workers import Cluster, cluster

KEY = "bar-test-api-key-5f1e"


def _tls(machine: Machine, pki: Pki, *, cert: bool = True, ca: bool = True) -> None:
    """``workers.tls_*`` of ``machine`` (only those asked; the others removed)."""
    path = machine.project_dir / "config.yaml"
    data = yaml.safe_load(path.read_text())
    workers = data.setdefault("workers", {})
    for key in ("tls", "tls_ca", "tls_cert", "tls_key"):
        workers.pop(key, None)
    workers["tls"] = True
    if ca:
        workers["tls_ca"] = str(pki.ca)
    if cert:
        workers["tls_cert"], workers["tls_key"] = str(pki.cert), str(pki.key)
    path.write_text(yaml.safe_dump(data))


@pytest.fixture
def behind_tls(
    tmp_path: Path,
    temporal_server: DevServer,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[Cluster, Pki, TlsFront]]:
    pki = make_pki(tmp_path / "pki")
    with (
        tls_front(pki, temporal_server.address) as front,
        cluster(tmp_path, temporal_server, monkeypatch, workers=("w1",)) as made,
    ):
        monkeypatch.setenv("BAR_TEMPORAL", front.address)  # (every machine goes through it)
        _tls(made.dev, pki)
        _tls(made.machines["w1"], pki)
        made.start_worker("w1", env={"TEMPORAL_API_KEY": KEY})
        yield made, pki, front


def test_machines_with_a_client_certificate_run_steps_through_tls(
    behind_tls: tuple[Cluster, Pki, TlsFront],
) -> None:
    c, pki, _ = behind_tls
    dev = c.dev
    dev.ok("task", "new", "through-tls", "--on", c.queue)
    script = (
        'echo "key=${TEMPORAL_API_KEY:-none}"; '
        f"if cat {pki.key} > /dev/null 2>&1; then echo read-the-key; else echo key-hidden; fi; "
        # nor from the worker's own process, whose environment holds it
        "echo found=$(grep -l -s -a TEMPORAL_API_KEY= /proc/[0-9]*/environ | wc -l); "
        "echo done > done.txt"
    )
    ran = dev.bar("run", "--on", c.queue, "--task", "through-tls", "--", "sh", "-c", script)
    assert ran.code == 0, ran.err
    # the worker's key to the server and its client key never reach a step
    assert "key=none" in ran.out and "key-hidden" in ran.out, ran.out
    assert "found=0" in ran.out, ran.out
    assert KEY not in ran.out
    (step,) = dev.json("log", "--task", "through-tls")
    assert step["diff_stat"]["file_list"] == ["done.txt"]
    assert "TLS + client certificate + API key" in c.workers["w1"].said()


@pytest.mark.parametrize(
    ("cert", "ca", "said"),
    [
        (False, True, "client certificate"),  # the front asks for one
        (True, False, "signed by no authority this machine trusts"),  # the system's roots
    ],
)
def test_a_machine_the_server_does_not_let_in_is_told_why(
    behind_tls: tuple[Cluster, Pki, TlsFront], cert: bool, ca: bool, said: str
) -> None:
    c, pki, _ = behind_tls
    _tls(c.dev, pki, cert=cert, ca=ca)
    ran = c.dev.bar("task", "new", "kept-out", "--on", c.queue)
    assert ran.code == 13, ran.err
    assert "did not let this machine in" in ran.err and said in ran.err, ran.err
    assert "hint:" in ran.err and "workers.tls" in ran.err


def test_a_plain_connection_to_a_tls_server_is_told_to_use_tls(
    behind_tls: tuple[Cluster, Pki, TlsFront],
) -> None:
    c, _, _ = behind_tls
    path = c.dev.project_dir / "config.yaml"
    data = yaml.safe_load(path.read_text())
    data["workers"] = {k: v for k, v in data["workers"].items() if not k.startswith("tls")}
    path.write_text(yaml.safe_dump(data))
    ran = c.dev.bar("task", "new", "plain", "--on", c.queue)
    assert ran.code == 13, ran.err
    assert "did not let this machine in" in ran.err or "no Temporal server answers" in ran.err


def test_a_worker_runs_no_unconfined_step_unless_its_config_allows(
    tmp_path: Path,
    temporal_server: DevServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with cluster(tmp_path, temporal_server, monkeypatch, workers=("w1",)) as c:
        c.start_worker("w1")
        dev = c.dev
        dev.ok("task", "new", "loose", "--on", c.queue)
        refused = dev.bar(
            "run", "--on", c.queue, "--task", "loose", "--no-sandbox", "--", "sh", "-c",
            "echo ran > ran.txt",
        )  # fmt: skip
        assert refused.code != 0
        assert "runs no step unconfined" in refused.err, refused.err
        assert "workers.allow_unconfined" in refused.err
        assert "BarStepFinal" not in refused.err  # (words, not the error's type)
        said = c.workers["w1"].said()
        assert "refused an order" in said and "Traceback" not in said
        assert dev.json("log", "--task", "loose") == []
        # a confined step of the same task runs as ever
        assert dev.bar("run", "--task", "loose", "--", "true").code == 0
        c.machines["w1"].set_config(workers={"allow_unconfined": True})
        allowed = dev.bar(
            "run", "--task", "loose", "--no-sandbox", "--", "sh", "-c", "echo ran > ran.txt"
        )
        assert allowed.code == 0, allowed.err
        steps = dev.json("log", "--task", "loose")
        assert len(steps) == 2 and steps[-1]["diff_stat"]["file_list"] == ["ran.txt"]
