"""The ODE steppers (Fortran LSODA, DOP853 for one system and for a batch of initial
scales) against independent solutions: scipy's solve_ivp at tight tolerance, and one
solve per scale. No timings."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from helpers import GRAPHS, load
from scipy.integrate import solve_ivp

import gdln
from gdln.reduction import NumericFlow
from gdln.solution import _dop853, _lsoda, _numba, solve_batch

SHIPPED = [
    ("routing", {"M": 7, "K": 4}, "symmetry", 0.1),
    ("routing", {"M": 7, "K": 4}, "full", 0.1),
    ("routing", {"M": 4, "K": 2}, "none", 0.2),
    ("xor", {}, "full", 0.05),
    ("chain", {}, "none", 0.2),
    ("crosspath", {}, "none", 0.1),
    ("race", {}, "symmetry", 0.1),
    ("context", {}, "none", 0.1),
]


def reference(flow: NumericFlow, times: np.ndarray, rtol: float, method: str) -> np.ndarray:
    """solve_ivp on the same right-hand side: states ``(state, T)``."""
    result = solve_ivp(
        lambda t, y: flow.rhs(y), (0, times[-1]), flow.y0, method=method, t_eval=times,
        rtol=rtol, atol=rtol * 1e-2,
    )  # fmt: skip
    assert result.success
    return result.y


def lsoda(flow: NumericFlow, t_max: float, n_points: int) -> tuple[np.ndarray, np.ndarray]:
    """Times and states ``(state, T)`` of one system by the LSODA stepper (rtol 1e-10)."""
    times = np.linspace(0.0, t_max, n_points)
    y0, c = flow.y0[:, None], flow.constants[:, None]
    states, _ = _lsoda.Lsoda().integrate(flow, y0, c, times, rtol=1e-10, atol=1e-12)
    return times, states[:, :, 0].T


@pytest.mark.parametrize(("name", "params", "lump", "init"), SHIPPED)
def test_fortran_lsoda_is_as_accurate_as_solve_ivp(
    name: str, params: dict, lump: str, init: float
) -> None:
    # against a tight DOP853 reference, today's fast path must be within 1e-10 relative of
    # it or no further from it than solve_ivp's LSODA at the same tolerances
    reduction = gdln.reduce(load(name, **params), lump=lump, b0=init)
    flow = reduction.numeric_flow()
    times, states = lsoda(flow, 20.0, 101)
    exact = reference(flow, times, 1e-13, "DOP853")
    old = reference(flow, times, 1e-10, "LSODA")
    scale = np.abs(exact).max(axis=1, keepdims=True)
    error = (np.abs(states - exact) / scale).max()
    old_error = (np.abs(old - exact) / scale).max()
    assert error <= max(1e-10, 2 * old_error), (error, old_error)
    assert error < 1e-7


@pytest.mark.parametrize("lump", ["none", "symmetry"])
def test_analytic_jacobian_matches_finite_differences(lump: str) -> None:
    reduction = gdln.reduce(load("routing", M=4, K=2), lump=lump, b0=0.3)
    flow = reduction.numeric_flow()
    assert flow.scalar_jacobian is not None
    rng = np.random.default_rng(0)
    y = rng.normal(size=flow.y0.size)
    jacobian = flow.scalar_jacobian(y, flow.constants)
    h = 1e-6
    columns = [(flow.rhs(y + h * e) - flow.rhs(y - h * e)) / (2 * h) for e in np.eye(len(y))]
    np.testing.assert_allclose(jacobian, np.array(columns).T, rtol=1e-6, atol=1e-8)


def test_large_initial_value_through_the_stiff_end() -> None:
    # a large initial value: fast race, then slow convergence (where LSODA may go to BDF)
    reduction = gdln.reduce(load("routing", M=4, K=2), lump="symmetry", b0=3.0)
    flow = reduction.numeric_flow()
    times, states = lsoda(flow, 40.0, 41)
    exact = reference(flow, times, 1e-13, "Radau")
    np.testing.assert_allclose(states, exact, rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize(
    "lump",
    ["symmetry", pytest.param("full", marks=pytest.mark.slow)],  # full: 7 s each
)
@pytest.mark.parametrize("compiled", [False, True])
def test_batch_of_scales_matches_one_solve_per_scale(
    lump: str, compiled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # lump="full" eliminates B1 with the constant C of Eq. 15, which scales as scale**2
    if compiled:
        pytest.importorskip("numba")
    monkeypatch.setattr(_numba, "MIN_BATCH", 1 if compiled else 10**9)
    problem = load("routing", M=7, K=4)
    scales = np.array([0.3, 0.05, 0.12, 0.02])  # unsorted on purpose
    trajectories = solve_batch(gdln.reduce(problem, lump=lump, b0=1), scales, t_max=30)
    assert len(trajectories) == len(scales)
    for scale, trajectory in zip(scales, trajectories, strict=True):
        assert trajectory.meta["init_scale"] == scale
        one = gdln.reduce(problem, lump=lump, b0=str(scale))
        flow = one.numeric_flow()
        exact = reference(flow, trajectory.t, 1e-13, "DOP853")
        (system,) = one.systems
        for i, v in enumerate(system.variables):
            values = exact[i * len(system.modes) : (i + 1) * len(system.modes)].T
            np.testing.assert_allclose(trajectory.series[str(v)], values, rtol=1e-7, atol=1e-12)
        single = gdln.solve(one, t_max=30)
        assert set(trajectory.series) == set(single.series)
        for name, values in single.series.items():
            np.testing.assert_allclose(trajectory.series[name], values, rtol=1e-6, atol=1e-10)
        np.testing.assert_allclose(trajectory.loss, single.loss, rtol=1e-6, atol=1e-10)


def test_batch_spanning_several_runs_keeps_the_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_lsoda, "CHUNK", 2)
    reduction = gdln.reduce(load("xor"), lump="full", b0=1)
    scales = np.array([0.2, 0.01, 0.1, 0.05, 0.3])
    trajectories = solve_batch(reduction, scales, t_max=10, points=11, method="lsoda")
    for scale, trajectory in zip(scales, trajectories, strict=True):
        assert trajectory.meta["integrator"] == "lsoda"
        single = gdln.solve(gdln.reduce(load("xor"), lump="full", b0=str(scale)), t_max=10,
                            points=11)  # fmt: skip
        np.testing.assert_allclose(trajectory.loss, single.loss, rtol=1e-7)


@pytest.mark.parametrize("scales", [[], [0.1, -0.1], [[0.1]], [0.1, float("nan")], ["a"]])
def test_bad_scales(scales: object) -> None:
    reduction = gdln.reduce(load("xor"), lump="full", b0=1)
    with pytest.raises(gdln.GdlnError, match=r"xor\.yaml: scales must be"):
        solve_batch(reduction, scales, t_max=1)


def test_batch_overflow_names_the_scale() -> None:
    reduction = gdln.reduce(load("routing"), lump="symmetry", b0=1)
    with pytest.raises(
        gdln.GdlnError,
        match=r"routing\.yaml: the ODE overflowed at t = [\d.e+-]+ tau, where B\d = "
        r"-?(inf|nan|[\d.e+-]+) in mode \d for scale 1e\+200",
    ):
        solve_batch(reduction, [0.1, 1e200], t_max=10)


@pytest.mark.parametrize(("name", "params", "lump", "init"), SHIPPED)
def test_dop853_stepper_within_1e10_of_tight_solve_ivp(
    name: str, params: dict, lump: str, init: float
) -> None:
    reduction = gdln.reduce(load(name, **params), lump=lump, b0=init)
    flow = reduction.numeric_flow()
    times = np.linspace(0.0, 20.0, 101)
    stepped, integrator = _dop853.Dop853().integrate(
        flow, flow.y0[:, None], flow.constants[:, None], times, rtol=1e-10, atol=1e-12
    )
    assert integrator == "dop853-numpy"
    states = stepped[:, :, 0]
    exact = reference(flow, times, 1e-13, "DOP853")
    scale = np.abs(exact).max(axis=1, keepdims=True)
    assert (np.abs(states.T - exact) / scale).max() <= 1e-10
    # and gdln.solve takes this path when asked to
    trajectory = gdln.solve(reduction, t_max=20.0, points=101, method="dop853")
    assert trajectory.meta["integrator"] == "dop853-numpy"
    (system, *_) = reduction.systems
    m = len(system.modes)
    for i, v in enumerate(system.variables):
        suffix = "" if len(reduction.systems) == 1 else "@0"
        np.testing.assert_array_equal(
            trajectory.series[f"{v}{suffix}"], states[:, i * m : (i + 1) * m]
        )


def test_dop853_stopping_leaves_the_error_to_lsoda() -> None:
    reduction = gdln.reduce(load("routing"), lump="full", b0=1e200)
    match = r"routing\.yaml: the ODE overflowed at t = 0 tau, where B\d = 1e\+200 in mode \d"
    with pytest.raises(gdln.GdlnError, match=match):
        gdln.solve(reduction, t_max=1000)
    with pytest.raises(gdln.GdlnError, match=match + " for scale 1;"):
        solve_batch(reduction, [1.0, 0.5], t_max=1000)  # DOP853 stops, LSODA names the cause


def test_no_numba_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GDLN_NO_NUMBA", "1")
    monkeypatch.setattr(_numba, "MIN_BATCH", 1)
    assert not _numba.available()
    reduction = gdln.reduce(load("xor"), lump="full", b0=0.1)
    for trajectory in solve_batch(reduction, [1.0, 2.0], t_max=1, points=3):
        assert trajectory.meta["integrator"] == "dop853-numpy"


def test_solving_again_never_compiles() -> None:
    # issue 25: numba compiled a system on its second solve (seconds, for a solve of
    # milliseconds); now a single solve, repeated or by DOP853, and a small batch never
    # import it, in a fresh process
    pytest.importorskip("numba")
    code = (
        "import sys, gdln\n"
        "from gdln.solution import solve_batch\n"
        f"problem = gdln.load({str(GRAPHS / 'xor.yaml')!r})\n"
        "reduction = gdln.reduce(problem, lump='full', b0=0.1)\n"
        "for _ in range(5):\n"
        "    gdln.solve(reduction, t_max=10)\n"
        "gdln.solve(reduction, t_max=10, method='dop853')\n"
        "solve_batch(reduction, [0.5, 1.0, 2.0], t_max=10)\n"
        "print('numba' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "GDLN_NO_NUMBA"}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "False"
