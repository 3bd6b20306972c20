"""Path statistics (Eqs. 5-6) against direct averages over the raw examples."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from helpers import RTOL_EXACT, load

import gdln


def direct(problem: gdln.Problem, j: gdln.Path, p: gdln.Path | None) -> np.ndarray:
    """<g_p y x^T> (p None: Sigma_yx(j)) or <g_j x x^T g_p> straight from the examples."""
    ex = problem.examples()
    graph = problem.graph

    def gate(path: gdln.Path) -> np.ndarray:
        g = np.ones(len(ex))
        for e in path.edges:
            g = g * ex.gates.get(e, 1.0)
        for v in path.nodes[1:]:
            g = g * ex.gates.get(v, 1.0)
        return g

    w = ex.weights
    if p is None:
        y, x = ex.targets[j.target], ex.inputs[j.source]
        return np.einsum("n,ni,nj->ij", w * gate(j), y, x)
    del graph
    return np.einsum("n,ni,nj->ij", w * gate(j) * gate(p), ex.inputs[j.source], ex.inputs[p.source])


@pytest.mark.parametrize("name", ["xor", "crosspath", "routing", "context"])
def test_statistics_equal_direct_averages(name: str) -> None:
    problem = load(name, **({"M": 3, "K": 2} if name == "routing" else {}))
    stats = gdln.path_statistics(problem.graph, problem.task)
    for path, value in stats.input_output.items():
        np.testing.assert_allclose(
            np.array(value, dtype=float), direct(problem, path, None), rtol=RTOL_EXACT, atol=1e-14
        )
    for j in stats.paths:
        for p in stats.paths:
            if j.target == p.target:
                got = np.array(stats.input_correlation(j, p), dtype=float)
                np.testing.assert_allclose(got, direct(problem, j, p), rtol=RTOL_EXACT, atol=1e-14)


def test_xor_statistics_are_eqs_18_19() -> None:
    stats = gdln.path_statistics(*(lambda p: (p.graph, p.task))(load("xor")))
    path = gdln.Path(("x", "h0", "y"))
    assert stats.exact
    assert stats.input_output_correlation(path) == sp.Matrix([[1, 1]]) / 4  # Eq. (18)
    assert stats.input_correlation(path, path) == sp.Matrix([[1, 1], [1, 1]]) / 4  # Eq. (19)
    assert stats.input_correlation(path, gdln.Path(("x", "h1", "y"))) == sp.zeros(2, 2)


def test_context_statistics_are_eqs_24_to_29() -> None:
    one = load("context", pathways=1)
    s1 = gdln.path_statistics(one.graph, one.task)
    (path,) = s1.paths
    assert s1.input_output_correlation(path) == sp.Matrix([[1, 1]]) / 6  # Eq. (24)
    assert s1.input_correlation(path, path) == sp.eye(2) / 3  # Eq. (25)
    two = load("context", pathways=2)
    s2 = gdln.path_statistics(two.graph, two.task)
    p1, p2 = gdln.Path(("x", "h0", "y")), gdln.Path(("x", "h1", "y"))
    assert s2.input_output_correlation(p1) == sp.Matrix([[1, 0]]) / 6  # Eq. (26)
    assert s2.input_output_correlation(p2) == sp.Matrix([[0, 1]]) / 6  # Eq. (27)
    assert s2.input_correlation(p1, p1) == sp.eye(2) / 6  # Eq. (28)
    assert s2.input_correlation(p1, p2) == sp.zeros(2, 2)  # Eq. (29)


def test_routing_statistics_are_eqs_11_12() -> None:
    problem = load("routing", M=4, K=3)
    stats = gdln.path_statistics(problem.graph, problem.task)
    base = problem.task.datasets["base"]
    assert len(stats.input) == len(stats.paths) == 12  # only j = p are ever co-active
    for path in stats.paths:
        assert stats.input_output_correlation(path) == base.moment("y", "x") / 12  # Eq. (11)
        assert stats.input_correlation(path, path) == base.moment("x", "x") / 12  # Eq. (12)
