"""solve_batch's DOP853 steppers (numpy across the batch; numba) against independent
solutions: each scale's own system solved by scipy at tight tolerance, the compiled
single-system stepper, and the closed forms of the reduction (the explicit logistic
solution of xor, the separable t(B) of routing under lump="full"). No timings."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from helpers import load
from scipy.integrate import quad, solve_ivp

import gdln
from gdln.solution import _batch, _fast, _solve, solve_batch

SPREAD = np.geomspace(1e-4, 1.0, 9)[::-1]  # widely spread, largest first on purpose
CASES = [("routing", "symmetry"), ("routing", "full"), ("race", "symmetry"), ("xor", "full")]


def own_solution(problem: gdln.Problem, lump: str, scale: float, times: np.ndarray):
    """The scale's own reduction solved by scipy's DOP853 at rtol 1e-13: ``(vars*modes, T)``."""
    flow = _solve._reduction_flow(gdln.reduce(problem, lump=lump, b0=repr(float(scale))))
    result = solve_ivp(
        lambda t, y: flow.rhs(y), (0, times[-1]), flow.y0, method="DOP853", t_eval=times,
        rtol=1e-13, atol=1e-16,
    )  # fmt: skip
    assert result.success
    return result.y


def free_series(trajectory: gdln.Trajectory, system: gdln.ReducedSystem) -> np.ndarray:
    return np.concatenate([trajectory.series[str(v)].T for v in system.variables])


SLOW_CASES = [
    pytest.param(*case, marks=pytest.mark.slow)
    if case in {("routing", "full"), ("race", "symmetry")}
    else case
    for case in CASES
]  # 9-16 s each: in CI's slow run; routing symmetry and xor full stay in the default run


@pytest.mark.parametrize("path", ["numpy", "numba"])
@pytest.mark.parametrize(("name", "lump"), SLOW_CASES)
def test_batch_within_1e9_of_each_scale_solved_alone(
    name: str, lump: str, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # error relative to each variable's largest value over time, i.e. to the scale
    if path == "numba":
        pytest.importorskip("numba")
    monkeypatch.setattr(_batch, "FAST_BATCH", 1 if path == "numba" else 10**9)
    problem = load(name)
    reduction = gdln.reduce(problem, lump=lump, b0=1)
    (system,) = reduction.systems
    trajectories = solve_batch(reduction, SPREAD, t_max=30, n_points=61)
    for scale, trajectory in zip(SPREAD, trajectories, strict=True):
        assert trajectory.meta["integrator"] == f"dop853-{path}"
        assert trajectory.meta["init_scale"] == scale
        exact = own_solution(problem, lump, scale, trajectory.t)
        error = np.abs(free_series(trajectory, system) - exact)
        assert (error / np.abs(exact).max(axis=1, keepdims=True)).max() < 1e-9
    assert np.ptp(trajectories[0].loss) > 0.5 * trajectories[0].loss[0]  # it learns


@pytest.mark.parametrize(("name", "lump"), CASES)
def test_numpy_batch_takes_the_steps_of_the_compiled_single_solve(name: str, lump: str) -> None:
    # the same DOP853 step control per system: agreement far below the tolerance
    pytest.importorskip("numba")
    reduction = gdln.reduce(load(name), lump=lump, b0=1)
    numerics = [_solve._compiled(s) for s in reduction.systems]
    times = np.linspace(0.0, 30.0, 61)
    alone = _solve.fast_states(numerics, SPREAD, times, 1e-10, 1e-12)  # (scales, T, state)
    assert alone is not None
    alone = alone.transpose(2, 1, 0)  # (state, T, scales)
    states = _batch._Batch(numerics, SPREAD).vector_states(times, 1e-10, 1e-12)
    assert states is not None
    (together,) = states  # (T, variables, modes, scales)
    together = together.reshape(len(times), -1, len(SPREAD)).transpose(1, 0, 2)
    scale = np.abs(alone).max(axis=1, keepdims=True)
    assert (np.abs(together - alone) / scale).max() < 1e-12


def test_xor_batch_matches_the_explicit_closed_form() -> None:
    # lump="full" on xor: tau dB/dt = pB + qB^3, whose explicit solution is Eq. (21)'s logistic
    reduction = gdln.reduce(load("xor"), lump="full", b0=1)
    (system,) = reduction.systems
    (B,) = system.variables
    t = sp.Symbol("t", nonnegative=True)
    values = {s: v[0] for s, v in system.symbols.items()}
    closed = sp.lambdify([sp.Symbol(f"{B}_0", positive=True), t],
                         system.closed_form[str(B)].expr.subs(values), "numpy")  # fmt: skip
    for trajectory, scale in zip(solve_batch(reduction, SPREAD, t_max=30), SPREAD, strict=True):
        exact = closed(scale * float(system.initial[B]), trajectory.t)
        np.testing.assert_allclose(trajectory.series[str(B)][:, 0], exact, rtol=1e-9, atol=0)


def test_routing_batch_matches_the_separable_closed_form() -> None:
    # lump="full" on routing: t = int_{B0}^{B(t)} dx / f(x), with C of Eq. (15) ~ scale**2
    reduction = gdln.reduce(load("routing"), lump="full", b0=1)
    (system,) = reduction.systems
    (B,), (C,) = system.variables, system.constants
    scales = np.array([1.0, 0.3, 0.1])
    checked = 0
    for trajectory, scale in zip(solve_batch(reduction, scales, t_max=40), scales, strict=True):
        b0 = scale * float(system.initial[B])
        for j in range(len(system.modes)):
            values = {s: v[j] for s, v in system.symbols.items()}
            values[C] = system.constants[C] * sp.Float(scale) ** 2
            f = sp.lambdify(B, system.rhs[B].subs(values), "math")
            path = trajectory.series[str(B)][:, j]
            speeds = np.abs([f(b) for b in path])
            for time, b, speed in zip(trajectory.t, path, speeds, strict=True):
                if speed < 1e-2 * speeds.max() or abs(b - b0) < 1e-2 * b0:
                    continue  # dt = dB / f amplifies rounding near fixed points
                value = quad(lambda x, f=f: 1 / f(x), b0, b, epsabs=0, epsrel=1e-12, limit=200)
                assert value[0] == pytest.approx(time, rel=1e-8)
                checked += 1
    assert checked > 50


def test_stiff_or_long_batch_falls_back_to_lsoda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_batch, "FAST_BATCH", 10**9)
    reduction = gdln.reduce(load("routing"), lump="symmetry", b0=1)
    scales = np.array([0.3, 0.05])
    stepped = solve_batch(reduction, scales, t_max=20, n_points=21)
    monkeypatch.setattr(_batch, "VECTOR_STEPS", -(10**6))  # gives up at once
    fallback = solve_batch(reduction, scales, t_max=20, n_points=21)
    for one, other in zip(stepped, fallback, strict=True):
        assert other.meta["integrator"] == "lsoda"
        np.testing.assert_allclose(other.loss, one.loss, rtol=1e-6)
        np.testing.assert_allclose(other.series["B1"], one.series["B1"], rtol=1e-6)


def test_numba_available_flag_is_respected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GDLN_NO_NUMBA", "1")
    monkeypatch.setattr(_batch, "FAST_BATCH", 1)
    reduction = gdln.reduce(load("xor"), lump="full", b0=1)
    assert not _fast.available()
    (trajectory,) = solve_batch(reduction, [0.1], t_max=1, n_points=3)
    assert trajectory.meta["integrator"] == "dop853-numpy"
