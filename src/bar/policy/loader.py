"""Loading a policy: YAML parsing and validation, the default policy, and the cache.

YAML is imported only when a policy file has to be parsed: the validated rules are
cached as JSON (``bar.store.cache``) keyed by the file's (mtime_ns, size, inode), so an
unchanged file costs one ``stat`` and a small JSON read on ``bar hook``'s path.
"""

from __future__ import annotations

import os
import re
import zlib

from bar import __version__
from bar.base.migrate import upgrade
from bar.errors import CorruptFile, PolicyError
from bar.policy.literals import known_literals
from bar.policy.rules import ACTIONS, Policy, Rule
from bar.store import cache

_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]*"
_TOP_KEYS = ("version", "rules", "on_parse_error")
_RULE_KEYS = ("name", "pattern", "action", "reason", "examples")
_EXAMPLE_KEYS = ("match", "no_match")
# The cached rules carry their literals: bump the number whenever what is cached, or
# how ``required_literals`` reads a pattern, changes.
_CACHE_TAG = f"policy 3, bar {__version__}"

DEFAULT_POLICY_PATH = os.path.join(
    os.path.dirname(os.path.dirname(__file__)), "data", "default_policy.yaml"
)


def _read_default() -> str:
    with open(DEFAULT_POLICY_PATH, encoding="utf-8") as handle:
        return handle.read()


DEFAULT_POLICY_TEXT: str = _read_default()


def default_policy(*, cache_dir: str | os.PathLike[str] | None = None) -> Policy:
    """bar's default policy (what `bar init` writes); cached like any policy file."""
    if cache_dir is None:
        return parse_policy_text(DEFAULT_POLICY_TEXT, "<default policy>")
    return load_policy(DEFAULT_POLICY_PATH, cache_dir=cache_dir)


def load_policy(
    path: str | os.PathLike[str], *, cache_dir: str | os.PathLike[str] | None = None
) -> Policy:
    """Load and validate a policy file; with ``cache_dir``, reuse the validated rules
    while the file's (mtime_ns, size, inode) stay the same."""
    name = os.path.abspath(os.fspath(path))
    cache_file = _cache_file(os.fspath(cache_dir), name) if cache_dir is not None else None
    try:
        with open(name, "rb") as handle:
            key = cache.stat_key(os.fstat(handle.fileno()))
            if cache_file is not None:
                cached = _from_cache(cache.read(cache_file, key, _CACHE_TAG), name)
                if cached is not None:
                    return cached
            data = handle.read()
    except FileNotFoundError:
        raise PolicyError(
            f"policy file {name} does not exist",
            hint="run `bar init` to write the default policy, or fix policy.path in config.yaml",
        ) from None
    except OSError as exc:
        raise PolicyError(f"cannot read policy file {name}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PolicyError(f"policy file {name} is not UTF-8 text ({exc.reason})") from None
    policy = parse_policy_text(text, name)
    if cache_file is not None:
        cache.write(cache_file, key, _CACHE_TAG, _to_cache(policy))
    return policy


def parse_policy_text(text: str, source: str) -> Policy:
    """Validate policy YAML; ``source`` names it in every error."""
    from bar.base import yaml_text

    try:
        data = yaml_text.load(text)
    except yaml_text.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise PolicyError(
            f"policy file {source} is not valid YAML{where}: {exc.problem or exc}"
        ) from None
    except Exception as exc:  # YAML's reader and constructors raise several kinds
        raise PolicyError(f"policy file {source} is not valid YAML: {exc}") from None
    return _build(data, source)


def _build(data: object, source: str) -> Policy:
    if data is None:
        raise PolicyError(
            f"policy file {source} is empty: it needs 'version: 1' and a 'rules:' list",
            hint="`bar init` writes a commented default policy",
        )
    if not isinstance(data, dict):
        raise PolicyError(
            f"policy file {source} must be a mapping with 'version' and 'rules', not {_kind(data)}"
        )
    for key in data:
        if key not in _TOP_KEYS:
            raise PolicyError(
                f"unknown key {key!r} in policy file {source} (allowed: {', '.join(_TOP_KEYS)})"
            )
    version = data.get("version")
    if version is None:
        raise PolicyError(f"policy file {source} has no 'version' (expected 'version: 1')")
    if isinstance(version, bool) or not isinstance(version, int):
        raise PolicyError(f"policy file {source}: 'version' must be the number 1, not {version!r}")
    try:
        data = upgrade("policy", dict(data), source)
    except CorruptFile as exc:  # an unknown version; callers expect PolicyError only
        raise PolicyError(str(exc), hint=exc.hint) from None
    on_error = data.get("on_parse_error", "warn")
    if on_error not in ACTIONS:
        raise PolicyError(
            f"policy file {source}: 'on_parse_error' must be one of {', '.join(ACTIONS)}, "
            f"not {on_error!r}"
        )
    if "rules" not in data:
        raise PolicyError(f"policy file {source} has no 'rules' list")
    raw_rules = data["rules"]
    if raw_rules is None:
        raw_rules = []
    if not isinstance(raw_rules, list):
        raise PolicyError(f"policy file {source}: 'rules' must be a list, not {_kind(raw_rules)}")
    rules: list[Rule] = []
    names: set[str] = set()
    for number, raw in enumerate(raw_rules, 1):
        rule = _build_rule(raw, number, source)
        if rule.name in names:
            raise PolicyError(f"policy rule {rule.name!r} in {source}: duplicate rule name")
        names.add(rule.name)
        rules.append(rule)
    return Policy(rules, source, str(on_error))


def _build_rule(raw: object, number: int, source: str) -> Rule:
    label = f"policy rule #{number} in {source}"
    if not isinstance(raw, dict):
        raise PolicyError(f"{label}: must be a mapping with name, pattern, action and reason")
    name = raw.get("name")
    if isinstance(name, str) and name:
        label = f"policy rule {name!r} in {source}"
    for key in raw:
        if key not in _RULE_KEYS:
            raise PolicyError(f"{label}: unknown key {key!r} (allowed: {', '.join(_RULE_KEYS)})")
    for field in ("name", "pattern", "action", "reason"):
        if field not in raw or raw[field] is None:
            raise PolicyError(f"{label}: missing field {field!r}")
        if not isinstance(raw[field], str):
            raise PolicyError(f"{label}: {field!r} must be a string, not {_kind(raw[field])}")
    assert isinstance(name, str)
    if not re.fullmatch(_NAME, name):
        raise PolicyError(
            f"{label}: bad name (use letters, digits, '.', '_' and '-', starting with a "
            "letter or digit)"
        )
    if raw["action"] not in ACTIONS:
        raise PolicyError(
            f"{label}: unknown action {raw['action']!r} (expected one of {', '.join(ACTIONS)})"
        )
    if not raw["pattern"]:
        raise PolicyError(f"{label}: empty pattern would match every command")
    match, no_match = _build_examples(raw.get("examples"), label)
    held, literals = known_literals(raw["pattern"])
    if held:  # (one of the default policy's: its literals known, itself known to compile)
        return Rule(
            name,
            raw["pattern"],
            raw["action"],
            raw["reason"],
            match,
            no_match,
            literals=literals,
            compiled=False,
        )
    try:
        return Rule(name, raw["pattern"], raw["action"], raw["reason"], match, no_match)
    except re.error as exc:
        raise PolicyError(f"{label}: bad pattern: {exc}") from None
    except (OverflowError, RecursionError, ValueError) as exc:
        raise PolicyError(f"{label}: bad pattern: {exc}") from None


def _build_examples(raw: object, label: str) -> tuple[list[str], list[str]]:
    if raw is None:
        return [], []
    if not isinstance(raw, dict):
        raise PolicyError(f"{label}: 'examples' must be a mapping with 'match' and 'no_match'")
    out: dict[str, list[str]] = {"match": [], "no_match": []}
    for key, value in raw.items():
        if key not in _EXAMPLE_KEYS:
            raise PolicyError(
                f"{label}: unknown key {key!r} in 'examples' (allowed: match, no_match)"
            )
        if value is None:
            continue
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise PolicyError(f"{label}: 'examples.{key}' must be a list of strings")
        out[key] = value
    return out["match"], out["no_match"]


def _kind(value: object) -> str:
    names = {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean"}
    return names.get(type(value), type(value).__name__)


# ----------------------------------------------------------------------- cache


def _cache_file(cache_dir: str, name: str) -> str:
    """One cache file per policy file; the path inside tells two that share one apart."""
    digest = zlib.crc32(name.encode("utf-8", "surrogatepass"))
    return os.path.join(cache_dir, f"policy-{digest:08x}.json")


def _to_cache(policy: Policy) -> dict[str, object]:
    return {
        "path": policy.path,
        "on_parse_error": policy.on_parse_error,
        "rules": [rule.to_json() for rule in policy.rules],
    }


def _from_cache(data: object, name: str) -> Policy | None:
    """The policy in cached ``data`` if it is one bar wrote for the file ``name``."""
    if not isinstance(data, dict) or data.get("path") != name:
        return None
    try:
        rules = [
            Rule(
                r["name"],
                r["pattern"],
                r["action"],
                r["reason"],
                r["match"],
                r["no_match"],
                literals=r["literals"],
                compiled=False,
            )
            for r in data["rules"]
        ]
        if any(
            not isinstance(r.pattern, str)
            or (r.literals is not None and not all(isinstance(x, str) and x for x in r.literals))
            for r in rules
        ):
            return None
        on_error = data["on_parse_error"]
        if on_error not in ACTIONS or any(r.action not in ACTIONS for r in rules):
            return None
        return Policy(rules, name, on_error)
    except (ValueError, KeyError, TypeError, AttributeError, re.error):
        return None  # a damaged cache is only a slower load


# patterns compiled ahead at most (``re`` keeps the last 512 it compiled)
_MAX_PATTERNS = 256


def compile_cached(home: str) -> None:
    """Compile the patterns of the policies the bar home's projects use, as their caches
    hold them: the resident does, so that its forks find them in ``re``'s cache, where
    their command would compile the rule it needs (~0.7 ms; ``bar.changes.fast.resident_daemon``). A
    pattern changed since is compiled by the fork, as before."""
    import contextlib
    import glob
    import json

    found = glob.glob(os.path.join(glob.escape(home), "projects", "*", "cache", "policy-*.json"))
    patterns: dict[str, None] = {}
    for path in sorted(found):
        try:
            with open(path, "rb") as f:
                rules = json.load(f)["data"]["rules"]
            patterns.update(
                (rule["pattern"], None) for rule in rules if isinstance(rule["pattern"], str)
            )
        except (OSError, ValueError, KeyError, TypeError):
            continue  # (a cache being written, or another bar's: the fork compiles)
    for pattern in list(patterns)[:_MAX_PATTERNS]:
        with contextlib.suppress(re.error, RecursionError, OverflowError):
            re.compile(pattern)
