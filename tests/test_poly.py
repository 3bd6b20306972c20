"""The sparse polynomials of the per-mode loss against sympy's expansion of the same input.

Each random polynomial is built twice from one list of terms: as a
:class:`~gdln.reduction._poly.Polynomial` and, independently, as a sympy expression; every
operation must then agree with sympy's result on the sympy side, compared symbolically.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from gdln.reduction._poly import Polynomial, evaluate_monomials, monomial_table

N_VARS = 4
X = sp.symbols(f"x0:{N_VARS}")
A = sp.Symbol("a", positive=True)

monomials = st.dictionaries(st.integers(0, N_VARS - 1), st.integers(1, 3), max_size=N_VARS).map(
    lambda powers: tuple(sorted(powers.items()))
)
rationals = st.fractions(min_value=-3, max_value=3, max_denominator=6)
term_lists = st.lists(st.tuples(monomials, rationals), max_size=6)


def build(terms: list) -> tuple[Polynomial, sp.Expr]:
    """The same terms (repeated monomials add up) as a Polynomial and as a sympy sum."""
    poly = Polynomial()
    expr = sp.Integer(0)
    for monomial, c in terms:
        poly = poly + Polynomial({monomial: c})
        expr += sp.Rational(c.numerator, c.denominator) * sp.Mul(*[X[v] ** e for v, e in monomial])
    return poly, expr


def same(poly: Polynomial, expr: sp.Expr) -> bool:
    return sp.expand(poly.to_sympy(X) - expr) == 0


@settings(max_examples=60, deadline=None)
@given(term_lists, term_lists, rationals)
def test_arithmetic_agrees_with_sympy(p_terms: list, q_terms: list, c: Fraction) -> None:
    p, P = build(p_terms)
    q, Q = build(q_terms)
    k = sp.Rational(c.numerator, c.denominator)
    assert same(p, P)
    assert same(p + q, P + Q)
    assert same(p - q, P - Q)
    assert same(-p, -P)
    assert same(p * q, P * Q)
    assert same(c * p, k * P) and same(p * c, k * P)
    assert same(c + p, k + P) and same(c - p, k - P) and same(p - c, P - k)
    r = p + Polynomial()  # add_scaled works in place
    r.add_scaled(q, c)
    assert same(r, P + k * Q)


@settings(max_examples=60, deadline=None)
@given(term_lists, term_lists)
def test_equality_is_equality_of_expansions(p_terms: list, q_terms: list) -> None:
    p, P = build(p_terms)
    q, Q = build(q_terms)
    assert (p == q) == (sp.expand(P - Q) == 0)
    assert p * q == q * p
    assert p + q - q == p
    assert bool(p) == (sp.expand(P) != 0)
    assert p.variables() == {i for i, x in enumerate(X) if x in sp.expand(P).free_symbols}


@settings(max_examples=60, deadline=None)
@given(term_lists, st.integers(0, N_VARS - 1))
def test_diff_agrees_with_sympy(terms: list, index: int) -> None:
    p, P = build(terms)
    assert same(p.diff(index), sp.diff(P, X[index]))


mappings = st.dictionaries(st.integers(0, N_VARS - 1), st.integers(0, N_VARS - 1))


@settings(max_examples=60, deadline=None)
@given(term_lists, mappings)
def test_rename_is_simultaneous_substitution(terms: list, mapping: dict) -> None:
    p, P = build(terms)
    renamed = P.xreplace({X[i]: X[j] for i, j in mapping.items()})
    assert same(p.rename(mapping), renamed)


@settings(max_examples=60, deadline=None)
@given(term_lists, mappings)
def test_gradient_is_diff_then_rename(terms: list, mapping: dict) -> None:
    p, P = build(terms)
    indices = [0, 2, 3]
    grads = p.gradient(indices, mapping)
    assert sorted(grads) == indices
    for i in indices:
        want = sp.diff(P, X[i]).xreplace({X[a]: X[b] for a, b in mapping.items()})
        assert same(grads[i], want)
    assert all(same(g, sp.diff(P, X[i])) for i, g in p.gradient(indices).items())


def test_symbolic_coefficients_cancel_exactly() -> None:
    x, y = Polynomial.variable(0), Polynomial.variable(1)
    p = (A + 1) * x * y - A * x * y - x * y
    assert p == Polynomial() and not p.to_sympy(X)
    q = (x + A * y) * (x - A * y)
    assert same(q, X[0] ** 2 - A**2 * X[1] ** 2)
    assert sp.simplify(q.diff(1).to_sympy(X) + 2 * A**2 * X[1]) == 0


@settings(max_examples=30, deadline=None)
@given(st.lists(term_lists, min_size=1, max_size=3))
def test_monomial_table_evaluates_the_polynomials(term_lists_: list) -> None:
    built = [build(terms) for terms in term_lists_]
    monomials_, table = monomial_table([p for p, _ in built])
    rng = np.random.default_rng(0)
    values = [rng.uniform(-1.5, 1.5, size=(3, 2)) for _ in X]
    got = np.tensordot(table, evaluate_monomials(monomials_, values), axes=1)
    for row, (_, expr) in zip(got, built, strict=True):
        want = sp.lambdify(X, expr, "numpy")(*values)
        np.testing.assert_allclose(row, np.broadcast_to(want, (3, 2)), rtol=1e-12, atol=1e-12)


def test_monomials_of_more_than_64_variables() -> None:
    """np.broadcast takes at most 64 arrays; a loss with 127 variables (race) has more."""
    n = 100
    values = [np.full(3, 1.0 + k / n) for k in range(n)]
    monomials_ = [((k, 1), (k + 1, 2)) for k in range(n - 1)]
    got = evaluate_monomials(monomials_, values)
    want = [values[k] * values[k + 1] ** 2 for k in range(n - 1)]
    np.testing.assert_allclose(got, want, rtol=1e-14)


@pytest.mark.parametrize("value", [Fraction(3, 4), 2, sp.Rational(5, 7), A])
def test_constants_round_trip(value: object) -> None:
    assert Polynomial.constant(value).to_sympy(X) == sp.sympify(value)
