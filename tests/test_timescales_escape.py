"""The escape bookkeeping of gdln.stages against closed forms of small networks.

Each case is a potential whose flow is solved by hand: a tied two-edge pathway grows at
s/sqrt(M); disjoint pathways spend their budgets (Zhang, Latham & Saxe 2024); a depth-L
balanced pathway blows up at 1/((L-2) s); a pathway sharing an edge with a faster one
leaves with order 1 - b/a.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp

from gdln.stages._escape import EXPONENTIAL, POWER, Sizes, escape
from gdln.stages._polynomial import Polynomial, from_sympy


def poly(terms: dict[tuple[int, ...], float]) -> Polynomial:
    return Polynomial(list(terms.values()), list(terms.keys()))


def test_a_tied_pathway_grows_at_s_over_root_m() -> None:
    # x stands for M edges (weight 1/M): dx/dt = s y / M, dy/dt = s x -> rate s / sqrt(M)
    s, M = 3.0, 7.0
    found = escape(poly({(1, 1): s}), np.array([1 / M, 1.0]), Sizes.start(np.ones(2)))
    assert found is not None and found.mechanism == EXPONENTIAL
    assert found.coefficient == pytest.approx(math.sqrt(M) / s, rel=1e-12)
    assert found.escaping == (0, 1) and found.realized


def test_two_pathways_spend_their_budgets() -> None:
    a, b, c = 5.0, 2.0, 0.75
    found = escape(poly({(1, 1, 0, 0): a, (0, 0, 1, 1): b}), np.ones(4), Sizes.start(np.ones(4)))
    assert found.coefficient == pytest.approx(1 / a) and found.escaping == (0, 1)
    np.testing.assert_allclose(found.after.orders(), [0, 0, 1 - b / a, 1 - b / a])
    rest = found.after.take([2, 3])
    second = escape(poly({(1, 1): c}), np.ones(2), rest)  # the residual after the first
    assert second.coefficient == pytest.approx((1 - b / a) / c)
    assert second.realized


def test_a_sign_change_regains_the_lost_budget_generically_only() -> None:
    # first the pathway shrinks along (1, -1) at rate b, then its residual turns to -c:
    # a generic start grows (1, -1) from order 1 + b tau; from (1, 1) exactly it never can
    a, b, c = 5.0, 2.0, 0.75
    found = escape(poly({(1, 1, 0, 0): a, (0, 0, 1, 1): b}), np.ones(4), Sizes.start(np.ones(4)))
    second = escape(poly({(1, 1): -c}), np.ones(2), found.after.take([2, 3]))
    assert second.coefficient == pytest.approx((1 + b / a) / c)
    assert not second.realized
    assert second.direction[0] == pytest.approx(-second.direction[1])


@pytest.mark.parametrize("depth", [3, 4, 5])
def test_a_balanced_deep_pathway_blows_up_at_the_closed_form(depth) -> None:
    # da/dt = s a^(L-1) from a = 1: a^(2-L) = 1 - (L-2) s t
    s = 1.7
    found = escape(poly({(1,) * depth: s}), np.ones(depth), Sizes.start(np.ones(depth)))
    assert found.mechanism == POWER and found.power == depth - 2
    assert found.coefficient == pytest.approx(1 / ((depth - 2) * s), rel=1e-7)
    assert found.escaping == tuple(range(depth))


def test_a_slower_pathway_through_a_shared_edge_leaves_with_a_smaller_order() -> None:
    # c shared: near the blow-up c ~ 1/(a (s* - s)), so x2 y2 grow like (s* - s)^(-b/a)
    a, b = 5.0, 2.0
    found = escape(
        poly({(1, 1, 1, 0, 0): a, (1, 0, 0, 1, 1): b}), np.ones(5), Sizes.start(np.ones(5))
    )
    assert found.escaping == (0, 1, 2)
    np.testing.assert_allclose(found.after.orders()[3:], 1 - b / a, atol=2e-3)


def test_nothing_escapes_from_a_stable_saddle() -> None:
    assert escape(poly({(2, 0): -1.0, (0, 2): -0.5}), np.ones(2), Sizes.start(np.ones(2))) is None
    assert escape(poly({(1, 1, 1): -1.0}), np.ones(3), Sizes.start(np.ones(3))) is None


def test_polynomial_gradient_and_restriction_are_the_derivatives() -> None:
    x, y, z = sp.symbols("x y z")
    expr = 3 * x**2 * y - 2 * x * y * z + z**3 / 2 - 5 * y
    p = from_sympy(expr, [x, y, z], {})
    point = np.array([0.3, -1.2, 2.0])
    values = dict(zip((x, y, z), point, strict=True))
    assert p(point) == pytest.approx(float(expr.subs(values)))
    grad = [float(sp.diff(expr, v).subs(values)) for v in (x, y, z)]
    np.testing.assert_allclose(p.gradient(point), grad)
    restricted = p.restrict([0], np.array([0.3]))  # x = 0.3: a polynomial in y, z
    assert restricted(point[1:]) == pytest.approx(p(point))
    np.testing.assert_allclose(p.part(3).degrees(), 3)
