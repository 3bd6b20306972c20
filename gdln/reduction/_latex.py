r"""LaTeX of reduced systems: the equations, and notebooks' MathJax ``aligned`` blocks.

:func:`equations` is the one LaTeX printer of a system's equations: the lumped ODEs
$\tau\,\dot B_k = -\tfrac{1}{|O_k|}\partial\mathcal L_\alpha/\partial B_k$ (Eq. 10 of Saxe et
al. 2022, lumped), eliminated variables (Eq. 15), the per-mode loss, conserved quantities
and closed forms, each labelled by what it is (:class:`~gdln.reduction.ClosedForm`). The
notebook display (``_repr_latex_``) aligns them with the edges each variable stands for and
the data symbols $s$, $d$ per mode; ``format_derivation(..., "latex")`` (``gdln.report``, a
layer above) prints the same equations between ``%`` comment lines.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import sympy as sp

from .._bounded._expressions import as_sympy
from .._edge import Edge, edge_name
from ..paths._latex import display_math, latex_name, latex_text
from ._closed_form import ClosedForm

__all__ = ["equations", "reduction_latex", "system_latex", "system_rows"]


class PrintedSystem(Protocol):
    """What the printers read of a system: a :class:`~gdln.reduction.ReducedSystem`."""

    @property
    def variables(self) -> Sequence[sp.Symbol]: ...
    @property
    def edges(self) -> Mapping[sp.Symbol, Sequence[Edge]]: ...
    @property
    def rhs(self) -> Mapping[sp.Symbol, sp.Expr]: ...
    @property
    def loss(self) -> sp.Expr: ...
    @property
    def symbols(self) -> Mapping[sp.Symbol, Sequence[Any]]: ...
    @property
    def modes(self) -> Sequence[int]: ...
    @property
    def initial(self) -> Mapping[sp.Symbol, Any]: ...
    @property
    def conserved(self) -> Sequence[sp.Expr]: ...
    @property
    def eliminated(self) -> Mapping[sp.Symbol, sp.Expr]: ...
    @property
    def constants(self) -> Mapping[sp.Symbol, Any]: ...
    @property
    def closed_form(self) -> Mapping[str, ClosedForm]: ...
    def orbit(self, variable: sp.Symbol) -> Any: ...


class _Named(Protocol):
    @property
    def name(self) -> str: ...


class PrintedReduction(Protocol):
    """What :func:`reduction_latex` reads: a :class:`~gdln.reduction.Reduction`."""

    @property
    def problem(self) -> _Named: ...
    @property
    def constant(self) -> Any: ...
    @property
    def lump(self) -> str: ...
    @property
    def systems(self) -> Sequence[PrintedSystem]: ...


_SHOWN_EDGES = 4


def equations(system: PrintedSystem) -> list[tuple[str, str]]:
    r"""The equations of one reduced system in LaTeX, as (left side, right side) pairs.

    In order: $\tau\,dB/dt = f(B)$ per variable (Eq. 10, lumped), each eliminated
    variable (Eq. 15), each constant of a conserved quantity, the per-mode loss
    $\mathcal L_\alpha$, each conserved quantity ($\frac{d}{dt}Q = 0$) and each closed form
    under its own label (:meth:`ClosedForm.label`: $t(B)$, $B(t)$, $\theta(B)$,
    $\tau\,d\theta/dt$, $t(\theta)$). The notebook display and ``derive --format latex``
    both print these.
    """
    rows = [
        (rf"\tau \frac{{d {sp.latex(v)}}}{{dt}}", sp.latex(system.rhs[v])) for v in system.variables
    ]
    rows += [(sp.latex(v), sp.latex(e)) for v, e in system.eliminated.items()]
    rows += [(sp.latex(c), sp.latex(value)) for c, value in system.constants.items()]
    rows.append((r"\mathcal{L}_\alpha", sp.latex(system.loss)))
    rows += [(rf"\frac{{d}}{{dt}}\left({sp.latex(q)}\right)", "0") for q in system.conserved]
    decay = getattr(system, "weight_decay", 0)
    rows += [
        (
            rf"\tau\frac{{d}}{{dt}}\left({sp.latex(q)}\right)",
            rf"{sp.latex(-2 * decay)}\left({sp.latex(q)}\right)",
        )
        for q in getattr(system, "decaying", ())
    ]
    rows += [(f.label("latex"), sp.latex(f.expr)) for f in system.closed_form.values()]
    return rows


def system_rows(system: PrintedSystem) -> list[str]:
    r"""The ``aligned`` rows of one reduced system: its variables' orbits (each on two
    rows, the edges below, so that a long orbit does not overflow), its :func:`equations`
    and its data symbols per mode."""
    rows = [row for v in (*system.variables, *system.eliminated) for row in _orbit_rows(system, v)]
    rows += [f"{left} &= {right}" for left, right in equations(system)]
    rows += [_symbol_row(s, values) for s, values in system.symbols.items()]
    return rows


def system_latex(system: PrintedSystem) -> str:
    r"""One reduced system as a ``$$\begin{aligned}...\end{aligned}$$`` block."""
    head = rf"&{latex_text(f'modes {list(system.modes)}; time in units of tau')}"
    return display_math([head, *system_rows(system)])


def reduction_latex(reduction: PrintedReduction) -> str:
    r"""Every system of a reduction and the loss $\mathcal L = c + \sum_\alpha\mathcal L_\alpha$.

    Returns
    -------
    str
        One display-math block; each system starts with a row naming its modes.
    """
    name = reduction.problem.name
    constant = sp.latex(as_sympy(reduction.constant))
    rows = [
        rf"&{latex_text(f'{name}: lump={reduction.lump}; time in units of tau')}",
        rf"\mathcal{{L}} &= {constant} + \sum_\alpha \mathcal{{L}}_\alpha",
    ]
    for k, system in enumerate(reduction.systems):
        rows.append(rf"&{latex_text(f'system {k}: modes {list(system.modes)}')}")
        rows += system_rows(system)
    return display_math(rows)


def _orbit_rows(system: PrintedSystem, variable: sp.Symbol) -> list[str]:
    """``B_k``: how many edges it stands for and $B_k(0)$; below, the first few edges."""
    edges = system.edges[variable]
    shown = ",\\ ".join(latex_name(edge_name(e)) for e in edges[:_SHOWN_EDGES])
    more = r",\ \ldots" if len(edges) > _SHOWN_EDGES else ""
    initial = sp.latex(as_sympy(system.initial[variable]))
    symbol = sp.latex(variable)
    head = rf"{symbol} &: {latex_text(f'orbit {system.orbit(variable)}')},\ {symbol}(0) = {initial}"
    return [head, rf"&\qquad [{shown}{more}]"] if shown else [head]


def _symbol_row(symbol: sp.Symbol, values: Sequence[Any]) -> str:
    """A data symbol's value in each mode of the system, as a tuple."""
    shown = ",\\ ".join(sp.latex(as_sympy(x)) for x in values)
    return rf"{sp.latex(symbol)} &= \left({shown}\right)\ {latex_text('per mode')}"
