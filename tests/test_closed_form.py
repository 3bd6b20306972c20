"""The closed form in the angle theta (B = sqrt(k) sinh(theta), issue 12 item 4) against
the numeric solve of the reduced ODE, and symbolically against the ODE it came from."""

from __future__ import annotations

import json

import numpy as np
import pytest
import sympy as sp
from helpers import load
from scipy.integrate import quad, solve_ivp

import gdln

RTOL_THETA = 1e-8
# routing under full: C = M B1(0)^2 - B2(0)^2 > 0 for equal initial values (sinh), and
# C < 0 when the shared edge starts larger (cosh)
CASES = [
    ({"M": 3, "K": 2}, 0.1),
    ({"M": 7, "K": 4}, 0.1),
    ({"M": 3, "K": 2}, {"default": 0.1, "h1->h2": 0.5}),
]


def system_of(params: dict, init: object) -> gdln.ReducedSystem:
    (system,) = gdln.reduce(load("routing", **params), lump="full", b0=init).systems
    return system


@pytest.mark.parametrize(("params", "init"), CASES)
def test_theta_form_is_the_ode_in_theta(params: dict, init: object) -> None:
    # g(theta) dB/dtheta == f(B(theta)), and theta(B(theta)) == theta, as sympy identities
    system = system_of(params, init)
    (B,) = system.variables
    form = {key: f.expr for key, f in system.closed_form.items()}
    theta = sp.Symbol("theta", real=True)
    (C,) = system.constants
    sign = sp.sign(system.constants[C])
    b_of_theta = (sp.sqrt(C) * sp.sinh(theta)) if sign > 0 else sp.sqrt(-C) * sp.cosh(theta)
    assert str(form["theta"].func) == ("asinh" if sign > 0 else "acosh")
    residual = form["theta_rhs"] * sp.diff(b_of_theta, theta) - system.rhs[B].subs(B, b_of_theta)
    values = {C: system.constants[C]} | {s: v[0] for s, v in system.symbols.items()}
    for x in (0.3, 1.1, 2.0):
        assert abs(float(residual.subs(values).subs(theta, x))) < 1e-12
        back = form["theta"].subs(B, b_of_theta).subs(values).subs(theta, x)
        assert float(back) == pytest.approx(x, rel=1e-14)


@pytest.mark.parametrize(("params", "init"), CASES)
def test_theta_closed_form_matches_the_numeric_solve(params: dict, init: object) -> None:
    system = system_of(params, init)
    reduction = gdln.reduce(load("routing", **params), lump="full", b0=init)
    (B,) = system.variables
    trajectory = gdln.solve(reduction, t_max=12, points=13, rtol=1e-12, atol=1e-14)
    form = {key: f.expr for key, f in system.closed_form.items()}
    (C,) = system.constants
    integral = form["t_theta"]
    (phi, lower, upper) = integral.limits[0]
    b0 = float(system.initial[B])
    checked = 0
    for j in range(len(system.modes)):
        values = {s: v[j] for s, v in system.symbols.items()} | {C: system.constants[C]}
        theta_of_b = sp.lambdify(B, form["theta"].subs(values), "math")
        g = sp.lambdify(sp.Symbol("theta", real=True), form["theta_rhs"].subs(values), "math")
        integrand = sp.lambdify(phi, integral.function.subs(values), "math")
        theta0 = float(lower.subs(values).subs(sp.Symbol(f"{B}_0", positive=True), b0))
        assert theta0 == pytest.approx(theta_of_b(b0), rel=1e-15)
        thetas = np.array([theta_of_b(b) for b in trajectory.series[str(B)][:, j]])
        # theta(t) by integrating tau dtheta/dt = g(theta) equals theta(B(t)) of the ODE
        own = solve_ivp(
            lambda _t, y, g=g: [g(y[0])],
            (0, trajectory.t[-1]),
            [theta0],
            t_eval=trajectory.t,
            rtol=1e-12,
            atol=1e-14,
            method="DOP853",
        )
        np.testing.assert_allclose(own.y[0], thetas, rtol=RTOL_THETA)
        # t(theta) at the ODE's theta(t) gives back t, where t(theta) is well conditioned:
        # near the fixed point g -> 0, and dt = dtheta / g amplifies any rounding of theta
        speeds = np.abs([g(th) for th in thetas])
        for t, th, speed in zip(trajectory.t[1:], thetas[1:], speeds[1:], strict=True):
            if speed < 1e-2 * speeds.max():
                continue
            value = quad(integrand, theta0, th, epsabs=1e-13, epsrel=1e-12, limit=200)[0]
            assert value == pytest.approx(t, rel=RTOL_THETA)
            checked += 1
        assert upper == sp.Symbol("theta", real=True)
    assert checked >= 8
    assert np.ptp(trajectory.series[str(B)]) > 0.5  # the run passes the learning transition


def test_no_theta_form_without_a_conserved_constant() -> None:
    (system,) = gdln.reduce(load("xor"), lump="full").systems
    assert "theta" not in system.closed_form and str(system.variables[0]) in system.closed_form


def test_derive_prints_the_theta_form() -> None:
    reduction = gdln.reduce(load("routing", M=3, K=2), lump="full", b0=0.1)
    (system,) = reduction.systems
    text = gdln.format_derivation(reduction, "text")
    assert "  closed form theta(B2) = asinh(B2/sqrt(C))" in text
    assert "  closed form tau dtheta/dt = " in text and "  closed form t(theta) = " in text
    latex = gdln.format_derivation(reduction, "latex")
    assert r"\tau \frac{d\theta}{dt} = " in latex and r"t(\theta) = \int" in latex
    printed = json.loads(gdln.format_derivation(reduction, "json"))["systems"][0]["closed_form"]
    names = {"theta": sp.Symbol("theta", real=True), "C": sp.Symbol("C", real=True)}
    names |= {str(s): s for s in system.symbols} | {"B2": system.variables[0]}
    for key in ("theta", "theta_rhs"):
        assert (
            sp.simplify(sp.sympify(printed[key], locals=names) - system.closed_form[key].expr) == 0
        )
