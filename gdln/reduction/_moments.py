r"""The expected reduced dynamics without listing paths: :class:`ExpectedDynamics`.

In the decoupled regime every mode $\alpha$ is a network with one scalar $b_e$ per edge,
and its dynamics are gradient flow on one loss (Eq. 10 of Saxe et al. 2022, written as in
:mod:`gdln.reduction`)

$$\mathcal L_\alpha=\sum_c\pi_c\sum_o\Big[-\sum_i s^c_{o,i}\,\mathbb E F^c_{o,i}
+\tfrac12\sum_{i,i'}d^c_{i,i'}\,\mathbb E\big[F^c_{o,i}F^c_{o,i'}\big]\Big],$$

where $F^c_{o,i}$ is the scalar transfer from input $i$ to output $o$ and the expectation
is over independent random gates $\delta\sim\mathrm{Bernoulli}(p)$ (stochastic depth,
Hayou & Ayed 2021; without random gates it is the identity). The first and second moments
of the transfers follow a recursion over the graph, recorded once as a tape of
$O(\text{contexts}\times\text{edges})$ terms (:mod:`gdln.reduction._tape`), so a residual
chain of $L$ blocks costs $O(L)$ for its $2^L$ paths. This module assembles the tape of a
problem: its components and bases (:mod:`gdln.reduction._path_free`, or those of a
:class:`~gdln.Reduction`), the edge-value table and the loss terms of every context.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import numpy as np
import sympy as sp

from .._edge import Edge
from .._errors import GdlnError
from ..graphfile._reader import Problem
from ..paths._statistics import ContextActivity, context_activity
from ..task._task import Context, _symbolic
from ._bases import Modes
from ._decoupled import DecoupledBases, anchor_bases
from ._fixed import fixed_value
from ._loss import context_constants, edge_symbols, floor_at_zero
from ._modes import Space, mode_values, tidy_number
from ._narrow import check_narrow_nodes
from ._numeric import NumericFlow, Recorded
from ._path_free import edge_components, path_free_modes, sources
from ._poly import Polynomial, coefficient
from ._reduce import initial_values
from ._system import Reduction
from ._tape import Root, Tape, TapeBuilder

__all__ = ["ExpectedDynamics", "expected_dynamics"]


@dataclass(frozen=True, eq=False)
class ExpectedDynamics(DecoupledBases):
    r"""The exact expected reduced dynamics of a problem, evaluated without listing paths.

    ``b`` is an array ``(len(edges), n_modes)``: the scalar $b_{e,\alpha}$ of every trained
    edge in every mode (entries where ``alive`` is false are ignored). The loss is that of
    Eq. (1) of Saxe et al. 2022 averaged over the random gates,
    $\tfrac12\langle\lVert y\rVert^2\rangle+\sum_\alpha\mathcal L_\alpha(b_{\cdot,\alpha})$,
    and its gradient flow $\tau\,\dot b=-\partial\mathcal L/\partial b$ is Eq. (10) in
    expectation: what full-batch gradient descent with gates redrawn every step does on
    average, from decoupled weights (Eq. 9). See :mod:`gdln.reduction._tape` for the
    recursion that evaluates it.

    Parameters
    ----------
    problem
        What was reduced.
    edges
        The trained edges (rows of ``b``); fixed edges hold $b_e = c$ and are not listed.
    variables
        One name per edge, as the symbolic route names them (``b_u_v``).
    alive
        ``(edges, n_modes)`` bool: whether $b_{e,\alpha}$ exists (both ends carry mode
        $\alpha$).
    initial
        ``(edges, n_modes)`` initial values (zero where not alive).
    constant
        $\tfrac12\langle\lVert y\rVert^2\rangle$.
    context_constants
        Per context, $\tfrac12\langle\lVert y\rVert^2\rangle_c$.
    modes
        Per component of coupled edges, its :class:`~gdln.Modes`.
    _tape, _table_edges, _fixed, _trained_row, _table_alive
        Internal: the moment program and its table of edge values.
    _space, _edge_component, _anchors, _hidden
        Internal: node and edge bookkeeping for the decoupled weights (Eq. 9).

    Raises
    ------
    ValueError
        ``alive`` and ``initial`` are not ``(edges, modes)``, or ``variables`` is not
        one per edge.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eqs. (1), (9) and (10).
    """

    problem: Problem
    edges: tuple[Edge, ...]
    variables: tuple[sp.Symbol, ...]
    alive: np.ndarray
    initial: np.ndarray
    constant: float
    context_constants: tuple[float, ...]
    modes: tuple[Modes, ...]
    _tape: Tape = field(repr=False)
    _table_edges: tuple[Edge, ...] = field(repr=False)  # rows of the edge-value table
    _fixed: np.ndarray = field(repr=False)  # (table rows, modes): c_e * alive, 0 for trained
    _trained_row: np.ndarray = field(repr=False)  # table row of each trained edge
    _table_alive: np.ndarray = field(repr=False)
    _space: Mapping[tuple[int, Hashable], Hashable] = field(repr=False, default_factory=dict)
    _edge_component: Mapping[Edge, int] = field(repr=False, default_factory=dict)
    _anchors: Mapping[int, np.ndarray] = field(repr=False, default_factory=dict)
    _hidden: dict[int, dict[Hashable, np.ndarray]] = field(
        repr=False, default_factory=dict, compare=False
    )  # seed -> hidden-node bases, drawn once

    def __post_init__(self) -> None:
        shape = (len(self.edges), self.alive.shape[1] if self.alive.ndim == 2 else -1)
        if self.alive.shape != shape or self.initial.shape != shape:
            raise ValueError(
                f"alive {self.alive.shape} and initial {self.initial.shape} must both be "
                f"(edges, modes) = {shape}"
            )
        if len(self.variables) != len(self.edges):
            raise ValueError("one variable per trained edge")

    def __repr__(self) -> str:
        return (
            f"ExpectedDynamics({self.problem.name!r}, edges={len(self.edges)}, "
            f"modes={self.n_modes}, tape={len(self._tape.child)} terms)"
        )

    @property
    def n_modes(self) -> int:
        return int(self.alive.shape[1])

    @property
    def tape_size(self) -> int:
        """Number of terms of the moment program: its cost, $O(L)$ for a residual chain."""
        return len(self._tape.child)

    # -- evaluation ---------------------------------------------------------------------
    def _values(self, b: Any) -> np.ndarray:
        b = np.asarray(b, dtype=float)
        if b.shape != self.alive.shape:
            raise GdlnError(
                f"b has shape {b.shape}; expected {self.alive.shape} (trained edges, modes)"
            )
        if self._tape.coef is None:
            raise GdlnError(
                f"{self.problem.source}: a survival probability or gate is symbolic; the moment "
                "route computes numbers, so give it a value (e.g. --param p_L=0.5)"
            )
        table = self._fixed.copy()
        table[self._trained_row] = np.where(self.alive, b, 0.0)
        return np.vstack([table, np.ones((1, self.n_modes))])  # row -1: no edge

    def _context_mode_losses(self, val: np.ndarray) -> np.ndarray:
        """``(contexts, modes)``: per context, $\\sum$ of its loss terms (no constant, no $\\pi_c$)."""
        return self._tape.root_sums(val, len(self.context_constants))

    def _probabilities(self) -> np.ndarray:
        task = self.problem.require_task()
        return np.array([float(c.probability) for c in task.contexts])

    def mode_losses(self, b: Any) -> np.ndarray:
        r"""$\mathcal L_\alpha$ per mode ``(n_modes,)`` (without the constant)."""
        val, _ = self._tape.forward(self._values(b))
        return self._probabilities() @ self._context_mode_losses(val)

    def loss(self, b: Any) -> float:
        r"""The expected loss of Eq. (1): $\tfrac12\langle\lVert y\rVert^2\rangle+\sum_\alpha\mathcal L_\alpha$."""
        return float(floor_at_zero(self.constant + self.mode_losses(b).sum(), self.constant))

    def context_losses(self, b: Any) -> np.ndarray:
        r"""Per context, the expected $\tfrac12\langle\lVert y-h\rVert^2\rangle_c$."""
        val, _ = self._tape.forward(self._values(b))
        constants = np.array(self.context_constants, dtype=float)
        return floor_at_zero(constants + self._context_mode_losses(val).sum(axis=1), constants)

    def gradient(self, b: Any) -> np.ndarray:
        r"""$\partial\mathcal L/\partial b$ ``(edges, n_modes)`` by a reverse pass over the tape."""
        return self._loss_and_gradient(b)[1]

    def flow(self, b: Any) -> np.ndarray:
        r"""$\tau\,\dot b = -\partial\mathcal L/\partial b$ (Eq. 10 in expectation, $\tau=1$)."""
        return -self.gradient(b)

    def _loss_and_gradient(self, b: Any) -> tuple[float, np.ndarray]:
        table = self._values(b)
        val, factor = self._tape.forward(table)
        pi = self._probabilities()
        loss = float(self.constant + (pi @ self._context_mode_losses(val)).sum())
        grad_table = self._tape.table_gradient(table, val, factor, pi)
        return loss, grad_table[self._trained_row] * self.alive

    def numeric_flow(self, *, gd_map: bool = False) -> NumericFlow:
        r"""These dynamics as :func:`gdln.solve` integrates them (the protocol of
        :meth:`gdln.Reduction.numeric_flow`).

        The state is the live entries of ``b`` (:attr:`alive`), edge by edge; the
        right-hand side is :meth:`flow` (Eq. 10 in expectation), exact for the flow and the
        gradient-descent map alike (nothing is eliminated), so ``gd_map`` changes nothing.
        Its Jacobian couples only entries of one mode.
        """
        del gd_map  # nothing eliminated: the same dynamics for the flow and the map
        alive = self.alive
        rows, cols = np.nonzero(alive)

        def batch_rhs(y: np.ndarray, c: np.ndarray) -> np.ndarray:
            out = np.empty_like(y)
            b = np.zeros(alive.shape)
            for k in range(y.shape[1]):
                b[alive] = y[:, k]
                out[:, k] = self.flow(b)[alive]
            return out

        task = self.problem.require_task()
        probabilities = np.array([float(c.probability) for c in task.contexts])

        def record(states: np.ndarray, c: np.ndarray) -> Recorded:
            T, _, n = states.shape
            bs = np.zeros((T, *alive.shape, n))
            bs[:, alive, :] = states
            context_loss = np.empty((T, len(probabilities), n))
            for t in range(T):
                for k in range(n):  # never below 0
                    context_loss[t, :, k] = self.context_losses(bs[t, :, :, k])
            series = {str(v): bs[:, i] for i, v in enumerate(self.variables)}
            loss = np.einsum("c,tcb->tb", probabilities, context_loss)
            return Recorded(series, context_loss, loss)

        meta = {
            "source": self.problem.source,
            "params": {k: str(v) for k, v in self.problem.params.items()},
            "route": "moments",
            "time_unit": "tau",
            "modes": list(range(self.n_modes)),
            "context_labels": [c.label for c in task.contexts],
        }
        return NumericFlow(
            y0=self.initial[alive].astype(float),
            constants=np.zeros(0),
            batch_rhs=batch_rhs,
            labels=tuple((str(self.variables[r]), int(c)) for r, c in zip(rows, cols, strict=True)),
            blocks=cols.astype(int),
            record=record,
            meta=meta,
            source=self.problem.source,
        )

    # -- the symbolic evaluation of the same tape ------------------------------------------
    def loss_polynomial(self, mode: int) -> sp.Expr:
        r"""$\mathcal L_\alpha$ of one mode, expanded: the tape evaluated with exact polynomials.

        Its variables are :attr:`variables`; coefficients are exact (and symbolic where the
        survival probabilities are). For small graphs only: the expansion has one term per
        monomial of the loss.
        """
        tape = self._tape
        if not 0 <= mode < self.n_modes:
            raise GdlnError(f"mode {mode} does not exist; expected 0 <= mode < {self.n_modes}")
        index = {row: k for k, row in enumerate(self._trained_row.tolist())}
        table: list[Polynomial] = []
        graph = self.problem.graph
        for row, e in enumerate(self._table_edges):
            if not self._table_alive[row, mode]:
                table.append(Polynomial())
            elif row in index:
                table.append(Polynomial.variable(index[row]))
            else:
                table.append(Polynomial.constant(fixed_value(graph, e)))
        values = tape.polynomial_values(table)
        task = self.problem.require_task()
        loss = Polynomial()
        for r, q in enumerate(tape.root_quantity.tolist()):
            c = task.contexts[int(tape.root_context[r])]
            weight = coefficient(tape.root_coef_exact[r][mode]) * coefficient(c.probability)
            loss.add_scaled(values[q], weight)
        return sp.expand(loss.to_sympy(self.variables))

    # -- weights of the full network (Eq. 9) ----------------------------------------------
    def edge_bases(self, edge: Edge, *, seed: int = 0) -> tuple[np.ndarray, np.ndarray, list[int]]:
        """Mode vectors at the two ends of ``edge``: ``(left, right, modes)`` (as for a Reduction)."""
        row = self._table_edges.index(edge)
        slots = [a for a in range(self.n_modes) if self._table_alive[row, a]]
        left, right = self._mode_vectors(edge, slots, seed)
        return left, right, slots

    def decoupled_weights(self, b: Any = None, *, seed: int = 0) -> dict[Edge, np.ndarray]:
        r"""Full weights $W_e=\sum_\alpha b_{e,\alpha}\,r^\alpha_{t(e)}r^{\alpha\top}_{s(e)}$ (Eq. 9).

        ``b`` defaults to :attr:`initial`; fixed edges hold $c\,I$; hidden-node bases are
        random orthogonal matrices drawn from ``seed`` (shared along fixed edges).
        """
        b = self.initial if b is None else np.asarray(b, dtype=float)
        graph = self.problem.graph
        row_of = {e: i for i, e in enumerate(self.edges)}
        out = {}
        for e in graph.edges:
            shape = (graph.nodes[e[1]]["size"], graph.nodes[e[0]]["size"])
            c = fixed_value(graph, e)
            if c is not None:
                out[e] = float(c) * np.eye(shape[0])
            elif e in row_of and e in self._edge_component:
                left, right, slots = self.edge_bases(e, seed=seed)
                out[e] = (left * b[row_of[e], slots]) @ right.T
            else:
                out[e] = np.zeros(shape)
        return out

    def project(self, weights: Mapping[Edge, Any], *, seed: int = 0) -> np.ndarray:
        r"""$b_{e,\alpha} = r^{\alpha\top}_{t(e)}W_e\,r^\alpha_{s(e)}$ for every trained edge and mode."""
        out = np.zeros(self.alive.shape)
        for i, e in enumerate(self.edges):
            if e not in self._edge_component:
                continue
            left, right, slots = self.edge_bases(e, seed=seed)
            W = np.asarray(weights[e], dtype=float)
            out[i, slots] = np.einsum("ta,ts,sa->a", left, W, right)
        return out


def expected_dynamics(source: Problem | Reduction, *, init: Any = None) -> ExpectedDynamics:
    r"""The expected reduced dynamics of a problem, without listing its paths.

    Parameters
    ----------
    source
        A :class:`~gdln.Problem`: its modes are found from the datasets and the fixed-edge
        classes directly, never from paths (needs each input and output node to see one
        dataset field per group of coupled edges). Or a :class:`~gdln.Reduction`: its
        bases (found from path statistics) are reused, for any task it handles.
    init
        Initial value of every $b_e$ (number or mapping, as for :func:`gdln.reduce`);
        default: the file's ``solve.init``, else 0.001. With a Reduction, its own.

    Returns
    -------
    ExpectedDynamics
        ``.loss(b)``, ``.gradient(b)``, ``.flow(b)``, ``.loss_polynomial(mode)``; pass it
        to :func:`gdln.solve` for the expected gradient flow or GD map.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eq. (10) in expectation over the gates, from the
    decoupled weights of Eq. (9).

    Examples
    --------
    >>> import gdln
    >>> problem = gdln.load("graphs/resnet_sd.yaml", params={"L": "1000"})
    >>> dyn = gdln.expected_dynamics(problem)
    >>> dyn.tape_size < 20 * 1000  # O(L) terms for 2**1000 paths
    True
    """
    if isinstance(source, Reduction):
        problem = source.problem
        init_values = dict(source._init) if init is None else initial_values(problem, init)
        task = problem.require_task()
        activity = context_activity(problem.graph, task)
        return _assemble(
            problem,
            activity,
            dict(source._edge_component),
            dict(source._space),
            list(source.modes),
            init_values,
            dict(source._anchors),
        )
    problem = source
    task = problem.require_task()
    graph = problem.graph
    activity = context_activity(graph, task)
    component = edge_components(graph, task, activity)
    if not component:
        raise GdlnError(f"{problem.source}: no context switches on any path with data at its input")
    space, modes = path_free_modes(problem, activity, component)
    check_narrow_nodes(problem, space, modes, component, activity=activity)
    return _assemble(
        problem,
        activity,
        component,
        space,
        modes,
        initial_values(problem, init),
        anchor_bases(graph, space, modes),
    )


@dataclass(frozen=True)
class _EdgeTable:
    """The rows of the edge-value table: every edge of a component, fixed ones included.

    Attributes
    ----------
    edges
        One row per edge, ordered by target then source in topological order.
    alive
        ``(rows, modes)``: whether both ends of the edge carry the mode.
    fixed
        ``(rows, modes)``: $c_e$ of fixed edges where alive, 0 elsewhere.
    trained
        The trained edges, and ``trained_row`` their rows.
    """

    edges: tuple[Edge, ...]
    alive: np.ndarray
    fixed: np.ndarray
    trained: tuple[Edge, ...]
    trained_row: np.ndarray


def _edge_table(
    graph: nx.DiGraph,
    component: Mapping[Edge, int],
    space: Mapping[tuple[int, Hashable], Hashable],
    modes: Sequence[Modes],
    n_modes: int,
) -> _EdgeTable:
    """Which edge carries which mode, and the values of the fixed ones."""
    data_nodes = {v for v in graph.nodes if graph.in_degree(v) == 0 or graph.out_degree(v) == 0}

    def node_alive(k: int, v: Hashable) -> np.ndarray:
        if v not in data_nodes:
            return np.arange(n_modes) < graph.nodes[v]["size"]
        if (k, v) not in space:
            return np.zeros(n_modes, dtype=bool)
        label = space[(k, v)]
        return np.array(
            [a < len(modes[k]) and label in modes[k].vectors[a] for a in range(n_modes)]
        )

    order = {v: i for i, v in enumerate(nx.topological_sort(graph))}
    edges = tuple(sorted(component, key=lambda e: (order[e[1]], order[e[0]])))
    alive = np.array(
        [node_alive(component[e], e[0]) & node_alive(component[e], e[1]) for e in edges]
    ).reshape(len(edges), n_modes)
    fixed = np.zeros((len(edges), n_modes))
    for i, e in enumerate(edges):
        c = fixed_value(graph, e)
        if c is not None:
            fixed[i] = float(c) * alive[i]
    trained = tuple(e for e in edges if fixed_value(graph, e) is None)
    row = {e: i for i, e in enumerate(edges)}
    trained_row = np.array([row[e] for e in trained], dtype=np.int64)
    return _EdgeTable(edges, alive, fixed, trained, trained_row)


class _ModeValues:
    """Values per mode (padded to ``n_modes``) of dataset moments, computed once each."""

    def __init__(self, problem: Problem, space: Space, modes: Sequence[Modes], n_modes: int):
        self.task = problem.require_task()
        self.space, self.modes, self.n_modes = space, modes, n_modes
        self.cache: dict[tuple[Any, ...], tuple[Any, ...]] = {}

    def __call__(
        self, k: int, dataset: str, fa: str, fb: str, a: Hashable, b: Hashable
    ) -> tuple[Any, ...]:
        """The moment of fields ``fa``, ``fb`` between nodes ``a``, ``b`` of component ``k``."""
        key = (k, dataset, fa, fb, a, b)
        if key not in self.cache:
            moment = self.task.datasets[dataset].moment(fa, fb)
            found = mode_values(self.modes[k], self.space[(k, a)], self.space[(k, b)], moment)
            padding = [0] * (self.n_modes - len(found))
            self.cache[key] = tuple(tidy_number(x) for x in found) + tuple(padding)
        return self.cache[key]


def _context_roots(
    c: Context,
    act: ContextActivity,
    k: int,
    edges: set[Edge],
    outputs: set[Hashable],
    order: Mapping[Hashable, int],
    values: _ModeValues,
) -> list[Root]:
    r"""The loss terms of component ``k`` in context ``c``: $-s\,m_o$ and $\tfrac12 d\,M_{o,o}$."""
    roots: list[Root] = []
    for o in sorted({e[1] for e in edges if e[1] in outputs}, key=order.__getitem__):
        reached: set[Any] = set()
        for e in edges:
            if e[1] == o:
                reached |= sources(c, act, e[0])
        ordered = sorted(reached, key=order.__getitem__)
        if o in c.targets:
            for i in ordered:
                s = values(k, c.dataset, c.targets[o], c.inputs[i], o, i)
                roots.append(("s", tuple(-x for x in s), ("m", o, i)))
        for i, j in itertools.product(ordered, repeat=2):
            d = values(k, c.dataset, c.inputs[i], c.inputs[j], i, j)
            half = tuple(sp.Rational(1, 2) * x for x in d)
            roots.append(("d", half, ("M", (o, i), (o, j))))
    return roots


def _record_tape(
    problem: Problem,
    activity: Sequence[ContextActivity],
    component: Mapping[Edge, int],
    table: _EdgeTable,
    values: _ModeValues,
) -> Tape:
    """Record every context's loss terms, component by component."""
    graph = problem.graph
    task = problem.require_task()
    outputs = {v for v in graph.nodes if graph.out_degree(v) == 0}
    order = {v: i for i, v in enumerate(nx.topological_sort(graph))}
    builder = TapeBuilder(graph, task, {e: i for i, e in enumerate(table.edges)})
    for index, (c, act) in enumerate(zip(task.contexts, activity, strict=True)):
        by_component: dict[int, set[Edge]] = defaultdict(set)
        for e in act.edges:
            by_component[component[e]].add(e)
        for k, edges in sorted(by_component.items()):
            roots = _context_roots(c, act, k, edges, outputs, order, values)
            builder.record(index, edges, act, roots)
    return builder.tape(values.n_modes)


def _assemble(
    problem: Problem,
    activity: Sequence[ContextActivity],
    component: Mapping[Edge, int],
    space: Space,
    modes: Sequence[Modes],
    init: Mapping[Edge, Any],
    anchors: Mapping[int, np.ndarray],
) -> ExpectedDynamics:
    """The tape and edge table of a problem whose components and bases are known."""
    task = problem.require_task()
    n_modes = max((len(m) for m in modes), default=0)
    table = _edge_table(problem.graph, component, space, modes, n_modes)
    tape = _record_tape(
        problem, activity, component, table, _ModeValues(problem, space, modes, n_modes)
    )
    constants = context_constants(task)
    total = sum((c.probability * v for c, v in zip(task.contexts, constants, strict=True)), 0)
    trained = table.trained
    alive = table.alive[table.trained_row] if trained else np.zeros((0, n_modes), dtype=bool)
    names = edge_symbols(list(trained))
    initial = np.array([[float(init.get(e, 0))] * n_modes for e in trained]).reshape(alive.shape)
    return ExpectedDynamics(
        problem=problem,
        edges=trained,
        variables=tuple(names[e] for e in trained),
        alive=alive,
        initial=np.where(alive, initial, 0.0),
        constant=_float_or_nan(total),
        context_constants=tuple(_float_or_nan(v) for v in constants),
        modes=tuple(modes),
        _tape=tape,
        _table_edges=table.edges,
        _fixed=table.fixed,
        _trained_row=table.trained_row,
        _table_alive=table.alive,
        _space=dict(space),
        _edge_component=dict(component),
        _anchors=dict(anchors),
    )


def _float_or_nan(value: Any) -> float:
    if _symbolic(value):
        return float("nan")
    return float(value)
