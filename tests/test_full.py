"""The full matrix dynamics (Eqs. 3-4) against torch autograd, from arbitrary weights."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from helpers import NOT_DIAGONALIZABLE, RTOL_EXACT, full_loss_and_gradient, load, run_cli, write

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
    trajectory = gdln.solve(problem, route="matrix", weights=weights, t_max=5, points=20)
    assert np.all(np.diff(trajectory.loss) <= 1e-10) and trajectory.loss[-1] < trajectory.loss[0]


def test_full_dynamics_from_decoupled_weights_match_the_reduction() -> None:
    problem = load("chain")
    reduction = gdln.reduce(problem, lump="none", b0=0.2)
    full = gdln.solve(
        problem, route="matrix", weights=reduction.decoupled_weights(seed=0), t_max=6, points=7
    )
    reduced = gdln.solve(reduction, t_max=6, points=7)
    np.testing.assert_allclose(full.loss, reduced.loss, rtol=1e-6)


# --------------------------------------------------------------------------------------
# the full-matrix route against references written here (issue 23, items 7 and 8)


def autograd_gradient(problem: gdln.Problem, edges: list) -> Callable[[list], tuple]:
    """Eq. (1) on the raw examples and its gradient, by torch autograd (float64)
    (``helpers.full_loss_and_gradient``, independent of gdln's path statistics), as a
    function of the weights in ``edges`` order."""
    examples = problem.examples()

    def loss_and_gradient(weights: list) -> tuple:
        given = {e: np.asarray(w, dtype=np.float64) for e, w in zip(edges, weights, strict=True)}
        loss, grads = full_loss_and_gradient(problem, given, examples)
        return loss, [grads[e] for e in edges]

    return loss_and_gradient


def reference_flow(
    problem: gdln.Problem, weights: dict, times: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Gradient flow tau dW/dt = -dL/dW by scipy solve_ivp (DOP853, rtol 1e-12) on the
    flattened weights, the right-hand side by autograd; the loss and weights at ``times``."""
    from scipy.integrate import solve_ivp

    edges = list(weights)
    shapes = [np.shape(weights[e]) for e in edges]
    sizes = np.cumsum([int(np.prod(s)) for s in shapes])[:-1]
    gradient = autograd_gradient(problem, edges)

    def unflatten(z: np.ndarray) -> list:
        return [p.reshape(s) for p, s in zip(np.split(z, sizes), shapes, strict=True)]

    def rhs(_t: float, z: np.ndarray) -> np.ndarray:
        return -np.concatenate([d.ravel() for d in gradient(unflatten(z))[1]])

    z0 = np.concatenate([np.asarray(weights[e], dtype=float).ravel() for e in edges])
    result = solve_ivp(
        rhs, (0, times[-1]), z0, method="DOP853", t_eval=times, rtol=1e-12, atol=1e-14
    )
    assert result.success
    losses = np.array([gradient(unflatten(z))[0] for z in result.y.T])
    return losses, result.y.T


def flat(trajectory: gdln.Trajectory, edges: list) -> np.ndarray:
    """The recorded weights, flattened per time in ``edges`` order."""
    return np.concatenate(
        [trajectory.series[f"W[{u}->{v}]"].reshape(len(trajectory.t), -1) for u, v in edges],
        axis=1,
    )


def test_solve_full_matches_the_two_layer_logistic(tmp_path: Path) -> None:
    # x -> h -> y, Sigma_x = I/2 (d = 1/2), Sigma_yx = diag(3/2, 1/2); balanced decoupled
    # start W1 = R diag(a), W2 = diag(a) R^T: each mode's u = b1 b2 follows
    # u' = 2u(s - d u), the logistic u(t) = (s/d) / (1 + (s/(d u0) - 1) e^{-2st})
    # (Saxe et al. 2014; Eq. 10 of Saxe et al. 2022 for a chain of two edges)
    path = tmp_path / "two.yaml"
    path.write_text(
        "nodes: [{id: x, size: 2}, {id: h, size: 2}, {id: y, size: 2}]\n"
        "edges: [{source: x, target: h}, {source: h, target: y}]\n"
        "task: {examples: [{inputs: {x: [1, 0]}, targets: {y: [3, 0]}},\n"
        "                  {inputs: {x: [0, 1]}, targets: {y: [0, 1]}}]}\n"
    )
    problem = gdln.load(path)
    u0 = np.array([1e-3, 2e-2])
    R, _ = np.linalg.qr(np.random.default_rng(3).standard_normal((2, 2)))
    weights = {("x", "h"): R @ np.diag(np.sqrt(u0)), ("h", "y"): np.diag(np.sqrt(u0)) @ R.T}
    trajectory = gdln.solve(problem, route="matrix", weights=weights, t_max=12, points=49)
    s, d, t = np.array([1.5, 0.5]), 0.5, trajectory.t[:, None]
    u = (s / d) / (1 + (s / (d * u0) - 1) * np.exp(-2 * s * t))
    loss = 2.5 - (s * u - 0.5 * d * u**2).sum(1)
    np.testing.assert_allclose(trajectory.loss, loss, rtol=1e-9, atol=1e-12)
    product = np.einsum("tij,tjk->tik", trajectory.series["W[h->y]"], trajectory.series["W[x->h]"])
    np.testing.assert_allclose(
        product, np.stack([np.diag(row) for row in u]), rtol=1e-8, atol=1e-12
    )
    descending = np.sort(np.sqrt(u), axis=1)[:, ::-1]
    np.testing.assert_allclose(trajectory.series["sv[x->h]"], descending, rtol=1e-8)


@pytest.mark.parametrize("name", ["crosspath", "context"])
def test_solve_full_matches_an_independent_integration(name: str) -> None:
    # gated graphs with co-active paths (crosspath: a skip edge too), from random weights
    problem = load(name)
    weights = random_weights(problem, 11)
    trajectory = gdln.solve(problem, route="matrix", weights=weights, t_max=6, points=13)
    loss, states = reference_flow(problem, weights, trajectory.t)
    np.testing.assert_allclose(trajectory.loss, loss, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(flat(trajectory, list(weights)), states, rtol=0, atol=1e-9)


def test_solve_full_gd_map_is_gradient_descent() -> None:
    # with lr: W <- W - lr dL/dW, step by step, against autograd gradients
    problem = load("crosspath")
    weights = random_weights(problem, 5)
    edges = list(weights)
    trajectory = gdln.solve(
        problem, route="matrix", weights=weights, t_max=3, dynamics="gd-map", lr=0.1, points=4
    )
    gradient = autograd_gradient(problem, edges)
    current = [np.array(weights[e], dtype=float) for e in edges]
    losses = []
    for step in range(31):
        loss, grads = gradient(current)
        if step % 10 == 0:
            losses.append(loss)
        current = [w - 0.1 * d for w, d in zip(current, grads, strict=True)]
    np.testing.assert_allclose(trajectory.t, [0, 1, 2, 3], rtol=1e-12)
    np.testing.assert_allclose(trajectory.loss, losses, rtol=1e-12)


def test_solve_full_converts_the_statistics_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # each evaluation of Eqs. (3)-(4) used to convert the exact statistics to floats
    # again (22.8 of 24.5 ms per call on the lab's network): the work outside the
    # products must not grow with the number of evaluations
    import importlib

    calls = []

    def counting(original):  # type: ignore[no-untyped-def]
        def counted(matrix):  # type: ignore[no-untyped-def]
            calls.append(1)
            return original(matrix)

        return counted

    for name in ("gdln.solution._full", "gdln.solution._flow"):
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError:  # the flow's own module is new
            continue
        if hasattr(module, "as_float"):
            monkeypatch.setattr(module, "as_float", counting(module.as_float))
    problem = load("crosspath")
    weights = random_weights(problem, 2)
    counts = []
    for t_max in (0.5, 20.0):
        calls.clear()
        gdln.solve(problem, route="matrix", weights=weights, t_max=t_max, points=3)
        counts.append(len(calls))
    assert counts[0] == counts[1]


def test_solve_full_refuses_bad_settings() -> None:
    from gdln.solution._full import initial_full_weights

    problem = load("chain")
    good = initial_full_weights(problem, problem.settings, seed=0)
    with pytest.raises(gdln.GdlnError, match=r"t_max \(--t-max\): expected a finite number > 0"):
        gdln.solve(problem, route="matrix", t_max=-1)
    with pytest.raises(gdln.GdlnError, match=r"lr \(--lr\): expected a finite number > 0, got 0"):
        gdln.solve(problem, route="matrix", t_max=1, dynamics="gd-map", lr=0)
    with pytest.raises(gdln.GdlnError, match=r"points \(--points\): expected an integer >= 2"):
        gdln.solve(problem, route="matrix", t_max=1, points=1)
    with pytest.raises(gdln.GdlnError, match=r"weights: no weight for edge 'h1->h2'"):
        gdln.solve(problem, route="matrix", weights={("x", "h1"): np.zeros((4, 3))}, t_max=1)
    bad = {**good, ("x", "h1"): np.zeros((3, 4))}
    with pytest.raises(
        gdln.GdlnError, match=r"weights\['x->h1'\]: shape \(3, 4\), expected \(4, 3\)"
    ):
        gdln.solve(problem, route="matrix", weights=bad, t_max=1)
    with pytest.raises(gdln.GdlnError, match=r"weights: 'y->x' is not an edge of"):
        gdln.solve(problem, route="matrix", weights={**good, ("y", "x"): np.zeros((3, 2))}, t_max=1)


# --------------------------------------------------------------------------------------
# The command line: `gdln stats` without common bases, `gdln solve --route matrix`


def test_stats_without_common_bases_prints_the_statistics_then_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, NOT_DIAGONALIZABLE)
    code, out, err = run_cli(["stats", str(path)], capsys)
    assert code == 2
    assert "Sigma_yx(x->h->y) =\n  [1/2  0]" in out
    assert "Sigma_x(x->h->y, x->h->y) =" in out
    assert "stay off-diagonal; relative residual 0.5" in out
    assert err.count("\n") == 1 and err.startswith("gdln: error: ")
    assert "solve/compare take the full-matrix flow" in err
    code, out, _ = run_cli(["stats", str(path), "--format", "json"], capsys)
    payload = json.loads(out)
    assert code == 2 and payload["Sigma_yx"]["x->h->y"]
    assert 0 < payload["no_common_bases"]["residual"] <= 1


def test_solve_route_matrix_follows_the_full_gradient_flow(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # no common bases: the CLI's full-matrix route against solve_ivp on autograd gradients
    path = write(tmp_path, NOT_DIAGONALIZABLE)
    args = [
        "solve",
        str(path),
        "--route",
        "matrix",
        "--t-max",
        "8",
        "--points",
        "9",
        "--format",
        "json",
    ]
    code, out, err = run_cli([*args, "--init", "0.3"], capsys)
    assert code == 0, err
    payload = json.loads(out)
    # the documented start: random weights, every singular value 0.3 (seed 0)
    start = gdln.solve(gdln.load(path), route="matrix", t_max=1e-9, points=2, b0=0.3)
    weights = {(u, v): start.series[f"W[{u}->{v}]"][0] for u, v in gdln.load(path).graph.edges}
    for edge in ("x->h", "h->y"):
        np.testing.assert_allclose(np.array(payload["variables"][f"sv[{edge}]"])[:, 0], 0.3)
    loss, _ = reference_flow(gdln.load(path), weights, np.array(payload["t"]))
    np.testing.assert_allclose(payload["loss"], loss, rtol=1e-9)
    assert payload["loss"][-1] < 0.5 * payload["loss"][0]
    code, out, err = run_cli([*args, "--lump", "full"], capsys)
    assert code == 2 and "--lump full and --route matrix" in err


def test_route_matrix_records_the_times_asked_for(tmp_path: Path) -> None:
    # the full-matrix flow recorded evenly spaced points and refused chosen times (issue 33)
    problem = gdln.load(write(tmp_path, NOT_DIAGONALIZABLE))
    chosen = gdln.solve(problem, route="matrix", t_max=1.0, points=5, times=[0.0, 0.3, 0.5])
    np.testing.assert_allclose(chosen.t, [0.0, 0.3, 0.5])
    start = {(u, v): chosen.weights((u, v))[0] for u, v in problem.graph.edges}
    loss, _ = reference_flow(problem, start, np.array([0.0, 0.3, 0.5]))
    np.testing.assert_allclose(chosen.loss, loss, rtol=1e-9)
