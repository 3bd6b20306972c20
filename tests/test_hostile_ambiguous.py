"""Files that say one thing twice (issue 34): refused, never read last-wins.

A repeated key in YAML (at any level) or in a JSON object, a GraphML file with two
``<node id="x">``, two values for one attribute or two declarations of one key, and
node-link ids ``1`` and ``"1"`` used to load with the last value (or one node) winning.
Each payload here goes to every entry point that reads its format: :func:`gdln.load` on a
graph file, a task file (``task=`` and :func:`gdln.graphfile.with_task`), and the
commands that read a graph (``paths``, ``stats``, ``derive``, ``solve``, ``simulate``),
which must end with one line ``gdln: error: ...`` (at most 300 characters) and exit 2.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from helpers import run_cli

import gdln

SECONDS = 10.0
LINE = 300

GRAPH = """\
params: {n: 2}
nodes:
  - {id: x, size: n}
  - {id: y, size: 1}
edges:
  - {source: x, target: y}
"""
TASK = """\
task:
  examples:
    - {inputs: {x: [1, 0]}, targets: {y: [1]}}
    - {inputs: {x: [0, 1]}, targets: {y: [2]}}
"""

# YAML graph files: (text, what the message must say)
YAML_GRAPHS: dict[str, tuple[str, str]] = {
    "node_size_twice": (
        "nodes:\n  - {id: x, size: 2, size: 5}\n  - {id: y, size: 1}\n"
        "edges: [{source: x, target: y}]\n",
        r"line 2: repeated key 'size': 2 at column 13, then 5 at column 22",
    ),
    "nodes_twice": (
        "nodes: [{id: a, size: 2}, {id: b, size: 1}]\n"
        "nodes: [{id: x, size: 2}, {id: y, size: 1}]\nedges: [{source: x, target: y}]\n",
        r"line 2: repeated key 'nodes': a list at line 1, column 1, then a list at column 1",
    ),
    "params_twice": (GRAPH.replace("{n: 2}", "{n: 2, n: 6}"), r"repeated key 'n': 2 .*then 6"),
    "block_key_twice": (
        GRAPH.replace("  - {id: y, size: 1}", "  - id: y\n    size: 1\n    size: 3"),
        r"line 6: repeated key 'size': 1 at line 5, column 5, then 3 at column 5",
    ),
    "equal_numbers": (
        GRAPH + "solve: {1: a, 1.0: b}\n",
        r"the keys 1 and 1.0 are one name",
    ),
    "number_and_text": (
        GRAPH + "solve: {1: a, '1': b}\n",
        r"the keys 1 and '1' are one name",
    ),
    "edge_key_twice": (
        GRAPH.replace("{source: x, target: y}", "{source: x, target: y, target: x}"),
        r"repeated key 'target': y .*then x",
    ),
    "merge_key_twice": (
        "a: &a {size: 1}\nnodes:\n  - {<<: *a, <<: *a, id: x}\n  - {id: y, size: 1}\n"
        "edges: [{source: x, target: y}]\n",
        r"repeated key '<<'",
    ),
    "task_key_twice": (
        GRAPH + TASK.replace("{y: [1]}}", "{y: [1]}, targets: {y: [3]}}"),
        r"repeated key 'targets'",
    ),
}

# YAML task files (read with a graph file): (text, what the message must say)
YAML_TASKS: dict[str, tuple[str, str]] = {
    "examples_twice": (TASK + TASK.replace("task:\n", ""), r"repeated key 'examples'"),
    "task_twice": (TASK + TASK, r"repeated key 'task'"),
    "dataset_twice": (
        "datasets:\n  d: {examples: {x: [[1, 0]], y: [[1]]}}\n"
        "  d: {examples: {x: [[0, 1]], y: [[2]]}}\n"
        "task: {contexts: [{dataset: d, probability: 1, inputs: {x: x}, targets: {y: y}}]}\n",
        r"line 3: repeated key 'd': a mapping at line 2, column 3, then a mapping at column 3",
    ),
    "probability_twice": (
        "datasets:\n  d: {examples: {x: [[1, 0]], y: [[1]]}}\n"
        "task: {contexts: [{dataset: d, probability: 1, probability: 0, inputs: {x: x}, "
        "targets: {y: y}}]}\n",
        r"repeated key 'probability': 1 .*then 0",
    ),
}


def _node_link(nodes: str, links: str, extra: str = "") -> str:
    return (
        f'{{"directed": true, "multigraph": false, "graph": {{}}, "nodes": [{nodes}], '
        f'"links": [{links}]{extra}}}'
    )


NODES = '{"id": "x", "size": 2}, {"id": "y", "size": 1}'
LINK = '{"source": "x", "target": "y"}'
JSON_GRAPHS: dict[str, tuple[str, str]] = {
    "size_twice": (
        _node_link('{"id": "x", "size": 2, "size": 5}, {"id": "y", "size": 1}', LINK),
        r"repeated key 'size' in one object: 2, then 5",
    ),
    "nodes_twice": (
        _node_link(NODES, LINK, ', "nodes": [{"id": "a", "size": 1}]'),
        r"repeated key 'nodes' in one object",
    ),
    "id_one_and_text_one": (
        _node_link('{"id": 1, "size": 2}, {"id": "1", "size": 3}, {"id": "y", "size": 1}', ""),
        r"the node '1' is listed twice \(written 1 and '1'\)",
    ),
    "node_twice": (
        _node_link(NODES + ', {"id": "x", "size": 5}', LINK),
        r"the node 'x' is listed twice; a node-link file lists each node once",
    ),
    "link_twice": (
        _node_link(NODES, LINK + ', {"source": "x", "target": "y", "gated": true}'),
        r"the link 'x->y' is listed twice",
    ),
    "links_and_edges": (
        _node_link(NODES, LINK, ', "edges": []'),
        r"holds both 'links' and 'edges'",
    ),
}

_KEYS = (
    '<key id="d0" for="node" attr.name="size" attr.type="long"/>'
    '<key id="d1" for="edge" attr.name="gated" attr.type="boolean"/>'
)


def _graphml(body: str, keys: str = _KEYS, graphs: int = 1) -> str:
    graph = f'<graph edgedefault="directed">{body}</graph>'
    return (
        '<?xml version="1.0" encoding="utf-8"?>'
        f'<graphml xmlns="http://graphml.graphdrawing.org/xmlns">{keys}{graph * graphs}</graphml>'
    )


X, Y = '<node id="x"><data key="d0">2</data></node>', '<node id="y"><data key="d0">1</data></node>'
EDGE = '<edge source="x" target="y"/>'
GRAPHML_GRAPHS: dict[str, tuple[str, str]] = {
    "node_twice": (
        _graphml(X + '<node id="x"><data key="d0">3</data></node>' + Y + EDGE),
        r"declares <node id='x'> twice",
    ),
    "data_twice": (
        _graphml('<node id="x"><data key="d0">2</data><data key="d0">7</data></node>' + Y + EDGE),
        r"<node x> gives 'size' twice \(key=\"d0\"\)",
    ),
    "two_keys_one_name": (
        _graphml(
            '<node id="x"><data key="d0">2</data><data key="d2">7</data></node>' + Y + EDGE,
            _KEYS + '<key id="d2" for="node" attr.name="size" attr.type="long"/>',
        ),
        r"<node x> gives 'size' twice \(keys \"d0\" and \"d2\"\)",
    ),
    "key_declared_twice": (
        _graphml(X + Y + EDGE, _KEYS + '<key id="d0" for="node" attr.name="gated"/>'),
        r'declares the key id="d0" twice',
    ),
    "two_defaults": (
        _graphml(
            X + Y + EDGE,
            _KEYS.replace(
                'attr.type="boolean"/>',
                'attr.type="boolean"><default>true</default><default>false</default></key>',
            ),
        ),
        r'gives the key id="d1" two defaults',
    ),
    "edge_data_twice": (
        _graphml(
            X + Y + '<edge source="x" target="y"><data key="d1">true</data>'
            '<data key="d1">false</data></edge>'
        ),
        r"<edge x/y> gives 'gated' twice",
    ),
    "edge_twice": (_graphml(X + Y + EDGE + EDGE), r"declares the edge x->y twice"),
    "two_graphs": (_graphml(X + Y + EDGE, graphs=2), r"holds 2 graphs"),
}

GRAPH_FILES = {
    **{f"yaml-{k}": (".yaml", text, match) for k, (text, match) in YAML_GRAPHS.items()},
    **{f"json-{k}": (".json", text, match) for k, (text, match) in JSON_GRAPHS.items()},
    **{f"graphml-{k}": (".graphml", text, match) for k, (text, match) in GRAPHML_GRAPHS.items()},
}
COMMANDS = {
    "paths": ["paths"],
    "stats": ["stats"],
    "derive": ["derive"],
    "solve": ["solve", "--t-max", "1"],
    "simulate": ["simulate", "--t-max", "1", "--lr", "0.5", "-o", "{tmp}/run.npz"],
}


def _write(tmp_path: Path, case: str, suffix: str, text: str) -> Path:
    path = tmp_path / f"{case}{suffix}"
    path.write_text(text, encoding="utf-8")
    return path


def _one_line(code: int, out: str, err: str) -> str:
    assert (code, out) == (2, ""), (code, out, err)
    assert err.startswith("gdln: error: ") and err.count("\n") == 1, err
    assert len(err) - 1 <= LINE, err
    return err


@pytest.mark.parametrize("case", sorted(GRAPH_FILES))
def test_load_refuses_a_graph_file_that_says_one_thing_twice(case: str, tmp_path: Path) -> None:
    suffix, text, match = GRAPH_FILES[case]
    path = _write(tmp_path, case, suffix, text)
    start = time.perf_counter()
    with pytest.raises(gdln.GraphSpecError, match=match) as info:
        gdln.load(path)
    assert time.perf_counter() - start < SECONDS
    assert str(info.value).startswith(f"{path}: "), info.value
    assert len(str(info.value)) <= LINE


@pytest.mark.parametrize("case", sorted(YAML_TASKS))
def test_a_task_file_that_says_one_thing_twice_is_refused(case: str, tmp_path: Path) -> None:
    text, match = YAML_TASKS[case]
    graph = _write(tmp_path, "g", ".yaml", GRAPH)
    task = _write(tmp_path, case, ".yaml", text)
    with pytest.raises(gdln.TaskSpecError, match=match):
        gdln.load(graph, task=task)
    with pytest.raises(gdln.TaskSpecError, match=match):
        gdln.graphfile.with_task(gdln.load(graph), task)


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("case", sorted(GRAPH_FILES))
def test_every_command_refuses_a_graph_file_that_says_one_thing_twice(
    case: str, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suffix, text, match = GRAPH_FILES[case]
    path = _write(tmp_path, case, suffix, text)
    args = [a.format(tmp=tmp_path) for a in COMMANDS[command]]
    err = _one_line(*run_cli([args[0], str(path), *args[1:]], capsys))
    assert str(path) in err and re.search(match, err), err
    assert not (tmp_path / "run.npz").exists()


@pytest.mark.parametrize("case", sorted(YAML_TASKS))
def test_the_commands_refuse_a_task_file_that_says_one_thing_twice(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, match = YAML_TASKS[case]
    graph = _write(tmp_path, "g", ".yaml", GRAPH)
    task = _write(tmp_path, case, ".yaml", text)
    for command in ("stats", "solve"):
        err = _one_line(*run_cli([command, str(graph), "--task", str(task)], capsys))
        assert str(task) in err and re.search(match, err), err


def test_a_key_that_overrides_a_merged_one_is_no_repeat(tmp_path: Path) -> None:
    """``<<: *base`` then ``size: 3``: YAML's merge, the own key wins; not a repeat."""
    text = (
        "base: &b {size: 2}\nnodes:\n  - {<<: *b, id: x, size: 3}\n  - {<<: *b, id: y}\n"
        "edges: [{source: x, target: y}]\n"
    )
    path = _write(tmp_path, "merge", ".yaml", text.replace("base:", "description:"))
    graph = gdln.load(path).graph
    assert dict(graph.nodes(data="size")) == {"x": 3, "y": 2}


def test_the_same_graph_in_every_format_still_loads(tmp_path: Path) -> None:
    """What is refused is only what is said twice: one node-link and one GraphML graph."""
    node_link = _write(tmp_path, "ok", ".json", _node_link(NODES, LINK))
    graphml = _write(tmp_path, "ok", ".graphml", _graphml(X + Y + EDGE))
    for path in (node_link, graphml):
        graph = gdln.load(path).graph
        assert dict(graph.nodes(data="size")) == {"x": 2, "y": 1}
    assert json.loads(node_link.read_text())["nodes"][0]["id"] == "x"
