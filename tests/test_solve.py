"""Numeric solutions against closed forms and properties of gradient flow."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import sympy as sp
from helpers import GRAPHS, RTOL_ODE, full_context_losses, load

import gdln


def test_ode_matches_logistic_closed_form() -> None:
    reduction = gdln.reduce(load("xor"), lump="full", b0=0.05)
    trajectory = gdln.solve(reduction, t_max=12, points=25)
    (system,) = reduction.systems
    (B,) = system.variables
    closed = system.closed_form[str(B)].expr.subs({k: v[0] for k, v in system.symbols.items()})
    t, b0 = sorted(closed.free_symbols, key=str)[::-1]
    fn = sp.lambdify(t, closed.subs(b0, sp.Rational(1, 20)), "numpy")
    np.testing.assert_allclose(trajectory.series[str(B)][:, 0], fn(trajectory.t), rtol=RTOL_ODE)


@pytest.mark.parametrize("lump", ["none", "symmetry", "balanced", "full"])
def test_every_lumping_gives_the_same_loss(lump: str) -> None:
    problem = load("routing", M=4, K=2)
    reference = gdln.solve(gdln.reduce(problem, lump="none", b0=0.1), t_max=30, points=31)
    trajectory = gdln.solve(gdln.reduce(problem, lump=lump, b0=0.1), t_max=30, points=31)
    np.testing.assert_allclose(trajectory.loss, reference.loss, rtol=RTOL_ODE, atol=1e-9)


@pytest.mark.parametrize("lr", [None, 0.1])
def test_scalar_and_vectorised_right_hand_sides_agree(
    lr: float | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Small states are compiled into one scalar function, large ones stay numpy-vectorised;
    # forcing the vectorised form on the same system must give the same solution.
    from gdln.reduction import _numeric

    problem = load("routing", M=4, K=2)
    scalar = gdln.solve(
        gdln.reduce(problem, lump="none", b0=0.1),
        t_max=20,
        dynamics="flow" if lr is None else "gd-map",
        lr=lr,
    )
    monkeypatch.setattr(_numeric, "SCALAR_STATE_MAX", 0)
    vectorised = gdln.solve(
        gdln.reduce(problem, lump="none", b0=0.1),
        t_max=20,
        dynamics="flow" if lr is None else "gd-map",
        lr=lr,
    )
    # the map agrees to rounding; the adaptive ODE steps may differ at the solver tolerance
    rtol = 1e-12 if lr else RTOL_ODE
    np.testing.assert_allclose(scalar.loss, vectorised.loss, rtol=rtol, atol=1e-12)
    for name, values in scalar.series.items():
        np.testing.assert_allclose(values, vectorised.series[name], rtol=rtol, atol=1e-12)


def test_loss_never_increases_under_gradient_flow() -> None:
    trajectory = gdln.solve(gdln.reduce(load("crosspath"), b0=0.1), t_max=20, points=400)
    assert np.all(np.diff(trajectory.loss) <= 1e-9)
    assert trajectory.loss[-1] < trajectory.loss[0]


def unequal_routing(tmp_path: Path) -> gdln.Problem:
    """Routing (Fig. 4) with context probabilities 2(i + 1) / (K M (M + 1)), unequal in i."""
    text = (GRAPHS / "routing.yaml").read_text()
    assert text.count("probability: 1/(K*M)") == 1
    text = text.replace("probability: 1/(K*M)", 'probability: "2*(i + 1)/(K*M*(M + 1))"')
    path = tmp_path / "routing_unequal.yaml"
    path.write_text(text)
    return gdln.load(path, params={"M": "3", "K": "2", "hidden": "6"})


@pytest.mark.parametrize("lr", [None, 0.1])
def test_context_losses_average_to_the_loss(tmp_path: Path, lr: float | None) -> None:
    problem = unequal_routing(tmp_path)
    p = np.array([float(c.probability) for c in problem.task.contexts])
    assert p.sum() == pytest.approx(1) and p.max() == pytest.approx(3 * p.min())
    reduction = gdln.reduce(problem, lump="symmetry", b0=0.2)
    trajectory = gdln.solve(
        reduction, t_max=10, points=11, dynamics="flow" if lr is None else "gd-map", lr=lr
    )
    context_loss = trajectory.series["context_loss"]
    np.testing.assert_allclose(context_loss @ p, trajectory.loss, rtol=1e-12)
    assert np.abs(context_loss.mean(axis=1) - trajectory.loss).max() > 1e-3  # p matters
    assert trajectory.loss[0] == pytest.approx(float(gdln.reduce(problem).constant), rel=1e-2)
    # each context's loss is that of the full network, from the decoupled weights (Eq. 9)
    (system,) = reduction.systems
    for k in (0, 5, 10):
        weights = {}
        for v in [*system.variables, *system.eliminated]:
            for edge in system.edges[v]:
                left, right, slots = reduction.edge_bases(edge)
                b = trajectory.series[str(v)][k, [system.modes.index(a) for a in slots]]
                weights[edge] = (left * b) @ right.T
        full = full_context_losses(problem, weights)
        np.testing.assert_allclose(context_loss[k], full, rtol=1e-10)


def test_gd_map_approaches_ode_at_first_order_in_lr() -> None:
    reduction = gdln.reduce(load("routing", M=4, K=2), lump="symmetry", b0=0.2)
    ode = gdln.solve(reduction, t_max=8, points=9)
    errors = []
    for lr in (0.02, 0.01):
        gd = gdln.solve(
            reduction, t_max=8, dynamics="flow" if lr is None else "gd-map", lr=lr, points=9
        )
        errors.append(np.abs(gd.loss - ode.loss).max())
    assert 1.7 < errors[0] / errors[1] < 2.3  # halving lr halves the error


def test_bad_solve_settings() -> None:
    reduction = gdln.reduce(load("chain"))
    with pytest.raises(
        gdln.GdlnError, match=r"t_max \(--t-max\): expected a finite number > 0, got -1"
    ):
        gdln.solve(reduction, t_max=-1)
    with pytest.raises(gdln.GdlnError, match=r"lr \(--lr\): expected a finite number > 0, got 0"):
        gdln.solve(reduction, t_max=1, dynamics="gd-map", lr=0)
    with pytest.raises(
        gdln.GdlnError,
        match=r"chain\.yaml: the gradient-descent map diverged at step \d+ \(t = [\d.]+ tau, "
        r"lr=0\.9\), where [bB]\w+ = -?(inf|nan|[\d.e+]+) in mode \d; lower lr",
    ):
        gdln.solve(gdln.reduce(load("chain"), b0=3), t_max=50, dynamics="gd-map", lr=0.9)


@pytest.mark.parametrize("scalar", [True, False])
@pytest.mark.parametrize("lr", [None, 100.0])
def test_overflow_is_one_clear_error(
    scalar: bool, lr: float | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # math-compiled right-hand sides raise OverflowError, numpy ones return inf: both are
    # reported with the time (or step), the variable and its value
    from gdln.reduction import _numeric

    if not scalar:
        monkeypatch.setattr(_numeric, "SCALAR_STATE_MAX", 0)
    reduction = gdln.reduce(load("routing"), lump="full", b0=1e200 if lr is None else 0.1)
    match = (
        r"routing\.yaml: the ODE overflowed at t = 0 tau, where B\d = 1e\+200 in mode \d"
        if lr is None
        else r"routing\.yaml: the gradient-descent map diverged at step \d+ \(t = \d+ tau"
    )
    with pytest.raises(gdln.GdlnError, match=match):
        gdln.solve(reduction, t_max=1000, dynamics="flow" if lr is None else "gd-map", lr=lr)


def test_stalled_ode_solver_is_one_clear_error() -> None:
    reduction = gdln.reduce(load("routing"), lump="full", b0=1e40)
    with pytest.raises(
        gdln.GdlnError,
        match=r"routing\.yaml: the ODE solver made no progress in \d+ right-hand-side calls "
        r"at t = [\de.+-]+ tau, where B\d = 1e\+40",
    ):
        gdln.solve(reduction, t_max=100)


@pytest.mark.parametrize("init", [-0.1, 0.1])
def test_every_lumping_gives_the_same_variables_for_either_sign(init: float) -> None:
    # the variable that lump="full" eliminates with the conserved quantity keeps the sign
    # of its initial value (Eq. 15 takes a square root)
    problem = load("routing", M=4, K=2)
    free = gdln.reduce(problem, lump="none", b0=init)
    reference = gdln.solve(free, t_max=20, points=21)
    (free_system,) = free.systems
    by_edge = {free_system.edges[v][0]: reference.series[str(v)] for v in free_system.variables}
    for lump in ("symmetry", "balanced", "full"):
        reduction = gdln.reduce(problem, lump=lump, b0=init)
        (system,) = reduction.systems
        trajectory = gdln.solve(reduction, t_max=20, points=21)
        for v in [*system.variables, *system.eliminated]:
            for edge in system.edges[v]:
                np.testing.assert_allclose(
                    trajectory.series[str(v)], by_edge[edge], rtol=RTOL_ODE, atol=1e-9
                )
        assert np.all(np.sign(trajectory.series[str(v)][0]) == np.sign(init))


@pytest.mark.parametrize(
    ("init", "match"),
    [
        ("abc", r"chain\.yaml: b0 \(--b0\): expected a real number, got 'abc'$"),
        (float("nan"), r"chain\.yaml: b0 \(--b0\): expected a real number, got nan$"),
        ({"x->h1": "1/"}, r"b0 \(--b0\): \['x->h1'\]: expected a real number, got '1/'$"),
        (1j, r"chain\.yaml: b0 \(--b0\): expected a real number, got 1j$"),
    ],
)
def test_bad_initial_values(init: object, match: str) -> None:
    with pytest.raises(gdln.GdlnError, match=match):
        gdln.reduce(load("chain"), b0=init)


@pytest.mark.parametrize(
    ("name", "params", "init"),
    [("routing", {"M": 7, "K": 4}, 0.1), ("xor", {}, 0.05), ("chain", {}, 0.2)],
)
def test_formal_separable_solution_inverts_the_ode(name: str, params: dict, init: float) -> None:
    # closed_form["t"] = int_{B_0}^{B} dx / f(x) (the formal solution of Eq. 15): evaluated
    # by quadrature at the ODE's B(t) it must give back t, in every mode
    from scipy.integrate import quad

    reduction = gdln.reduce(load(name, **params), lump="full", b0=init)
    trajectory = gdln.solve(reduction, t_max=6, points=7)
    checked = 0
    for k, system in enumerate(reduction.systems):
        if "t" not in system.closed_form:
            continue
        (B,) = system.variables
        integral = system.closed_form["t"].expr
        (x, lower, upper) = integral.limits[0]
        suffix = "" if len(reduction.systems) == 1 else f"@{k}"
        for j, _alpha in enumerate(system.modes):
            values = {s: v[j] for s, v in system.symbols.items()} | dict(system.constants)
            integrand = sp.lambdify(x, integral.function.subs(values), "math")
            start = float(system.initial[B])
            assert lower.name == f"{B}_0" and upper == B
            for t, b in zip(
                trajectory.t[1:], trajectory.series[f"{B}{suffix}"][1:, j], strict=True
            ):
                assert quad(integrand, start, b, epsabs=1e-12, epsrel=1e-10)[0] == pytest.approx(
                    t, rel=1e-6
                )
                checked += 1
    assert checked >= 6


@pytest.mark.parametrize("lr", [None, 0.1])
@pytest.mark.parametrize("scalar", [True, False])
def test_more_than_64_variables(
    lr: float | None, scalar: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # np.broadcast takes at most 64 arrays; race with lump="none" has 80 edge variables
    from gdln.reduction import _numeric

    if not scalar:
        monkeypatch.setattr(_numeric, "SCALAR_STATE_MAX", 0)
    problem = load("race", M=8, P=4, hidden=2)
    free = gdln.reduce(problem, lump="none", b0=0.4)
    (system,) = free.systems
    assert len(system.variables) > 64
    trajectory = gdln.solve(
        free, t_max=12, dynamics="flow" if lr is None else "gd-map", lr=lr, points=7
    )
    lumped = gdln.solve(
        gdln.reduce(problem, lump="symmetry", b0=0.4),
        t_max=12,
        dynamics="flow" if lr is None else "gd-map",
        lr=lr,
        points=7,
    )
    rtol = 1e-12 if lr else RTOL_ODE
    np.testing.assert_allclose(trajectory.loss, lumped.loss, rtol=rtol)
    assert trajectory.loss[-1] < 0.9 * trajectory.loss[0]


def test_tied_system_is_the_reduced_one_before_elimination() -> None:
    # lump="full" eliminates variables through conserved quantities (Eq. 15); the tied
    # system (ReducedSystem.tied, what the gradient-descent map iterates) keeps them
    # dynamical. On the manifold where Eq. (15) holds, its right-hand sides must be the
    # reduced ones, and the chain rule's for the eliminated variables; checked at random
    # points of every mode
    reduction = gdln.reduce(load("routing", M=4, K=2), lump="full", b0=0.1)
    (full,) = reduction.systems
    tied = full.tied()
    assert full.eliminated and not tied.eliminated and not tied.constants
    assert set(tied.variables) == set(full.variables) | set(full.eliminated)
    rng = np.random.default_rng(1)
    checked = 0
    for j in range(len(full.modes)):
        data = {s: v[j] for s, v in full.symbols.items()}
        for _ in range(3):
            point = {v: sp.Float(rng.uniform(0.2, 1.5)) for v in full.variables}
            point |= {c: sp.Float(rng.uniform(0.1, 0.5)) for c in full.constants}
            on_manifold = point | {e: x.xreplace(point | data) for e, x in full.eliminated.items()}
            for v in full.variables:
                expected = float(full.rhs[v].xreplace(point | data))
                got = float(tied.rhs[v].xreplace(on_manifold | data))
                assert got == pytest.approx(expected, rel=1e-12, abs=1e-14)
            for e, x in full.eliminated.items():
                chain = sum(sp.diff(x, v) * full.rhs[v] for v in full.variables)
                expected = float(chain.xreplace(point | data))
                got = float(tied.rhs[e].xreplace(on_manifold | data))
                assert got == pytest.approx(expected, rel=1e-12, abs=1e-14)
                checked += 1
    assert checked >= 6
    assert tied.tied() is tied and full.tied() is tied
