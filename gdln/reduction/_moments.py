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
from ..paths._statistics import ContextActivity, context_activity
from ..settings._declared import Settings
from ..settings._door import AT_THE_DOOR, door
from ..task._problem import Problem, require_linear
from ..task._task import Context, is_symbolic
from ._bases import Modes
from ._decoupled import DecoupledBases, anchor_bases
from ._fixed import fixed_value
from ._internal import replace, set_internal
from ._loss import context_constants, edge_symbols, floor_at_zero
from ._modes import Space, mode_values, tidy_number
from ._narrow import check_narrow_nodes
from ._numeric import NumericFlow, moment_flow
from ._path_free import EdgeTable, edge_components, edge_table, path_free_modes, sources
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
    weight_decay
        $\gamma$: :meth:`gradient` and :meth:`flow` gain $\gamma b$, the gradient of
        $\tfrac\gamma2\sum b^2=\tfrac\gamma2\sum_e\lVert W_e\rVert_F^2$; :meth:`loss` is Eq. (1).

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
    weight_decay: float = 0.0
    # internal (set by expected_dynamics, not in the signature): the moment program and
    # its table of edge values; node and edge bookkeeping for the decoupled weights (Eq. 9)
    _tape: Tape = field(init=False, repr=False, compare=False)
    _table_edges: tuple[Edge, ...] = field(init=False, repr=False, compare=False)  # table rows
    _fixed: np.ndarray = field(init=False, repr=False, compare=False)  # c_e * alive; 0 trained
    _trained_row: np.ndarray = field(init=False, repr=False, compare=False)  # of trained edges
    _table_alive: np.ndarray = field(init=False, repr=False, compare=False)
    _space: Mapping[tuple[int, Hashable], Hashable] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )
    _edge_component: Mapping[Edge, int] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )
    _anchors: Mapping[int, np.ndarray] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )
    _hidden: dict[int, dict[Hashable, np.ndarray]] = field(
        init=False, repr=False, compare=False, default_factory=dict
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
        """The number of modes $\\alpha$ (the columns of ``b``)."""
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
        r"""$\mathcal L_\alpha$ per mode, without the constant.

        Parameters
        ----------
        b
            ``(len(edges), n_modes)``: $b_{e,\alpha}$ of every trained edge and mode.

        Returns
        -------
        numpy.ndarray
            ``(n_modes,)``.

        Raises
        ------
        GdlnError
            ``b`` has the wrong shape, or a survival probability or gate is symbolic.
        """
        val, _ = self._tape.forward(self._values(b))
        return self._probabilities() @ self._context_mode_losses(val)

    def loss(self, b: Any) -> float:
        r"""The expected loss of Eq. (1): $\tfrac12\langle\lVert y\rVert^2\rangle+\sum_\alpha\mathcal L_\alpha$.

        Parameters
        ----------
        b
            ``(len(edges), n_modes)``: $b_{e,\alpha}$ of every trained edge and mode.

        Returns
        -------
        float
            The loss, never below 0.
        """
        return float(floor_at_zero(self.constant + self.mode_losses(b).sum(), self.constant))

    def context_losses(self, b: Any) -> np.ndarray:
        r"""Per context, the expected $\tfrac12\langle\lVert y-h\rVert^2\rangle_c$.

        Parameters
        ----------
        b
            ``(len(edges), n_modes)``: $b_{e,\alpha}$ of every trained edge and mode.

        Returns
        -------
        numpy.ndarray
            ``(contexts,)``, each never below 0.
        """
        val, _ = self._tape.forward(self._values(b))
        constants = np.array(self.context_constants, dtype=float)
        return floor_at_zero(constants + self._context_mode_losses(val).sum(axis=1), constants)

    def gradient(self, b: Any) -> np.ndarray:
        r"""$\partial\mathcal L/\partial b$ by a reverse pass over the tape.

        Parameters
        ----------
        b
            ``(len(edges), n_modes)``: $b_{e,\alpha}$ of every trained edge and mode.

        Returns
        -------
        numpy.ndarray
            ``(len(edges), n_modes)``, zero where ``alive`` is false.
        """
        return self._loss_and_gradient(b)[1]

    def flow(self, b: Any) -> np.ndarray:
        r"""$\tau\,\dot b = -\partial\mathcal L/\partial b$ (Eq. 10 in expectation, $\tau=1$).

        Parameters
        ----------
        b
            ``(len(edges), n_modes)``: $b_{e,\alpha}$ of every trained edge and mode.

        Returns
        -------
        numpy.ndarray
            ``(len(edges), n_modes)``.
        """
        return -self.gradient(b)

    def _loss_and_gradient(self, b: Any) -> tuple[float, np.ndarray]:
        table = self._values(b)
        val, factor = self._tape.forward(table)
        pi = self._probabilities()
        loss = float(self.constant + (pi @ self._context_mode_losses(val)).sum())
        grad_table = self._tape.table_gradient(table, val, factor, pi)
        decay = self.weight_decay * np.where(self.alive, np.asarray(b, float), 0.0)  # gamma b
        return loss, grad_table[self._trained_row] * self.alive + decay

    def numeric_flow(self, *, gd_map: bool = False) -> NumericFlow:
        r"""These dynamics as :func:`gdln.solve` integrates them (the protocol of
        :meth:`gdln.Reduction.numeric_flow`).

        The state is the live entries of ``b`` (:attr:`alive`), edge by edge; the
        right-hand side is :meth:`flow` (Eq. 10 in expectation), exact for the flow and the
        gradient-descent map alike (nothing is eliminated), so ``gd_map`` changes nothing.
        Its Jacobian couples only entries of one mode.

        Parameters
        ----------
        gd_map
            Whether the flow is for the gradient-descent map (the same flow here).

        Returns
        -------
        NumericFlow
            What :func:`gdln.solve` steps: the state, the right-hand side, what to record.
        """
        del gd_map  # nothing eliminated: the same dynamics for the flow and the map
        return moment_flow(self)

    # -- the symbolic evaluation of the same tape ------------------------------------------
    def loss_polynomial(self, mode: int) -> sp.Expr:
        r"""$\mathcal L_\alpha$ of one mode, expanded: the tape evaluated with exact polynomials.

        Its variables are :attr:`variables`; coefficients are exact (and symbolic where the
        survival probabilities are). For small graphs only: the expansion has one term per
        monomial of the loss.

        Parameters
        ----------
        mode
            The mode $\alpha$, ``0 <= mode < n_modes``.

        Returns
        -------
        sympy.Expr
            The expanded loss, without the constant.

        Raises
        ------
        GdlnError
            ``mode`` does not exist.
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
        """Mode vectors at the two ends of ``edge`` (as :meth:`gdln.Reduction.edge_bases`).

        Parameters
        ----------
        edge
            ``(source, target)``.
        seed
            Seed of the random orthogonal bases of hidden nodes.

        Returns
        -------
        tuple
            ``(left, right, modes)``: ``left[:, k]`` and ``right[:, k]`` belong to mode
            ``modes[k]``.
        """
        row = self._table_edges.index(edge)
        slots = [a for a in range(self.n_modes) if self._table_alive[row, a]]
        left, right = self._mode_vectors(edge, slots, seed)
        return left, right, slots

    def decoupled_weights(self, b: Any = None, *, seed: int = 0) -> dict[Edge, np.ndarray]:
        r"""Full weights $W_e=\sum_\alpha b_{e,\alpha}\,r^\alpha_{t(e)}r^{\alpha\top}_{s(e)}$ (Eq. 9).

        Fixed edges hold $c\,I$; hidden-node bases are random orthogonal matrices drawn
        from ``seed`` (shared along fixed edges).

        Parameters
        ----------
        b
            ``(len(edges), n_modes)``; default :attr:`initial`.
        seed
            Seed of the random orthogonal bases of hidden nodes.

        Returns
        -------
        dict
            Edge -> ``(|target|, |source|)`` weights, for :func:`gdln.simulate`.
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
        r"""$b_{e,\alpha} = r^{\alpha\top}_{t(e)}W_e\,r^\alpha_{s(e)}$ for every trained edge and mode.

        Parameters
        ----------
        weights
            Edge -> ``(|target|, |source|)`` weights of the full network.
        seed
            Seed of the random orthogonal bases of hidden nodes (as for
            :meth:`decoupled_weights`).

        Returns
        -------
        numpy.ndarray
            ``(len(edges), n_modes)``; zero where an edge carries no mode.
        """
        out = np.zeros(self.alive.shape)
        for i, e in enumerate(self.edges):
            if e not in self._edge_component:
                continue
            left, right, slots = self.edge_bases(e, seed=seed)
            W = np.asarray(weights[e], dtype=float)
            out[i, slots] = np.einsum("ta,ts,sa->a", left, W, right)
        return out


@door
def expected_dynamics(
    source: Problem | Reduction,
    *,
    b0: Any = None,
    weight_decay: float | str | None = None,
    resolved: Settings = AT_THE_DOOR,
) -> ExpectedDynamics:
    r"""The expected reduced dynamics of a problem, without listing its paths.

    Parameters
    ----------
    source
        A :class:`~gdln.Problem`: its modes are found from the datasets and the fixed-edge
        classes directly, never from paths (needs each input and output node to see one
        dataset field per group of coupled edges). Or a :class:`~gdln.Reduction`: its
        bases (found from path statistics) are reused, for any task it handles.
    b0
        Initial value of every $b_e$ (number or mapping, as for :func:`gdln.reduce`);
        default: the problem's ``b0`` setting. With a Reduction, its own.
    weight_decay
        $\gamma$ (default: the problem's setting; a Reduction's own): the flow gains $-\gamma b$.

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
    own = isinstance(source, Reduction)  # a reduction's own start and decay, unless given
    if own and "weight_decay" not in resolved.called:
        resolved = replace(resolved, weight_decay=source.weight_decay)  # type: ignore[union-attr]
    return expected(source, resolved, own_start=own and "b0" not in resolved.called)


def expected(
    source: Problem | Reduction, settings: Settings, *, own_start: bool = False
) -> ExpectedDynamics:
    """The expected dynamics by resolved settings: the body of :func:`expected_dynamics`
    (a reduction's own initial values where ``own_start``)."""
    if isinstance(source, Reduction):
        problem = source.problem
        init_values = dict(source._init) if own_start else initial_values(problem, settings)
        activity = context_activity(problem.graph, problem.require_task())
        parts: tuple[Any, ...] = (dict(source._edge_component), dict(source._space))
        parts += (list(source.modes),)
        parts += (init_values, dict(source._anchors))
    else:
        problem = source
        require_linear(problem.graph, source=problem.source)
        graph = problem.graph
        activity = context_activity(graph, problem.require_task())
        component = edge_components(graph, problem.require_task(), activity)
        if not component:
            raise GdlnError(
                f"{problem.source}: no context switches on any path with data at its input"
            )
        space, modes = path_free_modes(problem, activity, component)
        check_narrow_nodes(problem, space, modes, component, activity=activity)
        init_values = initial_values(problem, settings)
        parts = (component, space, modes, init_values, anchor_bases(graph, space, modes))
    dynamics = _assemble(problem, activity, *parts)
    gamma = settings.weight_decay
    return replace(dynamics, weight_decay=float(gamma)) if gamma else dynamics


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
    table: EdgeTable,
    values: _ModeValues,
) -> Tape:
    """Record every context's loss terms, component by component."""
    graph = problem.graph
    task = problem.require_task()
    outputs = {v for v in graph.nodes if graph.out_degree(v) == 0}
    order = {v: i for i, v in enumerate(nx.topological_sort(graph))}
    builder = TapeBuilder(graph, task, {e: i for i, e in enumerate(table.edges)}, problem.source)
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
    table = edge_table(problem.graph, component, space, modes, n_modes)
    tape = _record_tape(
        problem, activity, component, table, _ModeValues(problem, space, modes, n_modes)
    )
    constants = context_constants(task)
    total = sum((c.probability * v for c, v in zip(task.contexts, constants, strict=True)), 0)
    trained = table.trained
    alive = table.alive[table.trained_row] if trained else np.zeros((0, n_modes), dtype=bool)
    names = edge_symbols(list(trained))
    initial = np.array([[float(init.get(e, 0))] * n_modes for e in trained]).reshape(alive.shape)
    dynamics = ExpectedDynamics(
        problem=problem,
        edges=trained,
        variables=tuple(names[e] for e in trained),
        alive=alive,
        initial=np.where(alive, initial, 0.0),
        constant=_float_or_nan(total),
        context_constants=tuple(_float_or_nan(v) for v in constants),
        modes=tuple(modes),
    )
    return set_internal(
        dynamics,
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
    if is_symbolic(value):
        return float("nan")
    return float(value)
