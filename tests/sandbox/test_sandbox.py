"""Confinement (docs/sandbox.md) with the real kernel: what a step may and may not touch.

Every step here runs under Landlock, as ``bar run`` does by default. The tests that need
the kernel's confinement are skipped where it cannot confine (they also run with
``BAR_SANDBOX_UNAVAILABLE`` set, where the fallback tests run instead).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    DATA,
    SETTLE,
    SUPPORT,
    bar,
    bar_exe,
    host_pids,
    ledger,
    new_task,
    project_dir,
    set_config,
    task_dir,
    worktree,
)

from bar.sandbox import UNAVAILABLE_ENV, landlock, namespace

CONFINES = landlock.abi_version() >= 1 and not os.environ.get(UNAVAILABLE_ENV)
confined = pytest.mark.skipif(not CONFINES, reason="the kernel cannot confine here")


@pytest.fixture
def inited(repo: Path, capfd: pytest.CaptureFixture[str]) -> Path:
    assert bar(capfd, "init").code == 0
    set_config(policy={"enabled": False})  # the kernel, not the policy, is under test
    return repo


def _run(
    capfd: pytest.CaptureFixture[str], script: str, *opts: str
) -> tuple[int, str, dict[str, Any]]:
    res = bar(capfd, "run", "--no-pty", *opts, "--", "sh", "-c", script)
    steps = ledger(_task_id())
    return res.code, res.out + res.err, steps[-1]


def _task_id() -> str:
    """The active task's id."""
    tid: str = json.loads((project_dir() / "state.json").read_text())["active_task_id"]
    return tid


# --- what a step cannot touch --------------------------------------------------------


@confined
@pytest.mark.parametrize(
    "target",
    ["checkout", "config.yaml", "git config", "git hook", "bar ref", "home", "policy"],
)
def test_a_step_cannot_write_outside_what_its_task_owns(
    target: str, inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    git_dir = inited / ".git"
    (git_dir / "hooks" / "pre-commit").write_text("#!/bin/sh\nexit 0\n")
    home = Path(os.environ["HOME"])
    (home / "important.txt").write_text("keep\n")
    path = {
        "checkout": inited / "README.md",
        "config.yaml": project_dir() / "config.yaml",
        "git config": git_dir / "config",
        "git hook": git_dir / "hooks" / "pre-commit",
        "bar ref": git_dir / "refs" / "bar" / "tasks" / t["id"],
        "home": home / "important.txt",
        "policy": inited / ".bar" / "policy.yaml",
    }[target]
    before = path.read_bytes()
    code, said, step = _run(capfd, f"echo planted >> '{path}'")
    assert code != 0
    assert "Permission denied" in said or "Read-only" in said
    assert path.read_bytes() == before
    assert step["sandbox"]["enabled"] is True and step["sandbox"]["mechanism"] == "landlock"
    assert not any(e["rule"] == "bar:guard" for e in step["policy_events"])


@confined
def test_the_tamper_moves_of_an_agent_fail(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    t = new_task(capfd)
    snap_ref = f"refs/bar/tasks/{t['id']}"
    ref_before = _git(inited, "rev-parse", snap_ref)
    config_before = (inited / ".git" / "config").read_bytes()
    attrs = inited / ".git" / "info" / "attributes"
    script = (
        f"git update-ref {snap_ref} HEAD~0 2>&1; echo ref=$?;"
        " git config filter.evil.clean 'touch /tmp/pwned' 2>&1; echo filter=$?;"
        f" echo '* filter=evil' >> '{attrs}' 2>&1; echo attrs=$?;"
        " git config core.hooksPath /tmp 2>&1; echo hooks=$?"
    )
    _code, said, step = _run(capfd, script)
    for what in ("ref", "filter", "attrs", "hooks"):
        assert f"{what}=0" not in said, said
    assert _git(inited, "rev-parse", snap_ref) == ref_before
    assert (inited / ".git" / "config").read_bytes() == config_before
    assert not attrs.exists() or b"evil" not in attrs.read_bytes()
    assert not any(e["rule"] == "bar:guard" for e in step["policy_events"])


@confined
def test_a_rewritten_git_link_is_put_back_before_git_runs(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The worktree's ``.git`` file lies in the writable worktree: the kernel lets a step
    rewrite it; bar puts it back before any git operation and records the attempt."""
    t = new_task(capfd)
    link = worktree(t) / ".git"
    before = link.read_bytes()
    _code, _said, step = _run(capfd, f"echo 'gitdir: {inited / '.git'}' > .git")
    assert link.read_bytes() == before
    assert any(e["rule"] == "bar:guard" for e in step["policy_events"])
    assert _git(inited, "status", "--porcelain", "--untracked-files=no") == ""


@confined
def test_a_repointed_commondir_is_put_back_before_bar_runs_git(
    inited: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The worktree's admin directory is writable (git keeps its index and HEAD there);
    a ``commondir`` pointed at a repository the step made, with a filter in its config,
    would make bar's own snapshot run that filter outside the sandbox."""
    t = new_task(capfd)
    admin = Path(_git(worktree(t), "rev-parse", "--absolute-git-dir"))
    marker = tmp_path / "filter-ran"
    script = (
        'git init -q --bare "$TMPDIR/fake" && '
        f"git -C \"$TMPDIR/fake\" config filter.evil.clean 'touch {marker}; cat' && "
        "echo '* filter=evil' > .gitattributes && echo x > x.txt && "
        f"printf '%s\\n' \"$TMPDIR/fake\" > '{admin}/commondir' && "
        f"echo junk > '{admin}/gitdir'"  # so that no gitdir file names the worktree
    )
    code, said, step = _run(capfd, script)
    assert code == 0, said
    assert (admin / "commondir").read_text() == "../..\n"
    assert (admin / "gitdir").read_text() == f"{worktree(t) / '.git'}\n"
    assert any(
        "commondir" in e["matched"] for e in step["policy_events"] if e["rule"] == "bar:guard"
    )
    assert not marker.exists()
    assert "x.txt" in step["diff_stat"]["file_list"]
    # a process the step left behind, putting the commondir back as soon as bar fixes
    # it, gains nothing: bar's git never reads it
    racer = f"while :; do printf '%s\\n' \"$TMPDIR/fake\" > '{admin}/commondir'; done"
    code, said, step = _run(
        capfd, f'(setsid sh -c "{racer}" >/dev/null 2>&1 &); sleep 0.3; echo y > y.txt'
    )
    assert code == 0, said
    assert bar(capfd, "run", "--no-pty", "--", "true").code == 0
    assert not marker.exists()


@confined
def test_a_step_cannot_aim_bars_rollback_at_another_branch(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """HEAD in the worktree's admin directory, and the task branch's ref, are writable in
    a step; pointed at main, bar's hard rollback would have moved main."""
    t = new_task(capfd)
    main_before = _git(inited, "rev-parse", "main")
    admin = Path(_git(worktree(t), "rev-parse", "--absolute-git-dir"))
    code, said, _ = _run(capfd, "echo a > a.txt && git add a.txt && git commit -qm a")
    assert code == 0, said
    code, said, step = _run(capfd, f"echo 'ref: refs/heads/main' > '{admin}/HEAD'")
    assert any("HEAD" in e["matched"] for e in step["policy_events"] if e["rule"] == "bar:guard")
    branch_file = inited / ".git" / "refs" / "heads" / t["branch"]
    code, said, step = _run(capfd, f"echo 'ref: refs/heads/main' > '{branch_file}'")
    assert any("link" in e["matched"] for e in step["policy_events"] if e["rule"] == "bar:guard")
    assert bar(capfd, "rollback", "--hard", "--to", "1").code == 0
    assert _git(inited, "rev-parse", "main") == main_before
    assert (admin / "HEAD").read_text() == f"ref: refs/heads/{t['branch']}\n"
    assert not branch_file.read_text().startswith("ref:")


@confined
def test_a_file_hidden_by_setting_its_directorys_mtime_back_is_recorded(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    new_task(capfd)
    assert _run(capfd, "mkdir sub && echo a > sub/a.txt")[0] == 0
    time.sleep(SETTLE)  # out of the racy window: the next step trusts sub's stamp
    assert _run(capfd, "true")[0] == 0
    hide = (
        f"{sys.executable} -c \"import os; st=os.stat('sub'); open('sub/hidden.sh','w').write('x'); "
        "os.utime('sub', ns=(st.st_atime_ns, st.st_mtime_ns))\""
    )
    code, said, step = _run(capfd, hide)
    assert code == 0, said
    assert step["diff_stat"]["file_list"] == ["sub/hidden.sh"]


@confined
def test_signals_cannot_reach_bar(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    if landlock.abi_version() < 6:
        pytest.skip("signal scoping needs Landlock ABI 6")
    new_task(capfd)
    # neither bar (the parent of the command's holder) nor the holder (bar.sandbox.holder);
    # in a PID namespace of the step's own, its parent is the namespace's init, and
    # nothing beyond it is there to signal
    script = (
        "up=$(cut -d' ' -f4 /proc/$PPID/stat); echo up=$up; "
        '[ "$up" = 0 ] || { kill -TERM $up; echo sent=$?; }; kill -TERM $PPID; echo sent=$?'
    )
    _code, said, step = _run(capfd, script)
    if step["sandbox"]["processes"] == "own":  # (its init takes a signal as no order)
        assert "up=0" in said and said.count("sent=") == 1, said
    else:
        assert "sent=0" not in said and said.count("sent=") == 2, said
    assert step["exit_code"] == 0


# --- what a step can do --------------------------------------------------------------


@confined
def test_ordinary_work_succeeds_under_confinement(
    inited: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    t = new_task(capfd)
    wheel = _tiny_wheel(tmp_path / "wheels")
    script = (
        "mkdir -p src && echo 'print(1)' > src/app.py && "
        "git add -A && git commit -qm 'work on the task branch' && "
        'echo scratch > "$TMPDIR/scratch" && cat "$TMPDIR/scratch" && '
        f"{sys.executable} -m pip install -q --no-index --no-deps --disable-pip-version-check"
        f" --target vendor '{wheel}' && ls vendor/tinypkg"
    )
    code, said, step = _run(capfd, script)
    assert code == 0, said
    wt = worktree(t)
    assert (wt / "vendor" / "tinypkg" / "__init__.py").exists()
    assert _git(wt, "log", "-1", "--format=%s") == "work on the task branch"
    assert _git(inited, "rev-parse", t["branch"]) == _git(wt, "rev-parse", "HEAD")
    tmpdir = task_dir(t["id"]) / "tmp"
    assert (tmpdir / "scratch").read_text() == "scratch\n"
    assert str(tmpdir) in step["sandbox"]["writable"]
    assert "src/app.py" in step["diff_stat"]["file_list"]
    assert bar(capfd, "task", "close", "--force").code == 0
    assert not tmpdir.exists()  # a closed task keeps no temporary files


@confined
def test_a_refused_write_gets_a_hint(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    new_task(capfd)
    code, said, _ = _run(capfd, f"echo x > '{inited}/README.md'")
    assert code != 0 and "sandbox.allow_write" in said and "--no-sandbox" in said
    code, said, _ = _run(capfd, "exit 3")
    assert code == 3 and "sandbox.allow_write" not in said


@confined
def test_a_hook_decision_from_inside_lands_in_the_step(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    set_config(policy={"enabled": True})
    t = new_task(capfd)
    fake_agent = SUPPORT / "fake_agent.py"
    res = subprocess.run(
        [
            str(Path(sys.executable).parent / "bar"),
            "run",
            "--no-pty",
            "--agent",
            "claude",
            "--",
            sys.executable,
            str(fake_agent),
            "--agent",
            "claude",
            "echo fine > ok.txt",
            "git push --force origin main",
        ],
        cwd=inited,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    (step,) = ledger(t["id"])
    assert step["sandbox"]["enabled"] is True
    decisions = {e["command"]: e["decision"] for e in step["policy_events"]}
    assert decisions == {"echo fine > ok.txt": "allow", "git push --force origin main": "block"}


@confined
def test_secrets_in_home_cannot_be_read(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    home = Path(os.environ["HOME"])
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    (home / ".netrc").write_text("machine example.com login me password NETRC-SECRET\n")
    (home / "notes.txt").write_text("readable\n")
    new_task(capfd)
    script = f"cat '{home}/.ssh/id_ed25519'; cat '{home}/.netrc'; cat '{home}/notes.txt'"
    _code, said, step = _run(capfd, script)
    assert "PRIVATE KEY" not in said and "NETRC-SECRET" not in said and "readable" in said
    # (refused by Landlock; or, in the step's own /tmp, covered by an empty directory)
    assert "Permission denied" in said or "No such file" in said
    assert str(home / ".ssh") in step["sandbox"]["read_denied"]
    assert str(home / ".netrc") in step["sandbox"]["read_denied"]


@confined
def test_allow_write_and_agent_state_are_writable(
    inited: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    home = Path(os.environ["HOME"])
    extra = tmp_path / "shared-cache"
    extra.mkdir()
    set_config(sandbox={"allow_write": [str(extra), "~/.npm"]})  # ~/.npm is made for the step
    new_task(capfd)
    code, said, _ = _run(capfd, f"touch '{extra}/a' '{home}/.npm/b' && echo ok")
    assert code == 0, said
    assert (extra / "a").exists() and (home / ".npm" / "b").exists()
    code, said, _step = _run(capfd, f"touch '{home}/.cache-not-listed' && echo ok")
    assert code != 0


@confined
def test_without_network_tcp_fails(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """``sandbox.network: none``: no connection anywhere (an open network reaches bar's
    loopback; tests/sandbox/test_network.py has the allow-list)."""
    if landlock.abi_version() < 4 and namespace.net_available("/") is not None:
        pytest.skip("no network rules (Landlock ABI 4) and no network namespace here")
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        accepted = threading.Thread(target=lambda: _accept_all(server), daemon=True)
        accepted.start()
        connect = (
            f'{sys.executable} -c "import socket; socket.create_connection(('
            f"'127.0.0.1', {port}), timeout=5); print('connected')\""
        )
        new_task(capfd)
        _, said, step = _run(capfd, connect, "--network", "open")
        assert "connected" in said and step["sandbox"]["network"] is True
        set_config(sandbox={"network": False})  # (the old spelling of none)
        _code, said, step = _run(capfd, connect)
        # refused by Landlock, or by the step's own loopback, where nothing listens
        assert "connected" not in said
        assert "PermissionError" in said or "ConnectionRefusedError" in said
        assert step["sandbox"]["network"] is False


def _accept_all(server: socket.socket) -> None:
    server.settimeout(60)
    try:
        while True:
            conn, _ = server.accept()
            conn.close()
    except OSError:
        pass


@confined
def test_a_pty_step_is_confined_too(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    t = new_task(capfd)
    readme = inited / "README.md"
    res = bar_exe("run", "--pty", "--", "sh", "-c", f"echo planted >> '{readme}'", cwd=inited)
    assert res.code != 0
    assert readme.read_text() == "hello\n"
    assert ledger(t["id"])[-1]["sandbox"]["enabled"] is True


# --- turning it off, and kernels that cannot -----------------------------------------


def test_no_sandbox_runs_with_full_rights_and_says_so_in_the_step(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    new_task(capfd)
    outside = inited.parent / "outside.txt"
    outside.write_text("")
    code, said, step = _run(capfd, f"echo written >> '{outside}'", "--no-sandbox")
    assert code == 0 and outside.read_text() == "written\n"
    assert step["sandbox"] == {"enabled": False, "mechanism": None, "reason": "--no-sandbox"}
    set_config(sandbox={"enabled": False})
    code, said, step = _run(capfd, "true")
    assert step["sandbox"]["reason"] == "sandbox.enabled is false"
    assert "not confined" not in said


def test_where_the_kernel_cannot_confine_bar_says_so_once_and_records_it(
    inited: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(UNAVAILABLE_ENV, "1")
    t = new_task(capfd)
    code, said, step = _run(capfd, "echo hi")
    assert code == 0
    assert said.count("not confined") == 1
    assert step["sandbox"]["enabled"] is False and UNAVAILABLE_ENV in step["sandbox"]["reason"]
    set_config(sandbox={"required": True})
    res = bar(capfd, "run", "--no-pty", "--", "sh", "-c", "touch ran.txt")
    assert res.code == 11
    assert "cannot be confined" in res.err and "sandbox.required" in res.err
    assert not (worktree(t) / "ran.txt").exists()
    assert len(ledger(t["id"])) == 1


def test_sandbox_settings_are_checked(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    new_task(capfd)
    set_config(sandbox={"allow_write": ["relative/dir"]})
    res = bar(capfd, "run", "--no-pty", "--", "true")
    assert res.code == 8 and "sandbox.allow_write" in res.err and "relative/dir" in res.err


# --- helpers -------------------------------------------------------------------------


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()


def _tiny_wheel(folder: Path) -> Path:
    """A minimal wheel pip installs offline: a package with one module."""
    folder.mkdir()
    path = folder / "tinypkg-1.0-py3-none-any.whl"
    files = {
        "tinypkg/__init__.py": b"VALUE = 1\n",
        "tinypkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n",
        "tinypkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\n"
        b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append("tinypkg-1.0.dist-info/RECORD,,")
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        zf.writestr("tinypkg-1.0.dist-info/RECORD", "\n".join(record) + "\n")
    return path


def test_the_step_record_is_json_all_the_way(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    new_task(capfd)
    res = bar(capfd, "run", "--no-pty", "--json", "--", "true")
    assert res.code == 0
    assert json.loads(res.out)["sandbox"]["enabled"] is CONFINES


def test_status_says_whether_steps_run_confined(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    new_task(capfd)
    res = bar(capfd, "status", "--json")
    assert res.json()["sandbox"]["enabled"] is CONFINES
    set_config(sandbox={"enabled": False})
    res = bar(capfd, "status")
    assert "steps run unconfined: sandbox.enabled is false" in res.out


@confined
def test_bar_inside_a_step_reads_but_says_why_it_cannot_write(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    new_task(capfd)
    res = bar_exe(
        "run",
        "--no-pty",
        "--",
        "sh",
        "-c",
        "bar log -n 1 && bar run --no-wait -- true",
        cwd=inited,
        env={"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"},
    )
    assert res.code == 1
    assert "inside step 0001" in res.err and "read-only here" in res.err


@confined
def test_nothing_a_confined_step_starts_outlives_it(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    new_task(capfd)
    nap = f"300.{os.getpid()}"  # (this run's own: another copy of the suite may run)
    code, said, _ = _run(capfd, f"(setsid sleep {nap} >/dev/null 2>&1 &)")
    assert code == 0
    assert "stopped 1 process(es) the command left running" in said
    assert host_pids(b"sleep\x00" + nap.encode() + b"\x00") == []
    # one that ended before the step did is no process stopped (a zombie to reap)
    code, said, _ = _run(capfd, "(setsid true &); sleep 1")
    assert code == 0 and "stopped" not in said, said


@confined
def test_another_tasks_step_cannot_add_records_to_a_running_step(
    inited: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    victim = new_task(capfd, "victim")
    # (the step says it started on its output and waits for a line on its input: a
    # confined step has a /tmp of its own, where a mark would never reach the test)
    running = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "bar"),
            "run",
            "--task",
            "victim",
            "--no-pty",
            "--",
            "sh",
            "-c",
            "echo started; read line",
        ],
        cwd=inited,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert running.stdin is not None and running.stdout is not None
    try:
        assert running.stdout.readline() == b"started\n"
        socket_path = task_dir(victim["id"]) / "bar.sock"
        assert socket_path.exists()
        new_task(capfd, "attacker")
        forge = DATA / "forge_hook.py"
        res = bar(
            capfd,
            "run",
            "--task",
            "attacker",
            "--no-pty",
            "--",
            sys.executable,
            str(forge),
            str(socket_path),
        )
        assert "answered: none" in res.out, res.out + res.err
    finally:
        _, err = running.communicate(b"done\n", timeout=60)
    assert running.returncode == 0, err
    (step,) = ledger(victim["id"])
    assert step["policy_events"] == []


@confined
def test_a_confined_step_has_no_terminal_and_no_agent_sockets(
    inited: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSH_AUTH_SOCK", "/tmp/ssh-agent.sock")
    t = new_task(capfd)
    probe = (
        f'{sys.executable} -c "import os\n'
        "try: os.close(os.open('/dev/tty', os.O_RDWR)); print('terminal yes')\n"
        "except OSError: print('terminal no')\n"
        "print('session', os.getsid(0)); print('ssh agent', os.environ.get('SSH_AUTH_SOCK'))\""
    )
    code, said, _ = _run(capfd, probe)
    assert code == 0 and "terminal no" in said and "ssh agent None" in said
    (step,) = ledger(t["id"])
    if step["sandbox"]["processes"] == "shared":  # (in its own PID namespace, a session led
        assert f"session {os.getsid(0)}\n" not in said  # from outside shows as 0 there)


@confined
def test_a_step_cannot_move_another_tasks_branch(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    other = new_task(capfd, "other")
    other_ref = inited / ".git" / "refs" / "heads" / other["branch"]
    before = _git(inited, "rev-parse", other["branch"])
    new_task(capfd, "mine")
    code, said, step = _run(
        capfd, f"git commit -q --allow-empty -m planted && git rev-parse HEAD > '{other_ref}'"
    )
    assert code == 0, said
    assert _git(inited, "rev-parse", other["branch"]) == before
    assert any(
        other["branch"] in e["matched"] for e in step["policy_events"] if e["rule"] == "bar:guard"
    )


def test_doctor_leaves_a_steps_temporary_files_and_their_links_alone(
    inited: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    t = new_task(capfd)
    secret = tmp_path / "developers-file"
    secret.write_text("x")
    secret.chmod(0o644)
    tmp = task_dir(t["id"]) / "tmp"
    tmp.mkdir(exist_ok=True)
    (tmp / "link").symlink_to(tmp_path)
    (tmp / "file").write_text("a step's")
    (tmp / "file").chmod(0o644)
    assert bar(capfd, "doctor", "--repair").code == 0
    assert secret.stat().st_mode & 0o777 == 0o644
    assert (tmp / "file").stat().st_mode & 0o777 == 0o644


@confined
def test_an_object_rewritten_in_place_is_moved_aside_and_never_applied(
    inited: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the kernel offers no namespaces, the object store itself is writable in a
    step (it commits); an earlier step's blob rewritten there must not reach the
    developer's checkout as if it were reviewed (``tests/sandbox/test_quarantine.py``:
    with namespaces, no step can rewrite it)."""
    monkeypatch.setenv(namespace.UNAVAILABLE_ENV, "1")
    new_task(capfd)
    assert _run(capfd, "echo 'print(1)' > good.py")[0] == 0
    blob = _git(inited, "rev-parse", f"{ledger(_task_id())[-1]['snapshot']}:good.py")
    loose = inited / ".git" / "objects" / blob[:2] / blob[2:]
    assert loose.exists()
    evil = DATA / "rewrite_object.py"
    code, said, step = _run(capfd, f"{sys.executable} {evil} '{loose}'")
    assert code == 0, said
    guarded = [e["matched"] for e in step["policy_events"] if e["rule"] == "bar:guard"]
    assert any(blob in g and "stored it again" in g for g in guarded), guarded
    # the rewritten object was moved aside and stored again from the worktree's file
    assert _git(inited, "cat-file", "blob", blob) == "print(1)"
    assert bar(capfd, "apply", "-m", "apply").code == 0
    assert (inited / "good.py").read_text() == "print(1)\n"


_LINKS = ["a", "a/b", "a/b/c", "d", "d/e", "l1", "a/l2", "loop1", "loop2", "dangling"]


@pytest.mark.parametrize("seed", range(12))
def test_the_paths_a_confinement_resolves_are_realpaths(tmp_path: Path, seed: int) -> None:
    # the kernel's resolution (an O_PATH descriptor's name) against os.path.realpath, on
    # random trees of directories, files, relative and absolute links, loops and danglers;
    # a link loop is left out (the kernel cannot resolve it, nor allow or hide it)
    import random

    from bar.sandbox import _real

    rng = random.Random(seed)
    for name in ("a/b/c", "d/e"):
        (tmp_path / name).mkdir(parents=True, exist_ok=True)
    (tmp_path / "a" / "f").write_text("x")
    targets = ["a", "a/b", "d/e", "a/f", "../d", "nowhere", str(tmp_path / "a" / "b")]
    for name in ("l1", "a/l2", "d/l3"):
        os.symlink(rng.choice(targets), tmp_path / name)
    os.symlink("loop2", tmp_path / "loop1")
    os.symlink("loop1", tmp_path / "loop2")
    os.symlink("missing/x", tmp_path / "dangling")
    asked = [tmp_path / rng.choice([*_LINKS, "l1/c", "a/l2/x", "d/l3/..", "a/f"]) for _ in range(8)]
    expected = []
    for path in asked:
        try:  # (strict: a loop, like a missing path, resolves to nothing)
            expected.append(os.path.realpath(path, strict=True))
        except OSError:
            continue
    assert _real(tuple(asked)) == expected
