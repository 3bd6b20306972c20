"""Graph files round-trip: ``parse(dump(problem))`` is the same problem (issue 35, item 6).

The reference is the problem as :func:`gdln.load` reads it: every shipped graph and
generated graph files (hypothesis) are dumped and parsed back, and the two problems must
have the same graph (nodes with sizes and gates, edges with gates and fixed values, in
order), the same task (contexts, datasets, random gates), the same examples, parameters
and settings; the derivation (same route) and the solve of the dumped file must equal the
original's.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pytest
import sympy as sp
import yaml
from helpers import GRAPHS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gdln
from gdln.graphfile import dump, parse
from gdln.task import Context, Dataset, Task

SHIPPED = sorted(path.stem for path in GRAPHS.glob("*.yaml"))
SMALL = {"routing": {"M": "3", "K": "2", "hidden": "4"}, "race": {"M": "4", "hidden": "4"}}


def assert_same_problem(original: gdln.Problem, back: gdln.Problem) -> None:
    """Graph, task, examples, parameters and settings, compared entry by entry."""
    assert back.name == original.name
    assert list(back.graph.nodes(data=True)) == list(original.graph.nodes(data=True))
    assert list(back.graph.edges(data=True)) == list(original.graph.edges(data=True))
    assert dict(back.params) == dict(original.params)
    assert back.settings == original.settings
    if original.task is None:
        assert back.task is None
        return
    task, again = original.task, back.task
    assert again is not None
    assert list(again.contexts) == list(task.contexts)
    assert dict(again.random_gates) == dict(task.random_gates)
    assert list(again.datasets) == list(task.datasets)
    for name, dataset in task.datasets.items():
        _same_dataset(dataset, again.datasets[name])
    mine, theirs = original.examples(), back.examples()
    for field in ("inputs", "targets", "gates"):
        a, b = getattr(mine, field), getattr(theirs, field)
        assert list(a) == list(b)
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
    np.testing.assert_array_equal(mine.weights, theirs.weights)
    np.testing.assert_array_equal(mine.context, theirs.context)
    assert mine.context_labels == theirs.context_labels


def _same_dataset(a: Dataset, b: Dataset) -> None:
    assert dict(a.fields) == dict(b.fields) and a.exact == b.exact
    assert (a.examples is None) == (b.examples is None)
    for f, m in (a.examples or {}).items():
        assert _equal(m, b.examples[f]), f  # type: ignore[index]
    assert (a.weights is None) == (b.weights is None)
    if a.weights is not None:
        assert _equal(sp.ImmutableMatrix(a.weights).reshape(1, len(a.weights)),
                      sp.ImmutableMatrix(b.weights).reshape(1, len(b.weights)))  # fmt: skip
    assert (a.moments_given is None) == (b.moments_given is None)
    if a.moments_given is not None:
        assert list(a.moments_given) == list(b.moments_given)  # type: ignore[arg-type]
        for key, m in a.moments_given.items():
            assert _equal(m, b.moments_given[key]), key  # type: ignore[index]


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, sp.MatrixBase):
        return isinstance(b, sp.MatrixBase) and a.shape == b.shape and a == b
    return bool(np.array_equal(np.asarray(a, float), np.asarray(b, float)))


def _derivation(problem: gdln.Problem, route: str) -> str:
    return gdln.format_derivation(gdln.reduce(problem, route=route))


# --------------------------------------------------------------------- the shipped graphs
@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_graph_reads_back_as_itself(name: str) -> None:
    original = gdln.load(GRAPHS / f"{name}.yaml", params=SMALL.get(name))
    text = dump(original)
    back = parse(text, source=original.source)
    assert_same_problem(original, back)
    assert dump(back) == text  # a fixed point: nothing is lost or added the second time


@pytest.mark.parametrize("name", [n for n in SHIPPED if n != "resnet_sd"])
def test_derive_and_solve_of_the_dumped_file_equal_the_originals(name: str) -> None:
    """The same route for both (the dumped file has no repeat: families, so the quotient
    is the original's only): the same derivation, and the same solution."""
    original = gdln.load(GRAPHS / f"{name}.yaml", params=SMALL.get(name))
    back = parse(dump(original), source=original.source)
    assert _derivation(back, "contexts") == _derivation(original, "contexts")
    first = gdln.solve(original, t_max=2.0, points=5, route="contexts")
    again = gdln.solve(back, t_max=2.0, points=5, route="contexts")
    np.testing.assert_array_equal(again.loss, first.loss)
    taken = gdln.solve(original, t_max=2.0, points=5)  # auto: the quotient where there is one
    np.testing.assert_allclose(again.loss, taken.loss, rtol=1e-9, atol=1e-12)


def test_stochastic_depth_with_a_symbolic_survival_reads_back() -> None:
    """resnet_sd with p_L kept as the declared symbol q: the symbol, the random gates and
    the fixed kappa = 1/sqrt(L) are written as expressions and read back exactly; the
    moment route gives the same expected dynamics."""
    original = gdln.load(GRAPHS / "resnet_sd.yaml", params={"L": "3", "p_L": "q"})
    back = parse(dump(original), source=original.source)
    assert_same_problem(original, back)
    assert "symbols: [q]" in dump(original)
    numbers = {"L": "3", "p_L": "1/2"}
    first = gdln.load(GRAPHS / "resnet_sd.yaml", params=numbers)
    second = parse(dump(first), source=first.source)
    a = gdln.solve(first, t_max=2.0, points=4)
    b = gdln.solve(second, t_max=2.0, points=4)
    np.testing.assert_array_equal(a.loss, b.loss)


# ------------------------------------------------------------------- generated problems
def _fractions(draw: Any, count: int, *, low: int = -3, high: int = 3) -> list[str]:
    values = draw(st.lists(st.integers(low, high), min_size=count, max_size=count))
    scales = draw(st.lists(st.sampled_from([1, 2, 3]), min_size=count, max_size=count))
    return [str(Fraction(v, s)) for v, s in zip(values, scales, strict=True)]


@st.composite
def documents(draw: Any) -> dict[str, Any]:
    """A valid graph file: inputs, an optional hidden layer, outputs; gated nodes and
    edges, fixed edges, contexts with examples or moments data, random gates, settings."""
    inputs = [f"x{i}" for i in range(draw(st.integers(1, 2)))]
    hidden = [f"h{i}" for i in range(draw(st.integers(0, 2)))]
    outputs = [f"y{i}" for i in range(draw(st.integers(1, 2)))]
    size = {v: draw(st.integers(1, 3)) for v in inputs + hidden + outputs}
    nodes = []
    for v in inputs + hidden + outputs:
        entry: dict[str, Any] = {"id": v, "size": size[v]}
        if v in hidden and draw(st.booleans()):
            entry["gated"] = True
        nodes.append(entry)
    pairs = [(u, v) for u in inputs for v in (hidden or outputs)]
    pairs += [(u, v) for u in hidden for v in outputs]
    edges, gated = [], [n["id"] for n in nodes if n.get("gated")]
    for u, v in pairs:
        entry = {"source": u, "target": v}
        if draw(st.booleans()):
            entry["gated"] = True
            gated.append(f"{u}->{v}")
        elif size[u] == size[v] and draw(st.integers(0, 3)) == 0:
            entry["fixed"] = draw(st.sampled_from([1, "1/2", "-2", "sqrt(2)"]))
        edges.append(entry)
    fields = {v: f"f{k}" for k, v in enumerate(inputs + outputs)}
    datasets: dict[str, Any] = {}
    for d in range(draw(st.integers(1, 2))):
        rows = draw(st.integers(1, 3))
        columns = {fields[v]: size[v] for v in inputs + outputs}
        examples = {f: [_fractions(draw, dim) for _ in range(rows)] for f, dim in columns.items()}
        if draw(st.booleans()):
            entry = {"examples": examples}
            if draw(st.booleans()):
                entry["weights"] = draw(st.lists(st.integers(1, 4), min_size=rows, max_size=rows))
            datasets[f"data{d}"] = entry
        else:  # the moments of those examples: consistent and positive semidefinite
            stacked = sp.Matrix([[sp.Rational(x) for f in columns for x in examples[f][r]]
                                 for r in range(rows)])  # fmt: skip
            gram = stacked.T * stacked / rows
            offsets = np.cumsum([0, *columns.values()])
            moments: dict[str, Any] = {}
            for i, a in enumerate(columns):
                for j, b in enumerate(columns):
                    block = gram[offsets[i] : offsets[i + 1], offsets[j] : offsets[j + 1]]
                    rows_of = [
                        [str(block[r, c]) for c in range(block.cols)] for r in range(block.rows)
                    ]
                    moments.setdefault(a, {})[b] = rows_of
            datasets[f"data{d}"] = {"moments": moments}
    count = draw(st.integers(1, 3))
    mass = draw(st.lists(st.integers(1, 4), min_size=count, max_size=count))
    contexts = []
    for k in range(count):
        entry = {
            "label": f"c{k}",
            "probability": str(Fraction(mass[k], sum(mass))),
            "dataset": draw(st.sampled_from(sorted(datasets))),
            "inputs": {v: fields[v] for v in inputs},
            "targets": {v: fields[v] for v in outputs},
        }
        if gated and draw(st.booleans()):
            entry["gates"] = {g: draw(st.sampled_from([0, 1, "1/2", 2])) for g in gated}
        elif gated:
            entry["active"] = [g for g in gated if draw(st.booleans())]
        contexts.append(entry)
    task: dict[str, Any] = {"contexts": contexts}
    chosen = [g for g in gated if draw(st.integers(0, 2)) == 0]
    if chosen:
        task["random_gates"] = [{"item": g, "p": draw(st.sampled_from(["1/2", "1/3", 1]))}
                                for g in chosen]  # fmt: skip
    document: dict[str, Any] = {
        "name": "generated",
        "params": {"n": draw(st.integers(1, 5)), "half": "1/2"},
        "nodes": nodes,
        "edges": edges,
        "datasets": datasets,
        "task": task,
    }
    solve = draw(st.dictionaries(
        st.sampled_from(["lump", "b0", "t_max", "lr", "points", "weight_decay"]),
        st.just(None), max_size=3))  # fmt: skip
    values = {"lump": "none", "b0": "1/10", "t_max": "3*n", "lr": "1/20", "points": 7,
              "weight_decay": "1/100"}  # fmt: skip
    if solve:
        document["solve"] = {k: values[k] for k in solve}
    if draw(st.booleans()):
        document["simulate"] = {"seeds": draw(st.integers(1, 4)), "init_scale": "1/4"}
    return document


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document=documents())
def test_generated_graph_files_read_back_as_themselves(document: dict[str, Any]) -> None:
    original = parse(yaml.safe_dump(document, sort_keys=False), source="generated.yaml")
    text = dump(original)
    back = parse(text, source="generated.yaml")
    assert_same_problem(original, back)
    assert dump(back) == text


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document=documents())
def test_generated_graph_files_derive_the_same(document: dict[str, Any]) -> None:
    original = parse(yaml.safe_dump(document, sort_keys=False), source="generated.yaml")
    back = parse(dump(original), source="generated.yaml")
    outcomes = []
    for problem in (original, back):
        try:
            outcomes.append(_derivation(problem, "contexts"))
        except gdln.GdlnError as err:  # no common bases, say: the same refusal
            outcomes.append(f"{type(err).__name__}: {err}")
    assert outcomes[0] == outcomes[1]


# ------------------------------------------------------------- problems made in Python
def test_a_problem_with_float_data_reads_back_to_the_same_numbers() -> None:
    """Float data (an npz dataset, a problem built in Python) is written as the shortest
    decimals that read back to the same float64; the file then holds them exactly."""
    graph = nx.DiGraph(name="floats")
    graph.add_node("x", size=2, gated=False)
    graph.add_node("y", size=1, gated=False)
    graph.add_edge("x", "y", gated=False)
    rng = np.random.default_rng(0)
    data = Dataset("d", {"a": 2, "b": 1}, examples={"a": rng.normal(size=(5, 2)),
                                                   "b": rng.normal(size=(5, 1))})  # fmt: skip
    context = Context("all", sp.Integer(1), {}, "d", {"x": "a"}, {"y": "b"})
    problem = gdln.Problem(graph, Task([context], {"d": data}), source="floats.yaml")
    back = parse(dump(problem), source="floats.yaml")
    mine, theirs = problem.examples(), back.examples()
    np.testing.assert_array_equal(theirs.inputs["x"], mine.inputs["x"])
    np.testing.assert_array_equal(theirs.targets["y"], mine.targets["y"])
    assert back.task is not None and back.task.datasets["d"].exact


def test_settings_the_file_wrote_or_that_differ_are_written() -> None:
    problem = gdln.load(GRAPHS / "chain.yaml")
    changed = gdln.Problem(
        problem.graph,
        problem.task,
        source=problem.source,
        settings=problem.settings.given(lump="none", seeds=3, method="lsoda"),
    )
    document = yaml.safe_load(dump(changed))
    assert document["solve"] == {"lump": "none", "b0": "1/10", "t_max": 40, "method": "lsoda"}
    assert document["simulate"] == {"seeds": 3}
    assert parse(dump(changed), source=problem.source).settings == changed.settings


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda g: nx.relabel_nodes(g, {"x": "x{i}"}), r"nodes: 'x\{i\}' holds a brace"),
        (lambda g: nx.relabel_nodes(g, {"x": 7}), "nodes: expected a text name, got int 7"),
    ],
)
def test_what_a_graph_file_cannot_say_is_refused(change: Any, message: str) -> None:
    problem = gdln.load(GRAPHS / "chain.yaml")
    graph = change(problem.graph)
    with pytest.raises(gdln.GraphSpecError, match=message):
        dump(gdln.Problem(graph, None, source="g.yaml"))


def test_dump_writes_yaml_and_parse_reads_every_format(tmp_path: Path) -> None:
    problem = gdln.load(GRAPHS / "chain.yaml")
    with pytest.raises(gdln.GraphSpecError, match="format 'json': dump writes one of yaml"):
        dump(problem, format="json")
    with pytest.raises(gdln.GraphSpecError, match="unknown format 'toml'"):
        parse("nodes: []", format="toml")
    graph = nx.DiGraph()
    graph.add_node("x", size=2)
    graph.add_node("y", size=1)
    graph.add_edge("x", "y")
    node_link = __import__("json").dumps(nx.node_link_data(graph, edges="links"))
    parsed = parse(node_link, format="json", source=str(tmp_path / "g.json"))
    assert dict(parsed.graph.nodes(data="size")) == {"x": 2, "y": 1}
    graphml = "\n".join(nx.generate_graphml(graph))
    assert list(parse(graphml, format="graphml", source="g.graphml").graph.edges) == [("x", "y")]


def test_a_file_with_a_simulate_section_loads() -> None:
    """The documented ``simulate:`` section (refused as an unknown key before this test)."""
    text = (GRAPHS / "chain.yaml").read_text() + "simulate: {seeds: 3, init_scale: 1/4}\n"
    problem = parse(text, source="chain.yaml")
    assert (problem.settings.seeds, problem.settings.init_scale) == (3, 0.25)
    assert {"seeds", "init_scale"} <= problem.settings.written


def test_parse_is_bounded_as_load_is() -> None:
    limits = gdln.graphfile.Limits(file_bytes=64)
    with pytest.raises(gdln.GraphSpecError, match="file_bytes"):
        parse("name: " + "a" * 100, limits=limits)


# ------------------------------------------------------ hand-written edge cases, statistics
EDGE_CASES = [
    """name: edge
description: unicode, per-edge b0, irrational fixed values, a symbol, float decimals
params: {k: 2, r: sqrt(3)/2, neg: -7/3}
symbols: [s]
nodes:
  - {id: x, size: 2}
  - {id: h, size: 2, gated: true}
  - {id: y, size: 2}
edges:
  - {source: x, target: h}
  - {source: h, target: y, fixed: sqrt(2)*s}
  - {source: x, target: y, gated: true}
datasets:
  d:
    examples:
      a: [[1, -1/3], [0.1, 2]]
      b: [[r, neg], [1e-3, 0]]
    weights: [1, 3]
task:
  contexts:
    - {label: "ä", probability: s, dataset: d, inputs: {x: a}, targets: {y: b},
       gates: {h: 1/2, x->y: 1}}
    - {label: zwei, probability: 1 - s, dataset: d, inputs: {x: a}, targets: {y: b},
       active: [h]}
  random_gates:
    - {item: h, p: s/2}
solve: {b0: {x->h: 1/10, h->y: 2, x->y: 0.25}, t_max: 5*k, route: contexts}
simulate: {seeds: 2}
""",
    """name: 'null'
params: {mode: "'abc'", big: 12345678901234567890123, tiny: 1e-300}
nodes: [{id: 'yes', size: 1}, {id: '1', size: 1, activation: relu}, {id: 'a b', size: 1}]
edges: [{source: 'yes', target: '1'}, {source: '1', target: 'a b', fixed: -1}]
""",
]


@pytest.mark.parametrize(
    ("text", "params"),
    [(EDGE_CASES[0], {"s": "1/3"}), (EDGE_CASES[1], None)],
    ids=["symbol bound", "quoting"],
)
def test_hand_written_edge_cases_read_back(text: str, params: dict[str, str] | None) -> None:
    original = parse(text, source="edge.yaml", params=params)
    dumped = dump(original)
    back = parse(dumped, source="edge.yaml")
    assert_same_problem(original, back)
    assert dump(back) == dumped
    symbolic = parse(text, source="edge.yaml")  # s kept a symbol: text and settings only
    assert dump(parse(dump(symbolic), source="edge.yaml")) == dump(symbolic)
    if original.task is not None:
        assert back.settings.b0 == {"x->h": Fraction(1, 10), "h->y": 2, "x->y": Fraction(1, 4)}
        assert back.params["r"] == sp.sqrt(3) / 2  # exact, not a float
        assert back.task.datasets["d"].examples["a"][1, 0] == sp.Rational(1, 10)  # type: ignore[index]


def _statistics(problem: gdln.Problem) -> gdln.PathStatistics:
    assert problem.task is not None
    return gdln.path_statistics(problem.graph, problem.task)


@pytest.mark.parametrize(
    ("name", "params"),
    [(n, SMALL.get(n)) for n in SHIPPED if n != "resnet_sd"] + [("resnet_sd", {"L": "3"})],
)
def test_exact_path_statistics_of_the_dumped_file_equal_the_originals(
    name: str, params: dict[str, str] | None
) -> None:
    """Eqs. (5)-(6) of the paper, exact (sympy), computed from both problems: the same paths
    and the same matrices entry by entry; no value became a float on the way."""
    original = gdln.load(GRAPHS / f"{name}.yaml", params=params)
    first = _statistics(original)
    second = _statistics(parse(dump(original), source=original.source))
    assert first.exact and second.exact
    assert second.paths == first.paths
    assert second.input_output == first.input_output
    assert second.input == first.input


def test_exact_path_statistics_of_a_symbolic_edge_case() -> None:
    original = parse(EDGE_CASES[0], source="edge.yaml")
    first, second = _statistics(original), _statistics(parse(dump(original), source="e.yaml"))
    assert second.exact and second.paths == first.paths
    for key, m in first.input_output.items():
        assert sp.simplify(second.input_output[key] - m) == sp.zeros(*m.shape)
    for key, m in first.input.items():
        assert sp.simplify(second.input[key] - m) == sp.zeros(*m.shape)


@pytest.mark.parametrize(
    ("text", "fmt"),
    [("nodes: [", "yaml"), ("- 1\n- 2\n", "yaml"), ("{", "json"), ("<graphml", "graphml")],
)
def test_parse_errors_are_one_line(text: str, fmt: str) -> None:
    with pytest.raises(gdln.GraphSpecError) as caught:
        parse(text, format=fmt, source="bad.yaml")
    message = str(caught.value)
    assert "\n" not in message and len(message) <= 300 and "bad.yaml" in message


def test_a_schedule_read_from_a_file_survives_and_one_made_in_python_is_refused() -> None:
    import dataclasses

    problem = gdln.load(GRAPHS / "context.yaml")
    assert problem.schedule is not None
    again = parse(dump(problem), source="again.yaml")
    assert again.schedule == problem.schedule  # the phases: contexts, probabilities, durations
    made = dataclasses.replace(problem, schedule=gdln.task.blocked(["context0", "context1"], 5.0))
    with pytest.raises(gdln.GraphSpecError, match="schedule") as refused:
        dump(made)
    assert "\n" not in str(refused.value) and len(str(refused.value)) <= 300
