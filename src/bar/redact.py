"""Secrets never reach disk: secret-looking names, literal secret values and token shapes.

Three layers, from cheap to thorough:

* ``is_secret_name`` decides from a variable's *name* whether its value is secret, so the
  ``env`` of a ledger line can record ``"***"`` instead of the value.
* ``Scrubber`` replaces secret *values* wherever they appear: the values of secret-named
  variables (given with ``-e`` or inherited), and strings whose shape gives them away as
  credentials (API keys, access tokens, private key blocks, passwords in URLs).
* ``redact_stream.StreamScrubber`` does the same to a stream of output chunks as they
  come, holding back only what could still begin a secret, in bounded memory.

Speed comes from the regex engine's literal-prefix search. One big alternation of every
shape would defeat it (the engine would then try every alternative at almost every
byte, about 35 MB/s); instead each shape, and each literal secret, is its own *pass*
whose pattern starts with a fixed string, so each pass skims the data at 1-2 GB/s and
Python code only runs per match. The passes' matches are united: a byte is redacted if
any pass says so, and every maximal redacted run becomes one ``***``. Because every
pattern has a bounded width, whether a match starts at a given offset is decided by the
``window`` bytes after it, which is what lets the stream commit to its output early.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final, TypeVar, cast

MARK: Final = "***"
_MARK_BYTES: Final = MARK.encode()

# Shorter values are not scrubbed as literals: a secret variable set to "1", "true" or
# "admin" would otherwise turn every "1" or "true" in the output into "***" and make it
# unreadable, while protecting almost nothing (such values are guessable anyway).
MIN_SECRET_LENGTH: Final = 6

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


def redact_env(env: Mapping[str, str], scrubber: Scrubber | None = None) -> dict[str, str]:
    """``env`` with the values of secret-looking names replaced by ``***``.

    With a ``scrubber``, the other values are scrubbed too, so a token passed under an
    innocent name (``-e URL=https://user:pw@host``) is not recorded either.
    """
    out: dict[str, str] = {}
    for name, value in env.items():
        if is_secret_name(name):
            out[name] = MARK
        else:
            out[name] = scrubber.scrub_text(value) if scrubber is not None else value
    return out


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
_OPTION_WORDS: Final = ("password", "passwd", "pass", "passphrase", "token", "secret",
                        "api-key", "api_key", "apikey", "access-key", "secret-key",
                        "private-key", "credentials", "credential")  # fmt: skip
# the last word of a secret-looking name, as ``is_secret_name`` has it
_NAME_WORDS_AT_END: Final = ("key", "keys", "token", "tokens", "secret", "secrets", "password",
                             "passwords", "passwd", "pass", "passphrase", "credential",
                             "credentials", "creds", "auth", "pwd", "dsn", "cookie",
                             "cookies", "jwt")  # fmt: skip
# a value: quoted (the quotes stay), or a run of what a shell word or URL value holds
_VALUE = (r"(?:\"(?P<s1>)[^\"\r\n]{1,1024}(?P<e1>)\"|'(?P<s2>)[^'\r\n]{1,1024}(?P<e2>)'"
          r"|(?P<s3>)[^\s\"'&;|<>,)\]}]{1,1024})")  # fmt: skip
# from a mysql-style client's name to its glued password, on the same line
_TO_P = r"[^\r\n]{0,256}?[ \t]-p(?P<s0>)[^\s\"';|&<>]{1,256}"

# (name, back, pattern)
_SHAPES: Final[tuple[tuple[str, int, str], ...]] = (
    (
        # OpenAI (sk-..., sk-proj-..., sk-svcacct-...), Anthropic (sk-ant-...), Stripe
        # (sk_live_...); and the lowercase label of an AWS secret access key.
        "k",
        1,
        r"k(?:-(?<=sk-)(?<![A-Za-z0-9_-]sk-)"
        r"(?:(?:proj|ant|svcacct|admin)-[A-Za-z0-9_-]{32,512}|[A-Za-z0-9]{20,512})"
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
        r"://[^\s:/@\"'<>]{1,256}:(?P<s0>)[^\s/\"'<>]{1,256}(?P<e0>)@",
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
)


# A pass yields, for each match from ``pos`` on, leftmost first and not overlapping:
# (match start, match end, redaction start, redaction end).
_Hits = Iterator[tuple[int, int, int, int]]


# A check a shape's match must also pass, given the data and where the match starts.
_Check = Callable[[bytes | bytearray, int], bool]


class _ShapePass:
    # a plain class: `import dataclasses` costs more than this module on the hook path
    __slots__ = ("back", "check", "ends", "regex", "starts")

    def __init__(
        self,
        regex: re.Pattern[bytes],
        back: int,
        starts: tuple[int, ...],  # marker groups: the redaction starts here
        ends: tuple[int, ...],  # marker groups: the redaction ends here
        check: _Check | None = None,
    ) -> None:
        self.regex = regex
        self.back = back
        self.starts = starts
        self.ends = ends
        self.check = check

    @classmethod
    def compile(cls, pattern: str, back: int, check: _Check | None = None) -> _ShapePass:
        regex = re.compile(pattern.encode())
        groups = regex.groupindex
        return cls(
            regex,
            back,
            tuple(index for name, index in groups.items() if name.startswith("s")),
            tuple(index for name, index in groups.items() if name.startswith("e")),
            check,
        )

    def scan(self, data: bytes | bytearray, pos: int) -> _Hits:
        check = self.check
        for m in self.regex.finditer(data, pos):
            start, end = m.span()
            if check is not None and not check(data, start):
                continue
            red_start, red_end = start - self.back, end
            for group in self.starts:
                if (at := m.start(group)) >= 0:
                    red_start = at
                    break
            for group in self.ends:
                if (at := m.start(group)) >= 0:
                    red_end = at
                    break
            yield start, end, red_start, red_end


class _LiteralPass:
    """A literal secret. ``bytes.find`` skips through the data several times faster
    than a regex would for a needle of this length."""

    __slots__ = ("needle",)

    def __init__(self, needle: bytes) -> None:
        self.needle = needle

    def scan(self, data: bytes | bytearray, pos: int) -> _Hits:
        needle, size = self.needle, len(self.needle)
        at = data.find(needle, pos)
        while at >= 0:
            yield at, at + size, at, at + size
            at = data.find(needle, at + size)


_Pass = _ShapePass | _LiteralPass

# the casings of NAME= a one-shot scrub looks for before it runs the assignment shape
_ASSIGNED: Final = tuple(
    f"{spelt}=".encode()
    for word in _NAME_WORDS_AT_END
    for spelt in (word, word.upper(), word.capitalize())
)
_NAME_BYTES: Final = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
# names whose last word is secret but which are mostly not: sorted(key=len), a dict's keys
_PLAIN_NAMES: Final = frozenset({"key", "keys", "pass"})


def _secret_assignment(data: bytes | bytearray, at: int) -> bool:
    """Whether the name before the ``=`` at ``at`` looks secret (what a lookbehind reads:
    at most ``_CONTEXT`` bytes)."""
    start = at
    while start > 0 and at - start < _CONTEXT and data[start - 1] in _NAME_BYTES:
        start -= 1
    name = bytes(data[start:at]).decode("ascii").lstrip("-.")
    return name.lower() not in _PLAIN_NAMES and is_secret_name(name)


# What a shape's match cannot do without: every match (with what its lookbehinds read
# before it) contains one of its shape's strings here. Data holding none of them cannot
# hold that shape, so a one-shot scrub compiles and runs only the shapes that may be
# there: a step's ledger line usually needs none, and their regexes take some 10 ms to
# compile (tests/test_redact_lazy.py checks each string against its pattern).
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
}

_CHECKS: Final[dict[str, _Check]] = {"=": _secret_assignment}

_compiled: dict[int, _ShapePass] = {}


def _shape_pass(index: int) -> _ShapePass:
    made = _compiled.get(index)
    if made is None:
        name, back, pattern = _SHAPES[index]
        made = _compiled[index] = _ShapePass.compile(pattern, back, _CHECKS.get(name))
    return made


def shape_passes() -> tuple[_Pass, ...]:
    """Every shape's pass, compiled the first time a stream needs them (not on import:
    ``bar status`` and ``bar log`` scrub nothing)."""
    return tuple(_shape_pass(index) for index in range(len(_SHAPES)))


def _shape_passes_for(data: bytes | bytearray) -> tuple[_Pass, ...]:
    """The passes of the shapes ``data`` may hold (see ``_NEEDLES``)."""
    return tuple(
        _shape_pass(index)
        for index, (name, _, _) in enumerate(_SHAPES)
        if any(needle in data for needle in _NEEDLES[name])
    )


def _encode(value: str, errors: str) -> bytes:
    try:
        return value.encode("utf-8", errors)
    except UnicodeEncodeError:  # a lone surrogate that surrogateescape cannot map
        return value.encode("utf-8", "surrogatepass")


# ------------------------------------------------------------------------ scrubbing

_T = TypeVar("_T")


class Scrubber:
    """Replaces secret values and token-shaped strings by ``***``.

    Each literal secret is its own pass (see the module docstring): scanning cost grows
    with the number of secrets, which in practice is a handful.
    """

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._stream_watches: tuple[Any, ...] | None = None  # bar.redact_stream's
        literals: set[str] = set()
        for value in secrets:
            for variant in (value, value.strip()):
                if len(variant) >= MIN_SECRET_LENGTH:
                    literals.add(variant)
        self.secrets: tuple[str, ...] = tuple(sorted(literals, key=lambda s: (-len(s), s)))
        # Outputs are raw bytes, so secrets are encoded the way the OS encodes
        # environment values; text is scrubbed through a lossless UTF-8 encoding.
        self._byte_literals = tuple(
            _LiteralPass(_encode(s, "surrogateescape")) for s in self.secrets
        )
        self._text_literals = tuple(_LiteralPass(_encode(s, "surrogatepass")) for s in self.secrets)
        longest = max((len(_encode(s, "surrogateescape")) for s in self.secrets), default=0)
        # How far past a match's start the stream must see before it can decide it.
        self.window: int = max(_SHAPE_WIDTH, longest) + _CONTEXT

    @property
    def pass_count(self) -> int:
        """How many passes a stream runs: one per shape and one per literal secret."""
        return len(_SHAPES) + len(self._byte_literals)

    @property
    def _byte_passes(self) -> tuple[_Pass, ...]:
        """Every pass, as a stream runs them (``bar.redact_stream``)."""
        return shape_passes() + self._byte_literals

    @classmethod
    def from_environ(
        cls, environ: Mapping[str, str], extra: Mapping[str, str] | None = None
    ) -> Scrubber:
        """A scrubber for the values of secret-named variables in ``environ`` and
        ``extra`` (the ``-e K=V`` of a run)."""
        values = [v for k, v in environ.items() if is_secret_name(k)]
        if extra:
            values += [v for k, v in extra.items() if is_secret_name(k)]
        return cls(values)

    def scrub_bytes(self, data: bytes) -> bytes:
        passes = _shape_passes_for(data) + self._byte_literals
        spans = [hit[2:] for p in passes for hit in p.scan(data, 0)]
        if not spans:
            return data
        return _render(data, 0, 0, _merge(spans), len(data))[0]

    def scrub_text(self, text: str) -> str:
        # surrogatepass round-trips any str, including the lone surrogates that
        # surrogateescape-decoded output contains; redactions only cut at ASCII
        # characters or at the edges of a whole secret, so decoding cannot fail.
        data = text.encode("utf-8", "surrogatepass")
        passes = _shape_passes_for(data) + self._text_literals
        spans = [hit[2:] for p in passes for hit in p.scan(data, 0)]
        if not spans:
            return text
        out = _render(data, 0, 0, _merge(spans), len(data))[0]
        return out.decode("utf-8", "surrogatepass")

    def scrub_obj(self, obj: _T) -> _T:
        """Scrub every string (keys included) in a JSON-like value; lists, tuples and
        mappings are rebuilt (mappings as dicts), other values are returned as they are.

        A ledger line holds a hundred short strings and, almost always, no secret: their
        text is first searched as one for anything a pass could match (a shape's needle,
        a literal secret), and only if something is found is each string scrubbed. The
        strings are joined with NULs, which no needle holds, so a needle found in the
        whole is in one of them or straddles two (then each is scrubbed: nothing lost)."""
        pieces: list[bytes] = []
        _texts(obj, pieces)
        whole = b"\0".join(pieces)
        return cast(_T, self._scrub_any(obj, any(n in whole for n in self._needles)))

    @property
    def _needles(self) -> tuple[bytes, ...]:
        """Every string a pass needs to find before it can match anything."""
        literals = (p.needle for p in (*self._text_literals, *self._byte_literals))
        return (*_ALL_NEEDLES, *literals)

    def _scrub_any(self, obj: object, scan: bool = True) -> object:
        """``obj`` rebuilt, its strings scrubbed (``scan``: else left as they are)."""
        if isinstance(obj, str):
            return self.scrub_text(obj) if scan else obj
        if isinstance(obj, bytes):
            return self.scrub_bytes(obj) if scan else obj
        if isinstance(obj, Mapping):
            return {self._scrub_any(k, scan): self._scrub_any(v, scan) for k, v in obj.items()}
        if isinstance(obj, list):
            items = [self._scrub_any(v, scan) for v in obj]
            return _scrub_argv(items) if scan and obj and isinstance(obj[0], str) else items
        if isinstance(obj, tuple):
            return tuple(self._scrub_any(v, scan) for v in obj)
        return obj


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


def _texts(obj: object, into: list[bytes]) -> None:
    """The strings of a JSON-like value (keys included) as ``Scrubber`` scans them."""
    if isinstance(obj, str):
        into.append(obj.encode("utf-8", "surrogatepass"))
    elif isinstance(obj, bytes):
        into.append(obj)
    elif isinstance(obj, Mapping):
        for key, value in obj.items():
            _texts(key, into)
            _texts(value, into)
    elif isinstance(obj, list | tuple):
        for value in obj:
            _texts(value, into)


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted union of ``spans``; touching spans merge too, so secrets written back to
    back become one ``***`` wherever a stream happens to be cut."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def _render(
    data: bytes | bytearray,
    base: int,
    pos: int,
    spans: list[tuple[int, int]],
    cut: int,
    *,
    open_mark: bool = False,
) -> tuple[bytes, int, bool]:
    """Write ``data`` (which starts at offset ``base``) from ``pos`` to ``cut`` with
    ``spans`` (merged, all starting before ``cut``) replaced by ``***``; a span that
    reaches past ``cut`` is written whole, so a redaction is never split.

    ``open_mark`` says the output so far ended with a ``***`` that reached ``pos``: a
    span starting there continues it. Returns the output, the new position and whether
    it ends in such a mark.
    """
    parts: list[bytes | memoryview] = []
    # Slices of a memoryview are not copies; the view is released before the caller
    # resizes ``data``.
    with memoryview(data) as view:
        for start, end in spans:
            if start <= pos and open_mark:
                pos = max(pos, end)
                continue
            start = max(start, pos)
            parts.append(view[pos - base : start - base])
            parts.append(_MARK_BYTES)
            pos = end
            open_mark = True
        if cut > pos:
            parts.append(view[pos - base : cut - base])
            pos = cut
            open_mark = False
        out = b"".join(parts)
        parts.clear()
    return out, pos, open_mark
