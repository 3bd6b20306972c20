"""DOP853 (gdln/solution/_dop853.py and its tableau) against what it must be: the order
conditions of an explicit Runge-Kutta method of order 8 with embedded estimates of order
5 and 3 (Hairer, Norsett & Wanner, Solving ODEs I, Sec. II.2 and II.10), the local error
of order 9 measured on y' = y, closed forms of linear equations across a batch, and one
clear stop where it cannot go on. No timings."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gdln.solution import _dop853
from gdln.solution._dop853_tableau import B_HAT3, E3, E5, STAGES, A, B, C
from gdln.solution._stepper import Stopped


def test_tableau_is_explicit_and_consistent() -> None:
    assert A.shape == (STAGES, STAGES) and np.all(np.triu(A) == 0)  # explicit
    np.testing.assert_allclose(A.sum(axis=1), C, atol=1e-15)  # c_i = sum_j a_ij


@pytest.mark.parametrize("k", range(8))
def test_order_conditions_of_the_bushy_trees(k: int) -> None:
    # sum_i b_i c_i^k = 1/(k+1) for k < 8 (order 8), and not for k = 8 (not order 9)
    assert B @ C**k == pytest.approx(1 / (k + 1), abs=1e-15)
    assert abs(B @ C**8 - 1 / 9) > 1e-6


@pytest.mark.parametrize("k", range(7))
def test_order_conditions_of_the_tall_trees(k: int) -> None:
    # sum_ij b_i a_ij c_j^k = 1/((k+2)(k+1)): a root with one child carrying k leaves. The
    # entries of A reach tens, so the sum is exact only up to a few ulps of its terms' sizes
    # (the summation order is BLAS's); not order 9 would be off by far more.
    rounding = 8 * np.finfo(float).eps * (np.abs(B) @ np.abs(A) @ C**k)
    assert B @ A @ C**k == pytest.approx(1 / ((k + 2) * (k + 1)), abs=max(rounding, 1e-15))


def test_order_conditions_of_order_4_trees() -> None:
    bushy_and_tall, tallest = B @ (C * (A @ C)), B @ A @ A @ C
    assert bushy_and_tall == pytest.approx(1 / 8, abs=1e-15)
    assert tallest == pytest.approx(1 / 24, abs=1e-15)


def test_embedded_estimates_have_orders_5_and_3() -> None:
    # e5 = b - b5 with b5 of order 5: e5 . c^k = 0 for k < 5; e3 = b - b_hat of order 3
    for k in range(5):
        assert abs(E5 @ C**k) < 1e-15
    assert abs(E5 @ C**5) > 1e-5
    np.testing.assert_allclose(E3, B - B_HAT3)
    for k, exact in enumerate((1, 1 / 2, 1 / 3)):
        assert B_HAT3 @ C**k == pytest.approx(exact, abs=1e-15)
        assert abs(E3 @ C**k) < 1e-15
    assert abs(E3 @ C**3) > 1e-3


def test_local_error_is_of_order_9() -> None:
    # one step of y' = y from y = 1: error against e^h falls as h^9
    def rhs(y: np.ndarray) -> np.ndarray:
        return y.copy()

    errors = []
    for h in (0.4, 0.2):
        y = np.ones((1, 1))
        K = np.empty((STAGES + 1, 1, 1))
        K[0] = rhs(y)
        y_new, _ = _dop853._step(rhs, y, np.array([h]), K, 1e-10, 1e-12)
        errors.append(abs(float(y_new[0, 0]) - math.exp(h)))
    assert 2**9 * 0.8 < errors[0] / errors[1] < 2**9 * 1.25


def test_a_batch_of_linear_equations_matches_their_closed_forms() -> None:
    # y_k' = lam_k y_k, members with rates 0.1 .. 3 and both signs: each its own steps
    rates = np.array([-3.0, -1.0, -0.1, 0.1, 0.5, 1.0])
    times = np.linspace(0.0, 4.0, 9)

    def rhs(y: np.ndarray) -> np.ndarray:
        return rates * y

    y0 = np.array([[1.0, 2.0, -1.0, 0.5, 1.0, 3.0]])
    states = _dop853.dop853(rhs, y0, times, rtol=1e-12, atol=1e-14, max_steps=10_000)
    exact = y0[0] * np.exp(np.outer(times, rates))
    np.testing.assert_allclose(states[:, 0, :], exact, rtol=1e-10, atol=0)
    assert np.array_equal(states[0], y0)  # the start, recorded as it is


def test_stiff_system_stops_with_the_reason() -> None:
    # y' = -1e6 (y - cos t): explicit steps must stay below 3.3e-6, far beyond the budget
    times = np.linspace(0.0, 1.0, 3)

    def rhs(y: np.ndarray) -> np.ndarray:
        return -1e6 * (y - 1.0)

    with pytest.raises(Stopped, match=r"needed more than 106 DOP853 steps \(a stiff system"):
        _dop853.dop853(rhs, np.zeros((1, 2)), times, rtol=1e-10, atol=1e-12, max_steps=106)


def test_blow_up_stops_in_the_member_that_blows_up() -> None:
    # y' = y^2 from y0 = 1 reaches infinity at t = 1; from y0 = 0.1 only at t = 10
    times = np.linspace(0.0, 2.0, 5)
    with pytest.raises(Stopped) as stop:
        _dop853.dop853(
            np.square, np.array([[0.1, 1.0]]), times, rtol=1e-10, atol=1e-12, max_steps=10**5
        )
    assert stop.value.member == 1
    assert stop.value.reason in {"overflowed", "DOP853 step size underflowed"}
    assert 0.99 < stop.value.t < 1.0 + 1e-8  # the singularity, to rounding
