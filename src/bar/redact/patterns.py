"""The shapes of secrets ``bar.redact`` finds: which names hold one, and the patterns
of tokens, keys, passwords in URLs, option values (``--password=…``), passwords glued
to ``-p`` and secret-named assignments (``API_KEY=…``), each with the strings a match
cannot do without; and where a command line's secret is the word after its option.

Every pattern here starts with a fixed string and has a bounded width; how they are
run, on whole texts and on streams, is ``bar.redact``'s and ``bar.redact.stream``'s.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any, Final

MARK: Final = "***"

# Longest private key block (between its BEGIN and END lines) recognised as one block.
# A 4096-bit RSA key in PEM is about 3.3 KiB, a PGP key with subkeys under 10 KiB.
MAX_KEY_BLOCK: Final = 16 * 1024

# Every shape pattern matches at most this many bytes (checked by the tests) ...
_SHAPE_WIDTH: Final = 48 * 1024
# ... and looks, or redacts, at most this many bytes before its start or after its end.
_CONTEXT: Final = 64

# ---------------------------------------------------------------------------- names

# A name is split into words at non-alphanumerics and camelCase humps ("githubToken",
# "APIKey"), and it is secret if one word is (or, glued together, ends with) a word
# below. Matching whole words rather than substrings keeps KEYBOARD, MONKEY, AUTHOR
# (GIT_AUTHOR_NAME), TOKENIZERS_PARALLELISM and PASSTHROUGH out.
_SECRET_WORDS: Final = (
    frozenset({"KEY", "KEYS", "APIKEY", "TOKEN", "TOKENS", "SECRET", "SECRETS"})
    | {"PASSWORD", "PASSWORDS", "PASSWD", "PASS", "PASSPHRASE", "CREDENTIAL", "CREDENTIALS"}
    | {"CREDS", "AUTH", "OAUTH", "AUTHORIZATION", "PRIVATE", "COOKIE", "COOKIES", "JWT"}
    | {"DSN"}  # connection strings carry database passwords and Sentry keys
    | {"PAT"}  # personal access tokens: GITHUB_PAT, ADO_PAT
)
# Words glued to a prefix: GHTOKEN, DBPASSWORD, AWSSECRETKEY.
_SECRET_SUFFIXES: Final = (
    *("TOKEN", "SECRET", "PASSWORD", "PASSWD", "APIKEY", "ACCESSKEY", "SECRETKEY"),
    *("PRIVATEKEY", "AUTHKEY", "CREDENTIAL", "CREDENTIALS"),
)
# Names that contain a secret word but are well known not to hold a secret.
# SESSION is deliberately not a secret word: XDG_SESSION_TYPE=wayland and
# XDG_SESSION_DESKTOP=ubuntu are everywhere, and scrubbing "ubuntu" from every output
# would be absurd; AWS_SESSION_TOKEN and SESSION_SECRET are caught by their other word.
_NOT_SECRET: Final = frozenset({"SSH_AUTH_SOCK", "PASSWORD_STORE_DIR"})

_NAME_PARTS = re.compile(r"[^A-Za-z0-9]+")
_NAME_WORDS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


@functools.lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """Whether an environment variable called ``name`` probably holds a secret.

    ``PWD`` counts only as part of a longer name (``MYSQL_PWD``): on its own it is the
    shell's working directory. (Remembered: a command asks of its whole environment
    several times, ~6 µs a name.)
    """
    if name.upper() in _NOT_SECRET:
        return False
    words = [word.upper() for part in _NAME_PARTS.split(name) for word in _NAME_WORDS.findall(part)]
    for word in words:
        if word in _SECRET_WORDS or word.endswith(_SECRET_SUFFIXES):
            return True
        if word == "PWD" and len(words) > 1:
            return True
    return False


# --------------------------------------------------------------------------- shapes

# A pass's pattern starts with a fixed string, preferably made of rare characters: the
# engine's search for it is what runs at GB/s, and a common first letter ("e", "s")
# makes it stop and check at every occurrence. So a shape may be found by a rare letter
# in its middle, with a lookbehind checking what comes before: "sk-" keys are found by
# their "k", JWTs by the "J" of "eyJ"; ``back`` then says how many bytes before the
# match the redaction starts. Boundary lookbehinds ("disk-..." is not a key) also sit
# after the fixed string. Empty groups named s<N> / e<N> mark where the redaction starts
# and ends inside a match when context is kept ("Bearer ***", "://user:***@host", the
# BEGIN and END lines of a key).

# An opaque credential after "Bearer" or in an Authorization header: it must contain a
# digit or be long, so that prose ("Bearer tokens expire") is left alone.
_OPAQUE = (
    r"(?:(?=[A-Za-z0-9._~+/-]{0,2047}[0-9])[A-Za-z0-9._~+/-]{8,2048}"
    r"|[A-Za-z0-9._~+/-]{24,2048})={0,3}"
)
# What follows an AWS secret access key's label in env output, INI files and JSON.
_AWS_SECRET_VALUE = (
    r"[\"']?[ \t]{0,8}[:=][ \t]{0,8}[\"']?(?P<s0>)[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+])"
)
_KEY_LABEL = r"(?:[A-Z0-9]{1,16} ){0,4}PRIVATE KEY(?: BLOCK)?-----"
# A whole line of a key block: base64, or a header such as "Proc-Type: 4,ENCRYPTED".
_KEY_LINE = r"(?:(?:[A-Za-z0-9+/=]{1,100}|[A-Za-z-]{1,32}: [^\r\n]{0,100})(?![^\r\n]))"


def _anycase(word: str) -> str:
    """``word`` as a pattern in any case, without an inline flag (``partial_match``
    reads only plain syntax)."""
    return "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else re.escape(c) for c in word)


# the last word of an option whose value is a secret
_OPTION_WORDS: Final = (
    "password",
    "passwd",
    "pass",
    "passphrase",
    "token",
    "secret",
    "api-key",
    "api_key",
    "apikey",
    "access-key",
    "secret-key",
    "private-key",
    "credentials",
    "credential",
)
# the last word of a secret-looking name, as ``is_secret_name`` has it
_NAME_WORDS_AT_END: Final = (
    "key",
    "keys",
    "token",
    "tokens",
    "secret",
    "secrets",
    "password",
    "passwords",
    "passwd",
    "pass",
    "passphrase",
    "credential",
    "credentials",
    "creds",
    "auth",
    "pwd",
    "dsn",
    "cookie",
    "cookies",
    "jwt",
    "pat",
    "base",  # SECRET_KEY_BASE (the whole name is checked: DATABASE= is no secret)
)
# a value: quoted (the quotes stay), or a run of what a shell word or URL value holds
_VALUE = (
    r"(?:\"(?P<s1>)[^\"\r\n]{1,1024}(?P<e1>)\"|'(?P<s2>)[^'\r\n]{1,1024}(?P<e2>)'"
    r"|(?P<s3>)[^\s\"'&;|<>,)\]}]{1,1024})"
)
# the same, with marker groups of other names (for a pattern that holds both)
_FIELD_VALUE = re.sub(r"\(\?P<([se])([123])>\)", lambda m: f"(?P<{m[1]}{int(m[2]) + 3}>)", _VALUE)
# from a mysql-style client's name to its glued password, on the same line
_TO_P = r"[^\r\n]{0,256}?[ \t]-p(?P<s0>)[^\s\"';|&<>]{1,256}"

# (name, back, pattern)
_SHAPES: Final[tuple[tuple[str, int, str], ...]] = (
    (
        # OpenAI (sk-..., sk-proj-..., sk-svcacct-...), Anthropic (sk-ant-...), Stripe
        # (sk_live_...); and the lowercase label of an AWS secret access key. A vendor's
        # prefix is enough: a key cut short, or a short test key, is still a key; only the
        # prefix alone (with its version, "sk-ant-api03-", as code and docs name it) is
        # not. A bare "sk-" needs 20 characters after it ("sk-learn" is a word).
        "k",
        1,
        r"k(?:-(?<=sk-)(?<![A-Za-z0-9_-]sk-)"
        r"(?:(?:proj|ant|svcacct|admin)-(?![a-z]{2,8}[0-9]{2}-?(?![A-Za-z0-9_-]))"
        r"[A-Za-z0-9_-]{1,512}|[A-Za-z0-9]{20,512})"
        r"|_(?<=sk_)(?<![A-Za-z0-9_-]sk_)(?:live|test)_[A-Za-z0-9]{16,512}"
        rf"|ey(?<=[Ss]ecret_access_key){_AWS_SECRET_VALUE})",
    ),
    (
        # AWS access key ids (long-term AKIA, temporary ASIA), Google API keys, and the
        # other spellings of an AWS secret access key's label.
        "A",
        0,
        r"A(?:[KS]IA(?<![A-Za-z0-9]A[KS]IA)[A-Z0-9]{16}(?![A-Za-z0-9])"
        r"|Iza(?<![A-Za-z0-9_-]AIza)[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])"
        rf"|(?:ccessKey(?<=[Ss]ecretAccessKey)|CCESS_KEY(?<=SECRET_ACCESS_KEY))"
        rf"{_AWS_SECRET_VALUE})",
    ),
    (
        # GitHub classic tokens and fine-grained PATs, GitLab PATs.
        "g",
        0,
        r"g(?:h[pousr]_(?<![A-Za-z0-9_]gh[pousr]_)[A-Za-z0-9]{36,255}"
        r"|ithub_pat_(?<![A-Za-z0-9_]github_pat_)[A-Za-z0-9_]{22,255}"
        r"|lpat-(?<![A-Za-z0-9_-]glpat-)[A-Za-z0-9_-]{20,255})",
    ),
    ("x", 0, r"xox[abeposr]-(?<![A-Za-z0-9_-]xox[abeposr]-)[A-Za-z0-9-]{10,255}"),
    (
        # JSON Web Tokens: header and payload are base64 of '{"'.
        "J",
        2,
        r"J(?<=eyJ)(?<![A-Za-z0-9_-]eyJ)[A-Za-z0-9_-]{8,4096}\.eyJ[A-Za-z0-9_-]{8,4096}"
        r"\.[A-Za-z0-9_-]{8,4096}",
    ),
    (
        # "Bearer <token>" as HTTP writes it (other casings are caught inside an
        # Authorization header), and private key blocks, PEM or PGP. The BEGIN and END
        # lines stay so a reader sees what was there. A block cut short (`head id_rsa`)
        # has no END line within reach: then the base64 and header lines after BEGIN go.
        "B",
        0,
        rf"B(?:earer(?<![A-Za-z0-9_]Bearer)[ \t]{{1,8}}(?P<s0>){_OPAQUE}"
        rf"|EGIN (?<=-----BEGIN ){_KEY_LABEL}(?:\r?\n)?(?P<s1>)"
        rf"(?:[\t\n\r\x20-\x7e]{{0,{MAX_KEY_BLOCK}}}?(?P<e1>)(?:\r?\n)?-----END {_KEY_LABEL}"
        rf"|{_KEY_LINE}(?:(?:\r?\n){{1,4}}{_KEY_LINE}){{0,256}}))",
    ),
    (
        # "Authorization: Basic dXNlcjpwYXNz", "authorization: token ...": the credential
        # after the scheme word. "Proxy-Authorization" too.
        "z",
        0,
        r"zation(?<=[Aa]uthorization)[\"']?[ \t]{0,8}[:=][ \t]{0,8}[\"']?"
        r"(?:(?:Basic|basic|BASIC)[ \t]{1,8}(?P<s0>)[A-Za-z0-9+/]{8,1024}={0,2}"
        rf"|(?:[A-Za-z][A-Za-z0-9_-]{{0,31}}[ \t]{{1,8}})?(?P<s1>){_OPAQUE})",
    ),
    (
        # The password of scheme://user:password@host; the last "@" before the host
        # ends it, so an unescaped "@" inside the password is still covered.
        ":",
        0,
        r"://[^\s:/@\"'<>]{0,256}:(?P<s0>)[^\s/\"'<>]{1,256}(?P<e0>)@",
    ),
    (
        # The value of an option named for a secret: --password=..., --token ...,
        # --api-key, --client-secret (a value that is another option is not one).
        "-",
        0,
        r"--(?<![A-Za-z0-9_-]--)(?:[A-Za-z0-9]{1,24}[-_]){0,3}"
        rf"(?:{'|'.join(_anycase(w) for w in _OPTION_WORDS)})(?:=|[ \t]{{1,8}})"
        rf"(?![-<>|;&]){_VALUE}",
    ),
    (
        # mysql-style clients take the password glued to -p: mysql -uroot -phunter2
        "y",
        0,
        r"y(?<=my)(?<![A-Za-z0-9_-]my)sql(?:dump|admin|import|show|check|slap|binlog|sh)?"
        rf"(?![A-Za-z0-9_]){_TO_P}",
    ),
    (
        "r",
        0,
        r"r(?<=mar)(?<![A-Za-z0-9_-]mar)iadb(?:-?(?:dump|admin|import|show|check|slap))?"
        rf"(?![A-Za-z0-9_]){_TO_P}",
    ),
    (
        # NAME=value where NAME looks secret (``_secret_assignment`` checks the whole
        # name): API_KEY=... in a script, export DB_PASSWORD=..., ?token=... in a URL.
        "=",
        0,
        "=(?:" + "|".join(f"(?<={_anycase(w)}=)" for w in _NAME_WORDS_AT_END) + ")"
        rf"(?![=\s]){_VALUE}",
    ),
    (
        # curl's -u / --user user:password (the password only)
        "c",
        0,
        r"curl(?<![A-Za-z0-9_-]curl)(?![A-Za-z0-9_-])[^\r\n]{0,256}?[ \t](?:-u|--user)"
        r"(?:[ \t]{1,8}|=)[\"']?[^\s:\"']{0,256}:(?P<s0>)[^\s\"';|&<>]{1,256}",
    ),
    (
        # sshpass -p password, docker (and podman) login -p password
        "h",
        0,
        r"(?:sshpass|docker|podman)(?![A-Za-z0-9_-])[^\r\n]{0,256}?[ \t]-p[ \t]{0,8}"
        r"(?P<s0>)[^\s\"';|&<>-][^\s\"';|&<>]{0,255}",
    ),
    (
        # a password field: JSON and YAML ("password": "x", password: x), XML
        # (<password>x</password>)
        "P",
        0,
        r"assword(?<=[Pp]assword)(?:[\"']?[ \t]{0,8}:[ \t]{0,8}(?![\s,{\[])"
        rf"{_FIELD_VALUE}|>(?<=<[Pp]assword>)(?P<s7>)[^<\r\n]{{1,1024}}(?P<e7>)</)",
    ),
    (
        # a .netrc entry: login me password x
        "n",
        0,
        r"login[ \t]{1,8}[^\s]{1,256}\s{1,8}password[ \t]{1,8}(?P<s0>)[^\s]{1,256}",
    ),
    (
        # Slack's incoming webhooks: the URL is the credential
        "k2",
        0,
        r"hooks\.slack\.com/services/(?P<s0>)T[A-Z0-9]{4,32}/B[A-Z0-9]{4,32}/[A-Za-z0-9]{8,64}",
    ),
)


# A check a shape's match must also pass, given the data and where the match starts.
_Check = Callable[[bytes | bytearray, int], bool]

# the casings of NAME= a one-shot scrub looks for before it runs the assignment shape
_ASSIGNED: Final = tuple(
    f"{spelt}=".encode()
    for word in _NAME_WORDS_AT_END
    for spelt in (word, word.upper(), word.capitalize())
)
_NAME_BYTES: Final = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
# names whose last word is secret but which are mostly not: sorted(key=len), a dict's keys
_PLAIN_NAMES: Final = frozenset({"key", "keys", "pass"})


_VARIABLE_NAME: Final = re.compile(rb"[\"']?([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)(?:[\"'\s;&|,)]|\Z)")


def _secret_assignment(data: bytes | bytearray, at: int) -> bool:
    """Whether the name before the ``=`` at ``at`` looks secret (what a lookbehind reads:
    at most ``_CONTEXT`` bytes)."""
    start = at
    while start > 0 and at - start < _CONTEXT and data[start - 1] in _NAME_BYTES:
        start -= 1
    name = bytes(data[start:at]).decode("ascii").lstrip("-.")
    if name.lower() in _PLAIN_NAMES or not is_secret_name(name):
        return False
    # a value that is itself the name of a secret's variable (``env_key="OPENAI_API_KEY"``)
    # says where a secret is, and is none: masked, it garbles configuration for nothing
    value = _VARIABLE_NAME.match(bytes(data[at + 1 : at + 1 + _CONTEXT]))
    return value is None or not is_secret_name(value[1].decode())


# What a shape's match cannot do without: every match (with what its lookbehinds read
# before it) contains one of its shape's strings here. Data holding none of them cannot
# hold that shape, so a one-shot scrub compiles and runs only the shapes that may be
# there: a step's ledger line usually needs none, and their regexes take some 10 ms to
# compile (tests/redact/test_lazy.py checks each string against its pattern).
_NEEDLES: Final[dict[str, tuple[bytes, ...]]] = {
    "k": (b"sk-", b"sk_", b"ecret_access_key"),
    "A": (b"AKIA", b"ASIA", b"AIza", b"ecretAccessKey", b"SECRET_ACCESS_KEY"),
    "g": (b"ghp_", b"gho_", b"ghu_", b"ghs_", b"ghr_", b"github_pat_", b"glpat-"),
    "x": (b"xox",),
    "J": (b"eyJ",),
    "B": (b"Bearer", b"-----BEGIN "),
    "z": (b"uthorization",),
    ":": (b"://",),
    "-": (b"--",),
    "y": (b"mysql",),
    "r": (b"mariadb",),
    "=": _ASSIGNED,
    "c": (b"curl",),
    "h": (b"sshpass", b"docker", b"podman"),
    "P": (b"assword",),
    "n": (b"password",),
    "k2": (b"hooks.slack.com/services/",),
}

_CHECKS: Final[dict[str, _Check]] = {"=": _secret_assignment}


_OPTION_NAME: Final = re.compile(
    rf"--(?:[A-Za-z0-9]{{1,24}}[-_]){{0,3}}(?:{'|'.join(_anycase(w) for w in _OPTION_WORDS)})"
)
_GLUED_P_CLIENT: Final = re.compile(r"(?:mysql[a-z]*|mariadb(?:-?[a-z]+)?)")


def _scrub_argv(argv: list[Any]) -> list[Any]:
    """A command line's words, where a secret is the word after its option's (``--token
    VALUE``) or glued to ``-p`` of a mysql-style client: what the shapes find in a line,
    found across words."""
    glued = _GLUED_P_CLIENT.fullmatch(str(argv[0]).rpartition("/")[2]) is not None
    out = list(argv)
    for i, word in enumerate(argv):
        if not isinstance(word, str):
            continue
        if i and _OPTION_NAME.fullmatch(str(argv[i - 1])) and word and word[0] != "-":
            out[i] = MARK
        elif glued and i and word.startswith("-p") and len(word) > 2:
            out[i] = "-p" + MARK
    return out


_ALL_NEEDLES: Final = tuple(needle for needles in _NEEDLES.values() for needle in needles)
