"""Steps on workers through a real Temporal dev server, with two real ``bar worker``
processes as two machines (docs/workers.md): run and stream, detach and fetch, cancel, a worker
killed mid-step, a server restart, a claim from the board, a decision answered from the
developer's machine, a remote out of reach, and the way back to running here."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import BAR_EXE, Gate

from bar.workers.devserver import DevServer
from workers import Cluster, cluster, wait_for


@pytest.fixture
def two(
    tmp_path: Path,
    temporal_server: DevServer,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Cluster]:
    with cluster(tmp_path, temporal_server, monkeypatch) as made:
        made.start_worker("w1")
        made.start_worker("w2")
        yield made


def ledger(c: Cluster, task: str) -> list[dict[str, object]]:
    steps: list[dict[str, object]] = c.dev.json("log", "--task", task)
    return steps


def test_a_step_runs_on_a_worker_streams_its_output_and_comes_back_recorded(two: Cluster) -> None:
    dev = two.dev
    made = dev.json("task", "new", "remote-one", "--on", two.queue)
    assert made["queue"] == two.queue and made["started"] is True
    ran = dev.bar(
        "run",
        "--on",
        two.queue,
        "--",
        "sh",
        "-c",
        "echo from-the-worker; printf 'x\\n' > new.txt; exit 3",
    )
    assert ran.code == 3, ran.err
    assert "from-the-worker" in ran.out
    assert "recorded on w" in ran.err
    steps = ledger(two, "remote-one")
    assert [s["step_id"] for s in steps] == ["0001"]
    assert steps[0]["exit_code"] == 3
    assert steps[0]["diff_stat"]["file_list"] == ["new.txt"]
    shown = dev.ok("show", "1", "--task", "remote-one").out
    assert "from-the-worker" in shown
    # the task runs on workers: the list and the status say so, and a plain bar run goes there
    listed = dev.json("task", "list")
    (row,) = [r for r in listed if r["name"] == "remote-one"]
    assert row["state"] == "on-workers" and row["on_workers"]["queue"] == two.queue
    again = dev.bar("run", "--task", "remote-one", "--", "sh", "-c", "printf 'y\\n' >> new.txt")
    assert again.code == 0, again.err
    assert f"runs on queue {two.queue}" in again.err
    assert [s["step_id"] for s in ledger(two, "remote-one")] == ["0001", "0002"]
    diff = dev.ok("diff", "--task", "remote-one").out
    assert "+x" in diff and "+y" in diff


def test_detached_steps_are_fetched_and_every_worker_takes_work(two: Cluster) -> None:
    dev = two.dev
    names = [f"spread-{i}" for i in range(4)]
    for name in names:
        dev.ok("task", "new", name, "--on", two.queue)
        sent = dev.ok(
            "run", "--on", two.queue, "--detach", "--task", name, "--json", "--",
            "sh", "-c", f"sleep 1; echo {name} > {name}.txt",
        ).json()  # fmt: skip
        assert sent["request"]

    def all_fetched() -> bool:
        dev.ok("fetch")
        return all(len(ledger(two, n)) == 1 for n in names)

    wait_for(all_fetched, 90, "the four steps coming back")
    workers = set()
    for name in names:
        status = dev.json("status", "--task", name)
        results = status["task"]["on_workers"]["now"]["results"]
        workers.add(results[-1]["worker"])
        assert results[-1]["status"] == "recorded"
    assert workers == {"w1", "w2"}


def test_cancel_stops_the_step_on_its_worker_and_records_it(two: Cluster) -> None:
    dev = two.dev
    dev.ok("task", "new", "to-cancel", "--on", two.queue)
    run = dev.popen(
        "run",
        "--on",
        two.queue,
        "--task",
        "to-cancel",
        "--",
        "sh",
        "-c",
        "echo begun; echo half > half.txt; sleep 120; echo never",
    )
    two.running_on()
    two.published("to-cancel", "half.txt")
    dev.ok("cancel", "--task", "to-cancel")
    out, err = run.communicate(timeout=60)
    assert run.returncode == 130, err
    assert b"begun" in out and b"cancelled" in err
    (step,) = ledger(two, "to-cancel")
    assert step["exit_code"] == 130
    assert step["diff_stat"]["file_list"] == ["half.txt"]


def test_a_worker_killed_mid_step_leaves_the_step_recorded_interrupted(two: Cluster) -> None:
    dev = two.dev
    nap = f"sleep 117.{os.getpid()}"  # (this run's own: another copy of the suite may run)
    dev.ok("task", "new", "killed", "--on", two.queue)
    run = dev.popen(
        "run",
        "--on",
        two.queue,
        "--task",
        "killed",
        "--",
        "sh",
        "-c",
        f"echo before-the-kill; echo made > made.txt; {nap}; echo never",
    )
    victim = two.running_on()
    # the command has written its file (it sleeps after it)
    wait_for(
        lambda: subprocess.run(["pgrep", "-f", nap], capture_output=True).returncode == 0,
        60,
        "the step's command at its sleep",
    )
    # its progress, holding the file, reaches the remote (every few seconds while
    # something changes; a first one may be published before the file is written)
    two.published("killed", "made.txt")
    two.stop_worker(victim, signal.SIGKILL)
    # the step's bar run dies with its worker, and stops its command
    wait_for(
        lambda: subprocess.run(["pgrep", "-f", nap], capture_output=True).returncode,
        30,
        "the killed worker's command stopping",
    )
    _out, err = run.communicate(timeout=120)
    assert b"the worker running it was lost" in err, err
    (step,) = ledger(two, "killed")
    assert step["interrupted"] is True
    assert step["diff_stat"]["file_list"] == ["made.txt"]
    shown = dev.ok("show", "1", "--task", "killed").out
    assert "before-the-kill" in shown
    # not retried (workers.retry: 0), and the next step runs on the worker that is left
    assert dev.bar("run", "--task", "killed", "--", "true").code == 0
    assert len(ledger(two, "killed")) == 2


def test_retry_runs_a_lost_step_again_when_config_says_so(two: Cluster) -> None:
    dev = two.dev
    dev.set_config(workers={"heartbeat": 3, "retry": 1})
    dev.ok("task", "new", "retried", "--on", two.queue)
    run = dev.popen(
        "run",
        "--on",
        two.queue,
        "--task",
        "retried",
        "--",
        "sh",
        "-c",
        "if [ -e once.txt ]; then echo second; else echo x > once.txt; sleep 120; fi",
    )
    victim = two.running_on()
    two.published("retried", "once.txt")
    two.stop_worker(victim, signal.SIGKILL)
    _out, err = run.communicate(timeout=120)
    assert run.returncode == 0, err
    assert b"running it again" in err
    steps = ledger(two, "retried")
    assert [s.get("interrupted", False) for s in steps] == [True, False]


def test_a_server_restart_loses_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server = DevServer(tmp_path / "own.db").start()
    try:
        (tmp_path / "c").mkdir()
        with cluster(tmp_path / "c", server, monkeypatch, workers=("w1",)) as c:
            c.start_worker("w1")
            dev = c.dev
            # the server is away a few seconds: no worker counts as lost meanwhile
            dev.set_config(workers={"heartbeat": 60})
            dev.ok("task", "new", "survives", "--on", c.queue)
            gate = Gate(tmp_path / "go")
            run = dev.popen(
                "run",
                "--on",
                c.queue,
                "--task",
                "survives",
                "--",
                "sh",
                "-c",
                f"{gate.script}; echo done > done.txt; echo finished",
            )
            c.running_on()
            server.stop()  # (once it returns, the server is gone: nothing to wait out)
            server.start()
            gate.open()  # the step ends after the restart
            out, err = run.communicate(timeout=180)
            assert run.returncode == 0, err
            assert b"finished" in out
            (step,) = ledger(c, "survives")
            assert step["diff_stat"]["file_list"] == ["done.txt"]
    finally:
        server.stop()


def test_a_worker_that_claims_takes_a_planned_task_from_the_board(two: Cluster) -> None:
    dev = two.dev
    two.stop_worker("w2")
    two.start_worker("w2", "--claim", "--", "sh", "-c", "echo '{description}' > plan.txt")
    dev.ok("task", "new", "planned", "--plan", "--on", two.queue, "-d", "write the plan")

    def back() -> bool:
        dev.ok("fetch")
        return len(ledger(two, "planned")) == 1

    wait_for(back, 90, "the claimed task's step")
    task = dev.json("task", "show", "planned")
    assert task["board"]["owner"] == "w2"
    diff = dev.ok("diff", "--task", "planned").out
    assert "+write the plan" in diff


def test_a_decision_asked_on_a_worker_is_answered_here(two: Cluster) -> None:
    dev = two.dev
    dev.ok("task", "new", "asks", "--on", two.queue)
    question = {
        "task": "pick a store",
        "source": "agent",
        "items": [
            {
                "id": 1,
                "title": "Which store?",
                "options": [
                    {"value": "pg", "label": "Postgres"},
                    {"value": "sqlite", "label": "SQLite"},
                ],
            }
        ],
    }
    script = (
        f"{BAR_EXE} decide submit '{json.dumps(question)}' --wait --timeout 120 > /dev/null; "
        f"{BAR_EXE} decide result --json > answer.json"
    )
    run = dev.popen("run", "--on", two.queue, "--task", "asks", "--", "sh", "-c", script)
    waiting = wait_for(
        lambda: dev.json("decide", "list", "--task", "asks")["pending"], 60, "the question"
    )
    assert waiting["items"] == 1
    answered = dev.ok("decide", "answer", "--task", "asks", "--choose", "1=sqlite")
    assert "sent to the agent on its worker" in answered.out
    _out, err = run.communicate(timeout=120)
    assert run.returncode == 0, err
    diff = dev.ok("diff", "--task", "asks").out
    assert '"chosen": "sqlite"' in diff


def test_a_worker_that_cannot_reach_the_remote_says_so_and_the_step_waits(
    two: Cluster,
) -> None:
    dev = two.dev
    dev.ok("task", "new", "unreachable", "--on", two.queue)
    two.remote.rename(two.remote.with_name("moved.git"))
    try:
        run = dev.popen(
            "run", "--on", two.queue, "--task", "unreachable", "--", "sh", "-c", "echo ran"
        )
        wait_for(
            lambda: any("cannot take task unreachable" in w.said() for w in two.workers.values()),
            60,
            "a worker saying why",
        )
        status = dev.json("status", "--task", "unreachable")["task"]["on_workers"]["now"]
        assert "cannot take task" in status["why"]
    finally:
        two.remote.with_name("moved.git").rename(two.remote)
    _out, err = run.communicate(timeout=120)
    assert run.returncode == 0, err
    assert b"cannot take task unreachable" in err
    assert len(ledger(two, "unreachable")) == 1


def test_adopt_brings_a_task_back_to_run_and_apply_here(two: Cluster) -> None:
    dev = two.dev
    dev.ok("task", "new", "home-again", "--on", two.queue)
    dev.ok("run", "--task", "home-again", "--", "sh", "-c", "echo remote > r.txt")
    dev.ok("task", "adopt", "home-again")
    listed = {r["name"]: r for r in dev.json("task", "list")}
    assert listed["home-again"]["on_workers"] is None
    ran = dev.ok("run", "--task", "home-again", "--", "sh", "-c", "echo local > l.txt")
    assert "runs on queue" not in ran.err
    dev.ok("apply", "--task", "home-again")
    assert (dev.repo / "r.txt").read_text() == "remote\n"
    assert (dev.repo / "l.txt").read_text() == "local\n"


def test_sigterm_lets_the_running_step_finish_and_push(two: Cluster) -> None:
    dev = two.dev
    dev.ok("task", "new", "graceful", "--on", two.queue)
    gate = Gate(two.root / "go")
    run = dev.popen(
        "run",
        "--on",
        two.queue,
        "--task",
        "graceful",
        "--",
        "sh",
        "-c",
        f"{gate.script}; echo ok > ok.txt",
    )
    victim = two.running_on()
    worker = two.workers[victim]
    worker.proc.send_signal(signal.SIGTERM)
    # the worker has taken the signal with the step still running; then the step ends
    wait_for(lambda: "running steps finish first" in worker.said(), 60, "the worker stopping")
    assert worker.proc.poll() is None, worker.said()
    gate.open()
    assert worker.proc.wait(timeout=60) == 0, worker.said()
    del two.workers[victim]
    _out, err = run.communicate(timeout=120)
    assert run.returncode == 0, err
    (step,) = ledger(two, "graceful")
    assert step["diff_stat"]["file_list"] == ["ok.txt"]


def test_no_server_is_exit_13_with_a_hint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from two_machines import clone, make_remote

    remote = make_remote(tmp_path)
    dev = clone(tmp_path, "dev", str(remote))
    try:
        nobody = DevServer(tmp_path / "x.db").address  # a free port nobody listens on
        ran = dev.bar("task", "new", "lonely", "--on", "q", "--server", nobody)
        assert ran.code == 13, ran.err
        assert f"no Temporal server answers at {nobody}" in ran.err
        port = nobody.rsplit(":", 1)[1]
        assert (
            f"hint: start one on this machine, in another terminal: bar worker dev-server --port {port}"
            in ran.err
        )
        bad = dev.bar("worker", "--queue", "q", "--server", "not a server")
        assert bad.code != 0 and "HOST:PORT" in bad.err
    finally:
        dev.stop()


def test_the_local_path_never_loads_temporal(tmp_path: Path) -> None:
    from two_machines import clone, make_remote

    remote = make_remote(tmp_path)
    dev = clone(tmp_path, "dev", str(remote))
    try:
        dev.ok("task", "new", "local")
        code = (
            "import sys\n"
            "from bar.cli.main import run_here\n"
            "for args in (['run', '--', 'true'], ['log'], ['status'], ['task', 'list']):\n"
            "    assert run_here(args) == 0, args\n"
            "assert 'temporalio' not in sys.modules, 'temporalio was imported'\n"
        )
        proc = subprocess.run(
            [str(Path(BAR_EXE).parent / "python"), "-c", code],
            cwd=dev.repo,
            env=dev.env(),
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, proc.stderr
    finally:
        dev.stop()


def test_bar_ui_shows_where_a_task_runs_and_its_running_step(two: Cluster) -> None:
    import http.client
    from types import SimpleNamespace
    from urllib.parse import urlsplit

    from ui_session import base_of, serving

    dev = two.dev
    dev.ok("task", "new", "seen-in-ui", "--on", two.queue)
    gate = Gate(two.root / "go")
    run = dev.popen(
        "run", "--on", two.queue, "--task", "seen-in-ui", "--", "sh", "-c", gate.script
    )  # fmt: skip
    worker = two.running_on()

    def get(url: str, cookie: str | None = None) -> tuple[int, dict[str, str], str]:
        parts = urlsplit(url)
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        conn.request("GET", path, headers={"Cookie": cookie} if cookie else {})
        res = conn.getresponse()
        text = res.read().decode()
        return res.status, {k.lower(): v for k, v in res.getheaders()}, text

    with serving(SimpleNamespace(repo=dev.repo, env=dev.env())) as (_, url):  # type: ignore[arg-type]
        status, headers, _ = get(url)
        assert status == 303
        cookie = headers["set-cookie"].split(";", 1)[0]

        def shown() -> str | None:
            page = get(base_of(url) + "/", cookie)[2]
            return page if f"on {worker}" in page else None

        page = wait_for(shown, 30, "the running step on the task list")
        assert f"on workers ({two.queue})" in page
    gate.open()
    run.communicate(timeout=60)


def test_a_worker_told_to_interrupt_on_stop_records_its_step_and_pushes_it(two: Cluster) -> None:
    dev = two.dev
    two.stop_worker("w2")
    two.stop_worker("w1")
    two.start_worker("w1", "--on-stop", "interrupt")
    dev.ok("task", "new", "stopped", "--on", two.queue)
    run = dev.popen(
        "run", "--on", two.queue, "--task", "stopped", "--", "sh", "-c",
        "echo going; echo part > part.txt; sleep 120",
    )  # fmt: skip
    two.running_on()
    two.published("stopped", "part.txt")
    assert two.stop_worker("w1", signal.SIGTERM) == 0
    two.start_worker("w2")  # the workflow goes on where a worker of the queue is
    _out, err = run.communicate(timeout=60)
    assert b"worker stopped while it ran" in err, err
    (step,) = ledger(two, "stopped")
    assert step["diff_stat"]["file_list"] == ["part.txt"]
    assert step["exit_code"] == 130


def test_closing_a_task_on_workers_brings_its_record_and_ends_its_workflow(two: Cluster) -> None:
    dev = two.dev
    dev.ok("task", "new", "to-close", "--on", two.queue)
    dev.ok(
        "run",
        "--on",
        two.queue,
        "--detach",
        "--task",
        "to-close",
        "--",
        "sh",
        "-c",
        "echo c > c.txt",
    )

    def ended() -> bool:
        now = dev.json("status", "--task", "to-close")["task"]["on_workers"]["now"]
        return bool(now["results"])

    wait_for(ended, 60, "the step ending")
    dev.ok("task", "close", "to-close")
    shown = dev.json("task", "show", "to-close")
    assert shown["status"] == "closed" and shown["on_workers"] is None
    assert shown["steps"] == 1
    assert dev.bar("run", "--on", two.queue, "--task", "to-close", "--", "true").code != 0


def test_a_megabyte_of_output_streams_without_filling_the_workflow(two: Cluster) -> None:
    from bar.workers.devserver import binary

    dev = two.dev
    made = dev.json("task", "new", "chatty", "--on", two.queue)
    ran = dev.ok(
        "run", "--on", two.queue, "--task", "chatty", "--", "sh", "-c",
        "i=0; while [ $i -lt 40 ]; do seq 1 5000; sleep 0.05; i=$((i+1)); done; echo the-end",
    )  # fmt: skip
    assert "5000\nthe-end\n" in ran.out
    assert len(ran.out) > 100_000  # most of it was shown live
    shown = dev.ok("show", "1", "--task", "chatty").out
    assert shown.count("\n5000\n") == 40  # the record holds all of it
    described = subprocess.run(
        [binary(), "workflow", "describe", "--address", two.server.address,
         "-w", made["workflow_id"], "-o", "json"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    info = json.loads(described)["workflowExecutionInfo"]
    assert int(info["historySizeBytes"]) < 100_000, info["historySizeBytes"]


def test_a_forged_order_is_refused_for_good(two: Cluster) -> None:
    from bar.workers.devserver import binary

    dev = two.dev
    made = dev.json("task", "new", "forged", "--on", two.queue)
    order = {"request": "evil", "task_id": "../../x", "argv": ["true"], "remote": str(two.remote)}
    subprocess.run(
        [binary(), "workflow", "signal", "--address", two.server.address,
         "-w", made["workflow_id"], "--name", "order", "--input", json.dumps(order)],
        capture_output=True, check=True,
    )  # fmt: skip

    def refused() -> dict[str, object] | None:
        now = dev.json("status", "--task", "forged")["task"]["on_workers"]["now"]
        return next((r for r in now["results"] if r["request"] == "evil"), None)

    result = wait_for(refused, 60, "the forged order's result")
    assert result["status"] == "failed" and "refused" in str(result["message"])
    assert any("refused an order" in w.said() for w in two.workers.values())
    assert ledger(two, "forged") == []


@pytest.fixture
def idle(
    tmp_path: Path,
    temporal_server: DevServer,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Cluster]:
    """Worker machines, none of whose workers is started yet."""
    with cluster(tmp_path, temporal_server, monkeypatch) as made:
        yield made


def test_steps_sent_before_any_worker_runs_wait_for_one_in_order(idle: Cluster) -> None:
    dev = idle.dev
    dev.ok("task", "new", "early", "--on", idle.queue)
    dev.ok(
        "run", "--on", idle.queue, "--detach", "--task", "early", "--", "sh", "-c",
        "echo one >> order.txt",
    )  # fmt: skip
    said = idle.root / "run.err"
    run = dev.popen(
        "run", "--on", idle.queue, "--task", "early", "--", "sh", "-c", "echo two >> order.txt",
        stderr=said,
    )  # fmt: skip
    # the run says it waits for a worker, and waits
    nobody = f"no worker of queue {idle.queue} answers"
    wait_for(lambda: nobody in said.read_text(), 60, "the run saying no worker answers")
    assert run.poll() is None, said.read_text()
    idle.start_worker("w1")
    run.communicate(timeout=120)
    err = said.read_text()
    assert run.returncode == 0, err
    assert nobody in err
    dev.ok("fetch")
    assert [s["step_id"] for s in ledger(idle, "early")] == ["0001", "0002"]
    assert "+one\n+two" in dev.ok("diff", "--task", "early").out


def test_adopt_with_no_worker_up_ends_the_workflow_and_drops_what_waited(idle: Cluster) -> None:
    dev = idle.dev
    dev.ok("task", "new", "back-home", "--on", idle.queue)
    dev.ok(
        "run", "--on", idle.queue, "--detach", "--task", "back-home", "--", "sh", "-c",
        "echo never > never.txt",
    )  # fmt: skip
    dev.ok("task", "adopt", "back-home")
    idle.start_worker("w1")
    # a worker that would take what waited: it takes a step sent after it, and has
    # looked at the queue by the time that step is back
    dev.ok("task", "new", "witness", "--on", idle.queue)
    dev.ok("run", "--task", "witness", "--", "sh", "-c", "echo w > w.txt")
    fetched = dev.json("fetch")
    (mine,) = [t for t in fetched["tasks"] if t["name"] == "back-home"]
    assert mine["outcome"] == "up to date"
    assert ledger(idle, "back-home") == []
    assert dev.ok("run", "--task", "back-home", "--", "true").code == 0


def test_a_task_s_steps_stay_with_the_worker_that_has_its_worktree(two: Cluster) -> None:
    dev = two.dev
    dev.ok("task", "new", "sticky", "--on", two.queue)
    for i in range(4):
        dev.ok("run", "--task", "sticky", "--", "sh", "-c", f"echo {i} >> n.txt")
    results = dev.json("status", "--task", "sticky")["task"]["on_workers"]["now"]["results"]
    assert len({r["worker"] for r in results}) == 1, results


def test_a_sticky_step_whose_worker_dies_is_recorded_by_the_other(two: Cluster) -> None:
    dev = two.dev
    dev.ok("task", "new", "sticky-lost", "--on", two.queue)
    dev.ok("run", "--task", "sticky-lost", "--", "sh", "-c", "echo first > first.txt")
    run = dev.popen(
        "run", "--task", "sticky-lost", "--", "sh", "-c",
        "echo second > second.txt; sleep 113",
    )  # fmt: skip
    victim = two.running_on()
    two.published("sticky-lost", "second.txt")
    two.stop_worker(victim, signal.SIGKILL)
    _out, err = run.communicate(timeout=120)
    assert b"the worker running it was lost" in err, err
    steps = ledger(two, "sticky-lost")
    assert len(steps) == 2 and steps[1]["interrupted"] is True
    assert steps[1]["diff_stat"]["file_list"] == ["second.txt"]
