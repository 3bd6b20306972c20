r"""Closed forms of a one-variable reduced system $\tau\dot B = f(B)$.

Always the formal separable solution $t=\int_{B_0}^{B}dx/f(x)$ (as for Eq. 15 of Saxe et
al. 2022). When $f = pB + qB^n$ (a Bernoulli equation, e.g. a balanced two-layer
pathway), also the explicit solution, which is the logistic solution of Eq. (21). Where
eliminating a variable through a conserved constant $C$ left a factor $B^2 + k$ (routing,
Eq. 15), also the same ODE in the angle $\theta$ of $B = \sqrt{k}\sinh\theta$.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import sympy as sp

__all__ = ["ClosedForm"]


class _Kind(NamedTuple):
    """What one kind of closed form is: its key, its labels and its meaning.

    ``{B}`` in the key and the labels stands for the system's variable.
    """

    key: str
    text: str
    latex: str
    meaning: str


KINDS: Mapping[str, _Kind] = {
    "separable": _Kind(
        "t",
        "t({B})",
        "t({B})",
        "the time at which B is reached, t(B) = integral from B_0 to B of dx/f(x) "
        "(the formal separable solution, as for Eq. 15)",
    ),
    "explicit": _Kind(
        "{B}",
        "{B}(t)",
        "{B}(t)",
        "B as a function of time, solving the Bernoulli equation tau dB/dt = pB + qB^n "
        "(for a two-layer pathway the logistic solution of Eq. 21)",
    ),
    "theta": _Kind(
        "theta",
        "theta({B})",
        r"\theta({B})",
        "the angle theta of B = sqrt(k) sinh(theta) (sqrt(-k) cosh(theta) for k < 0)",
    ),
    "theta_rhs": _Kind(
        "theta_rhs",
        "tau dtheta/dt",
        r"\tau \frac{{d\theta}}{{dt}}",
        "the reduced ODE in the angle theta",
    ),
    "t_theta": _Kind(
        "t_theta",
        "t(theta)",
        r"t(\theta)",
        "the time at which theta is reached, the separable solution in theta",
    ),
}
"""Each kind of closed form -> its key in ``ReducedSystem.closed_form``, its labels in text
and LaTeX (``{B}``: the variable) and what it means; declared once, for every printout."""


@dataclass(frozen=True)
class ClosedForm:
    r"""One closed form of a one-variable reduced system $\tau\dot B = f(B)$.

    Parameters
    ----------
    kind
        What the form is, a key of ``KINDS`` in this module: ``"separable"`` ($t(B)$ as an integral),
        ``"explicit"`` ($B(t)$), ``"theta"`` ($\theta(B)$), ``"theta_rhs"``
        ($\tau\,d\theta/dt$ in $\theta$) or ``"t_theta"`` ($t(\theta)$).
    variable
        The system's variable $B$.
    expr
        The right-hand side: the form's value.

    Raises
    ------
    ValueError
        ``kind`` is not a key of ``KINDS``.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022): the separable solution of Eq. (15) and the logistic
    solution of Eq. (21).

    Examples
    --------
    >>> B = sp.Symbol("B2")
    >>> form = ClosedForm("theta", B, sp.asinh(B))
    >>> form.key, form.label(), form.label("latex"), form.meaning[:38]
    ('theta', 'theta(B2)', '\\theta(B_{2})', 'the angle theta of B = sqrt(k) sinh(th')
    """

    kind: str
    variable: sp.Symbol
    expr: sp.Expr

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind: expected one of {sorted(KINDS)}, got {self.kind!r}")

    @property
    def key(self) -> str:
        """Its key in ``ReducedSystem.closed_form`` and in ``derive --format json``."""
        return KINDS[self.kind].key.format(B=self.variable)

    @property
    def meaning(self) -> str:
        """What the form is, in words."""
        return KINDS[self.kind].meaning

    def label(self, fmt: str = "text") -> str:
        """Its left-hand side, as text or LaTeX.

        Parameters
        ----------
        fmt
            ``"text"`` (``t(B2)``) or ``"latex"`` (``t(B_{2})``).

        Returns
        -------
        str
            The label.
        """
        kind = KINDS[self.kind]
        if fmt == "latex":
            return kind.latex.format(B=sp.latex(self.variable))
        return kind.text.format(B=self.variable)


def closed_form(
    rhs: Mapping[sp.Symbol, sp.Expr],
    eliminated: Mapping[sp.Symbol, sp.Expr],
    constants: Mapping[sp.Symbol, Any] | None = None,
) -> dict[str, ClosedForm]:
    r"""Closed forms of a one-variable system $\dot B = f(B)$.

    Always the formal separable solution $t=\int_{B_0}^{B} dx/f(x)$ (as for Eq. 15).
    When $f = pB + qB^n$ (a Bernoulli equation, e.g. a balanced two-layer pathway), also
    the explicit solution $B^{1-n} = (B_0^{1-n} + q/p)\,e^{(1-n)pt} - q/p$, which is the
    logistic solution of Eq. (21) for $a = B^2$. ``eliminated`` variables do not count;
    systems with more than one variable left get none. Where the conserved quantity left
    a factor $B^2 + k$ with $k \propto C$ (``constants``), also the form in the angle
    $\theta$ of :func:`theta_form`. Each form is keyed by its :attr:`ClosedForm.key`.
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
    forms = [ClosedForm("separable", v, sp.Integral(1 / sp.factor(f.subs(v, x)), (x, v0, v)))]
    poly = sp.Poly(f, v)
    terms = dict(zip([m[0] for m in poly.monoms()], poly.coeffs(), strict=True))
    if len(terms) == 2 and 1 in terms:
        (n,) = [k for k in terms if k != 1]
        p, q = terms[1], terms[n]
        u = (v0 ** (1 - n) + q / p) * sp.exp((1 - n) * p * t) - q / p
        forms.append(ClosedForm("explicit", v, u ** sp.Rational(1, 1 - n)))
    forms += theta_form(v, f, constants or {})
    return {form.key: form for form in forms}


def theta_form(v: sp.Symbol, f: sp.Expr, constants: Mapping[sp.Symbol, Any]) -> list[ClosedForm]:
    r"""$\tau\dot B = f(B)$ in the angle $\theta$ of $B = \sqrt{k}\sinh\theta$ (or $\cosh$).

    When $f$ has a factor $B^2 + k$ whose $k$ is a multiple of a conserved constant $C$
    (Eq. 15 of Saxe et al. 2022 leaves $(B_2^2 + C)$ for routing), substitute
    $B = \sqrt{k}\sinh\theta$ if $k > 0$, or $B = \sqrt{-k}\cosh\theta$ if $k < 0$ (for
    $B_0 > 0$, as the formal solution assumes), so that $B^2 + k$ becomes $k\cosh^2\theta$
    or $-k\sinh^2\theta$.
    This is the arcsinh form the authors use for the balanced routing ODE. Returns the
    forms of kind ``"theta"`` ($\theta$ as a function of $B$), ``"theta_rhs"``
    ($\tau\dot\theta = g(\theta) = f/(dB/d\theta)$) and ``"t_theta"``, the separable
    solution $t = \int_{\theta_0}^{\theta} d\phi / g(\phi)$ with $\theta_0 = \theta(B_0)$;
    none when no such factor exists or the sign of $k$ is not known.
    """
    k = _square_shift(v, f, constants)
    if k is None:
        return []
    sign = sp.sign(k.subs(constants))
    if sign == 0 or not sign.is_number:
        return []
    theta = sp.Symbol("theta", real=True)
    if sign > 0:
        root = sp.sqrt(k)
        b_of_theta, theta_of_b = root * sp.sinh(theta), sp.asinh(v / root)
    else:
        root = sp.sqrt(-k)
        b_of_theta, theta_of_b = root * sp.cosh(theta), sp.acosh(v / root)
    g = sp.simplify(f.subs(v, b_of_theta) / sp.diff(b_of_theta, theta))
    phi = sp.Dummy("phi")
    theta0 = theta_of_b.subs(v, sp.Symbol(f"{v}_0", positive=True))
    return [
        ClosedForm("theta", v, theta_of_b),
        ClosedForm("theta_rhs", v, g),
        ClosedForm("t_theta", v, sp.Integral(1 / g.subs(theta, phi), (phi, theta0, theta))),
    ]


def _square_shift(v: sp.Symbol, f: sp.Expr, constants: Mapping[sp.Symbol, Any]) -> sp.Expr | None:
    """The $k$ of a factor $a(B^2 + k)$ of ``f`` with $k$ a multiple of a constant, if any."""
    if not constants:
        return None
    numerator, _ = sp.fraction(sp.factor(f))  # factors of 1/M (a family's size) do not matter
    for factor in sp.factor_list(numerator)[1]:
        base = factor[0]
        if not base.has(v) or not any(base.has(c) for c in constants):
            continue
        poly = sp.Poly(base, v)
        if poly.degree() != 2 or poly.coeff_monomial(v) != 0:
            continue
        k = sp.simplify(poly.coeff_monomial(1) / poly.coeff_monomial(v**2))
        if k.free_symbols and k.free_symbols <= set(constants):
            return k
    return None
