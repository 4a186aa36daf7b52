"""The policy at exec: every program a confined step starts is judged with its real
argument vector, after every expansion (docs/policy.md, "Programs judged as they run").

Each evasion is a script the step runs (``sh evil.sh``): the line typed names no
dangerous program, so only the exec check can stop what the script starts. The targets
are a decoy home (the test's ``HOME``) and uncommitted work in the task's worktree.
"""

from __future__ import annotations

import os
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from helpers import bar, ledger, new_task, set_config, walk, worktree

from bar.policy import Policy, default_policy
from bar.policy.places import Places
from bar.sandbox import UNAVAILABLE_ENV, exec_watch, landlock

CONFINES = landlock.abi_version() >= 1 and not os.environ.get(UNAVAILABLE_ENV)
WATCHES = CONFINES and exec_watch.supported() is None


@cache
def _policy() -> Policy:
    """Parsed once for the module's lines (a tenth of a second each time)."""
    return default_policy()


confined = pytest.mark.skipif(not WATCHES, reason="no confinement or exec check here")

# each hides `rm -rf ~` from a check of the text: the program and its arguments are
# made as the script runs
HOME_EVASIONS = {
    "default": "${x:-rm} -rf ~\n",
    "read": "read c <<EOF\nrm\nEOF\n$c -rf ~\n",
    "set": 'set -- rm -rf ~; "$@"\n',
    "function": 'f() { "$@"; }; f rm -rf ~\n',
    "printf": "$(printf '\\162\\155') -rf ~\n",
    "tr": "echo 'zm -rf ~' | tr z r | sh\n",
    "hex": "echo 726d202d7266207e | xxd -r -p | sh\n",
    "python-execvp": (
        'python3 -c \'import os; os.execvp("rm", ["rm", "-rf", os.path.expanduser("~")])\'\n'
    ),
    "python-hidden": (
        "python3 -c 'exec(bytes.fromhex(\"696d706f7274206f733b206f732e73797374656d28"
        "22726d202d7266207e2229\").decode())'\n"
    ),
    "sed-e": "echo x > f.txt; sed '1e rm -rf ~' f.txt\n",
    "bash-env": "echo 'rm -rf ~' > env.sh; BASH_ENV=./env.sh bash -c true\n",
    "empty-arg": "sh -c 'rm -rf \"$1\"/*'\n",
    # a script whose #! interpreter is rm by another name: a link, found from the
    # working directory, or named with a vertical tab (the kernel splits the line on
    # spaces and tabs alone)
    "shebang-link": (
        'ln -s "$(command -v rm)" zz; printf \'#!%s -rf\\n\' "$PWD/zz" > s; chmod +x s; ./s ~\n'
    ),
    "shebang-relative": (
        "ln -s \"$(command -v rm)\" zz; printf '#!zz -rf\\n' > s; chmod +x s; ./s ~\n"
    ),
    # a copy of rm, and of the dynamic loader, with a byte added (no longer the same bytes)
    "copy-padded": 'cp "$(command -v rm)" r; printf x >> r; ./r -rf ~\n',
    "loader-padded": (
        "cp /lib64/ld-linux-x86-64.so.2 l 2>/dev/null || cp /lib/ld-linux-aarch64.so.1 l; "
        'printf x >> l; chmod +x l; ./l "$(command -v rm)" -rf ~\n'
    ),
    "shebang-vtab": (
        'ln -s "$(command -v rm)" "$(printf \'ok\\vx\')"; ln -s "$(command -v echo)" ok; '
        "printf '#!%s/ok\\vx -rf\\n' \"$PWD\" > s; chmod +x s; ./s ~\n"
    ),
}


def _step(t: dict[str, Any]) -> dict[str, Any]:
    return ledger(t["id"])[-1]  # type: ignore[no-any-return]


def _exec_events(step: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in step["policy_events"] if e.get("source") == "exec"]


def _run_script(capfd: pytest.CaptureFixture[str], t: dict[str, Any], text: str) -> Any:
    (worktree(t) / "evil.sh").write_text(text)
    return bar(capfd, "run", "--", "sh", "evil.sh")


@confined
@pytest.mark.parametrize("name", sorted(HOME_EVASIONS))
def test_an_evasion_is_stopped_at_exec_and_recorded(
    name: str, inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    home = Path(os.environ["HOME"])
    (home / "precious").write_text("keep me\n")
    t = new_task(capfd)
    res = _run_script(capfd, t, HOME_EVASIONS[name])
    assert (home / "precious").read_text() == "keep me\n"
    step = _step(t)
    events = _exec_events(step)
    assert events, (res.err, step["policy_events"])
    blocked = [e for e in events if e["decision"] == "block"]
    assert blocked, events
    assert any(e["argv"][:2] == ["rm", "-rf"] or "rm" in e["matched"] for e in blocked)
    assert step["sandbox"]["exec_check"] is True
    name = step["artifacts"]["output"].split("/")[-1]
    output = [p for p in walk(Path(os.environ["BAR_HOME"])) if p.name == name]
    said = "".join(p.read_text() for p in output)
    assert "bar: blocked by policy rule" in said


@confined
def test_a_hard_reset_in_the_worktree_is_stopped_and_the_work_kept(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    wt = worktree(t)
    (wt / "README.md").write_text("uncommitted work\n")
    res = _run_script(capfd, t, 'set -- git reset --hard; "$@"; p=push; git $p origin HEAD:main\n')
    assert (wt / "README.md").read_text() == "uncommitted work\n", res.err
    events = _exec_events(_step(t))
    assert {e["rule"] for e in events} >= {"git-reset-hard", "git-push-protected-branch"}
    reset = next(e for e in events if e["rule"] == "git-reset-hard")
    assert reset["argv"][1:] == ["reset", "--hard"] and reset["decision"] == "block"


# each runs `git reset --hard` under another guise: only what the kernel is about to
# run, not the name the program was called by, says it
RESET_GUISES = {
    "long-vector": (
        'set --; i=0; while [ $i -lt 2100 ]; do set -- "$@" -c x.y=z; i=$((i+1)); done\n'
        'git "$@" reset --hard\n'
    ),
    "dashed": '"$(git --exec-path)/git-reset" --hard\n',
    "symlink": 'ln -s "$(command -v git)" "$TMPDIR/gg"; "$TMPDIR/gg" reset --hard\n',
    "copy": 'cp "$(command -v git)" "$TMPDIR/tool"; "$TMPDIR/tool" reset --hard\n',
    "busybox-named": 'ln -s "$(command -v git)" "$TMPDIR/busybox"; "$TMPDIR/busybox" reset --hard\n',
    "shebang": (  # the kernel runs `git reset --hard`: the script's name is its argument
        "printf '#!%s reset\\n' \"$(command -v git)\" > ./--hard; chmod +x ./--hard\n"
        'python3 -c \'import os; os.execv("--hard", ["x"])\'\n'
    ),
    "exec-a": "bash -c 'exec -a ls git reset --hard'\n",
    "memfd": (
        'python3 -c \'import os, shutil; f = os.memfd_create("x"); '
        'os.write(f, open(shutil.which("git"), "rb").read()); '
        'os.execve(f, ["x", "reset", "--hard"], dict(os.environ))\'\n'
    ),
}
LOADERS = [
    p for p in ("/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1") if Path(p).exists()
]
if LOADERS:
    RESET_GUISES["loader"] = f'{LOADERS[0]} "$(command -v git)" reset --hard\n'


@confined
@pytest.mark.parametrize("name", sorted(RESET_GUISES))
def test_a_program_in_another_guise_is_judged_as_what_runs(
    name: str, inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    wt = worktree(t)
    (wt / "README.md").write_text("uncommitted work\n")
    res = _run_script(capfd, t, RESET_GUISES[name])
    assert (wt / "README.md").read_text() == "uncommitted work\n", res.err
    events = _exec_events(_step(t))
    assert any(e["decision"] == "block" for e in events), (res.err, events)


def test_a_vector_bar_could_not_read_whole_is_refused_and_recorded() -> None:
    from bar.sandbox.exec_watch import Exec
    from bar.step.exec_judge import UNREAD_RULE, ExecJudge

    recorded: list[dict[str, Any]] = []
    judge = ExecJudge(default_policy(), Places.of(), lambda *r: recorded.extend(r))
    verdict = judge(Exec(1, "/usr/bin/true", ("true", "x"), "/", truncated=True))
    assert verdict is not None and verdict[0] is True
    assert recorded[0]["rule"] == UNREAD_RULE and recorded[0]["decision"] == "block"


@confined
def test_a_warned_program_runs_and_is_recorded_once(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    (inited / ".bar" / "policy.yaml").write_text(
        "version: 1\nrules:\n  - name: careful-touch\n    pattern: '^touch\\s'\n"
        "    action: warn\n    reason: touching files\n"
    )
    t = new_task(capfd)
    res = _run_script(capfd, t, "t=touch; for i in 1 2 3; do $t made-$i; done\n")
    assert res.code == 0
    for i in (1, 2, 3):
        assert (worktree(t) / f"made-{i}").exists()
    events = _exec_events(_step(t))
    assert [e["matched"] for e in events] == ["touch made-1", "touch made-2", "touch made-3"]
    assert all(e["action"] == "warn" and e["decision"] == "warn" for e in events)
    assert "careful-touch" in res.err


@confined
def test_what_the_typed_line_was_judged_for_is_not_recorded_again(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    res = bar(capfd, "run", "--", "git", "push", "--force-with-lease", "origin", "topic")
    events = _step(t)["policy_events"]
    assert [e["rule"] for e in events] == ["git-push-force-with-lease"], (res.err, events)


@confined
def test_the_check_can_be_switched_off(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    set_config(policy={"exec_check": False})
    t = new_task(capfd)
    (worktree(t) / "README.md").write_text("uncommitted\n")
    _run_script(capfd, t, 'set -- git reset --hard; "$@"\n')
    step = _step(t)
    assert _exec_events(step) == [] and step["sandbox"]["exec_check"] is False
    assert (worktree(t) / "README.md").read_text() != "uncommitted\n"  # (it ran)


@confined
def test_a_program_that_is_not_there_fails_as_the_kernel_says(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    res = bar(capfd, "run", "--", "sh", "-c", "no-such-program-here; echo $?")
    assert res.code == 0
    name = _step(t)["artifacts"]["output"].split("/")[-1]
    output = [p for p in walk(Path(os.environ["BAR_HOME"])) if p.name == name]
    said = "".join(p.read_text() for p in output)
    assert "127" in said and "not found" in said
    assert _exec_events(_step(t)) == []


# --- the mechanism, without bar run ----------------------------------------------------


def _watched(script: str, judge: exec_watch.Judge) -> tuple[exec_watch.Watch, str]:
    watch = exec_watch.Watch(judge)
    watch.begin()

    def inside() -> None:
        landlock.prctl(38, 1)  # no_new_privs: a filter may then be installed unprivileged
        watch.inside()

    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        preexec_fn=inside,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    watch.started()
    out, _ = proc.communicate(timeout=60)
    watch.close()
    return watch, out


@pytest.mark.skipif(exec_watch.supported() is not None, reason="no exec check here")
def test_the_real_arguments_are_read_and_a_refusal_is_eperm() -> None:
    seen: list[exec_watch.Exec] = []

    def judge(found: exec_watch.Exec) -> tuple[bool, str] | None:
        seen.append(found)
        return (True, "bar: no") if "forbidden" in found.argv else None

    long = ["x" * 5000] * 40
    script = (
        "import os, subprocess, sys\n"
        "subprocess.run(['/bin/echo', *(['x' * 5000] * 40)], stdout=subprocess.DEVNULL)\n"
        "try:\n"
        "    subprocess.run(['/bin/echo', 'forbidden'])\n"
        "except PermissionError:\n"
        "    print('refused by subprocess')\n"
        "fd = os.open('/bin/true', os.O_RDONLY)\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os.execve(fd, ['true', 'by-descriptor'], {})\n"
        "os.waitpid(pid, 0)\n"
        "try:\n"
        "    os.execv('/bin/echo', ['echo', 'forbidden'])\n"
        "except PermissionError:\n"
        "    print('refused')\n"
    )
    watch, out = _watched(script, judge)
    assert watch.unavailable is None
    assert "refused by subprocess" in out and "\nrefused\n" in out
    assert "bar: no" in out and "forbidden" not in out
    argvs = [e.argv for e in seen]
    assert ("/bin/echo", *long) in argvs
    by_fd = next(e for e in seen if e.argv[1:] == ("by-descriptor",))
    assert by_fd.path.endswith("true")
    assert seen[0].argv[0] == sys.executable


@pytest.mark.skipif(exec_watch.supported() is not None, reason="no exec check here")
def test_an_address_with_no_memory_fails_as_the_kernel_says_and_the_check_goes_on() -> None:
    script = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "argv = (ctypes.c_void_p * 3)(ctypes.cast(ctypes.c_char_p(b'true'), ctypes.c_void_p),"
        " 0xFFFFFFFFFFFFFF00, None)\n"
        "env = (ctypes.c_void_p * 1)(None)\n"
        "r = libc.execve(b'/bin/true', argv, env)\n"
        "print('errno', ctypes.get_errno())\n"
        "os.execv('/bin/echo', ['echo', 'after'])\n"
    )
    watch, out = _watched(script, lambda found: None)
    assert "errno 14" in out  # EFAULT
    assert "after" in out
    assert watch.unavailable is None


@pytest.mark.skipif(exec_watch.supported() is not None, reason="no exec check here")
def test_a_second_listener_is_refused_and_said() -> None:
    said: list[str] = []
    outer = exec_watch.Watch(lambda found: None)
    inner = exec_watch.Watch(lambda found: None, said.append)
    outer.begin()
    inner.begin()

    def inside() -> None:
        landlock.prctl(38, 1)
        outer.inside()
        inner.inside()

    proc = subprocess.Popen(["/bin/true"], preexec_fn=inside)
    outer.started()
    inner.started()
    assert proc.wait(timeout=30) == 0
    outer.close()
    inner.close()
    assert outer.unavailable is None
    assert inner.unavailable is not None and "already" in inner.unavailable
    assert said


# --- judging: places and forms ---------------------------------------------------------


def test_the_home_is_known_whatever_the_shell_expanded() -> None:
    policy = default_policy()
    places = Places.of(worktree="/w/task", homes=["/work/me"], temps=["/w/tmp"])
    home = policy.evaluate_exec("/usr/bin/rm", ["rm", "-rf", "/work/me"], places)
    assert home.blocked and home.events[0].matched == "rm -rf ~"
    inside = policy.evaluate_exec("/usr/bin/rm", ["rm", "-rf", "/w/task/src"], places)
    assert inside.action == "allow"
    line = policy.evaluate_line("rm -rf /work/me/", places)
    assert line.blocked


def test_a_relative_name_outside_the_worktree_is_judged_as_the_path_it_names() -> None:
    policy = default_policy()
    places = Places.of(worktree="/w/task", homes=["/work/me"])
    there = lambda word: word in ("Documents", "Music")  # noqa: E731
    got = policy.evaluate_exec(
        "/bin/rm", ["rm", "-rf", "Documents", "Music"], places, cwd="/work/me", exists=there
    )
    assert got.blocked
    same = policy.evaluate_exec(
        "/bin/rm", ["rm", "-rf", "Documents"], places, cwd="/w/task", exists=there
    )
    assert same.action == "allow"


def test_the_program_run_is_judged_not_the_name_it_was_given() -> None:
    policy = default_policy()
    renamed = policy.evaluate_exec("/usr/bin/rm", ["ls", "-rf", "/"], Places.of())
    assert renamed.blocked
    multi = policy.evaluate_exec("/bin/busybox", ["rm", "-rf", "/"], Places.of())
    assert multi.blocked


def test_policy_check_and_explain_speak_of_the_exec_form(
    inited: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    home = os.environ["HOME"]
    res = bar(capfd, "policy", "check", "--exec", "--", "rm", "-rf", home)
    assert res.code == 126 and "rm-recursive-root-or-home" in res.out
    res = bar(capfd, "policy", "explain", "--exec", "--json", "--", "rm", "-rf", home)
    data = res.json()
    assert data["form"] == "exec" and data["decision"] == "block"
    assert data["units"][0][0] == "rm -rf ~"
    assert data["words"][0].endswith("/rm")
    res = bar(capfd, "policy", "explain", "-c", 'set -- rm -rf ~; "$@"')
    assert res.code == 126
    assert "what the rules were tried on" in res.out and "why:" in res.out
    res = bar(capfd, "policy", "explain", "-c", "ls -la")
    assert res.code == 0 and "no rule matched" in res.out
    res = bar(capfd, "policy", "check", "--exec", "-c", "ls")
    assert res.code == 2 and "--exec" in res.err


@pytest.mark.parametrize(
    ("line", "blocked"),
    [
        ("cd proj; cd ..; rm -rf zz", False),
        ("cd proj && cd ../.. && rm -rf zz", True),
        ("cd a/b && cd ../.. && cd .. && rm -rf x", True),
        ("cd .. && rm -rf zz", True),
        ("git-reset --hard", True),
        ("/lib64/ld-linux-x86-64.so.2 /usr/bin/git reset --hard", True),
        ("npx -y cdk destroy ApiStack -f", True),
    ],
)
def test_the_line_check_follows_where_cd_went_and_what_runs_a_program(
    line: str, blocked: bool
) -> None:
    assert _policy().evaluate_line(line).blocked is blocked


def test_a_home_that_is_a_temporary_directory_is_no_home() -> None:
    places = Places.of(homes=["/tmp"])
    assert default_policy().evaluate_line("rm -rf /tmp/build", places).action == "allow"


@confined
@pytest.mark.parametrize("namespaces", [True, False], ids=["namespaces", "landlock-only"])
def test_bar_reads_nothing_of_a_program_the_step_may_not_read(
    namespaces: bool,
    inited: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A program under a hidden path (``~/.ssh``): the kernel refuses it; bar, which is
    not confined, must not read its ``#!`` line for the step (its event would show it).
    Without namespaces the step sees the same files as bar: only bar's care hides it."""
    if not namespaces:
        monkeypatch.setenv("BAR_NAMESPACES_UNAVAILABLE", "1")
    hidden = Path(os.environ["HOME"]) / ".ssh"
    hidden.mkdir(exist_ok=True)
    tool = hidden / "tool"
    tool.write_text("#!/bin/rm -rf\n")
    tool.chmod(0o755)
    t = new_task(capfd)
    res = _run_script(capfd, t, f"{tool}; echo rc=$?\n")
    assert tool.exists()
    assert _exec_events(_step(t)) == [], res.err


@confined
def test_git_given_settings_by_its_environment_is_judged_with_them(
    inited: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``GIT_CONFIG_COUNT``/``KEY_N``/``VALUE_N`` give git a setting as ``-c`` does: a push
    whose refspec comes from them (``remote.origin.push=HEAD:main``) is a push to main,
    stopped at exec though the words read ``git push origin``."""
    t = new_task(capfd)
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(inited), str(remote)], check=True)
    before = subprocess.run(
        ["git", "-C", str(remote), "rev-parse", "main"], capture_output=True, text=True
    ).stdout
    script = (
        "git commit -q --allow-empty -m agent\n"
        f"export GIT_CONFIG_COUNT=2 GIT_CONFIG_KEY_0=remote.x.url GIT_CONFIG_VALUE_0={remote}\n"
        "export GIT_CONFIG_KEY_1=remote.x.push GIT_CONFIG_VALUE_1=HEAD:main\n"
        "git push -q x; echo pushed=$?\n"
    )
    res = _run_script(capfd, t, script)
    after = subprocess.run(
        ["git", "-C", str(remote), "rev-parse", "main"], capture_output=True, text=True
    ).stdout
    assert after == before, res.out + res.err
    blocked = [e for e in _exec_events(_step(t)) if e["decision"] == "block"]
    assert any(e["rule"] == "git-push-protected-branch" for e in blocked), blocked
