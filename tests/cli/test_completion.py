"""Shell completion: ``bar completion bash`` driven for real in ``bash --norc`` (COMP_WORDS,
COMP_CWORD, COMP_LINE set as readline sets them, COMPREPLY read back), in real projects;
``bar __complete``, which the scripts ask for task names and step ids; and the parser as
the oracle of what every script knows. zsh and fish: tests/cli/test_completion_shells.py."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import BAR_EXE, SUPPORT, bar, bar_exe, new_task, project_dir, run_sh, set_config

from conftest import MakeRepo

BIN = str(Path(BAR_EXE).parent)
FAKE_AGENT = str(SUPPORT / "fake_agent.py")


def shell_env() -> dict[str, str]:
    """The test's sealed environment, with the installed ``bar`` first on PATH."""
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def script(capfd: pytest.CaptureFixture[str], shell: str) -> str:
    res = bar(capfd, "completion", shell)
    assert res.code == 0, res.err
    return res.out


def complete_bash(line: str, cwd: Path | None = None, source: str | None = None) -> list[str]:
    """What Tab offers at the end of ``line`` in bash: the completion function run as
    readline runs it, with the line split into words at blanks and at '='."""
    words = line.replace("=", " = ").split() if "=" in line else line.split()
    if line.endswith(" ") or not words:
        words.append("")
    driver = (
        'source "$SCRIPT"\n'
        'COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$LINE"; COMP_POINT=${#LINE}\n'
        "_bar\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    env = shell_env()
    if source is None:
        path = Path(os.environ["HOME"]) / "bar.bash"
        if not path.exists():
            path.write_text(bar_exe("completion", "bash").out)
        source = str(path)
    env.update(SCRIPT=source, LINE=line)
    proc = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", driver, "bash", *words],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    return sorted(set(proc.stdout.split("\n")) - {""})


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


# --- what the parser has, every script has ---------------------------------------------


def parser_tree() -> dict[str, tuple[list[str], list[str]]]:
    """Each command path of the real parser: its sub-commands and its option strings."""
    from bar.cli.parser import build_parser

    tree: dict[str, tuple[list[str], list[str]]] = {}

    def walk(p: argparse.ArgumentParser, path: str) -> None:
        subs: dict[str, argparse.ArgumentParser] = {}
        options: list[str] = []
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                subs.update(action.choices)
            if action.help != argparse.SUPPRESS:  # (hidden: not completed either)
                options += action.option_strings
        implied = getattr(p, "implied", None)  # a short form's options complete there too
        if implied and implied[0] in subs:
            short = subs[implied[0]]._actions
            options += [o for a in short for o in a.option_strings if o not in options]
        tree[path] = (sorted(subs), sorted(options))
        for name, child in subs.items():
            walk(child, f"{path} {name}".strip())

    walk(build_parser(whole=True), "")
    return tree


def test_the_bash_table_holds_every_command_and_option_of_the_parser(
    capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    tree = parser_tree()
    assert {"", "task", "task new", "policy check", "agent setup", "completion"} <= set(tree)
    path = tmp_path / "bar.bash"
    path.write_text(script(capfd, "bash"))
    keys = [f"{kind}:{p}" for p in tree for kind in "SO"]
    lookups = "".join(f'__bar_spec "{key}"; printf "%s\\0" "$REPLY"\n' for key in keys)
    out = subprocess.run(
        ["bash", "--norc", "-c", f"source {path}\n{lookups}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    seen = dict(zip(keys, out.split("\0"), strict=False))
    for p, (subs, options) in tree.items():
        words = lambda key: sorted(e.split("\t")[0] for e in seen[key].splitlines())  # noqa: E731
        assert words(f"S:{p}") == subs, p
        assert words(f"O:{p}") == options, p


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_every_command_and_option_name_is_in_each_script(
    capfd: pytest.CaptureFixture[str], shell: str
) -> None:
    """Each as an entry of the table: a line of its own, its help after a tab."""
    text = script(capfd, shell)
    entries = set(re.findall(r"^'?([^\t\n']+)\t", text, re.MULTILINE))
    entries |= set(re.findall(r"'([^\t\n']+)\t", text))  # fish: 'word<TAB>help' 'word...
    for path, (subs, options) in parser_tree().items():
        assert set(subs) <= entries, (shell, path, set(subs) - entries)
        assert set(options) <= entries, (shell, path, set(options) - entries)


def test_every_task_step_and_state_argument_completes_as_one() -> None:
    """What each argument takes is read from its metavar: a metavar changed in the parser
    the completion does not know would silently complete nothing."""
    from bar.cli.commands.completion import describe
    from bar.cli.parser import build_parser

    kinds: dict[str, str] = {}
    for command in describe(build_parser(whole=True)):
        path = " ".join(command.path)
        for option in command.options:
            for name in option.names:
                kinds[f"{path} {name}"] = option.values.kind if option.values else "flag"
        for n, values in enumerate(command.positionals):
            kinds[f"{path} #{n}"] = values.kind
        if command.rest is not None:
            kinds[f"{path} ..."] = command.rest.kind
    with_task = [key for key in kinds if key.endswith((" --task", " -t"))]
    assert len(with_task) >= 18 and {kinds[key] for key in with_task} == {"task"}
    expected = {
        "task show #0": "task",
        "task switch #0": "task",
        "task close #0": "task",
        "task path #0": "task",
        "task reopen #0": "task",
        "task delete #0": "task",
        "task rename #0": "task",
        "task rename #1": "none",
        "task sync --onto": "branch",
        "undo --task": "task",
        "show #0": "step",
        "replay #0": "step",
        "apply --at": "step",
        "blame --at": "step",
        "diff --from": "state",
        "diff --to": "state",
        "rollback --to": "state",
        "blame #0": "file",
        "policy check --file": "file",
        "run --cwd": "dir",
        "task new --base": "ref",
        "apply --target": "branch",
        "run ...": "command",
        "policy check ...": "command",
        "apply --mode": "choices",
        "run --agent": "choices",
        "completion #0": "choices",
        "log -n": "none",
        "log --json": "flag",
    }
    assert {key: kinds.get(key) for key in expected} == expected


def test_the_bash_script_is_valid_bash(capfd: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "bar.bash"
    path.write_text(script(capfd, "bash"))
    subprocess.run(["bash", "-n", str(path)], check=True)


def test_a_command_added_to_the_parser_is_completed_without_more(
    project: Path, tmp_path: Path
) -> None:
    """Completion is read from the parser: a new command, its choices and the values its
    metavars name need nothing else."""
    from bar.cli.commands.completion import describe
    from bar.cli.completion import render
    from bar.cli.parser import build_parser

    parser = build_parser(whole=True)
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    frob = sub.add_parser("frobnicate", help="a new command")
    frob.add_argument("--colour", choices=("red", "green"))
    frob.add_argument("--task", "-t")
    frob.add_argument("target", choices=("here", "there"))
    frob.add_argument("--since", metavar="STATE")  # as diff --from shows it
    path = tmp_path / "bar.bash"
    path.write_text(render("bash", describe(parser)))
    assert complete_bash("bar frob", source=str(path)) == ["frobnicate"]
    assert complete_bash("bar frobnicate --c", source=str(path)) == ["--colour"]
    assert complete_bash("bar frobnicate --colour ", source=str(path)) == ["green", "red"]
    assert complete_bash("bar frobnicate -t x ", source=str(path)) == ["here", "there"]
    assert complete_bash("bar frobnicate here --since ", project, str(path)) == ["base"]


# --- bash, for real ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("bar ta", ["task"]),
        ("bar r", ["redo", "replay", "resident", "review", "rollback", "run"]),
        (
            "bar task ",
            [
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
            ],
        ),
        ("bar policy ", ["check", "explain", "test"]),
        ("bar --", ["--color", "--debug", "--help", "--no-pager", "--version"]),
        ("bar task close --", ["--force", "--help", "--json", "--keep-worktree", "--task"]),
        ("bar apply --mode ", ["commit", "merge"]),
        ("bar apply --mode=m", ["merge"]),
        ("bar run --agent ", ["claude", "codex", "gemini"]),
        ("bar agent setup c", ["claude", "codex"]),
        ("bar completion ", ["bash", "fish", "zsh"]),
        ("bar apply -m msg --dry", ["--dry-run"]),
        ("bar log -n ", []),  # a number: nothing to offer
        (
            "bar diff --stat ",
            [
                "--from",
                "--help",
                "--json",
                "--stat",
                "--task",
                "--to",
                "--unrecorded",
                "-h",
                "-t",
            ],
        ),
    ],
)
def test_bash_completes_commands_actions_options_and_choices(
    tmp_path: Path, line: str, expected: list[str]
) -> None:
    assert complete_bash(line, cwd=tmp_path) == expected


def test_bash_completes_task_names_in_a_project(project: Path) -> None:
    for line in (
        "bar task show ",
        "bar task switch ",
        "bar task close ",
        "bar log --task ",
        "bar log -t ",
        "bar status --task=",
    ):
        assert complete_bash(line, cwd=project) == ["alpha", "beta"], line
    assert complete_bash("bar task switch a", cwd=project) == ["alpha"]


def test_bash_completes_step_ids_of_the_task_the_line_names(project: Path) -> None:
    assert complete_bash("bar show ", cwd=project) == []  # beta, the active task, has none
    assert complete_bash("bar show --task alpha ", cwd=project) == ["0001", "0002"]
    assert complete_bash("bar show --task=alpha 2", cwd=project) == ["2"]  # as it is typed
    assert complete_bash("bar diff -talpha --to ", cwd=project) == ["0001", "0002", "base"]
    assert complete_bash("bar diff -t alpha --from=", cwd=project) == ["0001", "0002", "base"]
    assert complete_bash("bar rollback -t alpha --to b", cwd=project) == ["base"]
    assert complete_bash("bar apply -t alpha --at 0", cwd=project) == ["0001", "0002"]
    assert complete_bash("bar blame --task alpha x --at ", cwd=project) == ["0001", "0002"]


def test_bash_completes_checkpoints_once_a_step_and_a_dot_are_typed(
    project: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A step run with --agent has a checkpoint after each tool call: ``3.`` lists them."""
    program = tmp_path / "bin" / "claude"
    program.parent.mkdir()
    program.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE_AGENT} --agent claude "$@"\n')
    program.chmod(0o755)
    res = bar_exe(
        "run",
        "--no-pty",
        "--agent",
        "claude",
        "--",
        str(program),
        "write:a.txt=one",
        "echo two > b.txt",
        cwd=project,
    )
    assert res.code == 0, res.err
    assert complete_bash("bar show ", cwd=project) == ["0001"]  # not its checkpoints
    assert complete_bash("bar show 1.", cwd=project) == ["1.1", "1.2"]
    assert complete_bash("bar rollback --to 0001.", cwd=project) == ["0001.1", "0001.2"]
    assert complete_bash("bar apply --at=0001.2", cwd=project) == ["0001.2"]
    shown = bar_exe("__complete", "step", "--", "1.", cwd=project).out.splitlines()
    assert shown == ["1.1\tWrite: a.txt", "1.2\tBash: echo two > b.txt"]


def test_bash_completes_the_steps_of_the_worktree_it_is_in(
    project: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    rows = bar(capfd, "task", "list", "--json").json()
    alpha = next(r for r in rows if r["name"] == "alpha")
    assert complete_bash("bar show ", cwd=Path(alpha["worktree"])) == ["0001", "0002"]
    assert bar(capfd, "task", "switch", "alpha").code == 0
    assert complete_bash("bar rollback --to ", cwd=project) == ["0001", "0002", "base"]


def test_bash_completes_files_and_directories(project: Path) -> None:
    (project / "src").mkdir()
    (project / "src" / "app.py").write_text("x\n")
    (project / "spaced name.txt").write_text("y\n")
    assert complete_bash("bar blame src/", cwd=project) == ["src/app.py"]
    assert complete_bash("bar blame sp", cwd=project) == ["spaced name.txt"]
    assert complete_bash("bar run --cwd s", cwd=project) == ["src"]
    assert complete_bash("bar policy test --file src/a", cwd=project) == ["src/app.py"]


def test_bash_completes_the_command_after_run_as_a_command_line(project: Path) -> None:
    assert "git" in complete_bash("bar run -- gi", cwd=project)
    assert complete_bash("bar run --no-pty -- git READ", cwd=project) == ["README.md"]
    assert "git" in complete_bash("bar policy check -- gi", cwd=project)


def test_bash_completes_refs_and_branches(project: Path) -> None:
    subprocess.run(["git", "tag", "v1"], cwd=project, check=True)
    refs = complete_bash("bar task new x --base ", cwd=project)
    assert "main" in refs and "v1" in refs and any(r.startswith("bar/alpha-") for r in refs)
    assert "v1" not in complete_bash("bar apply --target ", cwd=project)
    assert complete_bash("bar apply --target ma", cwd=project) == ["main"]


def test_outside_a_project_dynamic_values_are_nothing(tmp_path: Path, make_repo: MakeRepo) -> None:
    assert complete_bash("bar task show ", cwd=tmp_path) == []
    assert complete_bash("bar rollback --to ", cwd=tmp_path) == []
    assert complete_bash("bar show ", cwd=make_repo()) == []  # a repository bar does not know


# --- bar __complete ----------------------------------------------------------------------


def test_bar_complete_prints_one_candidate_a_line_with_what_it_is(project: Path) -> None:
    res = bar_exe("__complete", "task", cwd=project)
    assert res.code == 0 and res.err == ""
    lines = res.out.splitlines()
    assert [line.split("\t")[0] for line in lines] == ["alpha", "beta"]
    assert "the first one" in lines[0] and "active task" in lines[1]
    steps = bar_exe("__complete", "state", "--task", "alpha", "--", "", cwd=project).out
    assert [line.split("\t")[0] for line in steps.splitlines()] == ["base", "0001", "0002"]
    assert "echo two > two.txt" in steps.splitlines()[2]


def test_a_task_is_offered_as_the_name_or_id_prefix_that_finds_it(
    project: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """`--task NAME` finds the open task of that name: a closed one of the same name is
    offered by its id; and the steps of a task named by the start of its id complete."""
    from bar.cli import candidates
    from bar.model import tasks

    assert candidates.ID_PREFIX_MIN == tasks.ID_PREFIX_MIN
    old = next(r for r in bar(capfd, "task", "list", "--json").json() if r["name"] == "alpha")
    assert bar(capfd, "task", "close", "alpha").code == 0
    again = new_task(capfd, "alpha")
    lines = bar_exe("__complete", "task").out.splitlines()
    values = [line.split("\t")[0] for line in lines]
    assert values == ["beta", "alpha", old["id"]]  # open ones first
    assert complete_bash("bar show --task alpha ", cwd=project) == []  # the new one: no steps
    assert complete_bash(f"bar show --task {old['id']} ", cwd=project) == ["0001", "0002"]
    assert complete_bash(f"bar show --task {old['id'][:5]} ", cwd=project) == ["0001", "0002"]
    assert again["id"] not in values


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["nonsense"],
        ["step", "--task"],
        ["step", "--task", "nope"],
        ["step", "extra"],
        ["task", "--bogus"],
    ],
)
def test_bar_complete_never_fails_loudly(project: Path, args: list[str]) -> None:
    res = bar_exe("__complete", *args, cwd=project)
    assert (res.code, res.out, res.err) == (0, "", "")


def test_bar_complete_survives_a_broken_project(project: Path) -> None:
    (project_dir() / "state.json").write_text("{not json")
    for task_json in (project_dir() / "tasks").glob("*/task.json"):
        task_json.write_text("")
    ledgers = list((project_dir() / "tasks").glob("*/ledger.jsonl"))
    assert ledgers
    with open(ledgers[0], "a") as f:
        f.write('{"step_id": "0003", "kind": "ru')  # a line torn by a crash
    res = bar_exe("__complete", "task", cwd=project)
    assert (res.code, res.out, res.err) == (0, "", "")


def test_bar_complete_imports_neither_the_parser_nor_the_core() -> None:
    """It runs on every Tab press: no argparse, no parser, no config, no api."""
    probe = (
        "import sys\n"
        "from bar.cli.main import main\n"
        "main(['__complete', 'step'])\n"
        "print('MODULES', ' '.join(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    loaded = set(out.split("MODULES ", 1)[1].split())
    heavy = {
        "argparse",
        "yaml",
        "bar.cli.parser",
        "bar.api",
        "bar.model.tasks",
        "bar.model.config",
        "bar.model.project",
        "bar.model.ledger_file",
        "bar.policy",
        "dataclasses",
        "inspect",
    }
    assert not loaded & heavy, sorted(loaded & heavy)


# --- the command ----------------------------------------------------------------------------


def test_completion_help_says_how_to_install_each_script(
    capfd: pytest.CaptureFixture[str],
) -> None:
    res = bar(capfd, "completion", "--help")
    assert res.code == 0
    out = res.out
    assert 'eval "$(bar completion bash)"' in out
    assert 'bar completion zsh > "${fpath[1]}/_bar"' in out
    assert "bar completion fish > ~/.config/fish/completions/bar.fish" in out


def test_completion_of_an_unknown_shell_is_a_usage_error(
    capfd: pytest.CaptureFixture[str],
) -> None:
    res = bar(capfd, "completion", "tcsh")
    assert res.code == 2 and "invalid choice" in res.err


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_the_installed_script_registers_for_bar(tmp_path: Path) -> None:
    out = subprocess.run(
        ["bash", "--norc", "-c", 'eval "$(bar completion bash)"; complete -p bar'],
        env=shell_env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == "complete -F _bar bar"
