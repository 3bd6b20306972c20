"""One system by LSODA (``gdln.solve``'s default stepper) within 1e-10 of L(0) of a tight
independent solution: scipy's solve_ivp DOP853 at rtol 1e-13 on the same right-hand side
(issue 38 part 3: the exactness read off the GD-map comparisons should not end at 1e-8
in the ODE). No timings."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import load
from scipy.integrate import solve_ivp

import gdln


@pytest.mark.parametrize(
    ("name", "params", "lump", "b0"),
    [
        ("routing", {"M": 7, "K": 4, "hidden": 64}, "symmetry", 0.1),  # Fig. 4e
        ("xor", {}, "full", 0.05),
    ],
)
def test_one_solve_within_1e_10_of_the_initial_loss(name, params, lump, b0):
    reduction = gdln.reduce(load(name, **params), lump=lump, b0=b0)
    trajectory = gdln.solve(reduction, t_max=40.0)
    assert trajectory.meta["integrator"] == "lsoda"
    flow = reduction.numeric_flow()
    c = np.asarray(flow.constants, dtype=float)
    reference = solve_ivp(
        lambda t, y: flow.rhs(y, c), (0.0, 40.0), flow.y0, method="DOP853",
        t_eval=trajectory.t, rtol=1e-13, atol=1e-16,
    )  # fmt: skip
    assert reference.success
    states = reference.y.T[:, :, None]
    loss = flow.record(states, c[:, None]).loss[:, 0]
    assert abs(loss[0] - trajectory.loss[0]) < 1e-14 * loss[0]
    error = np.max(np.abs(trajectory.loss - loss)) / loss[0]
    assert error <= 1e-10, error
