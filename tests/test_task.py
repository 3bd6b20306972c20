"""Tasks: datasets and their second moments, contexts, the builtin datasets, examples.

Every moment is checked against numpy on the raw examples or against a closed form worked
out by hand (the hierarchy's singular values, the whitened dataset's diagonal maps).
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import sympy as sp
from helpers import GRAPHS, RTOL_EXACT, load

import gdln
from gdln.task import Context, Dataset, ExampleSet, Task
from gdln.task._builtin import BUILTIN_DATASETS, hierarchy_dataset, whitened_dataset
from gdln.task._task import as_float

RNG = np.random.default_rng(0)


def numpy_moment(a: np.ndarray, b: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    """<a b^T> over the rows, weighted by w (normalised), written out as a sum."""
    w = np.full(len(a), 1 / len(a)) if w is None else np.asarray(w, float) / np.sum(w)
    return sum(wk * np.outer(ak, bk) for wk, ak, bk in zip(w, a, b, strict=True))


def test_float_moments_match_numpy_on_the_examples() -> None:
    x, y, w = RNG.normal(size=(6, 3)), RNG.normal(size=(6, 2)), RNG.uniform(0.1, 1, 6)
    for weights in (None, w):
        data = Dataset("d", {"x": 3, "y": 2}, examples={"x": x, "y": y}, weights=weights)
        assert not data.exact
        for a, b in (("x", "x"), ("y", "x"), ("x", "y"), ("y", "y")):
            arrays = {"x": x, "y": y}
            expected = numpy_moment(arrays[a], arrays[b], weights)
            np.testing.assert_allclose(data.moment(a, b), expected, rtol=RTOL_EXACT)


def test_exact_moments_are_exact_and_match_numpy() -> None:
    x = sp.ImmutableMatrix([[1, 2], [0, sp.Rational(1, 3)], [-1, 1]])
    y = sp.ImmutableMatrix([[1], [2], [3]])
    w = sp.ImmutableMatrix([1, 2, 3])
    data = Dataset("d", {"x": 2, "y": 1}, examples={"x": x, "y": y}, weights=w)
    assert data.exact
    got = data.moment("y", "x")
    assert isinstance(got, sp.MatrixBase)
    xf, yf = np.array(x, dtype=float), np.array(y, dtype=float)
    expected = numpy_moment(yf, xf, np.array(w, dtype=float).ravel())
    np.testing.assert_allclose(np.array(got, dtype=float), expected, rtol=RTOL_EXACT)
    # exactly: sum_k w_k y_k x_k^T / sum w
    by_hand = sum((w[k] * y[k, :].T * x[k, :] for k in range(3)), sp.zeros(1, 2)) / 6
    assert sp.simplify(got - by_hand) == sp.zeros(1, 2)


def test_given_moments_transpose_and_realize() -> None:
    sxx = sp.ImmutableMatrix([[2, 1], [1, 2]]) / 3
    syx = sp.ImmutableMatrix([[1, 0]]) / 3
    syy = sp.ImmutableMatrix([[1]]) / 3
    moments = {("x", "x"): sxx, ("y", "x"): syx, ("y", "y"): syy}
    data = Dataset("m", {"x": 2, "y": 1}, moments_given=moments)
    assert data.moment("x", "y") == syx.T and data.has_moment("x", "y")
    arrays, w = data.realize()
    assert np.isclose(w.sum(), 1)
    for (a, b), value in moments.items():  # the realised rows have the given moments
        got = numpy_moment(arrays[a], arrays[b], w)
        np.testing.assert_allclose(got, np.array(value, dtype=float), atol=1e-12)


def test_dataset_validation() -> None:
    x = np.eye(2)
    with pytest.raises(ValueError, match="give exactly one of examples or moments"):
        Dataset("d", {"x": 2})
    with pytest.raises(ValueError, match="give exactly one of examples or moments"):
        Dataset("d", {"x": 2}, examples={"x": x}, moments_given={("x", "x"): x})
    with pytest.raises(ValueError, match="fields have different example counts"):
        Dataset("d", {"x": 2, "y": 1}, examples={"x": x, "y": np.ones((3, 1))})
    partial = Dataset("d", {"x": 2, "y": 1}, moments_given={("x", "x"): x})
    with pytest.raises(gdln.TaskSpecError, match=r"gives no moment <x y\^T>: add it"):
        partial.moment("x", "y")
    with pytest.raises(ValueError, match="is given by moments"):
        _ = partial.n_examples


def test_dataset_weights_and_rows_are_validated() -> None:
    """Weights that cannot be normalised (Eq. 1's average needs a positive total) or that
    do not match the rows are refused when the dataset is made, float and exact alike."""
    x = np.eye(2)
    with pytest.raises(ValueError, match="'d': no examples"):
        Dataset("d", {"x": 2}, examples={"x": np.zeros((0, 2))})
    for weights in (np.array([1.0, -1.0]), sp.ImmutableMatrix([1, -1])):
        with pytest.raises(ValueError, match="'d': weights must be non-negative"):
            Dataset("d", {"x": 2}, examples={"x": x}, weights=weights)
    for weights in (np.zeros(2), sp.ImmutableMatrix([0, 0])):
        with pytest.raises(ValueError, match="'d': the weights sum to 0"):
            Dataset("d", {"x": 2}, examples={"x": x}, weights=weights)
    for weights in (np.ones(3), np.ones((2, 2)), sp.ImmutableMatrix([1, 2, 3])):
        with pytest.raises(ValueError, match=r"'d': \d weights for 2 examples"):
            Dataset("d", {"x": 2}, examples={"x": x}, weights=weights)
    assert Dataset("d", {"x": 2}, examples={"x": x}, weights=np.array([[1.0], [0.0]]))


def test_builtin_table_counts_what_it_builds() -> None:
    """Each builtin's ``values`` is the number of cells its example matrices hold."""
    for settings in ({}, {"size": 1}, {"size": 5}):
        for name, builtin in BUILTIN_DATASETS.items():
            if (name == "whitened") != bool(settings):
                continue
            data = builtin("d", **settings)
            assert data.examples is not None
            cells = sum(m.rows * m.cols for m in data.examples.values())
            assert builtin.values(**settings) == cells
    with pytest.raises(ValueError, match="size must be a positive integer"):
        BUILTIN_DATASETS["whitened"].values(size=0)


def test_unbound_symbols_cannot_become_floats() -> None:
    a = sp.Symbol("a", positive=True)
    with pytest.raises(gdln.TaskSpecError, match=r"symbol 'a' .*--param a=VALUE"):
        as_float(sp.ImmutableMatrix([[a]]))


# Fig. 4c of Saxe et al. 2022: four items, seven features (root, two branches, four leaves)
FIG_4C = [
    [6, 4, 0, 3, 0, 0, 0],
    [6, 4, 0, 0, 3, 0, 0],
    [6, 0, 4, 0, 0, 3, 0],
    [6, 0, 4, 0, 0, 0, 3],
]


def test_hierarchy_dataset_has_the_hierarchys_singular_values() -> None:
    r"""One-hot items, so Sigma^x = I/4 and Sigma^yx = Y^T/4.

    Y Y^T has the block form [[61, 52, 36, 36], ...]: eigenvalues 185 (all items), 41 (the
    two branches) and 9, 9 (the leaves), so Sigma^yx has singular values
    sqrt(185)/4, sqrt(41)/4, 3/4, 3/4.
    """
    data = BUILTIN_DATASETS["hierarchy"]("base")
    assert data.name == "base" and data.exact and dict(data.fields) == {"x": 4, "y": 7}
    assert data.moment("x", "x") == sp.eye(4) / 4
    syx = data.moment("y", "x")
    np.testing.assert_allclose(np.array(syx, dtype=float), np.array(FIG_4C).T / 4)
    expected = sorted([sp.sqrt(185) / 4, sp.sqrt(41) / 4, sp.Rational(3, 4), sp.Rational(3, 4)])
    got = sorted(sp.sqrt(e) for e in (syx.T * syx).eigenvals(multiple=True))
    assert all(sp.simplify(g - e) == 0 for g, e in zip(got, expected, strict=True))


@pytest.mark.parametrize("n", [1, 3, 8])
def test_whitened_dataset_closed_form(n: int) -> None:
    r"""Sigma^x = I/n and Sigma^yx = A/n with A = diag(1, (n-1)/n, ..., 1/n) (README)."""
    data = whitened_dataset("w", size=n)
    assert data.moment("x", "x") == sp.eye(n) / n
    a = sp.diag(*[sp.Rational(n - k, n) for k in range(n)])
    syx = data.moment("y", "x")
    assert syx == a / n and syx == syx.T  # symmetric: U = V


@pytest.mark.parametrize("size", [0, -2, 1.5, True, "3"])
def test_whitened_dataset_needs_a_positive_integer_size(size: object) -> None:
    with pytest.raises(ValueError, match="size must be a positive integer"):
        whitened_dataset(size=size)  # type: ignore[arg-type]


def test_hierarchy_default_name() -> None:
    assert hierarchy_dataset().name == "hierarchy"


def two_context_task(**extra: object) -> tuple[nx.DiGraph, Task]:
    """x -> h -> y with a gated edge x->h; context 0 uses it, context 1 does not."""
    graph = nx.DiGraph()
    for v, size in (("x", 2), ("h", 2), ("y", 1)):
        graph.add_node(v, size=size, gated=False)
    graph.add_edge("x", "h", gated=True)
    graph.add_edge("h", "y", gated=False)
    data = Dataset(
        "d",
        {"a": 2, "b": 1},
        examples={"a": np.eye(2), "b": np.array([[1.0], [2.0]])},
        weights=np.array([1.0, 3.0]),
    )
    contexts = (
        Context("on", sp.Rational(1, 3), {("x", "h"): 1}, "d", {"x": "a"}, {"y": "b"}),
        Context("off", sp.Rational(2, 3), {}, "d", {"x": "a"}, {}),
    )
    return graph, Task(contexts=contexts, datasets={"d": data}, **extra)  # type: ignore[arg-type]


def test_task_examples_weigh_contexts_by_probability() -> None:
    graph, task = two_context_task()
    ex = task.examples(graph)
    assert isinstance(ex, ExampleSet) and len(ex) == 4
    assert np.isclose(ex.weights.sum(), 1)
    mass = np.bincount(ex.context, weights=ex.weights)
    np.testing.assert_allclose(mass, [1 / 3, 2 / 3], rtol=RTOL_EXACT)
    np.testing.assert_array_equal(ex.gates[("x", "h")], [1, 1, 0, 0])
    np.testing.assert_array_equal(ex.targets["y"].ravel(), [1, 2, 0, 0])  # unbound: 0
    # the per-context loss of the zero output: 1/2 <|y|^2>_c, by hand
    np.testing.assert_allclose(ex.zero_output_loss(), [0.5 * (1 + 3 * 4) / 4, 0.0])


def test_context_gate_values() -> None:
    c = Context("c", 1, {"h": 2}, "d", {}, {})
    assert c.gate("h", True) == 2 and c.gate("g", True) == 0 and c.gate("g", False) == 1


def test_random_gates_default_to_on_in_every_context() -> None:
    graph, task = two_context_task(random_gates={("x", "h"): sp.Rational(1, 2)})
    assert [c.gates[("x", "h")] for c in task.contexts] == [1, 1]
    assert task.examples(graph).random_gates == {("x", "h"): sp.Rational(1, 2)}


def test_task_validation() -> None:
    _, task = two_context_task()
    with pytest.raises(ValueError, match=r"context 'on' names unknown dataset 'd'"):
        Task(contexts=task.contexts, datasets={})
    with pytest.raises(ValueError, match=r"random gate 'h': probability 3/2 is outside"):
        Task(contexts=task.contexts, datasets=task.datasets, random_gates={"h": sp.Rational(3, 2)})


@pytest.mark.parametrize("name", sorted(p.stem for p in GRAPHS.glob("*.yaml")))
def test_shipped_task_probabilities_sum_to_one(name: str) -> None:
    task = load(name).task
    assert sp.nsimplify(sum(c.probability for c in task.contexts)) == 1
    assert all(0 <= c.probability <= 1 for c in task.contexts)


def test_example_set_validation() -> None:
    w = np.full(2, 0.5)
    with pytest.raises(ValueError, match=r"inputs\['x'\] must have shape \(n=2, size\)"):
        ExampleSet({"x": np.ones(2)}, {}, {}, w, np.zeros(2, int))
    with pytest.raises(ValueError, match=r"gates\['h'\] must have shape \(2,\)"):
        ExampleSet({}, {}, {"h": np.ones(3)}, w, np.zeros(2, int))
    with pytest.raises(ValueError, match=r"context must have shape \(2,\)"):
        ExampleSet({}, {}, {}, w, np.zeros(3, int))
