r"""Numeric polynomials in a few variables: the per-mode loss and the stage potentials.

A per-mode loss $\mathcal{L}_\alpha(b)$ (Sec. 3.1 of Saxe et al. 2022) is a polynomial in
the reduced variables; near a saddle the small variables see the potential
$\Phi(\varepsilon) = -\mathcal{L}_\alpha(b^*, \varepsilon)$, whose homogeneous parts decide
how they grow (:mod:`gdln.stages._escape`). One value type serves both: coefficients
and integer powers, evaluated, differentiated and restricted with numpy.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import sympy as sp

from .._errors import GdlnError

__all__ = ["Polynomial", "from_sympy"]


@dataclass(frozen=True, eq=False)
class Polynomial:
    r"""$\sum_t c_t \prod_i x_i^{p_{ti}}$.

    Parameters
    ----------
    coefficients
        ``(terms,)`` the $c_t$.
    powers
        ``(terms, variables)`` non-negative integers $p_{ti}$.
    """

    coefficients: np.ndarray
    powers: np.ndarray

    def __post_init__(self) -> None:
        c = np.asarray(self.coefficients, dtype=float).reshape(-1)
        p = np.asarray(self.powers, dtype=int)
        if p.ndim != 2 or p.shape[0] != c.shape[0]:
            raise ValueError(f"powers must be (terms, variables), got {p.shape} for {c.shape}")
        object.__setattr__(self, "coefficients", c)
        object.__setattr__(self, "powers", p)

    @property
    def n_variables(self) -> int:
        """The number of variables."""
        return int(self.powers.shape[1])

    def degrees(self) -> np.ndarray:
        """The total degree of each term."""
        return self.powers.sum(axis=1)

    def __call__(self, x: np.ndarray) -> float:
        """The value at ``x``."""
        return float(self.coefficients @ np.prod(np.asarray(x, float) ** self.powers, axis=1))

    def values(self, xs: np.ndarray) -> np.ndarray:
        """The value at each row of ``xs`` ``(points, variables)``."""
        xs = np.asarray(xs, float)
        monomials = np.prod(xs[:, None, :] ** self.powers[None, :, :], axis=2)
        return np.asarray(monomials @ self.coefficients)

    def gradient(self, x: np.ndarray) -> np.ndarray:
        """$\\partial/\\partial x_i$ at ``x``, for every $i$."""
        factors, lowered = self._derivative
        return np.asarray((factors * np.prod(np.asarray(x, float) ** lowered, axis=2)).sum(axis=1))

    @functools.cached_property
    def _derivative(self) -> tuple[np.ndarray, np.ndarray]:
        """``factors[i, t]`` $= c_t p_{ti}$ and ``lowered[i, t]``, term $t$'s powers with
        $p_{ti}$ lowered by one (0 where $p_{ti} = 0$, whose factor is 0): the derivative
        in $x_i$ as one array expression (the flows that settle a plateau call it
        thousands of times)."""
        n = self.n_variables
        factors = self.coefficients[None, :] * self.powers.T
        lowered = np.repeat(self.powers[None, :, :], n, axis=0)
        for i in range(n):
            lowered[i, :, i] = np.maximum(self.powers[:, i] - 1, 0)
        return factors, lowered

    def restrict(self, fixed: Sequence[int], values: np.ndarray) -> Polynomial:
        """Substitute ``values`` for the variables ``fixed``; the others stay, in order."""
        fixed = list(fixed)
        free = [i for i in range(self.n_variables) if i not in set(fixed)]
        scale = np.prod(np.asarray(values, float) ** self.powers[:, fixed], axis=1)
        return combine(self.coefficients * scale, self.powers[:, free])

    def lifted(self, columns: Sequence[int] | np.ndarray, n: int) -> Polynomial:
        """The same polynomial in ``n`` variables, its own ones at positions ``columns``."""
        powers = np.zeros((len(self.coefficients), n), dtype=int)
        powers[:, [int(c) for c in columns]] = self.powers
        return Polynomial(self.coefficients.copy(), powers)

    def on(self, keep: Sequence[int] | np.ndarray) -> Polynomial:
        """The terms in the variables ``keep`` only (the others at zero), in those variables."""
        kept = {int(i) for i in keep}
        others = [i for i in range(self.n_variables) if i not in kept]
        return self.restrict(others, np.zeros(len(others)))

    def part(self, degree: int) -> Polynomial:
        """The homogeneous part of total degree ``degree``."""
        keep = self.degrees() == degree
        return Polynomial(self.coefficients[keep], self.powers[keep])

    def pruned(self, tolerance: float) -> Polynomial:
        """The terms whose coefficient exceeds ``tolerance`` in size (round-off dropped)."""
        keep = np.abs(self.coefficients) > tolerance
        return Polynomial(self.coefficients[keep], self.powers[keep])

    def support(self) -> np.ndarray:
        """Whether each variable appears in a term with a nonzero coefficient."""
        live = self.coefficients != 0
        return np.asarray((self.powers[live] > 0).any(axis=0))

    def hessian_of_quadratic(self) -> np.ndarray:
        """The symmetric matrix $H$ with $\\tfrac12 x^\\top H x$ equal to the degree-2 part."""
        n = self.n_variables
        H = np.zeros((n, n))
        quadratic = self.part(2)
        for c, p in zip(quadratic.coefficients, quadratic.powers, strict=True):
            idx = np.flatnonzero(p)
            if len(idx) == 1:
                H[idx[0], idx[0]] += 2 * c
            else:
                H[idx[0], idx[1]] += c
                H[idx[1], idx[0]] += c
        return H


def combine(coefficients: np.ndarray, powers: np.ndarray) -> Polynomial:
    """Add up terms with equal powers and drop zero coefficients."""
    powers = np.asarray(powers, dtype=int)
    if len(coefficients) == 0:
        return Polynomial(np.zeros(0), np.zeros((0, powers.shape[1]), dtype=int))
    unique, inverse = np.unique(powers, axis=0, return_inverse=True)
    summed = np.zeros(len(unique))
    np.add.at(summed, np.asarray(inverse).reshape(-1), coefficients)
    keep = summed != 0
    return Polynomial(summed[keep], unique[keep])


def from_sympy(
    expression: sp.Expr, variables: Sequence[sp.Symbol], values: dict[sp.Symbol, float]
) -> Polynomial:
    """``expression`` with ``values`` substituted, as a polynomial in ``variables``.

    Raises
    ------
    GdlnError
        If a symbol other than ``variables`` is left without a value.
    """
    numbers = {k: sp.Float(v, 17) for k, v in values.items()}
    substituted = sp.expand(expression.xreplace(numbers))
    left = substituted.free_symbols - set(variables)
    if left:
        names = ", ".join(sorted(str(s) for s in left))
        raise GdlnError(f"the loss still holds the symbols {names}; give them values (--param)")
    if substituted == 0:
        return Polynomial(np.zeros(0), np.zeros((0, len(variables)), dtype=int))
    poly = sp.Poly(substituted, *variables)
    terms = poly.terms()
    coefficients = np.array([float(c) for _, c in terms])
    powers = np.array([list(m) for m, _ in terms], dtype=int).reshape(len(terms), len(variables))
    return combine(coefficients, powers)
