r"""The expected reduced dynamics without listing paths: the moment program.

In the decoupled regime every mode $\alpha$ is a network with one scalar $b_e$ per edge,
and its dynamics are gradient flow on one loss (Eq. 10 of Saxe et al. 2022, written as in
:mod:`gdln.reduction`)

$$\mathcal L_\alpha=\sum_c\pi_c\sum_o\Big[-\sum_i s^c_{o,i}\,\mathbb E F^c_{o,i}
+\tfrac12\sum_{i,i'}d^c_{i,i'}\,\mathbb E\big[F^c_{o,i}F^c_{o,i'}\big]\Big],$$

where $F^c_{o,i}$ is the scalar transfer from input $i$ to output $o$ and the expectation
is over independent random gates $\delta\sim\mathrm{Bernoulli}(p)$ (stochastic depth,
Hayou & Ayed 2021; without random gates it is the identity). A residual chain of $L$
blocks has $2^L$ paths, but the transfer obeys $h_v = G_v\sum_{q\to v}G_qb_qh_{s(q)}$,
so its first and second moments follow a recursion over the graph. Expanding always the
*later* node in topological order,

$$m_v = \mathbb E G_v\sum_{q\to v}\mathbb E G_q\,b_q\,m_{s(q)},\qquad
M_{v,w} = \mathbb E G_v\sum_{q\to v}\mathbb E G_q\,b_q\,M_{s(q),w}\quad(v\text{ after }w),$$

$$M_{v,v} = \mathbb E G_v^2\sum_{q,r\to v}\mathbb E[G_qG_r]\,b_qb_r\,M_{s(q),s(r)},$$

with $\mathbb E[G_qG_r]=\mathbb EG_q\,\mathbb EG_r$ for $q\ne r$ and $\mathbb E G_q^2$ for $q=r$:
the gates into $v$ are independent of everything at earlier nodes. (For the chain this
gives $\mathbb E f=\prod_l(1+p_lb_l)$ and $\mathbb E f^2=\prod_l(1+2p_lb_l+p_lb_l^2)$.)

The recursion is recorded once as a *tape* of quantities
$Q=\sum_t c_t\prod_{e\in E_t}b_e\,Q_{\mathrm{child}(t)}$, $|E_t|\le 2$, whose size is
$O(\text{contexts}\times\text{edges})$ for a chain ($O(L)$ for the residual chain), and
evaluated three ways:

* numbers, all modes at once: given $b$, the quantities are linear in their children,
  $(I-A(b))\,Q = c(b)$ with $A$ strictly lower triangular (children come first), so one
  sparse triangular solve evaluates the tape in $O(\text{tape})$;
* the exact gradient by a hand-written reverse pass: the adjoints solve
  $(I-A)^\top\lambda=\partial\mathcal L/\partial Q$, and
  $\partial\mathcal L/\partial b_e=\sum_{t\ni e}\lambda_{q(t)}\,c_t\,
  \partial_{b_e}(\prod_{E_t}b)\,Q_{\mathrm{child}(t)}$, the same cost;
* exact polynomial arithmetic: the expanded loss of small graphs, which equals the
  symbolic route's loss (the two routes are one object).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import numpy as np
import scipy.sparse as sps
import sympy as sp
from scipy.sparse.linalg import spsolve_triangular

from .._edge import Edge
from .._errors import GdlnError
from ..graphfile._reader import Problem
from ..paths._statistics import ContextActivity, context_activity
from ..task._task import Context, Task, _symbolic, as_float
from ._bases import Modes
from ._poly import Polynomial, coefficient
from ._reduce import (
    MAX_EXACT_DIMS,
    Reduction,
    _anchor_bases,
    _block,
    _clean,
    _edge_symbols,
    _hidden_bases,
    _initial_values,
    dataset_level_blocks,
    fixed_pairs,
    fixed_value,
    identity_block,
    joint_modes_fixed,
    mode_vectors_at_ends,
)

__all__ = ["ExpectedDynamics", "expected_dynamics"]

ONE = -1  # the child index of the constant 1


# ---------------------------------------------------------------------------------------
# The tape


class _Triangular:
    """The sparsity pattern of $I-A$ over all modes, built once; values change per call.

    Unknown ``alpha * Q + q`` is quantity ``q`` in mode ``alpha``. The pattern is stored
    column-major (CSC) with the unit diagonal; read row-major, the same arrays are
    $(I-A)^\top$, which the reverse pass solves. Duplicate entries (two terms of one
    quantity with the same child) are summed through ``inverse``.
    """

    def __init__(self, row: np.ndarray, child: np.ndarray, n: int, n_modes: int):
        self.n, self.n_modes = n, n_modes
        self.inner = child >= 0
        size = n * n_modes
        offsets = np.arange(n_modes)[:, None] * n
        rows = (row[self.inner][None, :] + offsets).ravel()
        cols = (child[self.inner][None, :] + offsets).ravel()
        diagonal = np.arange(size)
        keys, inverse = np.unique(
            np.concatenate([cols * size + rows, diagonal * size + diagonal]), return_inverse=True
        )
        self.indices = keys % size
        self.indptr = np.concatenate([[0], np.cumsum(np.bincount(keys // size, minlength=size))])
        self.inverse = inverse
        self.sign = np.concatenate([-np.ones(len(rows)), np.ones(size)])
        self.nnz = len(keys)
        self.outer_row = (row[~self.inner][None, :] + offsets).ravel()

    def solve(self, factor: np.ndarray, rhs: np.ndarray, *, transpose: bool) -> np.ndarray:
        """$(I-A)x=$ ``rhs`` (or $(I-A)^\top x=$ ``rhs``); ``rhs`` and ``x`` are ``(Q, modes)``."""
        if self.n == 0:
            return np.zeros((0, self.n_modes))
        size = self.n * self.n_modes
        values = np.concatenate([factor[self.inner].T.ravel(), np.ones(size)]) * self.sign
        data = np.bincount(self.inverse, weights=values, minlength=self.nnz)
        kind = sps.csr_matrix if transpose else sps.csc_matrix
        matrix = kind((data, self.indices, self.indptr), shape=(size, size))
        x = spsolve_triangular(
            matrix, rhs.T.ravel(), lower=not transpose, unit_diagonal=True, overwrite_A=True
        )
        return np.asarray(x).reshape(self.n_modes, self.n).T

    def constant(self, factor: np.ndarray) -> np.ndarray:
        """$c$: the terms whose child is the constant 1, summed per quantity ``(Q, modes)``."""
        total = np.bincount(
            self.outer_row, weights=factor[~self.inner].T.ravel(), minlength=self.n * self.n_modes
        )
        return total.reshape(self.n_modes, self.n).T


@dataclass(frozen=True, eq=False)
class _Tape:
    r"""Quantities $Q_q=\sum_t c_t\,V_{e_1(t)}V_{e_2(t)}\,Q_{\mathrm{child}(t)}$ and the loss.

    Terms are stored by quantity (``start``); children always precede their parents.
    ``e1``/``e2`` index rows of the edge-value table (-1: no edge, value 1). Roots give
    the loss: context ``root_context`` adds ``root_coef`` (per mode) times its quantity.
    """

    n_quantities: int
    start: np.ndarray  # (Q + 1,)
    child: np.ndarray  # (T,)
    e1: np.ndarray
    e2: np.ndarray
    coef: np.ndarray | None  # (T,) floats, None when some coefficient is symbolic
    coef_exact: tuple[Any, ...]
    row: np.ndarray  # (T,) the quantity each term belongs to
    root_quantity: np.ndarray  # (R,)
    root_context: np.ndarray  # (R,)
    root_coef: np.ndarray  # (R, modes) floats
    root_coef_exact: tuple[tuple[Any, ...], ...]
    solver: _Triangular


class _TapeBuilder:
    """Records the moment recursion of one (component, context) at a time."""

    def __init__(self, graph: nx.DiGraph, task: Task, edge_row: Mapping[Edge, int]):
        self.graph = graph
        self.task = task
        self.edge_row = edge_row
        self.pos = {v: i for i, v in enumerate(nx.topological_sort(graph))}
        self.inputs = {v for v in graph.nodes if graph.in_degree(v) == 0}
        self.start: list[int] = [0]
        self.child: list[int] = []
        self.e1: list[int] = []
        self.e2: list[int] = []
        self.coef: list[Any] = []
        self.roots: list[tuple[int, int, tuple[Any, ...]]] = []

    # -- gates --------------------------------------------------------------------------
    def _gate(self, c: Context, item: Hashable, gated: bool) -> tuple[Any, Any]:
        r"""$(\mathbb E G, \mathbb E G^2)$ of a node or edge in context ``c``."""
        if not gated:
            return 1, 1
        g = c.gates.get(item, 0)
        p = self.task.random_gates.get(item)
        if p is None:
            return g, g * g
        return g * p, g * g * p

    # -- one (component, context) ---------------------------------------------------------
    def record(
        self,
        context: int,
        edges: set[Edge],
        activity: ContextActivity,
        roots: Sequence[tuple[str, tuple[Any, ...], tuple[Hashable, ...]]],
    ) -> None:
        """Add the quantities the roots need; roots are (kind, coefficients, key)."""
        c = self.task.contexts[context]
        graph = self.graph
        into: dict[Hashable, list[Edge]] = defaultdict(list)
        for e in edges:
            into[e[1]].append(e)
        for v in into:
            into[v].sort(key=lambda e: self.pos[e[0]])
        gate_v = {v: self._gate(c, v, bool(graph.nodes[v].get("gated"))) for v in into}
        gate_e = {e: self._gate(c, e, bool(graph.edges[e].get("gated"))) for e in edges}
        reach = activity.reach
        memo: dict[tuple[Any, ...], int | None] = {}

        def canonical(key: tuple[Any, ...]) -> tuple[Any, ...]:
            if key[0] == "M":
                a, b = key[1], key[2]
                if (self.pos[a[0]], self.pos[a[1]]) < (self.pos[b[0]], self.pos[b[1]]):
                    return ("M", b, a)
            return key

        def reaches(node: Hashable, i: Hashable) -> bool:
            return node == i if node in self.inputs else i in reach.get(node, ())

        def terms(key: tuple[Any, ...]) -> list[tuple[Any, tuple[Edge, ...], Any]]:
            """(coefficient, edges, child key or 1) of one quantity; [] means zero."""
            if key[0] == "m":
                _, v, i = key
                if v in self.inputs:
                    return [(1, (), 1)] if v == i else []
                ev = gate_v[v][0]
                return [
                    (ev * gate_e[q][0], (q,), ("m", q[0], i))
                    for q in into.get(v, ())
                    if reaches(q[0], i)
                ]
            _, (v, i), (w, j) = key
            if v in self.inputs:  # v is the later node: h_v^i is the constant [v == i]
                if v != i:
                    return []
                return [(1, (), 1)] if w in self.inputs and w == j else [(1, (), ("m", w, j))]
            if v != w:
                ev = gate_v[v][0]
                return [
                    (ev * gate_e[q][0], (q,), canonical(("M", (q[0], i), (w, j))))
                    for q in into.get(v, ())
                    if reaches(q[0], i)
                ]
            ev2 = gate_v[v][1]
            out: list[tuple[Any, tuple[Edge, ...], Any]] = []
            for q in into.get(v, ()):
                if not reaches(q[0], i):
                    continue
                for r in into.get(v, ()):
                    if not reaches(r[0], j):
                        continue
                    pair = gate_e[q][1] if q == r else gate_e[q][0] * gate_e[r][0]
                    child = canonical(("M", (q[0], i), (r[0], j)))
                    out.append((ev2 * pair, (q, r), child))
            return out

        def build(root: tuple[Any, ...]) -> int | None:
            """Iterative post-order: children get their indices before their parents."""
            stack = [root]
            while stack:
                key = stack[-1]
                if key in memo:
                    stack.pop()
                    continue
                found = terms(key)
                pending = [ch for _, _, ch in found if ch != 1 and ch not in memo]
                if pending:
                    stack.extend(pending)
                    continue
                stack.pop()
                kept = [(cf, es, ch) for cf, es, ch in found if ch == 1 or memo[ch] is not None]
                kept = [(cf, es, ch) for cf, es, ch in kept if cf != 0]
                if not kept:
                    memo[key] = None
                    continue
                for cf, es, ch in kept:
                    self.coef.append(cf)
                    self.child.append(ONE if ch == 1 else memo[ch])  # type: ignore[arg-type]
                    rows = [self.edge_row[e] for e in es] + [-1, -1]
                    self.e1.append(rows[0])
                    self.e2.append(rows[1])
                memo[key] = len(self.start) - 1
                self.start.append(len(self.child))
            return memo[root]

        for _kind, coef, key in roots:
            index = build(canonical(key))
            if index is not None and any(x != 0 for x in coef):
                self.roots.append((index, context, coef))

    def tape(self, n_modes: int) -> _Tape:
        coef_exact = tuple(self.coef)
        try:
            coef = np.array([float(x) for x in coef_exact], dtype=float)
        except TypeError:
            coef = None
        start = np.array(self.start, dtype=np.int64)
        row = np.repeat(np.arange(len(start) - 1), np.diff(start))
        roots_exact = tuple(r[2] for r in self.roots)
        try:
            root_coef = np.array([[float(x) for x in r] for r in roots_exact], dtype=float).reshape(
                len(roots_exact), n_modes
            )
        except TypeError:
            root_coef = np.zeros((len(roots_exact), n_modes))
        return _Tape(
            n_quantities=len(start) - 1,
            start=start,
            child=np.array(self.child, dtype=np.int64),
            e1=np.array(self.e1, dtype=np.int64),
            e2=np.array(self.e2, dtype=np.int64),
            coef=coef,
            coef_exact=coef_exact,
            row=row,
            root_quantity=np.array([r[0] for r in self.roots], dtype=np.int64),
            root_context=np.array([r[1] for r in self.roots], dtype=np.int64),
            root_coef=root_coef,
            root_coef_exact=roots_exact,
            solver=_Triangular(row, np.array(self.child, dtype=np.int64), len(start) - 1, n_modes),
        )


# ---------------------------------------------------------------------------------------
# The public object


@dataclass(frozen=True, eq=False)
class ExpectedDynamics:
    r"""The exact expected reduced dynamics of a problem, evaluated without listing paths.

    ``b`` is an array ``(len(edges), n_modes)``: the scalar $b_{e,\alpha}$ of every trained
    edge in every mode (entries where ``alive`` is false are ignored). The loss is that of
    Eq. (1) of Saxe et al. 2022 averaged over the random gates,
    $\tfrac12\langle\lVert y\rVert^2\rangle+\sum_\alpha\mathcal L_\alpha(b_{\cdot,\alpha})$,
    and its gradient flow $\tau\,\dot b=-\partial\mathcal L/\partial b$ is Eq. (10) in
    expectation: what full-batch gradient descent with gates redrawn every step does on
    average, from decoupled weights (Eq. 9). See the module docstring for the recursion.

    Attributes
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
    """

    problem: Problem
    edges: tuple[Edge, ...]
    variables: tuple[sp.Symbol, ...]
    alive: np.ndarray
    initial: np.ndarray
    constant: float
    context_constants: tuple[float, ...]
    modes: tuple[Modes, ...]
    _tape: _Tape = field(repr=False)
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

    def _forward(self, table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """All quantities ``(Q, modes)``: one triangular solve $(I-A)Q=c$."""
        tape = self._tape
        assert tape.coef is not None
        factor = tape.coef[:, None] * table[tape.e1] * table[tape.e2]
        val = tape.solver.solve(factor, tape.solver.constant(factor), transpose=False)
        return val, factor

    def _context_mode_losses(self, val: np.ndarray) -> np.ndarray:
        """``(contexts, modes)``: per context, $\\sum$ of its loss terms (no constant, no $\\pi_c$)."""
        tape = self._tape
        n_contexts = len(self.context_constants)
        out = np.zeros((n_contexts, self.n_modes))
        if len(tape.root_quantity):
            np.add.at(out, tape.root_context, tape.root_coef * val[tape.root_quantity])
        return out

    def _probabilities(self) -> np.ndarray:
        task = self.problem.require_task()
        return np.array([float(c.probability) for c in task.contexts])

    def mode_losses(self, b: Any) -> np.ndarray:
        r"""$\mathcal L_\alpha$ per mode ``(n_modes,)`` (without the constant)."""
        val, _ = self._forward(self._values(b))
        return self._probabilities() @ self._context_mode_losses(val)

    def loss(self, b: Any) -> float:
        r"""The expected loss of Eq. (1): $\tfrac12\langle\lVert y\rVert^2\rangle+\sum_\alpha\mathcal L_\alpha$."""
        return float(self.constant + self.mode_losses(b).sum())

    def context_losses(self, b: Any) -> np.ndarray:
        r"""Per context, the expected $\tfrac12\langle\lVert y-h\rVert^2\rangle_c$."""
        val, _ = self._forward(self._values(b))
        return np.array(self.context_constants) + self._context_mode_losses(val).sum(axis=1)

    def gradient(self, b: Any) -> np.ndarray:
        r"""$\partial\mathcal L/\partial b$ ``(edges, n_modes)`` by a reverse pass over the tape."""
        return self._loss_and_gradient(b)[1]

    def flow(self, b: Any) -> np.ndarray:
        r"""$\tau\,\dot b = -\partial\mathcal L/\partial b$ (Eq. 10 in expectation, $\tau=1$)."""
        return -self.gradient(b)

    def _loss_and_gradient(self, b: Any) -> tuple[float, np.ndarray]:
        tape = self._tape
        table = self._values(b)
        val, factor = self._forward(table)
        pi = self._probabilities()
        loss = float(self.constant + (pi @ self._context_mode_losses(val)).sum())
        # adjoints: lam[q] = d loss / d Q_q
        lam = np.zeros((tape.n_quantities, self.n_modes))
        if len(tape.root_quantity):
            np.add.at(lam, tape.root_quantity, tape.root_coef * pi[tape.root_context][:, None])
        lam = tape.solver.solve(factor, lam, transpose=True)
        grad_table = np.zeros(table.size)
        if len(tape.child):
            assert tape.coef is not None
            below = np.vstack([val, np.ones((1, self.n_modes))])[tape.child]
            g = tape.coef[:, None] * lam[tape.row] * below
            m = self.n_modes
            for e, other in ((tape.e1, tape.e2), (tape.e2, tape.e1)):
                index = ((e % table.shape[0])[:, None] * m + np.arange(m)).ravel()
                grad_table += np.bincount(
                    index, weights=(g * table[other]).ravel(), minlength=table.size
                )
        grad = grad_table.reshape(table.shape)[self._trained_row] * self.alive
        return loss, grad

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
        values: list[Polynomial] = []
        for q in range(tape.n_quantities):
            acc = Polynomial()
            for t in range(int(tape.start[q]), int(tape.start[q + 1])):
                term = Polynomial.constant(tape.coef_exact[t])
                for e in (tape.e1[t], tape.e2[t]):
                    if e >= 0:
                        term = term * table[e]
                ch = int(tape.child[t])
                acc = acc + (term if ch < 0 else term * values[ch])
            values.append(acc)
        task = self.problem.require_task()
        loss = Polynomial()
        for r, q in enumerate(tape.root_quantity.tolist()):
            c = task.contexts[int(tape.root_context[r])]
            weight = coefficient(tape.root_coef_exact[r][mode]) * coefficient(c.probability)
            loss.add_scaled(values[q], weight)
        return sp.expand(loss.to_sympy(self.variables))

    # -- weights of the full network (Eq. 9) ----------------------------------------------
    def _hidden_bases(self, seed: int) -> dict[Hashable, np.ndarray]:
        """The random hidden-node bases $R_v$ of ``seed``, drawn once per seed."""
        if seed not in self._hidden:
            self._hidden[seed] = _hidden_bases(self.problem.graph, seed, self._anchors)
        return self._hidden[seed]

    def edge_bases(self, edge: Edge, *, seed: int = 0) -> tuple[np.ndarray, np.ndarray, list[int]]:
        """Mode vectors at the two ends of ``edge``: ``(left, right, modes)`` (as for a Reduction)."""
        k = self._edge_component[edge]
        row = self._table_edges.index(edge)
        slots = [a for a in range(self.n_modes) if self._table_alive[row, a]]
        left, right = mode_vectors_at_ends(
            self.problem.graph,
            edge,
            slots,
            self.modes[k],
            {node: label for (j, node), label in self._space.items() if j == k},
            self._hidden_bases(seed),
        )
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


# ---------------------------------------------------------------------------------------
# Building it


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
        init_values = dict(source._init) if init is None else _initial_values(problem, init)
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
    component = _edge_components(graph, task, activity)
    if not component:
        raise GdlnError(f"{problem.source}: no context switches on any path with data at its input")
    space, modes = _path_free_modes(problem, activity, component)
    return _assemble(
        problem,
        activity,
        component,
        space,
        modes,
        _initial_values(problem, init),
        _anchor_bases(graph, space, modes),
    )


def _edge_components(
    graph: nx.DiGraph, task: Task, activity: Sequence[ContextActivity]
) -> dict[Edge, int]:
    """Groups of edges that share a path or feed one output with correlated inputs.

    The same grouping as the path components of :func:`gdln.paths.active_paths`,
    found from edges: two active edges meeting at a node lie on one active path, and two
    active edges into one output join when inputs reaching them are correlated.
    """
    parent: dict[Edge, Edge] = {}

    def find(e: Edge) -> Edge:
        while parent[e] != e:
            parent[e] = parent[parent[e]]
            e = parent[e]
        return e

    def union(a: Edge, b: Edge) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[rb] = ra

    nonzero: dict[tuple[str, str, str], bool] = {}
    outputs = {v for v in graph.nodes if graph.out_degree(v) == 0}
    for c, act in zip(task.contexts, activity, strict=True):
        into: dict[Hashable, list[Edge]] = defaultdict(list)
        out_of: dict[Hashable, list[Edge]] = defaultdict(list)
        for e in act.edges:
            parent.setdefault(e, e)
            into[e[1]].append(e)
            out_of[e[0]].append(e)
        for v, ins in into.items():
            for e in ins[1:] + out_of.get(v, []):
                if v not in outputs or e in out_of.get(v, []):
                    union(ins[0], e)
        for o in outputs:
            ins = into.get(o, [])
            for a, b in itertools.combinations(ins, 2):
                if find(a) == find(b):
                    continue
                data = task.datasets[c.dataset]
                for i, j in itertools.product(_sources(c, act, a[0]), _sources(c, act, b[0])):
                    key = (c.dataset, c.inputs[i], c.inputs[j])
                    if key not in nonzero:
                        nonzero[key] = bool(np.any(as_float(data.moment(key[1], key[2])) != 0))
                    if nonzero[key]:
                        union(a, b)
                        break
    roots: dict[Edge, int] = {}
    order = {v: i for i, v in enumerate(nx.topological_sort(graph))}
    out = {}
    for e in sorted(parent, key=lambda e: (order[e[1]], order[e[0]])):
        out[e] = roots.setdefault(find(e), len(roots))
    return out


def _sources(c: Context, act: ContextActivity, node: Hashable) -> frozenset[Hashable]:
    return frozenset({node}) if node in c.inputs else act.reach.get(node, frozenset())


def _path_free_modes(
    problem: Problem, activity: Sequence[ContextActivity], component: Mapping[Edge, int]
) -> tuple[dict[tuple[int, Hashable], Hashable], list[Modes]]:
    """Bases per component from dataset-level blocks and fixed-edge identity blocks."""
    task = problem.require_task()
    graph = problem.graph
    outputs = {v for v in graph.nodes if graph.out_degree(v) == 0}
    binding: dict[tuple[int, str, Hashable], set[tuple[str, str]]] = defaultdict(set)
    yx_keys: dict[int, set[tuple[str, str, str]]] = defaultdict(set)
    xx_keys: dict[int, set[tuple[str, str, str]]] = defaultdict(set)
    nodes: dict[int, set[tuple[str, Hashable]]] = defaultdict(set)
    for c, act in zip(task.contexts, activity, strict=True):
        into: dict[tuple[int, Hashable], set[Hashable]] = defaultdict(set)
        for e in act.edges:
            k = component[e]
            if e[0] in c.inputs:
                nodes[k].add(("in", e[0]))
                binding[(k, "in", e[0])].add((c.dataset, c.inputs[e[0]]))
            if e[1] in outputs:
                into[(k, e[1])] |= _sources(c, act, e[0])
        for (k, o), sources in into.items():
            nodes[k].add(("out", o))
            if o in c.targets:
                binding[(k, "out", o)].add((c.dataset, c.targets[o]))
                for i in sources:
                    yx_keys[k].add((c.dataset, c.targets[o], c.inputs[i]))
            for i, j in itertools.product(sources, repeat=2):
                xx_keys[k].add((c.dataset, c.inputs[i], c.inputs[j]))
    space: dict[tuple[int, Hashable], Hashable] = {}
    result: list[Modes] = []
    cache: dict[Any, Modes] = {}
    for k in range(max(component.values()) + 1):
        shared = [v for role, v in nodes[k] if len(binding[(k, role, v)]) > 1]
        if shared:
            raise GdlnError(
                f"{problem.source}: node {shared[0]!r} sees several dataset fields in one group "
                "of coupled edges, so its basis comes from path statistics; the moment route "
                "finds bases without paths only from datasets. Reduce the problem first and "
                "pass the reduction: gdln.expected_dynamics(gdln.reduce(problem))"
            )
        spaces, blocks, out_spaces = dataset_level_blocks(
            graph, task, k, sorted(nodes[k], key=str), binding, yx_keys[k], xx_keys[k], space
        )
        pairs = fixed_pairs(graph, k, space)
        blocks += [identity_block(a, b, spaces[a], tag) for a, b, tag in pairs]
        exact = task.exact and sum(spaces.values()) <= MAX_EXACT_DIMS
        key = (tuple(sorted(spaces.items(), key=str)), tuple((b.row, b.col, b.tag) for b in blocks))
        if key not in cache:
            try:
                cache[key] = joint_modes_fixed(spaces, blocks, frozenset(out_spaces), exact, pairs)
            except GdlnError as err:
                raise type(err)(f"{problem.source}: {err}") from err
        result.append(cache[key])
    return space, result


def _assemble(
    problem: Problem,
    activity: Sequence[ContextActivity],
    component: Mapping[Edge, int],
    space: Mapping[tuple[int, Hashable], Hashable],
    modes: Sequence[Modes],
    init: Mapping[Edge, Any],
    anchors: Mapping[int, np.ndarray],
) -> ExpectedDynamics:
    graph = problem.graph
    task = problem.require_task()
    n_modes = max((len(m) for m in modes), default=0)
    inputs = {v for v in graph.nodes if graph.in_degree(v) == 0}
    outputs = {v for v in graph.nodes if graph.out_degree(v) == 0}

    def node_alive(k: int, v: Hashable) -> np.ndarray:
        if v in inputs or v in outputs:
            if (k, v) not in space:
                return np.zeros(n_modes, dtype=bool)
            label = space[(k, v)]
            return np.array(
                [a < len(modes[k]) and label in modes[k].vectors[a] for a in range(n_modes)]
            )
        return np.arange(n_modes) < graph.nodes[v]["size"]

    order = {v: i for i, v in enumerate(nx.topological_sort(graph))}
    table_edges = tuple(sorted(component, key=lambda e: (order[e[1]], order[e[0]])))
    table_alive = np.array(
        [node_alive(component[e], e[0]) & node_alive(component[e], e[1]) for e in table_edges]
    ).reshape(len(table_edges), n_modes)
    edge_row = {e: i for i, e in enumerate(table_edges)}
    trained = tuple(e for e in table_edges if fixed_value(graph, e) is None)
    fixed = np.zeros((len(table_edges), n_modes))
    for i, e in enumerate(table_edges):
        c = fixed_value(graph, e)
        if c is not None:
            fixed[i] = float(c) * table_alive[i]
    trained_row = np.array([edge_row[e] for e in trained], dtype=np.int64)
    alive = table_alive[trained_row] if len(trained) else np.zeros((0, n_modes), dtype=bool)

    values_cache: dict[tuple[Any, ...], tuple[Any, ...]] = {}

    def mode_values(
        k: int, dataset: str, fa: str, fb: str, a: Hashable, b: Hashable
    ) -> tuple[Any, ...]:
        key = (k, dataset, fa, fb, a, b)
        if key not in values_cache:
            block = _block(space[(k, a)], space[(k, b)], task.datasets[dataset].moment(fa, fb), "")
            m = modes[k]
            exact = m.exact_vectors is not None and block.exact is not None
            values_cache[key] = tuple(
                _clean(m.value(block, alpha, exact=exact)) if alpha < len(m) else 0
                for alpha in range(n_modes)
            )
        return values_cache[key]

    builder = _TapeBuilder(graph, task, edge_row)
    for index, (c, act) in enumerate(zip(task.contexts, activity, strict=True)):
        by_component: dict[int, set[Edge]] = defaultdict(set)
        for e in act.edges:
            by_component[component[e]].add(e)
        for k, edges in sorted(by_component.items()):
            roots: list[tuple[str, tuple[Any, ...], tuple[Any, ...]]] = []
            for o in sorted({e[1] for e in edges if e[1] in outputs}, key=order.__getitem__):
                sources: set[Any] = set()
                for e in edges:
                    if e[1] == o:
                        sources |= _sources(c, act, e[0])
                ordered = sorted(sources, key=order.__getitem__)
                if o in c.targets:
                    for i in ordered:
                        s = mode_values(k, c.dataset, c.targets[o], c.inputs[i], o, i)
                        roots.append(("s", tuple(-x for x in s), ("m", o, i)))
                for i, j in itertools.product(ordered, repeat=2):
                    d = mode_values(k, c.dataset, c.inputs[i], c.inputs[j], i, j)
                    half = tuple(sp.Rational(1, 2) * x for x in d)
                    roots.append(("d", half, ("M", (o, i), (o, j))))
            builder.record(index, edges, act, roots)
    tape = builder.tape(n_modes)
    constants = []
    for c in task.contexts:
        data = task.datasets[c.dataset]
        value: Any = 0
        for f in c.targets.values():
            m = data.moment(f, f)
            value = value + (m.trace() if isinstance(m, sp.MatrixBase) else float(np.trace(m)))
        constants.append(value / 2)
    total = sum((c.probability * v for c, v in zip(task.contexts, constants, strict=True)), 0)
    names = _edge_symbols(list(trained))
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
        _table_edges=table_edges,
        _fixed=fixed,
        _trained_row=trained_row,
        _table_alive=table_alive,
        _space=dict(space),
        _edge_component=dict(component),
        _anchors=dict(anchors),
    )


def _float_or_nan(value: Any) -> float:
    if _symbolic(value):
        return float("nan")
    return float(value)
