"""solve_batch's DOP853 (numpy across the batch; numba compiling the right-hand side)
against independent solutions: each scale's own system solved by scipy at tight
tolerance, each scale stepped alone by the same stepper, and the closed forms of the
reduction (the explicit logistic solution of xor, the separable t(B) of routing under
lump="full"). No timings."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from helpers import load
from scipy.integrate import quad, solve_ivp

import gdln
from gdln.solution import _dop853, _numba, solve_batch

SPREAD = np.geomspace(1e-4, 1.0, 9)[::-1]  # widely spread, largest first on purpose
CASES = [("routing", "symmetry"), ("routing", "full"), ("race", "symmetry"), ("xor", "full")]


def own_solution(problem: gdln.Problem, lump: str, scale: float, times: np.ndarray):
    """The scale's own reduction solved by scipy's DOP853 at rtol 1e-13: ``(vars*modes, T)``."""
    flow = gdln.reduce(problem, lump=lump, b0=repr(float(scale))).numeric_flow()
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
    monkeypatch.setattr(_numba, "MIN_BATCH", 1 if path == "numba" else 10**9)
    problem = load(name)
    reduction = gdln.reduce(problem, lump=lump, b0=1)
    (system,) = reduction.systems
    trajectories = solve_batch(reduction, SPREAD, t_max=30, points=61)
    for scale, trajectory in zip(SPREAD, trajectories, strict=True):
        assert trajectory.meta["integrator"] == f"dop853-{path}"
        assert trajectory.meta["init_scale"] == scale
        exact = own_solution(problem, lump, scale, trajectory.t)
        error = np.abs(free_series(trajectory, system) - exact)
        assert (error / np.abs(exact).max(axis=1, keepdims=True)).max() < 1e-9
    assert np.ptp(trajectories[0].loss) > 0.5 * trajectories[0].loss[0]  # it learns


@pytest.mark.parametrize("path", ["numpy", "numba"])
@pytest.mark.parametrize(("name", "lump"), CASES)
def test_batch_takes_the_steps_of_each_scale_alone(
    name: str, lump: str, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the same DOP853 step control per system: agreement far below the tolerance (numba's
    # right-hand side differs from numpy's in rounding only)
    if path == "numba":
        pytest.importorskip("numba")
    monkeypatch.setattr(_numba, "MIN_BATCH", 1 if path == "numba" else 10**9)
    flow = gdln.reduce(load(name), lump=lump, b0=1).numeric_flow()
    times = np.linspace(0.0, 30.0, 61)
    y0, c = flow.y0[:, None] * SPREAD, flow.constants[:, None] * SPREAD**2
    stepper = _dop853.Dop853()
    together, integrator = stepper.integrate(flow, y0, c, times, rtol=1e-10, atol=1e-12)
    assert integrator == f"dop853-{path}"
    monkeypatch.setattr(_numba, "MIN_BATCH", 10**9)
    for k in range(len(SPREAD)):
        alone, _ = stepper.integrate(
            flow, y0[:, [k]], c[:, [k]], times, rtol=1e-10, atol=1e-12
        )  # (T, state, 1)
        scale = np.abs(alone[:, :, 0]).max(axis=0)
        assert (np.abs(together[:, :, k] - alone[:, :, 0]) / scale).max() < 1e-12


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
    monkeypatch.setattr(_numba, "MIN_BATCH", 10**9)
    reduction = gdln.reduce(load("routing"), lump="symmetry", b0=1)
    scales = np.array([0.3, 0.05])
    stepped = solve_batch(reduction, scales, t_max=20, points=21)
    monkeypatch.setattr(_dop853, "STIFF_STEPS", -(10**6))  # gives up at once
    fallback = solve_batch(reduction, scales, t_max=20, points=21)
    for one, other in zip(stepped, fallback, strict=True):
        assert one.meta["integrator"] == "dop853-numpy"
        assert other.meta["integrator"] == "lsoda"
        assert "DOP853 steps" in other.meta["integrator_fallback"]
        np.testing.assert_allclose(other.loss, one.loss, rtol=1e-6)
        np.testing.assert_allclose(other.series["B1"], one.series["B1"], rtol=1e-6)


def test_numba_available_flag_is_respected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GDLN_NO_NUMBA", "1")
    monkeypatch.setattr(_numba, "MIN_BATCH", 1)
    reduction = gdln.reduce(load("xor"), lump="full", b0=1)
    assert not _numba.available()
    for trajectory in solve_batch(reduction, [0.1, 0.2], t_max=1, points=3):
        assert trajectory.meta["integrator"] == "dop853-numpy"


def test_runs_of_members_give_the_same_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    # a large batch is stepped in runs of members of similar size: the same steps for each
    # member, and a stop names the member's own scale
    monkeypatch.setattr(_numba, "MIN_BATCH", 10**9)
    reduction = gdln.reduce(load("routing"), lump="symmetry", b0=1)
    whole = solve_batch(reduction, SPREAD, t_max=30, points=61)
    monkeypatch.setattr(_dop853, "CHUNK_ENTRIES", 30)  # runs of 2 members of 12 entries
    runs = solve_batch(reduction, SPREAD, t_max=30, points=61)
    for one, other in zip(whole, runs, strict=True):
        assert other.meta["integrator"] == "dop853-numpy"
        assert other.meta["init_scale"] == one.meta["init_scale"]
        for name, values in {"loss": one.loss, **one.series}.items():
            got = other.loss if name == "loss" else other.series[name]
            assert np.abs(got - values).max() <= 1e-12 * np.abs(values).max(), name
    with pytest.raises(gdln.GdlnError, match=r"in mode \d for scale 1e\+200; lower the scale"):
        solve_batch(reduction, [0.1, 0.2, 1e200, 0.3], t_max=10, method="dop853")
