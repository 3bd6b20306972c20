"""The fast ODE paths (Fortran LSODA, the batch of initial scales) against independent
solutions: scipy's solve_ivp at tight tolerance, and one solve per scale. No timings."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import load
from scipy.integrate import solve_ivp

import gdln
from gdln.solution import _batch, _fast, _solve, solve_batch

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


def reference(flow: _solve._Flow, times: np.ndarray, rtol: float, method: str) -> np.ndarray:
    """solve_ivp on the same right-hand side: states ``(state, T)``."""
    result = solve_ivp(
        lambda t, y: flow.rhs(y), (0, times[-1]), flow.y0, method=method, t_eval=times,
        rtol=rtol, atol=rtol * 1e-2,
    )  # fmt: skip
    assert result.success
    return result.y


@pytest.mark.parametrize(("name", "params", "lump", "init"), SHIPPED)
def test_fortran_lsoda_is_as_accurate_as_solve_ivp(
    name: str, params: dict, lump: str, init: float
) -> None:
    # against a tight DOP853 reference, today's fast path must be within 1e-10 relative of
    # it or no further from it than solve_ivp's LSODA at the same tolerances
    reduction = gdln.reduce(load(name, **params), lump=lump, b0=init)
    flow = _solve._reduction_flow(reduction)
    times, states = _solve._integrate_ode(flow, 20.0, n_points=101, rtol=1e-10, atol=1e-12)
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
    numeric = _solve._compiled(reduction.systems[0])
    rng = np.random.default_rng(0)
    y = rng.normal(size=numeric.y0.size)
    jacobian = numeric.jacobian(y)
    h = 1e-6
    columns = [
        (numeric.scalar(y + h * e) - numeric.scalar(y - h * e)) / (2 * h) for e in np.eye(len(y))
    ]
    np.testing.assert_allclose(jacobian, np.array(columns).T, rtol=1e-6, atol=1e-8)


def test_large_initial_value_through_the_stiff_end() -> None:
    # a large initial value: fast race, then slow convergence (where LSODA may go to BDF)
    reduction = gdln.reduce(load("routing", M=4, K=2), lump="symmetry", b0=3.0)
    flow = _solve._reduction_flow(reduction)
    times, states = _solve._integrate_ode(flow, 40.0, n_points=41, rtol=1e-10, atol=1e-12)
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
    monkeypatch.setattr(_batch, "FAST_BATCH", 1 if compiled else 10**9)
    problem = load("routing", M=7, K=4)
    scales = np.array([0.3, 0.05, 0.12, 0.02])  # unsorted on purpose
    trajectories = solve_batch(gdln.reduce(problem, lump=lump, b0=1), scales, t_max=30)
    assert len(trajectories) == len(scales)
    for scale, trajectory in zip(scales, trajectories, strict=True):
        assert trajectory.meta["init_scale"] == scale
        one = gdln.reduce(problem, lump=lump, b0=str(scale))
        flow = _solve._reduction_flow(one)
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
    from gdln.solution import _batch

    monkeypatch.setattr(_batch, "CHUNK", 2)
    reduction = gdln.reduce(load("xor"), lump="full", b0=1)
    scales = np.array([0.2, 0.01, 0.1, 0.05, 0.3])
    trajectories = solve_batch(reduction, scales, t_max=10, n_points=11)
    for scale, trajectory in zip(scales, trajectories, strict=True):
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
def test_compiled_stepper_within_1e10_of_tight_solve_ivp(
    name: str, params: dict, lump: str, init: float
) -> None:
    pytest.importorskip("numba")
    reduction = gdln.reduce(load(name, **params), lump=lump, b0=init)
    flow = _solve._reduction_flow(reduction)
    assert flow.fast is not None
    times = np.linspace(0.0, 20.0, 101)
    assert flow.fast(times, 1e-10, 1e-12) is None  # the first solve is left to LSODA
    states = flow.fast(times, 1e-10, 1e-12)
    assert states is not None
    exact = reference(flow, times, 1e-13, "DOP853")
    scale = np.abs(exact).max(axis=1, keepdims=True)
    assert (np.abs(states.T - exact) / scale).max() <= 1e-10
    # and gdln.solve takes this path from now on
    trajectory = gdln.solve(reduction, t_max=20.0, points=101)
    (system, *_) = reduction.systems
    m = len(system.modes)
    for i, v in enumerate(system.variables):
        suffix = "" if len(reduction.systems) == 1 else "@0"
        np.testing.assert_array_equal(
            trajectory.series[f"{v}{suffix}"], states[:, i * m : (i + 1) * m]
        )


def test_compiled_stepper_failing_leaves_the_error_to_lsoda() -> None:
    pytest.importorskip("numba")
    reduction = gdln.reduce(load("routing"), lump="full", b0=1e200)
    match = r"routing\.yaml: the ODE overflowed at t = 0 tau, where B\d = 1e\+200 in mode \d"
    for _ in range(3):  # LSODA, then the compiled stepper, which stops and hands over
        with pytest.raises(gdln.GdlnError, match=match):
            gdln.solve(reduction, t_max=1000)


def test_no_numba_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GDLN_NO_NUMBA", "1")
    assert not _fast.available()
    flow = _solve._reduction_flow(gdln.reduce(load("xor"), lump="full", b0=0.1))
    assert flow.fast is None
