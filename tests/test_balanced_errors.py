"""What the λ-balanced solution refuses, each in one line naming the pathway, edge or value."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import load
from test_balanced import dense_problem

import gdln
from gdln.balanced import BalancedSpecError, NotBalancedError


def _yaml(folder: Path, name: str, text: str) -> gdln.Problem:
    path = folder / f"{name}.yaml"
    path.write_text(text)
    return gdln.load(path)


def test_an_unbalanced_start_is_refused_with_the_norm_of_lambda_minus_lambda_i(
    tmp_path: Path,
) -> None:
    problem = dense_problem(tmp_path, 3, 3, 3)
    rng = np.random.default_rng(0)
    weights = {"x->h": rng.normal(size=(3, 3)), "h->y": rng.normal(size=(3, 3))}
    W1, W2 = weights["x->h"], weights["h->y"]
    lam_matrix = W2.T @ W2 - W1 @ W1.T
    lam = np.trace(lam_matrix) / 3
    residual = np.linalg.norm(lam_matrix - lam * np.eye(3))
    with pytest.raises(
        NotBalancedError, match=r"x->h->y: the start is not λ-balanced: \|Λ - λI\| = "
    ) as info:
        gdln.solve_balanced(problem, weights, t_max=1.0)
    assert f"{residual:.3g}" in str(info.value) and "\n" not in str(info.value)
    assert info.value.residual == pytest.approx(residual)
    assert info.value.lam == pytest.approx(lam)
    assert not gdln.balanced.measure_balance(problem, weights)["x->h->y"].balanced()


@pytest.mark.parametrize(
    ("name", "params", "match"),
    [
        (
            "chain",
            {},
            r"pathway x->h1->h2->y has 3 edge\(s\); the λ-balanced solution covers two-layer",
        ),
        ("race", {"M": 2, "P": 1}, r"has 3 edge\(s\)"),
        (
            "resnet_sd",
            {"L": 2},
            r"random gates .*: the λ-balanced solution covers deterministic gates",
        ),
    ],
)
def test_graphs_outside_the_solution_are_refused(
    name: str, params: dict[str, object], match: str
) -> None:
    problem = load(name, **params)
    with pytest.raises(BalancedSpecError, match=match):
        gdln.balanced.balanced_pathways(problem)


def test_pathways_that_share_an_edge_are_refused(tmp_path: Path) -> None:
    problem = _yaml(
        tmp_path,
        "shared",
        "nodes: [{id: x0, size: 2}, {id: x1, size: 2}, {id: h, size: 2}, {id: y, size: 1}]\n"
        "edges: [{source: x0, target: h, gated: true}, {source: x1, target: h, gated: true},"
        " {source: h, target: y}]\n"
        "datasets: {d: {examples: {a: [[1, 0], [0, 1]], b: [[1], [0]]}}}\n"
        "task: {contexts: [{probability: 1/2, active: [x0->h], dataset: d, inputs: {x0: a}, targets: {y: b}},"
        " {probability: 1/2, active: [x1->h], dataset: d, inputs: {x1: a}, targets: {y: b}}]}\n",
    )
    with pytest.raises(BalancedSpecError, match=r"pathways x0->h->y and x1->h->y share edge h->y"):
        gdln.solve_balanced(problem, {}, t_max=1.0)


def test_co_active_pathways_into_one_output_are_refused(tmp_path: Path) -> None:
    problem = _yaml(
        tmp_path,
        "coactive",
        "nodes: [{id: x, size: 2}, {id: a, size: 2}, {id: b, size: 2}, {id: y, size: 1}]\n"
        "edges: [{source: x, target: a}, {source: x, target: b}, {source: a, target: y},"
        " {source: b, target: y}]\n"
        "task: {examples: [{inputs: {x: [1, 0]}, targets: {y: [1]}},"
        " {inputs: {x: [0, 1]}, targets: {y: [0]}}]}\n",
    )
    with pytest.raises(
        BalancedSpecError, match=r"pathways x->[ab]->y and x->[ab]->y are on together into output y"
    ):
        gdln.balanced_weights(problem, lam=0.0)


def test_a_fixed_edge_on_a_pathway_is_refused(tmp_path: Path) -> None:
    problem = _yaml(
        tmp_path,
        "fixed",
        "nodes: [{id: x, size: 2}, {id: h, size: 2}, {id: y, size: 2}]\n"
        "edges: [{source: x, target: h, fixed: 1}, {source: h, target: y}]\n"
        "task: {examples: [{inputs: {x: [1, 0]}, targets: {y: [1, 0]}}]}\n",
    )
    with pytest.raises(
        BalancedSpecError, match=r"pathway x->h->y: edge x->h is fixed \(untrained\)"
    ):
        gdln.balanced_weights(problem, lam=0.0)


def test_inputs_that_are_not_whitened_are_refused(tmp_path: Path) -> None:
    problem = _yaml(
        tmp_path,
        "correlated",
        "nodes: [{id: x, size: 2}, {id: h, size: 2}, {id: y, size: 1}]\n"
        "edges: [{source: x, target: h}, {source: h, target: y}]\n"
        "task: {examples: [{inputs: {x: [1, 0]}, targets: {y: [1]}},"
        " {inputs: {x: [1, 1]}, targets: {y: [0]}}]}\n",
    )
    with pytest.raises(
        BalancedSpecError, match=r"x->h->y: input statistics Σx\(p,p\) have eigenvalues .*c·I"
    ):
        gdln.solve_balanced(problem, {}, t_max=1.0)


def test_first_layer_weights_off_the_inputs_span_are_refused() -> None:
    """XoR's pathways see rank-one inputs (Eq. 19): W1 must vanish on the orthogonal part."""
    problem = load("xor", hidden=1)
    weights = gdln.balanced_weights(problem, lam=0.0, scale=0.2)
    weights[("x", "h2")] = weights[("x", "h2")] + np.array([[0.1, 0.1]])  # along [1, 1]
    with pytest.raises(
        BalancedSpecError, match=r"pathway x->h2->y: W1 acts on inputs the pathway never sees"
    ):
        gdln.solve_balanced(problem, weights, t_max=1.0)


@pytest.mark.parametrize(
    ("weights", "match"),
    [
        ({"x->z": np.zeros((3, 3))}, r"weights: 'x->z' is not an edge of the graph"),
        (
            {"x->h": np.zeros((3, 2))},
            r"weights\['x->h'\]: expected shape \(3, 3\) \(\|target\|, \|source\|\), got \(3, 2\)",
        ),
        ({"x->h": np.full((3, 3), np.nan)}, r"weights\['x->h'\]: holds non-finite values"),
        ({"x->h": "abc"}, r"weights\['x->h'\]: expected a float array"),
        ({"x->h": np.zeros((3, 3))}, r"weights: no array for edge h->y of pathway x->h->y"),
        ([1, 2], r"weights: expected a mapping from edge to array, got list"),
    ],
)
def test_malformed_weights_are_refused(weights: object, match: str, tmp_path: Path) -> None:
    problem = dense_problem(tmp_path, 3, 3, 3)
    with pytest.raises(BalancedSpecError, match=match):
        gdln.solve_balanced(problem, weights, t_max=1.0)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("sizes", "lam", "match"),
    [
        ((5, 3, 2), 1.0, r"hidden width 3 exceeds the output size 2 of y; .* needs N_h <= \|y\|"),
        ((2, 3, 5), -1.0, r"hidden width 3 exceeds the input span size 2 of x; .* needs N_h <= r"),
    ],
)
def test_a_hidden_layer_too_wide_for_lambda_is_refused(
    sizes: tuple[int, int, int], lam: float, match: str, tmp_path: Path
) -> None:
    problem = dense_problem(tmp_path, *sizes)
    with pytest.raises(BalancedSpecError, match=match):
        gdln.balanced_weights(problem, lam=lam)
    gdln.balanced_weights(problem, lam=0.0)  # λ = 0 fits any width
    gdln.balanced_weights(problem, lam=-lam)  # and the other sign fits this one


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda p, w: gdln.solve_balanced(p, w, t_max=0.0),
            r"t_max must be a positive number, got 0.0",
        ),
        (
            lambda p, w: gdln.solve_balanced(p, w, t_max=1.0, points=1),
            r"points must be an integer in \[2, ",
        ),
        (lambda p, w: gdln.balanced_weights(p, lam=float("nan")), r"lam: expected a finite number"),
        (
            lambda p, w: gdln.balanced_weights(p, lam=0.0, scale=-1.0),
            r"scale: expected a finite number >= 0.0, got -1.0",
        ),
        (
            lambda p, w: gdln.balanced_weights(p, lam=0.0, alignment=2.0),
            r"alignment: expected a number in \[0, 1\], got 2.0",
        ),
    ],
)
def test_bad_settings_are_refused(call, match: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    problem = dense_problem(tmp_path, 3, 3, 3)
    weights = gdln.balanced_weights(problem, lam=0.0)
    with pytest.raises(gdln.GdlnError, match=match):
        call(problem, weights)
