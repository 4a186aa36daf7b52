"""bar.policy: loading and validating policy files, decisions, the default policy."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import DATA, ROOT, examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bar import __version__
from bar.errors import ExitCode, PolicyError
from bar.policy import (
    DEFAULT_POLICY_TEXT,
    PARSE_ERROR_RULE,
    Decision,
    ExampleFailure,
    Policy,
    PolicyEvent,
    check_examples,
    default_policy,
    load_policy,
    parse_policy_text,
    required_literals,
)
from bar.shell import analyse_line

CORPUS = DATA / "policy_corpus.yaml"

SMALL = """\
version: 1
rules:
  - name: no-rm-root
    pattern: '^rm\\s.*\\s/$'
    action: block
    reason: deletes everything
  - name: sudo
    pattern: '^sudo\\s'
    action: warn
    reason: root
  - name: pushes
    pattern: '^git\\s+push\\b'
    action: log
    reason: network
"""


@pytest.fixture
def small() -> Policy:
    return parse_policy_text(SMALL, "small.yaml")


# ------------------------------------------------------------------ decisions


def test_nothing_matches_allows(small: Policy) -> None:
    decision = small.evaluate_line("ls -la")
    assert decision == Decision("allow", ())
    assert not decision.blocked
    assert decision.to_json() == {"decision": "allow", "events": []}


def test_strictest_action_wins_and_every_match_is_an_event(small: Policy) -> None:
    decision = small.evaluate_line("git push; sudo rm -rf /")
    assert decision.action == "block"
    assert decision.blocked
    assert [(e.rule, e.action, e.matched) for e in decision.events] == [
        ("pushes", "log", "git push"),
        ("no-rm-root", "block", "rm -rf /"),
        ("sudo", "warn", "sudo rm -rf /"),
    ]


def test_warn_beats_log(small: Policy) -> None:
    assert small.evaluate_line("sudo git push").action == "warn"


def test_event_records(small: Policy) -> None:
    (event,) = small.evaluate_line("rm -rf /").events
    assert event == PolicyEvent("no-rm-root", "block", "rm -rf /", "deletes everything")
    assert event.to_record() == {"rule": "no-rm-root", "action": "block", "matched": "rm -rf /"}
    assert small.evaluate_line("rm -rf /").to_json() == {
        "decision": "block",
        "events": [
            {
                "rule": "no-rm-root",
                "action": "block",
                "matched": "rm -rf /",
                "reason": "deletes everything",
            }
        ],
    }
    with pytest.raises(AttributeError):
        event.action = "log"


def test_same_match_twice_is_one_event(small: Policy) -> None:
    assert len(small.evaluate_line("rm -rf /; rm -rf /").events) == 1
    assert len(small.evaluate_line("rm -rf /; rm -r /").events) == 2


def test_pipeline_is_not_reported_again_for_a_rule_that_matched_a_stage() -> None:
    policy = parse_policy_text(
        "version: 1\nrules:\n  - {name: r, pattern: 'rm', action: warn, reason: x}\n", "p"
    )
    assert [e.matched for e in policy.evaluate_line("rm x | cat").events] == ["rm x"]


def test_rules_see_the_normalised_command_not_the_raw_line() -> None:
    # the seed's own unanchored rule
    policy = parse_policy_text(
        "version: 1\nrules:\n"
        "  - {name: no-rm-rf-root, pattern: 'rm\\s+-rf\\s+/', action: block, reason: x}\n",
        "p",
    )
    assert policy.evaluate_line("/usr/bin/rm -rf /").blocked
    assert policy.evaluate_line("sudo 'rm' -rf /").blocked
    assert policy.evaluate_line("bash -c 'rm -rf /'").blocked
    assert not policy.evaluate_line('echo "rm -rf /"').events
    assert not policy.evaluate_line('git commit -m "rm -rf / is bad"').events
    assert not policy.evaluate_line("cat <<EOF\nrm -rf /\nEOF").events


def test_evaluate_argv(small: Policy) -> None:
    assert small.evaluate_argv(["rm", "-rf", "/"]).blocked
    assert small.evaluate_argv(["sh", "-c", "rm -rf /"]).blocked
    assert not small.evaluate_argv(["echo", "rm -rf /"]).events
    assert small.evaluate_argv([]).action == "allow"


def test_unparseable_line_gets_the_configured_action(small: Policy) -> None:
    decision = small.evaluate_line('ls "unterminated')
    assert decision.action == "warn"
    assert decision.events[-1].rule == PARSE_ERROR_RULE
    assert decision.events[-1].matched == 'ls "unterminated'
    strict = parse_policy_text(SMALL + "on_parse_error: block\n", "strict.yaml")
    assert strict.evaluate_line('ls "unterminated').blocked
    # the raw text is still matched, so a danger in it is still found
    assert strict.evaluate_line('echo "x; rm -rf /').events[0].rule == "no-rm-root"


# ------------------------------------------------------------------ validation


def rule(**fields: object) -> str:
    base: dict[str, object] = {
        "name": "no-rm",
        "pattern": "^rm",
        "action": "block",
        "reason": "r",
    }
    base.update(fields)
    return yaml.safe_dump({"version": 1, "rules": [{k: v for k, v in base.items() if v != "-"}]})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (rule(pattern="rm ("), "policy rule 'no-rm' in /x/.bar/policy.yaml: bad pattern:"),
        (rule(pattern=""), "policy rule 'no-rm' in /x/.bar/policy.yaml: empty pattern"),
        (rule(action="deny"), "policy rule 'no-rm' in /x/.bar/policy.yaml: unknown action 'deny'"),
        (rule(reason="-"), "policy rule 'no-rm' in /x/.bar/policy.yaml: missing field 'reason'"),
        (rule(pattern=3), "policy rule 'no-rm' in /x/.bar/policy.yaml: 'pattern' must be a string"),
        (
            rule(severity="high"),
            "policy rule 'no-rm' in /x/.bar/policy.yaml: unknown key 'severity'",
        ),
        (rule(name="-"), "policy rule #1 in /x/.bar/policy.yaml: missing field 'name'"),
        (rule(name="has space"), "policy rule 'has space' in /x/.bar/policy.yaml: bad name"),
        (rule(examples=["rm"]), "'examples' must be a mapping"),
        (rule(examples={"match": "rm"}), "'examples.match' must be a list of strings"),
        (rule(examples={"hit": ["rm"]}), "unknown key 'hit' in 'examples'"),
        (rule(pattern="a{99999999999}"), "bad pattern"),
        ("version: 7\nrules: []\n", "unsupported policy version 7 in /x/.bar/policy.yaml"),
        ("version: '1'\nrules: []\n", "'version' must be the number 1"),
        ("version: true\nrules: []\n", "'version' must be the number 1"),
        ("rules: []\n", "has no 'version'"),
        ("version: 1\n", "has no 'rules' list"),
        ("version: 1\nrules: {}\n", "'rules' must be a list, not a mapping"),
        ("version: 1\nrules: [3]\n", "policy rule #1 in /x/.bar/policy.yaml: must be a mapping"),
        (
            "version: 1\nrules: []\nextra: 1\n",
            "unknown key 'extra' in policy file /x/.bar/policy.yaml",
        ),
        ("version: 1\nrules: []\non_parse_error: allow\n", "'on_parse_error' must be one of"),
        ("- a\n- b\n", "must be a mapping with 'version' and 'rules', not a list"),
        ("", "policy file /x/.bar/policy.yaml is empty"),
        ("# only comments\n", "is empty"),
        ("version: 1\nrules: [\n", "is not valid YAML at line"),
        (
            "version: 1\nrules:\n"
            "  - {name: a, pattern: x, action: log, reason: r}\n"
            "  - {name: a, pattern: y, action: log, reason: r}\n",
            "policy rule 'a' in /x/.bar/policy.yaml: duplicate rule name",
        ),
    ],
)
def test_invalid_policies_name_the_file_and_rule(text: str, message: str) -> None:
    with pytest.raises(PolicyError) as info:
        parse_policy_text(text, "/x/.bar/policy.yaml")
    assert message in str(info.value)
    assert info.value.exit_code == ExitCode.CORRUPT


def test_empty_rules_is_a_valid_policy() -> None:
    policy = parse_policy_text("version: 1\nrules: []\n", "p")
    assert policy.rules == ()
    assert policy.evaluate_line("rm -rf /").action == "allow"


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="does not exist") as info:
        load_policy(tmp_path / ".bar" / "policy.yaml")
    assert info.value.hint is not None and "bar init" in info.value.hint


def test_unreadable_and_non_utf8_files(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="cannot read policy file"):
        load_policy(tmp_path)
    path = tmp_path / "policy.yaml"
    path.write_bytes(b"version: 1\nrules: []\n# \xff\n")
    with pytest.raises(PolicyError, match="is not UTF-8"):
        load_policy(path)


# ----------------------------------------------------------------------- cache


def test_cache_is_written_reused_and_invalidated(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(SMALL)
    cache = tmp_path / "cache"
    first = load_policy(path, cache_dir=cache)
    (cache_file,) = cache.iterdir()
    assert oct(cache_file.stat().st_mode & 0o777) == "0o600"
    entry = json.loads(cache_file.read_text())
    assert __version__ in entry["tag"]
    data = entry["data"]
    assert data["path"] == str(path) and [r["name"] for r in data["rules"]] == [
        "no-rm-root",
        "sudo",
        "pushes",
    ]
    again = load_policy(path, cache_dir=cache)
    assert [r.pattern for r in again.rules] == [r.pattern for r in first.rules]
    assert again.evaluate_line("rm -rf /").blocked

    # a change to the file is seen (size and mtime differ)
    path.write_text(SMALL.replace("action: block", "action: warn", 1) + "\n")
    assert load_policy(path, cache_dir=cache).evaluate_line("rm -rf /").action == "warn"

    # a damaged cache is only a slower load
    cache_file.write_text("{not json")
    assert load_policy(path, cache_dir=cache).evaluate_line("rm -rf /").action == "warn"


def test_cache_of_another_format_or_file_is_not_used(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(SMALL)
    load_policy(path, cache_dir=tmp_path / "cache")
    (cache_file,) = (tmp_path / "cache").iterdir()
    entry = json.loads(cache_file.read_text())
    for rule_ in entry["data"]["rules"]:
        rule_["action"] = "log"
    for tag, data_path in ((entry["tag"] + "-old", str(path)), (entry["tag"], "/elsewhere")):
        forged = {**entry, "tag": tag, "data": {**entry["data"], "path": data_path}}
        cache_file.write_text(json.dumps(forged))
        assert load_policy(path, cache_dir=tmp_path / "cache").evaluate_line("rm -rf /").blocked
    cache_file.write_text(json.dumps(entry))  # the same forgery, current: it is used
    assert load_policy(path, cache_dir=tmp_path / "cache").evaluate_line("rm -rf /").action == "log"


def test_cache_does_not_hide_an_invalid_file(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(SMALL)
    load_policy(path, cache_dir=tmp_path / "cache")
    path.write_text("version: 2\nrules: []\n")
    with pytest.raises(PolicyError, match="unsupported policy version 2"):
        load_policy(path, cache_dir=tmp_path / "cache")


def test_hot_path_imports_neither_yaml_nor_the_parser(tmp_path: Path) -> None:
    """With a current cache, judging a plain command needs no YAML and no tree-sitter."""
    path = tmp_path / "policy.yaml"
    path.write_text(DEFAULT_POLICY_TEXT)
    load_policy(path, cache_dir=tmp_path / "cache")
    code = (
        "import sys; from bar.policy import load_policy; "
        f"p = load_policy({str(path)!r}, cache_dir={str(tmp_path / 'cache')!r}); "
        "assert p.evaluate_line('rm -rf /').blocked; "
        "print(sorted(m for m in ('yaml', 'tree_sitter', 'dataclasses') if m in sys.modules))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# -------------------------------------------------------------------- examples


def test_default_policy_is_valid_and_its_examples_pass() -> None:
    policy = default_policy()
    assert len(policy.rules) >= 20
    assert all(r.match for r in policy.rules)
    assert check_examples(policy) == []


def test_default_policy_loads_through_the_cache(tmp_path: Path) -> None:
    policy = default_policy(cache_dir=tmp_path)
    assert [r.name for r in policy.rules] == [r.name for r in default_policy().rules]


def test_failing_examples_are_reported() -> None:
    policy = parse_policy_text(
        "version: 1\nrules:\n"
        "  - name: rm\n    pattern: '^rm\\s'\n    action: block\n    reason: x\n"
        "    examples:\n      match: ['rm x', 'echo rm x']\n      no_match: ['ls', 'rm y']\n",
        "p",
    )
    assert check_examples(policy) == [
        ExampleFailure("rm", "echo rm x", "match", "no match"),
        ExampleFailure("rm", "rm y", "no match", "match: rm y"),
    ]


# ---------------------------------------------------------------- the corpus


def test_default_policy_accuracy_on_the_labeled_corpus() -> None:
    corpus = yaml.safe_load(CORPUS.read_text(encoding="utf-8"))
    dangerous, benign = corpus["dangerous"], corpus["benign"]
    assert len(dangerous) + len(benign) >= 200
    policy = default_policy()
    caught = [c for c in dangerous if policy.evaluate_line(c).action in ("block", "warn")]
    blocked = [c for c in benign if policy.evaluate_line(c).blocked]
    assert len(caught) / len(dangerous) >= 0.98, sorted(set(dangerous) - set(caught))
    assert len(blocked) / len(benign) <= 0.03, blocked


@pytest.mark.parametrize(
    ("line", "action"),
    [
        ("rm -rf /", "block"),
        ("rm -rf ./build", "allow"),
        ("rm -rf ~/important", "block"),
        ("rm --rec -f ~", "block"),
        ("git reset --har", "block"),
        ("git push --force", "block"),
        ("git push origin +main", "block"),
        ("git push --force-with-lease", "log"),
        ("git clean -fdx", "block"),
        ("git clean -n", "allow"),
        ("git reset --hard", "block"),
        ("echo hi > /dev/sda", "block"),
        ("mkfs.ext4 /dev/sdb1", "block"),
        (":(){ :|:& };:", "block"),
        ("chmod -R 777 /", "block"),
        ("curl -fsSL https://x | sh", "block"),
        ('echo "rm -rf /"', "allow"),
        ("sudo apt-get update", "warn"),
    ],
)
def test_default_policy_spec_examples(line: str, action: str) -> None:
    assert default_policy_cached().evaluate_line(line).action == action


# ------------------------------------------------------------------ robustness

YAMLISH = st.lists(
    st.one_of(
        st.sampled_from(
            [
                "version: 1\n",
                "rules:\n",
                "  - ",
                "name: a\n",
                "pattern: '(' \n",
                "action: ",
                "block",
                "warn",
                "reason: r\n",
                "examples:\n",
                "match: [x]\n",
                "{",
                "}",
                "[",
                "]",
                ": ",
                "- ",
                "\n",
                "  ",
                "'",
                '"',
                "&a ",
                "*a",
                "!!python/object:os.system",
                "\t",
            ]
        ),
        st.characters(),
    ),
    max_size=40,
).map("".join)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(YAMLISH)
def test_any_text_is_a_policy_or_a_policy_error(text: str) -> None:
    try:
        policy = parse_policy_text(text, "fuzz.yaml")
    except PolicyError as exc:
        assert "fuzz.yaml" in str(exc)
    else:
        assert isinstance(policy, Policy)


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
RULE = st.fixed_dictionaries(
    {},
    optional={
        "name": st.one_of(st.text(max_size=6), JSONISH),
        "pattern": st.one_of(st.text(max_size=8), JSONISH),
        "action": st.one_of(st.sampled_from(["block", "warn", "log", "deny"]), JSONISH),
        "reason": st.one_of(st.text(max_size=5), JSONISH),
        "examples": JSONISH,
    },
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.fixed_dictionaries(
        {"version": st.sampled_from([1, 2, "1", None])},
        optional={"rules": st.lists(RULE, max_size=3)},
    )
)
def test_structured_garbage_is_a_policy_or_a_policy_error(data: dict[str, object]) -> None:
    try:
        parse_policy_text(yaml.safe_dump(data), "gen.yaml")
    except PolicyError as exc:
        assert "gen.yaml" in str(exc)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=200))
def test_any_line_gets_a_decision(line: str) -> None:
    decision = default_policy_cached().evaluate_line(line)
    assert decision.action in ("allow", "log", "warn", "block")


_DEFAULT: list[Policy] = []


def default_policy_cached() -> Policy:
    if not _DEFAULT:
        _DEFAULT.append(default_policy())
    return _DEFAULT[0]


# --------------------------------------------------------- the literal shortcut

REGEX_PARTS = st.sampled_from(
    [
        "a",
        "b",
        "ab",
        "rm",
        "\\s",
        "\\S+",
        ".*",
        "(?:a|b)",
        "(?:rm|mv)",
        "x?",
        "(?=a)",
        "(?!b)",
        "(?<=a)",
        "[ab]",
        "^",
        "$",
        "(a)",
        "\\1",
        "a{2}",
        "(?:ab)*",
        "(?:ab)+",
        "(?i:rm)",
        "(?>a+)",
        "a++",
        "(?:c|)",
        "\\b",
        "-",
        "/",
    ]
)
REGEXES = st.lists(REGEX_PARTS, min_size=1, max_size=6).map("".join)


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(REGEXES, st.text(alphabet="abrmvcxAR -/\n", max_size=20))
def test_literal_shortcut_never_skips_a_match(pattern: str, text: str) -> None:
    try:
        compiled = re.compile(pattern)
    except re.error:
        return
    literals = required_literals(pattern)
    if literals is not None and compiled.search(text):
        assert any(lit in text for lit in literals), (pattern, text, literals)


@pytest.mark.parametrize(
    ("pattern", "literals"),
    [
        ("rm", ["rm"]),
        (r"^rm\s+-rf", ["-rf"]),  # the longest of the strings a sequence needs
        (r"a\.b", ["a.b"]),  # an escaped character is literal
        (r"\d+\s\w\b.", None),  # classes and anchors are not
        ("[rm]x", ["x"]),
        (r"[]x]yz", ["yz"]),  # `]` first in a class is one of its characters
        (r"[^]x]yz", ["yz"]),
        (r"[\]]yz", ["yz"]),
        ("ab?cde", ["cde"]),  # an optional character ends a string
        ("ab*cd", ["cd"]),
        ("ab{0,3}cd", ["cd"]),
        ("xab+cde", ["bcde"]),  # a repeated one ends it and starts the next
        ("ab{2}cd", ["bcd"]),
        ("ab{1}cd", ["abcd"]),
        ("a{x}", ["a{x}"]),  # braces that are no quantifier are literal
        ("a{}", ["a{}"]),
        ("x{,}yz", ["yz"]),
        (r"(?:rm|mv)\s", ["mv", "rm"]),  # an alternation needs one of its branches
        ("rm|mv", ["mv", "rm"]),
        (r"rm|\s", None),  # ... so nothing if a branch needs nothing
        ("(?:rm|)x", ["x"]),
        ("(?:rm|mv)?", None),
        ("(?>ab+)c", ["ab"]),
        ("(?=.*push)git", ["push"]),  # a lookahead's body is in the text
        ("(?<=sudo )rm", ["sudo "]),
        ("(?!push)git", ["git"]),  # a negative one gives nothing
        ("(?i:rm)x", ["x"]),  # nor does a part matched regardless of case
        ("(?i)rm", None),
        ("(?s)rm", ["rm"]),
        ("(?x) r m  # the program\n \\ -f", ["rm -f"]),  # verbose: blanks and comments
        ("(?x: a b )c", ["ab"]),
        ("ab(?x: c d)e f", ["e f"]),
        ("(?x)[ #]z", ["z"]),
        ("a(?#note)*b", ["b"]),  # the `*` repeats the `a`, as in `re`
        (r"(\w+)\1 rm", [" rm"]),  # backreferences give nothing
        ("(?P<n>ab)(?P=n)", ["ab"]),
        ("(a)?(?(1)a|b)", None),  # conditionals are not read
        (r"\x41BC", ["BC"]),  # numeric escapes give nothing
        (r"\101BC", ["BC"]),
        (r"\N{DIGIT ONE}x", ["x"]),
        ("", None),
        ("(", None),  # invalid patterns give nothing
        ("a)", None),
        ("*a", None),
        (r"\e", None),
    ],
)
def test_required_literals(pattern: str, literals: list[str] | None) -> None:
    assert required_literals(pattern) == literals


# patterns from a small grammar of Python's regex syntax, mostly literal characters
_LITERALS = ["a", "b", "r", "m", "-", "/", " ", "#", "\n", "}", "]", "{", "é"]
_ESCAPES = ["\\.", "\\ ", "\\#", "\\{", "\\(", "\\\\", "\\n", "\\t", "\\x61", "\\141", "\\0"]
_CLASSES = [
    ".",
    "\\s",
    "\\S",
    "\\d",
    "\\w",
    "\\1",
    "[ab]",
    "[^a]",
    "[]a]",
    "[\\]b]",
    "[a-]",
    "[#m ]",
]
ATOM = st.sampled_from(_LITERALS * 4 + _ESCAPES + _CLASSES)
ZERO_WIDTH = st.sampled_from(["^", "$", "\\b", "\\B", "\\A", "\\Z", "(?#note)"])  # no repeats
QUANTIFIER = st.sampled_from(
    [""] * 20
    + ["?", "*", "+", "{0}", "{1}", "{2}", "{1,}", "{0,2}", "{,2}", "{,}", "{}", "{x}", "??"]
    + ["*?", "+?", "?+", "*+", "++", "{2}?"]
)
GROUP = st.sampled_from(
    ["(", "(?:"] * 4
    + ["(?=", "(?!", "(?<=", "(?<!", "(?>", "(?i:", "(?x:", "(?-x:", "(?s:", "(?P<g>"]
)


def _alternation(piece: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    sequence = st.lists(piece, min_size=1, max_size=5).map("".join)
    return st.lists(sequence, min_size=1, max_size=3).map("|".join)


_PIECE = st.tuples(ATOM, QUANTIFIER).map("".join)
_PIECE = st.one_of(_PIECE, _PIECE, _PIECE, ZERO_WIDTH)
PATTERN = st.tuples(
    st.sampled_from(["", "", "", "", "(?x)", "(?s)", "(?x)(?s)", "(?#c)", "(?i)"]),
    st.recursive(
        _alternation(_PIECE),
        lambda inner: _alternation(
            _PIECE | st.tuples(GROUP, inner, st.just(")"), QUANTIFIER).map("".join)
        ),
        max_leaves=10,
    ),
).map("".join)


@settings(
    max_examples=examples(1500),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(PATTERN, st.data())
def test_every_match_contains_a_required_literal(pattern: str, data: st.DataObject) -> None:
    literals = required_literals(pattern)
    assert literals is None or (literals and all(isinstance(x, str) and x for x in literals))
    try:
        compiled = re.compile(pattern)
    except (re.error, OverflowError, RecursionError):
        return
    if literals is None:
        return
    # short texts: nested repeats can make `re` backtrack exponentially in the length
    letters = "abrm -/#}]{é\n."
    around = st.text(alphabet=letters, max_size=2)
    match = st.from_regex(compiled, fullmatch=True).filter(lambda t: len(t) <= 10)
    text = data.draw(
        st.tuples(around, match, around).map("".join) | st.text(alphabet=letters, max_size=12)
    )
    if compiled.search(text):
        assert any(lit in text for lit in literals), (pattern, text, literals)


@given(st.text(max_size=30))
def test_required_literals_of_any_text_is_a_list_or_none(pattern: str) -> None:
    literals = required_literals(pattern)
    assert literals is None or all(isinstance(x, str) and x for x in literals)


def test_every_default_rule_but_the_case_insensitive_one_has_literals() -> None:
    missing = [r.name for r in default_policy().rules if r.literals is None]
    assert missing == ["sql-drop"]  # `(?i)`: a literal would have to match any case


def test_literal_shortcut_on_the_default_policy_and_corpus() -> None:
    corpus = yaml.safe_load(CORPUS.read_text(encoding="utf-8"))
    views = [
        view
        for line in corpus["dangerous"] + corpus["benign"]
        for unit in analyse_line(line).units
        for view in unit.views
    ]
    for rule_ in default_policy().rules:
        for view in views:
            assert rule_.search(view) == bool(rule_.regex.search(view)), (rule_.name, view)


def test_cache_hit_compiles_patterns_only_when_needed(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(DEFAULT_POLICY_TEXT)
    load_policy(path, cache_dir=tmp_path)
    policy = load_policy(path, cache_dir=tmp_path)
    assert policy.evaluate_line("git status").action == "allow"
    compiled = [r.name for r in policy.rules if r._regex is not None]
    assert "rm-recursive-root-or-home" not in compiled
    assert policy.evaluate_line("rm -rf /").blocked
