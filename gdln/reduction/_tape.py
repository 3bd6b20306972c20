r"""The moment program: the expected reduced loss recorded once as a tape, evaluated three ways.

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

:mod:`gdln.reduction._moments` builds the tape of a problem and wraps it as
:class:`~gdln.ExpectedDynamics`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np
import scipy.sparse as sps
from scipy.sparse.linalg import spsolve_triangular

from .._bounded._limits import check_work, current_limits
from .._edge import Edge
from .._errors import shorten
from ..paths._statistics import ContextActivity
from ..task._task import Context, Task
from ._poly import Polynomial

__all__: list[str] = []  # package-internal: the moment program, for ExpectedDynamics

ONE = -1  # the child index of the constant 1

TAPE_TERM_SECONDS = 5e-5
"""Seconds one term of the tape costs: 30-70 microseconds to record, and about a
microsecond a mode for each of the hundreds of right-hand-side evaluations of a solve
(a fan of 800 pathways: 1.3 million terms, 1.35 s an evaluation, on a 2-core machine)."""

Key = tuple[Any, ...]
"""A quantity: ``("m", v, i)`` is $m_v$ from input $i$; ``("M", (v, i), (w, j))`` is
$M_{v,w}$ from inputs $i$, $j$."""
Term = tuple[Any, tuple[Edge, ...], Any]
"""``(coefficient, edges, child key or 1)``: one term of a quantity."""
Root = tuple[str, tuple[Any, ...], Key]
"""``(kind, coefficient per mode, quantity)``: one term of the loss."""


class TriangularSystem:
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
class Tape:
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
    solver: TriangularSystem

    def forward(self, table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """All quantities ``(Q, modes)`` by one triangular solve $(I-A)Q=c$, and the factors.

        ``table`` holds the edge values ``(edges + 1, modes)``, its last row ones.
        """
        assert self.coef is not None
        factor = self.coef[:, None] * table[self.e1] * table[self.e2]
        val = self.solver.solve(factor, self.solver.constant(factor), transpose=False)
        return val, factor

    def root_sums(self, val: np.ndarray, n_contexts: int) -> np.ndarray:
        """``(contexts, modes)``: per context, the sum of its roots' terms."""
        out = np.zeros((n_contexts, val.shape[1]))
        if len(self.root_quantity):
            np.add.at(out, self.root_context, self.root_coef * val[self.root_quantity])
        return out

    def table_gradient(
        self, table: np.ndarray, val: np.ndarray, factor: np.ndarray, weights: np.ndarray
    ) -> np.ndarray:
        r"""$\partial/\partial$``table`` of $\sum_r w_{c(r)}\,{\rm coef}_r\,Q_{q(r)}$: the reverse pass.

        The adjoints solve $(I-A)^\top\lambda=\partial\mathcal L/\partial Q$; each term
        then adds $\lambda_{q(t)}c_t\,\partial_{V_e}(V_{e_1}V_{e_2})\,Q_{\mathrm{child}(t)}$.
        ``weights`` is one weight per context (the probabilities $\pi_c$).
        """
        m = table.shape[1]
        lam = np.zeros((self.n_quantities, m))
        if len(self.root_quantity):
            np.add.at(lam, self.root_quantity, self.root_coef * weights[self.root_context][:, None])
        lam = self.solver.solve(factor, lam, transpose=True)
        grad_table = np.zeros(table.size)
        if len(self.child):
            assert self.coef is not None
            below = np.vstack([val, np.ones((1, m))])[self.child]
            g = self.coef[:, None] * lam[self.row] * below
            for e, other in ((self.e1, self.e2), (self.e2, self.e1)):
                index = ((e % table.shape[0])[:, None] * m + np.arange(m)).ravel()
                grad_table += np.bincount(
                    index, weights=(g * table[other]).ravel(), minlength=table.size
                )
        return grad_table.reshape(table.shape)

    def polynomial_values(self, table: Sequence[Polynomial]) -> list[Polynomial]:
        """Every quantity as an exact polynomial, given each table row as one."""
        values: list[Polynomial] = []
        for q in range(self.n_quantities):
            acc = Polynomial()
            for t in range(int(self.start[q]), int(self.start[q + 1])):
                term = Polynomial.constant(self.coef_exact[t])
                for e in (self.e1[t], self.e2[t]):
                    if e >= 0:
                        term = term * table[e]
                ch = int(self.child[t])
                acc = acc + (term if ch < 0 else term * values[ch])
            values.append(acc)
        return values


class _Recursion:
    r"""The terms of each quantity of one (component, context): the moment recursion.

    Always the *later* node in topological order is expanded (see the module docstring);
    ``("M", a, b)`` keys are kept with ``a`` the later pair, so each quantity has one key.
    """

    def __init__(
        self,
        graph: nx.DiGraph,
        task: Task,
        c: Context,
        edges: set[Edge],
        activity: ContextActivity,
        pos: Mapping[Hashable, int],
        inputs: set[Hashable],
    ):
        self.pos, self.inputs, self.task, self.context = pos, inputs, task, c
        self.into: dict[Hashable, list[Edge]] = defaultdict(list)
        for e in edges:
            self.into[e[1]].append(e)
        for v in self.into:
            self.into[v].sort(key=lambda e: pos[e[0]])
        self.gate_v = {v: self._gate(c, v, bool(graph.nodes[v].get("gated"))) for v in self.into}
        self.gate_e = {e: self._gate(c, e, bool(graph.edges[e].get("gated"))) for e in edges}
        self.reach = activity.reach

    def _gate(self, c: Context, item: Hashable, gated: bool) -> tuple[Any, Any]:
        r"""$(\mathbb E G, \mathbb E G^2)$ of a node or edge in context ``c``."""
        if not gated:
            return 1, 1
        g = c.gates.get(item, 0)
        p = self.task.random_gates.get(item)
        if p is None:
            return g, g * g
        return g * p, g * g * p

    def canonical(self, key: Key) -> Key:
        """``("M", a, b)`` with ``a`` the later pair of (node, input)."""
        if key[0] == "M":
            a, b = key[1], key[2]
            if (self.pos[a[0]], self.pos[a[1]]) < (self.pos[b[0]], self.pos[b[1]]):
                return ("M", b, a)
        return key

    def reaches(self, node: Hashable, i: Hashable) -> bool:
        """Whether input ``i`` reaches ``node`` through open gates."""
        return node == i if node in self.inputs else i in self.reach.get(node, ())

    def terms(self, key: Key) -> list[Term]:
        """``(coefficient, edges, child key or 1)`` of one quantity; ``[]`` means zero."""
        if key[0] == "m":
            return self._mean_terms(key[1], key[2])
        _, (v, i), (w, j) = key
        if v in self.inputs:  # v is the later node: h_v^i is the constant [v == i]
            if v != i:
                return []
            return [(1, (), 1)] if w in self.inputs and w == j else [(1, (), ("m", w, j))]
        if v != w:
            ev = self.gate_v[v][0]
            return [
                (ev * self.gate_e[q][0], (q,), self.canonical(("M", (q[0], i), (w, j))))
                for q in self.into.get(v, ())
                if self.reaches(q[0], i)
            ]
        return self._square_terms(v, i, j)

    def _mean_terms(self, v: Hashable, i: Hashable) -> list[Term]:
        r"""$m_v = \mathbb E G_v\sum_{q\to v}\mathbb E G_q\,b_q\,m_{s(q)}$."""
        if v in self.inputs:
            return [(1, (), 1)] if v == i else []
        ev = self.gate_v[v][0]
        return [
            (ev * self.gate_e[q][0], (q,), ("m", q[0], i))
            for q in self.into.get(v, ())
            if self.reaches(q[0], i)
        ]

    def _square_terms(self, v: Hashable, i: Hashable, j: Hashable) -> list[Term]:
        r"""$M_{v,v} = \mathbb E G_v^2\sum_{q,r\to v}\mathbb E[G_qG_r]\,b_qb_r\,M_{s(q),s(r)}$."""
        ev2 = self.gate_v[v][1]
        out: list[Term] = []
        for q in self.into.get(v, ()):
            if not self.reaches(q[0], i):
                continue
            for r in self.into.get(v, ()):
                if not self.reaches(r[0], j):
                    continue
                pair = self.gate_e[q][1] if q == r else self.gate_e[q][0] * self.gate_e[r][0]
                child = self.canonical(("M", (q[0], i), (r[0], j)))
                out.append((ev2 * pair, (q, r), child))
        return out


class TapeBuilder:
    """Records the moment recursion of one (component, context) at a time."""

    def __init__(
        self, graph: nx.DiGraph, task: Task, edge_row: Mapping[Edge, int], source: str = ""
    ):
        self.graph = graph
        self.task = task
        self.edge_row = edge_row
        self.source = source
        self.budget = int(current_limits().work / TAPE_TERM_SECONDS)
        self.pos = {v: i for i, v in enumerate(nx.topological_sort(graph))}
        self.inputs = {v for v in graph.nodes if graph.in_degree(v) == 0}
        self.start: list[int] = [0]
        self.child: list[int] = []
        self.e1: list[int] = []
        self.e2: list[int] = []
        self.coef: list[Any] = []
        self.roots: list[tuple[int, int, tuple[Any, ...]]] = []

    def record(
        self, context: int, edges: set[Edge], activity: ContextActivity, roots: Sequence[Root]
    ) -> None:
        """Add the quantities the roots need; roots are (kind, coefficients, key)."""
        c = self.task.contexts[context]
        into: dict[Hashable, int] = defaultdict(int)
        for e in edges:
            into[e[1]] += 1
        self._check_size(len(self.child) + sum(n * n for n in into.values()), c)
        recursion = _Recursion(self.graph, self.task, c, edges, activity, self.pos, self.inputs)
        memo: dict[Key, int | None] = {}
        for _kind, coef, key in roots:
            index = self._build(recursion.canonical(key), recursion, memo)
            if index is not None and any(x != 0 for x in coef):
                self.roots.append((index, context, coef))

    def _build(self, root: Key, recursion: _Recursion, memo: dict[Key, int | None]) -> int | None:
        """Iterative post-order: children get their indices before their parents."""
        stack = [root]
        while stack:
            key = stack[-1]
            if key in memo:
                stack.pop()
                continue
            found = recursion.terms(key)
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
            self._check_size(len(self.child) + len(kept), recursion.context)
            for cf, es, ch in kept:
                self.coef.append(cf)
                self.child.append(ONE if ch == 1 else memo[ch])  # type: ignore[arg-type]
                rows = [self.edge_row[e] for e in es] + [-1, -1]
                self.e1.append(rows[0])
                self.e2.append(rows[1])
            memo[key] = len(self.start) - 1
            self.start.append(len(self.child))
        return memo[root]

    def _check_size(self, terms: int, context: Context) -> None:
        """Refuse a tape of more than :data:`TAPE_TERM_SECONDS`-costed terms than the limit
        ``work`` allows: estimated before a context is recorded (the products $b_qb_r$
        into each node, the square of its open in-edges) and counted while it is."""
        if terms > self.budget:
            check_work(
                terms * TAPE_TERM_SECONDS,
                f"{self.source or 'the moment route'}: the moment tape (context "
                f"{shorten(context.label, 40)}) would hold more than {terms} terms",
                advice="fewer co-active pathways into one node",
            )

    def tape(self, n_modes: int) -> Tape:
        """The recorded quantities and roots, for ``n_modes`` modes."""
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
        return Tape(
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
            solver=TriangularSystem(
                row, np.array(self.child, dtype=np.int64), len(start) - 1, n_modes
            ),
        )
