"""config.yaml: the per-project configuration (docs/storage.md), validated strictly.

Every key is known; an unknown key, a wrong type or an unknown version is a
``ConfigError`` that names the key and the file. Missing keys take their defaults, which
are the original design's (``policy.enabled`` is false when absent; ``bar init`` writes
it as true). The parsed result is cached as JSON keyed by the file's stat, so the YAML
parser is imported only when the file has changed.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from bar.base.migrate import upgrade
from bar.base.record import field, record, replace
from bar.errors import ConfigError, CorruptFile
from bar.store import cache


@record(frozen=True)
class GitConfig:
    default_base: str = "main"
    branch_prefix: str = "bar/"


@record(frozen=True)
class PolicyConfig:
    enabled: bool = False
    path: str = ".bar/policy.yaml"
    # every program a confined step starts is judged too (bar.sandbox.exec_watch;
    # docs/policy.md, "Programs judged as they run")
    exec_check: bool = True


@record(frozen=True)
class HooksConfig:
    pre_run: tuple[str, ...] = ()
    post_run: tuple[str, ...] = ()
    timeout: float = 60.0
    # how many hooks at the start of pre_run (post_run) came from the repository's
    # .bar/config.yaml (``combine``): they run confined like the step, and a message can
    # name the file the failing one is in
    pre_run_shared: int = 0
    post_run_shared: int = 0


@record(frozen=True)
class OutputConfig:
    color: bool = True
    verbose: bool = False


@record(frozen=True)
class RunConfig:
    record_env: tuple[str, ...] = ()
    # bytes of a step's output kept, each stream (``bar.terminal``): past it the output
    # is still shown, not stored, and the step says so; a command printing without end
    # would fill the disk of the bar home otherwise
    output_limit: int = 1 << 30


# what a step may reach (docs/sandbox.md, "The network a step may reach"), from the most
# open to the least
NETWORK_MODES = ("open", "allow-list", "none")
# the hosts a step reaches through bar's proxy unless ``sandbox.allow_hosts`` says
# otherwise: the model APIs of the released agents, and the public package registries
DEFAULT_HOSTS = (
    "api.anthropic.com",
    "console.anthropic.com",
    "api.openai.com",
    "auth.openai.com",
    "chatgpt.com",
    "generativelanguage.googleapis.com",
    "cloudcode-pa.googleapis.com",
    "oauth2.googleapis.com",
    "pypi.org",
    "files.pythonhosted.org",
    "registry.npmjs.org",
    "registry.yarnpkg.com",
    "crates.io",
    "index.crates.io",
    "static.crates.io",
    "proxy.golang.org",
    "sum.golang.org",
    "deb.debian.org",
    "security.debian.org",
)


@record(frozen=True)
class SandboxConfig:
    """The ``sandbox`` section (docs/sandbox.md): paths are absolute or start with ``~``
    (the developer's home)."""

    enabled: bool = True
    required: bool = False
    network: str = "allow-list"  # one of NETWORK_MODES (docs/sandbox.md)
    allow_hosts: tuple[str, ...] = DEFAULT_HOSTS
    allow_write: tuple[str, ...] = ("~/.cache",)
    deny_read: tuple[str, ...] = ("~/.ssh", "~/.aws", "~/.gnupg", "~/.netrc")
    # processes and threads a step may have at once (0: bar sets no limit of its own):
    # a fork bomb stops there, never taking the machine (``bar.sandbox``)
    max_processes: int = 4096


# where ``bar flow`` puts each entry's commit: ``snapshot``, a commit of bar's own beside
# the task branch; ``branch``, a commit on the task branch, as aide's flow makes it
FLOW_COMMITS = ("snapshot", "branch")


@record(frozen=True)
class FlowConfig:
    """``bar flow``'s phases, in order (empty: the default ones, ``bar.aide.flow.PHASES``),
    and where its commits go (``FLOW_COMMITS``)."""

    phases: tuple[str, ...] = ()
    commits: str = "snapshot"


@record(frozen=True)
class BoardConfig:
    """Where the task board is kept: ``bar`` (bar's project directory only) or ``seed``
    (also ``.tasks/`` and ``.worktrees/`` in the repository, as reference 002 keeps them:
    ``bar.task.seed_board``)."""

    layout: str = "bar"


@record(frozen=True)
class SpeedConfig:
    """The speed layer (``bar.base.speed``): ``fast: false`` turns every shortcut off."""

    fast: bool = True


@record(frozen=True)
class Price:
    """US dollars per million tokens of one model (``agents.prices``)."""

    input: float
    output: float
    cache_read: float | None = None  # (absent: as input)
    cache_write: float | None = None


@record(frozen=True)
class AgentsConfig:
    """The ``agents`` section (docs/sessions.md): a budget for every agent step, and the
    prices its cost is computed from (model name, or a pattern with ``*``, to its price;
    never guessed)."""

    max_tokens: int | None = None
    max_cost_usd: float | None = None
    prices: tuple[tuple[str, Price], ...] = ()


@record(frozen=True)
class ShareConfig:
    """The ``share`` section (docs/sharing.md): where ``bar push`` and ``bar fetch`` go by
    default (a remote's name or URL; None: ``origin``), and the size above which a blob is
    cut in the pushed copy."""

    remote: str | None = None
    max_blob: int = 10_000_000


@record(frozen=True)
class WorkersConfig:
    """The ``workers`` section (docs/workers.md): the Temporal server commands talk to
    (``host:port``), its namespace, the remote task histories travel through (None:
    ``share.remote``, else ``origin``), how many times a step a lost worker was running is
    run again (0: recorded interrupted, not retried), what a worker told to stop does with
    its running steps (``finish`` them, or ``interrupt`` them and record them so), and the
    seconds without a heartbeat after which a worker counts as lost."""

    server: str = "127.0.0.1:7233"
    namespace: str = "default"
    remote: str | None = None
    retry: int = 0
    on_stop: str = "finish"
    heartbeat: float = 10.0
    # a worker runs a step sent with ``--no-sandbox`` only if this is true: whoever can
    # signal a workflow can send a step, a confined step that reaches the server too
    allow_unconfined: bool = False
    # how this machine reaches a server that asks for TLS (a team's cluster, Temporal
    # Cloud): ``tls`` None is on when any of the files below or an API key is given; the
    # files are PEM (``tls_cert`` and ``tls_key``: a client certificate for mTLS); the
    # API key is never a setting, only a variable (``bar.workers.temporal.API_KEY_VARS``)
    tls: bool | None = None
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_server_name: str | None = None


@record(frozen=True)
class TelemetryConfig:
    """The ``telemetry`` section (docs/sharing.md): where every recorded step is sent as
    OpenTelemetry spans (an OTLP/HTTP base URL, ``http://127.0.0.1:4318``; None: the
    standard ``OTEL_EXPORTER_OTLP_*`` variables, else nowhere). The developer's own setting
    only: a repository's file must not send a team's records elsewhere."""

    otlp_endpoint: str | None = None


@record(frozen=True)
class Config:
    version: int = 1
    git: GitConfig = field(default_factory=GitConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    hooks: HooksConfig = field(default_factory=HooksConfig)
    output: OutputConfig = field(default_factory=OutputConfig)
    run: RunConfig = field(default_factory=RunConfig)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    flow: FlowConfig = field(default_factory=FlowConfig)
    board: BoardConfig = field(default_factory=BoardConfig)
    speed: SpeedConfig = field(default_factory=SpeedConfig)
    agents: AgentsConfig = field(default_factory=AgentsConfig)
    share: ShareConfig = field(default_factory=ShareConfig)
    workers: WorkersConfig = field(default_factory=WorkersConfig)
    telemetry: TelemetryConfig = field(default_factory=TelemetryConfig)


# section -> key -> expected type ("str", "ref", "bool", "strlist", "pathlist", "number")
_SCHEMA: dict[str, dict[str, str]] = {
    "git": {"default_base": "ref", "branch_prefix": "ref"},
    "policy": {"enabled": "bool", "path": "str", "exec_check": "bool"},
    "hooks": {"pre_run": "strlist", "post_run": "strlist", "timeout": "number"},
    "output": {"color": "bool", "verbose": "bool"},
    "run": {"record_env": "strlist", "output_limit": "size"},
    "sandbox": {
        "enabled": "bool",
        "required": "bool",
        "network": "network",
        "allow_hosts": "hostlist",
        "allow_write": "pathlist",
        "deny_read": "pathlist",
        "max_processes": "count",
    },
    "flow": {"phases": "phases", "commits": "flow_commits"},
    "board": {"layout": "layout"},
    "speed": {"fast": "bool"},
    "agents": {"budget": "budget", "prices": "prices"},
    "share": {"remote": "remote", "max_blob": "size"},
    "workers": {
        "server": "address",
        "namespace": "str",
        "remote": "remote",
        "retry": "count",
        "on_stop": "on_stop",
        "heartbeat": "number",
        "allow_unconfined": "bool",
        "tls": "bool",
        "tls_ca": "file",
        "tls_cert": "file",
        "tls_key": "file",
        "tls_server_name": "host",
        "api_key": "no_secret",
    },
    "telemetry": {"otlp_endpoint": "url"},
}


def _check(value: Any, kind: str, key: str, path: Path) -> Any:
    if kind in ("str", "ref"):
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{key} in {path} must be a non-empty string")
        # a ref goes on git's command line: it must never read as an option
        if kind == "ref" and (
            value.startswith("-") or any(ch.isspace() or not ch.isprintable() for ch in value)
        ):
            raise ConfigError(f"{key} in {path} is not a valid branch name: {value!r}")
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise ConfigError(f"{key} in {path} must be true or false, not {value!r}")
        return value
    if kind == "number":
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)  # YAML has .nan and .inf
            or value <= 0
        ):
            raise ConfigError(f"{key} in {path} must be a positive number of seconds")
        return float(value)
    if kind == "budget":
        return _budget(value, key, path)
    if kind == "size":
        return _size(value, key, path)
    if kind == "remote":
        if (
            not isinstance(value, str)
            or not value
            or value.startswith("-")
            or (any(ch.isspace() or not ch.isprintable() for ch in value))
        ):
            raise ConfigError(
                f"{key} in {path} must name a git remote or a repository URL, not {value!r}",
                hint="like origin, or git@example.com:team/agent-logs.git",
            )
        return value
    if kind == "prices":
        return _prices(value, key, path)
    if kind == "address":
        return address(value, key, path)
    if kind == "count":
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigError(f"{key} in {path} must be a whole number, 0 or more, not {value!r}")
        return value
    if kind == "network":
        return network_mode(value, key, path)
    if kind == "layout":
        if value not in ("bar", "seed"):
            raise ConfigError(
                f"{key} in {path} must be bar or seed, not {value!r}",
                hint="seed: also keep the board in .tasks/ and .worktrees/ of the repository, "
                "where a task-board client of reference 002 reads it",
            )
        return value
    if kind == "flow_commits":
        if value not in FLOW_COMMITS:
            raise ConfigError(
                f"{key} in {path} must be snapshot or branch, not {value!r}",
                hint="snapshot: each flow entry's commit is bar's own, beside the task branch; "
                "branch: a commit on the task branch, as aide makes it (docs/decide-flow.md)",
            )
        return value
    if kind == "on_stop":
        if value not in ("finish", "interrupt"):
            raise ConfigError(
                f"{key} in {path} must be finish or interrupt, not {value!r}",
                hint="finish: a stopping worker lets its steps end; interrupt: it stops them "
                "and records them interrupted",
            )
        return value
    if kind == "file":
        if not isinstance(value, str) or not (value.startswith("/") or value.startswith("~/")):
            raise ConfigError(
                f"{key} in {path} must be a file's absolute path or one in ~, not {value!r}",
                hint="like ~/.config/temporal/client.pem",
            )
        return value
    if kind == "host":
        import re

        if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._-]*", value):
            raise ConfigError(f"{key} in {path} must be a host name, not {value!r}")
        return value
    if kind == "url":
        from urllib.parse import urlsplit

        parts = urlsplit(value) if isinstance(value, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(
                f"{key} in {path} must be an http:// or https:// URL, not {value!r}",
                hint="an OTLP/HTTP collector's base URL, like http://127.0.0.1:4318",
            )
        if parts.username or parts.password:
            raise ConfigError(
                f"{key} in {path}: a secret does not belong in a file",
                hint="set OTEL_EXPORTER_OTLP_HEADERS in the environment for a collector's key",
            )
        return value
    if kind == "no_secret":
        raise ConfigError(
            f"{key} in {path}: a secret does not belong in a file",
            hint="set TEMPORAL_API_KEY (or BAR_TEMPORAL_API_KEY) in the environment of the "
            "commands that talk to the server",
        )
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"{key} in {path} must be a list of non-empty strings")
    if kind == "phases":
        bad = next((v for v in value if not v.isprintable() or any(c.isspace() for c in v)), None)
        if bad is not None or len(set(value)) != len(value) or not value:
            raise ConfigError(
                f"{key} in {path} must list one or more different phase names, without spaces"
                + (f" (not {bad!r})" if bad is not None else ""),
                hint="like [flow-design, impl, verify, docs, finish]",
            )
    if kind == "hostlist":
        from bar.base import hosts

        for v in value:
            why = hosts.invalid(v)
            if why is not None:
                raise ConfigError(
                    f"{key} in {path} holds {v!r}: {why}",
                    hint="give host names, *.suffix for every name under one, and an "
                    "optional :port, like pypi.org, *.githubusercontent.com, 127.0.0.1:8080",
                )
    if kind == "pathlist":
        for v in value:
            if not (v.startswith("/") or v == "~" or v.startswith("~/")):
                raise ConfigError(
                    f"{key} in {path} holds {v!r}, which is neither absolute nor in ~",
                    hint="give paths like /var/cache/pip or ~/.npm",
                )
    return tuple(value)


def network_mode(value: Any, key: str, path: Path | str) -> str:
    """One of ``NETWORK_MODES``; ``true`` and ``false`` (the settings of old) read as
    ``allow-list`` and ``none``."""
    if value is True:
        return "allow-list"
    if value is False:
        return "none"
    if value not in NETWORK_MODES:
        raise ConfigError(
            f"{key} in {path} must be open, allow-list or none, not {value!r}",
            hint="allow-list: only the hosts in sandbox.allow_hosts, through bar's proxy; "
            "open: every host; none: no network at all (docs/sandbox.md)",
        )
    return str(value)


def tighter_network(first: str, second: str) -> str:
    """Of two network modes, the one that lets a step reach less."""
    return max(first, second, key=NETWORK_MODES.index)


def address(value: Any, key: str, path: Path | str) -> str:
    """A server's ``host:port`` (a Temporal frontend)."""
    import re

    if (
        not isinstance(value, str)
        or not re.fullmatch(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_][A-Za-z0-9._-]*):[0-9]{1,5}", value)
        or not 0 < int(value.rsplit(":", 1)[1]) < 65536
    ):
        raise ConfigError(
            f"{key} in {path} must be a server's HOST:PORT, not {value!r}",
            hint="like 127.0.0.1:7233 or temporal.example.com:7233",
        )
    return value


def _amount(value: Any, key: str, path: Path, *, whole: bool = False) -> Any:
    ok = isinstance(value, int if whole else int | float) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or value < 0 or (whole and value == 0):
        what = "a positive whole number" if whole else "a number, 0 or more"
        raise ConfigError(f"{key} in {path} must be {what}, not {value!r}")
    return value if whole else float(value)


_UNITS = {"": 1, "b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3}
_UNITS |= {"kib": 1024, "mib": 1024**2, "gib": 1024**3, "k": 1000, "m": 1000**2, "g": 1000**3}


def _size(value: Any, key: str, path: Path) -> int:
    """A number of bytes: a whole number, or a string like ``10MB`` or ``512 KiB``."""
    import re

    size: float | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        size = value
    elif isinstance(value, str) and (
        m := re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", value)
    ):
        unit = _UNITS.get(m.group(2).lower())
        size = float(m.group(1)) * unit if unit is not None else None
    if size is None or size < 1:
        raise ConfigError(
            f"{key} in {path} must be a size in bytes, 1 or more, not {value!r}",
            hint="like 10MB, 512KiB or 10000000",
        )
    return int(size)


def _budget(value: Any, key: str, path: Path) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict) or set(value) - {"max_tokens", "max_cost_usd"}:
        raise ConfigError(
            f"{key} in {path} must be a mapping of max_tokens and/or max_cost_usd",
            hint="like {max_tokens: 2000000, max_cost_usd: 5}",
        )
    out: dict[str, Any] = {}
    if value.get("max_tokens") is not None:
        out["max_tokens"] = _amount(value["max_tokens"], f"{key}.max_tokens", path, whole=True)
    if value.get("max_cost_usd") is not None:
        out["max_cost_usd"] = _amount(value["max_cost_usd"], f"{key}.max_cost_usd", path)
        if not out["max_cost_usd"]:
            raise ConfigError(f"{key}.max_cost_usd in {path} must be more than 0")
    return out


def _prices(value: Any, key: str, path: Path) -> tuple[tuple[str, Price], ...]:
    if value is None:
        return ()
    example = "like {claude-sonnet-4-5: {input: 3, output: 15, cache_read: 0.3}}"
    if not isinstance(value, dict):
        raise ConfigError(f"{key} in {path} must map model names to prices", hint=example)
    out = []
    for model, price in value.items():
        where = f"{key}.{model}"
        if not isinstance(model, str) or not model:
            raise ConfigError(f"{key} in {path} has a model name that is not a string")
        if (
            not isinstance(price, dict)
            or not {"input", "output"} <= set(price)
            or set(price) - {"input", "output", "cache_read", "cache_write"}
        ):
            raise ConfigError(
                f"{where} in {path} must give input and output (and may give cache_read, "
                "cache_write), in US dollars per million tokens",
                hint=example,
            )
        amounts = {k: _amount(v, f"{where}.{k}", path) for k, v in price.items()}
        out.append((model, Price(**amounts)))
    return tuple(out)


def _sections(
    data: Any, path: Path, allowed: dict[str, set[str]] | None = None
) -> dict[str, dict[str, Any]]:
    """The validated settings of ``data`` by section; ``allowed`` limits the keys."""
    if data is None:
        data = {"version": 1}
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping of settings")
    try:
        data = upgrade("config", dict(data), path)
    except CorruptFile as exc:  # callers of parse_config expect ConfigError only
        raise ConfigError(str(exc), hint=exc.hint) from exc
    sections: dict[str, dict[str, Any]] = {}
    for section, body in data.items():
        if section == "version":
            continue
        if section not in _SCHEMA:
            raise ConfigError(
                f"unknown key {section!r} in {path}",
                hint="known sections: " + ", ".join(sorted(_SCHEMA)),
            )
        if body is None:
            body = {}
        if not isinstance(body, dict):
            raise ConfigError(f"{section} in {path} must be a mapping")
        values: dict[str, Any] = {}
        for key, value in body.items():
            kind = _SCHEMA[section].get(str(key))
            if kind is None:
                raise ConfigError(
                    f"unknown key '{section}.{key}' in {path}",
                    hint=f"known keys of {section}: " + ", ".join(sorted(_SCHEMA[section])),
                )
            if allowed is not None and str(key) not in allowed.get(section, ()):
                raise ConfigError(
                    f"'{section}.{key}' cannot be set in {path}, the repository's file",
                    hint="set it in your own config.yaml under $BAR_HOME (see `bar status`); "
                    "the repository's file may hold " + ", ".join(_REPO_KEY_NAMES),
                )
            values[str(key)] = _check(value, kind, f"{section}.{key}", path)
        sections[section] = values
    return sections


def parse_config(data: Any, path: Path) -> Config:
    sections = _sections(data, path)
    return Config(
        version=1,
        git=GitConfig(**sections.get("git", {})),
        policy=PolicyConfig(**sections.get("policy", {})),
        hooks=HooksConfig(**sections.get("hooks", {})),
        output=OutputConfig(**sections.get("output", {})),
        run=RunConfig(**sections.get("run", {})),
        sandbox=SandboxConfig(**sections.get("sandbox", {})),
        flow=FlowConfig(**sections.get("flow", {})),
        board=BoardConfig(**sections.get("board", {})),
        speed=SpeedConfig(**sections.get("speed", {})),
        agents=AgentsConfig(
            **sections.get("agents", {}).get("budget", {}),
            prices=sections.get("agents", {}).get("prices", ()),
        ),
        share=ShareConfig(**sections.get("share", {})),
        workers=_workers(sections.get("workers", {}), path),
        telemetry=TelemetryConfig(**sections.get("telemetry", {})),
    )


def _workers(values: dict[str, Any], path: Path) -> WorkersConfig:
    if ("tls_cert" in values) != ("tls_key" in values):
        raise ConfigError(
            f"workers.tls_cert and workers.tls_key in {path} go together (a client "
            "certificate and its private key)",
        )
    if values.get("tls") is False and any(k.startswith("tls_") for k in values):
        raise ConfigError(f"workers.tls is false in {path}, yet TLS files are named there")
    return WorkersConfig(**values)


# --- the repository's own .bar/config.yaml ------------------------------------------------

REPO_CONFIG = ".bar/config.yaml"

# What a team may share in the repository. Each of these adds to the developer's own
# settings and none can loosen them: the file is in the repository, so any commit (an
# agent's, once applied) can change it. Everything else is the developer's alone.
_REPO_KEYS: dict[str, set[str]] = {
    "hooks": {"pre_run", "post_run", "timeout"},
    "run": {"record_env"},
    "sandbox": {"required", "network", "deny_read", "max_processes"},
    "flow": {"phases"},  # names only: a team's shared way of working, loosening nothing
}
_REPO_KEY_NAMES = sorted(f"{s}.{k}" for s, keys in _REPO_KEYS.items() for k in keys)


def _union(first: tuple[str, ...], then: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys((*first, *then)))


def _fewer(own: int, shared: int) -> int:
    """The tighter of two limits, 0 being none."""
    return min(own, shared) if own and shared else own or shared


def combine(own: Config, data: Any, path: Path) -> Config:
    """``own`` with the repository's settings ``data`` (from ``path``) added: its hooks
    run before the developer's, its lists join theirs, and its sandbox settings can only
    tighten (``required: true``, a ``network`` that reaches less, fewer processes); a hook
    timeout is the longer one."""
    shared = _sections(data, path, _REPO_KEYS)
    hooks = shared.get("hooks", {})
    run_ = shared.get("run", {})
    box = shared.get("sandbox", {})
    phases = own.flow.phases or shared.get("flow", {}).get("phases", ())  # yours win
    return replace(
        own,
        hooks=replace(
            own.hooks,
            pre_run=(*hooks.get("pre_run", ()), *own.hooks.pre_run),
            post_run=(*hooks.get("post_run", ()), *own.hooks.post_run),
            pre_run_shared=len(hooks.get("pre_run", ())),
            post_run_shared=len(hooks.get("post_run", ())),
            timeout=max(own.hooks.timeout, hooks.get("timeout", 0.0)),
        ),
        run=replace(own.run, record_env=_union(own.run.record_env, run_.get("record_env", ()))),
        sandbox=replace(
            own.sandbox,
            required=own.sandbox.required or box.get("required", False),
            network=tighter_network(own.sandbox.network, box.get("network", "open")),
            deny_read=_union(own.sandbox.deny_read, box.get("deny_read", ())),
            max_processes=_fewer(own.sandbox.max_processes, box.get("max_processes", 0)),
        ),
        flow=replace(own.flow, phases=phases),
    )


_CACHE_TAG = "config/1"


def load_yaml(path: Path) -> Any:
    """Parse the YAML file at ``path``; a syntax error is a ``ConfigError`` naming the line.

    Raises FileNotFoundError when ``path`` is missing.
    """
    from bar.base import yaml_text  # only when the file changed: PyYAML costs ~20 ms to load

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not UTF-8 text") from exc
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        return yaml_text.load(text)
    except yaml_text.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = " ".join(str(exc.problem or "").split()) or "cannot be parsed"
        raise ConfigError(f"{path} is not valid YAML{where}: {problem}") from exc
    except yaml_text.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {' '.join(str(exc).split())}") from exc


def load_config(
    path: Path,
    cache_path: Path | None = None,
    *,
    shared: Path | None = None,
    shared_cache: Path | None = None,
) -> Config:
    """The developer's config.yaml at ``path``, with the repository's file ``shared``
    (``.bar/config.yaml`` in the checkout; may be absent) added to it (``combine``)."""
    own = parse_config(
        _load(path, cache_path, lambda data: parse_config(data, path), required=True), path
    )
    if shared is None:
        return own
    try:
        data = _load(shared, shared_cache, lambda data: combine(own, data, shared))
        return own if data is None else combine(own, data, shared)
    except ConfigError as exc:
        if exc.hint is None:  # every command reads it: say how to get going again
            exc.hint = "fix it, or move it away to use only your own settings"
        raise


def _load(path: Path, cache_path: Path | None, check: Any, *, required: bool = False) -> Any:
    """The YAML data of ``path``, validated by ``check`` before it is cached; None when an
    optional file is absent."""
    if path.is_symlink():  # bar's config files are never links; one may point anywhere
        raise ConfigError(
            f"{path} is a symbolic link; bar does not follow links in its config files",
            hint="replace it with a copy of the file it points to",
        )
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if not required:
            return None
        raise ConfigError(
            f"{path} is missing", hint="run `bar init` in the repository to recreate it"
        ) from None
    key = cache.stat_key(st)
    data = cache.read(cache_path, key, _CACHE_TAG) if cache_path is not None else None
    if data is None:
        try:
            data = load_yaml(path)
        except FileNotFoundError:
            raise ConfigError(f"{path} is missing") from None
        if data is None:  # bar init never writes an empty file: this one was cut short
            raise ConfigError(
                f"{path} is empty",
                hint="run `bar init` in the repository to write a fresh one"
                if required
                else "write `version: 1` and the settings, or remove it",
            )
        check(data)  # validate before caching
        if cache_path is not None:
            cache.write(cache_path, key, _CACHE_TAG, data)
    return data


def render_default(default_base: str, *, policy_enabled: bool = True) -> str:
    """The commented config.yaml that ``bar init`` writes."""
    return f"""\
# bar project configuration (see `bar --help`). Unknown keys are an error.
version: 1
git:
  default_base: {json.dumps(default_base)}   # branch that `bar apply` lands on by default
  branch_prefix: bar/        # task branches are <branch_prefix><name>-<id>
policy:
  enabled: {"true" if policy_enabled else "false"}              # check every command against the policy file
  path: .bar/policy.yaml     # relative to the repository root; read from your checkout only
  exec_check: true           # also judge every program a confined step starts, as it runs
hooks:
  pre_run: []                # shell commands run in the worktree before each step
  post_run: []               # ... and after it (BAR_EXIT_CODE is set)
  timeout: 60                # seconds before a hook is stopped
output:
  color: true
  verbose: false
run:
  record_env: []             # names of variables to record in each step (secrets as ***)
  output_limit: 1GiB         # of a step's output (each stream) kept; the rest is shown, not kept
sandbox:                     # what a step's command may touch (docs/sandbox.md)
  enabled: true              # confine every step (bar run --no-sandbox: one run without)
  required: false            # true: refuse to run where the kernel cannot confine
  network: allow-list        # the hosts below, through bar's proxy; open: every host; none: no network
  # allow_hosts: [api.anthropic.com, pypi.org, ...]   # default: the agents' model APIs and package registries
  allow_write: [~/.cache]    # writable besides the worktree, the task branch and TMPDIR
  deny_read: [~/.ssh, ~/.aws, ~/.gnupg, ~/.netrc]   # hidden from the command
  max_processes: 4096        # a step's processes and threads at once (a fork bomb stops there); 0: no limit
share:                       # task histories through git remotes (docs/sharing.md)
  # remote: origin           # where bar push / bar fetch go; may be a separate repository
  max_blob: 10MB             # larger files are cut, with a marker, in the pushed copy
telemetry:                   # every step sent as OpenTelemetry spans (docs/sharing.md)
  # otlp_endpoint: http://127.0.0.1:4318   # an OTLP/HTTP collector (default: OTEL_EXPORTER_OTLP_*)
workers:                     # steps run on other machines through Temporal (docs/workers.md)
  server: 127.0.0.1:7233     # the Temporal frontend (--server, BAR_TEMPORAL override it)
  namespace: default
  # remote: origin           # where task histories travel (default: share.remote, origin)
  retry: 0                   # times a step a lost worker was running is run again
  on_stop: finish            # a worker told to stop: finish its steps, or interrupt them
  heartbeat: 10              # seconds of silence after which a worker counts as lost
  allow_unconfined: false    # true: this worker runs steps sent with --no-sandbox
  # tls: true                # a cluster that asks for TLS (on by itself with the below,
  # tls_ca: ~/ca.pem         #  or with TEMPORAL_API_KEY set, as Temporal Cloud asks)
  # tls_cert: ~/client.pem   # mTLS: this machine's certificate and key (PEM); the key is
  # tls_key: ~/client.key    #  hidden from every step, as sandbox.deny_read hides files
board:                       # the task board (docs/board.md)
  layout: bar                # seed: also .tasks/ and .worktrees/ in the repository (reference 002)
flow:                        # bar flow: where the work stands (docs/decide-flow.md)
  # phases: [flow-design, impl, verify, docs, finish]
  commits: snapshot          # each entry's commit kept beside the task branch; branch: on it, as aide does
speed:
  fast: true                 # false: every shortcut off (watches, stamps, resident): slower
agents:                      # agent sessions (docs/sessions.md)
  budget: {{}}                 # e.g. {{max_tokens: 2000000, max_cost_usd: 5}}: stop an agent past it
  prices: {{}}                 # model -> USD per million tokens, e.g.
                             # {{claude-sonnet-4-5: {{input: 3, output: 15, cache_read: 0.3}}}}
"""
