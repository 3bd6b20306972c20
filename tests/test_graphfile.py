"""Graph files: loading, parameters, and a clear error for each kind of bad input."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import networkx as nx
import pytest
import sympy as sp
import yaml
from helpers import GRAPHS, load
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gdln

SHIPPED = sorted(p.stem for p in GRAPHS.glob("*.yaml"))


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_graph_loads(name: str) -> None:
    problem = load(name)
    assert nx.is_directed_acyclic_graph(problem.graph)
    assert all(problem.graph.nodes[v]["size"] > 0 for v in problem.graph.nodes)


def test_routing_parameters_control_the_size() -> None:
    problem = load("routing", M=100, K=40)
    graph = problem.graph
    assert graph.number_of_nodes() == 2 * 100 + 2 and graph.number_of_edges() == 201
    assert len(problem.task.contexts) == 100 * 40
    assert sum(c.probability for c in problem.task.contexts) == 1


def test_default_routes_train_each_output_k_times() -> None:
    task = load("routing", M=7, K=3).task
    counts = {}
    for c in task.contexts:
        (out,) = c.targets
        counts[out] = counts.get(out, 0) + 1
    assert set(counts.values()) == {3}


def test_examples_sharing_gates_form_one_context() -> None:
    task = load("chain").task  # three ungated examples
    assert len(task.contexts) == 1 and task.contexts[0].probability == 1
    assert len(load("xor").task.contexts) == 4


def write(tmp_path: Path, text: str, name: str = "g.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


BASE = "nodes: [{id: x, size: 2}, {id: y, size: 1}]\nedges: [{source: x, target: y, gated: true}]\n"
TASK = "task:\n  examples:\n    - {inputs: {x: [1, 0]}, targets: {y: [1]}, %s}\n"


@pytest.mark.parametrize(
    ("text", "cls", "match"),
    [
        ("nodes: [{id: x, size: 2}\n", gdln.GraphSpecError, r"g\.yaml: line \d+: malformed YAML"),
        (
            BASE.replace("target: y", "target: z"),
            gdln.GraphSpecError,
            r"edges\[0\]\.target: unknown node 'z'",
        ),
        (
            "nodes: [{id: a, size: 1}, {id: b, size: 1}]\nedges: [{source: a, target: b}, {source: b, target: a}]\n",
            gdln.GraphSpecError,
            r"edges: the graph has a cycle",
        ),
        (
            BASE.replace("size: 2", "size: 0"),
            gdln.GraphSpecError,
            r"nodes\[0\]\.size: size must be a positive integer, got 0",
        ),
        (BASE.replace("size: 2", "size: -3"), gdln.GraphSpecError, r"got -3"),
        (BASE + TASK % "gates: {}", gdln.TaskSpecError, r"missing gate value for 'x->y'"),
        (
            BASE + "datasets: {d: {examples: {a: [[1, 0]], b: [[1]]}}}\n"
            "task:\n  contexts:\n    - {probability: 3/2, dataset: d, active: [x->y], inputs: {x: a}, targets: {y: b}}\n",
            gdln.TaskSpecError,
            r"probability\: probability 3/2 of context .* is outside \[0, 1\]",
        ),
        (BASE + TASK % "active: [x->q]", gdln.TaskSpecError, r"edge 'x->q' does not exist"),
        (
            BASE.replace("size: 2}", "size: 2, colour: red}"),
            gdln.GraphSpecError,
            r"nodes\[0\]: unknown key 'colour'",
        ),
        (
            "params: {M: 2}\nnodes: [{id: 'x{i}', size: 1, repeat: {i: M}}]\nedges: []\n",
            gdln.GraphSpecError,
            "has no edges",
        ),
        (
            "params: {M: 2}\nnodes: [{id: 'x{i}', size: N, repeat: {i: M}}]\nedges: []\n",
            gdln.GraphSpecError,
            r"unknown name 'N'",
        ),
        (
            "nodes: [{id: x, size: __import__('os')}]\nedges: []\n",
            gdln.GraphSpecError,
            "is not allowed",
        ),
        (
            BASE.replace("size: 2", "size: 10**7"),
            gdln.GraphSpecError,
            r"nodes\[0\]\.size: size 10000000 is above the limit of 1000000",
        ),
        (
            "nodes: [{id: 'x{i}_{j}', size: 1, repeat: {i: 2000, j: 2000}}]\nedges: []\n",
            gdln.GraphSpecError,
            r"nodes\[0\]\.repeat: 2000 x 2000 repetitions are above the limit of 1000000",
        ),
        (
            "params: {M: 10**9}\nnodes: [{id: 'x{i}', size: 1, repeat: {i: M}}]\nedges: []\n",
            gdln.GraphSpecError,
            r"nodes\[0\]\.repeat\.i: repeat count 1000000000 is above the limit",
        ),
        (
            "params: {M: 9**9**9}\nnodes: [{id: x, size: 1}]\nedges: []\n",
            gdln.GraphSpecError,
            r"params\.M: \(9\)\*\*\(387420489\) is too large",
        ),
        (
            BASE + TASK.replace("[1, 0]", "[1, .nan]") % "active: [x->y]",
            gdln.TaskSpecError,
            r"task\.examples\[0\]\.inputs\.x: number nan is not finite",
        ),
        (
            BASE + "datasets: {d: {moments: {a: {a: [[1, 0], [0, .inf]]}}}}\n"
            "task:\n  contexts:\n    - {probability: 1, dataset: d, active: [x->y], inputs: {x: a}}\n",
            gdln.TaskSpecError,
            r"datasets\.d\.moments\.a\.a: number inf is not finite",
        ),
        (
            BASE.replace(", gated: true", "")
            + "datasets: {d: {examples: {a: [[1, 0]], b: [[1]]}}}\n"
            "task:\n  contexts:\n"
            "    - {probability: 1/2, dataset: d, inputs: {x: a}, targets: {y: b}}\n"
            "    - {repeat: {i: 3}, probability: 1/2 - i, dataset: d, inputs: {x: a}}\n",
            gdln.TaskSpecError,
            r"task\.contexts\[1\] \(i=1\)\.probability: probability -1/2 of context",
        ),
        (
            BASE + TASK.replace("[1, 0]", "[[1, 0], [1]]") % "active: [x->y]",
            gdln.TaskSpecError,
            r"task\.examples\[0\]\.inputs\.x: expected a number, a list or a list of equally long",
        ),
        (
            BASE + TASK % "active: [x->y], weight: -1",
            gdln.TaskSpecError,
            r"task\.examples\[0\]\.weight: weight must be a non-negative number, got -1",
        ),
        (
            BASE + TASK % "active: [x->y], weight: 0",
            gdln.TaskSpecError,
            r"g\.yaml: task: the example weights sum to 0",
        ),
        (
            BASE + "datasets: {d: {builtin: hierarchy, examples: {a: [[1]]}}}\n"
            "task: {contexts: [{probability: 1, dataset: d, active: [x->y]}]}\n",
            gdln.TaskSpecError,
            r"datasets\.d: give one of 'builtin', 'examples', 'moments', 'npz' or 'teacher', not",
        ),
        (
            BASE + "datasets: {d: {builtin: [1]}}\n"
            "task: {contexts: [{probability: 1, dataset: d, active: [x->y]}]}\n",
            gdln.TaskSpecError,
            r"datasets\.d\.builtin: unknown builtin dataset \[1\]",
        ),
        (
            BASE + "datasets: {d: {examples: {}}}\n"
            "task: {contexts: [{probability: 1, dataset: d, active: [x->y]}]}\n",
            gdln.TaskSpecError,
            r"datasets\.d\.examples: no fields",
        ),
    ],
)
def test_bad_input_gives_one_clear_error(tmp_path: Path, text: str, cls: type, match: str) -> None:
    with pytest.raises(cls, match=match):
        gdln.load(write(tmp_path, text))


def test_unknown_parameter_override_is_an_error() -> None:
    with pytest.raises(
        gdln.GraphSpecError, match=r"unknown parameter 'Q' \(declared: K, M, hidden, seed\)"
    ):
        load("routing", Q=3)


def test_failed_check_names_the_values() -> None:
    with pytest.raises(gdln.GraphSpecError, match=r"P must be a perfect square.*P=3"):
        load("race", P=3)


def test_node_link_json_and_graphml_load(tmp_path: Path) -> None:
    graph = load("chain").graph
    (tmp_path / "g.json").write_text(json.dumps(nx.node_link_data(graph, edges="links")))
    nx.write_graphml(graph, tmp_path / "g.graphml")
    task = write(
        tmp_path,
        yaml.safe_dump({"task": yaml.safe_load((GRAPHS / "chain.yaml").read_text())["task"]}),
        "task.yaml",
    )
    for name in ("g.json", "g.graphml"):
        problem = gdln.load(tmp_path / name, task=task)
        assert sorted(problem.graph.edges) == sorted(graph.edges)
        assert {v: problem.graph.nodes[v]["size"] for v in graph.nodes} == dict(
            graph.nodes(data="size")
        )
        assert gdln.reduce(problem).systems


RESIDUAL_BLOCK = """
name: block
nodes: [{id: h0, size: 2}, {id: r0, size: 2}, {id: h1, size: 2}]
edges:
  - {source: h0, target: h1, fixed: 1}
  - {source: h0, target: r0, gated: true}
  - {source: r0, target: h1, fixed: 1/sqrt(4)}
"""
RESIDUAL_TASK = """
task:
  random_gates: [{item: "h0->r0", p: 2/3}]
  examples:
    - {inputs: {h0: [1, 0]}, targets: {h1: [3, 0]}}
    - {inputs: {h0: [0, 1]}, targets: {h1: [0, 1]}}
"""


def test_fixed_edges_load_from_node_link_json_and_graphml(tmp_path: Path) -> None:
    yaml_problem = gdln.load(write(tmp_path, RESIDUAL_BLOCK + RESIDUAL_TASK))
    graph = nx.DiGraph(yaml_problem.graph)
    for _, _, attrs in graph.edges(data=True):
        if "fixed" in attrs:
            attrs["fixed"] = str(attrs["fixed"])  # JSON and GraphML hold text, not sympy
    (tmp_path / "g.json").write_text(json.dumps(nx.node_link_data(graph, edges="links")))
    nx.write_graphml(graph, tmp_path / "g.graphml")
    task = write(tmp_path, RESIDUAL_TASK, "task.yaml")
    expected = gdln.reduce(yaml_problem).systems[0]
    for name in ("g.json", "g.graphml"):
        problem = gdln.load(tmp_path / name, task=task)
        assert problem.graph.edges["r0", "h1"]["fixed"] == sp.Rational(1, 2)
        (got,) = gdln.reduce(problem).systems
        assert set(got.rhs) == set(expected.rhs)
        assert all(sp.simplify(got.rhs[v] - expected.rhs[v]) == 0 for v in expected.rhs)


def test_fixed_edge_of_unequal_sizes_in_json_is_an_error(tmp_path: Path) -> None:
    graph = nx.DiGraph()
    graph.add_node("a", size=2)
    graph.add_node("b", size=3)
    graph.add_edge("a", "b", fixed="1")
    (tmp_path / "g.json").write_text(json.dumps(nx.node_link_data(graph, edges="links")))
    with pytest.raises(
        gdln.GraphSpecError, match=r"g\.json: edges\['a', 'b'\]\.fixed: .*equal sizes"
    ):
        gdln.load(tmp_path / "g.json")
    graph.edges["a", "b"]["fixed"] = "one"
    graph.nodes["b"]["size"] = 2
    (tmp_path / "g.json").write_text(json.dumps(nx.node_link_data(graph, edges="links")))
    with pytest.raises(gdln.GraphSpecError, match=r"edges\['a', 'b'\]\.fixed: .*one"):
        gdln.load(tmp_path / "g.json")


def test_graphml_without_size_is_an_error(tmp_path: Path) -> None:
    graph = nx.DiGraph([("a", "b")])
    nx.write_graphml(graph, tmp_path / "g.graphml")
    with pytest.raises(
        gdln.GraphSpecError, match=r"nodes\['a'\]\.size: missing node attribute 'size'"
    ):
        gdln.load(tmp_path / "g.graphml")


yaml_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.text(max_size=6),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "id",
                    "size",
                    "source",
                    "target",
                    "gated",
                    "repeat",
                    "nodes",
                    "edges",
                    "params",
                    "task",
                    "x",
                ]
            ),
            children,
            max_size=4,
        )
    ),
    max_leaves=12,
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    doc=st.dictionaries(
        st.sampled_from(["nodes", "edges", "params", "task", "name", "datasets"]),
        yaml_values,
        max_size=4,
    )
)
def test_loader_fuzz_raises_only_gdln_errors(tmp_path: Path, doc: dict) -> None:
    path = tmp_path / "fuzz.yaml"
    path.write_text(yaml.safe_dump(doc))
    with contextlib.suppress(gdln.GdlnError):
        gdln.load(path)


# The task fuzz: a fixed valid graph (gated node h, gated edge x->h, a declared symbol p)
# with fuzzed datasets and task. The strategies below produce mostly well-formed entries
# with bad values mixed in (non-finite, too large, unknown names, wrong shapes, junk), so
# that about one case in six loads and is reduced, and the rest reach deep checks.
FUZZ_GRAPH = (
    "symbols: [p]\n"
    "nodes: [{id: x, size: 2}, {id: h, size: 2, gated: true}, {id: y, size: 2}, {id: z, size: 1}]\n"
    "edges: [{source: x, target: h, gated: true}, {source: h, target: y}, {source: x, target: z}]\n"
)
numbers = st.sampled_from(
    [0, 1, -1, 2, "1/2", "p", "1 - p", 0.25] * 12
    + ["k", float("nan"), float("inf"), "2**9999", "1/0", "q"]
)
junk = st.recursive(
    st.none() | st.booleans() | numbers | st.text(max_size=4),
    lambda children: (
        st.lists(children, max_size=2) | st.dictionaries(st.text(max_size=3), children, max_size=2)
    ),
    max_leaves=6,
)


def maybe(strategy: st.SearchStrategy) -> st.SearchStrategy:
    """Mostly a well-formed value, once in a while anything."""
    return st.integers(0, 19).flatmap(lambda i: junk if i == 7 else strategy)


def rows(n: int, dim: int) -> st.SearchStrategy:
    return st.lists(st.lists(numbers, min_size=dim, max_size=dim), min_size=n, max_size=n)


DIMS = {"a": 2, "b": 2, "c": 1}  # dataset fields that fit x (size 2), y (2) and z (1)
gated = st.sampled_from(["h", "x->h"] * 4 + ["h->y", "q", "x->q", "h{k}"])
repeat = st.dictionaries(st.just("k"), st.integers(0, 3) | numbers, max_size=1)
gates = st.fixed_dictionaries({"h": numbers, "x->h": numbers}) | st.dictionaries(gated, numbers)
context = st.fixed_dictionaries(
    {
        "probability": maybe(st.sampled_from(["p", "1 - p", "1", "1/2"]) | numbers),
        "dataset": maybe(st.sampled_from(["d", "e", "d", "{k}"])),
        "active": maybe(st.lists(gated, max_size=3)),
    },
    optional={
        "gates": maybe(gates),
        "inputs": maybe(
            st.dictionaries(
                st.sampled_from(["x", "x{k}", "y"]), st.sampled_from(["a", "b", "c"]), max_size=1
            )
        ),
        "targets": maybe(
            st.dictionaries(
                st.sampled_from(["y", "z"]), st.sampled_from(["a", "b", "c"]), max_size=2
            )
        ),
        "repeat": maybe(repeat),
        "let": maybe(st.dictionaries(st.just("j"), numbers, max_size=1)),
        "label": maybe(st.sampled_from(["c{k}", "same", ""])),
    },
)
example = st.fixed_dictionaries(
    {
        "inputs": maybe(st.fixed_dictionaries({"x": maybe(rows(1, 2))})),
        "active": maybe(st.lists(gated, max_size=3)),
    },
    optional={
        "gates": maybe(gates),
        "targets": maybe(
            st.fixed_dictionaries({}, optional={"y": maybe(rows(1, 2)), "z": maybe(rows(1, 1))})
        ),
        "weight": maybe(numbers),
        "repeat": maybe(repeat),
    },
)
examples_data = st.integers(1, 3).flatmap(
    lambda n: st.fixed_dictionaries(
        {
            "examples": maybe(
                st.fixed_dictionaries(
                    {"a": rows(n, 2)}, optional={f: maybe(rows(n, DIMS[f])) for f in "bc"}
                )
            )
        },
        optional={"weights": maybe(st.lists(numbers, min_size=n, max_size=n))},
    )
)
moments_data = st.fixed_dictionaries(
    {
        "moments": maybe(
            st.fixed_dictionaries(
                {"a": st.fixed_dictionaries({"a": maybe(rows(2, 2))})},
                optional={
                    "b": st.fixed_dictionaries(
                        {"b": maybe(rows(2, 2))}, optional={"a": maybe(rows(2, 2))}
                    ),
                    "c": st.fixed_dictionaries(
                        {"c": maybe(rows(1, 1))}, optional={"a": maybe(rows(1, 2))}
                    ),
                },
            )
        )
    }
)
dataset = st.one_of(
    st.fixed_dictionaries({"builtin": maybe(st.sampled_from(["hierarchy", "nope"]))}),
    examples_data,
    examples_data,
    moments_data,
    moments_data,
    st.fixed_dictionaries({"npz": maybe(st.sampled_from(["t.npz", "missing.npz"]))}),
)
datasets = st.dictionaries(st.sampled_from(["d", "e"]), maybe(dataset), min_size=1, max_size=2)
tasks = st.one_of(
    st.fixed_dictionaries({"contexts": maybe(st.lists(context, min_size=1, max_size=3))}),
    st.fixed_dictionaries({"examples": maybe(st.lists(example, min_size=1, max_size=3))}),
    st.fixed_dictionaries({"npz": maybe(st.sampled_from(["t.npz", "missing.npz"]))}),
    st.dictionaries(st.sampled_from(["contexts", "examples", "npz", "x"]), junk, max_size=2),
)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(task=tasks, data=datasets)
def test_task_fuzz_raises_only_gdln_errors(tmp_path: Path, task: dict, data: dict) -> None:
    import numpy as np

    arrays = {"inputs/x": np.eye(2), "targets/y": np.ones((2, 2)), "targets/z": np.ones((2, 1))}
    arrays |= {"a": np.eye(2), "gates/h": np.array([1.0, 0.0]), "gates/x->h": np.ones(2)}
    np.savez(tmp_path / "t.npz", **arrays)
    path = tmp_path / "fuzz.yaml"
    path.write_text(FUZZ_GRAPH + yaml.safe_dump({"datasets": data, "task": task}))
    with contextlib.suppress(gdln.GdlnError):
        problem = gdln.load(path)
        gdln.reduce(problem, lump="symmetry")


def test_npz_task_equals_the_same_examples_in_yaml(tmp_path: Path) -> None:
    import numpy as np

    xor = load("xor")
    ex = xor.examples()
    arrays = {"inputs/x": ex.inputs["x"], "targets/y": ex.targets["y"]}
    arrays.update({f"gates/h{k}": ex.gates[f"h{k}"] for k in range(4)})
    np.savez(tmp_path / "xor.npz", **arrays)
    text = (GRAPHS / "xor.yaml").read_text().split("task:")[0] + "task: {npz: xor.npz}\n"
    problem = gdln.load(write(tmp_path, text))
    ours = gdln.path_statistics(problem.graph, problem.task)
    reference = gdln.path_statistics(xor.graph, xor.task)
    for p, value in reference.input_output.items():
        np.testing.assert_allclose(ours.input_output[p], np.array(value, dtype=float), rtol=1e-12)


def test_truncated_graphml_is_an_error(tmp_path: Path) -> None:
    graph = nx.DiGraph([("a", "b")])
    nx.set_node_attributes(graph, 1, "size")
    nx.write_graphml(graph, tmp_path / "g.graphml")
    text = (tmp_path / "g.graphml").read_text()
    (tmp_path / "g.graphml").write_text(text[: len(text) // 2])
    with pytest.raises(gdln.GraphSpecError, match=r"g\.graphml: cannot read graph: "):
        gdln.load(tmp_path / "g.graphml")


@pytest.mark.parametrize(
    ("arrays", "match"),
    [
        (
            {"inputs/x": [[1.0, 0.0], [0.0, float("nan")]], "targets/y": [[1.0], [0.0]]},
            r"task\.npz\['inputs/x'\]: t\.npz: array 'inputs/x' has the non-finite value nan "
            r"at index \[1, 1\]",
        ),
        (
            {"inputs/x": [[1.0, 0.0]], "targets/y": [[float("inf")]]},
            r"array 'targets/y' has the non-finite value inf at index \[0, 0\]",
        ),
        ({"inputs/x": [["a", "b"]], "targets/y": [[1.0]]}, r"holds <U1 values; expected numbers"),
        ({"inputs/x": 1.0}, r"array 'inputs/x' has shape \(\); expected one row per example"),
    ],
)
def test_bad_npz_task_arrays(tmp_path: Path, arrays: dict, match: str) -> None:
    import numpy as np

    np.savez(tmp_path / "t.npz", **{k: np.asarray(v) for k, v in arrays.items()})
    text = BASE.replace(", gated: true", "") + "task: {npz: t.npz}\n"
    with pytest.raises(gdln.TaskSpecError, match=match):
        gdln.load(write(tmp_path, text))


def test_symbolic_probability_with_float_data_is_an_error(tmp_path: Path) -> None:
    import numpy as np

    np.savez(tmp_path / "d.npz", a=np.eye(2), b=np.array([[1.0], [0.0]]))
    text = (
        "symbols: [p]\n" + BASE + "datasets: {d: {npz: d.npz}}\ntask:\n  contexts:\n"
        "    - {probability: p, dataset: d, active: [x->y], inputs: {x: a}, targets: {y: b}}\n"
    )
    with pytest.raises(
        gdln.TaskSpecError,
        match=r"g\.yaml: context 0 \('x->y'\): symbolic probability p with float data \(npz\); "
        r"give exact data or bind the symbols: --param p=VALUE",
    ):
        gdln.reduce(gdln.load(write(tmp_path, text)))


def test_symbolic_survival_probability_with_float_data_is_an_error(tmp_path: Path) -> None:
    import numpy as np

    np.savez(tmp_path / "d.npz", a=np.eye(2), b=np.array([[1.0], [0.0]]))
    text = (
        "symbols: [q]\n" + BASE + "datasets: {d: {npz: d.npz}}\ntask:\n"
        "  random_gates: [{item: x->y, p: q}]\n  contexts:\n"
        "    - {probability: 1, dataset: d, active: [x->y], inputs: {x: a}, targets: {y: b}}\n"
    )
    problem = gdln.load(write(tmp_path, text))
    match = (
        r"random_gates: symbolic survival probability q of \('x', 'y'\) with float data "
        r"\(npz\); give exact data or bind the symbols: --param q=VALUE"
    )
    with pytest.raises(gdln.TaskSpecError, match=r"g\.yaml: " + match):
        gdln.reduce(problem)
    with pytest.raises(gdln.TaskSpecError, match=match):
        gdln.path_statistics(problem.graph, problem.task)


def test_nan_in_an_npz_dataset_is_an_error(tmp_path: Path) -> None:
    import numpy as np

    np.savez(tmp_path / "d.npz", a=np.array([[1.0, np.nan]]), b=np.array([[1.0]]))
    text = (
        BASE
        + "datasets: {d: {npz: d.npz}}\ntask:\n  contexts:\n    - {probability: 1, dataset: d, active: [x->y], inputs: {x: a}, targets: {y: b}}\n"
    )
    with pytest.raises(
        gdln.TaskSpecError, match=r"datasets\.d\.npz\['a'\]: d\.npz: array 'a' has the non-finite"
    ):
        gdln.load(write(tmp_path, text))


def test_npz_dataset_and_missing_gate_array(tmp_path: Path) -> None:
    import numpy as np

    np.savez(tmp_path / "d.npz", a=np.eye(2), b=np.array([[1.0], [0.0]]))
    text = (
        BASE
        + "datasets: {d: {npz: d.npz}}\ntask:\n  contexts:\n    - {probability: 1, dataset: d, active: [x->y], inputs: {x: a}, targets: {y: b}}\n"
    )
    problem = gdln.load(write(tmp_path, text))
    stats = gdln.path_statistics(problem.graph, problem.task)
    np.testing.assert_allclose(next(iter(stats.input_output.values())), [[0.5, 0.0]])
    arrays = {"inputs/x": np.eye(2), "targets/y": np.ones((2, 2)), "targets/z": np.ones((2, 1))}
    arrays |= {"a": np.eye(2), "gates/h": np.array([1.0, 0.0]), "gates/x->h": np.ones(2)}
    np.savez(tmp_path / "t.npz", **arrays)
    with pytest.raises(gdln.TaskSpecError, match=r"task\.npz: missing gate value for 'x->y'"):
        gdln.load(write(tmp_path, BASE + "task: {npz: t.npz}\n", "t.yaml"))


# YAML 1.1 words: PyYAML's own loader reads these as booleans; gdln reads YAML 1.2.
CONTEXT_TASK = (
    "datasets: {d: {examples: {a: [[1, 0]], b: [[1]]}}}\n"
    "task:\n  contexts:\n    - {probability: 1, dataset: d, active: [x->y], inputs: {x: a}, "
    "targets: {y: b}, %s}\n"
)


@pytest.mark.parametrize("word", ["on", "off", "yes", "no", "On", "NO", "y", "n"])
def test_yaml_1_1_boolean_words_stay_text(tmp_path: Path, word: str) -> None:
    problem = gdln.load(write(tmp_path, BASE + CONTEXT_TASK % f"label: {word}"))
    assert problem.task.contexts[0].label == word
    text = f"nodes: [{{id: {word}, size: 1}}, {{id: z, size: 1}}]\nedges: [{{source: {word}, target: z}}]\n"
    assert set(gdln.load(write(tmp_path, text)).graph.nodes) == {word, "z"}


@pytest.mark.parametrize(
    ("typed", "read"),
    [("1:30", "1:30"), ("1_000", "1_000"), ("2024-01-01", "2024-01-01"), ("0b11", "0b11")],
)
def test_yaml_1_1_numbers_and_dates_stay_text(tmp_path: Path, typed: str, read: str) -> None:
    problem = gdln.load(write(tmp_path, BASE + CONTEXT_TASK % f"label: {typed}"))
    assert problem.task.contexts[0].label == read


def test_yaml_integers_follow_yaml_1_2(tmp_path: Path) -> None:
    # YAML 1.1 reads 010 as octal 8; YAML 1.2 as decimal 10 (and octal needs 0o)
    text = "nodes: [{id: a, size: 010}, {id: b, size: 0o10}, {id: c, size: 0x10}]\n"
    text += "edges: [{source: a, target: b}, {source: b, target: c}]\n"
    sizes = dict(gdln.load(write(tmp_path, text)).graph.nodes(data="size"))
    assert sizes == {"a": 10, "b": 8, "c": 16}


def test_integer_node_ids_are_their_decimal_text(tmp_path: Path) -> None:
    text = "nodes: [{id: 0, size: 2}, {id: 1, size: 1}]\nedges: [{source: 0, target: 1, gated: true}]\n"
    text += "task: {examples: [{inputs: {0: [1, 0]}, targets: {1: [1]}, active: [0->1]}]}\n"
    problem = gdln.load(write(tmp_path, text))
    assert set(problem.graph.edges) == {("0", "1")}
    assert problem.task.contexts[0].gates == {("0", "1"): 1}


QUOTE = r"; quote it \('{}'\) to mean the text"
CONTEXT = "{probability: 1, dataset: d, active: [x->y], inputs: {x: a}, targets: {y: b}%s}"
DATA = "datasets: {d: {examples: {a: [[1, 0]], b: [[1]]}}}\n"


def context_file(fields: str = "", data: str = DATA) -> str:
    return BASE + data + "task:\n  contexts:\n    - " + CONTEXT % fields + "\n"


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (
            context_file(", label: true"),
            r"g\.yaml: task\.contexts\[0\]\.label: expected text, got the boolean true"
            + QUOTE.format("true"),
        ),
        (
            context_file(", label: 2"),
            r"task\.contexts\[0\]\.label: expected text, got the number 2" + QUOTE.format("2"),
        ),
        (
            context_file(", label: ~"),
            r"task\.contexts\[0\]\.label: expected text, got nothing \(null\)$",
        ),
        (
            BASE.replace("id: x", "id: 1.5"),
            r"nodes\[0\]\.id: expected text or an integer, got the number 1\.5"
            + QUOTE.format("1.5"),
        ),
        (
            BASE.replace("id: x", "id: true"),
            r"nodes\[0\]\.id: expected text or an integer, got the boolean true",
        ),
        (
            BASE.replace("source: x", "source: false"),
            r"edges\[0\]\.source: expected text or an integer, got the boolean false",
        ),
        (
            context_file().replace("dataset: d", "dataset: true"),
            r"task\.contexts\[0\]\.dataset: expected text, got the boolean true",
        ),
        (
            context_file(data=DATA.replace("{d:", "{1:")).replace("dataset: d", "dataset: '1'"),
            r"datasets\.1: expected a dataset name, got the number 1" + QUOTE.format("1"),
        ),
        (
            context_file().replace("inputs: {x: a}", "inputs: {x: true}"),
            r"task\.contexts\[0\]\.inputs\.x: expected a field name, got the boolean true",
        ),
        (
            context_file(data=DATA.replace("a: [[1, 0]]", "1: [[1, 0]]")),
            r"datasets\.d\.examples\.1: expected a field name, got the number 1",
        ),
        (
            context_file().replace("inputs: {x: a}", "inputs: {1.5: a}"),
            r"task\.contexts\[0\]\.inputs: expected text or an integer, got the number 1\.5",
        ),
        (
            context_file().replace("active: [x->y]", "active: [true]"),
            r"task\.contexts\[0\]\.active: expected text or an integer, got the boolean true",
        ),
        (
            context_file(", repeat: {true: 2}"),
            r"task\.contexts\[0\]\.repeat\.True: expected a variable name, got the boolean "
            r"true" + QUOTE.format("true"),
        ),
        (
            context_file(", let: {1: 2}"),
            r"task\.contexts\[0\]\.let\.1: expected a variable name, got the number 1",
        ),
        (
            "params: {true: 1}\n" + BASE,
            r"params\.True: expected a parameter name, got the boolean true",
        ),
        ("params: {a b: 1}\n" + BASE, r"params\.a b: parameter 'a b' is not a name"),
        ("derived: {false: 1}\n" + BASE, r"derived\.False: expected a derived name, got the"),
        ("symbols: [true]\n" + BASE, r"symbols\[0\]: expected a symbol name, got the boolean"),
        ("name: true\n" + BASE, r"g\.yaml: name: expected text, got the boolean true"),
        (
            BASE + "solve: {lump: false}\n",
            r"solve\.lump: expected one of none, symmetry, balanced, full; got False",
        ),
    ],
)
def test_text_fields_refuse_booleans_and_numbers(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(gdln.GraphSpecError, match=match):
        gdln.load(write(tmp_path, text))


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (BASE.replace("size: 2", "size: true"), r"nodes\[0\]\.size: expected a number, got the "),
        (
            "params: {M: 3}\n" + BASE.replace("size: 2", "size: M > 2"),
            r"nodes\[0\]\.size: expected a number, got 'M > 2', a condition \(True\)",
        ),
        (
            context_file().replace("probability: 1", "probability: true"),
            r"task\.contexts\[0\]\.probability: expected a number, got the boolean true",
        ),
        (
            context_file().replace("probability: 1", "probability: \"'a'\""),
            r"task\.contexts\[0\]\.probability: expected a number, got 'a'",
        ),
        (
            "nodes: [{id: x, size: 2}, {id: y, size: 2}]\nedges: [{source: x, target: y, fixed: true}]\n",
            r"edges\[0\]\.fixed: expected a number, got the boolean true",
        ),
        (
            "nodes: [{id: 'x{i}', size: 1, repeat: {i: true}}]\nedges: []\n",
            r"nodes\[0\]\.repeat\.i: expected a number, got the boolean true",
        ),
        (
            "nodes: [{id: 'x{i}', size: 1, repeat: {i: [0, true]}}]\nedges: []\n",
            r"nodes\[0\]\.repeat\.i: expected a number or an expression, got the boolean true",
        ),
        (
            context_file(", let: {k: false}"),
            r"task\.contexts\[0\]\.let\.k: expected a number or an expression, got the boolean",
        ),
        ("params: {M: true}\n" + BASE, r"params\.M: expected a number or an expression, got the"),
        (BASE + "solve: {t_max: true}\n", r"solve\.t_max: expected a number, got the boolean true"),
        (
            BASE + TASK % "active: [x->y], weight: true",
            r"task\.examples\[0\]\.weight: expected a number, got the boolean",
        ),
        (
            BASE + TASK % "gates: {x->y: true}",
            r"task\.examples\[0\]\.gates\.x->y: expected a number, got the bool",
        ),
        (
            BASE + TASK.replace("[1, 0]", "[1, false]") % "active: [x->y]",
            r"task\.examples\[0\]\.inputs\.x: expected a number, got the bool",
        ),
        (
            BASE + "task:\n  random_gates: [{item: x->y, p: true}]\n"
            "  examples: [{inputs: {x: [1, 0]}, targets: {y: [1]}}]\n",
            r"task\.random_gates\[0\]\.p: expected a number, got the boolean",
        ),
        (
            "nodes: [{id: x, size: 2}, {id: y, size: 2}]\nedges: [{source: x, target: y}]\n"
            "datasets: {d: {builtin: whitened, size: true}}\n"
            "task: {contexts: [{probability: 1, dataset: d, inputs: {x: x}}]}\n",
            r"datasets\.d\.size: expected a number, got the boolean true",
        ),
        (
            BASE.replace("gated: true", "gated: yes"),
            r"edges\[0\]\.gated: expected true or false, got 'yes'",
        ),
        (
            BASE.replace("gated: true", "gated: 1"),
            r"edges\[0\]\.gated: expected true or false, got the number 1",
        ),
    ],
)
def test_numeric_fields_refuse_booleans(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(gdln.GraphSpecError, match=match):
        gdln.load(write(tmp_path, text))


EXTENSIONS = (".yaml", ".yml", ".json", ".graphml")


def test_every_accepted_extension_loads(tmp_path: Path) -> None:
    graph = load("chain").graph
    text = (GRAPHS / "chain.yaml").read_text()
    for suffix in (".yaml", ".yml", ".YML"):
        assert sorted(gdln.load(write(tmp_path, text, "g" + suffix)).graph.edges) == sorted(
            graph.edges
        )
    (tmp_path / "g.json").write_text(json.dumps(nx.node_link_data(graph, edges="links")))
    nx.write_graphml(graph, tmp_path / "g.graphml")
    for suffix in EXTENSIONS:
        assert sorted(gdln.load(tmp_path / f"g{suffix}").graph.edges) == sorted(graph.edges)


def test_unknown_extension_names_every_accepted_one(tmp_path: Path) -> None:
    path = write(tmp_path, (GRAPHS / "chain.yaml").read_text(), "g.txt")
    with pytest.raises(gdln.GraphSpecError, match=r"g\.txt: unknown file type '\.txt'") as info:
        gdln.load(path)
    listed = str(info.value).split("expected one of ")[1].split(", ")
    assert listed == list(EXTENSIONS)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda g: g.nodes["a"].update(size=True), r"nodes\['a'\]\.size: size True is not an int"),
        (lambda g: g.nodes["a"].update(size=1.5), r"nodes\['a'\]\.size: size 1\.5 is not an int"),
        (
            lambda g: g.edges["a", "b"].update(gated="maybe"),
            r"edges\['a', 'b'\]\.gated: expected true or false, got 'maybe'",
        ),
        (
            lambda g: g.edges["a", "b"].update(fixed=True),
            r"edges\['a', 'b'\]\.fixed: expected a number, got the boolean true",
        ),
        (
            lambda g: nx.relabel_nodes(g, {"a": 1.5}, copy=False),
            r"nodes\[1\.5\]: expected a node id \(text or an integer\), got the number 1\.5",
        ),
    ],
)
def test_node_link_json_refuses_booleans_and_fractions(
    tmp_path: Path, change: object, match: str
) -> None:
    graph = nx.DiGraph()
    graph.add_node("a", size=1)
    graph.add_node("b", size=1)
    graph.add_edge("a", "b")
    change(graph)  # type: ignore[operator]
    (tmp_path / "g.json").write_text(json.dumps(nx.node_link_data(graph, edges="links")))
    with pytest.raises(gdln.GraphSpecError, match=match):
        gdln.load(tmp_path / "g.json")


def test_node_link_json_accepts_integer_ids_and_text_flags(tmp_path: Path) -> None:
    graph = nx.DiGraph()
    graph.add_node(0, size=1)
    graph.add_node(1, size=1, gated="yes")
    graph.add_node(2, size=1)
    graph.add_edge(0, 1, gated="False")
    graph.add_edge(1, 2, gated=1)
    (tmp_path / "g.json").write_text(json.dumps(nx.node_link_data(graph, edges="links")))
    loaded = gdln.load(tmp_path / "g.json").graph
    assert dict(loaded.nodes(data="gated")) == {"0": False, "1": True, "2": False}
    assert dict(((u, v), g) for u, v, g in loaded.edges(data="gated")) == {
        ("0", "1"): False,
        ("1", "2"): True,
    }


def test_undirected_graphml_is_an_error(tmp_path: Path) -> None:
    graph = nx.Graph([("a", "b")])
    nx.set_node_attributes(graph, 1, "size")
    nx.write_graphml(graph, tmp_path / "g.graphml")
    with pytest.raises(gdln.GraphSpecError, match=r"g\.graphml: the graph is undirected"):
        gdln.load(tmp_path / "g.graphml")
