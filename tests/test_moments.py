r"""The moment route (:func:`gdln.expected_dynamics`) against independent computations.

References, each independent of the tape under test:

* the symbolic route (:func:`gdln.reduce`), which lists paths and differentiates the
  per-mode loss with exact polynomials, at random points and as expanded polynomials;
* central finite differences of the moment route's own loss, for its reverse pass;
* torch autograd on the full-matrix network from decoupled weights (``tests/helpers.py``);
* the property that gradient flow never increases the loss: along the flow, the loss
  changes at the rate $-\lVert\partial\mathcal L/\partial b\rVert^2$.

Tests of random gates against the chain form and the mixture of masks are in
``tests/test_random_gates.py``.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest
import sympy as sp
from helpers import (
    GRAPHS,
    TWO_INPUTS,
    coactive,
    full_loss_and_gradient,
    load,
    per_mode,
    resnet,
    write,
)
from hypothesis import given, settings
from hypothesis import strategies as st

import gdln

RTOL = 1e-12


def routing_random(tmp_path: Path) -> gdln.Problem:
    """Routing (Fig. 4) with random gates on its input edges, p = 3/4 and 1/2 alternating."""
    text = (GRAPHS / "routing.yaml").read_text()
    text = text.replace(
        "task:\n",
        'task:\n  random_gates:\n    - {item: "x{i}->h1", p: "3/4 if i % 2 == 0 else 1/2", '
        "repeat: {i: M}}\n",
    )
    return gdln.load(write(tmp_path, text), params={"M": "3", "K": "2", "hidden": "5"})


# --------------------------------------------------------------------------------------
# The moment route against the symbolic route


def test_moment_tape_as_polynomials_is_the_symbolic_loss() -> None:
    problem = resnet(3, p_L="q", survival="linear", width=3)
    (system,) = gdln.reduce(problem, lump="none").systems
    dynamics = gdln.expected_dynamics(problem)
    names = {str(v): v for v in system.variables}
    for mode in system.modes:
        tape = dynamics.loss_polynomial(mode)
        tape = tape.xreplace({v: names[str(v)] for v in dynamics.variables})
        assert sp.simplify(tape - per_mode(system, system.loss, mode)) == 0


# --------------------------------------------------------------------------------------
# The moment route against the symbolic route at random points


def compare_routes(problem: gdln.Problem, dynamics: gdln.ExpectedDynamics, seed: int) -> int:
    reduction = gdln.reduce(problem, lump="none")
    rng = np.random.default_rng(seed)
    b = rng.normal(scale=0.6, size=dynamics.alive.shape)
    losses = dynamics.mode_losses(b)
    flow = dynamics.flow(b)
    row = {str(v): i for i, v in enumerate(dynamics.variables)}
    scale = max(1.0, float(np.abs(flow).max()))
    checked = 0
    for system in reduction.systems:
        variables = list(system.variables)
        data = list(system.symbols)
        args = variables + data
        loss_fn = sp.lambdify(args, system.loss, "numpy")
        rhs_fn = {v: sp.lambdify(args, system.rhs[v], "numpy") for v in variables}
        for j, mode in enumerate(system.modes):
            point = [b[row[str(v)], mode] for v in variables]
            point += [float(system.symbols[s][j]) for s in data]
            assert losses[mode] == pytest.approx(float(loss_fn(*point)), rel=RTOL, abs=RTOL)
            for v in variables:
                want = float(rhs_fn[v](*point))
                assert flow[row[str(v)], mode] == pytest.approx(want, rel=RTOL, abs=RTOL * scale)
            checked += 1
    assert np.isclose(dynamics.constant, float(reduction.constant), rtol=RTOL)
    return checked


@pytest.mark.parametrize("name", ["xor", "crosspath", "coactive", "routing_random", "two_inputs"])
def test_moment_route_equals_symbolic_route(name: str, tmp_path: Path) -> None:
    if name == "coactive":
        problem = coactive(tmp_path, p_xy="3/4")
    elif name == "two_inputs":
        problem = gdln.load(write(tmp_path, TWO_INPUTS))
    elif name == "routing_random":
        problem = routing_random(tmp_path)
    else:
        problem = load(name)
    reduction = gdln.reduce(problem, lump="none")
    assert compare_routes(problem, gdln.expected_dynamics(reduction), seed=1) > 0
    if name in ("xor", "routing_random", "two_inputs"):  # bases from datasets: no paths needed
        assert compare_routes(problem, gdln.expected_dynamics(problem), seed=2) > 0


@pytest.mark.parametrize(
    "L",
    [1, 2, 3, 4, pytest.param(5, marks=pytest.mark.slow), pytest.param(6, marks=pytest.mark.slow)],
)
@pytest.mark.parametrize("scaling", ["plain", "stable"])
def test_moment_route_equals_symbolic_route_on_resnet_sd(L: int, scaling: str) -> None:
    problem = resnet(L, scaling=scaling, survival="linear", width=3)
    assert compare_routes(problem, gdln.expected_dynamics(problem), seed=L) == 3


def test_error_moment_route_needs_dataset_bases_or_a_reduction(tmp_path: Path) -> None:
    with pytest.raises(gdln.GdlnError, match=r"gdln.expected_dynamics\(gdln.reduce\(problem\)\)"):
        gdln.expected_dynamics(load("crosspath"))


# --------------------------------------------------------------------------------------
# The gradient of the reverse pass


@functools.cache
def shipped(name: str) -> gdln.ExpectedDynamics:
    """The expected dynamics of a shipped graph, through the route it allows (kept)."""
    if name == "crosspath":  # bases from path statistics: through a reduction
        return gdln.expected_dynamics(gdln.reduce(load("crosspath")))
    if name == "resnet_sd":
        return gdln.expected_dynamics(resnet(3, p_L="0.3", survival="linear", width=3))
    if name == "routing":
        return gdln.expected_dynamics(load("routing", M=3, K=2, hidden=5))
    return gdln.expected_dynamics(load(name))


def dynamics_of(name: str, tmp_path: Path) -> gdln.ExpectedDynamics:
    if name == "coactive":  # bases from path statistics, random gates, fixed parts 1, 2, 0
        return gdln.expected_dynamics(gdln.reduce(coactive(tmp_path, p_xy="3/4")))
    if name == "two_inputs":
        return gdln.expected_dynamics(gdln.load(write(tmp_path, TWO_INPUTS)))
    return shipped(name)


@pytest.mark.parametrize(
    "name", ["xor", "routing", "crosspath", "context", "resnet_sd", "coactive", "two_inputs"]
)
def test_gradient_equals_central_differences(name: str, tmp_path: Path) -> None:
    dynamics = dynamics_of(name, tmp_path)
    b = np.random.default_rng(5).normal(scale=0.5, size=dynamics.alive.shape)
    grad = dynamics.gradient(b)
    h = 1e-5
    numeric = np.zeros_like(b)
    for index in zip(*np.nonzero(dynamics.alive), strict=True):
        step = np.zeros_like(b)
        step[index] = h
        numeric[index] = (dynamics.loss(b + step) - dynamics.loss(b - step)) / (2 * h)
    scale = float(np.abs(numeric).max())
    assert scale > 1e-3  # not a stationary point
    # central differences of a polynomial: error O(h^2) times its third derivatives
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-8 * scale)
    assert np.all(grad[~dynamics.alive] == 0)


@pytest.mark.parametrize("name", ["xor", "routing", "context", "crosspath"])
def test_loss_and_flow_equal_autograd_of_the_full_network(name: str) -> None:
    """From decoupled weights (Eq. 9): Eq. (1), and -dL/dW projected on every mode."""
    dynamics = shipped(name)
    rng = np.random.default_rng(2)
    b = np.where(dynamics.alive, rng.normal(scale=0.5, size=dynamics.alive.shape), 0)
    weights = dynamics.decoupled_weights(b, seed=4)
    loss, grad = full_loss_and_gradient(dynamics.problem, weights)
    assert loss == pytest.approx(dynamics.loss(b), rel=1e-10)
    flow = dynamics.flow(b)
    projected = dynamics.project({e: -g for e, g in grad.items()}, seed=4)
    scale = float(np.abs(flow).max())
    np.testing.assert_allclose(projected, flow, rtol=1e-9, atol=1e-10 * scale)


# --------------------------------------------------------------------------------------
# Gradient flow never increases the loss


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["routing", "resnet_sd", "crosspath"]))
def test_loss_falls_at_rate_minus_squared_flow(seed: int, name: str) -> None:
    r"""$\frac{d}{d\varepsilon}\mathcal L(b+\varepsilon f)|_{0} = -\lVert f\rVert^2$ for $f$ the flow."""
    dynamics = shipped(name)
    b = np.random.default_rng(seed).normal(scale=0.7, size=dynamics.alive.shape)
    f = dynamics.flow(b)
    eps = 1e-6 / max(1.0, float(np.abs(f).max()))
    slope = (dynamics.loss(b + eps * f) - dynamics.loss(b - eps * f)) / (2 * eps)
    assert slope == pytest.approx(-float((f * f).sum()), rel=1e-5, abs=1e-9)


@pytest.mark.parametrize("name", ["routing", "resnet_sd", "xor"])
def test_loss_never_increases_along_the_solved_flow(name: str) -> None:
    trajectory = gdln.solve(shipped(name), t_max=15, points=61)
    assert np.all(np.diff(trajectory.loss) <= 1e-12)
    assert trajectory.loss[-1] < trajectory.loss[0] - 1e-3
