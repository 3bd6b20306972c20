"""Weight decay (issue 28, part 3): the penalty (gamma/2) sum_e ||W_e||^2 everywhere.

References, each independent of the code under test:

* the full network trained by :func:`gdln.simulate` (torch autograd, float64) from the
  decoupled weights of Eq. (9) against the reduced gradient-descent map with decay;
* the balanced two-layer fixed point a*b = (s - gamma)/d for s > gamma, else 0 (closed
  form, with s and d computed here from the examples: Sigma_yx and Sigma_x of Eqs. 5-6);
* d/dt (a^2 - b^2) = -2 gamma (a^2 - b^2) along the solved flow (closed form);
* the full-matrix flow with decay integrated here (scipy DOP853 on torch-autograd
  gradients plus gamma W) against :func:`gdln.solve` by every route.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import full_loss_and_gradient, load, run_cli, write
from scipy.integrate import solve_ivp

import gdln

GAMMA = 0.05

# A two-layer network on whitened inputs (n = 3 one-hot examples, so Sigma_x = I/3 and
# d = 1/3), targets on the diagonal: mode strengths s = 2/3, 1/3 and 1/30.
TWO_LAYER = """\
name: two_layer
nodes:
  - {id: x, size: 3}
  - {id: h, size: 3}
  - {id: y, size: 3}
edges:
  - {source: x, target: h}
  - {source: h, target: y}
task:
  examples:
    - {inputs: {x: [1, 0, 0]}, targets: {y: [2, 0, 0]}}
    - {inputs: {x: [0, 1, 0]}, targets: {y: [0, 1, 0]}}
    - {inputs: {x: [0, 0, 1]}, targets: {y: [0, 0, 0.1]}}
"""


def two_layer(tmp_path: Path) -> gdln.Problem:
    return gdln.load(write(tmp_path, TWO_LAYER, "two_layer.yaml"))


@pytest.mark.parametrize(
    ("name", "b0", "lr", "t_max"),
    [("routing", 0.3, 0.05, 6), ("xor", 0.2, 0.1, 8), ("chain", 0.1, 0.05, 10)],
)
def test_simulation_from_decoupled_weights_is_the_reduced_gd_map_with_decay(
    name: str, b0: float, lr: float, t_max: float
) -> None:
    params = {"routing": {"M": 3, "K": 2, "hidden": 6}, "xor": {"hidden": 3}}.get(name, {})
    problem = load(name, **params)
    run = gdln.simulate(
        problem,
        init_scheme="decoupled",
        b0=b0,
        weight_decay=GAMMA,
        lr=lr,
        t_max=t_max,
        seeds=1,
        record_every=10,
    )
    assert run.meta["weight_decay"] == GAMMA
    scale = run.loss[0, 0]
    for lump in ("none", "symmetry", "balanced"):
        reduction = gdln.reduce(problem, lump=lump, b0=b0, weight_decay=GAMMA)
        theory = gdln.solve(reduction, t_max=t_max, dynamics="gd-map", lr=lr, times=run.t)
        assert np.abs(theory.loss - run.loss[:, 0]).max() <= 1e-13 * scale, lump
    without = gdln.solve(
        gdln.reduce(problem, b0=b0), t_max=t_max, dynamics="gd-map", lr=lr, times=run.t
    )
    assert np.abs(without.loss - run.loss[:, 0]).max() > 1e-4 * scale  # decay matters


def test_balanced_two_layer_fixed_point(tmp_path: Path) -> None:
    problem = two_layer(tmp_path)
    d = 1 / 3
    s = np.array([2.0, 1.0, 0.1]) / 3
    gamma = 0.1  # above the third mode's s = 1/30
    trajectory = gdln.solve(problem, lump="none", b0=0.2, weight_decay=gamma, t_max=400, points=3)
    a, b = trajectory.series["b_x_h"][-1], trajectory.series["b_h_y"][-1]
    order = np.argsort(-(a * b))
    expected = np.where(s > gamma, (s - gamma) / d, 0.0)
    np.testing.assert_allclose((a * b)[order], expected, atol=1e-9)


def test_two_layer_balance_decays_as_exp_minus_two_gamma_t(tmp_path: Path) -> None:
    problem = two_layer(tmp_path)
    reduction = gdln.reduce(problem, lump="none", b0={"x->h": 0.4, "h->y": 0.1}, weight_decay=GAMMA)
    system = reduction.systems[0]
    assert system.conserved == () and len(system.decaying) == 1
    trajectory = gdln.solve(reduction, t_max=20, points=41)
    a, b = trajectory.series["b_x_h"], trajectory.series["b_h_y"]
    q0 = 0.4**2 - 0.1**2
    expected = q0 * np.exp(-2 * GAMMA * trajectory.t)[:, None]
    np.testing.assert_allclose(a**2 - b**2, np.broadcast_to(expected, a.shape), rtol=1e-8)
    # without decay the same quantity is conserved
    plain = gdln.reduce(problem, lump="none", b0={"x->h": 0.4, "h->y": 0.1})
    assert len(plain.systems[0].conserved) == 1 and plain.systems[0].decaying == ()


def own_full_flow(problem: gdln.Problem, weights: dict, gamma: float, times: np.ndarray):
    """The full-matrix flow -dL/dW - gamma W, integrated here: losses at ``times``."""
    edges = list(weights)
    trained = [e for e in edges if "fixed" not in problem.graph.edges[e]]
    shapes = [weights[e].shape for e in edges]
    sizes = np.cumsum([weights[e].size for e in edges])[:-1]

    def unpack(y: np.ndarray) -> dict:
        parts = np.split(y, sizes)
        return {e: p.reshape(s) for e, p, s in zip(edges, parts, shapes, strict=True)}

    def rhs(_t: float, y: np.ndarray) -> np.ndarray:
        w = unpack(y)
        _, grad = full_loss_and_gradient(problem, w)
        return np.concatenate(
            [
                (-grad[e] - gamma * w[e] if e in trained else np.zeros_like(w[e])).ravel()
                for e in edges
            ]
        )

    y0 = np.concatenate([weights[e].ravel() for e in edges])
    result = solve_ivp(
        rhs, (0, times[-1]), y0, method="DOP853", t_eval=times, rtol=1e-12, atol=1e-14
    )
    return np.array([full_loss_and_gradient(problem, unpack(y))[0] for y in result.y.T])


def test_full_matrix_flow_with_decay_equals_solve_by_every_route() -> None:
    problem = load("xor", hidden=3)
    times = np.linspace(0, 8, 9)
    reduction = gdln.reduce(problem, lump="none", b0=0.2)
    weights = reduction.decoupled_weights(seed=0)
    reference = own_full_flow(problem, weights, GAMMA, times)
    scale = reference[0]
    full = gdln.solve(
        problem, route="matrix", weights=weights, t_max=8, points=9, weight_decay=GAMMA
    )
    assert full.meta["weight_decay"] == GAMMA
    assert np.abs(full.loss - reference).max() <= 1e-9 * scale
    for route in ("contexts", "moments"):
        solved = gdln.solve(problem, route=route, b0=0.2, weight_decay=GAMMA, t_max=8, points=9)
        assert solved.meta["weight_decay"] == GAMMA
        assert np.abs(solved.loss - reference).max() <= 1e-8 * scale, route
    # a random start that is not decoupled: only the full-matrix flow is exact
    rng = np.random.default_rng(1)
    random = {e: 0.3 * rng.standard_normal(w.shape) for e, w in weights.items()}
    full = gdln.solve(
        problem, route="matrix", weights=random, t_max=8, points=9, weight_decay=GAMMA
    )
    reference = own_full_flow(problem, random, GAMMA, times)
    assert np.abs(full.loss - reference).max() <= 1e-9 * reference[0]


def test_moment_route_gradient_has_the_decay_term() -> None:
    problem = load("xor", hidden=2)
    plain = gdln.expected_dynamics(problem, b0=0.2)
    decayed = gdln.expected_dynamics(problem, b0=0.2, weight_decay=GAMMA)
    b = np.where(plain.alive, np.linspace(0.1, 0.9, plain.alive.size).reshape(plain.alive.shape), 0)
    np.testing.assert_allclose(decayed.flow(b), plain.flow(b) - GAMMA * b, rtol=0, atol=1e-15)
    assert decayed.loss(b) == plain.loss(b)  # the loss of Eq. (1), without the penalty


def test_weight_decay_from_the_graph_file_and_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, TWO_LAYER + "solve: {weight_decay: 1/10}\n", "decay.yaml")
    problem = gdln.load(path)
    assert problem.settings.weight_decay == pytest.approx(0.1)
    assert gdln.reduce(problem).weight_decay == pytest.approx(0.1)
    rc, out, _ = run_cli(
        ["solve", str(path), "--t-max", "1", "--points", "2", "--format", "json"], capsys
    )
    assert rc == 0 and '"weight_decay": 0.1' in out
    rc, out, _ = run_cli(
        [
            "solve",
            str(path),
            "--t-max",
            "1",
            "--points",
            "2",
            "--weight-decay",
            "0",
            "--format",
            "json",
        ],
        capsys,
    )
    assert rc == 0 and '"weight_decay": 0.0' in out


def test_negative_weight_decay_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    path = write(tmp_path, TWO_LAYER, "two_layer.yaml")
    rc, _, err = run_cli(["solve", str(path), "--weight-decay", "-1"], capsys)
    assert rc == 2
    assert err.strip() == (
        f"gdln: error: {path}: weight_decay (--weight-decay): expected a finite number >= 0, "
        "got '-1'"
    )
    bad = write(tmp_path, TWO_LAYER + "solve: {weight_decay: -0.5}\n", "bad.yaml")
    with pytest.raises(gdln.GdlnError, match=r"solve\.weight_decay: expected a finite number >= 0"):
        gdln.load(bad)


def test_full_lumping_is_refused_with_decay() -> None:
    problem = load("routing", M=3, K=2)
    with pytest.raises(gdln.GdlnError, match=r"lump 'full' eliminates variables.*weight decay"):
        gdln.reduce(problem, lump="full", weight_decay=GAMMA)
