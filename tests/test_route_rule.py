r"""One route rule for every command, compare without common bases, compare's theory start.

Issue 33 items 7-9. References written here, independent of the code under test: the
full network's loss and gradient by torch autograd (``helpers.full_loss_and_gradient``),
integrated by scipy's ``solve_ivp`` (gradient flow) or iterated by plain full-batch
gradient descent in numpy.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import GRAPHS, NOT_DIAGONALIZABLE, full_loss_and_gradient, run_cli, write
from scipy.integrate import solve_ivp

import gdln
from gdln.comparison._figures import loss_figure
from gdln.comparison._metrics import Runs

FILE = NOT_DIAGONALIZABLE + "solve: {b0: 1/10, t_max: 4}\n"


def flow_losses(problem: gdln.Problem, weights: dict, times: np.ndarray) -> np.ndarray:
    """tau dW/dt = -dL/dW (Eq. 2) from ``weights``, by solve_ivp on autograd gradients."""
    edges = list(weights)
    shapes = [np.shape(weights[e]) for e in edges]
    cuts = np.cumsum([int(np.prod(s)) for s in shapes])[:-1]

    def unpack(z: np.ndarray) -> dict:
        return {e: p.reshape(s) for e, p, s in zip(edges, np.split(z, cuts), shapes, strict=True)}

    def rhs(_t: float, z: np.ndarray) -> np.ndarray:
        grad = full_loss_and_gradient(problem, unpack(z))[1]
        return -np.concatenate([grad[e].ravel() for e in edges])

    z0 = np.concatenate([np.asarray(weights[e], float).ravel() for e in edges])
    result = solve_ivp(rhs, (0, times[-1]), z0, "DOP853", t_eval=times, rtol=1e-12, atol=1e-14)
    assert result.success
    return np.array([full_loss_and_gradient(problem, unpack(z))[0] for z in result.y.T])


def descent_losses(problem: gdln.Problem, weights: dict, lr: float, steps: list[int]) -> list:
    """Full-batch gradient descent W <- W - lr dL/dW, the loss at the given steps."""
    w = {e: np.array(v, float) for e, v in weights.items()}
    out, done = [], 0
    for target in steps:
        while done < target:
            grad = full_loss_and_gradient(problem, w)[1]
            w = {e: w[e] - lr * grad[e] for e in w}
            done += 1
        out.append(full_loss_and_gradient(problem, w)[0])
    return out


# -- item 8: the route rule -------------------------------------------------------------


def test_solve_takes_the_full_matrix_flow_where_there_are_no_common_bases(tmp_path: Path) -> None:
    """route auto without common bases: the full-matrix flow from the file's random start
    (singular values b0), as an autograd flow from the same weights gives it."""
    problem = gdln.load(write(tmp_path, FILE))
    trajectory = gdln.solve(problem, points=5)
    assert trajectory.meta["route"] == "matrix"
    assert trajectory.meta["route_reason"].startswith("auto: no common bases")
    start = {(u, v): trajectory.weights((u, v))[0] for u, v in problem.graph.edges}
    for w in start.values():
        np.testing.assert_allclose(np.linalg.svd(w, compute_uv=False), 0.1, rtol=1e-12)
    np.testing.assert_allclose(
        trajectory.loss, flow_losses(problem, start, trajectory.t), rtol=1e-8
    )
    # the map and chosen times too: the route no longer refuses times=[...]
    mapped = gdln.solve(problem, dynamics="gd-map", lr=0.5, times=[0.0, 1.0, 3.0])
    np.testing.assert_allclose(
        mapped.loss, descent_losses(problem, start, 0.5, [0, 2, 6]), rtol=1e-10
    )


def test_routes_are_reported_by_their_declared_names(tmp_path: Path, capsys) -> None:
    problem = gdln.load(GRAPHS / "routing.yaml", params={"M": "3", "K": "2"})
    assert gdln.solve(problem, route="contexts", t_max=1, points=3).meta["route"] == "contexts"
    assert gdln.solve(problem, t_max=1, points=3).meta["route"] == "quotient"
    assert gdln.solve(problem, route="moments", t_max=1, points=3).meta["route"] == "moments"
    code, out, _ = run_cli(["derive", str(GRAPHS / "xor.yaml")], capsys)
    assert code == 0 and out.splitlines()[0].startswith("xor: route contexts, lump=")
    path = write(tmp_path, FILE)
    code, out, _ = run_cli(["solve", str(path)], capsys)
    assert code == 0 and "(route: matrix; auto: no common bases" in out.splitlines()[0]
    code, out, err = run_cli(["solve", str(path), "--kernel"], capsys)  # from its weights
    assert code == 0 and "kernel distance S" in out, err
    code, _, err = run_cli(["derive", str(path)], capsys)  # derive is symbolic: it refuses
    assert code == 2 and "solve/compare take the full-matrix flow" in err
    assert len(err.strip()) - len(str(path)) <= 300  # the path is the test folder's


# -- item 7: compare without common bases ------------------------------------------------


def test_compare_without_common_bases_follows_each_seed(tmp_path: Path) -> None:
    """No common bases: compare integrates the full-matrix flow and GD map from each random
    run's own initial weights; each seed's simulation is its map to rounding, and the
    flow and map equal references written here from the same weights."""
    problem = gdln.load(write(tmp_path, FILE))
    result = gdln.compare(
        problem, lr=0.1, t_max=3.0, init_scale=0.5, seeds=2, seed=4, points=4, theory_start="random"
    )
    m = result.metrics
    assert m["route"] == "matrix" and result.decoupled is None
    drawn = gdln.initial_weights(problem.graph, init_scale=0.5, seeds=2, seed=4)
    steps = [round(float(t) / 0.1) for t in result.random.t]
    for s in range(2):
        start = {e: w[s] for e, w in drawn.items()}
        np.testing.assert_allclose(
            result.gd_map.loss[:, s], descent_losses(problem, start, 0.1, steps), rtol=1e-10
        )
        np.testing.assert_allclose(
            result.ode.loss[:, s], flow_losses(problem, start, result.ode.t), rtol=1e-8
        )
        np.testing.assert_allclose(result.random.loss[:, s], result.gd_map.loss[:, s], rtol=1e-10)
    assert m["random_vs_map"] < 1e-10 and len(m["random_vs_ode_per_seed"]) == 2
    assert m["stages"]["analysis"] == "asymptotic"  # the stage times that apply, marked


# -- item 9: compare's theory start --------------------------------------------------------


@pytest.mark.slow
def test_compare_honours_the_files_b0(tmp_path: Path) -> None:
    """late_fusion.yaml writes solve.b0 = 1/1000: the theory starts there (not at the random
    weights' strengths), as the full network's flow from decoupled weights at 1/1000 shows."""
    problem = gdln.load(GRAPHS / "late_fusion.yaml")
    result = gdln.compare(problem, lr=0.05, t_max=2.0, seeds=1, points=5)
    m = result.metrics
    assert m["theory_start"] == "b0" and m["theory_start_from"] == "the file's solve.b0"
    assert set(m["b0"].values()) == {0.001} and m["starts"]["ode"] == "b(0) = 0.001"
    weights = gdln.reduce(problem, lump="none", b0=0.001).decoupled_weights(seed=0)
    np.testing.assert_allclose(
        result.ode.loss, flow_losses(problem, weights, result.ode.t), rtol=1e-7
    )
    labels = [line.get_label() for line in loss_figure(m, _runs(result)).axes[0].lines]
    assert any("from b(0) = 0.001" in label for label in labels)
    # the call's init_scale is nearer than the file's b0: the random weights' strengths
    again = gdln.compare(problem, lr=0.05, t_max=0.1, seeds=1, points=2, init_scale=0.3)
    assert again.metrics["theory_start"] == "random"
    assert again.metrics["theory_start_from"] == "init_scale given for this run"


def _runs(result: gdln.CompareResult) -> Runs:
    return Runs(result.ode, result.gd_map, result.decoupled, result.random)
