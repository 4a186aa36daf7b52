"""The exec check's compiled listener (bar.sandbox.exec_quick): the calls it answers
without the judge are exactly those no rule can match.

Its shortcut rests on two things, each held here to what it stands for: the policy's
judgment of the same vector (every vector it lets run unjudged is one the policy allows
with no event, over the rules' own examples, the labelled corpus and generated vectors),
and the shell analysis (a program it calls plain is analysed as its words alone, for
every name the analysis's code spells).
"""

from __future__ import annotations

import ast
import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from bar import shell
from bar.policy import default_policy
from bar.policy.loader import parse_policy_text
from bar.policy.places import Places
from bar.sandbox import UNAVAILABLE_ENV, exec_quick, exec_watch, landlock
from bar.shell.quoting import render
from bar.step.exec_judge import ExecJudge

LIB = exec_quick.library()
built = pytest.mark.skipif(LIB is None, reason="the compiled listener is not built here")
WATCHES = (
    landlock.abi_version() >= 1
    and not os.environ.get(UNAVAILABLE_ENV)
    and exec_watch.supported() is None
)
watches = pytest.mark.skipif(not WATCHES, reason="no exec check here")
SHELL_SOURCES = Path(shell.__file__).parent
CORPUS = Path(__file__).parent.parent / "data" / "policy_corpus.yaml"
HOME = "/home/me"
WORKTREE = "/work/repo/.bar/wt"
TEMP = "/tmp/bar-step-1"
# the generated vectors tried (make test-long and a curious developer: more)
EXAMPLES = int(os.environ.get("BAR_EXEC_QUICK_EXAMPLES", "800"))


def _places() -> Places:
    return Places.of(worktree=WORKTREE, homes=[HOME], temps=[TEMP])


def _judge(policy: Any = None) -> ExecJudge:
    return ExecJudge(policy or default_policy(), _places(), lambda *events: None)


def _unsound(judge: ExecJudge, argv: list[str]) -> str | None:
    """What is wrong when the shortcut lets ``argv`` run unjudged but the policy would
    have said something of it (None: sound, or not let through)."""
    assert LIB is not None
    shortcut = _SHORTCUTS.get(id(judge))
    if shortcut is None:
        shortcut = _SHORTCUTS[id(judge)] = judge.shortcut()
    assert shortcut is not None
    name = argv[0].rsplit("/", 1)[-1]
    if not name or not exec_quick.lets_run(LIB, shortcut, name, argv):
        return None
    decision = judge.policy.evaluate_exec(
        "/usr/bin/" + name, argv, judge.places, cwd=WORKTREE, exists=lambda _: True
    )
    if decision.action == "allow" and not decision.events:
        return None
    return f"{argv!r}: {decision.action} {[e.rule for e in decision.events]}"


_SHORTCUTS: dict[int, Any] = {}


def _vectors(lines: list[str]) -> list[list[str]]:
    """Each line's words, and each tail of them (a wrapper's program, a pipeline's
    later stage, as a program receives it)."""
    found = []
    for line in lines:
        try:
            words = shlex.split(line)
        except ValueError:
            words = line.split()
        for stage in " ".join(words).replace("&&", "|").replace(";", "|").split("|"):
            parts = stage.split()
            found += [parts[k:] for k in range(len(parts))]
        found += [words[k:] for k in range(len(words))]
    return [v for v in found if v]


@built
def test_the_shortcut_lets_through_nothing_a_rule_of_the_default_policy_matches() -> None:
    judge = _judge()
    lines = [ex for rule in judge.policy.rules for ex in (*rule.match, *rule.no_match)]
    corpus = yaml.safe_load(CORPUS.read_text(encoding="utf-8"))
    lines += corpus["dangerous"] + corpus["benign"]
    # the places as a shell expanded them: the rules speak of ~, ./ and /tmp
    lines += [
        line.replace("~", HOME).replace("./", WORKTREE + "/").replace("/tmp", TEMP)
        for line in list(lines)
    ]
    vectors = _vectors(lines)
    wrong = [w for w in (_unsound(judge, v) for v in vectors) if w]
    assert not wrong, wrong[:10]
    assert len(vectors) > 3000  # (and the shortcut lets through a fair share of them)
    shortcut = judge.shortcut()
    assert shortcut is not None and LIB is not None
    let = sum(
        exec_quick.lets_run(LIB, shortcut, v[0].rsplit("/", 1)[-1], v)
        for v in vectors
        if v[0].rsplit("/", 1)[-1]
    )
    assert let > len(vectors) // 10


# fragments the generated vectors are made of: the rules' own strings, in every case,
# the places, separators a path may follow, quotes and blanks
_FRAGMENTS = sorted(
    {lit for rule in default_policy().rules for lit in rule.literals or ()}
    | {"DROP", "Table", "drop", "TRUNCATE", "sqlite3", "schema", "DataBase"}
    | {HOME, WORKTREE, TEMP, "/tmp", "/", "~", ".", "..", "-", "--", "=", "@", ":", "'"}
    | {" ", "x", "-rf", "-f", "origin", "main", "HEAD", "build", "src/a.c", "-o"}
)
_WORD = st.lists(st.sampled_from(_FRAGMENTS), min_size=0, max_size=4).map("".join)
_PLAIN_NAMES = ["cc", "true", "ls", "make", "cc1", "as", "ld", "gcc", "clang", "jq", "wc"]


@built
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True)
@given(name=st.sampled_from(_PLAIN_NAMES), args=st.lists(_WORD, max_size=6))
def test_generated_vectors_let_through_are_allowed_by_the_policy(
    name: str, args: list[str]
) -> None:
    assert _unsound(_DEFAULT, [name, *args]) is None


_DEFAULT = _judge()


@built
def test_a_rule_matched_without_regard_to_case_keeps_its_strings_without_regard_to_case() -> None:
    policy = parse_policy_text(
        "version: 1\nrules:\n"
        "  - name: no-frobnicate\n"
        "    pattern: '(?i)\\bfrobnicate\\s+-x'\n"
        "    action: block\n"
        "    reason: test\n",
        "test",
    )
    judge = _judge(policy)
    assert policy.needed() == ((), ("frobnicate",))
    shortcut = judge.shortcut()
    assert shortcut is not None and LIB is not None
    for argv in (["tool", "FROBNICATE", "-x"], ["tool", "y", "FrObNiCaTe", "-x"]):
        assert not exec_quick.lets_run(LIB, shortcut, "tool", argv)
        assert _unsound(judge, argv) is None
    assert judge.policy.evaluate_exec("/usr/bin/tool", ["tool", "FrObNiCaTe", "-x"]).blocked
    assert exec_quick.lets_run(LIB, shortcut, "tool", ["tool", "frob", "-x"])


def test_a_rule_that_needs_no_string_turns_the_shortcut_off() -> None:
    policy = parse_policy_text(
        "version: 1\nrules:\n  - name: any-dot\n    pattern: '[.]{3}'\n    action: warn\n    reason: t\n",
        "test",
    )
    assert policy.needed() is None
    assert _judge(policy).shortcut() is None


def _names_in_the_analysis() -> set[str]:
    """Every string the shell package's code spells that could be a program's name."""
    names: set[str] = set()
    for source in SHELL_SOURCES.glob("*.py"):
        tree = ast.parse(source.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for word in node.value.split():
                    if 0 < len(word) <= 40 and all(c.isalnum() or c in "._+-" for c in word):
                        names.add(word)
    return names


_PROBES = (
    [],
    ["x"],
    ["-c", "rm -rf /"],
    ["-exec", "rm", "-rf", "/", ";"],
    ["-e", "rm -rf /"],
    ["-d"],
    ["--decode"],
    ["-x", "rm", "-rf", "/"],
    ["--", "rm", "-rf", "/"],
    ["a b", "--force", "-m", "msg"],
    ["-rf", "/", "push", "--force"],
    ["--exec=rm -rf /", "--receive-pack=sh"],
    ["run", "rm", "-rf", "/"],
    ["FOO=1", "rm", "-rf", "/"],
    ["rev-parse", "--show-toplevel"],
)


def test_a_plain_program_is_analysed_as_its_words_alone() -> None:
    names = _names_in_the_analysis() | {"python3.12", "node20", "perl5.36", "lua5.4"}
    names |= set(_PLAIN_NAMES)
    plain = sorted(n for n in names if shell.plain_program(n))
    assert "cc" in plain and "make" in plain and "true" in plain
    for name in ("sh", "env", "sudo", "xargs", "find", "git", "python3", "awk", "cat", "eval"):
        assert not shell.plain_program(name), name
    wrong = []
    for name in plain:
        for probe in _PROBES:
            for program in (name, f"/usr/bin/{name}"):
                words = [program, *probe]
                analysis = shell.analyse_argv(words)
                expected = (shell.Unit((render([name, *probe]),), ()),)
                if analysis.units != expected or analysis.error is not None:
                    wrong.append((words, analysis.units))
    assert not wrong, wrong[:5]


def _watched(script: str, cwd: Path, judge: ExecJudge, env: dict[str, str]) -> Any:
    watch = exec_watch.Watch(judge, lambda _: None, shortcut=judge.shortcut())
    watch.begin()

    def inside() -> None:
        landlock.prctl(38, 1)  # (no_new_privs, as a step's confinement sets it)
        watch.inside()

    try:
        done = subprocess.run(
            ["sh", "-c", script],
            preexec_fn=inside,
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        watch.started()
        watch.close()
    return done, list(watch.counts)


@watches
@built
def test_the_compiled_listener_answers_a_loop_and_a_search_itself(tmp_path: Path) -> None:
    judge = ExecJudge(default_policy(), Places.of(worktree=tmp_path), lambda *e: None)
    script = (
        "i=0; while [ $i -lt 200 ]; do /bin/true $i; i=$((i+1)); done; "
        f"PATH={tmp_path}/no:{tmp_path}/none:/usr/bin:/bin; export PATH; true; ls >/dev/null"
    )
    done, counts = _watched(script, tmp_path, judge, dict(os.environ))
    assert done.returncode == 0, done.stderr
    run, missing, judged = counts
    assert run >= 200 and missing >= 2 and judged <= 5, counts


@pytest.fixture(params=["compiled", "python"])
def listener(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which listener answers: the compiled one, or Python's alone."""
    if request.param == "compiled" and LIB is None:
        pytest.skip("the compiled listener is not built here")
    if request.param == "python":
        monkeypatch.setenv("BAR_EXEC_LISTENER", "python")
    return str(request.param)


def _decoys(tmp_path: Path) -> tuple[Path, Path]:
    """A decoy home holding ``keep`` and a worktree beside it."""
    home = tmp_path / "home"
    (home / "keep").mkdir(parents=True)
    work = tmp_path / "wt"
    work.mkdir()
    return home, work


@watches
def test_both_listeners_refuse_and_record_the_same(tmp_path: Path, listener: str) -> None:
    home, work = _decoys(tmp_path)
    (work / "s.sh").write_text(
        'rm -rf "$HOME"\necho rm=$?\ncp -r "$HOME" copy\nls -d copy\n'
        "i=0; while [ $i -lt 20 ]; do /bin/true $i; i=$((i+1)); done\necho done\n"
    )
    events: list[dict[str, Any]] = []
    judge = ExecJudge(
        default_policy(),
        Places.of(worktree=work, homes=[str(home)]),
        lambda *e: events.extend(e),
    )
    env = {**os.environ, "HOME": str(home)}
    done, counts = _watched("sh s.sh", work, judge, env)
    assert (home / "keep").is_dir()
    assert "rm=126" in done.stdout and "copy" in done.stdout and "done" in done.stdout
    assert [e["rule"] for e in events] == ["rm-recursive-root-or-home"]
    assert events[0]["argv"] == ["rm", "-rf", str(home)]
    if listener == "compiled":
        assert counts[exec_quick.RUN] >= 20
    else:
        assert counts == [0, 0, 0]


# ways to a program that bar once followed as its own process, not the step's: each is
# judged as what really runs, or refused (the home is a decoy, the worktree a repository)
_ROUNDABOUT = """
( exec </usr/bin/git; exec /dev/stdin reset --hard ); echo viastdin=$?
( exec -a git-reset /usr/bin/git --hard ); echo argv0=$?
cat f
ln -s "$LOADER" ./x; ./x /bin/rm -rf "$HOME"; echo loader=$?
cp "$LOADER" ./y; ./y /bin/rm -rf "$HOME"; echo loadercopy=$?
ln -s /dev/stdin ./z; ( exec </bin/rm; exec ./z -rf "$HOME" ); echo linkstdin=$?
ls -d "$HOME/keep"
/proc/self/exe -c 'echo selfexe ok'
exec 7</bin/true; /dev/fd/7 && echo fd7=$?
"""


@watches
def test_a_program_reached_roundabout_is_judged_as_what_runs(tmp_path: Path, listener: str) -> None:
    loader = next(
        (
            p
            for p in ("/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1")
            if Path(p).exists()
        ),
        None,
    )
    if loader is None:
        pytest.skip("no dynamic loader where bar looks for one")
    home, work = _decoys(tmp_path)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], cwd=work, check=True)
    (work / "f").write_text("a\n")
    subprocess.run([*git, "add", "f"], cwd=work, check=True)
    subprocess.run([*git, "commit", "-qm", "f"], cwd=work, check=True)
    (work / "f").write_text("changed\n")
    events: list[dict[str, Any]] = []
    judge = ExecJudge(
        default_policy(),
        Places.of(worktree=work, homes=[str(home)]),
        lambda *e: events.extend(e),
    )
    env = {**os.environ, "HOME": str(home), "LOADER": loader}
    (work / "r.sh").write_text(_ROUNDABOUT)
    done, _ = _watched("bash r.sh", work, judge, env)
    out = done.stdout
    for said in (
        "viastdin=126",
        "argv0=126",
        "loader=126",
        "loadercopy=126",
        "selfexe ok",
        "fd7=0",
    ):
        assert said in out, (said, out, done.stderr)
    assert "linkstdin=0" not in out and "changed" in out
    assert (home / "keep").is_dir()
    assert {e["rule"] for e in events} == {"git-reset-hard", "rm-recursive-root-or-home"}
