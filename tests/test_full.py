"""The full matrix dynamics (Eqs. 3-4) against torch autograd, from arbitrary weights."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import NOT_DIAGONALIZABLE, RTOL_EXACT, full_loss_and_gradient, load

import gdln


def random_weights(problem: gdln.Problem, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    g = problem.graph
    return {
        (u, v): 0.4 * rng.standard_normal((g.nodes[v]["size"], g.nodes[u]["size"]))
        for u, v in g.edges
    }


@pytest.mark.parametrize("name", ["crosspath", "xor", "chain", "context"])
def test_eqs_3_4_equal_minus_autograd_gradient(name: str) -> None:
    problem = load(name)
    weights = random_weights(problem, 7)
    _, grad = full_loss_and_gradient(problem, weights)
    flow = gdln.full_flow(problem, weights)
    scale = max(np.abs(g).max() for g in grad.values())
    for e in weights:
        np.testing.assert_allclose(flow[e], -grad[e], rtol=RTOL_EXACT, atol=RTOL_EXACT * scale)


def test_full_dynamics_work_without_common_bases(tmp_path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(NOT_DIAGONALIZABLE)
    problem = gdln.load(path)
    weights = random_weights(problem, 1)
    _, grad = full_loss_and_gradient(problem, weights)
    flow = gdln.full_flow(problem, weights)
    for e in weights:
        np.testing.assert_allclose(flow[e], -grad[e], rtol=RTOL_EXACT, atol=1e-14)
    trajectory = gdln.solve_full(problem, weights, t_max=5, n_points=20)
    assert np.all(np.diff(trajectory.loss) <= 1e-10) and trajectory.loss[-1] < trajectory.loss[0]


def test_full_dynamics_from_decoupled_weights_match_the_reduction() -> None:
    problem = load("chain")
    reduction = gdln.reduce(problem, lump="none", init=0.2)
    full = gdln.solve_full(problem, reduction.decoupled_weights(seed=0), t_max=6, n_points=7)
    reduced = gdln.solve(reduction, t_max=6, n_points=7)
    np.testing.assert_allclose(full.loss, reduced.loss, rtol=1e-6)
