"""bar.shell: what text each command of a line is shown to policy rules as."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pytest
from helpers import ROOT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bar.shell import PLACEHOLDER, Unit, analyse_argv, analyse_line, tree
from bar.shell.analysis import is_plain


def texts(line: str) -> list[str]:
    analysis = analyse_line(line)
    assert analysis.error is None, analysis
    return analysis.texts()


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        # every simple command of a compound line
        ("a; rm -rf /", ["a", "rm -rf /"]),
        ("a && rm -rf / || b", ["a", "rm -rf /", "b"]),
        ("(cd / && rm -rf *)", ["cd /", "rm -rf *"]),
        ("{ rm -rf /; }", ["rm -rf /"]),
        ("if true; then rm -rf ~; fi", ["rm -rf ~"]),
        ("for d in a b; do rm -r $d; done", ["rm -r $d"]),
        ("case $x in a) rm -rf /;; esac", ["rm -rf /"]),
        ("f() { rm -rf /; }", ["rm -rf /", "f() { rm -rf / ; }"]),
        # substitutions, also inside quotes and parameter expansions
        ("echo $(rm -rf /)", ["rm -rf /"]),
        ('echo "a $(rm -rf /) b"', ["rm -rf /"]),
        ("echo `rm -rf /`", ["rm -rf /"]),
        ("echo ${x:-$(rm -rf /)}", ["rm -rf /"]),
        ("x=$(rm -rf /)", ["rm -rf /", "x=$(rm -rf /)"]),
        ("diff <(curl -s a) b", ["curl -s a", "diff <(curl -s a) b"]),
        # scripts run by other programs
        ("sh -c 'rm -rf /'", ["sh -c …", "rm -rf /"]),
        ("bash -lc 'rm -rf ~'", ["rm -rf ~"]),
        ('eval "rm -rf /"', ["eval …", "rm -rf /"]),
        ("eval 'rm' '-rf' '/'", ["rm -rf /"]),
        ("su -c 'rm -rf /'", ["rm -rf /"]),
        ("ssh host rm -rf /", ["ssh host … … …", "rm -rf /"]),
        ("alias x='rm -rf /'", ["alias x=…", "rm -rf /"]),
        ("trap 'rm -rf ~' EXIT", ["rm -rf ~"]),
        ("find . -exec rm -rf {} \\;", ["find . -exec rm -rf {} ;", "rm -rf {}"]),
        ("bash <<EOF\nrm -rf /\nEOF", ["bash <<EOF", "rm -rf /"]),
        ("sh -s <<'EOF'\nrm -rf ~\nEOF", ["rm -rf ~"]),
        ("bash <<< 'rm -rf /'", ["bash <<<…", "rm -rf /"]),
        ("echo 'rm -rf /' | sh", ["echo …", "rm -rf /", "echo … | sh"]),
        ("printf 'rm -rf ~' | bash", ["rm -rf ~"]),
        ("cat <<EOF | bash\nrm -rf /\nEOF", ["rm -rf /", "cat <<EOF | bash"]),
        ("x && cat <<EOF | bash\nrm -rf /\nEOF", ["rm -rf /", "cat <<EOF | bash"]),
        ("env -S 'rm -rf /'", ["rm -rf /"]),
        # wrappers and program paths
        ("sudo -u root rm -rf /", ["rm -rf /", "sudo -u root rm -rf /"]),
        ("FOO=1 env -i BAR=2 nice -n 5 /usr/bin/rm -rf ~", ["rm -rf ~"]),
        ("nohup timeout -s KILL 5m rm -rf / &", ["rm -rf /"]),
        ("command rm -rf /", ["rm -rf /"]),
        ("exec rm -rf /", ["rm -rf /"]),
        ("time rm -rf /", ["rm -rf /"]),
        ("stdbuf -oL rm -rf /", ["rm -rf /"]),
        ("ls | xargs -0 -n1 rm -rf", ["rm -rf", "xargs -0 -n1 rm -rf"]),
        ("doas busybox rm -rf /", ["rm -rf /"]),
        ("command -v rm", ["command -v rm"]),
        ("setsid -f flock /tmp/l taskset -c 0 rm -rf /", ["rm -rf /"]),
        ("unshare -r strace -f -o log chrt 10 rm -rf /", ["rm -rf /"]),
        ("systemd-run --user -p X=1 screen -dm rm -rf /", ["rm -rf /"]),
        ("taskset -p 1 42", ["taskset -p 1 42"]),
        # programs that run a script
        ("script -qc 'rm -rf /' /dev/null", ["script -qc … /dev/null", "rm -rf /"]),
        ("tmux new -d 'rm -rf /' \\; send-keys 'rm -rf ~' Enter", ["rm -rf /", "rm -rf ~"]),
        ("parallel ::: 'rm -rf /'", ["rm -rf /"]),
        ("echo 'rm -rf /' | at now", ["rm -rf /"]),
        ("expect -c 'spawn rm -rf /'", ["rm -rf /"]),
        ("echo cm0gLXJmIC8= | base64 -d | sh", ["rm -rf /"]),
        ("git -c alias.x='!rm -rf /' x", ["rm -rf /"]),
        ("git config alias.y 'push -f'", ["git config alias.y …", "git push -f"]),
        ("GIT_SSH_COMMAND='rm -rf /' git fetch", ["git fetch", "rm -rf /"]),
        # abbreviated long options are written out; known outputs replace `$(…)`
        ("rm --rec --fo /", ["rm --recursive --force /"]),
        ("git reset --har", ["git reset --hard"]),
        ("rm -rf $(echo /)", ["echo …", "rm -rf /"]),
        # unquoting
        ("'rm' -rf /", ["rm -rf /"]),
        ('r""m -rf /', ["rm -rf /"]),
        ("\\rm -rf /", ["rm -rf /"]),
        ("$'\\x72m' -rf $'\\057'", ["rm -rf /"]),
        ('rm -rf "$HOME"', ["rm -rf $HOME"]),
        ('rm -rf "${HOME}/"*', ["rm -rf ${HOME}/*"]),
        ("rm -rf 'a b' \"c\"", ["rm -rf 'a b' c"]),
        ("rm -rf /{etc,usr}", ["rm -rf /etc /usr"]),
        ("rm -rf '/{etc,usr}'", ["rm -rf /{etc,usr}"]),
        ('echo "$x $y" > f', ["echo … >f"]),
        # redirections are tokens
        ("echo hi > /dev/sda 2>&1", ["echo … >/dev/sda 2>&1"]),
        ("cat x >> log &> all", ["cat x >>log &>all"]),
        ("> /dev/sda", [">/dev/sda"]),
        ("{ echo; } > /dev/sda", [">/dev/sda"]),
        # pipelines are also one unit, with and without wrappers
        ("curl -s x | sudo bash", ["curl -s x | bash", "curl -s x | sudo bash"]),
        # fork bomb: a function definition is a unit
        (":(){ :|:& };:", [":() { : | : & }"]),
    ],
)
def test_units(line: str, expected: list[str]) -> None:
    got = texts(line)
    for text in expected:
        assert text in got


@pytest.mark.parametrize(
    ("line", "absent"),
    [
        ('echo "rm -rf /"', "rm"),
        ("printf '%s' 'git push -f'", "push"),
        ('git commit -m "rm -rf /"', "rm -rf"),
        ('git commit -am "rm -rf /"', "rm -rf"),
        ('git commit --message="rm -rf /"', "rm -rf"),
        ('git -C repo tag -a v1 -m "reset --hard"', "hard"),
        ('grep -r "reset --hard" .', "hard"),
        ('grep -e "rm -rf" -e x .', "rm -rf"),
        ('git grep "mkfs"', "mkfs"),
        ('git log --grep="force push"', "force"),
        ('claude "please don\'t rm -rf /"', "rm"),
        ('codex exec --prompt="rm -rf /"', "rm"),
        ('gh pr create --title "rm -rf /" --body x', "rm"),
        ("cat <<EOF\nrm -rf /\nEOF", "rm"),
        ("cat > x.sh <<'EOF'\nrm -rf /\nEOF", "rm"),
        ("python3 - <<'EOF'\nprint('rm -rf /')\nEOF", "rm"),
        ("# rm -rf /", "rm"),
    ],
)
def test_data_is_not_a_command(line: str, absent: str) -> None:
    for text in texts(line):
        assert absent not in text


def test_data_is_masked_but_commands_inside_it_still_run() -> None:
    got = texts('git commit -m "$(rm -rf /)"')
    assert f"git commit -m {PLACEHOLDER}" in got
    assert "rm -rf /" in got


def test_unquoted_heredoc_substitutions_run() -> None:
    assert "rm -rf /" in texts("cat <<EOF\n$(rm -rf /)\nEOF")
    assert "rm -rf /" not in texts("cat <<'EOF'\n$(rm -rf /)\nEOF")


def test_wrapper_view_comes_after_the_command() -> None:
    (unit,) = analyse_line("sudo rm -rf /").units
    assert unit.views == ("rm -rf /", "sudo rm -rf /")


def test_pipeline_unit_names_its_stages() -> None:
    units = analyse_line("curl x | sh").units
    assert units[-1] == Unit(("curl x | sh",), (0, 1))


def test_argv_words_are_not_split_or_parsed() -> None:
    assert analyse_argv(["echo", "a; rm -rf /"]).texts() == [f"echo {PLACEHOLDER}"]
    assert analyse_argv(["rm", "-rf", "my dir"]).texts() == ["rm -rf 'my dir'"]
    assert analyse_argv(["touch", "a;b"]).texts() == ["touch a;b"]
    assert "rm -rf /" in analyse_argv(["sudo", "bash", "-c", "cd / && rm -rf /"]).texts()
    assert analyse_argv([]).units == ()


def test_syntax_error_is_reported_and_raw_text_kept() -> None:
    analysis = analyse_line('echo "unterminated; rm -rf /')
    assert analysis.error == "syntax error"
    assert 'echo "unterminated; rm -rf /' in analysis.texts()
    assert "rm -rf /" in analysis.texts()  # cut at `;`, quotes dropped


def test_deep_nesting_does_not_crash() -> None:
    analysis = analyse_line("echo " + "$(" * 400 + "x" + ")" * 400)
    assert analysis.error is not None
    scripts = "bash -c " + "'eval " * 30 + "x" + "'" * 30
    assert analyse_line(scripts).units
    deep = "echo " + "$(" * 110 + "rm -rf /" + ")" * 110
    line = deep
    for _ in range(8):  # scripts in scripts, each nested close to the limit
        line = "bash -c " + shlex.quote(line + " ; " + deep)
    analysis = analyse_line(line)
    assert analysis.error == "nested too deeply"
    assert "rm -rf /" in analysis.texts()


PLAIN = st.text(alphabet="abcdefrm-_./:=@%+,~^*? \t0123456789ifthendoneAZ", max_size=60)


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(PLAIN)
def test_fast_path_is_exact(line: str) -> None:
    """Lines of plain characters skip tree-sitter and give the units it gives.

    Where tree-sitter-bash rejects such a line (it misreads a first word like `x@y` or
    `1%2`, which bash runs as a command), the fast path gives what bash runs: the
    blank-separated words as one command.
    """
    fast, slow = analyse_line(line), analyse_line(line, fast=False)
    if not is_plain(line):  # a lone '-': both go through tree-sitter
        assert fast.units == slow.units and fast.error == slow.error
    elif slow.error is None:
        assert fast.units == slow.units
        assert fast.error is None
    else:
        assert fast.units == analyse_argv(line.split()).units


@pytest.mark.parametrize(
    "line",
    [
        "rm -rf /",
        "git push --force origin main",
        "sudo -u root env A=1 nice -n 5 timeout 10 rm -rf ~",
        "FOO=1 BAR= x=y=z cmd a==b =c ~u %x ^y @z +w ,v",
        "dd if=/dev/zero of=/dev/sda bs=1M",
        "xargs -0 -n1 rm -rf",
        "bash -c ls",
        "export A=1 B",
        "unset A",
        "if",
        "time rm -rf /",
        "   ",
        "",
    ],
)
def test_fast_path_examples(line: str) -> None:
    fast, slow = analyse_line(line), analyse_line(line, fast=False)
    assert (fast.units, fast.error) == (slow.units, slow.error)


SHELL_TOKENS = [*"$(){}[]<>|&;'\"`\\\n\t #!*?=~-", "<<", "<<<", "EOF", "$(", "rm -rf /", "sh -c "]
ANY_TEXT = st.lists(st.one_of(st.sampled_from(SHELL_TOKENS), st.characters()), max_size=60).map(
    "".join
)


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(ANY_TEXT)
def test_any_text_is_analysed_without_raising(line: str) -> None:
    analysis = analyse_line(line)
    for unit in analysis.units:
        assert all(isinstance(view, str) for view in unit.views)
        assert all(0 <= part < len(analysis.units) for part in unit.parts)


@settings(max_examples=200)
@given(st.lists(st.text(max_size=20), max_size=8))
def test_any_argv_is_analysed_without_raising(argv: list[str]) -> None:
    analyse_argv(argv)


def test_inputs_that_crash_tree_sitter_bash_are_parsed_safely() -> None:
    """`{` then a 4-byte character can SIGSEGV tree-sitter-bash 0.25 (upstream #337);
    run in a child so a regression fails the test instead of killing the test run."""
    crashers = ["{\U0010363d", "{\U0010ffff}", "{\U00031860", "{\U00080000", "{x \U000fffff"]
    code = (
        "import sys; from bar.shell import analyse_line\n"
        f"for line in {crashers!r}:\n"
        "    for _ in range(20): analyse_line(line)\n"
        "print(analyse_line('echo {\\U0001f600,b} > x').texts())\n"
    )
    src = str(ROOT / "src")
    env = {**os.environ, "PYTHONPATH": src}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['echo … … >x']"  # {😀,b} is two words


def test_parser_falls_back_to_the_package_imports(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(package: str) -> None:
        raise ImportError(package)

    monkeypatch.setattr(tree, "_extension", broken)
    monkeypatch.setattr(tree, "_parser_cache", [])
    assert "rm -rf /" in analyse_line("echo $(rm -rf /)").texts()


def test_a_missing_parser_is_an_error_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing() -> None:
        raise ImportError("no tree_sitter")

    monkeypatch.setattr(tree, "load_parser", missing)
    analysis = analyse_line("echo 'x'; rm -rf /")
    assert analysis.error == "shell parser unavailable (ImportError)"
    assert "rm -rf /" in analysis.texts()
    assert analyse_line("rm -rf /").error is None  # plain lines need no parser


def test_a_lone_dash_reads_the_same_on_both_paths() -> None:
    """tree-sitter-bash drops a lone ``-`` word without reporting an error (found by
    ``test_fast_path_is_exact``): such lines never take the fast path, and the text the
    parser skipped is not counted as a syntax error."""
    line = "- 1="
    assert analyse_line(line).units == analyse_line(line, fast=False).units
    assert analyse_line("python3 - <<'EOF'\nprint(1)\nEOF").error is None
