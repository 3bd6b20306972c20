r"""Lumping: tying edge variables into blocks, each tying verified exactly, never assumed.

If the variables of an edge set $O$ are tied to one value $B$, then for each $e\in O$,
$\tau\dot b_e=-\frac1{|O|}\partial\mathcal{L}_{\rm tied}/\partial B$ (the $1/M$ of
Eqs. 44-46 of Saxe et al. 2022). The coarsest exact tying is found by refinement: start
from one block per colour of a directed colour refinement of the graph (``symmetry``) or
per initial value (``balanced``, Eqs. 47-48), and split every block whose members'
right-hand sides differ on the tied subspace, at random points first, then as exact
polynomials, until nothing splits. The result is exact for every initial condition that
is constant on the blocks, for the ODE and the gradient-descent map alike. ``full`` then
eliminates variables through conserved quantities (Eq. 15), exact for the flow only.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import numpy as np
import sympy as sp

from .._bounded._expressions import as_sympy
from .._bounded._limits import check_work
from .._edge import Edge
from ._bases import generic_values
from ._closed_form import closed_form
from ._conserved import conserved_quadratics, eliminate, tidy, tidy_loss
from ._internal import set_internal
from ._loss import ModeLoss
from ._poly import Polynomial
from ._system import ReducedSystem

__all__: list[str] = []  # package-internal: lumping, for reduce

TERM_SECONDS = 5e-4
"""Seconds per term of a reduced system's loss and right-hand sides, from the polynomials
to the printed equations (sympy's ``Add``, ``factor_terms``, ``str``): measured 0.2-0.5 ms
on a fan of 100 pathways without lumping (30 000 terms) on a 2-core machine."""


def partition(
    graph: nx.DiGraph,
    mode_loss: ModeLoss,
    lump: str,
    init: Mapping[Edge, Any],
    *,
    sizes: Sequence[Any] | None = None,
    colours: Mapping[Edge, int] | None = None,
) -> list[list[int]]:
    """The coarsest verified blocks of edge variables for ``lump`` (see the module docstring).

    With ``sizes``, variable ``i`` stands for an orbit of ``sizes[i]`` edges already tied
    (the symmetry quotient): its right-hand side is its gradient divided by its size;
    ``colours`` then gives each variable's colour in the whole graph.
    """
    edges, n_edges = mode_loss.edges, len(mode_loss.edges)
    if lump == "none":
        return [[i] for i in range(n_edges)]
    if lump == "symmetry":
        colours = edge_colours(graph) if colours is None else colours
        start: dict[tuple[Any, Any], list[int]] = defaultdict(list)
        for i, e in enumerate(edges):
            start[(colours[e], sp.nsimplify(init[e]))].append(i)
        blocks = list(start.values())
    else:
        by_init: dict[Any, list[int]] = defaultdict(list)
        for i, e in enumerate(edges):
            by_init[sp.nsimplify(init[e])].append(i)
        blocks = list(by_init.values())
    weights = [1] * n_edges if sizes is None else list(sizes)
    return _refine(blocks, mode_loss.loss, n_edges, weights)


def edge_colours(
    graph: nx.DiGraph,
    *,
    representative: Mapping[Hashable, Hashable] | None = None,
    edges: Iterable[Edge] | None = None,
) -> dict[Edge, int]:
    """Directed colour refinement (1-WL): edges related by a symmetry share a colour.

    With ``representative`` (node -> the representative of its orbit under a known
    automorphism group), only representatives are refined: colours are constant on
    orbits, so the result is the same at a fraction of the cost. ``edges`` limits the
    edges coloured.
    """
    rep = representative or {}
    nodes, succ, pred = graph._node, graph._succ, graph._pred
    todo = [v for v in graph.nodes if rep.get(v, v) == v]
    colour = {
        v: hash(
            (
                "in" if not pred[v] else "out" if not succ[v] else "hidden",
                nodes[v]["size"],
                bool(nodes[v].get("gated")),
            )
        )
        for v in todo
    }
    for _ in range(len(todo)):
        new = {}
        for v in todo:
            outs = sorted((bool(d.get("gated")), colour[rep.get(w, w)]) for w, d in succ[v].items())
            ins = sorted((bool(d.get("gated")), colour[rep.get(u, u)]) for u, d in pred[v].items())
            new[v] = hash((colour[v], tuple(outs), tuple(ins)))
        stable = len(set(new.values())) == len(set(colour.values()))
        colour = new
        if stable:
            break
    chosen = graph.edges if edges is None else edges
    return {
        (u, v): hash((colour[rep.get(u, u)], colour[rep.get(v, v)], bool(succ[u][v].get("gated"))))
        for u, v in chosen
    }


def _refine(
    blocks: list[list[int]], loss: Polynomial, n_edges: int, sizes: Sequence[Any]
) -> list[list[int]]:
    """Split blocks until every member has the same right-hand side on the tied subspace."""
    with contextlib.suppress(OverflowError):  # a coefficient beyond float64: exact only
        blocks = _split_at_random_points(blocks, loss, n_edges, sizes)
    return _split_exactly(blocks, loss, n_edges, sizes)


def _split_at_random_points(
    blocks: list[list[int]], loss: Polynomial, n_edges: int, sizes: Sequence[Any]
) -> list[list[int]]:
    """Split by the gradient at random points of the tied subspace, until nothing splits."""
    rng = np.random.default_rng(12345)
    n_vars = max(loss.variables(), default=n_edges - 1) + 1
    coeffs = [(m, _generic_float(c)) for m, c in loss.terms.items()]
    scale_of = np.array([1 / _generic_float(n) for n in sizes])
    changed = True
    while changed:
        changed = False
        point = rng.uniform(0.5, 1.5, size=n_vars)
        block_value = rng.uniform(0.5, 1.5, size=len(blocks))
        for b, members in enumerate(blocks):
            point[members] = block_value[b]
        grad = np.zeros(n_edges)
        for m, c in coeffs:
            value = c
            for v, e in m:
                value *= point[v] ** e
            for v, e in m:
                if v < n_edges:
                    grad[v] += e * value / point[v]
        grad *= scale_of
        if not np.isfinite(grad).all():  # fixed: 1e200 squared: split exactly instead
            raise OverflowError("a gradient beyond float64")
        new_blocks: list[list[int]] = []
        for members in blocks:
            groups: dict[float, list[int]] = {}
            scale = max(abs(grad[members]).max(), 1e-300)
            for i in members:
                key = round(grad[i] / scale, 8)
                groups.setdefault(key, []).append(i)
            if len(groups) > 1:
                changed = True
            new_blocks.extend(groups.values())
        blocks = new_blocks
    return blocks


def _split_exactly(
    blocks: list[list[int]], loss: Polynomial, n_edges: int, sizes: Sequence[Any]
) -> list[list[int]]:
    """Confirm: members keep a block only if their right-hand sides are identical there."""
    while True:
        mapping = {i: members[0] for members in blocks for i in members}
        grads = loss.gradient(range(n_edges), mapping)
        if any(n != 1 for n in sizes):
            grads = {i: g * (1 / as_sympy(sizes[i])) for i, g in grads.items()}
        new_blocks = []
        for members in blocks:
            groups: list[list[int]] = []
            for i in members:
                for group in groups:
                    if grads[group[0]] == grads[i]:
                        group.append(i)
                        break
                else:
                    groups.append([i])
            new_blocks.extend(groups)
        if len(new_blocks) == len(blocks):
            return sorted(new_blocks, key=min)
        blocks = new_blocks


def _generic_float(value: Any) -> float:
    """A number as float; symbols (e.g. a symbolic probability) at generic values."""
    if isinstance(value, sp.Basic) and value.free_symbols:
        value = value.xreplace(generic_values(value.free_symbols))
    return float(value)


@dataclass
class Names:
    """The names one reduction gives, so that a name means one thing in all its systems.

    A lumped variable is named by the edges it stands for: the same edge set keeps its
    name in every system, a new one takes the next ``B1``, ``B2``, ...; each constant of
    Eq. (15) takes the next of ``C``, ``C_2``, ... (a builder, filled system by system).
    """

    variables: dict[frozenset[Edge], sp.Symbol] = field(default_factory=dict)
    constants: int = 0

    def variable(self, edges: Iterable[Edge]) -> sp.Symbol:
        """The name of the variable standing for ``edges``."""
        key = frozenset(edges)
        if key not in self.variables:
            self.variables[key] = sp.Symbol(f"B{len(self.variables) + 1}", real=True)
        return self.variables[key]

    def constant(self) -> sp.Symbol:
        """A new constant's name."""
        self.constants += 1
        return sp.Symbol("C" if self.constants == 1 else f"C_{self.constants}", real=True)


def lumped_system(
    mode_loss: ModeLoss,
    blocks: list[list[int]],
    lump: str,
    init: Mapping[Edge, Any],
    *,
    orbits: Sequence[tuple[Edge, ...]] | None = None,
    sizes: Sequence[Any] | None = None,
    gamma: Any = 0,
    names: Names | None = None,
    source: str = "",
) -> ReducedSystem:
    r"""The system of the tied variables: $\tau\dot B_k=-\frac1{|O_k|}\partial\mathcal L/\partial B_k$.

    One variable per block (``B1``, ``B2``, ...; the edge's own $b_e$ without lumping),
    its conserved quadratic quantities, and for ``lump="full"`` the variables they
    eliminate (Eq. 15); closed forms where one variable is left. ``names`` gives the
    names of the reduction's earlier systems (:class:`Names`; a fresh one by default).

    With weight decay $\gamma$ the loss gains $\tfrac\gamma2\sum_k|O_k|B_k^2$ (decoupled
    weights have $\lVert W_e\rVert^2=\sum_\alpha b_{e,\alpha}^2$), so every right-hand
    side gains $-\gamma B_k$; that term is the same for every member of a block, so the
    blocks found without it stay exact. A quadratic $Q$ conserved without decay then obeys
    $\dot Q = -2\gamma Q$ (Euler's theorem for the homogeneous $Q$): the system lists it
    among ``decaying``, not ``conserved``.

    Turning the polynomials into sympy expressions, tidying and printing them costs about
    :data:`TERM_SECONDS` per term: a system whose loss and right-hand sides hold more
    terms than the limit ``work`` allows is refused first (naming ``source``).
    """
    edges, n_edges = mode_loss.edges, len(mode_loss.edges)
    names = Names() if names is None else names
    block_edges = [
        tuple(x for i in members for x in ((edges[i],) if orbits is None else orbits[i]))
        for members in blocks
    ]
    if lump == "none":
        variables = [mode_loss.generators[i] for i in range(n_edges)]
    else:
        variables = [names.variable(members) for members in block_edges]
    # new generator list: lumped variables first, then data symbols
    data_symbols = mode_loss.generators[n_edges:]
    generators = tuple(variables) + tuple(data_symbols)
    mapping = {i: k for k, members in enumerate(blocks) for i in members}
    mapping |= {n_edges + j: len(variables) + j for j in range(len(data_symbols))}
    data_loss = mode_loss.loss.rename(mapping)
    size = [1] * n_edges if sizes is None else list(sizes)
    block_size = [as_sympy(sum(size[i] for i in members)) for members in blocks]
    decay = as_sympy(gamma)
    tied_loss = data_loss + sum(
        (
            Polynomial.variable(k) * Polynomial.variable(k) * (decay * block_size[k] / 2)
            for k in range(len(blocks))
        ),
        Polynomial(),
    )
    # one pass over the terms for every derivative (``diff`` per variable is quadratic)
    tied_gradient = tied_loss.gradient(range(len(blocks)))
    rhs_poly = {k: tied_gradient[k] * (-1 / block_size[k]) for k in range(len(blocks))}
    terms = len(tied_loss.terms) + sum(len(p.terms) for p in rhs_poly.values())
    check_work(
        terms * TERM_SECONDS,
        f"{source or 'the reduction'}: {len(blocks)} reduced equations with {terms} terms "
        f"(lump {lump!r})",
        advice="lump symmetry or balanced ties more edges, or solve --route moments",
    )
    rhs = {variables[k]: tidy(p.to_sympy(generators)) for k, p in rhs_poly.items()}
    initial = {variables[k]: init[edges[members[0]]] for k, members in enumerate(blocks)}
    system_edges = dict(zip(variables, block_edges, strict=True))
    symbolic_sizes = {
        variables[k]: n for k, n in enumerate(block_size) if n != len(system_edges[variables[k]])
    }
    data_gradient = data_loss.gradient(range(len(blocks))) if decay != 0 else tied_gradient
    data_rhs = {k: data_gradient[k] * (-1 / block_size[k]) for k in range(len(blocks))}
    quadratics = conserved_quadratics(data_rhs, len(variables), generators)
    conserved, decaying = (quadratics, []) if decay == 0 else ([], quadratics)
    eliminated: dict[sp.Symbol, sp.Expr] = {}
    constants: dict[sp.Symbol, Any] = {}
    if lump == "full":
        rhs, eliminated, constants = eliminate(
            rhs, conserved, variables, system_edges, initial, constant=names.constant
        )
    system = ReducedSystem(
        variables=tuple(v for v in variables if v not in eliminated),
        edges=system_edges,
        rhs={v: e for v, e in rhs.items() if v not in eliminated},
        loss=tidy_loss(tied_loss.to_sympy(generators)),
        symbols=dict(mode_loss.data_values),
        modes=mode_loss.slots,
        initial=initial,
        conserved=tuple(conserved),
        decaying=tuple(decaying),
        weight_decay=decay,
        eliminated=eliminated,
        constants=constants,
        closed_form=closed_form(rhs, eliminated, constants),
        sizes=symbolic_sizes,
    )
    return set_internal(
        system,
        _lumped=tuple(variables),
        _generators=generators,
        _context_losses=tuple(p.rename(mapping) for p in mode_loss.per_context),
        _loss_poly=tied_loss,
    )
