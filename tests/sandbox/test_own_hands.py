"""bar's own hands (docs/sandbox.md, "What bar does on the step's behalf"): what a confined
step writes never steers what bar does unconfined, and nothing of the step reaches past it.
Each test performs the attack for real inside ``bar run`` and checks that it now fails to
escape."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import (
    BAR_EXE,
    bar,
    bar_home,
    files_on_disk,
    host_pids,
    ledger,
    new_task,
    set_config,
    task_dir,
    worktree,
)

from bar import git as bar_git
from bar.git import fifos
from bar.history import blame as task_blame
from bar.history import side_index
from bar.sandbox import UNAVAILABLE_ENV, landlock, namespace
from conftest import git

CONFINES = landlock.abi_version() >= 1 and not os.environ.get(UNAVAILABLE_ENV)
OWN_PIDS = CONFINES and namespace.pids_available("/") is None
confined = pytest.mark.skipif(not CONFINES, reason="the kernel cannot confine here")
own_pids = pytest.mark.skipif(not OWN_PIDS, reason="no PID namespace for a step here")


@pytest.fixture
def inited(repo: Path, capfd: pytest.CaptureFixture[str]) -> Path:
    assert bar(capfd, "init").code == 0
    set_config(policy={"enabled": False})  # the kernel, not the policy, is under test
    return repo


def _run(capfd: pytest.CaptureFixture[str], script: str) -> tuple[int, str]:
    res = bar(capfd, "run", "--no-pty", "--", "sh", "-c", script)
    return res.code, res.out + res.err


# --- 1. bar's git runs nothing a step planted -------------------------------------------

# plants a promisor remote whose transport runs a program, in the worktree's own config
# (read by git since the repository sets extensions.worktreeConfig), and points the task
# branch at an object nobody has: git "fetches" a missing object from a promisor remote
_PLANT = (
    "git config --worktree remote.x.promisor true && "
    "git config --worktree remote.x.url \"ext::sh -c touch% '$0'\" && "
    "git config --worktree protocol.ext.allow always && "
    'ref=$(git symbolic-ref HEAD) && echo {missing} > "$(git rev-parse --git-common-dir)/$ref"; '
    "echo planted=$?"
)
_MISSING = "0123456789abcdef0123456789abcdef01234567"


@confined
@pytest.mark.parametrize("namespaces", ["own", "none"])
def test_a_planted_promisor_remote_never_runs_in_bar_s_git(
    namespaces: str,
    inited: Path,
    capfd: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    git(inited, "config", "extensions.worktreeConfig", "true")  # (as git sparse-checkout does)
    if namespaces == "none":  # the step can write its config.worktree: bar's git must hold
        monkeypatch.setenv(namespace.UNAVAILABLE_ENV, "1")
    task = new_task(capfd)
    mark = tmp_path / "pwned"
    script = _PLANT.format(missing=_MISSING)
    res = bar(capfd, "run", "--no-pty", "--", "sh", "-c", script, str(mark))
    said = res.out + res.err
    if namespaces == "own":
        assert "planted=0" not in said  # config.worktree is read-only to the step
    # bar works on the task afterwards: snapshots, status, log, another step
    for args in (("status",), ("log",), ("diff",), ("run", "--", "true")):
        bar(capfd, *args)
    assert not mark.exists(), "bar's git ran a program the step planted"
    if namespaces == "none":
        # the guard took the planted file away after the step; while the step ran, bar's
        # git read it: put it back and ask bar's git (as a checkpoint would), then plain
        # git, which runs the planted program (the attack is live)
        admin = Path(git(worktree(task), "rev-parse", "--absolute-git-dir").strip())
        (planted,) = (
            p for p in (task_dir(task["id"]) / "tampered").iterdir() if "config" in p.name
        )
        assert "promisor" in planted.read_text()
        (admin / "config.worktree").write_bytes(planted.read_bytes())
        for args in (("cat-file", "-t", _MISSING), ("rev-list", "--objects", _MISSING)):
            bar_git.git(worktree(task), *args, check=False)
        assert not mark.exists(), "bar's git ran a program the step planted"
        subprocess.run(
            ["git", "-C", str(worktree(task)), "cat-file", "-t", _MISSING], capture_output=True
        )
        assert mark.exists(), "the planted remote did not run under plain git either"
        (admin / "config.worktree").unlink()


# a step makes a nested repository whose own configuration and attributes name a filter
_NESTED_FILTER = (
    "mkdir nest && cd nest && git init -q && echo a > f && git add f && git commit -qm c && "
    "git config filter.pw.clean \"sh -c 'echo PWNED >> $1; cat'\" && "
    "echo '* filter=pw' > .git/info/attributes && echo planted=$?"
)


@confined
@pytest.mark.parametrize("speed", ["fast", "slow"])
def test_a_filter_planted_in_a_nested_repository_never_runs_in_bar_s_git(
    speed: str,
    inited: Path,
    capfd: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``git add`` asks a gitlink whether it is dirty with a ``git status`` inside the
    nested repository, which reads that repository's configuration and attributes (the
    step's): bar's looks, steps, rollbacks and undos never run its filter, and the
    nested repository is still recorded by the commit it is at."""
    if speed == "slow":
        monkeypatch.setenv("BAR_FAST", "0")
    task = new_task(capfd)
    mark = tmp_path / "pwned"
    code, said = _run(capfd, _NESTED_FILTER.replace("$1", str(mark)))
    assert code == 0 and "planted=0" in said, said
    code, said = _run(capfd, "sleep 1; echo b > nest/f; echo x > top")
    assert code == 0, said
    bar(capfd, "status")
    (worktree(task) / "nest" / "f").write_text("by hand\n")
    for args in (("run", "--", "true"), ("rollback", "--to", "1"), ("undo",), ("status",)):
        bar(capfd, *args)
    assert not mark.exists(), "bar's git ran a filter the step planted in a nested repository"
    wt = worktree(task)
    nested_head = git(wt / "nest", "rev-parse", "HEAD").strip()
    recorded = git(wt, "ls-tree", ledger(task["id"])[-1]["snapshot"], "nest").split()
    assert recorded[:3] == ["160000", "commit", nested_head]


# a step swaps a file of its worktree's admin directory for a link to a file of the
# developer's, then commits (with a message that is a shell command)
_LINK_IN_ADMIN = (
    "admin=$(git rev-parse --absolute-git-dir) && echo x > f && git add f && "
    'git commit -qm "c; echo PWNED > $1 #" && rm -rf "$admin/$2" && '
    'ln -s "$3" "$admin/$2" && echo linked=$?'
)


@confined
@pytest.mark.parametrize("name", ["logs/HEAD", "index", "ORIG_HEAD", "logs"])
def test_a_link_in_the_worktree_s_admin_directory_is_never_written_through(
    name: str, inited: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """git writes the files of a worktree's admin directory through a link (its lock on
    ``index``; the ``HEAD`` reflog it appends to when the branch moves): bar's own git,
    bringing the step's commit in, rolling back and applying, never writes where a link
    the step left points (``~/.bashrc``; a file it may not even read); the link is moved
    aside and said."""
    task = new_task(capfd)
    outside = tmp_path / "developer"
    outside.mkdir()
    bashrc, absent = outside / "bashrc", outside / "authorized_keys"
    bashrc.write_text("# the developer's\n")
    target = {"index": absent, "logs": outside}.get(name, bashrc)
    code, said = _run(
        capfd,
        _LINK_IN_ADMIN.replace("$1", str(tmp_path / "pwned"))
        .replace("$2", name)
        .replace("$3", str(target)),
    )
    assert code == 0 and "linked=0" in said, said
    assert f"the worktree's {name} was a link" in said
    for args in (("rollback", "--hard", "--to", "base"), ("undo",), ("apply", "--mode", "merge")):
        bar(capfd, *args)
    assert bashrc.read_text() == "# the developer's\n"
    assert sorted(p.name for p in outside.iterdir()) == ["bashrc"]
    admin = Path(git(worktree(task), "rev-parse", "--absolute-git-dir").strip())
    assert not (admin / name).is_symlink()
    assert any(
        name.replace("/", "_") in p.name for p in (task_dir(task["id"]) / "tampered").iterdir()
    )


def test_bar_s_git_reaches_no_remote_and_signs_nothing(tmp_path: Path) -> None:
    """The fixed configuration of bar's own git, whatever the repository's says."""
    repo = tmp_path / "r"
    git(tmp_path, "init", "-q", str(repo))
    mark = tmp_path / "ran"
    git(repo, "config", "remote.x.promisor", "true")
    git(repo, "config", "remote.x.url", f"ext::sh -c touch% {mark}")
    git(repo, "config", "protocol.ext.allow", "always")
    git(repo, "config", "protocol.file.allow", "always")
    res = bar_git.git(repo, "cat-file", "-t", _MISSING, check=False)
    assert res.returncode != 0 and not mark.exists()
    assert bar_git.NO_TRANSPORT["GIT_ALLOW_PROTOCOL"] == ""
    git(repo, "config", "commit.gpgSign", "true")
    git(repo, "config", "gpg.program", f"sh -c 'touch {mark}'")
    tree = bar_git.out(repo, "write-tree")
    assert bar_git.out(repo, "commit-tree", tree, "-m", "m", env=bar_git.BAR_IDENTITY)
    assert not mark.exists()


# --- 3. nothing of a step outlives it, however deep -------------------------------------

_CHAIN = """
import os, sys, time
depth, ready = int(sys.argv[1]), sys.argv[2]
for level in range(depth):
    child = os.fork()
    if child:
        if level == 0 and sys.argv[3] == "leave":
            while not os.path.exists(ready):
                time.sleep(0.02)
            os._exit(0)
        os.waitpid(child, 0)
        os._exit(0)
open(ready, "w").close()
time.sleep(600)
"""


@own_pids
def test_a_deep_chain_of_processes_dies_with_its_step(
    inited: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    task = new_task(capfd)
    script = tmp_path / "chain.py"
    script.write_text(_CHAIN)
    marker = f"chain-of-320-{os.getpid()}"
    res = bar(
        capfd, "run", "--no-pty", "--", sys.executable, str(script), "320", "ready", "leave", marker
    )
    assert res.code == 0, res.err
    assert "stopped 320 process(es)" in res.err, res.err
    assert host_pids(marker.encode()) == []
    assert ledger(task["id"])[-1]["sandbox"]["processes"] == "own"


@own_pids
def test_a_deep_chain_dies_with_a_bar_killed_by_sigkill(
    inited: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    task = new_task(capfd)
    script = tmp_path / "chain.py"
    script.write_text(_CHAIN)
    marker = f"chain-of-260-{os.getpid()}"
    proc = subprocess.Popen(
        [
            BAR_EXE,
            "run",
            "--no-pty",
            "--",
            sys.executable,
            str(script),
            "260",
            "ready",
            "stay",
            marker,
        ],
        cwd=inited,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while not (worktree(task) / "ready").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(host_pids(marker.encode())) >= 261  # (bar, its holder and init too)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    deadline = time.monotonic() + 60
    while host_pids(marker.encode()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert host_pids(marker.encode()) == []


# --- 4. a step sees no other process ----------------------------------------------------


@own_pids
def test_a_step_reads_no_other_process_s_command_line(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    new_task(capfd)
    secret = "TOKEN-7f3a9c-in-a-command-line"
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", secret])
    try:
        code, said = _run(
            capfd, "cat /proc/[0-9]*/cmdline | tr '\\0' ' '; echo; ls /proc | grep -c '^[0-9]'"
        )
        assert code == 0, said
        assert secret not in said
        # only the step's own: init, sh, ls, and grep if sh forked it before ls had read /proc
        assert said.split("\n")[1].strip() in {"3", "4", "5", "6"}, said
    finally:
        other.kill()
        other.wait()


# --- 7. no capability, no setuid bit ----------------------------------------------------


@confined
def test_a_step_holds_no_capability_and_sets_no_setuid_bit(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    new_task(capfd)
    script = (
        "grep -E '^Cap(Prm|Eff|Bnd|Amb)' /proc/self/status; grep NoNewPrivs /proc/self/status; "
        "cp /bin/true mine && chmod 755 mine && echo plain=$?; chmod 4755 mine; echo setuid=$?; "
        "chmod g+s mine; echo setgid=$?; "
        f"{sys.executable} -c \"import os; os.open('made', os.O_CREAT | os.O_WRONLY, 0o4755)\"; "
        "echo created=$?; ls -l mine"
    )
    _code, said = _run(capfd, script)
    assert "plain=0" in said and "setuid=1" in said and "setgid=1" in said, said
    assert "created=1" in said and "Operation not permitted" in said
    assert "NoNewPrivs:\t1" in said
    for line in said.splitlines():
        if line.startswith(("CapPrm", "CapEff", "CapBnd", "CapAmb")):
            assert line.split()[1] == "0000000000000000", line
    assert "-rwxr-xr-x" in said


# --- 9. a /tmp of its own ---------------------------------------------------------------


@own_pids
def test_a_step_has_a_tmp_of_its_own(
    inited: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    new_task(capfd)
    other = Path("/tmp") / f"bar-other-clone-{os.getpid()}"
    other.mkdir(exist_ok=True)
    (other / "file").write_text("theirs\n")
    try:
        script = (
            f"ls {other}; echo listed=$?; echo mine > {other}/file; echo wrote=$?; "
            f"echo scratch > /tmp/scratch-{os.getpid()} && cat /tmp/scratch-{os.getpid()}; "
            f'echo "$TMPDIR"; echo x > {tmp_path}/outside; echo outside=$?'
        )
        _code, said = _run(capfd, script)
        assert "listed=0" not in said and "wrote=0" not in said, said
        assert "scratch" in said and "/tmp\n" in said
        assert "outside=0" not in said  # (shown again read-only: the test's own directory)
        assert (other / "file").read_text() == "theirs\n"
        assert not Path(f"/tmp/scratch-{os.getpid()}").exists()
    finally:
        (other / "file").unlink()
        other.rmdir()


@own_pids
def test_a_step_has_its_own_shared_memory_and_var_tmp(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """``/dev/shm`` holds the shared memory of the developer's running programs (a
    browser's, a database's), open to whoever may write the directory: the step's is its
    own, as its ``/tmp`` and ``/var/tmp`` are (which stay writable with the bar home in
    ``/tmp``, as this test's is)."""
    new_task(capfd)
    theirs = Path("/dev/shm") / f"bar-other-program-{os.getpid()}"
    theirs.write_text("theirs\n")
    mine = f"bar-step-{os.getpid()}"
    try:
        script = (
            f"ls /dev/shm; echo mine > {theirs}; "
            f"echo s > /dev/shm/{mine} && echo v > /var/tmp/{mine} && cat /dev/shm/{mine}; "
            f"{sys.executable} -c 'import multiprocessing as m; m.Lock().acquire(); "
            'print("semaphore: held")\''
        )
        code, said = _run(capfd, script)
        assert code == 0, said
        assert theirs.name not in said, said  # (its own: what it writes there is its own)
        assert "s\n" in said and "semaphore: held" in said, said
        assert theirs.read_text() == "theirs\n"
        assert not (Path("/dev/shm") / mine).exists() and not (Path("/var/tmp") / mine).exists()
    finally:
        theirs.unlink()


@own_pids
def test_a_path_that_leaves_a_shared_directory_by_dot_dot_is_no_entry_of_it(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """``/tmp/../etc/hostname`` on the command line names no entry ``..`` of /tmp to show
    again (bound over the task's own, it failed the step's set-up)."""
    new_task(capfd)
    res = bar(capfd, "run", "--no-pty", "--", "ls", "/tmp/../etc/hostname", "/dev/shm/../null")
    assert res.code == 0 and "/tmp/../etc/hostname" in res.out, res.err


@own_pids
def test_a_step_sees_no_system_v_shared_memory_of_the_machine(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A program's System V shared memory (a database's, an X server's) is out of the
    step's reach, as its POSIX shared memory in /dev/shm is."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    key = 0x0BA50000 + os.getpid() % 0xFFFF
    shmid = libc.shmget(key, 4096, 0o1600)  # IPC_CREAT | 0600
    assert shmid >= 0, os.strerror(ctypes.get_errno())
    try:
        new_task(capfd)
        code, said = _run(capfd, "ipcs -m")
        assert code == 0, said
        assert f"{key:#010x}" not in said and str(shmid) not in said.split(), said
    finally:
        libc.shmctl(shmid, 0, None)  # IPC_RMID


@own_pids
def test_a_step_reads_nothing_another_tasks_steps_left_in_their_own_temporary_directories(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Another task's /tmp, /var/tmp and /dev/shm are directories in the bar home, which a
    step may read: they are hidden from it, as the machine's are."""
    first = new_task(capfd, "first")
    assert _run(capfd, "for d in /tmp /var/tmp /dev/shm; do echo s3cret > $d/left; done")[0] == 0
    new_task(capfd, "second")
    where = task_dir(first["id"])
    code, said = _run(capfd, f"cat {where}/tmp/left {where}/var-tmp/left {where}/shm/left")
    assert code != 0 and "s3cret" not in said, said
    assert (where / "shm" / "left").read_text() == "s3cret\n"  # (left where it was)


@own_pids
def test_a_step_reaches_no_socket_of_the_developers_session(
    inited: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The developer's runtime directory holds the sockets of their session: the bus
    (through which systemd starts any program as the developer), the gpg and ssh agents.
    Landlock keeps a directory from being read, not a socket in it from being connected
    to: the step's mount namespace covers it (and every read-denied path)."""
    import pwd
    import socket
    import tempfile
    import threading

    home = pwd.getpwuid(os.getuid()).pw_dir  # (outside /tmp, as a real one is)
    if not os.access(home, os.W_OK):
        pytest.skip(f"{home} is not writable here")
    runtime = Path(tempfile.mkdtemp(dir=home, prefix=".bar-test-runtime-"))
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(runtime / "bus"))
    server.listen(4)
    server.settimeout(0.2)
    stop = threading.Event()

    def answer() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            conn.sendall(b"reached the session bus\n")
            conn.close()

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    try:
        new_task(capfd)
        script = (
            f"{sys.executable} -c 'import os, socket; s = socket.socket(socket.AF_UNIX); "
            f'print("env:", os.environ.get("XDG_RUNTIME_DIR")); s.connect("{runtime}/bus"); '
            "print(s.recv(100))'"
        )
        _code, said = _run(capfd, script)
        assert "reached" not in said and "Permission denied" in said, said
        assert "env: None" in said, said
    finally:
        stop.set()
        thread.join(5)
        server.close()
        (runtime / "bus").unlink()
        runtime.rmdir()


@own_pids
def test_a_step_reaches_no_container_engine(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A container engine's socket (docker's) starts, for whoever may connect, a container
    that mounts the machine's / writable: the developer may, in its group, and a step
    must not. A stand-in listens where docker's would."""
    import socket

    from bar.sandbox.plan import DAEMON_SOCKETS

    where = Path(DAEMON_SOCKETS[0])
    if where.exists() or not os.access(where.parent, os.W_OK):
        pytest.skip(f"{where} is there already, or {where.parent} is not ours to write")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(where))
    server.listen(4)
    try:
        new_task(capfd)
        script = (
            f"{sys.executable} -c 'import socket; s = socket.socket(socket.AF_UNIX); "
            f'print(s.connect("{where}") or "connected")\''
        )
        _code, said = _run(capfd, script)
        assert "connected" not in said and "Permission denied" in said, said
    finally:
        server.close()
        where.unlink()


@own_pids
def test_a_read_denied_folder_that_holds_the_worktree_is_not_covered(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """``sandbox.deny_read`` may name a folder the step's worktree is in: no cover hides
    the worktree with it (the step could not even start: an internal error)."""
    task = new_task(capfd)
    parent = worktree(task).parent
    set_config(sandbox={"deny_read": [str(parent)]})
    code, said = _run(capfd, "pwd; echo made > here.txt && cat here.txt")
    assert code == 0 and str(worktree(task)) in said and "made" in said, said


def _own_mounts() -> bool:
    """This machine lets an ordinary user make a mount namespace of their own, in which
    a test mounts what a developer's machine would have (a volume, a tmpfs)."""
    probe = ["unshare", "--user", "--map-current-user", "--mount", "true"]
    try:
        return subprocess.run(probe, capture_output=True).returncode == 0
    except OSError:
        return False


@own_pids
@pytest.mark.skipif(not _own_mounts(), reason="no mount namespace of one's own here")
def test_a_mount_inside_what_a_step_is_shown_again_is_read_only_too(
    inited: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """What the step's own /tmp shows again of the real one (the way to its worktree,
    the repository, the bar home) is read-only all the way down: a volume mounted inside
    it (a container's, a tmpfs) too, not only the directory shown."""
    new_task(capfd)
    volume = tmp_path / "volume"
    volume.mkdir()
    script = (
        f"mount -t tmpfs none {volume} && echo theirs > {volume}/f && "
        f"{BAR_EXE} run --no-pty -- sh -c 'echo mine > {volume}/f; echo wrote=$?'; "
        f"echo now=$(cat {volume}/f)"
    )
    proc = subprocess.run(
        ["unshare", "--user", "--map-current-user", "--mount", "sh", "-c", script],
        capture_output=True,
        text=True,
    )
    said = proc.stdout + proc.stderr
    assert "wrote=0" not in said and "now=theirs" in said, said
    assert "Read-only file system" in said, said


@confined
def test_required_confinement_refuses_a_kernel_without_pid_namespaces(
    inited: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    new_task(capfd)
    monkeypatch.setenv(namespace.NO_PIDS_ENV, "1")
    set_config(policy={"enabled": False}, sandbox={"required": True})
    res = bar(capfd, "run", "--", "true")
    assert res.code != 0 and "processes and a /tmp of its own" in res.err
    set_config(policy={"enabled": False}, sandbox={"required": False})
    res = bar(capfd, "run", "--json", "--", "true")
    assert res.code == 0


# --- 5. an agent's settings do not slip onto a branch -----------------------------------


def test_apply_names_every_agent_settings_file_it_brings(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    new_task(capfd)
    script = (
        "mkdir -p .claude .codex .gemini && echo '{\"disableAllHooks\": true}' > "
        ".claude/settings.local.json && echo 'x = 1' > .codex/config.toml && "
        "echo '{}' > .gemini/settings.json && echo '{}' > .mcp.json && echo work > work.txt"
    )
    assert _run(capfd, script)[0] == 0
    res = bar(capfd, "apply", "--dry-run", "--json")
    said = res.err
    for path in (".claude/settings.local.json", ".codex/config.toml", ".gemini/settings.json"):
        assert path in said
    assert "would change the agents' settings for the repository" in said
    assert "Claude Code's settings" in said and "the MCP servers an agent starts" in said
    res = bar(capfd, "apply", "-m", "work")
    assert res.code == 0
    assert "changes the agents' settings for the repository" in res.err
    assert "work.txt" not in res.err.split("settings for the repository")[1]


# --- 9. a compression bomb does not reach the repository --------------------------------

_BOMB = """
import os, subprocess, zlib
store = subprocess.check_output(["git", "rev-parse", "--git-path", "objects"], text=True).strip()
size = 96 << 20
packer = zlib.compressobj(9)
data = packer.compress(b"blob %d\\0" % size)
zeros = bytes(1 << 20)
for _ in range(size >> 20):
    data += packer.compress(zeros)
data += packer.flush()
for n in range(3):
    name = "%040x" % (0xb0b0 + n)
    os.makedirs(os.path.join(store, name[:2]), exist_ok=True)
    with open(os.path.join(store, name[:2], name[2:]), "wb") as f:
        f.write(data)
print("bombs", len(data))
"""


# forks sleeping children until one fork fails or N are made; says how many it made
_FORKS = """
import os, sys, time
made = 0
for _ in range(int(sys.argv[1])):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    made += 1
print("made", made, flush=True)
"""


@own_pids
def test_a_fork_bomb_stops_at_the_step_s_process_limit(
    inited: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``sandbox.max_processes`` bounds a step's processes and threads, counted in the
    step's own user namespace (its own alone, not the developer's others), and whatever
    it made dies with the step. The kernel exempts uid 0 from the count: run as root,
    the limit is seen set in the step."""
    task = new_task(capfd)
    set_config(sandbox={"max_processes": 40})
    script = tmp_path / "forks.py"
    script.write_text(_FORKS)
    res = bar(capfd, "run", "--no-pty", "--", sys.executable, str(script), "200")
    made = int(res.out.split("made ")[1].split()[0])
    assert ledger(task["id"])[-1]["sandbox"]["max_processes"] == 40
    assert f"stopped {made} process(es)" in res.err, res.err
    if os.getuid() != 0:
        assert made < 40, made
    res = bar(capfd, "run", "--no-pty", "--", "grep", "Max processes", "/proc/self/limits")
    assert res.out.split()[2:4] == ["40", "40"], res.out
    set_config(sandbox={"max_processes": 0})  # (none of bar's: the developer's own stands)
    res = bar(capfd, "run", "--no-pty", "--", "grep", "Max processes", "/proc/self/limits")
    assert res.out.split()[2] != "40" and "max_processes" not in ledger(task["id"])[-1]["sandbox"]


@own_pids
def test_a_compression_bomb_is_refused_unread(
    inited: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    new_task(capfd)
    script = tmp_path / "bomb.py"
    script.write_text(_BOMB)
    res = bar(capfd, "run", "--no-pty", "--", sys.executable, str(script))
    assert "bombs" in res.out + res.err
    assert res.err.count("a compression bomb") == 3, res.err
    for n in range(3):
        name = "%040x" % (0xB0B0 + n)
        assert not (inited / ".git" / "objects" / name[:2] / name[2:]).exists()


@pytest.mark.parametrize("speed", ["fast", "slow"])
def test_a_file_too_large_to_record_leaves_the_task_working(
    speed: str,
    inited: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A step makes files of 1.1 GiB at no cost (sparse): bar records the rest of the
    step, says which it left out, and the next steps record as before (a patch of more
    than 2 GiB fails in git itself: the task recorded no step again); a rollback puts
    them aside, never deletes them."""
    if speed == "slow":
        monkeypatch.setenv("BAR_FAST", "0")
    task = new_task(capfd)
    size = "1100M"
    res = bar(
        capfd,
        "run",
        "--no-pty",
        "--",
        "sh",
        "-c",
        f"truncate -s {size} big.bin && mkdir d && truncate -s {size} d/also.bin && echo s > small"
        f" && truncate -s {size} README.md",
    )
    assert res.code == 0, res.err
    assert "not recorded, larger than 1.0 GiB" in res.err
    assert "README.md, big.bin, d/also.bin" in res.err
    # (a file the base holds, grown so large: recorded gone, never hashed)
    assert ledger(task["id"])[-1]["diff_stat"]["file_list"] == ["README.md", "small"]
    res = bar(capfd, "run", "--no-pty", "--", "sh", "-c", "echo t > tiny")
    assert res.code == 0 and ledger(task["id"])[-1]["diff_stat"]["file_list"] == ["tiny"]
    assert bar(capfd, "rollback", "--to", "base").code == 0
    wt = worktree(task)
    kept = [p.name for p in (task_dir(task["id"]) / "trash").rglob("*.bin")]
    assert sorted(kept + [p.name for p in wt.rglob("*.bin")]) == ["also.bin", "big.bin"]
    assert (wt / "README.md").read_text() == "hello\n"


def _holes_seen(folder: Path, *, given: bool = False) -> bool:
    """Whether the file system of ``folder`` says where a sparse file's holes are (with
    ``given``: also that space ``fallocate`` gave holds no data)."""
    probe = folder / ".holes-probe"
    with open(probe, "wb") as f:
        if given:
            os.posix_fallocate(f.fileno(), 0, 1 << 20)
        else:
            f.truncate(1 << 20)
    try:
        with open(probe, "rb") as f:
            return os.lseek(f.fileno(), 0, os.SEEK_HOLE) == 0
    finally:
        probe.unlink()


@pytest.mark.parametrize("speed", ["fast", "slow"])
def test_a_file_mostly_of_holes_is_not_recorded(
    speed: str,
    inited: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A sparse file costs a step nothing (``truncate -s 1000M``, ``fallocate``) and cost
    bar seconds to hash, diff and roll back, each one: past 64 KiB, a file less than
    half written is not recorded, and the look says so; a small one, or one half
    written, is. Once written for the most part, it is recorded like any file."""
    if not _holes_seen(inited):
        pytest.skip("this file system does not say where a file's holes are")
    if speed == "slow":
        monkeypatch.setenv("BAR_FAST", "0")
    task = new_task(capfd)
    script = (
        "truncate -s 10M holes.bin && mkdir d && truncate -s 200K d/holes.bin"
        " && truncate -s 60K tiny.bin && head -c 100000 /dev/urandom > dense.bin"
        " && truncate -s 120K half.bin"
        " && head -c 100000 /dev/urandom | dd of=half.bin conv=notrunc 2>/dev/null"
    )
    given = _holes_seen(inited, given=True)
    if given:  # (space given, not written: as cheap to make as a hole)
        script += " && fallocate -l 1M given.bin"
    res = bar(capfd, "run", "--no-pty", "--", "sh", "-c", script)
    assert res.code == 0, res.err
    assert "not recorded, mostly holes" in res.err
    assert ("d/holes.bin, given.bin, holes.bin" if given else "d/holes.bin, holes.bin") in res.err
    listed = ledger(task["id"])[-1]["diff_stat"]["file_list"]
    assert listed == ["dense.bin", "half.bin", "tiny.bin"]
    fill = "head -c 6000000 /dev/urandom | dd of=holes.bin conv=notrunc 2>/dev/null"
    res = bar(capfd, "run", "--no-pty", "--", "sh", "-c", fill)
    assert res.code == 0 and ledger(task["id"])[-1]["diff_stat"]["file_list"] == ["holes.bin"]
    assert bar(capfd, "rollback", "--to", "base").code == 0
    wt = worktree(task)
    assert not (wt / "holes.bin").exists() and not (wt / "dense.bin").exists()
    kept = [p.name for p in (task_dir(task["id"]) / "trash").rglob("holes.bin")]
    assert kept + [p.name for p in wt.rglob("holes.bin")] == ["holes.bin"]  # (d/holes.bin)


@pytest.mark.parametrize("speed", ["fast", "stamps", "slow"])
def test_a_file_of_many_names_is_not_recorded(
    speed: str,
    inited: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A hard link costs a step nothing, and git reads a file once for each of its
    names (100 links to a file of 100 MB: 10 GB hashed). Past 64 KiB, a file of more
    than two names is not recorded, and the look says so; a small one is, each name.
    A name becomes recordable when another name of its file goes, with no event on
    itself: every way of looking (the watcher, the directories' stamps alone, the
    whole look) records it then, in that step."""
    if speed == "slow":
        monkeypatch.setenv("BAR_FAST", "0")
    elif speed == "stamps":
        monkeypatch.setenv("BAR_WATCHER_IDLE", "0")
    task = new_task(capfd)

    def step(script: str) -> tuple[list[str], str]:
        res = bar(capfd, "run", "--no-pty", "--", "sh", "-c", script)
        assert res.code == 0, res.err
        return ledger(task["id"])[-1]["diff_stat"]["file_list"], res.err

    made = (
        "head -c 200000 /dev/urandom > big.bin && mkdir d"
        " && for n in d/one two three; do ln big.bin $n; done"
        " && echo small > tiny.txt && ln tiny.txt tiny2.txt && ln tiny.txt tiny3.txt"
    )
    listed, said = step(made)
    assert listed == ["tiny.txt", "tiny2.txt", "tiny3.txt"]
    assert "not recorded, hard links" in said and "big.bin, d/one, three, two" in said
    # bar status says which files no step records, and why, on its own line and in JSON
    shown = bar(capfd, "status")
    out = shown.out
    assert "changes   none unrecorded" in out
    assert "left out  4 files not recorded (hard links): big.bin, d/one, three, two" in out
    assert "not recorded" not in shown.err  # (said once: not warned of too)
    left_out = json.loads(bar(capfd, "status", "--json").out)["left_out"]
    assert left_out == {n: "links" for n in ("big.bin", "d/one", "three", "two")}
    with (worktree(task) / "tiny.txt").open("a") as f:  # (a hand edit: a whole look)
        f.write("more\n")
    assert "left out  4 files" in bar(capfd, "status").out
    listed, _ = step("rm d/one two")  # (two names left: recorded, both)
    assert listed == ["big.bin", "three"]
    listed, said = step("ln three four && ln three five")
    assert listed == [] and "hard links" in said and "nothing): five, four" in said
    listed, said = step("rm five big.bin")  # (three and four left)
    assert listed == ["big.bin", "four"], said  # (nothing was said of four itself)
    assert json.loads(bar(capfd, "status", "--json").out)["left_out"] == {}
    assert "left out" not in bar(capfd, "status").out
    wt = worktree(task)
    assert bar(capfd, "rollback", "--to", "base").code == 0
    assert sorted(files_on_disk(wt)) == ["README.md"]
    assert bar(capfd, "undo").code == 0
    assert (wt / "four").read_bytes() == (wt / "three").read_bytes()
    assert (wt / "four").stat().st_size == 200000
    # each file left out is a pathspec git matches against every file at every look:
    # past side_index.MOST_LEFT_OUT, nothing is recorded until they are gone
    most = side_index.MOST_LEFT_OUT
    make = f"mkdir many && for i in $(seq {most + 1}); do ln four many/$i; done && echo z > z"
    res = bar(capfd, "run", "--no-pty", "--", "sh", "-c", make)
    # (three and four, recorded while they had fewer names, stay recorded: git reads
    # no recorded file whose bytes are as recorded)
    assert res.code != 0 and f"{most + 1:,} files of the worktree are not recorded" in res.err
    blocked = bar(capfd, "status")
    assert "changes   not looked at:" in blocked.out
    assert "not recorded, hard links" in blocked.err  # (the files its message names)
    shutil.rmtree(wt / "many")
    assert bar(capfd, "run", "--no-pty", "--", "true").code == 0
    assert ledger(task["id"])[-2]["diff_stat"]["file_list"] == ["z"]


def test_names_a_step_chose_reach_bar_status_as_inert_text(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """``bar status`` prints names a step chose (files left out, nested repositories):
    an escape sequence in one is shown as text, never sent to the developer's terminal
    (a window title set, the screen cleared)."""
    new_task(capfd)
    script = (
        'n=$(printf "x\\033]0;owned\\007"); head -c 100000 /dev/urandom > "$n"'
        ' && ln "$n" "$n.2" && ln "$n" "$n.3"'
        ' && d=$(printf "q\\033[2J") && mkdir "$d" && cd "$d" && git init -q'
        " && echo x > f && git add f && git -c user.name=a -c user.email=a@b commit -qm x"
    )
    assert bar(capfd, "run", "--no-pty", "--", "sh", "-c", script).code == 0
    out = bar(capfd, "status").out
    assert "\x1b" not in out and "\x07" not in out
    assert "(hard links): x\\x1b]0;owned\\x07" in out
    assert "nested    q\\x1b[2J is a git repository" in out


@pytest.mark.parametrize("speed", ["fast", "slow"])
def test_a_file_of_many_short_lines_is_diffed_as_binary(
    speed: str,
    inited: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A step writes in an instant a text file of millions of two-byte lines, for which
    git's line diff holds ~40 bytes a line of each side (a GiB of newlines: tens of GB
    to record). Past ``git.LINE_DIFF_LARGEST`` a file is diffed as binary: its patch is
    a binary one, which replays; a small file beside it keeps its line diff."""
    if speed == "slow":
        monkeypatch.setenv("BAR_FAST", "0")
    task = new_task(capfd)
    big = bar_git.LINE_DIFF_LARGEST + (2 << 20)
    script = f"yes | head -c {big} > lines.txt && echo x > small.txt"
    assert bar(capfd, "run", "--no-pty", "--", "sh", "-c", script).code == 0
    patch = (task_dir(task["id"]) / "artifacts/0001.patch").read_bytes()
    assert b"GIT binary patch" in patch and b"+x\n" in patch
    assert len(patch) < big // 100
    assert bar(capfd, "run", "--no-pty", "--", "sh", "-c", "echo y >> lines.txt").code == 0
    assert b"GIT binary patch" in (task_dir(task["id"]) / "artifacts/0002.patch").read_bytes()
    wt = worktree(task)
    assert bar(capfd, "rollback", "--to", "1").code == 0
    assert (wt / "lines.txt").stat().st_size == big
    assert bar(capfd, "undo").code == 0
    assert (wt / "lines.txt").read_bytes() == b"y\n" * (big // 2) + b"y\n"


def test_blame_of_a_file_too_large_to_diff_by_lines_is_refused_at_once(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """git's blame of a file of millions of short lines (a second of a step's time)
    took a minute and its porcelain hundreds of MB for bar to read: past
    ``git.LINE_DIFF_LARGEST``, bar blames nothing and says why, in a task and through
    the history of a branch."""
    new_task(capfd)
    big = bar_git.LINE_DIFF_LARGEST + 1
    script = f"yes | head -c {big} > lines.txt && echo x > small.txt"
    assert bar(capfd, "run", "--no-pty", "--", "sh", "-c", script).code == 0
    res = bar(capfd, "blame", "lines.txt")
    assert res.code == 2 and "bar blames no file over 8.0 MiB" in res.err, res.err
    assert "bar show STEP" in res.err
    assert bar(capfd, "blame", "small.txt").code == 0
    # git's blame reads each version it compares: an earlier one too large is refused too
    assert bar(capfd, "run", "--no-pty", "--", "sh", "-c", "echo one > lines.txt").code == 0
    res = bar(capfd, "blame", "lines.txt")
    assert res.code == 2 and f"was, in an earlier state, {big:,} bytes" in res.err, res.err
    # and so is a file of too many lines, however short
    many = f"yes | head -n {task_blame.MOST_LINES + 1} > many.txt"
    assert bar(capfd, "run", "--no-pty", "--", "sh", "-c", many).code == 0
    res = bar(capfd, "blame", "many.txt")
    assert res.code == 2 and f"has {task_blame.MOST_LINES + 1:,} lines" in res.err, res.err
    (inited / "big.txt").write_bytes(b"y\n" * (big // 2 + 1))
    subprocess.run(["git", "add", "big.txt"], cwd=inited, check=True)
    subprocess.run(["git", "commit", "-qm", "big"], cwd=inited, check=True)
    res = bar(capfd, "blame", "--rev", "main", "big.txt")
    assert res.code == 2 and f"big.txt in main is {big + 1:,} bytes" in res.err, res.err


def test_everything_bar_keeps_is_the_developer_s_alone(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Every file and folder bar makes under ``$BAR_HOME`` (but the worktrees, which are
    the developer's own files) is readable by its owner alone."""
    task = new_task(capfd)
    assert _run(capfd, "echo one > a.txt")[0] == 0
    assert _run(capfd, "echo two >> a.txt; sleep 0.2")[0] == 0
    assert bar(capfd, "rollback", "--to", "1").code == 0
    assert bar(capfd, "log", "--json").code == 0
    shown = []
    for root, dirs, files in os.walk(bar_home()):
        dirs[:] = [d for d in dirs if Path(root, d) != worktree(task).parent]
        for name in dirs + files:
            path = Path(root, name)
            if not path.is_symlink() and path.lstat().st_mode & 0o077:
                shown.append(f"{oct(path.lstat().st_mode & 0o777)} {path}")
    assert shown == []


# --- 5. bar's hooks sit above the repository's own agent settings ------------------------


@own_pids
def test_an_agent_step_sees_bar_s_hooks_in_its_managed_settings(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Claude Code ranks a machine's managed settings above every project file: the
    step's /etc has bar's hooks there, reads as it did (but what deny_read hides), and
    nothing outside the step changes."""
    new_task(capfd)
    set_config(policy={"enabled": False}, sandbox={"deny_read": ["~/.ssh", "/etc/hostname"]})
    script = (
        "cat /etc/claude-code/managed-settings.json; head -c 0 /etc/passwd && echo passwd=ok; "
        "cat /etc/hostname; echo hostname=$?; touch /etc/claude-code/x; echo wrote=$?"
    )
    res = bar(capfd, "run", "--no-pty", "--agent", "claude", "--", "sh", "-c", script)
    said = res.out + res.err
    assert '"PreToolUse"' in said and " hook claude --socket " in said, said
    assert "passwd=ok" in said and "hostname=0" not in said and "wrote=0" not in said
    assert not Path("/etc/claude-code/x").exists()
    if os.path.exists("/etc/claude-code/managed-settings.json"):  # (a machine's own)
        assert "hook claude" not in Path("/etc/claude-code/managed-settings.json").read_text()


def test_managed_settings_bar_cannot_merge_stop_only_a_step_that_lays_them(
    inited: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A machine's managed settings that bar cannot merge its hooks into (``"hooks"`` not
    an object) refuse the agent's step that would see them with bar's hooks (its layer
    over /etc), and no other: a step run without the sandbox runs as before."""
    from bar.agents import managed

    etc = tmp_path / "etc"
    (etc / "claude-code").mkdir(parents=True)
    (etc / "claude-code" / "managed-settings.json").write_text('{"hooks": []}\n')
    monkeypatch.setattr(managed, "TARGET", str(etc))
    task = new_task(capfd)
    res = bar(capfd, "run", "--no-pty", "--no-sandbox", "--agent", "claude", "--", "touch", "ran")
    assert res.code == 0, res.err
    assert (worktree(task) / "ran").exists()
    if CONFINES and namespace.available("/") is None:  # (laid in a mount namespace)
        res = bar(capfd, "run", "--no-pty", "--agent", "claude", "--", "touch", "again")
        assert res.code != 0 and "'hooks' in" in res.err and "expected an object" in res.err
        assert not (worktree(task) / "again").exists()


def test_a_session_whose_repository_switches_hooks_off_is_refused_where_bar_cannot_rank_above(
    inited: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    task = new_task(capfd)
    monkeypatch.setenv(UNAVAILABLE_ENV, "1")  # (no mount namespace: no layer over /etc)
    settings = worktree(task) / ".claude" / "settings.local.json"
    settings.parent.mkdir()
    settings.write_text('{"disableAllHooks": true}\n')
    res = bar(capfd, "run", "--no-pty", "--agent", "claude", "--", "touch", "ran")
    assert res.code != 0 and "sets disableAllHooks" in res.err, res.err
    assert not (worktree(task) / "ran").exists()
    settings.write_text('{"disableAllHooks": false}\n')
    res = bar(capfd, "run", "--no-pty", "--agent", "claude", "--", "touch", "ran")
    assert res.code == 0 and (worktree(task) / "ran").exists()


# --- 8. a secret that names a file stays off disk ----------------------------------------


SECRET = "s3cr3t-value-0123456789"


@pytest.fixture
def secret_task(
    inited: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    """A task whose steps run with ``SECRET`` in a secret-named variable (MY_API_KEY)."""
    monkeypatch.setenv("MY_API_KEY", SECRET)
    task: dict[str, str] = new_task(capfd)
    return task


def test_a_file_named_by_a_secret_is_masked_in_the_patch_and_the_ledger(
    secret_task: dict[str, str], capfd: pytest.CaptureFixture[str]
) -> None:
    task, secret = secret_task, SECRET
    assert _run(capfd, 'echo data > "$MY_API_KEY.txt"; echo more > plain.txt')[0] == 0
    assert (worktree(task) / f"{secret}.txt").exists()  # (the worktree holds what it holds)
    (step,) = ledger(task["id"])
    patch = (task_dir(task["id"]) / step["artifacts"]["patch"]).read_bytes()
    assert secret.encode() not in patch and b"plain.txt" in patch and b"+data" in patch
    assert secret not in str(step) and "***.txt" in step["diff_stat"]["file_list"]


def test_a_secret_split_by_terminal_noise_is_masked_in_the_output(
    secret_task: dict[str, str], capfd: pytest.CaptureFixture[str]
) -> None:
    task = secret_task
    script = r"printf 's3cr3t-\033[1mvalue-01234\r56789\n'; printf 's3cr3t-val\033[0mue-0123456789\n' >&2"
    assert _run(capfd, script)[0] == 0
    (step,) = ledger(task["id"])
    output = (task_dir(task["id"]) / step["artifacts"]["output"]).read_bytes()
    assert b"0123456789" not in output and b"56789" not in output and output.count(b"***") == 2


@pytest.mark.parametrize("speed", ["fast", "slow"])
def test_a_named_pipe_where_git_reads_rules_never_hangs_bar(
    speed: str, inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """git opens each directory's ``.gitignore`` and ``.gitattributes`` with a plain
    ``open``, which waits for ever on a named pipe: a step's ``mkfifo .gitignore`` hung
    every later bar command. bar finds them first, records nothing while one is there and
    says which; the step stays pending, and once they are gone the next command records
    it whole. One made by hand later, in a look of a few paths, is found the same way."""
    task = new_task(capfd)
    env = {**os.environ, **({"BAR_FAST": "0"} if speed == "slow" else {})}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [BAR_EXE, *args], cwd=inited, env=env, capture_output=True, text=True, timeout=120
        )

    script = "mkdir -p e/f && echo x > e/f/a && mkfifo e/.gitignore e/f/.gitattributes"
    res = run("run", "--no-pty", "--", "sh", "-c", script)
    assert res.returncode != 0 and "2 named pipes where git reads a file" in res.stderr, res.stderr
    assert "e/.gitignore, e/f/.gitattributes" in res.stderr and "rm -- " in res.stderr
    # what is not recorded says why, and the rest of the task is shown
    res = run("status")
    assert res.returncode == 0 and "step 0001 ended (exit 0) and is not recorded yet" in res.stdout
    assert "changes   not looked at: 2 named pipes where git reads a file" in res.stdout
    said = json.loads(run("status", "--json").stdout)
    assert said["unrecorded_changes"] is None and "rm -- " in said["blocked"]
    res = run("log")
    assert "the command ended (exit 0); bar could not record it: 2 named pipes" in res.stdout
    assert "hint: remove them (rm -- " in res.stdout and "died" not in res.stdout
    said = json.loads(run("show", "1", "--json").stdout)
    assert said["state"] == "interrupted" and "2 named pipes" in said["unrecorded"]
    wt = worktree(task)
    (wt / "e" / ".gitignore").unlink()
    (wt / "e" / "f" / ".gitattributes").unlink()
    res = run("run", "--no-pty", "--", "true")
    assert res.returncode == 0, res.stderr
    steps = ledger(task["id"])
    assert steps[0]["exit_code"] == 0 and steps[0]["diff_stat"]["file_list"] == ["e/f/a"]
    os.mkfifo(wt / "e" / "f" / ".gitattributes")
    (wt / "e" / "f" / "a").write_text("edited\n")  # (git diff-files reads its attributes)
    res = run("run", "--no-pty", "--", "true")
    assert res.returncode != 0 and "1 named pipe where git reads a file" in res.stderr
    assert "(e/f/.gitattributes)" in res.stderr
    (wt / "e" / "f" / ".gitattributes").unlink()
    assert run("run", "--no-pty", "--", "true").returncode == 0
    assert ledger(task["id"])[-2]["diff_stat"]["file_list"] == ["e/f/a"]
    # git reads the worktree's .gitmodules through a link, and a nested repository's HEAD
    script = "git init -q sub && rm sub/.git/HEAD && mkfifo sub/.git/HEAD p && ln -s p .gitmodules"
    res = run("run", "--no-pty", "--", "sh", "-c", script)
    assert res.returncode != 0 and "2 named pipes where git reads a file" in res.stderr
    assert "(.gitmodules, sub/.git/HEAD)" in res.stderr
    (wt / ".gitmodules").unlink()
    (wt / "sub" / ".git" / "HEAD").unlink()
    assert run("run", "--no-pty", "--", "true").returncode == 0


@pytest.mark.parametrize("speed", ["fast", "slow"])
def test_rule_files_too_heavy_to_match_stop_the_record_and_say_so(
    speed: str, inited: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """git matches every rule of the ``.gitattributes`` above a file against it at each
    hash, diff and checkout: 400,000 rules, written in a second, made a step of a
    thousand files take minutes to record. While the worktree's rule files hold more
    than ``fifos.RULES_LARGEST``, nothing is recorded and bar says so (the step stays
    pending, ``bar status`` says why); a scoped look that meets one weighs them all;
    those of a nested repository, which git does not read, do not count."""
    if speed == "slow":
        monkeypatch.setenv("BAR_FAST", "0")
    task = new_task(capfd)
    wt = worktree(task)
    lines = fifos.RULES_LARGEST // 12 + 1  # ("*.xNNNNN foo" and its newline: 12 bytes or more)
    attributes = fifos.ATTRIBUTES_LARGEST // 12 + 1
    make = f"seq -f '*.x%05g foo' {attributes} > .gitattributes && echo x > a.txt"
    res = bar(capfd, "run", "--no-pty", "--", "sh", "-c", make)
    assert res.code != 0 and "the worktree's .gitattributes files hold 1" in res.err
    assert "(.gitattributes (1" in res.err and "more than 128.0 KiB" in res.err, res.err
    assert ledger(task["id"]) == []
    res = bar(capfd, "status")
    assert res.code == 0 and "changes   not looked at: the worktree's .gitattributes" in res.out
    (wt / ".gitattributes").write_text("*.bin binary\n")
    assert bar(capfd, "run", "--no-pty", "--", "true").code == 0
    step, by_hand, _ = ledger(task["id"])  # (the rule file written after the step: by hand)
    assert step["diff_stat"]["file_list"] == ["a.txt"]
    assert by_hand["kind"] == "manual" and by_hand["diff_stat"]["file_list"] == [".gitattributes"]
    # one made by hand in a new directory beside an edit: a scoped look weighs them all
    (wt / "d").mkdir()
    (wt / "d" / ".gitignore").write_text("".join(f"/n{i:09d}\n" for i in range(lines)))
    (wt / "a.txt").write_text("edited\n")
    res = bar(capfd, "run", "--no-pty", "--", "true")
    assert res.code != 0 and "(d/.gitignore (1." in res.err, res.err
    assert "the worktree's .gitignore and .gitattributes files hold 1." in res.err
    (wt / "d" / ".gitignore").unlink()
    assert bar(capfd, "run", "--no-pty", "--", "true").code == 0
    assert ledger(task["id"])[-2]["diff_stat"]["file_list"] == ["a.txt"]
    # a nested repository's rule files are its own
    make = f"git init -q sub && seq -f '/x%09g' {lines} > sub/.gitignore && echo y > b.txt"
    res = bar(capfd, "run", "--no-pty", "--", "sh", "-c", make)
    assert res.code == 0, res.err
    assert ledger(task["id"])[-1]["diff_stat"]["file_list"] == ["b.txt"]
    # nor do those of an ignored directory, which git never walks
    make = (
        f"echo /deps/ > .gitignore && mkdir -p deps/p && seq -f '/x%09g' {lines}"
        " > deps/p/.gitignore && echo w > w.txt"
    )
    res = bar(capfd, "run", "--no-pty", "--", "sh", "-c", make)
    assert res.code == 0, res.err
    assert ledger(task["id"])[-1]["diff_stat"]["file_list"] == [".gitignore", "w.txt"]
    # one written through another name of it (a hard link in an ignored directory), which
    # no watch sees and no stat of a recorded file shows (it ignores itself)
    make = "mkdir r && echo .gitignore > r/.gitignore && ln r/.gitignore deps/x && echo v > v"
    assert bar(capfd, "run", "--no-pty", "--", "sh", "-c", make).code == 0
    assert ledger(task["id"])[-1]["diff_stat"]["file_list"] == ["v"]
    grow = f"seq -f '/x%09g' {lines} >> deps/x"
    res = bar(capfd, "run", "--no-pty", "--", "sh", "-c", grow)
    assert res.code != 0 and "(r/.gitignore (1." in res.err, res.err
    res = bar(capfd, "run", "--no-pty", "--", "true")  # (and at every look after)
    assert res.code != 0 and "(r/.gitignore (1." in res.err, res.err
    (wt / "r" / ".gitignore").unlink()
    assert bar(capfd, "run", "--no-pty", "--", "true").code == 0


@pytest.mark.parametrize("speed", ["fast", "slow"])
def test_a_repository_without_a_commit_that_loses_its_git_directory_is_recorded(
    speed: str, inited: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A nested repository with no commit is no entry of the record; once its ``.git``
    is gone its files are the worktree's, and a look of a few paths names it whole (no
    stamp covered it: the fast mode never recorded them). So are those beside a ``.git``
    git takes for no repository (an empty directory, an empty file)."""
    if speed == "slow":
        monkeypatch.setenv("BAR_FAST", "0")
    task = new_task(capfd)
    assert bar(capfd, "run", "--no-pty", "--", "git", "init", "-q", "sub").code == 0
    script = "rm -rf sub/.git && echo x > sub/f"
    assert bar(capfd, "run", "--no-pty", "--", "sh", "-c", script).code == 0
    assert ledger(task["id"])[-1]["diff_stat"]["file_list"] == ["sub/f"]
    # nor is a directory beside an empty .git one to git (it adds the files there)
    script = "mkdir -p fake/.git fake/d other && : > other/.git"
    assert bar(capfd, "run", "--no-pty", "--", "sh", "-c", script).code == 0
    script = "echo x > fake/d/f && echo y > other/f"
    assert bar(capfd, "run", "--no-pty", "--", "sh", "-c", script).code == 0
    assert ledger(task["id"])[-1]["diff_stat"]["file_list"] == ["fake/d/f", "other/f"]


def _opens_seen(folder: Path) -> int:
    """An inotify descriptor told of every open in ``folder`` (IN_OPEN), non-blocking."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    watch = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    assert watch >= 0
    assert libc.inotify_add_watch(watch, os.fsencode(folder), 0x20) >= 0
    return int(watch)


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_bars_reads_of_a_steps_files_never_open_a_device(tmp_path: Path) -> None:
    """A nested repository's ``HEAD`` a step made a link to a device, or a settings file
    behind a directory swapped for a link: bar's reads open nothing but a regular file
    (opening a device acts on it: a watchdog armed, a tape rewound)."""
    from bar.store.files import read_regular

    devices = tmp_path / "dev"
    devices.mkdir()
    try:
        os.mknod(devices / "null", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    except OSError as exc:  # (a file system mounted nodev)
        pytest.skip(f"no device node can be made here: {exc}")
    (devices / "settings.json").symlink_to(devices / "null")
    nested = tmp_path / "nested" / ".git"
    nested.mkdir(parents=True)
    (nested / "HEAD").symlink_to(devices / "null")
    (tmp_path / "w").symlink_to(devices)
    seen = _opens_seen(devices)
    try:
        with pytest.raises(OSError):
            bar_git.read_small(str(nested / "HEAD"))
        assert read_regular(tmp_path / "w" / "null") is None
        with pytest.raises(BlockingIOError):
            os.read(seen, 4096)  # (no device was opened)
        (devices / "file").write_text("ref: refs/heads/main\n")
        (nested / "HEAD").unlink()
        (nested / "HEAD").symlink_to(devices / "file")  # (a link git itself follows)
        assert bar_git.read_small(str(nested / "HEAD")) == b"ref: refs/heads/main\n"
    finally:
        os.close(seen)


def test_judging_a_file_never_opens_what_a_swapped_directory_leads_to(tmp_path: Path) -> None:
    """bar judges a large file's holes by opening it after its ``lstat``; a step may swap
    a directory on the way for a link to ``/dev`` in between, where opening a device
    acts on it (a watchdog armed, a tape rewound). What the link leads to is never
    opened: the name is held unopened (``O_PATH``) and read only as the file it was."""
    work = tmp_path / "w"
    (work / "d").mkdir(parents=True)
    sparse = work / "d" / "f"
    with open(sparse, "wb") as f:
        f.truncate(1 << 20)
    st = os.lstat(sparse)
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    (decoy / "f").write_bytes(b"x" * (1 << 20))
    watch = _opens_seen(decoy)
    try:
        (work / "d").rename(work / "d.old")
        (work / "d").symlink_to(decoy)
        assert side_index._written(str(sparse), st) == st.st_size  # (not the file it was)
        with pytest.raises(BlockingIOError):
            os.read(watch, 4096)  # (nothing behind the link was opened)
        (work / "d").unlink()
        (work / "d.old").rename(work / "d")
        assert side_index._written(str(sparse), st) == 0  # (the file itself: all holes)
    finally:
        os.close(watch)
