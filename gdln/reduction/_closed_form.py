r"""Closed forms of a one-variable reduced system $\tau\dot B = f(B)$.

Always the formal separable solution $t=\int_{B_0}^{B}dx/f(x)$ (as for Eq. 15 of Saxe et
al. 2022). When $f = pB + qB^n$ (a Bernoulli equation, e.g. a balanced two-layer
pathway), also the explicit solution, which is the logistic solution of Eq. (21).
"""

from __future__ import annotations

from collections.abc import Mapping

import sympy as sp

__all__: list[str] = []  # package-internal: closed forms of one-variable systems, for _lumping


def closed_form(
    rhs: Mapping[sp.Symbol, sp.Expr], eliminated: Mapping[sp.Symbol, sp.Expr]
) -> dict[str, sp.Expr]:
    r"""Closed forms of a one-variable system $\dot B = f(B)$.

    Always the formal separable solution $t=\int_{B_0}^{B} dx/f(x)$ (as for Eq. 15).
    When $f = pB + qB^n$ (a Bernoulli equation, e.g. a balanced two-layer pathway), also
    the explicit solution $B^{1-n} = (B_0^{1-n} + q/p)\,e^{(1-n)pt} - q/p$, which is the
    logistic solution of Eq. (21) for $a = B^2$. ``eliminated`` variables do not count;
    systems with more than one variable left get none.
    """
    free = [v for v in rhs if v not in eliminated]
    if len(free) != 1:
        return {}
    (v,) = free
    f = sp.expand(rhs[v])
    if f == 0:
        return {}
    x = sp.Dummy("x")
    t = sp.Symbol("t", nonnegative=True)
    v0 = sp.Symbol(f"{v}_0", positive=True)
    out: dict[str, sp.Expr] = {"t": sp.Integral(1 / sp.factor(f.subs(v, x)), (x, v0, v))}
    poly = sp.Poly(f, v)
    terms = dict(zip([m[0] for m in poly.monoms()], poly.coeffs(), strict=True))
    if len(terms) == 2 and 1 in terms:
        (n,) = [k for k in terms if k != 1]
        p, q = terms[1], terms[n]
        u = (v0 ** (1 - n) + q / p) * sp.exp((1 - n) * p * t) - q / p
        out[str(v)] = u ** sp.Rational(1, 1 - n)
    return out
