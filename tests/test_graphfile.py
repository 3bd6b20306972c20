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
            r"datasets\.d: give one of 'builtin', 'examples', 'moments' or 'npz', not",
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
