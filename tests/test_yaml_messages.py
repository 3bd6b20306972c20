"""YAML that PyYAML refuses: one line with its cause, the same with either of its parsers.

Issue 23, items 1 and 6: PyYAML 6.0.4's libyaml refuses deep nesting itself (before
gdln's own ``GDLN_MAX_DEPTH`` count), and PyYAML's messages span several lines of which
only the first ("while scanning for the next token") used to be kept. Each file here is
read with libyaml (when installed) and with PyYAML's pure-Python parser; the message must
name the same limit or the same cause, with the line and column, on one short line.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from helpers import run_cli

import gdln
from gdln.graphfile import Limits, _safe_read

PARSERS = ["libyaml", "python"] if hasattr(yaml, "CSafeLoader") else ["python"]


@pytest.fixture(params=PARSERS)
def parser(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Read YAML with libyaml (gdln's default where installed) or with pure Python."""
    if request.param == "python":
        pure = type("PureCoreSchemaLoader", (yaml.SafeLoader,), {})
        pure.yaml_implicit_resolvers = _safe_read.CoreSchemaLoader.yaml_implicit_resolvers
        pure.yaml_constructors = _safe_read.CoreSchemaLoader.yaml_constructors
        monkeypatch.setattr(_safe_read, "_SafeLoader", yaml.SafeLoader)
        monkeypatch.setattr(_safe_read, "_Loader", pure)
    return str(request.param)


def _message(tmp_path: Path, text: str, **limits: int) -> str:
    path = tmp_path / "g.yaml"
    path.write_text(text)
    with pytest.raises(gdln.GraphSpecError) as info:
        gdln.load(path, limits=Limits(**limits) if limits else None)
    message = str(info.value)
    assert "\n" not in message and len(message) <= 300 and message.startswith(str(path))
    return message


@pytest.mark.parametrize("depth", [101, 1000, 5000])
@pytest.mark.parametrize("bracket", ["[]", "{}"])
def test_flow_nesting_is_refused_by_gdlns_limit_with_either_parser(
    parser: str, depth: int, bracket: str, tmp_path: Path
) -> None:
    """libyaml stops at depth 1000 while scanning ahead; the message is gdln's either way."""
    opening, closing = (
        ("[" * depth, "]" * depth) if bracket == "[]" else ("{a: " * depth, "}" * depth)
    )
    message = _message(tmp_path, f"nodes: {opening}1{closing}\n")
    assert (
        "g.yaml: nesting 101 deep at line 1 exceeds the limit depth=100 "
        "(raise it: GDLN_MAX_DEPTH=N or load(limits=Limits(depth=N)))"
    ) in message


@pytest.mark.parametrize("depth", [150, 1100])
def test_block_nesting_is_refused_by_gdlns_limit_with_either_parser(
    parser: str, depth: int, tmp_path: Path
) -> None:
    text = "nodes:\n" + "".join(" " * n + "- \n" for n in range(depth))
    assert "nesting 101 deep at line 101 exceeds the limit depth=100" in _message(tmp_path, text)


def test_nesting_beyond_libyamls_own_limit_is_named(tmp_path: Path) -> None:
    """With GDLN_MAX_DEPTH raised past libyaml's 1000, a deeper file is refused in one line
    naming libyaml's limit where libyaml has one (PyYAML 6.0.4 on), never as malformed."""
    text = "nodes: " + "[" * 1200 + "]" * 1200 + "\n"
    message = _message(tmp_path, text, depth=5000)  # the graph is refused, if not the YAML
    assert "malformed" not in message
    try:
        for _ in yaml.parse(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
            pass
    except yaml.YAMLError:
        assert "nesting deeper than libyaml's limit of 1000 at line 1" in message
    else:
        assert "libyaml's limit" not in message.replace(str(tmp_path), "")


TAB = "nodes:\n\t- {id: x, size: 2}\nedges: []\n"
NO_BRACE = "nodes:\n  - {id: x, size: 2\n  - {id: y, size: 3}\nedges: [{source: x, target: y}]\n"


def test_a_tab_keeps_its_cause_line_and_column(parser: str, tmp_path: Path) -> None:
    message = _message(tmp_path, TAB)
    assert "g.yaml: line 2: malformed YAML at column 1: found character" in message
    assert "that cannot start any token" in message
    assert r"'\t" in message  # the tab, quoted by PyYAML's problem or by the text shown
    assert "while scanning for the next token" in message


def test_a_missing_brace_keeps_its_cause_and_where_the_mapping_started(
    parser: str, tmp_path: Path
) -> None:
    message = _message(tmp_path, NO_BRACE)
    assert "g.yaml: line 3: malformed YAML at column 5: " in message
    assert "expected ',' or '}'" in message  # libyaml: "did not find expected ',' or '}'"
    assert "'{id: y, size'" in message  # what was found instead
    assert "while parsing a flow mapping at line 2, column 5" in message


def test_the_command_line_prints_the_cause_on_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(NO_BRACE)
    code, out, err = run_cli(["paths", str(path)], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("gdln: error: ") and len(err) <= 300 + 14
    assert "line 3: malformed YAML at column 5: " in err and "expected ',' or '}'" in err


def test_an_unprintable_character_is_named_with_its_offset(tmp_path: Path) -> None:
    message = _message(tmp_path, "nodes: [a\x07]\n")
    assert "malformed YAML: " in message and "#x0007 at offset 9" in message
