"""Completion in zsh and fish, for real: zsh completes in an interactive shell on a
pseudo-terminal (zsh/zpty), Tab pressed, and what it offered read back; fish answers
``complete -C LINE``. Both as installed (a file where the shell looks) and as sourced.
Without the shell, these are skipped, but not in CI, where `make` installs them."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import BAR_EXE, bar, bar_exe, new_task, run_sh, set_config


def shell_env() -> dict[str, str]:
    """The test's sealed environment, with the installed ``bar`` first on PATH."""
    return {**os.environ, "PATH": f"{Path(BAR_EXE).parent}{os.pathsep}{os.environ['PATH']}"}


def need(shell: str) -> None:
    if shutil.which(shell) is None:
        if os.environ.get("CI"):
            pytest.fail(f"{shell} is not installed: `make unit` installs it in CI")
        pytest.skip(f"{shell} is not installed")


@pytest.fixture
def project(repo: Path, capfd: pytest.CaptureFixture[str]) -> Path:
    """A registered repository with tasks alpha (two steps) and beta (active, none)."""
    assert bar(capfd, "init").code == 0
    set_config(policy={"enabled": False})
    new_task(capfd, "alpha", "-d", "the first one")
    run_sh(capfd, "echo one > one.txt")
    run_sh(capfd, "echo two > two.txt")
    new_task(capfd, "beta")
    return repo


# --- zsh ----------------------------------------------------------------------------------

# An interactive zsh on a pseudo-terminal, Tab bound to a widget that completes and then
# marks the end; compadd records each match it adds (those that fit what was typed).
ZSH_DRIVER = r"""
zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z "PS1=''; $LOAD"
zpty -w z 'compadd() {
  if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then builtin compadd "$@"; return; fi
  local -a __m; builtin compadd -O __m "$@"; print -rl -- $__m >> $CAPTURE
  builtin compadd "$@"; }'
zpty -w z 'done-complete() { zle complete-word; print -r -- "<done>" >> $CAPTURE; }'
zpty -w z 'zle -N done-complete; bindkey "^I" done-complete'
zpty -w -n z "$LINE"$'\t'
for i in {1..600}; do
  [[ -e $CAPTURE ]] && grep -q '^<done>$' $CAPTURE && break
  zpty -r -t z junk 2>/dev/null
  sleep 0.05
done
zpty -d z
cat $CAPTURE
"""

SOURCED = "autoload -U compinit; compinit -u -D; source <(bar completion zsh)"


def complete_zsh(line: str, cwd: Path, load: str = SOURCED) -> list[str]:
    capture = cwd.parent / "zsh-capture.txt"
    capture.unlink(missing_ok=True)
    env = {**shell_env(), "LOAD": load, "LINE": line, "CAPTURE": str(capture)}
    proc = subprocess.run(
        ["zsh", "-f", "-c", ZSH_DRIVER],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = proc.stdout.splitlines()
    assert "<done>" in lines, proc.stdout + proc.stderr
    return sorted(set(lines) - {"<done>", ""})


TASK_ACTIONS = [
    "adopt",
    "bind",
    "claim",
    "close",
    "delete",
    "edit",
    "list",
    "new",
    "path",
    "prune",
    "rename",
    "reopen",
    "show",
    "start",
    "switch",
    "sync",
    "unclaim",
]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("bar ta", ["task"]),
        ("bar task ", TASK_ACTIONS),
        ("bar task close --", ["--force", "--help", "--json", "--keep-worktree", "--task"]),
        ("bar apply --mode ", ["commit", "merge"]),
        ("bar apply --mode=", ["commit", "merge"]),
        ("bar task show ", ["alpha", "beta"]),
        ("bar log -t ", ["alpha", "beta"]),
        ("bar show --task alpha ", ["0001", "0002"]),
        ("bar show --task=alpha 2", ["2"]),
        ("bar rollback -t alpha --to ", ["0001", "0002", "base"]),
        ("bar diff -talpha --from=b", ["base"]),
    ],
)
def test_zsh_completes_as_it_is_typed(project: Path, line: str, expected: list[str]) -> None:
    need("zsh")
    assert complete_zsh(line, project) == expected


def test_zsh_completes_from_the_script_installed_in_fpath(project: Path, tmp_path: Path) -> None:
    need("zsh")
    functions = tmp_path / "zfunc"
    functions.mkdir()
    (functions / "_bar").write_text(bar_exe("completion", "zsh").out)
    load = f"fpath=({functions} $fpath); autoload -U compinit; compinit -u -D"
    assert complete_zsh("bar task sw", project, load) == ["switch"]
    assert complete_zsh("bar task switch ", project, load) == ["alpha", "beta"]


def test_zsh_completes_files_and_the_command_after_run(project: Path) -> None:
    need("zsh")
    (project / "src").mkdir()
    (project / "src" / "app.py").write_text("x\n")
    assert "app.py" in " ".join(complete_zsh("bar blame src/", project))
    assert "git" in complete_zsh("bar run -- gi", project)


def test_the_zsh_script_is_valid_zsh(tmp_path: Path) -> None:
    need("zsh")
    path = tmp_path / "_bar"
    path.write_text(bar_exe("completion", "zsh").out)
    subprocess.run(["zsh", "-n", str(path)], check=True)
    check = "autoload -U compinit; compinit -u -D; source <(bar completion zsh); print $_comps[bar]"
    out = subprocess.run(
        ["zsh", "-fc", check], env=shell_env(), capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "_bar"


# --- fish ---------------------------------------------------------------------------------


def complete_fish(line: str, cwd: Path, installed: bool = False) -> list[str]:
    """fish's candidates for ``line`` (without what fish shows beside them)."""
    program = (
        f"complete -C {line!r}"
        if installed
        else (f"bar completion fish | source; complete -C {line!r}")
    )
    proc = subprocess.run(
        ["fish", "-c", program],
        cwd=cwd,
        env=shell_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    return sorted({line.split("\t")[0] for line in proc.stdout.splitlines()} - {""})


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("bar ta", ["task"]),
        ("bar task ", TASK_ACTIONS),
        ("bar task close --", ["--force", "--help", "--json", "--keep-worktree", "--task"]),
        ("bar apply --mode ", ["commit", "merge"]),
        ("bar apply --mode=m", ["--mode=merge"]),
        ("bar task show ", ["alpha", "beta"]),
        ("bar log -t ", ["alpha", "beta"]),
        ("bar show --task alpha ", ["0001", "0002"]),
        ("bar show --task=alpha 2", ["2"]),
        ("bar rollback -t alpha --to ", ["0001", "0002", "base"]),
        ("bar diff -talpha --from=b", ["--from=base"]),
    ],
)
def test_fish_completes_as_it_is_typed(project: Path, line: str, expected: list[str]) -> None:
    need("fish")
    assert complete_fish(line, project) == expected


def test_fish_shows_what_each_candidate_is(project: Path) -> None:
    need("fish")
    proc = subprocess.run(
        ["fish", "-c", "bar completion fish | source; complete -C 'bar task show '"],
        cwd=project,
        env=shell_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    shown = dict(line.split("\t", 1) for line in proc.stdout.splitlines())
    assert shown["alpha"].startswith("open: the first one")
    assert shown["beta"].startswith("active task")


def test_fish_completes_from_the_script_installed_in_its_completions(project: Path) -> None:
    need("fish")
    completions = Path(os.environ["XDG_CONFIG_HOME"]) / "fish" / "completions"
    completions.mkdir(parents=True)
    (completions / "bar.fish").write_text(bar_exe("completion", "fish").out)
    assert complete_fish("bar task sw", project, installed=True) == ["switch"]
    assert complete_fish("bar task switch ", project, installed=True) == ["alpha", "beta"]


def test_fish_completes_files_and_the_command_after_run(project: Path) -> None:
    need("fish")
    (project / "src").mkdir()
    (project / "src" / "app.py").write_text("x\n")
    assert complete_fish("bar blame src/", project) == ["src/app.py"]
    assert complete_fish("bar run --cwd s", project) == ["src/"]
    assert "git" in complete_fish("bar run -- gi", project)
    assert complete_fish("bar run -- cat READ", project) == ["README.md"]


def test_the_fish_script_is_valid_fish(tmp_path: Path) -> None:
    need("fish")
    path = tmp_path / "bar.fish"
    path.write_text(bar_exe("completion", "fish").out)
    subprocess.run(["fish", "--no-execute", str(path)], check=True)


def test_outside_a_project_zsh_and_fish_offer_no_tasks(tmp_path: Path) -> None:
    for shell, complete in (("zsh", complete_zsh), ("fish", complete_fish)):
        if shutil.which(shell) is None:
            need(shell)
        assert complete("bar task show ", tmp_path) == [], shell
