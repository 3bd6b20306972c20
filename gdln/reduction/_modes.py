r"""Modes of each component of coupled paths: the common bases of Eqs. (7)-(8).

The active paths split into components (paths that share an edge, or feed one output
with correlated inputs); each component gets its own matched bases $U$, $V$, found by
:func:`~gdln.reduction._bases.joint_modes` from the component's statistics. When every
data node of a component sees one dataset field, the statistics are those of the fields'
moments $\langle yx^\top\rangle$ and $\langle xx^\top\rangle$ whatever the gates
(*dataset level*); otherwise they are the path statistics of Eqs. (5)-(6) per node.
Each edge then carries, in mode $\alpha$, the scalar $b_e$ of Eq. (9) if both its ends
carry mode $\alpha$ (:func:`alive_edges`).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import sympy as sp

from .._edge import Edge
from .._errors import GdlnError, NotDiagonalizableError
from ..paths._paths import Path, input_nodes, output_nodes
from ..paths._statistics import ActivePaths, PathStatistics, path_statistics
from ..task._problem import Problem
from ..task._task import Task, as_float
from ._bases import Block, Modes, generic_values, joint_modes
from ._fixed import joint_modes_fixed, with_fixed_blocks

__all__: list[str] = []  # package-internal: the bases of each component, for both routes

MAX_EXACT_DIMS = 200
"""Largest total dimension of a component's spaces whose bases are made exact."""
GENERIC = (sp.Rational(3, 8), sp.Rational(5, 8))
"""Two values for the free symbols of statistics (e.g. a symbolic survival probability)."""

Space = dict[tuple[int, Hashable], Hashable]
"""(component, data node) -> the label of the space it lives in."""


def tidy_number(value: Any) -> Any:
    """An exact value in its simplest form (floats made rational); anything else a float."""
    if isinstance(value, sp.Basic):
        return sp.nsimplify(value) if value.is_Float else sp.radsimp(value)
    return float(value)


def statistic_block(row: Hashable, col: Hashable, matrix: Any, tag: str = "") -> Block:
    """A statistic as a :class:`Block`; symbols take generic values in ``Block.value``."""
    exact = sp.ImmutableMatrix(matrix) if isinstance(matrix, sp.MatrixBase) else None
    if exact is not None and exact.free_symbols:
        value = as_float(exact.xreplace(generic_values(exact.free_symbols)))
    else:
        value = as_float(matrix)
    return Block(row=row, col=col, value=value, exact=exact, tag=tag)


def mode_values(
    modes: Modes, row: Hashable, col: Hashable, statistic: Any, *, exact: bool = True
) -> list[Any]:
    r"""$r^{\alpha\top}_{\rm row}\,\Sigma\,r^\alpha_{\rm col}$ for every mode $\alpha$ of ``modes``.

    The diagonal of $S = U^\top\Sigma^{yx}V$ or $D = V^\top\Sigma^xV$ (Eqs. 7-8 of Saxe
    et al. 2022) for a statistic between the spaces ``row`` and ``col``; exact when the
    statistic and the modes are and ``exact`` is true, else floats.
    """
    block = statistic_block(row, col, statistic)
    use_exact = exact and modes.exact_vectors is not None and block.exact is not None
    return [modes.value(block, alpha, exact=use_exact) for alpha in range(len(modes))]


def _statistic_blocks(row: Hashable, col: Hashable, matrix: Any, tag: str) -> list[Block]:
    """A statistic as a block; a symbolic one at two generic values of its symbols.

    Bases found from statistics that depend on a symbol must hold for every value of it:
    the joint diagonalisation then asks them to diagonalise the statistic at both values.
    """
    free = sorted(matrix.free_symbols, key=str) if isinstance(matrix, sp.MatrixBase) else []
    if not free:
        return [statistic_block(row, col, matrix, tag)]
    out = []
    for k, x in enumerate(GENERIC):
        point = {s: x + sp.Rational(i, 100) for i, s in enumerate(free)}
        exact = sp.ImmutableMatrix(matrix.subs(point))
        tag_k = f"{tag} at p #{k + 1}"
        out.append(Block(row=row, col=col, value=as_float(exact), exact=exact, tag=tag_k))
    return out


def blocks_key(spaces: Mapping[Hashable, int], blocks: Sequence[Block]) -> tuple[Any, ...]:
    """What a component's modes depend on: components with equal keys share bases."""
    return (tuple(sorted(spaces.items(), key=str)), tuple((b.row, b.col, b.tag) for b in blocks))


@dataclass(frozen=True)
class FieldBindings:
    """The dataset fields the data nodes of each component see, and their co-occurrences.

    Attributes
    ----------
    node
        ``(component, "in" | "out", node)`` -> the ``(dataset, field)`` pairs bound to it.
    yx
        Component -> ``(dataset, target field, input field)`` of each $\\Sigma^{yx}$ block.
    xx
        Component -> ``(dataset, input field, input field)`` of each $\\Sigma^x$ block.
    """

    node: defaultdict[tuple[int, str, Hashable], set[tuple[str, str]]] = field(
        default_factory=lambda: defaultdict(set)
    )
    yx: defaultdict[int, set[tuple[str, str, Any]]] = field(
        default_factory=lambda: defaultdict(set)
    )
    xx: defaultdict[int, set[tuple[str, str, Any]]] = field(
        default_factory=lambda: defaultdict(set)
    )

    def dataset_level(self, k: int, nodes: Iterable[tuple[str, Hashable]]) -> bool:
        """Whether every data node of component ``k`` sees at most one dataset field."""
        return all(len(self.node[(k, role, v)]) <= 1 for role, v in nodes)


def dataset_level_blocks(
    graph: nx.DiGraph,
    task: Task,
    k: int,
    nodes: Iterable[tuple[str, Hashable]],
    bindings: FieldBindings,
    space: Space,
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
        if bindings.node[(k, role, v)]:
            ((d, f),) = bindings.node[(k, role, v)]
            label: tuple[str, str, Any] = (role, d, f)
        else:
            label = (role, "node", v)
        space[(k, v)] = label
        spaces[label] = graph.nodes[v]["size"]
        if role == "out":
            outputs.add(label)
    blocks = []
    for d, fo, fi in sorted(bindings.yx[k]):
        m = task.datasets[d].moment(fo, fi)
        blocks.append(
            statistic_block(("out", d, fo), ("in", d, fi), m, f"Sigma_yx[{d}: {fo},{fi}]")
        )
    for d, fa, fb in sorted(bindings.xx[k]):
        m = task.datasets[d].moment(fa, fb)
        blocks.append(statistic_block(("in", d, fa), ("in", d, fb), m, f"Sigma_x[{d}: {fa},{fb}]"))
    return spaces, blocks, outputs


# ---------------------------------------------------------------------------------------
# The path route: components of active paths


def component_modes(problem: Problem, active: ActivePaths) -> tuple[Space, list[Modes]]:
    """Bases per component: from the datasets when each node sees one field, else per node.

    Returns the space of each (component, data node) and the :class:`Modes` of each
    component. Components with the same dataset-level blocks share one :class:`Modes`.
    """
    task = problem.require_task()
    graph = problem.graph
    bindings = _path_bindings(task, active)
    space: Space = {}
    result: list[Modes] = []
    cache: dict[Any, Modes] = {}
    stats: PathStatistics | None = None
    for k, members in enumerate(active.components):
        nodes = _data_nodes(active, members)
        dataset_level = bindings.dataset_level(k, nodes)
        if dataset_level:
            spaces, blocks, outputs = dataset_level_blocks(graph, task, k, nodes, bindings, space)
        else:
            if stats is None:
                stats = path_statistics(graph, task, active)
            paths = [active.paths[i] for i in members]
            spaces, blocks, outputs = _node_level_blocks(graph, stats, k, nodes, paths, space)
        blocks, pairs = with_fixed_blocks(graph, k, space, spaces, blocks)
        key = blocks_key(spaces, blocks)
        if not dataset_level or key not in cache:
            cache[key] = _modes_of_blocks(problem, spaces, blocks, outputs, pairs)
        result.append(cache[key])
    return space, result


def _path_bindings(task: Task, active: ActivePaths) -> FieldBindings:
    """The fields each data node sees, and the field pairs of co-active paths."""
    comp_of = active.component_of()
    bindings = FieldBindings()
    for c, found in zip(task.contexts, active.gates, strict=True):
        by_target: dict[tuple[int, Hashable], list[int]] = defaultdict(list)
        for i in found:
            path = active.paths[i]
            k = comp_of[i]
            bindings.node[(k, "in", path.source)].add((c.dataset, c.inputs[path.source]))
            if path.target in c.targets:
                bindings.node[(k, "out", path.target)].add((c.dataset, c.targets[path.target]))
                bindings.yx[k].add((c.dataset, c.targets[path.target], c.inputs[path.source]))
            by_target[(k, path.target)].append(i)
        for group in by_target.values():
            for i, j in itertools.product(group, repeat=2):
                a, b = active.paths[i], active.paths[j]
                bindings.xx[comp_of[i]].add((c.dataset, c.inputs[a.source], c.inputs[b.source]))
    return bindings


def _data_nodes(active: ActivePaths, members: Sequence[int]) -> list[tuple[str, Hashable]]:
    """The ``("in", source)`` and ``("out", target)`` nodes of a component's paths."""
    return sorted(  # sorted: a set's order changes with the hash seed
        {("in", active.paths[i].source) for i in members}
        | {("out", active.paths[i].target) for i in members},
        key=str,
    )


def _node_level_blocks(
    graph: nx.DiGraph,
    stats: PathStatistics,
    k: int,
    nodes: Iterable[tuple[str, Hashable]],
    paths: Sequence[Path],
    space: Space,
) -> tuple[dict[Hashable, int], list[Block], set[Hashable]]:
    """Component ``k``'s path statistics (Eqs. 5-6), one space per data node."""
    spaces: dict[Hashable, int] = {}
    outputs: set[Hashable] = set()
    for role, v in nodes:
        label = (role, "node", v)
        space[(k, v)] = label
        spaces[label] = graph.nodes[v]["size"]
        if role == "out":
            outputs.add(label)
    blocks: list[Block] = []
    for p in paths:
        row, col = ("out", "node", p.target), ("in", "node", p.source)
        blocks += _statistic_blocks(row, col, stats.input_output[p], f"Sigma_yx({p})")
    members = set(paths)
    for (pj, pp), m in stats.input.items():
        if pj in members and pp in members:
            row, col = ("in", "node", pj.source), ("in", "node", pp.source)
            blocks += _statistic_blocks(row, col, m, f"Sigma_x({pj}, {pp})")
    return spaces, blocks, outputs


def _modes_of_blocks(
    problem: Problem,
    spaces: Mapping[Hashable, int],
    blocks: Sequence[Block],
    outputs: set[Hashable],
    pairs: Sequence[tuple[Hashable, Hashable, str]],
) -> Modes:
    """Joint modes of one component; symbolic statistics need bases that hold for all values."""
    exact = problem.require_task().exact and sum(spaces.values()) <= MAX_EXACT_DIMS
    symbols = set().union(*(b.exact.free_symbols for b in blocks if b.exact is not None))
    modes = joint_modes_fixed(
        spaces, blocks, frozenset(outputs), exact, pairs, symbols=generic_values(symbols)
    )
    if symbols and modes.exact_vectors is None:
        raise GdlnError(_symbolic_bases_message(problem, spaces, blocks, symbols))
    return modes


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


def alive_edges(
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
