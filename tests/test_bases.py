"""Common bases (Eqs. 7-8): exact when the data are exact, also with square roots."""

from __future__ import annotations

import json

import numpy as np
import pytest
import sympy as sp
from helpers import RTOL_EXACT, full_loss_and_gradient, load
from hypothesis import given, settings
from hypothesis import strategies as st

import gdln

# A depth-2 network with whitened inputs whose targets (1, 3) and (2, 4) have singular
# vectors that are not rational directions: the singular values are sqrt(15/4 +- sqrt(221)/4).
TWO_BY_TWO = """
nodes: [{id: x, size: 2}, {id: h, size: 2}, {id: y, size: 2}]
edges: [{source: x, target: h}, {source: h, target: y}]
task:
  examples:
    - {inputs: {x: [1, 0]}, targets: {y: [1, 3]}}
    - {inputs: {x: [0, 1]}, targets: {y: [2, 4]}}
"""


@pytest.fixture
def two_by_two(tmp_path) -> gdln.Problem:
    path = tmp_path / "two.yaml"
    path.write_text(TWO_BY_TWO)
    return gdln.load(path)


def test_singular_values_with_square_roots_are_exact(two_by_two) -> None:
    reduction = gdln.reduce(two_by_two)
    (system,) = reduction.systems
    values = {str(k): v for k, v in system.symbols.items()}
    sigma_yx = sp.Matrix([[1, 3], [2, 4]]).T / 2  # <y x^T> over the two examples
    expected = sorted(sigma_yx.singular_values(), key=lambda v: -float(v))
    assert len(values["s"]) == 2
    for got, want in zip(values["s"], expected, strict=True):
        assert not got.atoms(sp.Float)
        assert sp.simplify(got - want) == 0
    assert all(v == sp.Rational(1, 2) for v in values["d"])


def test_exact_bases_diagonalise_the_statistics_symbolically(two_by_two) -> None:
    reduction = gdln.reduce(two_by_two)
    (modes,) = reduction.modes
    assert modes.exact_vectors is not None and modes.exact_directions is not None
    out, inp = ("out", "examples0", "y"), ("in", "examples0", "x")
    sigma_yx = sp.Matrix([[1, 2], [3, 4]]) / 2
    # directions (entries a + b sqrt(221)): U^T Sigma_yx V is diagonal, exactly
    u = sp.Matrix.hstack(*[m[out] for m in modes.exact_directions])
    v = sp.Matrix.hstack(*[m[inp] for m in modes.exact_directions])
    assert sp.expand((u.T * sigma_yx * v)[0, 1]) == 0 == sp.expand((u.T * sigma_yx * v)[1, 0])
    assert sp.expand((u.T * u)[0, 1]) == 0 == sp.expand((v.T * v)[0, 1])
    # unit vectors: along the directions and orthonormal (minimal polynomial of an
    # algebraic number is y exactly when it is 0)
    y = sp.Dummy("y")
    for space, d in ((out, u), (inp, v)):
        basis = sp.Matrix.hstack(*[m[space] for m in modes.exact_vectors])
        for x in basis.T * basis - sp.eye(2):
            assert sp.minimal_polynomial(x, y) == y
        for k in range(2):
            assert float((basis[:, k].T * d[:, k])[0, 0]) > 0
            cross = basis[0, k] * d[1, k] - basis[1, k] * d[0, k]
            assert sp.minimal_polynomial(cross, y) == y


def test_exact_reduction_still_equals_autograd_of_the_full_network(two_by_two) -> None:
    reduction = gdln.reduce(two_by_two, b0=0.3)
    loss, _ = full_loss_and_gradient(two_by_two, reduction.decoupled_weights(seed=1))
    (system,) = reduction.systems
    fn = sp.lambdify(list(system.variables) + list(system.symbols), system.loss, "numpy")
    data = [np.array([float(x) for x in system.symbols[k]]) for k in system.symbols]
    total = float(reduction.constant) + float(np.sum(fn(*[0.3] * len(system.variables), *data)))
    assert loss == pytest.approx(total, rel=RTOL_EXACT)


@pytest.mark.parametrize("name", ["xor", "chain", "routing", "crosspath"])
def test_printed_bases_are_all_exact(name: str) -> None:
    # the dead directions completing a basis are exact too, not float columns beside
    # exact ones
    problem = load(name, **({"M": 3, "K": 2} if name == "routing" else {}))
    data = json.loads(gdln.format_statistics(problem, gdln.reduce(problem), "json"))
    for component in data["components"]:
        assert component["exact"]
        for matrix in component["bases"].values():
            M = sp.Matrix([[sp.sympify(x) for x in row] for row in matrix])
            assert not M.atoms(sp.Float)
            assert sp.simplify(M.T * M - sp.eye(M.cols)) == sp.zeros(M.cols, M.cols)


def test_stats_text_shows_exact_values(two_by_two) -> None:
    text = gdln.format_statistics(two_by_two, gdln.reduce(two_by_two))
    assert "sqrt(26)/4 + sqrt(34)/4" in text and "2.73" not in text


# Inputs x = (2, -1, 0), (-1, -2, 1), (-2, -1, 0) with targets 0, -2, 2: no common bases,
# and the refusal used to print a "relative residual" of 1.62 (a maximum entry of the
# projected statistic over a maximum entry of the statistic, which is not bounded by 1).
SKEWED = """
nodes: [{id: x, size: 3}, {id: h, size: 3}, {id: y, size: 1}]
edges: [{source: x, target: h}, {source: h, target: y}]
task:
  examples:
    - {inputs: {x: [2, -1, 0]}, targets: {y: [0]}}
    - {inputs: {x: [-1, -2, 1]}, targets: {y: [-2]}}
    - {inputs: {x: [-2, -1, 0]}, targets: {y: [2]}}
"""


def test_no_common_bases_residual_is_a_share_in_0_1(tmp_path) -> None:
    path = tmp_path / "skewed.yaml"
    path.write_text(SKEWED)
    with pytest.raises(gdln.NotDiagonalizableError) as info:
        gdln.reduce(gdln.load(path))
    assert 0 < info.value.residual <= 1
    message = str(info.value)
    assert f"relative residual {info.value.residual:.3g}: the largest share of one" in message
    assert "solve/compare take the full-matrix flow" in message


def _off_diagonal_share_by_hand(modes: gdln.Modes, row: str, col: str, matrix: np.ndarray) -> float:
    """||off-diagonal part of U^T B V||_F / ||B||_F in the modes' full bases, written here."""
    U, rows = modes.basis(row)
    V, cols = modes.basis(col)
    P = U.T @ matrix @ V
    off = sum(
        P[i, j] ** 2
        for i in range(P.shape[0])
        for j in range(P.shape[1])
        if rows[i] is None or rows[i] != cols[j]
    )
    return float(np.sqrt(off) / np.linalg.norm(matrix))


@settings(max_examples=60, deadline=None)
@given(
    st.integers(2, 5).flatmap(
        lambda n: st.tuples(
            st.lists(st.integers(-3, 3), min_size=n * n, max_size=n * n),
            st.lists(st.integers(-3, 3), min_size=2 * n, max_size=2 * n),
        )
    )
)
def test_residual_is_bounded_by_one(data: tuple[list[int], list[int]]) -> None:
    # property: whatever the statistics, the reported residual is a share in [0, 1], and
    # it is that of the worst block, computed independently in the bases found
    from gdln.reduction._bases import Block, joint_modes, off_diagonal_share

    xs, ys = data
    n = len(ys) // 2
    X = np.array(xs, dtype=float).reshape(n, n)
    blocks = [
        Block("out", "in", np.array(ys, dtype=float).reshape(2, n), tag="yx"),
        Block("in", "in", X @ X.T, tag="xx"),
    ]
    try:
        modes = joint_modes({"out": 2, "in": n}, blocks, outputs=frozenset({"out"}))
    except gdln.NotDiagonalizableError as err:
        assert 0 < err.residual <= 1
        return
    for b in blocks:
        share = off_diagonal_share(modes, b)
        assert 0 <= share <= 1e-8
        if np.linalg.norm(b.value):
            assert share == pytest.approx(
                _off_diagonal_share_by_hand(modes, b.row, b.col, b.value), abs=1e-12
            )
