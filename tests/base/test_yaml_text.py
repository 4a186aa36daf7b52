"""YAML read by libyaml where PyYAML has it: the same values as PyYAML's own parser, and
PyYAML's own error messages for a document either refuses."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bar.base import yaml_text
from bar.errors import ConfigError
from bar.model.config import load_yaml
from bar.policy.loader import DEFAULT_POLICY_TEXT

DOCUMENTS = [
    DEFAULT_POLICY_TEXT,
    "version: 1\nflags: [yes, no, on, off, ~, 0o17, 017, 1_000, 1e3, .inf, 2024-01-15]\n",
    "a: &x {b: [1, 2]}\nc: *x\nd: |\n  two\n  lines\ne: >-\n  folded\n  text\n",
    "'quoted: key': \"esc\\taped \\u00e9\"\nempty:\n",
]
BROKEN = [
    ("a: [1, 2", "expected ',' or ']', but got '<stream end>'"),
    ("a: b: c", "mapping values are not allowed here"),
    ("\tkey: 1", "found character '\\t' that cannot start any token"),
    ("a:\n  - 1\n - 2", "expected <block end>, but found '<block sequence start>'"),
    ("a: &x 1\nb: *y", "found undefined alias 'y'"),
    ('a: "\\q"', "found unknown escape character 'q'"),
    ("a: !!python/object:os.system x", "could not determine a constructor"),
]


@pytest.mark.parametrize("text", DOCUMENTS)
def test_the_values_are_pyyamls(text: str) -> None:
    assert yaml_text.load(text) == yaml.load(text, Loader=yaml.SafeLoader)


def test_libyaml_reads_where_pyyaml_has_it() -> None:
    assert yaml.__with_libyaml__, "PyYAML's wheel for this platform comes with libyaml"
    assert yaml_text._FAST is yaml.CSafeLoader


@pytest.mark.parametrize(("text", "problem"), BROKEN)
def test_a_broken_document_gets_pyyamls_own_message(text: str, problem: str) -> None:
    with pytest.raises(yaml.YAMLError) as caught:
        yaml.load(text, Loader=yaml.SafeLoader)
    with pytest.raises(yaml_text.YAMLError) as ours:
        yaml_text.load(text)
    assert problem in str(ours.value)
    assert str(ours.value) == str(caught.value)


def test_a_config_file_with_a_mistake_names_its_line_as_before(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("version: 1\nrun:\n  - x\n - y\n", encoding="utf-8")
    with pytest.raises(
        ConfigError, match=r"is not valid YAML at line 4, column 2: expected <block end>"
    ):
        load_yaml(path)
