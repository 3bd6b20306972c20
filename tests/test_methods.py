"""The stepper table behind gdln.solve(method=...) and solve_batch: every method against
the closed form of xor (Eq. 21's logistic), a batch of one against the single solve (one
path), the refusals, and the protocol that lets solve take any route's dynamics."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import sympy as sp
from helpers import GRAPHS, RTOL_ODE, load, run_cli, write

import gdln
from gdln.settings import METHODS
from gdln.solution import _dop853, solve_batch
from gdln.solution._methods import AUTO, STEPPERS

SCALES = np.array([1.0, 0.3, 0.05])


def logistic(reduction: gdln.Reduction, scale: float, times: np.ndarray) -> np.ndarray:
    """The explicit closed form of xor under lump="full", from ``scale`` times b(0)."""
    (system,) = reduction.systems
    (B,) = system.variables
    closed = system.closed_form[str(B)].expr.subs({k: v[0] for k, v in system.symbols.items()})
    t, b0 = sorted(closed.free_symbols, key=str)[::-1]
    start = sp.nsimplify(scale) * sp.sympify(system.initial[B])
    return sp.lambdify(t, closed.subs(b0, start), "numpy")(times)


def test_the_table_names_its_steppers() -> None:
    assert set(STEPPERS) == {"dop853", "lsoda"}
    assert all(stepper.name == name for name, stepper in STEPPERS.items())


def test_every_public_method_name_has_its_stepper() -> None:
    # gdln.settings.METHODS is the one list of public names and meanings; the steppers are
    # keyed by the same names, "auto" being the rule that picks among them
    assert set(METHODS) == {AUTO, *STEPPERS}


@pytest.mark.parametrize(
    ("method", "integrator"),
    [("auto", "lsoda"), ("lsoda", "lsoda"), ("dop853", "dop853-numpy")],
)
def test_every_method_matches_the_logistic_closed_form(method: str, integrator: str) -> None:
    reduction = gdln.reduce(load("xor"), lump="full", b0=0.05)
    trajectory = gdln.solve(reduction, t_max=12, points=25, method=method)
    assert trajectory.meta["integrator"] == integrator and trajectory.meta["method"] == "ode"
    (B,) = reduction.systems[0].variables
    exact = logistic(reduction, 1.0, trajectory.t)
    np.testing.assert_allclose(trajectory.series[str(B)][:, 0], exact, rtol=RTOL_ODE)


@pytest.mark.parametrize(
    ("method", "integrator"),
    [("auto", "dop853-numpy"), ("lsoda", "lsoda"), ("dop853", "dop853-numpy")],
)
def test_every_method_of_a_batch_matches_the_closed_form(method: str, integrator: str) -> None:
    reduction = gdln.reduce(load("xor"), lump="full", b0=0.05)
    (B,) = reduction.systems[0].variables
    trajectories = solve_batch(reduction, SCALES, t_max=12, points=25, method=method)
    for scale, trajectory in zip(SCALES, trajectories, strict=True):
        assert trajectory.meta["integrator"] == integrator
        exact = logistic(reduction, scale, trajectory.t)
        np.testing.assert_allclose(trajectory.series[str(B)][:, 0], exact, rtol=RTOL_ODE)


@pytest.mark.parametrize(("name", "lump"), [("routing", "symmetry"), ("xor", "full")])
def test_a_batch_of_one_is_the_single_solve(name: str, lump: str) -> None:
    # one path: a single solve is a batch of one, stepped the same way to the last bit
    reduction = gdln.reduce(load(name), lump=lump, b0=0.1)
    single = gdln.solve(reduction, t_max=20, points=41)
    (one,) = solve_batch(reduction, [1.0], t_max=20, points=41)
    assert one.meta["integrator"] == single.meta["integrator"] == "lsoda"
    assert np.array_equal(one.loss, single.loss)
    assert set(one.series) == set(single.series)
    for name, values in single.series.items():
        assert np.array_equal(one.series[name], values), name


def test_method_reaches_the_stepper_from_every_door(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the setting method, from the graph file's solve: section, --method or solve(method=),
    # picks the stepper; the trajectory records the name asked for and the stepper used
    text = (GRAPHS / "xor.yaml").read_text(encoding="utf-8")
    assert "solve: {b0: 0.01, t_max: 10}" in text
    preset = "solve: {b0: 0.01, t_max: 10, method: dop853}"
    path = write(tmp_path, text.replace("solve: {b0: 0.01, t_max: 10}", preset), "xor.yaml")
    problem = gdln.load(path)
    from_file = gdln.solve(problem, points=5)
    assert (from_file.meta["ode_method"], from_file.meta["integrator"]) == (
        "dop853",
        "dop853-numpy",
    )
    called = gdln.solve(problem, points=5, method="lsoda")
    assert (called.meta["ode_method"], called.meta["integrator"]) == ("lsoda", "lsoda")
    np.testing.assert_allclose(from_file.loss, called.loss, rtol=RTOL_ODE)
    # a batch takes t_max, points and method from the file too
    batch = solve_batch(gdln.reduce(problem), [1.0, 0.5])
    assert batch[0].t[-1] == 10 and len(batch[0].t) == problem.settings.points
    assert (batch[1].meta["ode_method"], batch[1].meta["integrator"]) == ("dop853", "dop853-numpy")
    # the map has no stepper: the file's method does not stand in its way
    assert gdln.solve(problem, points=5, dynamics="gd-map", lr=0.5).meta["method"] == "gd-map"
    out = tmp_path / "t.json"
    code, _, err = run_cli(
        ["solve", str(path), "--points", "5", "--method", "lsoda", "-o", str(out)], capsys
    )
    assert code == 0, err
    meta = json.loads(out.read_text(encoding="utf-8"))["meta"]
    assert (meta["ode_method"], meta["integrator"]) == ("lsoda", "lsoda")


def test_solve_batch_n_points_is_the_old_spelling_of_points() -> None:
    reduction = gdln.reduce(load("xor"), lump="full", b0=0.05)
    with pytest.warns(
        gdln.GdlnDeprecationWarning,
        match=r"solve_batch\(n_points=\.\.\.\) is now solve_batch\(points",
    ):
        (trajectory,) = solve_batch(reduction, [1.0], t_max=1, n_points=3)
    assert len(trajectory.t) == 3


def test_unknown_method_is_refused() -> None:
    reduction = gdln.reduce(load("xor"), lump="full", b0=0.05)
    match = r"xor\.yaml: method \(--method\): expected one of auto, dop853, lsoda; got 'rk4'$"
    with pytest.raises(gdln.GdlnError, match=match):
        gdln.solve(reduction, t_max=1, method="rk4")
    with pytest.raises(gdln.GdlnError, match=match):
        solve_batch(reduction, SCALES, t_max=1, method="rk4")


def test_a_method_with_the_map_is_refused() -> None:
    reduction = gdln.reduce(load("xor"), lump="full", b0=0.05)
    with pytest.raises(
        gdln.GdlnError,
        match=r"^method \(--method\): 'dop853' chooses an ODE stepper, but dynamics 'gd-map' "
        r"iterates the gradient-descent map \(lr=0\.1\); leave method 'auto'",
    ):
        gdln.solve(reduction, t_max=1, dynamics="gd-map", lr=0.1, method="dop853")


def test_dop853_asked_for_names_why_it_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    reduction = gdln.reduce(load("routing"), lump="symmetry", b0=0.1)
    monkeypatch.setattr(_dop853, "STIFF_STEPS", 0)  # 3 points: at most 6 steps
    with pytest.raises(
        gdln.GdlnError,
        match=r"^.*routing\.yaml: the ODE needed more than 6 DOP853 steps \(a stiff system: "
        r"method='lsoda' steps it\) at t = [\d.e+-]+ tau, where B\d = [\d.e+-]+ in mode \d; ",
    ):
        gdln.solve(reduction, t_max=40, points=3, method="dop853")
    assert gdln.solve(reduction, t_max=40, points=3).meta["integrator"] == "lsoda"


def test_dop853_overflow_is_one_clear_error() -> None:
    reduction = gdln.reduce(load("xor"), lump="full", b0=1e200)
    with pytest.raises(
        gdln.GdlnError,
        match=r"xor\.yaml: the ODE overflowed at t = 0 tau, where B\d = -?(inf|nan|[\d.e+]+) "
        r"in mode \d; lower b0 \(--b0\) or t_max$",
    ):
        gdln.solve(reduction, t_max=10, method="dop853")


class Wrapped:
    """Dynamics of no known route: only the protocol (and the problem, for its settings)."""

    def __init__(self, inner: gdln.Reduction) -> None:
        self.inner = inner
        self.problem = inner.problem

    def numeric_flow(self, *, gd_map: bool = False) -> gdln.reduction.NumericFlow:
        return self.inner.numeric_flow(gd_map=gd_map)


@pytest.mark.parametrize("lr", [None, 0.1])
def test_solve_needs_only_the_protocol(lr: float | None) -> None:
    reduction = gdln.reduce(load("routing"), lump="full", b0=0.1)
    dynamics = "flow" if lr is None else "gd-map"
    direct = gdln.solve(reduction, t_max=10, points=11, dynamics=dynamics, lr=lr)
    wrapped = gdln.solve(Wrapped(reduction), t_max=10, points=11, dynamics=dynamics, lr=lr)  # type: ignore[arg-type]
    assert np.array_equal(direct.loss, wrapped.loss)
    assert wrapped.meta == direct.meta


def test_solve_batch_takes_the_moment_route() -> None:
    # the expected dynamics of the moment route: scale k of the batch is the dynamics
    # built from scale k times the initial value, solved on its own
    problem = load("routing", M=4, K=2)
    dynamics = gdln.expected_dynamics(problem, b0=0.2)
    trajectories = solve_batch(dynamics, [1.0, 0.5], t_max=15, points=16)
    for scale, trajectory in zip([1.0, 0.5], trajectories, strict=True):
        alone = gdln.solve(gdln.expected_dynamics(problem, b0=0.2 * scale), t_max=15, points=16)
        assert trajectory.meta["route"] == "moments"
        np.testing.assert_allclose(trajectory.loss, alone.loss, rtol=RTOL_ODE)
        for name, values in alone.series.items():
            np.testing.assert_allclose(trajectory.series[name], values, rtol=RTOL_ODE, atol=1e-9)


def test_a_batch_of_one_names_its_scale() -> None:
    reduction = gdln.reduce(load("xor"), lump="full", b0=1)
    with pytest.raises(
        gdln.GdlnError,
        match=r"xor\.yaml: the ODE overflowed at t = 0 tau, where B\d = 1e\+200 in mode 0 "
        r"for scale 1e\+200; lower the scale or t_max$",
    ):
        solve_batch(reduction, [1e200], t_max=10)
