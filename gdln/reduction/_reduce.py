r"""The exact reduction of GDLN learning dynamics (Sec. 3.1 of Saxe et al. 2022).

When the path statistics share bases (Eqs. 7-8), a network started from decoupled
weights $W_e = R_{t(e)} B_e R_{s(e)}^\top$ (Eq. 9) stays decoupled, and each singular
mode $\alpha$ evolves as a network with one scalar $b_e$ per edge. Its dynamics are
gradient flow on one scalar loss,

$$\mathcal{L}_\alpha(b)=\sum_c \pi_c\sum_{o}\Big[-\sum_i s^c_{o,i}F^c_{o,i}
+\tfrac12\sum_{i,i'}F^c_{o,i}\,d^c_{i,i'}\,F^c_{o,i'}\Big],\qquad
F^c_{o,i}=\sum_{p:i\to o} g^c_p\, b_p,$$

with $s^c$, $d^c$ the context's data statistics in mode $\alpha$. Then
$\tau\,\dot b_e=-\partial\mathcal{L}_\alpha/\partial b_e$ is Eq. (10), and the total loss
of Eq. (1) is $\tfrac12\langle\lVert y\rVert^2\rangle+\sum_\alpha\mathcal{L}_\alpha$.
Derivation is differentiation of this one loss; so are lumping and the printout.

Data symbols. Each distinct vector (over modes) of values $s^c_{o,i}$ gets one symbol
($s$, $s_2$, ...), and likewise $d$; their values per mode are listed with the system.

Lumping, each verified exactly, never assumed:

* **symmetry**: start from edges grouped by a directed colour refinement of the graph,
  then split every group whose members' right-hand sides differ on the tied subspace
  (random points first, then exact polynomial identity). Tying a group $O$ to one
  variable $B$ gives $\tau\dot B=-\frac1{|O|}\partial\mathcal{L}_{\rm tied}/\partial B$
  (the $1/M$ of Eqs. 44-46).
* **balanced**: start from edges grouped by initial value instead (Eqs. 47-48).
* **full**: balanced, then conserved quadratic quantities
  $Q=\sum c_{ij}B_iB_j$ with $\nabla Q\cdot f\equiv 0$ are found by linear algebra and
  used to eliminate variables (Eq. 15).

Fixed edges ($W_e = c\,I$, untrained) enter every mode's loss as the constant $b_e = c$;
the nodes they join share one basis. Independent random gates $\delta_i$ (stochastic
depth) enter the transfers $F$ as extra polynomial variables; the expected loss replaces
$F$ and $FF'$ by their means, which is reducing every power $\delta_i^k$ to $p_i$
($\delta^2=\delta$, independent items). For problems with too many paths to list, see
:func:`gdln.expected_dynamics` (the same loss, evaluated without listing paths).
"""

from __future__ import annotations

import heapq
import itertools
import math
import re
from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import networkx as nx
import numpy as np
import sympy as sp

from .._edge import Edge, edge_name
from .._errors import GdlnError, NotDiagonalizableError, TaskSpecError, TooManyPathsError
from ..graphfile._expressions import ExpressionError, evaluate, exact
from ..graphfile._reader import Problem
from ..paths._paths import input_nodes, output_nodes
from ..paths._statistics import (
    ActivePaths,
    active_paths,
    path_statistics,
    require_numbers_for_float_data,
)
from ..task._task import Task, as_float
from ._bases import Block, Modes, generic_values, joint_modes
from ._lumpings import LUMPINGS
from ._poly import Polynomial

__all__ = ["LUMPINGS", "ReducedSystem", "Reduction", "reduce"]

Lumping = Literal["none", "symmetry", "balanced", "full"]
MAX_EXACT_DIMS = 200
MAX_FULL_QUADRATIC = 12
MAX_SYMBOLIC_PAIRS = 100_000
"""Most co-active path pairs (summed over contexts and outputs) the symbolic route lists."""
DELTA = 1 << 40  # polynomial variable index of the first random gate delta_i


# ---------------------------------------------------------------------------------------
# Reduced systems


@dataclass(frozen=True, eq=False)
class ReducedSystem:
    r"""The reduced ODE for one class of modes: $\tau\,\dot B = f(B)$ with $\tau = 1$.

    Modes whose 1-D networks have the same edges share one system; their data symbols
    take different values (``symbols``).

    Attributes
    ----------
    variables
        The dynamical variables ($b_e$ per edge, or lumped $B_k$).
    edges
        Variable -> the edges it stands for (its orbit; ``len`` is the orbit size).
    rhs
        Variable -> right-hand side, in units where $\tau = 1$ (Eq. 10, lumped).
    loss
        The per-mode loss $\mathcal{L}_\alpha$ in these variables (no constant term).
    symbols
        Data symbol -> its value in each mode of ``modes``.
    modes
        The mode indices this system describes.
    initial
        Variable -> initial value (also for eliminated variables).
    conserved
        Conserved quadratic quantities $Q$ with $\nabla Q\cdot f \equiv 0$.
    eliminated
        Eliminated variable -> its expression in the others and the constants (Eq. 15).
    closed_form
        What sympy could solve: ``"t"`` (formal separable solution $t(B)$) and, where
        found, the explicit solution keyed by the variable's name.
    """

    variables: tuple[sp.Symbol, ...]
    edges: Mapping[sp.Symbol, tuple[Edge, ...]]
    rhs: Mapping[sp.Symbol, sp.Expr]
    loss: sp.Expr
    symbols: Mapping[sp.Symbol, tuple[Any, ...]]
    modes: tuple[int, ...]
    initial: Mapping[sp.Symbol, Any]
    conserved: tuple[sp.Expr, ...] = ()
    eliminated: Mapping[sp.Symbol, sp.Expr] = field(default_factory=dict)
    constants: Mapping[sp.Symbol, Any] = field(default_factory=dict)
    closed_form: Mapping[str, sp.Expr] = field(default_factory=dict)
    # internal: the lumped (pre-elimination) polynomial form used for numbers
    _lumped: tuple[sp.Symbol, ...] = field(default=(), repr=False)
    _generators: tuple[sp.Symbol, ...] = field(default=(), repr=False)
    _context_losses: tuple[Polynomial, ...] = field(default=(), repr=False)
    _loss_poly: Polynomial = field(default_factory=Polynomial, repr=False)

    def __repr__(self) -> str:
        names = ", ".join(str(v) for v in self.variables)
        return f"ReducedSystem(variables=[{names}], modes={list(self.modes)})"

    def orbit(self, variable: sp.Symbol) -> int:
        return len(self.edges[variable])

    def equations(self) -> list[sp.Eq]:
        r"""$\tau\,\dot B = f(B)$ as sympy equations (with $\tau$ a symbol)."""
        t, tau = sp.symbols("t tau", positive=True)
        return [
            sp.Eq(tau * sp.Derivative(sp.Function(str(v))(t), t), self.rhs[v])
            for v in self.variables
        ]


@dataclass(frozen=True, eq=False)
class Reduction:
    """The reduction of a problem: bases, per-mode systems, and how to use them.

    Attributes
    ----------
    problem
        What was reduced.
    systems
        One :class:`ReducedSystem` per class of modes.
    constant
        $\\tfrac12\\langle\\lVert y\\rVert^2\\rangle$, the loss at zero weights.
    context_constants
        Per context, $\\tfrac12\\langle\\lVert y\\rVert^2\\rangle_c$.
    modes
        Per component of coupled paths, its :class:`~gdln.reduction.Modes`.
    lump
        The lumping used.
    """

    problem: Problem
    systems: tuple[ReducedSystem, ...]
    constant: Any
    context_constants: tuple[Any, ...]
    modes: tuple[Modes, ...]
    lump: str
    active: ActivePaths = field(repr=False)
    _space: Mapping[tuple[int, Hashable], Hashable] = field(repr=False, default_factory=dict)
    _edge_component: Mapping[Edge, int] = field(repr=False, default_factory=dict)
    _slot_edges: Mapping[int, frozenset[Edge]] = field(repr=False, default_factory=dict)
    _init: Mapping[Edge, Any] = field(repr=False, default_factory=dict)
    _anchors: Mapping[int, np.ndarray] = field(repr=False, default_factory=dict)
    _hidden: dict[int, dict[Hashable, np.ndarray]] = field(
        repr=False, default_factory=dict, compare=False
    )  # seed -> hidden-node bases, drawn once

    def __repr__(self) -> str:
        return f"Reduction({self.problem.name!r}, lump={self.lump!r}, systems={list(self.systems)})"

    @property
    def n_modes(self) -> int:
        return sum(len(s.modes) for s in self.systems)

    def context_labels(self) -> tuple[str, ...]:
        task = self.problem.require_task()
        return tuple(c.label for c in task.contexts)

    # -- bases and decoupled weights (Eq. 9) -----------------------------------------
    def _hidden_bases(self, seed: int) -> dict[Hashable, np.ndarray]:
        """The random hidden-node bases $R_v$ of ``seed``, drawn once per seed."""
        if seed not in self._hidden:
            self._hidden[seed] = _hidden_bases(self.problem.graph, seed, self._anchors)
        return self._hidden[seed]

    def edge_bases(self, edge: Edge, *, seed: int = 0) -> tuple[np.ndarray, np.ndarray, list[int]]:
        """Mode vectors at the two ends of ``edge``: ``(left, right, modes)``.

        ``left[:, k]`` (at the target) and ``right[:, k]`` (at the source) belong to mode
        ``modes[k]``; the reduced variable is ``left[:, k] @ W @ right[:, k]``.
        """
        slots = sorted(a for a, edges in self._slot_edges.items() if edge in edges)
        left, right = mode_vectors_at_ends(
            self.problem.graph,
            edge,
            slots,
            self.modes[self._edge_component[edge]],
            {
                node: label
                for (k, node), label in self._space.items()
                if k == self._edge_component[edge]
            },
            self._hidden_bases(seed),
        )
        return left, right, slots

    def decoupled_bases(self, *, seed: int = 0) -> dict[Edge, tuple[np.ndarray, np.ndarray]]:
        """Edge -> ``(left, right)`` mode vectors for every edge that carries a mode.

        The reduced variable of the ``k``-th mode of an edge is
        ``left[:, k] @ W @ right[:, k]`` (Eq. 9), as :func:`gdln.simulate` records it when
        given these as ``bases``; the modes are those of :meth:`edge_bases`.
        """
        out = {}
        for edge in self.problem.graph.edges:
            left, right, slots = self.edge_bases(edge, seed=seed)
            if slots:
                out[edge] = (left, right)
        return out

    def decoupled_weights(self, init: Any = None, *, seed: int = 0) -> dict[Edge, np.ndarray]:
        """Weights $W_e = R_{t(e)}B_eR_{s(e)}^\\top$ (Eq. 9) with $B_e$ at its initial value.

        ``init`` overrides the reduction's initial value (one number for every edge and
        mode). Hidden-node bases $R_v$ are random orthogonal matrices drawn from ``seed``,
        shared by nodes joined by fixed edges; a fixed edge holds $W_e = c\\,I$.
        """
        graph = self.problem.graph
        weights = {}
        for edge in graph.edges:
            shape = (graph.nodes[edge[1]]["size"], graph.nodes[edge[0]]["size"])
            W = np.zeros(shape)
            if "fixed" in graph.edges[edge]:
                W = float(graph.edges[edge]["fixed"]) * np.eye(shape[0])
            elif edge in self._edge_component:
                left, right, slots = self.edge_bases(edge, seed=seed)
                value = float(init if init is not None else self._init.get(edge, 0))
                W = value * left @ right.T if slots else W
            weights[edge] = W
        return weights


def mode_vectors_at_ends(
    graph: nx.DiGraph,
    edge: Edge,
    slots: Sequence[int],
    modes: Modes,
    space: Mapping[Hashable, Hashable],
    hidden: Mapping[Hashable, np.ndarray],
) -> tuple[np.ndarray, np.ndarray]:
    r"""Columns $r^\alpha_{t(e)}$ and $r^\alpha_{s(e)}$, $\alpha$ in ``slots`` (Eq. 9).

    A hidden node takes its basis from ``hidden``; a data node the mode vectors of its
    space (``space``: node -> space label in this component).
    """
    cols = []
    for node in (edge[1], edge[0]):
        if node in hidden:
            cols.append(hidden[node][:, list(slots)])
        elif slots:
            cols.append(np.column_stack([modes.vectors[a][space[node]] for a in slots]))
        else:
            cols.append(np.zeros((graph.nodes[node]["size"], 0)))
    return cols[0], cols[1]


def _hidden_bases(
    graph: nx.DiGraph, seed: int, anchors: Mapping[int, np.ndarray] | None = None
) -> dict[Hashable, np.ndarray]:
    """Random orthogonal $R_v$ per hidden node; nodes joined by fixed edges share one.

    ``anchors``: fixed class index -> the basis its data nodes impose (column = slot).
    """
    rng = np.random.default_rng(seed)
    out = {}
    for v in nx.topological_sort(graph):
        if graph.in_degree(v) and graph.out_degree(v):
            n = graph.nodes[v]["size"]
            q, r = np.linalg.qr(rng.standard_normal((n, n)))
            out[v] = q * np.sign(np.diag(r))
    for index, members in enumerate(fixed_classes(graph)):
        hidden = [v for v in members if v in out]
        if hidden:
            shared = anchors[index] if anchors and index in anchors else out[hidden[0]]
            for v in hidden:
                out[v] = shared
    return out


def fixed_classes(graph: nx.DiGraph) -> list[tuple[Hashable, ...]]:
    r"""Nodes joined by fixed edges ($W_e = c\,I$): they must share one basis.

    Classes of two or more nodes, each in topological order, in order of first node.
    """
    fixed = [(u, v) for u, v, c in graph.edges(data="fixed") if c is not None]
    if not fixed:
        return []
    joined = nx.Graph(fixed)
    order = {v: i for i, v in enumerate(nx.topological_sort(graph))}
    classes = [sorted(c, key=order.__getitem__) for c in nx.connected_components(joined)]
    return [tuple(c) for c in sorted(classes, key=lambda c: order[c[0]])]


def _count_active(graph: nx.DiGraph, task: Any) -> tuple[int, int]:
    r"""Active paths and co-active pairs $\sum_c\sum_o n_{c,o}^2$, counted, not listed.

    Per context, a dynamic programme over the part of the graph its bound inputs reach
    through open gates (the paths :func:`active_paths` would list); it stops once the
    pairs pass the limit.
    """
    order = {v: i for i, v in enumerate(nx.topological_sort(graph))}
    succ = {v: [(w, bool(g)) for _, w, g in graph.out_edges(v, data="gated")] for v in graph}
    node_gated = {v: bool(g) for v, g in graph.nodes(data="gated")}
    paths = pairs = 0
    for c in task.contexts:
        gates = c.gates
        count = dict.fromkeys(c.inputs, 1)
        heap = [(order[v], v) for v in c.inputs]
        heapq.heapify(heap)
        while heap:
            _, v = heapq.heappop(heap)
            n = count[v]
            if not succ[v]:
                paths, pairs = paths + n, pairs + n * n
                continue
            for w, gated in succ[v]:
                if gated and gates.get((v, w), 0) == 0:
                    continue
                if node_gated[w] and gates.get(w, 0) == 0:
                    continue
                if w not in count:
                    count[w] = 0
                    heapq.heappush(heap, (order[w], w))
                count[w] += n
        if pairs > MAX_SYMBOLIC_PAIRS:
            break
    return paths, pairs


def _count(n: int) -> str:
    return str(n) if n < 10**7 else f"about 10^{len(str(n)) - 1}"


def fixed_value(graph: nx.DiGraph, edge: Edge) -> Any:
    r"""$c$ of a fixed edge $W_e = c\,I$, or ``None`` for a trained edge."""
    return graph.edges[edge].get("fixed")


def check_symbolic_size(problem: Problem) -> None:
    """Refuse problems whose co-active path pairs are too many to list symbolically."""
    paths, pairs = _count_active(problem.graph, problem.require_task())
    if pairs > MAX_SYMBOLIC_PAIRS:
        raise TooManyPathsError(
            f"{problem.source}: {_count(paths)} active input-output paths ({_count(pairs)} "
            f"co-active pairs, "
            f"more than the {MAX_SYMBOLIC_PAIRS} the symbolic route lists); the moment route "
            f"gives the same expected loss and dynamics without listing paths: "
            f"gdln.expected_dynamics(problem), or `gdln solve` (which uses it)",
            paths=paths,
        )


# ---------------------------------------------------------------------------------------
# Building the reduction


def reduce(problem: Problem, *, lump: str = "none", init: Any = None) -> Reduction:
    r"""Reduce a problem's learning dynamics to one small ODE per class of modes.

    Parameters
    ----------
    problem
        A loaded graph file with a task.
    lump
        ``"none"`` (one variable per edge, Eq. 10), ``"symmetry"`` (Eqs. 44-46),
        ``"balanced"`` (Eqs. 47-48) or ``"full"`` (Eq. 15). See the module docstring.
    init
        Initial value of every $b_e$ (a number), or a mapping from edge (``(u, v)``
        or ``"u->v"``) to value; default: the file's ``solve.init``, else 0.001.

    Raises
    ------
    NotDiagonalizableError
        If the path statistics have no common bases.
    """
    if lump not in LUMPINGS:
        raise GdlnError(f"lump={lump!r}: expected one of {', '.join(LUMPINGS)}")
    task = problem.require_task()
    graph = problem.graph
    try:
        require_numbers_for_float_data(task)
    except TaskSpecError as err:
        raise TaskSpecError(str(err), source=problem.source) from err
    check_symbolic_size(problem)
    active = active_paths(graph, task)
    if not active.paths:
        raise GdlnError(f"{problem.source}: no context switches on any path with data at its input")
    init_values = _initial_values(problem, init)
    comp_of_path = active.component_of()
    edge_component: dict[Edge, int] = {}
    for i, p in enumerate(active.paths):
        for e in p.edges:
            edge_component[e] = comp_of_path[i]
    try:
        space, modes = _component_modes(problem, active)
    except NotDiagonalizableError as err:
        raise NotDiagonalizableError(
            f"{problem.source}: {err}", paths=err.paths, residual=err.residual
        ) from err
    slot_edges = _alive_edges(graph, active, space, modes, edge_component)
    builder = _LossBuilder(problem, active, space, modes, slot_edges)
    systems = []
    constant_modes: Any = 0  # modes with only fixed edges: their loss is a constant
    for slots in builder.classes():
        if builder.variable_edges(slots):
            systems.append(builder.system(slots, lump, init_values))
        else:
            constant_modes = constant_modes + builder.constant_loss(slots)
    constant, per_context = builder.constants()
    constant = _clean(constant + constant_modes)
    return Reduction(
        problem=problem,
        systems=tuple(systems),
        constant=constant,
        context_constants=per_context,
        modes=tuple(modes),
        lump=lump,
        active=active,
        _space=space,
        _edge_component=edge_component,
        _slot_edges=slot_edges,
        _init=init_values,
        _anchors=_anchor_bases(graph, space, modes),
    )


def _initial_values(problem: Problem, init: Any) -> dict[Edge, Any]:
    value = init if init is not None else problem.settings.get("init", sp.Rational(1, 1000))
    edges = list(problem.graph.edges)
    if isinstance(value, Mapping):
        out = {}
        default = value.get("default", sp.Rational(1, 1000))
        for e in edges:
            out[e] = value.get(e, value.get(edge_name(e), default))
        return {e: _initial_number(problem, v, f"init[{edge_name(e)}]") for e, v in out.items()}
    return dict.fromkeys(edges, _initial_number(problem, value, "init"))


def _initial_number(problem: Problem, value: Any, key: str) -> Any:
    """An initial value as an exact number (or a sympy expression in declared symbols)."""
    try:
        number = evaluate(value, {}) if isinstance(value, str) else exact(value)
    except ExpressionError as err:
        raise GdlnError(f"{problem.source}: {key} {value!r}: {err}") from err
    if not isinstance(number, (int, sp.Expr)) or (
        isinstance(number, sp.Expr) and not number.free_symbols and not number.is_extended_real
    ):
        raise GdlnError(f"{problem.source}: {key} {value!r}: expected a real number")
    return sp.sympify(number)


def _component_modes(
    problem: Problem, active: ActivePaths
) -> tuple[dict[tuple[int, Hashable], Hashable], list[Modes]]:
    """Bases per component: from the datasets when each node sees one field, else per node."""
    task = problem.require_task()
    comp_of = active.component_of()
    binding: dict[tuple[int, str, Hashable], set[tuple[str, str]]] = defaultdict(set)
    yx_keys: dict[int, set[tuple[str, str, Any]]] = defaultdict(set)
    xx_keys: dict[int, set[tuple[str, str, Any]]] = defaultdict(set)
    for c, found in zip(task.contexts, active.gates, strict=True):
        by_target: dict[tuple[int, Hashable], list[int]] = defaultdict(list)
        for i in found:
            path = active.paths[i]
            k = comp_of[i]
            binding[(k, "in", path.source)].add((c.dataset, c.inputs[path.source]))
            if path.target in c.targets:
                binding[(k, "out", path.target)].add((c.dataset, c.targets[path.target]))
                yx_keys[k].add((c.dataset, c.targets[path.target], c.inputs[path.source]))
            by_target[(k, path.target)].append(i)
        for group in by_target.values():
            for i, j in itertools.product(group, repeat=2):
                a, b = active.paths[i], active.paths[j]
                xx_keys[comp_of[i]].add((c.dataset, c.inputs[a.source], c.inputs[b.source]))
    space: dict[tuple[int, Hashable], Hashable] = {}
    result: list[Modes] = []
    cache: dict[Any, Modes] = {}  # components with the same dataset-level blocks share bases
    stats = None
    for k, members in enumerate(active.components):
        nodes = sorted(  # sorted: a set's order changes with the hash seed
            {("in", active.paths[i].source) for i in members}
            | {("out", active.paths[i].target) for i in members},
            key=str,
        )
        dataset_level = all(len(binding[(k, role, v)]) <= 1 for role, v in nodes)
        spaces: dict[Hashable, int] = {}
        blocks: list[Block] = []
        outputs: set[Hashable] = set()
        if dataset_level:
            spaces, blocks, outputs = dataset_level_blocks(
                problem.graph, task, k, nodes, binding, yx_keys[k], xx_keys[k], space
            )
        else:
            if stats is None:
                stats = path_statistics(problem.graph, task, active)
            for role, v in nodes:
                label = (role, "node", v)
                space[(k, v)] = label
                spaces[label] = problem.graph.nodes[v]["size"]
                if role == "out":
                    outputs.add(label)
            paths = [active.paths[i] for i in members]
            for p in paths:
                blocks.extend(
                    _blocks(
                        ("out", "node", p.target),
                        ("in", "node", p.source),
                        stats.input_output[p],
                        f"Sigma_yx({p})",
                    )
                )
            member_set = set(paths)
            for (pj, pp), m in stats.input.items():
                if pj in member_set and pp in member_set:
                    blocks.extend(
                        _blocks(
                            ("in", "node", pj.source),
                            ("in", "node", pp.source),
                            m,
                            f"Sigma_x({pj}, {pp})",
                        )
                    )
        pairs = fixed_pairs(problem.graph, k, space)
        blocks += [identity_block(a, b, spaces[a], tag) for a, b, tag in pairs]
        exact = task.exact and sum(spaces.values()) <= MAX_EXACT_DIMS
        symbols = set().union(*(b.exact.free_symbols for b in blocks if b.exact is not None))
        key = (tuple(sorted(spaces.items(), key=str)), tuple((b.row, b.col, b.tag) for b in blocks))
        if not dataset_level or key not in cache:
            cache[key] = joint_modes_fixed(
                spaces,
                blocks,
                frozenset(outputs),
                exact,
                pairs,
                symbols=generic_values(symbols),
            )
            if symbols and cache[key].exact_vectors is None:
                raise GdlnError(_symbolic_bases_message(problem, spaces, blocks, symbols))
        result.append(cache[key])
    return space, result


def dataset_level_blocks(
    graph: nx.DiGraph,
    task: Task,
    k: int,
    nodes: Iterable[tuple[str, Hashable]],
    binding: Mapping[tuple[int, str, Hashable], set[tuple[str, str]]],
    yx_keys: Iterable[tuple[str, str, Any]],
    xx_keys: Iterable[tuple[str, str, Any]],
    space: dict[tuple[int, Hashable], Hashable],
) -> tuple[dict[Hashable, int], list[Block], set[Hashable]]:
    r"""The statistics of component ``k`` at the level of dataset fields (Eqs. 5-6).

    When every input and output node of the component sees one dataset field, its bases
    are those of the fields' moments $\langle y x^\top\rangle$ and $\langle x x^\top\rangle$,
    whatever the gates: each node gets the space of its field (recorded in ``space``).
    Returns the spaces with their sizes, the blocks to diagonalise and the output spaces.
    """
    spaces: dict[Hashable, int] = {}
    outputs: set[Hashable] = set()
    for role, v in nodes:
        if binding[(k, role, v)]:
            ((d, f),) = binding[(k, role, v)]
            label: tuple[str, str, Any] = (role, d, f)
        else:
            label = (role, "node", v)
        space[(k, v)] = label
        spaces[label] = graph.nodes[v]["size"]
        if role == "out":
            outputs.add(label)
    blocks = []
    for d, fo, fi in sorted(yx_keys):
        m = task.datasets[d].moment(fo, fi)
        blocks.append(_block(("out", d, fo), ("in", d, fi), m, f"Sigma_yx[{d}: {fo},{fi}]"))
    for d, fa, fb in sorted(xx_keys):
        m = task.datasets[d].moment(fa, fb)
        blocks.append(_block(("in", d, fa), ("in", d, fb), m, f"Sigma_x[{d}: {fa},{fb}]"))
    return spaces, blocks, outputs


def _symbolic_bases_message(
    problem: Problem, spaces: Mapping[Hashable, int], blocks: Sequence[Block], symbols: set[Any]
) -> str:
    """Name the symbols the (float) bases change with, and ask for their values."""
    generic = generic_values(symbols)
    reference = joint_modes(spaces, blocks)
    moving = []
    for x in sorted(symbols, key=str):
        other = {**generic, x: generic[x] * 3 + 1}
        moved = [
            Block(b.row, b.col, as_float(b.exact.xreplace(other)), b.exact, b.tag)
            if b.exact is not None
            else b
            for b in blocks
        ]
        try:
            if not _same_bases(reference, joint_modes(spaces, moved)):
                moving.append(x)
        except NotDiagonalizableError:
            moving.append(x)
    names = moving or sorted(symbols, key=str)
    listed = ", ".join(repr(str(x)) for x in names)
    why = "depend on" if moving else "cannot be written exactly for all values of"
    bind = " ".join(f"--param {x}=VALUE" for x in names)
    return (
        f"{problem.source}: the bases of the path statistics (Eqs. 7-8) {why} symbol {listed}; "
        f"give it a value: {bind}"
    )


def _same_bases(a: Modes, b: Modes) -> bool:
    """Whether two sets of modes span the same lines in every space (up to order, sign)."""
    if len(a) != len(b):
        return False
    for mode in a.vectors:
        if not any(
            mode.keys() == other.keys()
            and all(abs(abs(float(mode[s] @ other[s])) - 1) < 1e-6 for s in mode)
            for other in b.vectors
        ):
            return False
    return True


def fixed_pairs(
    graph: nx.DiGraph, k: int, space: Mapping[tuple[int, Hashable], Hashable]
) -> list[tuple[Hashable, Hashable, str]]:
    r"""Data spaces of component ``k`` that fixed edges tie to one basis: ``(a, b, tag)``.

    A fixed edge $W_e = c\,I$ keeps $b_e = c$ in every mode only if its two ends share a
    basis; when a class of such nodes holds data nodes (inputs, outputs), their data bases
    must coincide. ``a`` is the class's first input-side space.
    """
    out = []
    for members in fixed_classes(graph):
        labels = list(dict.fromkeys(space[(k, v)] for v in members if (k, v) in space))
        if len(labels) < 2:
            continue
        labels.sort(key=lambda label: str(label[0]) != "in")  # type: ignore[index]
        edges = [
            edge_name((u, v))
            for u, v, c in graph.edges(data="fixed")
            if c is not None and u in members
        ]
        shown = ", ".join(edges[:3]) + (f" and {len(edges) - 3} more" if len(edges) > 3 else "")
        tag = f"fixed edges {shown}"
        out += [(labels[0], other, tag) for other in labels[1:]]
    return out


def identity_block(a: Hashable, b: Hashable, size: int, tag: str) -> Block:
    """The block $I$ between two spaces that fixed edges tie to one basis."""
    return Block(row=a, col=b, value=np.eye(size), exact=sp.ImmutableMatrix(sp.eye(size)), tag=tag)


def joint_modes_fixed(
    spaces: Mapping[Hashable, int],
    blocks: Sequence[Block],
    outputs: frozenset[Hashable],
    exact: bool,
    pairs: Sequence[tuple[Hashable, Hashable, str]],
    *,
    symbols: Mapping[Any, Any] | None = None,
) -> Modes:
    """:func:`joint_modes`, then the same vector in every space a fixed class ties together.

    The identity blocks make each mode's vectors in tied spaces parallel; their signs are
    then made equal (flipping a vector flips the sign of that mode's $s$, nothing else).
    """
    try:
        modes = joint_modes(spaces, blocks, outputs=outputs, exact=exact, symbols=symbols)
    except NotDiagonalizableError as err:
        if not pairs:
            raise
        tags = sorted({tag for _, _, tag in pairs})
        raise NotDiagonalizableError(
            f"{'; '.join(tags)} hold W = c I, so the spaces they join must share one basis, "
            f"and no common bases exist: {err}",
            paths=err.paths,
            residual=err.residual,
        ) from err
    if not pairs:
        return modes
    vectors = [dict(m) for m in modes.vectors]
    exact_vectors = [dict(m) for m in modes.exact_vectors] if modes.exact_vectors else None
    for a, b, tag in pairs:
        for alpha, mode in enumerate(vectors):
            if (a in mode) != (b in mode) or (
                a in mode and abs(abs(float(mode[a] @ mode[b])) - 1) > 1e-7
            ):
                raise NotDiagonalizableError(
                    f"{tag} hold W = c I, so the spaces {a} and {b} must share one basis, but "
                    f"mode {alpha} of the statistics differs between them",
                    paths=(tag,),
                    residual=1.0,
                )
            if a in mode and float(mode[a] @ mode[b]) < 0:
                mode[b] = -mode[b]
                if exact_vectors is not None:
                    exact_vectors[alpha][b] = -exact_vectors[alpha][b]
    return Modes(
        spaces=modes.spaces,
        vectors=tuple(vectors),
        exact_vectors=tuple(exact_vectors) if exact_vectors is not None else None,
        complement=modes.complement,
    )


def _anchor_bases(
    graph: nx.DiGraph, space: Mapping[tuple[int, Hashable], Hashable], modes: Sequence[Modes]
) -> dict[int, np.ndarray]:
    """Per fixed class holding a data node: the basis it imposes, column ``a`` = slot ``a``."""
    out = {}
    for index, members in enumerate(fixed_classes(graph)):
        found = [(k, space[(k, v)]) for k in range(len(modes)) for v in members if (k, v) in space]
        if not found:
            continue
        k, label = found[0]
        n = modes[k].spaces[label]
        columns: list[np.ndarray | None] = [None] * n
        spare = []
        for alpha, mode in enumerate(modes[k].vectors):
            if label in mode:
                if alpha < n:
                    columns[alpha] = mode[label]
                else:
                    spare.append(mode[label])
        rest = modes[k].complement.get(label, np.zeros((n, 0)))
        spare += [rest[:, j] for j in range(rest.shape[1])]
        out[index] = np.column_stack([c if c is not None else spare.pop(0) for c in columns])
    return out


def _block(row: Hashable, col: Hashable, matrix: Any, tag: str) -> Block:
    """A statistic as a :class:`Block`; symbols take generic values in ``Block.value``."""
    exact = sp.ImmutableMatrix(matrix) if isinstance(matrix, sp.MatrixBase) else None
    if exact is not None and exact.free_symbols:
        value = as_float(exact.xreplace(generic_values(exact.free_symbols)))
    else:
        value = as_float(matrix)
    return Block(row=row, col=col, value=value, exact=exact, tag=tag)


GENERIC = (sp.Rational(3, 8), sp.Rational(5, 8))
"""Two values for the free symbols of statistics (e.g. a symbolic survival probability)."""


def _blocks(row: Hashable, col: Hashable, matrix: Any, tag: str) -> list[Block]:
    """A statistic as a block; a symbolic one at two generic values of its symbols.

    Bases found from statistics that depend on a symbol must hold for every value of it:
    the joint diagonalisation then asks them to diagonalise the statistic at both values.
    """
    free = sorted(matrix.free_symbols, key=str) if isinstance(matrix, sp.MatrixBase) else []
    if not free:
        return [_block(row, col, matrix, tag)]
    out = []
    for k, x in enumerate(GENERIC):
        point = {s: x + sp.Rational(i, 100) for i, s in enumerate(free)}
        exact = sp.ImmutableMatrix(matrix.subs(point))
        tag_k = f"{tag} at p #{k + 1}"
        out.append(Block(row=row, col=col, value=as_float(exact), exact=exact, tag=tag_k))
    return out


def _alive_edges(
    graph: nx.DiGraph,
    active: ActivePaths,
    space: Mapping[tuple[int, Hashable], Hashable],
    modes: Sequence[Modes],
    edge_component: Mapping[Edge, int],
) -> dict[int, frozenset[Edge]]:
    """Per mode slot, the edges whose scalar $b_e$ exists in that mode's 1-D network."""
    n_slots = max((len(m) for m in modes), default=0)
    inputs, outputs = set(input_nodes(graph)), set(output_nodes(graph))
    alive: dict[int, set[Edge]] = defaultdict(set)
    for edge, k in edge_component.items():
        for alpha in range(len(modes[k])):
            ok = True
            for v in edge:
                if v in inputs or v in outputs:
                    ok = ok and space[(k, v)] in modes[k].vectors[alpha]
                else:
                    ok = ok and alpha < graph.nodes[v]["size"]
            if ok:
                alive[alpha].add(edge)
    # keep only edges on some active path that is alive end to end in that mode
    out = {}
    for alpha in range(n_slots):
        on_paths = {
            e for p in active.paths if all(e2 in alive[alpha] for e2 in p.edges) for e in p.edges
        }
        out[alpha] = frozenset(on_paths)
    return out


class _LossBuilder:
    """Builds the per-mode loss polynomials of one reduction."""

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
        self.edges = [
            e
            for e in nx.topological_sort(nx.line_graph(problem.graph))
            if e in {x for s in slot_edges.values() for x in s}
            and fixed_value(problem.graph, e) is None
        ]
        self._names = _edge_symbols(self.edges)
        self.random = {item: DELTA + i for i, item in enumerate(self.task.random_gates)}
        self.survival = {DELTA + i: p for i, p in enumerate(self.task.random_gates.values())}

    def variable_edges(self, slots: tuple[int, ...]) -> list[Edge]:
        return [e for e in self.edges if e in self.slot_edges[slots[0]]]

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

    def classes(self) -> list[tuple[int, ...]]:
        groups: dict[frozenset[Edge], list[int]] = defaultdict(list)
        for alpha, edges in self.slot_edges.items():
            if edges:
                groups[edges].append(alpha)
        return [tuple(g) for g in groups.values()]

    def _values(
        self, kind: str, k: int, dataset: str, fa: str, fb: str, sa: Hashable, sb: Hashable
    ) -> tuple[Any, ...]:
        key = (kind, k, dataset, fa, fb, sa, sb)
        if key not in self._value_cache:
            data = self.task.datasets[dataset]
            block = _block(sa, sb, data.moment(fa, fb), "")
            modes = self.modes[k]
            exact = modes.exact_vectors is not None and block.exact is not None
            vals = [
                modes.value(block, a, exact=exact) if a < len(modes) else 0
                for a in range(self.n_slots)
            ]
            self._value_cache[key] = tuple(_clean(v) for v in vals)
        return self._value_cache[key]

    def _symbol(self, kind: str, values: tuple[Any, ...]) -> sp.Symbol | None:
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

    def context_losses(
        self, slots: tuple[int, ...], var_index: Mapping[Edge, int], gen: dict[sp.Symbol, int]
    ) -> list[Polynomial]:
        """$\\ell_c$ per context (without $\\pi_c$ and the constant) for these modes."""
        alive = self.slot_edges[slots[0]]
        out = []
        paths = self.active.paths
        for c, found in zip(self.task.contexts, self.active.gates, strict=True):
            loss = Polynomial()
            groups: dict[tuple[int, Hashable], dict[Hashable, Polynomial]] = defaultdict(dict)
            for i, g in found.items():
                p = paths[i]
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
            for (k, o), transfers in groups.items():
                if o in c.targets:
                    for i_node, F in transfers.items():
                        vals = self._values(
                            "s",
                            k,
                            c.dataset,
                            c.targets[o],
                            c.inputs[i_node],
                            self.space[(k, o)],
                            self.space[(k, i_node)],
                        )
                        sym = self._symbol("s", vals) if any(vals[a] != 0 for a in slots) else None
                        if sym is not None:
                            loss.add_scaled(
                                self.expect(F * Polynomial.variable(_gen(gen, sym))), -1
                            )
                for (ia, Fa), (ib, Fb) in itertools.product(transfers.items(), repeat=2):
                    vals = self._values(
                        "d",
                        k,
                        c.dataset,
                        c.inputs[ia],
                        c.inputs[ib],
                        self.space[(k, ia)],
                        self.space[(k, ib)],
                    )
                    sym = self._symbol("d", vals) if any(vals[a] != 0 for a in slots) else None
                    if sym is not None:
                        loss.add_scaled(
                            self.expect(Fa * Fb * Polynomial.variable(_gen(gen, sym))),
                            sp.Rational(1, 2),
                        )
            out.append(loss)
        return out

    def constants(self) -> tuple[Any, tuple[Any, ...]]:
        per_context = []
        for c in self.task.contexts:
            data = self.task.datasets[c.dataset]
            value: Any = 0
            for f in c.targets.values():
                m = data.moment(f, f)
                value = value + (m.trace() if isinstance(m, sp.MatrixBase) else float(np.trace(m)))
            per_context.append(_clean(value / 2))
        total = sum(
            (c.probability * v for c, v in zip(self.task.contexts, per_context, strict=True)),
            sp.Integer(0),
        )
        return _clean(total), tuple(per_context)

    def system(self, slots: tuple[int, ...], lump: str, init: Mapping[Edge, Any]) -> ReducedSystem:
        edges = self.variable_edges(slots)
        var_index = {e: i for i, e in enumerate(edges)}
        gen = {self._names[e]: i for i, e in enumerate(edges)}
        per_context = self.context_losses(slots, var_index, gen)  # adds the data symbols
        generators = sorted(gen, key=gen.__getitem__)
        loss = Polynomial()
        for c, ell in zip(self.task.contexts, per_context, strict=True):
            loss.add_scaled(ell, c.probability)
        n_edges = len(edges)
        data_values = {
            sym: tuple(vals[a] for a in slots) for sym, vals in self.symbol_order if sym in gen
        }
        blocks = _partition(self.problem.graph, edges, loss, n_edges, lump, init, data_values)
        return _lumped_system(
            edges, blocks, loss, per_context, generators, n_edges, lump, init, data_values, slots
        )


def _gen(gen: dict[sp.Symbol, int], symbol: sp.Symbol) -> int:
    if symbol not in gen:
        gen[symbol] = len(gen)
    return gen[symbol]


def _clean(value: Any) -> Any:
    if isinstance(value, sp.Basic):
        value = sp.nsimplify(value) if value.is_Float else sp.radsimp(value)
        return value
    return float(value)


def _edge_symbols(edges: Sequence[Edge]) -> dict[Edge, sp.Symbol]:
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


# ---------------------------------------------------------------------------------------
# Lumping


def _partition(
    graph: nx.DiGraph,
    edges: list[Edge],
    loss: Polynomial,
    n_edges: int,
    lump: str,
    init: Mapping[Edge, Any],
    data_values: Mapping[sp.Symbol, tuple[Any, ...]],
) -> list[list[int]]:
    if lump == "none":
        return [[i] for i in range(n_edges)]
    by_init: dict[Any, list[int]] = defaultdict(list)
    for i, e in enumerate(edges):
        by_init[sp.nsimplify(init[e])].append(i)
    if lump == "symmetry":
        colours = _edge_colours(graph)
        start: dict[tuple[Any, Any], list[int]] = defaultdict(list)
        for i, e in enumerate(edges):
            start[(colours[e], sp.nsimplify(init[e]))].append(i)
        blocks = list(start.values())
    else:
        blocks = list(by_init.values())
    return _refine(blocks, loss, n_edges)


def _edge_colours(graph: nx.DiGraph) -> dict[Edge, int]:
    """Directed colour refinement (1-WL): edges related by a symmetry share a colour."""
    colour = {
        v: hash(
            (
                "in"
                if graph.in_degree(v) == 0
                else "out"
                if graph.out_degree(v) == 0
                else "hidden",
                graph.nodes[v]["size"],
                bool(graph.nodes[v].get("gated")),
            )
        )
        for v in graph.nodes
    }
    for _ in range(graph.number_of_nodes()):
        new = {}
        for v in graph.nodes:
            outs = sorted(
                (bool(graph.edges[v, w].get("gated")), colour[w]) for w in graph.successors(v)
            )
            ins = sorted(
                (bool(graph.edges[u, v].get("gated")), colour[u]) for u in graph.predecessors(v)
            )
            new[v] = hash((colour[v], tuple(outs), tuple(ins)))
        if len(set(new.values())) == len(set(colour.values())):
            colour = new
            break
        colour = new
    return {(u, v): hash((colour[u], colour[v], bool(g))) for u, v, g in graph.edges(data="gated")}


def _refine(blocks: list[list[int]], loss: Polynomial, n_edges: int) -> list[list[int]]:
    """Split blocks until every member has the same right-hand side on the tied subspace."""
    rng = np.random.default_rng(12345)
    n_vars = max(loss.variables(), default=n_edges - 1) + 1
    coeffs = [(m, _generic_float(c)) for m, c in loss.terms.items()]
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
    # exact confirmation: identical polynomials on the tied subspace
    while True:
        mapping = {i: members[0] for members in blocks for i in members}
        grads = loss.gradient(range(n_edges), mapping)
        new_blocks = []
        for members in blocks:
            groups_exact: list[list[int]] = []
            for i in members:
                for group in groups_exact:
                    if grads[group[0]] == grads[i]:
                        group.append(i)
                        break
                else:
                    groups_exact.append([i])
            new_blocks.extend(groups_exact)
        if len(new_blocks) == len(blocks):
            return sorted(new_blocks, key=min)
        blocks = new_blocks


def _generic_float(value: Any) -> float:
    """A number as float; symbols (e.g. a symbolic probability) at generic values."""
    if isinstance(value, sp.Basic) and value.free_symbols:
        value = value.xreplace(generic_values(value.free_symbols))
    return float(value)


def _lumped_system(
    edges: list[Edge],
    blocks: list[list[int]],
    loss: Polynomial,
    per_context: list[Polynomial],
    generators: list[sp.Symbol],
    n_edges: int,
    lump: str,
    init: Mapping[Edge, Any],
    data_values: Mapping[sp.Symbol, tuple[Any, ...]],
    slots: tuple[int, ...],
) -> ReducedSystem:
    if lump == "none":
        variables = [generators[i] for i in range(n_edges)]
    else:
        variables = [sp.Symbol(f"B{k + 1}", real=True) for k in range(len(blocks))]
    # new generator list: lumped variables first, then data symbols
    data_syms = generators[n_edges:]
    new_generators = tuple(variables) + tuple(data_syms)
    mapping: dict[int, int] = {}
    for k, members in enumerate(blocks):
        for i in members:
            mapping[i] = k
    for j in range(len(data_syms)):
        mapping[n_edges + j] = len(variables) + j
    tied_loss = loss.rename(mapping)
    tied_contexts = tuple(p.rename(mapping) for p in per_context)
    rhs_poly = {}
    for k, members in enumerate(blocks):
        rhs_poly[k] = tied_loss.diff(k) * sp.Rational(-1, len(members))
    rhs = {variables[k]: _tidy(p.to_sympy(new_generators)) for k, p in rhs_poly.items()}
    initial = {variables[k]: init[edges[members[0]]] for k, members in enumerate(blocks)}
    system_edges = {
        variables[k]: tuple(edges[i] for i in members) for k, members in enumerate(blocks)
    }
    conserved = _conserved(rhs_poly, len(variables), new_generators, blocks, edges)
    eliminated: dict[sp.Symbol, sp.Expr] = {}
    constants: dict[sp.Symbol, Any] = {}
    if lump == "full":
        rhs, eliminated, constants = _eliminate(rhs, conserved, variables, system_edges, initial)
    closed = _closed_form(rhs, initial, eliminated, constants)
    return ReducedSystem(
        variables=tuple(v for v in variables if v not in eliminated),
        edges=system_edges,
        rhs={v: e for v, e in rhs.items() if v not in eliminated},
        loss=sp.factor_terms(tied_loss.to_sympy(new_generators)),
        symbols=dict(data_values),
        modes=slots,
        initial=initial,
        conserved=tuple(conserved),
        eliminated=eliminated,
        constants=constants,
        closed_form=closed,
        _lumped=tuple(variables),
        _generators=new_generators,
        _context_losses=tied_contexts,
        _loss_poly=tied_loss,
    )


def _conserved(
    rhs_poly: Mapping[int, Polynomial],
    n: int,
    generators: Sequence[sp.Symbol],
    blocks: list[list[int]],
    edges: list[Edge],
) -> list[sp.Expr]:
    r"""Quadratic $Q=\sum c_{ij}B_iB_j$ with $\nabla Q\cdot f\equiv0$ (Eq. 15's $C$)."""
    if n <= MAX_FULL_QUADRATIC:
        pairs = [(i, j) for i in range(n) for j in range(i, n)]
    else:
        pairs = [(i, i) for i in range(n)]
    if not pairs or n > 400:
        return []
    columns = []
    for i, j in pairs:
        q = Polynomial.variable(i) * Polynomial.variable(j)
        columns.append(
            sum((q.diff(k) * rhs_poly[k] for k in range(n) if k in (i, j)), Polynomial())
        )
    monomials = sorted({m for col in columns for m in col.terms})
    if not monomials:
        return []
    index = {m: r for r, m in enumerate(monomials)}
    matrix = sp.zeros(len(monomials), len(pairs))
    for c, col in enumerate(columns):
        for m, value in col.terms.items():
            matrix[index[m], c] = value
    out = []
    for vector in _nullspace(matrix):
        if not all(sp.nsimplify(x).is_Rational for x in vector):  # symbolic coefficients
            first = next(x for x in vector if x != 0)
            vector = vector.applyfunc(lambda x, first=first: sp.cancel(x / first))
            scale = sp.lcm([sp.fraction(sp.together(x))[1] for x in vector])
            vector = vector.applyfunc(lambda x, scale=scale: sp.factor(sp.cancel(x * scale)))
            expr = sp.expand(
                sum(vector[c] * generators[i] * generators[j] for c, (i, j) in enumerate(pairs))
            )
            out.append(-expr if expr.could_extract_minus_sign() else expr)
            continue
        denominators = [sp.fraction(sp.nsimplify(x))[1] for x in vector]
        scale = math.lcm(*[int(x) for x in denominators]) if denominators else 1
        vector = vector * scale
        gcd = math.gcd(*[int(x) for x in vector if x != 0]) or 1
        expr = sum(
            (vector[c] / gcd) * generators[i] * generators[j] for c, (i, j) in enumerate(pairs)
        )
        expr = sp.expand(expr)
        if expr.could_extract_minus_sign():
            expr = -expr
        out.append(expr)
    return out


def _nullspace(matrix: sp.Matrix) -> list[sp.Matrix]:
    r"""Exact nullspace; over the entries' own domain (e.g. $\mathbb Q(\sqrt 3)$ when fixed
    edges hold $1/\sqrt L$, or rational functions of a symbolic $p$), much faster there
    than sympy's generic elimination."""
    if all(x.is_Rational for x in matrix):
        return matrix.nullspace()
    from sympy.polys.matrices import DomainMatrix

    dm = DomainMatrix.from_Matrix(matrix, extension=True).to_field()
    basis = dm.nullspace().to_Matrix()
    return [basis.row(r).T.applyfunc(sp.simplify) for r in range(basis.rows)]


def _eliminate(
    rhs: dict[sp.Symbol, sp.Expr],
    conserved: list[sp.Expr],
    variables: list[sp.Symbol],
    edges: Mapping[sp.Symbol, tuple[Edge, ...]],
    initial: Mapping[sp.Symbol, Any],
) -> tuple[dict[sp.Symbol, sp.Expr], dict[sp.Symbol, sp.Expr], dict[sp.Symbol, Any]]:
    """Use conserved quantities to remove variables (Eq. 15), keeping shared ones."""
    rhs = dict(rhs)
    eliminated: dict[sp.Symbol, sp.Expr] = {}
    constants: dict[sp.Symbol, Any] = {}
    remaining = list(variables)
    for q in conserved:
        q_now = sp.expand(q)
        candidates = []
        for v in remaining:
            poly = sp.Poly(q_now, *remaining)
            if poly.degree(v) != 2 or any(m[remaining.index(v)] == 1 for m in poly.monoms()):
                continue
            others = [w for w in remaining if w != v]
            if all(_even_in(rhs[w], v) for w in others):
                candidates.append(v)
        if not candidates or len(remaining) == 1:
            continue
        v = max(candidates, key=lambda w: (len(edges[w]), variables.index(w)))
        name = "C" if not constants else f"C_{len(constants) + 1}"
        C = sp.Symbol(name, real=True)
        constants[C] = sp.nsimplify(q_now.subs(initial))
        coefficient = sp.Poly(q_now, v).coeff_monomial(v**2)
        square = sp.expand((C - (q_now - coefficient * v**2)) / coefficient)
        # v keeps the sign it starts with: it cannot cross 0 while Q = C is conserved
        # unless the square itself reaches 0
        sign = sp.sign(initial[v])
        root = -sp.sqrt(square) if sign == -1 else sp.sqrt(square)
        for w in remaining:
            if w != v:
                rhs[w] = _tidy(sp.expand(rhs[w]).subs(v**2, square).subs(v, root))
        eliminated[v] = root
        remaining.remove(v)
    return rhs, eliminated, constants


def _tidy(expr: sp.Expr) -> sp.Expr:
    """Factor small expressions fully (as the paper prints them), large ones cheaply."""
    return sp.factor(expr) if len(expr.free_symbols) <= 5 else sp.factor_terms(expr)


def _even_in(expr: sp.Expr, v: sp.Symbol) -> bool:
    poly = sp.Poly(sp.expand(expr), v)
    return all(m[0] % 2 == 0 for m in poly.monoms())


def _closed_form(
    rhs: Mapping[sp.Symbol, sp.Expr],
    initial: Mapping[sp.Symbol, Any],
    eliminated: Mapping[sp.Symbol, sp.Expr],
    constants: Mapping[sp.Symbol, Any],
) -> dict[str, sp.Expr]:
    r"""Closed forms of a one-variable system $\dot B = f(B)$.

    Always the formal separable solution $t=\int_{B_0}^{B} dx/f(x)$ (as for Eq. 15).
    When $f = pB + qB^n$ (a Bernoulli equation, e.g. a balanced two-layer pathway), also
    the explicit solution $B^{1-n} = (B_0^{1-n} + q/p)\,e^{(1-n)pt} - q/p$, which is the
    logistic solution of Eq. (21) for $a = B^2$.
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
