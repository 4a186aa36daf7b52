"""Secrets in the shapes a red-team pass found raw on disk (docs/internals/redact.md):
credentials of command-line tools, password fields of configuration formats, webhook
URLs, and a known secret's encoded forms; and names, which are no secrets."""

from __future__ import annotations

import base64
import json

import pytest

from bar.redact import Scrubber
from bar.redact.stream import StreamScrubber

SHAPES = [
    (
        "curl -s -u admin:hunter22 https://api.example.com",
        "curl -s -u admin:*** https://api.example.com",
    ),
    ("curl --user=deploy:s3cr3t-pw https://x", "curl --user=deploy:*** https://x"),
    ("sshpass -p s3cretpw ssh me@host", "sshpass -p *** ssh me@host"),
    (
        "docker login -u me -p dckr_pass1 registry.example",
        "docker login -u me -p *** registry.example",
    ),
    ("redis-cli -u redis://:redispw1@cache:6379", "redis-cli -u redis://:***@cache:6379"),
    ('{"user": "me", "password": "jsonpw123"}', '{"user": "me", "password": "***"}'),
    ("db:\n  password: yamlpw123\n", "db:\n  password: ***\n"),
    ("<password>xmlpw123</password>", "<password>***</password>"),
    ("machine example.com login me password netrcpw1", "machine example.com login me password ***"),
    ("SECRET_KEY_BASE=9f8e7d6c5b4a39281726", "SECRET_KEY_BASE=***"),
    ("export GITHUB_PAT=abcdef123456", "export GITHUB_PAT=***"),
    (
        "POST https://hooks.slack.com/services/T0000AAAA/B0000BBBB/abcdefghijklmnop",
        "POST https://hooks.slack.com/services/***",
    ),
]

PLAIN = [
    "the password is long enough",
    "DATABASE=postgres",
    'env_key="MOCK_API_KEY"',  # (a name: bar push must not refuse its own ledger for it)
    "api_key_env=OPENAI_API_KEY",
    "docker ps -a",
    "curl -u",
    "password:",
]


@pytest.mark.parametrize(("text", "scrubbed"), SHAPES)
def test_each_shape_is_masked_in_text_and_in_a_stream(text: str, scrubbed: str) -> None:
    assert Scrubber().scrub_text(text) == scrubbed
    stream = StreamScrubber(Scrubber())
    out = b"".join(stream.feed(bytes([b])) for b in text.encode()) + stream.flush()
    assert out.decode() == scrubbed


@pytest.mark.parametrize("text", PLAIN)
def test_what_is_no_secret_stays(text: str) -> None:
    assert Scrubber().scrub_text(text) == text


def test_a_known_secret_is_masked_encoded() -> None:
    value = "s3cr3t-value-for-the-test-42"
    scrubber = Scrubber([value])
    raw = value.encode()
    for text in (
        base64.b64encode(raw).decode(),
        base64.b64encode(b"user:" + raw).decode(),  # (a Basic credential)
        base64.urlsafe_b64encode(b"ab" + raw + b"zz").decode(),
        raw.hex(),
        raw.hex().upper(),
    ):
        scrubbed = scrubber.scrub_text(text)
        assert "***" in scrubbed and len(scrubbed) < len(text) - 12, (text, scrubbed)
    quoted = 'pa"ss\\word-9\u00e9'
    for dumped in (json.dumps({"k": quoted}), json.dumps({"k": quoted}, ensure_ascii=False)):
        assert Scrubber([quoted]).scrub_text(dumped) == '{"k": "***"}'
    assert scrubber.secrets == (value,)  # (the encoded forms are looked for, not listed)


SPLIT_SECRET = "zq-very-secret-value-778899"


@pytest.mark.parametrize(
    "noise",
    [b"\x1b[0m", b"\x1b[1;31m", b"\r", b"\x08", b"\x1b[2K\r", b"\x1b7"],
    ids=["reset", "colour", "cr", "backspace", "erase-cr", "save-cursor"],
)
@pytest.mark.parametrize("at", [1, 9, len(SPLIT_SECRET) - 1])
def test_a_known_secret_split_by_terminal_noise_is_masked(noise: bytes, at: int) -> None:
    scrubber = Scrubber([SPLIT_SECRET])
    raw = SPLIT_SECRET.encode()
    data = b"token: " + raw[:at] + noise + raw[at:] + b" (done)\n"
    assert scrubber.scrub_bytes(data) == b"token: *** (done)\n"
    for size in (1, 5, 64):
        stream = StreamScrubber(scrubber)
        out = b"".join(stream.feed(data[i : i + size]) for i in range(0, len(data), size))
        assert out + stream.flush() == b"token: *** (done)\n", size


def test_noise_alone_and_a_near_miss_are_kept() -> None:
    scrubber = Scrubber([SPLIT_SECRET])
    near = b"zq-very-\x1b[0msecret-VALUE-778899 and \x1b[1mbold\x1b[0m\r\n"
    assert scrubber.scrub_bytes(near) == near
