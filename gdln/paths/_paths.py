r"""Paths through an architecture graph (Fig. 2b of Saxe et al. 2022).

A path $p$ is a sequence of edges from an input node to an output node. The gradient of
an edge's weights is a sum over $\mathcal{P}(e)$, the paths through $e$ (Eq. 3), and the
error of a path is a sum over $\mathcal{T}(t(p))$, the paths ending where $p$ ends
(Eq. 4). Each path through $e$ splits into the part before $e$, $\bar s(p, e)$, and the
part after it, $\bar t(p, e)$.

Functions take the graph first and enumerate lazily, as networkx does.

>>> import networkx as nx
>>> G = nx.DiGraph([("x", "h"), ("h", "y"), ("x", "y")])
>>> [str(p) for p in enumerate_paths(G)]
['x->h->y', 'x->y']
>>> p = next(paths_through(G, ("h", "y")))
>>> str(source_subpath(p, ("h", "y"))), str(target_subpath(p, ("h", "y")))
('x->h', 'y')
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass

import networkx as nx

from .._edge import Edge

__all__ = [
    "Path",
    "PathCounts",
    "enumerate_paths",
    "input_nodes",
    "output_nodes",
    "path_counts",
    "paths_ending_at",
    "paths_through",
    "source_subpath",
    "target_subpath",
]


@dataclass(frozen=True, order=True)
class Path:
    """A directed path, as its nodes (one node: the empty path at that node).

    Parameters
    ----------
    nodes
        The nodes visited, source first.

    Raises
    ------
    ValueError
        ``nodes`` is empty.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Sec. 2: a path $p$ from $s(p)$ to $t(p)$, whose
    weights multiply to $W_p$.
    """

    nodes: tuple[Hashable, ...]

    def __post_init__(self) -> None:
        if not self.nodes:
            raise ValueError("a path visits at least one node")

    @property
    def edges(self) -> tuple[Edge, ...]:
        """The edges along the path, from its source to its target."""
        return tuple(zip(self.nodes[:-1], self.nodes[1:], strict=True))

    @property
    def source(self) -> Hashable:
        """$s(p)$."""
        return self.nodes[0]

    @property
    def target(self) -> Hashable:
        """$t(p)$."""
        return self.nodes[-1]

    def __len__(self) -> int:
        return len(self.nodes) - 1

    def __contains__(self, edge: object) -> bool:
        return edge in self.edges

    def __str__(self) -> str:
        return "->".join(str(v) for v in self.nodes)

    def __repr__(self) -> str:
        return f"Path({self.nodes!r})"


def input_nodes(graph: nx.DiGraph) -> list[Hashable]:
    r"""$\mathrm{In}(\Gamma)$: nodes with only outgoing edges, in graph order.

    Parameters
    ----------
    graph
        The architecture.

    Returns
    -------
    list
        The input nodes (in-degree 0).

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Sec. 2: the input nodes $\mathrm{In}(\Gamma)$.
    """
    return [v for v in graph.nodes if graph.in_degree(v) == 0]


def output_nodes(graph: nx.DiGraph) -> list[Hashable]:
    r"""$\mathrm{Out}(\Gamma)$: nodes with only incoming edges, in graph order.

    Parameters
    ----------
    graph
        The architecture.

    Returns
    -------
    list
        The output nodes (out-degree 0).

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Sec. 2: the output nodes $\mathrm{Out}(\Gamma)$.
    """
    return [v for v in graph.nodes if graph.out_degree(v) == 0]


def enumerate_paths(
    graph: nx.DiGraph, *, source: Hashable | None = None, target: Hashable | None = None
) -> Iterator[Path]:
    """All input-to-output paths, depth first, lazily.

    Parameters
    ----------
    graph
        A directed acyclic graph.
    source, target
        Restrict to paths from this input node and/or to this output node.

    Yields
    ------
    Path
        One input-to-output path at a time.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Sec. 2: the paths of the network, over which the
    output is a sum.
    """
    sources = [source] if source is not None else input_nodes(graph)
    for start in sources:
        stack: list[tuple[Hashable, ...]] = [(start,)]
        while stack:
            nodes = stack.pop()
            successors = list(graph.successors(nodes[-1]))
            if not successors:
                if target is None or nodes[-1] == target:
                    yield Path(nodes)
                continue
            stack.extend((*nodes, s) for s in reversed(successors))


@dataclass(frozen=True)
class PathCounts:
    r"""How many input-to-output paths there are, counted without listing them.

    Parameters
    ----------
    total
        The number of input-to-output paths.
    through
        Edge -> $|\mathcal{P}(e)|$, the paths through it (Eq. 3).
    ending
        Output node -> $|\mathcal{T}(v)|$, the paths ending at it (Eq. 4).
    """

    total: int
    through: dict[Edge, int]
    ending: dict[Hashable, int]


def path_counts(graph: nx.DiGraph) -> PathCounts:
    r"""$|\mathcal{P}(e)|$ and $|\mathcal{T}(v)|$ by dynamic programming, in O(edges).

    A path through $e$ is a path from an input to $s(e)$ followed by one from $t(e)$ to an
    output, so $|\mathcal{P}(e)| = n_\mathrm{in}(s(e))\,n_\mathrm{out}(t(e))$. A residual
    chain of depth $L$ has $2^L$ paths and is counted in $O(L)$.

    Parameters
    ----------
    graph
        A directed acyclic graph.

    Returns
    -------
    PathCounts
        The total and the counts per edge and per output node.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eqs. (3)-(4): the sets $\mathcal{P}(e)$ and
    $\mathcal{T}(v)$ counted here.

    Examples
    --------
    >>> import networkx as nx
    >>> counts = path_counts(nx.DiGraph([("x", "h"), ("h", "y"), ("x", "y")]))
    >>> counts.total, counts.through[("h", "y")], counts.ending["y"]
    (2, 1, 2)
    """
    order = list(nx.topological_sort(graph))
    into = {v: 1 if graph.in_degree(v) == 0 else 0 for v in order}
    for v in order:
        for w in graph.successors(v):
            into[w] += into[v]
    out_of = {v: 1 if graph.out_degree(v) == 0 else 0 for v in order}
    for v in reversed(order):
        for w in graph.successors(v):
            out_of[v] += out_of[w]
    outputs = output_nodes(graph)
    return PathCounts(
        total=sum(into[v] for v in outputs),
        through={(u, v): into[u] * out_of[v] for u, v in graph.edges},
        ending={v: into[v] for v in outputs},
    )


def paths_through(graph: nx.DiGraph, edge: Edge) -> Iterator[Path]:
    r"""$\mathcal{P}(e)$: the input-to-output paths through ``edge``, lazily.

    The gradient of $W_e$ is a sum over these paths (Eq. 3 of Saxe et al. 2022). Each is
    a path into $s(e)$ joined to a path out of $t(e)$; both halves are enumerated depth
    first and yielded one path at a time, so ``next()`` returns at once even when there
    are exponentially many paths.

    Parameters
    ----------
    graph
        A directed acyclic graph.
    edge
        ``(source, target)`` of an edge of ``graph``.

    Yields
    ------
    Path
        One path through ``edge`` at a time.

    Raises
    ------
    KeyError
        ``graph`` has no such edge.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eq. (3).
    """
    u, v = edge
    if not graph.has_edge(u, v):
        raise KeyError(f"no edge {u}->{v}")
    for head in _paths_into(graph, u):
        for tail in _paths_out_of(graph, v):
            yield Path(head + tail)


def paths_ending_at(graph: nx.DiGraph, node: Hashable) -> Iterator[Path]:
    r"""$\mathcal{T}(v)$: the paths from an input node that end at ``node``, lazily.

    The error of a path $p$ is a sum over $\mathcal{T}(t(p))$ (Eq. 4 of Saxe et al.
    2022). Enumerated depth first over predecessors, one path at a time.

    Parameters
    ----------
    graph
        A directed acyclic graph.
    node
        A node of ``graph``.

    Yields
    ------
    Path
        One path from an input node to ``node`` at a time (the empty path when ``node``
        is an input).

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eq. (4).
    """
    yield from (Path(head) for head in _paths_into(graph, node))


def source_subpath(path: Path, edge: Edge) -> Path:
    r"""$\bar s(p, e)$: the part of ``path`` before ``edge``, ending at $s(e)$.

    Parameters
    ----------
    path
        A path.
    edge
        ``(source, target)`` of an edge on ``path``.

    Returns
    -------
    Path
        The subpath from $s(p)$ to $s(e)$.

    Raises
    ------
    ValueError
        ``edge`` is not on ``path``.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eq. (3): the gradient of $W_e$ through $p$ multiplies
    the weights of $\bar t(p, e)$ and $\bar s(p, e)$.
    """
    index = path.edges.index(edge)
    return Path(path.nodes[: index + 1])


def target_subpath(path: Path, edge: Edge) -> Path:
    r"""$\bar t(p, e)$: the part of ``path`` after ``edge``, starting at $t(e)$.

    Parameters
    ----------
    path
        A path.
    edge
        ``(source, target)`` of an edge on ``path``.

    Returns
    -------
    Path
        The subpath from $t(e)$ to $t(p)$.

    Raises
    ------
    ValueError
        ``edge`` is not on ``path``.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eq. (3): the gradient of $W_e$ through $p$ multiplies
    the weights of $\bar t(p, e)$ and $\bar s(p, e)$.
    """
    index = path.edges.index(edge)
    return Path(path.nodes[index + 1 :])


def _paths_into(graph: nx.DiGraph, node: Hashable) -> Iterator[tuple[Hashable, ...]]:
    """Node tuples of the paths from an input node to ``node``, depth first, lazily."""
    for reverse in _walks(graph.predecessors, node):
        yield reverse[::-1]


def _paths_out_of(graph: nx.DiGraph, node: Hashable) -> Iterator[tuple[Hashable, ...]]:
    """Node tuples of the paths from ``node`` to an output node, depth first, lazily."""
    yield from _walks(graph.successors, node)


def _walks(
    neighbours: Callable[[Hashable], Iterator[Hashable]], node: Hashable
) -> Iterator[tuple[Hashable, ...]]:
    """Maximal walks from ``node`` along ``neighbours``, iteratively (no recursion limit).

    Neighbours are visited in graph order, so the order is that of a recursive
    enumeration; memory is one iterator per node on the current walk.
    """
    walk: list[Hashable] = [node]
    stack: list[Iterator[Hashable]] = [iter(neighbours(node))]
    leaf = True
    while stack:
        following = next(stack[-1], None)
        if following is None:
            if leaf:
                yield tuple(walk)
            leaf = False
            stack.pop()
            walk.pop()
            continue
        walk.append(following)
        stack.append(iter(neighbours(following)))
        leaf = True
