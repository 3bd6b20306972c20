"""The JSON Schema of graph files agrees with the loader: what one refuses, so does the other."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from click.testing import CliRunner
from helpers import GRAPHS, ROOT, run_cli

import gdln
import gdln.graphfile
from gdln.cli._schema import schema as schema_command

SCHEMA = gdln.graphfile.schema()
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)

BASE = "nodes: [{id: x, size: 2}, {id: y, size: 1}]\nedges: [{source: x, target: y, gated: true}]\n"
EXAMPLE = "task:\n  examples:\n    - {inputs: {x: [1, 0]}, targets: {y: [1]}, %s}\n"
DATA = "datasets: {d: %s}\n"
CONTEXT = "task:\n  contexts:\n    - {probability: 1, dataset: d, %s}\n"
BOUND = "active: [x->y], inputs: {x: a}, targets: {y: b}"
GOOD_DATA = "{examples: {a: [[1, 0]], b: [[1]]}}"


def valid(doc: object) -> bool:
    return VALIDATOR.is_valid(doc)


def test_the_schema_is_a_valid_draft_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_schema_returns_a_copy() -> None:
    gdln.graphfile.schema()["properties"].clear()
    assert "nodes" in gdln.graphfile.schema()["properties"]


@pytest.mark.parametrize("path", sorted(GRAPHS.iterdir()), ids=lambda p: p.name)
def test_every_shipped_graph_validates(path: Path) -> None:
    doc = yaml.safe_load(path.read_text())
    errors = [e.message for e in VALIDATOR.iter_errors(doc)]
    assert errors == []
    gdln.load(path)  # and the loader reads it


@pytest.mark.parametrize(
    "text",
    [
        BASE + EXAMPLE % "active: [x->y]",
        BASE + DATA % GOOD_DATA + CONTEXT % BOUND,
        BASE
        + DATA % "{moments: {a: {a: [[1, 0], [0, 1]]}, b: {a: [[1, 0]], b: 1}}}"
        + CONTEXT % BOUND,
        BASE
        + DATA % "{examples: {a: [[1, 0], [0, 1]], b: [[1], [0]]}, weights: [1, 3]}"
        + CONTEXT % BOUND,
        BASE
        + DATA
        % "{teacher: {inputs: {a: 2}, covariance: [[1, 0.5], [0.5, 1]], targets: {b: [[1, 0]]}, "
        "noise: {b: 0.1}}}" + CONTEXT % BOUND,
        "params: {n: 3}\nnodes: [{id: x, size: n}, {id: y, size: n}]\nedges: [{source: x, target: y, fixed: 1/2}]\n"
        "datasets: {d: {builtin: whitened, size: n}}\n"
        "task: {contexts: [{probability: 1, dataset: d, inputs: {x: x}, targets: {y: y}}]}\n",
        BASE + "symbols: [q]\ntask:\n  random_gates: [{item: x->y, p: q}]\n"
        "  examples: [{inputs: {x: [1, 0]}, targets: {y: [1]}, gates: {x->y: 1}}]\n",
    ],
)
def test_documents_the_loader_reads_validate(tmp_path: Path, text: str) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(text)
    gdln.load(path)
    assert [e.message for e in VALIDATOR.iter_errors(yaml.safe_load(text))] == []


# Each document breaks one rule that the schema can state; the loader refuses it too.
BROKEN = {
    "unknown top-level key": BASE + "colour: red\n",
    "no nodes": "edges: []\n",
    "no edges": "nodes: [{id: x, size: 1}]\n",
    "unknown node key": BASE.replace("size: 2}", "size: 2, colour: red}"),
    "node without id": BASE.replace("{id: x, size: 2}", "{size: 2}"),
    "node without size": BASE.replace("{id: x, size: 2}", "{id: x}"),
    "zero size": BASE.replace("size: 2", "size: 0"),
    "negative size": BASE.replace("size: 2", "size: -3"),
    "size above the limit": BASE.replace("size: 2", "size: 10000000"),
    "nodes not a list": "nodes: {x: 1}\nedges: []\n",
    "unknown edge key": BASE.replace("gated: true}", "gated: true, weight: 2}"),
    "edge without target": BASE.replace(", target: y", ""),
    "negative repeat count": "nodes: [{id: 'x{i}', size: 1, repeat: {i: -1}}]\nedges: []\n",
    "repeat count above the limit": (
        "nodes: [{id: 'x{i}', size: 1, repeat: {i: 2000000}}]\nedges: []\n"
    ),
    "symbol not a name": BASE + "symbols: ['a b']\n",
    "unknown solve setting": BASE + "solve: {steps: 10}\n",
    "solve not a mapping": BASE + "solve: [1]\n",
    "task with two forms": BASE + "task: {npz: t.npz, examples: []}\n",
    "task with no form": BASE + "task: {random_gates: []}\n",
    "empty contexts": BASE + DATA % GOOD_DATA + "task: {contexts: []}\n",
    "context without dataset": BASE + DATA % GOOD_DATA + "task: {contexts: [{probability: 1}]}\n",
    "context without probability": BASE + DATA % GOOD_DATA + "task: {contexts: [{dataset: d}]}\n",
    "unknown context key": BASE + DATA % GOOD_DATA + CONTEXT % (BOUND + ", colour: red"),
    "active and gates": BASE + EXAMPLE % "active: [x->y], gates: {x->y: 1}",
    "unknown example key": BASE + EXAMPLE % "active: [x->y], colour: red",
    "active not a list": BASE + EXAMPLE % "active: {x->y: 1}",
    "empty row": BASE + EXAMPLE.replace("[1, 0]", "[]") % "active: [x->y]",
    "random gate without p": (
        BASE + "task:\n  random_gates: [{item: x->y}]\n  examples: [{inputs: {x: [1, 0]}}]\n"
    ),
    "two dataset forms": BASE
    + DATA % "{builtin: hierarchy, examples: {a: [[1]]}}"
    + CONTEXT % "active: [x->y]",
    "no dataset form": BASE + DATA % "{weights: [1]}" + CONTEXT % "active: [x->y]",
    "unknown builtin": BASE + DATA % "{builtin: spiral}" + CONTEXT % "active: [x->y]",
    "builtin not a name": BASE + DATA % "{builtin: [1]}" + CONTEXT % "active: [x->y]",
    "whitened without size": BASE + DATA % "{builtin: whitened}" + CONTEXT % "active: [x->y]",
    "hierarchy with a setting": BASE
    + DATA % "{builtin: hierarchy, size: 3}"
    + CONTEXT % "active: [x->y]",
    "dataset without fields": BASE + DATA % "{examples: {}}" + CONTEXT % "active: [x->y]",
    "empty npz name": BASE + DATA % "{npz: ''}" + CONTEXT % "active: [x->y]",
    "top level a list": "- nodes\n- edges\n",
}


@pytest.mark.parametrize("text", BROKEN.values(), ids=BROKEN.keys())
def test_broken_documents_are_refused_by_the_schema_and_the_loader(
    tmp_path: Path, text: str
) -> None:
    assert not valid(yaml.safe_load(text))
    path = tmp_path / "g.yaml"
    path.write_text(text)
    with pytest.raises(gdln.GdlnError):
        gdln.load(path)


def test_a_task_file_validates_on_its_own(tmp_path: Path) -> None:
    graph = tmp_path / "g.yaml"
    graph.write_text(BASE)
    task = tmp_path / "t.yaml"
    task.write_text(DATA % GOOD_DATA + CONTEXT % BOUND)
    assert valid(yaml.safe_load(task.read_text()))
    assert gdln.load(graph, task=task).task is not None


def test_gdln_schema_prints_the_schema() -> None:
    result = CliRunner().invoke(schema_command, [])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == SCHEMA


def test_gdln_schema_writes_a_file_and_refuses_to_overwrite(tmp_path, capsys) -> None:
    out = tmp_path / "gdln.schema.json"
    code, _, _ = run_cli(["schema", "-o", str(out)], capsys)
    assert code == 0 and json.loads(out.read_text()) == SCHEMA
    out.write_text("mine")
    code, _, err = run_cli(["schema", "-o", str(out)], capsys)
    assert code == 2 and "exists; pass --force to replace it" in err
    assert out.read_text() == "mine"
    code, _, err = run_cli(["schema", "-o", str(tmp_path / "s.txt")], capsys)
    assert code == 2 and "expected a file ending in .json" in err


def _keys(node: object) -> set[str]:
    """Every property name that the schema defines, at any depth."""
    found: set[str] = set()
    if isinstance(node, dict):
        found.update(node.get("properties", {}))
        for value in node.values():
            found |= _keys(value)
    elif isinstance(node, list):
        for value in node:
            found |= _keys(value)
    return found


def test_the_reference_page_documents_every_key_and_the_editor_line() -> None:
    page = (ROOT / "docs" / "graph_files.md").read_text()
    assert "# yaml-language-server: $schema=" in page
    assert "gdln schema" in page
    missing = sorted(key for key in _keys(SCHEMA) if f"`{key}" not in page)
    assert missing == []
