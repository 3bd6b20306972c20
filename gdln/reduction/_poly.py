"""Sparse multivariate polynomials with exact coefficients.

The per-mode loss of a GDLN is a polynomial in the edge variables $b_e$ and the data
symbols ($s$, $d$). gdln builds it, differentiates it, ties variables and tests
identities on this small sparse form, which stays fast with hundreds of variables,
then hands :mod:`sympy` expressions to the user.

A monomial is a tuple of ``(variable index, exponent)`` pairs sorted by index.

>>> x, y = Polynomial.variable(0), Polynomial.variable(1)
>>> p = (x + y) * (x - y)
>>> p == x * x - y * y
True
>>> p.diff(0) == 2 * x
True
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import sympy as sp

from .._bounded._expressions import as_sympy

__all__: list[str] = []  # package-internal: the loss polynomials of both routes

Monomial = tuple[tuple[int, int], ...]


def coefficient(value: Any) -> Any:
    """Rational numbers as :class:`fractions.Fraction` (fast); anything else as sympy."""
    if isinstance(value, Fraction):
        return value
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, sp.Rational):
        return Fraction(int(value.p), int(value.q))
    value = as_sympy(value)
    if isinstance(value, sp.Rational):
        return Fraction(int(value.p), int(value.q))
    return value


def to_float(value: Any) -> float:
    """``float(value)``, but ±inf where an exact number is beyond float64 (``Fraction``
    raises ``OverflowError`` there; the steppers then name the overflow in one line)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def to_sympy_number(value: Any) -> Any:
    if isinstance(value, Fraction):
        return sp.Rational(value.numerator, value.denominator)
    return value


def _multiply(a: Monomial, b: Monomial) -> Monomial:
    if not a:
        return b
    if not b:
        return a
    merged = dict(a)
    for var, exp in b:
        merged[var] = merged.get(var, 0) + exp
    return tuple(sorted(merged.items()))


class Polynomial:
    """A polynomial: monomial -> nonzero coefficient (sympy number or expression)."""

    __slots__ = ("terms",)

    def __init__(self, terms: Mapping[Monomial, Any] | None = None):
        self.terms: dict[Monomial, Any] = {
            m: coefficient(c) for m, c in (terms or {}).items() if c != 0
        }

    @classmethod
    def variable(cls, index: int) -> Polynomial:
        return cls({((index, 1),): Fraction(1)})

    @classmethod
    def constant(cls, value: Any) -> Polynomial:
        return cls({(): coefficient(value)})

    def __repr__(self) -> str:
        return f"Polynomial(<{len(self.terms)} terms>)"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Polynomial):
            other = Polynomial.constant(other)
        keys = set(self.terms) | set(other.terms)
        return all(_is_zero(self.terms.get(k, 0) - other.terms.get(k, 0)) for k in keys)

    __hash__ = None  # type: ignore[assignment]

    def __bool__(self) -> bool:
        return bool(self.terms)

    def _coerce(self, other: Any) -> Polynomial:
        return other if isinstance(other, Polynomial) else Polynomial.constant(other)

    def __add__(self, other: Any) -> Polynomial:
        out = dict(self.terms)
        for m, c in self._coerce(other).terms.items():
            out[m] = out[m] + c if m in out else c
        return Polynomial(out)

    __radd__ = __add__

    def __neg__(self) -> Polynomial:
        return Polynomial({m: -c for m, c in self.terms.items()})

    def __sub__(self, other: Any) -> Polynomial:
        return self + (-self._coerce(other))

    def __rsub__(self, other: Any) -> Polynomial:
        return self._coerce(other) - self

    def __mul__(self, other: Any) -> Polynomial:
        if not isinstance(other, Polynomial):
            factor = coefficient(other)
            return Polynomial({m: c * factor for m, c in self.terms.items()})
        out: dict[Monomial, Any] = {}
        for ma, ca in self.terms.items():
            for mb, cb in other.terms.items():
                m = _multiply(ma, mb)
                c = ca * cb
                out[m] = out[m] + c if m in out else c
        return Polynomial(out)

    __rmul__ = __mul__

    def add_scaled(self, other: Polynomial, factor: Any) -> None:
        """In place: ``self += factor * other`` (the hot loop of loss building)."""
        terms = self.terms
        factor = coefficient(factor)
        for m, c in other.terms.items():
            value = c * factor
            if m in terms:
                total = terms[m] + value
                if total == 0:
                    del terms[m]
                else:
                    terms[m] = total
            elif value != 0:
                terms[m] = value

    def variables(self) -> set[int]:
        return {v for m in self.terms for v, _ in m}

    def diff(self, index: int) -> Polynomial:
        out: dict[Monomial, Any] = {}
        for m, c in self.terms.items():
            powers = dict(m)
            exp = powers.get(index, 0)
            if exp == 0:
                continue
            if exp == 1:
                del powers[index]
            else:
                powers[index] = exp - 1
            key = tuple(sorted(powers.items()))
            out[key] = out.get(key, 0) + c * exp
        return Polynomial(out)

    def gradient(
        self, indices: Sequence[int], mapping: Mapping[int, int] | None = None
    ) -> dict[int, Polynomial]:
        """All partial derivatives at once, each with variables renamed by ``mapping``.

        Renaming after differentiating is how a gradient is restricted to a tied
        subspace: ``mapping`` sends each edge variable to its block's variable.
        """
        wanted = set(indices)
        rename = mapping or {}
        out: dict[int, dict[Monomial, Any]] = {i: {} for i in indices}
        for m, c in self.terms.items():
            for var, exp in m:
                if var not in wanted:
                    continue
                powers: dict[int, int] = {}
                for v, e in m:
                    e2 = e - 1 if v == var else e
                    if e2:
                        target = rename.get(v, v)
                        powers[target] = powers.get(target, 0) + e2
                key = tuple(sorted(powers.items()))
                table = out[var]
                table[key] = table.get(key, 0) + c * exp
        return {i: Polynomial(t) for i, t in out.items()}

    def rename(self, mapping: Mapping[int, int]) -> Polynomial:
        """Substitute variables by variables (tying): ``x_i -> x_mapping[i]``."""
        out: dict[Monomial, Any] = {}
        for m, c in self.terms.items():
            powers: dict[int, int] = {}
            for v, e in m:
                target = mapping.get(v, v)
                powers[target] = powers.get(target, 0) + e
            key = tuple(sorted(powers.items()))
            out[key] = out[key] + c if key in out else c
        return Polynomial(out)

    def to_sympy(self, symbols: Sequence[sp.Symbol]) -> sp.Expr:
        return sp.Add(
            *[
                to_sympy_number(c) * sp.Mul(*[symbols[v] ** e for v, e in m])
                for m, c in self.terms.items()
            ]
        )


def _is_zero(value: Any) -> bool:
    if isinstance(value, (Fraction, int)):
        return value == 0
    return sp.simplify(value) == 0


def monomial_table(polys: Sequence[Polynomial]) -> tuple[list[Monomial], np.ndarray]:
    """Distinct monomials of several polynomials and the float coefficient matrix."""
    index: dict[Monomial, int] = {}
    for p in polys:
        for m in p.terms:
            index.setdefault(m, len(index))
    table = np.zeros((len(polys), len(index)))
    for row, p in enumerate(polys):
        for m, c in p.terms.items():
            table[row, index[m]] = to_float(c)
    return list(index), table


def evaluate_monomials(monomials: Sequence[Monomial], values: Sequence[np.ndarray]) -> np.ndarray:
    """Stack of monomial values: ``(len(monomials), *value shape)``."""
    shape = np.broadcast_shapes(*(np.shape(v) for v in values))  # any number of arrays
    out = np.ones((len(monomials), *shape))
    for k, m in enumerate(monomials):
        for v, e in m:
            out[k] = out[k] * values[v] ** e
    return out
