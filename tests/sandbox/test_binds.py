"""What a step's mount namespace does with a path the plan saw and that is gone when the
step starts (``bar.sandbox.namespace.Bind.if_present``), and what bar says when its
namespaces cannot be made (``bar.sandbox.holder.Holder.failure``)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from bar.errors import CannotConfine
from bar.sandbox import Plan, confine, namespace
from bar.sandbox.namespace import Bind

mounts = pytest.mark.skipif(
    namespace.available("/") is not None, reason="no mount namespace for a step here"
)


def _start(plan: Plan, argv: list[str]) -> subprocess.CompletedProcess[bytes]:
    """Run ``argv`` confined by ``plan``, as a step's command is started."""
    made = confine(plan)
    try:
        proc = made.start(
            lambda prepare: subprocess.Popen(argv, stdout=subprocess.PIPE, preexec_fn=prepare)
        )
        out, _ = proc.communicate(timeout=30)
        return subprocess.CompletedProcess(argv, proc.returncode, out)
    finally:
        made.close()


def _plan(tmp_path: Path, binds: tuple[Bind, ...]) -> Plan:
    return Plan(writable=(tmp_path,), binds=binds)


@mounts
def test_what_the_plan_showed_or_covered_and_is_gone_at_the_start_is_passed_over(
    tmp_path: Path,
) -> None:
    """Another task's temporary directory removed, an entry of /tmp gone, between the
    plan and the start: nothing to cover or show there, and the step runs."""
    empty = tmp_path / "empty"
    empty.mkdir()
    shown = tmp_path / "shown"
    shown.mkdir()
    (shown / "seen.txt").write_text("seen\n")
    view = tmp_path / "view"
    view.mkdir()
    binds = (
        Bind(str(tmp_path / "gone-source"), str(view), read_only=True, if_present=True),
        Bind(str(empty), str(tmp_path / "gone-target"), read_only=True, if_present=True),
        Bind(str(shown), str(view), read_only=True, if_present=True),
    )
    ran = _start(_plan(tmp_path, binds), ["cat", str(view / "seen.txt")])
    assert ran.returncode == 0 and ran.stdout == b"seen\n"


@mounts
def test_namespaces_that_cannot_be_made_are_said_with_the_path_and_nothing_runs(
    tmp_path: Path,
) -> None:
    """A path the step needs, gone: bar says which and why (not an internal error), and
    the command never runs."""
    marker = tmp_path / "ran"
    view = tmp_path / "view"
    view.mkdir()
    missing = tmp_path / "needed"
    binds = (Bind(str(missing), str(view)),)
    with pytest.raises(CannotConfine) as raised:
        _start(_plan(tmp_path, binds), ["touch", str(marker)])
    assert str(missing) in str(raised.value) and "No such file" in str(raised.value)
    assert not marker.exists()
    assert raised.value.hint


@mounts
def test_a_holders_report_of_stopped_pids_reads_no_failure_line_as_a_pid(tmp_path: Path) -> None:
    """The holder's report carries pids and, on a failure, a line that may hold digits."""
    from bar.sandbox.holder import Holder

    holder = Holder(stop_leftovers=False, confine=None)
    os.write(holder._to_report, b"!mount --bind /tmp/1 /x: 2\n1234 5678\n")
    holder.started()
    assert holder.failure() == "mount --bind /tmp/1 /x: 2"
    assert holder.stopped() == [1234, 5678]


@mounts
def test_a_step_whose_namespaces_cannot_be_made_is_recorded_as_not_run(
    repo: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``bar run`` when a mount of the step fails as it starts (here made to fail in the
    holder): the step is recorded at once, exit 126, with bar's reason in its output;
    its command never ran, and the next command finds no interrupted step to record."""
    import errno

    from helpers import bar, ledger, new_task, set_config

    assert bar(capfd, "init").code == 0
    set_config(policy={"enabled": False})
    task_id = new_task(capfd)["id"]
    real = namespace.enter

    def failing(binds: tuple[Bind, ...], *args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOENT, "mount --bind /gone /x: No such file or directory")

    monkeypatch.setattr(namespace, "enter", failing)
    marker = repo / "ran"
    ran = bar(capfd, "run", "--no-pty", "--", "touch", str(marker))
    monkeypatch.setattr(namespace, "enter", real)
    assert ran.code == 126, ran.err
    assert "namespaces could not be made" in ran.err and "/gone" in ran.err
    assert "[Errno" not in ran.err
    assert not marker.exists()
    (step,) = [s for s in ledger(task_id) if s["kind"] == "run"]
    assert step["exit_code"] == 126
    status = bar(capfd, "status")
    assert status.code == 0 and "interrupted" not in status.out + status.err


@mounts
def test_a_repositorys_pre_run_hook_whose_namespaces_cannot_be_made_stops_the_step(
    repo: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The repository's hooks run confined like the step: the same failure there stops
    the step as a failed ``pre_run`` hook does, saying why; the hook never ran."""
    import errno
    import subprocess

    from helpers import bar, ledger, new_task, set_config

    (repo / ".bar").mkdir()
    (repo / ".bar" / "config.yaml").write_text("version: 1\nhooks:\n  pre_run: [touch hooked]\n")
    subprocess.run(["git", "-C", str(repo), "add", ".bar"], check=True)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", "hooks"], check=True)
    assert bar(capfd, "init").code == 0
    set_config(policy={"enabled": False})
    made = new_task(capfd)

    def failing(binds: tuple[Bind, ...], *args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOENT, "mount --bind /gone /x: No such file or directory")

    monkeypatch.setattr(namespace, "enter", failing)
    ran = bar(capfd, "run", "--no-pty", "--", "true")
    assert ran.code == 10, ran.err  # (a pre_run hook stopped the step)
    assert "namespaces could not be made" in ran.err and "/gone" in ran.err
    assert not (Path(made["worktree"]) / "hooked").exists()
    (step,) = [s for s in ledger(made["id"]) if s["kind"] == "run"]
    assert step["stopped_by"] == "pre_run"
