r"""The per-mode scalar loss, built as a polynomial (Eq. 10 of Saxe et al. 2022).

In the decoupled regime every mode $\alpha$ is a network with one scalar $b_e$ per edge,
and its dynamics are gradient flow on one loss,

$$\mathcal{L}_\alpha(b)=\sum_c \pi_c\sum_{o}\Big[-\sum_i s^c_{o,i}F^c_{o,i}
+\tfrac12\sum_{i,i'}F^c_{o,i}\,d^c_{i,i'}\,F^c_{o,i'}\Big],\qquad
F^c_{o,i}=\sum_{p:i\to o} g^c_p\, b_p,$$

with $s^c$, $d^c$ the context's data statistics in mode $\alpha$ and $b_p=\prod_{e\in p}b_e$.
Fixed edges enter $b_p$ as their constant $c$. Independent random gates $\delta_i$
(stochastic depth) enter $F$ as extra polynomial variables; the expected loss reduces
every power $\delta_i^k$ to $p_i$ ($\delta^2=\delta$, independent items).

Data symbols. Each distinct vector (over modes) of values $s^c_{o,i}$ gets one symbol
($s$, $s_2$, ...), and likewise $d$; their values per mode are kept with the loss.
"""

from __future__ import annotations

import itertools
import re
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np
import sympy as sp

from .._bounded._expressions import as_sympy
from .._edge import Edge
from ..paths._statistics import ActivePaths
from ..task._problem import Problem
from ..task._task import Context, Task
from ._bases import Modes
from ._fixed import fixed_value
from ._modes import mode_values, tidy_number
from ._poly import Polynomial

__all__: list[str] = []  # package-internal: the per-mode loss, for reduce and the moment route

ROUNDING = 1e-9
"""Relative size of the rounding :func:`floor_at_zero` removes below zero."""

DELTA = 1 << 40  # polynomial variable index of the first random gate delta_i

Transfers = dict[tuple[int, Hashable], dict[Hashable, Polynomial]]
"""(component, output) -> input -> the transfer $F^c_{o,i}$ as a polynomial."""


@dataclass(frozen=True)
class ModeLoss:
    r"""The loss $\mathcal L_\alpha$ of one class of modes, as polynomials.

    Attributes
    ----------
    edges
        The trained edges; polynomial variable ``i`` is $b_e$ of ``edges[i]``.
    loss
        $\sum_c\pi_c\ell_c$: the per-mode loss without its constant.
    per_context
        $\ell_c$ per context (without $\pi_c$).
    generators
        The sympy symbol of every polynomial variable: the edges' $b_e$, then the data
        symbols.
    data_values
        Data symbol -> its value in each mode of ``slots``.
    slots
        The modes this loss describes.
    """

    edges: list[Edge]
    loss: Polynomial
    per_context: list[Polynomial]
    generators: list[sp.Symbol]
    data_values: dict[sp.Symbol, tuple[Any, ...]]
    slots: tuple[int, ...]


def floor_at_zero(losses: np.ndarray, scale: Any) -> np.ndarray:
    r"""Losses of Eq. (1) evaluated as $c + \sum_\alpha\mathcal L_\alpha$, never below zero.

    The loss $\tfrac12\langle\lVert y-h\rVert^2\rangle$ is a mean of squares, but its
    reduced form adds the constant $c = \tfrac12\langle\lVert y\rVert^2\rangle$ to per-mode
    losses that tend to $-c$ as the network learns the task, so at convergence the sum is
    rounding, of either sign (-6.7e-16). A value below zero by at most ``ROUNDING`` times
    ``scale`` (the constant $c$, broadcast against ``losses``) is that rounding and is
    reported as 0; anything further below zero is kept, to be seen and not hidden.

    >>> floor_at_zero(np.array([0.5, -4e-16, 1e-17, -1e-3]), 30.5).tolist()
    [0.5, 0.0, 1e-17, -0.001]
    """
    losses = np.asarray(losses, dtype=float)
    bound = ROUNDING * np.abs(np.asarray(scale, dtype=float))
    return np.where((losses < 0) & (losses >= -bound), 0.0, losses)


def edge_symbols(edges: Sequence[Edge]) -> dict[Edge, sp.Symbol]:
    """One symbol ``b_u_v`` per edge (made unique where names collide)."""
    names: dict[Edge, sp.Symbol] = {}
    used: set[str] = set()
    for e in edges:
        base = "b_" + re.sub(r"\W", "_", f"{e[0]}_{e[1]}")
        name, k = base, 2
        while name in used:
            name, k = f"{base}_{k}", k + 1
        used.add(name)
        names[e] = sp.Symbol(name, real=True)
    return names


def context_constants(task: Task) -> list[Any]:
    r"""Per context, $\tfrac12\langle\lVert y\rVert^2\rangle_c$: its loss at zero weights."""
    return [values[key] for values, key in _constants_by_binding(task)]


def _exact(value: Any) -> bool:
    """Whether sums of ``value`` are independent of their order (exact, no floats)."""
    return isinstance(value, (int, sp.Basic)) and not as_sympy(value).has(sp.Float)


def _binding(c: Context) -> tuple[str, tuple[str, ...]]:
    """What a context's constant depends on: its dataset and the fields it targets."""
    return c.dataset, tuple(sorted(c.targets.values()))


def _constants_by_binding(
    task: Task,
) -> list[tuple[dict[tuple[str, tuple[str, ...]], Any], tuple[str, tuple[str, ...]]]]:
    r"""Per context, the table of $\tfrac12\langle\lVert y\rVert^2\rangle$ per distinct
    (dataset, target fields) and the context's key in it; each value is computed once."""
    values: dict[tuple[str, tuple[str, ...]], Any] = {}
    out = []
    for c in task.contexts:
        key = _binding(c)
        if key not in values:
            data = task.datasets[c.dataset]
            value: Any = 0
            for f in key[1]:
                m = data.moment(f, f)
                value = value + (m.trace() if isinstance(m, sp.MatrixBase) else float(np.trace(m)))
            values[key] = value / 2
        out.append((values, key))
    return out


def _generator(gen: dict[sp.Symbol, int], symbol: sp.Symbol) -> int:
    """The polynomial variable of ``symbol``, appended to ``gen`` on first use."""
    if symbol not in gen:
        gen[symbol] = len(gen)
    return gen[symbol]


class LossBuilder:
    """Builds the per-mode loss polynomials of one reduction.

    Parameters
    ----------
    problem
        The problem being reduced.
    active
        Its active paths.
    space
        (component, data node) -> space label.
    modes
        The modes of each component.
    slot_edges
        Per mode slot, the edges alive in it (:func:`~gdln.reduction._modes.alive_edges`).
    """

    def __init__(
        self,
        problem: Problem,
        active: ActivePaths,
        space: Mapping[tuple[int, Hashable], Hashable],
        modes: Sequence[Modes],
        slot_edges: Mapping[int, frozenset[Edge]],
    ):
        self.problem = problem
        self.task = problem.require_task()
        self.active = active
        self.space = space
        self.modes = modes
        self.slot_edges = slot_edges
        self.comp_of = active.component_of()
        self.n_slots = len(slot_edges)
        self.symbol_values: dict[tuple[str, tuple[Any, ...]], sp.Symbol] = {}
        self.symbol_order: list[tuple[sp.Symbol, tuple[Any, ...]]] = []
        self._value_cache: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        self._symbol_cache: dict[tuple[Any, ...], sp.Symbol | None] = {}
        alive = {x for s in slot_edges.values() for x in s}
        self.edges = [
            e
            for e in nx.topological_sort(nx.line_graph(problem.graph))
            if e in alive and fixed_value(problem.graph, e) is None
        ]
        self._names = edge_symbols(self.edges)
        self.random = {item: DELTA + i for i, item in enumerate(self.task.random_gates)}
        self.survival = {DELTA + i: p for i, p in enumerate(self.task.random_gates.values())}

    def classes(self) -> list[tuple[int, ...]]:
        """Groups of mode slots whose 1-D networks have the same edges."""
        groups: dict[frozenset[Edge], list[int]] = defaultdict(list)
        for alpha, edges in self.slot_edges.items():
            if edges:
                groups[edges].append(alpha)
        return [tuple(g) for g in groups.values()]

    def variable_edges(self, slots: tuple[int, ...]) -> list[Edge]:
        """The trained edges of these modes, in topological order."""
        return [e for e in self.edges if e in self.slot_edges[slots[0]]]

    def mode_loss(self, slots: tuple[int, ...]) -> ModeLoss:
        r"""$\mathcal L_\alpha$ of these modes as polynomials in their $b_e$ and data symbols."""
        edges = self.variable_edges(slots)
        var_index = {e: i for i, e in enumerate(edges)}
        gen = {self._names[e]: i for i, e in enumerate(edges)}
        per_context = self.context_losses(slots, var_index, gen)  # adds the data symbols
        loss = Polynomial()
        for c, ell in zip(self.task.contexts, per_context, strict=True):
            loss.add_scaled(ell, c.probability)
        data_values = {
            sym: tuple(vals[a] for a in slots) for sym, vals in self.symbol_order if sym in gen
        }
        generators = sorted(gen, key=gen.__getitem__)
        return ModeLoss(edges, loss, per_context, generators, data_values, slots)

    def constant_loss(self, slots: tuple[int, ...]) -> Any:
        """Summed over these modes: the loss of modes whose edges are all fixed."""
        gen: dict[sp.Symbol, int] = {}
        per_context = self.context_losses(slots, {}, gen)
        values = dict(self.symbol_order)
        total: Any = 0
        for c, ell in zip(self.task.contexts, per_context, strict=True):
            expr = ell.to_sympy(sorted(gen, key=gen.__getitem__))
            for alpha in slots:
                point = {sym: values[sym][alpha] for sym in gen}
                total = total + c.probability * expr.subs(point)
        return total

    def constants(self) -> tuple[Any, tuple[Any, ...]]:
        r"""$\tfrac12\langle\lVert y\rVert^2\rangle$ and its value per context."""
        tidied: dict[tuple[str, tuple[str, ...]], Any] = {}
        weight: dict[tuple[str, tuple[str, ...]], Any] = defaultdict(lambda: sp.Integer(0))
        per_context = []
        exact = True
        for c, (values, key) in zip(
            self.task.contexts, _constants_by_binding(self.task), strict=True
        ):
            if key not in tidied:
                tidied[key] = tidy_number(values[key])
            per_context.append(tidied[key])
            weight[key] = weight[key] + c.probability
            exact = exact and _exact(c.probability) and _exact(tidied[key])
        if exact:  # rational arithmetic: grouping by binding gives the same sum
            terms = (weight[k] * tidied[k] for k in tidied)
        else:  # floats: keep the per-context order of summation
            terms = (
                c.probability * v for c, v in zip(self.task.contexts, per_context, strict=True)
            )
        total = sum(terms, sp.Integer(0))
        return tidy_number(total), tuple(per_context)

    def context_losses(
        self, slots: tuple[int, ...], var_index: Mapping[Edge, int], gen: dict[sp.Symbol, int]
    ) -> list[Polynomial]:
        r"""$\ell_c$ per context (without $\pi_c$ and the constant) for these modes."""
        alive = self.slot_edges[slots[0]]
        out = []
        for c, found in zip(self.task.contexts, self.active.gates, strict=True):
            loss = Polynomial()
            for (k, o), transfers in self._transfers(found, alive, var_index).items():
                self._add_output_loss(loss, c, k, o, transfers, slots, gen)
            out.append(loss)
        return out

    def _transfers(
        self, found: Mapping[int, Any], alive: frozenset[Edge], var_index: Mapping[Edge, int]
    ) -> Transfers:
        r"""$F^c_{o,i}=\sum_{p:i\to o}g^c_p\,b_p$ (random gates as variables) of one context."""
        groups: Transfers = defaultdict(dict)
        for i, g in found.items():
            p = self.active.paths[i]
            if not all(e in alive for e in p.edges):
                continue
            term = Polynomial.constant(g)
            for e in p.edges:
                c_e = fixed_value(self.problem.graph, e)
                term = term * (Polynomial.variable(var_index[e]) if c_e is None else c_e)
            for item in self.active.random[i] if self.active.random else ():
                term = term * Polynomial.variable(self.random[item])
            transfers = groups[(self.comp_of[i], p.target)]
            transfers[p.source] = transfers[p.source] + term if p.source in transfers else term
        return groups

    def _add_output_loss(
        self,
        loss: Polynomial,
        c: Context,
        k: int,
        o: Hashable,
        transfers: Mapping[Hashable, Polynomial],
        slots: tuple[int, ...],
        gen: dict[sp.Symbol, int],
    ) -> None:
        r"""Add $\mathbb E[-\sum_i s_{o,i}F_{o,i}+\tfrac12\sum_{i,i'}F_{o,i}d_{i,i'}F_{o,i'}]$."""
        if o in c.targets:
            for i_node, F in transfers.items():
                fields = (c.targets[o], c.inputs[i_node])
                sym = self._data_symbol("s", k, c.dataset, fields, (o, i_node), slots)
                if sym is not None:
                    term = F * Polynomial.variable(_generator(gen, sym))
                    loss.add_scaled(self.expect(term), -1)
        for (ia, Fa), (ib, Fb) in itertools.product(transfers.items(), repeat=2):
            fields = (c.inputs[ia], c.inputs[ib])
            sym = self._data_symbol("d", k, c.dataset, fields, (ia, ib), slots)
            if sym is not None:
                term = Fa * Fb * Polynomial.variable(_generator(gen, sym))
                loss.add_scaled(self.expect(term), sp.Rational(1, 2))

    def expect(self, poly: Polynomial) -> Polynomial:
        r"""$\mathbb E$ over the random gates: every $\delta_i^k$ becomes $p_i$."""
        if not self.survival:
            return poly
        out = Polynomial()
        for m, c in poly.terms.items():
            kept = tuple((v, e) for v, e in m if v < DELTA)
            factor: Any = 1
            for v, _e in m:
                if v >= DELTA:
                    factor = factor * self.survival[v]
            out.add_scaled(Polynomial({kept: c}), factor)
        return out

    def _data_symbol(
        self,
        kind: str,
        k: int,
        dataset: str,
        fields: tuple[str, str],
        nodes: tuple[Hashable, Hashable],
        slots: tuple[int, ...],
    ) -> sp.Symbol | None:
        """The symbol of a statistic's values per mode; ``None`` if zero in these modes.

        Found once per (statistic, spaces, modes), not once per context that uses it.
        """
        spaces = (self.space[(k, nodes[0])], self.space[(k, nodes[1])])
        key = (kind, k, dataset, *fields, *spaces, slots)
        if key not in self._symbol_cache:
            values = self._values(kind, k, dataset, fields, nodes)
            found = None if not any(values[a] != 0 for a in slots) else self._symbol(kind, values)
            self._symbol_cache[key] = found
        return self._symbol_cache[key]

    def _values(
        self,
        kind: str,
        k: int,
        dataset: str,
        fields: tuple[str, str],
        nodes: tuple[Hashable, Hashable],
    ) -> tuple[Any, ...]:
        """Per mode slot, the value of the moment of ``fields`` between ``nodes``' spaces."""
        sa, sb = self.space[(k, nodes[0])], self.space[(k, nodes[1])]
        key = (kind, k, dataset, *fields, sa, sb)
        if key not in self._value_cache:
            moment = self.task.datasets[dataset].moment(*fields)
            values = mode_values(self.modes[k], sa, sb, moment)
            values += [0] * (self.n_slots - len(values))
            self._value_cache[key] = tuple(tidy_number(v) for v in values)
        return self._value_cache[key]

    def _symbol(self, kind: str, values: tuple[Any, ...]) -> sp.Symbol | None:
        """One symbol per distinct vector of values: ``s``, ``s_2``, ..., ``d``, ..."""
        if all(v == 0 for v in values):
            return None
        key = (kind, values)
        if key not in self.symbol_values:
            count = sum(1 for k2 in self.symbol_values if k2[0] == kind)
            name = kind if count == 0 else f"{kind}_{count + 1}"
            symbol = sp.Symbol(name, real=True)
            self.symbol_values[key] = symbol
            self.symbol_order.append((symbol, values))
        return self.symbol_values[key]
