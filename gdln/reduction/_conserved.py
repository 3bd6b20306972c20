r"""Conserved quadratic quantities of a reduced system, and elimination by them (Eq. 15).

A quadratic $Q=\sum_{i\le j}c_{ij}B_iB_j$ is conserved by $\tau\dot B=f(B)$ when
$\nabla Q\cdot f\equiv 0$ as a polynomial identity; that is a linear system for the
$c_{ij}$, solved exactly. For routing it gives $M B_1^2 - B_2^2$ (Saxe et al. 2022,
Eqs. 44-46). Fixing $Q = C$ at its initial value then removes one variable, as Eq. (15)
removes $B_1$. Conserved quantities hold for the flow only, not for a discrete step.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sympy as sp

from .._edge import Edge
from ._poly import Polynomial, to_sympy_number

__all__: list[str] = []  # package-internal: conserved quantities and elimination, for _lumping

MAX_FULL_QUADRATIC = 12
"""Most variables for which every product $B_iB_j$ is tried; above, only squares."""
MAX_CONSERVED_VARIABLES = 400
"""Most variables for which conserved quantities are looked for at all."""


MAX_FACTORED = 300
"""Largest expression (terms times free symbols) that :func:`tidy` factors: sympy's
``factor_terms`` costs 50-100 microseconds per term and symbol (a minute for the
right-hand sides of a fan of 100 pathways), and a sum that long reads no better factored."""


def tidy(expr: sp.Expr) -> sp.Expr:
    """Factor small expressions fully (as the paper prints them), large ones cheaply, and
    very large ones (beyond :data:`MAX_FACTORED`) not at all."""
    symbols = len(expr.free_symbols)
    if symbols <= 5:
        return sp.factor(expr)
    terms = len(expr.args) if isinstance(expr, sp.Add) else 1
    return sp.factor_terms(expr) if terms * symbols <= MAX_FACTORED else expr


def tidy_loss(expr: sp.Expr) -> sp.Expr:
    """A loss with its common factors pulled out, unless it is beyond :data:`MAX_FACTORED`."""
    terms = len(expr.args) if isinstance(expr, sp.Add) else 1
    return sp.factor_terms(expr) if terms * len(expr.free_symbols) <= MAX_FACTORED else expr


def conserved_quadratics(
    rhs: Mapping[int, Polynomial], n: int, generators: Sequence[sp.Symbol]
) -> list[sp.Expr]:
    r"""Quadratic $Q=\sum c_{ij}B_iB_j$ with $\nabla Q\cdot f\equiv0$ (Eq. 15's $C$).

    ``rhs[k]`` is $f_k$ as a polynomial in the variables ``0..n-1`` (then data symbols);
    ``generators`` name the polynomial variables. Returns one $Q$ per basis vector of the
    solution space, with coprime integer (or simplified symbolic) coefficients.
    """
    if n <= MAX_FULL_QUADRATIC:
        pairs = [(i, j) for i in range(n) for j in range(i, n)]
    else:
        pairs = [(i, i) for i in range(n)]
    if not pairs or n > MAX_CONSERVED_VARIABLES:
        return []
    columns = []
    for i, j in pairs:
        q = Polynomial.variable(i) * Polynomial.variable(j)
        columns.append(sum((q.diff(k) * rhs[k] for k in range(n) if k in (i, j)), Polynomial()))
    monomials = sorted({m for col in columns for m in col.terms})
    if not monomials:
        return []
    index = {m: r for r, m in enumerate(monomials)}
    entries: dict[int, dict[int, Any]] = {}
    for c, col in enumerate(columns):
        for m, value in col.terms.items():
            entries.setdefault(index[m], {})[c] = to_sympy_number(value)
    out = []
    for vector in _nullspace(entries, (len(monomials), len(pairs))):
        if all(sp.nsimplify(x).is_Rational for x in vector):
            vector = _integer_coefficients(vector)
        else:  # symbolic coefficients
            vector = _symbolic_coefficients(vector)
        expr = sp.expand(
            sum(vector[c] * generators[i] * generators[j] for c, (i, j) in enumerate(pairs))
        )
        out.append(-expr if expr.could_extract_minus_sign() else expr)
    return out


def _integer_coefficients(vector: sp.Matrix) -> sp.Matrix:
    """A rational vector scaled to coprime integers."""
    denominators = [sp.fraction(sp.nsimplify(x))[1] for x in vector]
    scale = math.lcm(*[int(x) for x in denominators]) if denominators else 1
    vector = vector * scale
    gcd = math.gcd(*[int(x) for x in vector if x != 0]) or 1
    return vector / gcd


def _symbolic_coefficients(vector: sp.Matrix) -> sp.Matrix:
    """A vector of rational functions scaled to its first entry, denominators cleared."""
    first = next(x for x in vector if x != 0)
    vector = vector.applyfunc(lambda x: sp.cancel(x / first))
    scale = sp.lcm([sp.fraction(sp.together(x))[1] for x in vector])
    return vector.applyfunc(lambda x: sp.factor(sp.cancel(x * scale)))


def _nullspace(entries: Mapping[int, Mapping[int, Any]], shape: tuple[int, int]) -> list[sp.Matrix]:
    r"""Exact nullspace of the sparse matrix ``entries`` (row -> column -> value), over
    the entries' own domain.

    For example $\mathbb Q$, $\mathbb Q(\sqrt 3)$ when fixed edges hold $1/\sqrt L$,
    or rational functions of a symbolic $p$: sparse elimination there costs about what
    the nonzero entries do, where sympy's dense ``Matrix.nullspace`` of a fan of 100
    pathways (20 000 x 200) took half a minute.
    """
    from sympy.polys.matrices import DomainMatrix

    dm = DomainMatrix.from_dict_sympy(*shape, entries, extension=True).to_field()
    basis = dm.nullspace().to_Matrix()
    rational = basis.is_zero_matrix or all(x.is_Rational for x in basis)
    rows = [basis.row(r).T for r in range(basis.rows)]
    return rows if rational else [row.applyfunc(sp.simplify) for row in rows]


def eliminate(
    rhs: dict[sp.Symbol, sp.Expr],
    conserved: list[sp.Expr],
    variables: list[sp.Symbol],
    edges: Mapping[sp.Symbol, tuple[Edge, ...]],
    initial: Mapping[sp.Symbol, Any],
    *,
    constant: Callable[[], sp.Symbol] | None = None,
) -> tuple[dict[sp.Symbol, sp.Expr], dict[sp.Symbol, sp.Expr], dict[sp.Symbol, Any]]:
    """Use conserved quantities to remove variables (Eq. 15), keeping shared ones.

    For each $Q$, a variable that appears in it only squared, and only to even powers in
    the others' right-hand sides, is replaced by $\\pm\\sqrt{(C - \\dots)/c}$ with the sign
    of its initial value; among several, the one standing for the most edges goes.
    Returns the new right-hand sides, the eliminated variables' expressions and the
    constants $C$ with their values; ``constant()`` names each new constant (default
    ``C``, ``C_2``, ...).
    """
    rhs = dict(rhs)
    eliminated: dict[sp.Symbol, sp.Expr] = {}
    constants: dict[sp.Symbol, Any] = {}
    remaining = list(variables)
    for q in conserved:
        q_now = sp.expand(q)
        candidates = _eliminable(q_now, remaining, rhs)
        if not candidates or len(remaining) == 1:
            continue
        v = max(candidates, key=lambda w: (len(edges[w]), variables.index(w)))
        if constant is None:
            C = sp.Symbol("C" if not constants else f"C_{len(constants) + 1}", real=True)
        else:
            C = constant()
        constants[C] = sp.nsimplify(q_now.subs(initial))
        coefficient = sp.Poly(q_now, v).coeff_monomial(v**2)
        square = sp.expand((C - (q_now - coefficient * v**2)) / coefficient)
        # v keeps the sign it starts with: it cannot cross 0 while Q = C is conserved
        # unless the square itself reaches 0
        sign = sp.sign(initial[v])
        root = -sp.sqrt(square) if sign == -1 else sp.sqrt(square)
        for w in remaining:
            if w != v:
                rhs[w] = tidy(sp.expand(rhs[w]).subs(v**2, square).subs(v, root))
        eliminated[v] = root
        remaining.remove(v)
    return rhs, eliminated, constants


def _eliminable(
    q: sp.Expr, remaining: list[sp.Symbol], rhs: Mapping[sp.Symbol, sp.Expr]
) -> list[sp.Symbol]:
    """Variables that ``q`` holds only as a square and the other equations only evenly."""
    out = []
    for v in remaining:
        poly = sp.Poly(q, *remaining)
        if poly.degree(v) != 2 or any(m[remaining.index(v)] == 1 for m in poly.monoms()):
            continue
        others = [w for w in remaining if w != v]
        if all(_even_in(rhs[w], v) for w in others):
            out.append(v)
    return out


def _even_in(expr: sp.Expr, v: sp.Symbol) -> bool:
    poly = sp.Poly(sp.expand(expr), v)
    return all(m[0] % 2 == 0 for m in poly.monoms())
