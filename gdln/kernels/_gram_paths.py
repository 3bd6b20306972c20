r"""The gradient-descent Gram matrix $H$ as a sum over weights and paths.

For a feed-forward network $f$ on a DAG of scalar weights, with prediction $u_i=f(w,X_i)$,
gradient flow on the squared loss gives $\dot u = -\eta H(u-y)$ with
$H_{ij}=\sum_r \partial_{w_r}u_i\,\partial_{w_r}u_j$ (Eq. 4 of *Model architecture controls
gradient descent dynamics: a combinatorial path-based formula*, the path-formula paper).
Thm. 5.1 of that paper writes every derivative as a sum over the *pre-subnetwork* of the
weight: for a weight $w$ on edge $a\to b$ (forward direction),

$$\frac{\partial u_i}{\partial w} = f[w](X_i)\sum_{p\in\mathrm{pre}(w)}\mathrm{PG}_p(w,X_i),$$

where $f[w](X_i)=h_a(X_i)$ is the activation feeding the weight, $\mathrm{pre}(w)$ is the
set of paths from $b$ to the output, and the path gradient $\mathrm{PG}_p$ is the product of
the local derivatives $\tau_v=\sigma_v'(a_v)$ of every node on $p$ (from $b$ to the output,
both included) and of the weights on $p$ (Eqs. 10-11). Hence (Eq. 12)

$$H_{ij}=\sum_w f[w](X_i)f[w](X_j)\Bigl(\sum_{p\in\mathrm{pre}(w)}\mathrm{PG}_p(w,X_i)\Bigr)
\Bigl(\sum_{p\in\mathrm{pre}(w)}\mathrm{PG}_p(w,X_j)\Bigr),$$

split (Eq. 20) into the *strongly Gram* part $H^S$ of symmetrical pairs $p_1=p_2$ and the
*weakly Gram* part $H^W$ of cross terms $p_1\ne p_2$.

Graphs are ``networkx.DiGraph`` objects in the forward direction. Input nodes (no
predecessors) carry ``input=k``, the column of $X$ they read; every other node may carry
``activation`` (``"identity"`` (default), ``"relu"``, ``"sigmoid"``, ``"tanh"``); every edge
carries ``weight``; exactly one node has no successors: the output.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np
import torch

from .._errors import GraphSpecError
from ._names import ACTIVATIONS

__all__ = [
    "PathGram",
    "dag_ntk",
    "example_5_2_graph",
    "example_5_3_graph",
    "mlp_graph",
    "mlp_term_counts",
    "path_gram",
    "pre_subnetwork",
    "term_counts",
]


def _act_torch(name: str, a: torch.Tensor) -> torch.Tensor:
    if name == "identity":
        return a
    if name == "relu":
        return a * (a > 0).to(a.dtype)
    if name == "sigmoid":
        return torch.sigmoid(a)
    return torch.tanh(a)


def _act_np(name: str, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Value and derivative of an activation."""
    if name == "identity":
        return a, np.ones_like(a)
    if name == "relu":
        on = (a > 0).astype(float)
        return a * on, on
    if name == "sigmoid":
        s = 1.0 / (1.0 + np.exp(-a))
        return s, s * (1 - s)
    t = np.tanh(a)
    return t, 1 - t * t


@dataclass(frozen=True)
class _Checked:
    order: tuple[Any, ...]
    inputs: dict[Any, int]
    output: Any
    activation: dict[Any, str]
    edges: tuple[tuple[Any, Any], ...]
    weights: np.ndarray


def _check(graph: nx.DiGraph) -> _Checked:
    if not isinstance(graph, nx.DiGraph):
        raise GraphSpecError(f"graph: got {type(graph).__name__}, expected a networkx.DiGraph")
    if graph.number_of_nodes() == 0:
        raise GraphSpecError("graph: got an empty graph, expected at least an edge")
    if not nx.is_directed_acyclic_graph(graph):
        cycle = nx.find_cycle(graph)
        raise GraphSpecError(f"graph has a cycle {cycle}, expected a DAG")
    sinks = [v for v in graph if graph.out_degree(v) == 0]
    if len(sinks) != 1:
        raise GraphSpecError(
            f"graph: got {len(sinks)} nodes without successors {sinks[:5]}, expected exactly "
            "one (the scalar output)"
        )
    inputs: dict[Any, int] = {}
    activation: dict[Any, str] = {}
    for v, data in graph.nodes(data=True):
        if graph.in_degree(v) == 0:
            k = data.get("input")
            if not isinstance(k, (int, np.integer)) or k < 0:
                raise GraphSpecError(
                    f"got input={k!r}, expected a column index >= 0 on every node without "
                    "predecessors",
                    key=f"nodes[{v!r}].input",
                )
            inputs[v] = int(k)
        else:
            act = data.get("activation", "identity")
            if act not in ACTIVATIONS:
                raise GraphSpecError(
                    f"got activation={act!r}, expected one of {', '.join(ACTIVATIONS)}",
                    key=f"nodes[{v!r}].activation",
                )
            activation[v] = act
    edges = tuple(graph.edges())
    weights = []
    for a, b in edges:
        wt = graph.edges[a, b].get("weight")
        if not isinstance(wt, (int, float, np.floating, np.integer)) or not np.isfinite(wt):
            raise GraphSpecError(
                f"got weight={wt!r}, expected a finite number", key=f"edges[{a!r}->{b!r}].weight"
            )
        weights.append(float(wt))
    order = tuple(nx.topological_sort(graph))
    return _Checked(order, inputs, sinks[0], activation, edges, np.array(weights))


def _check_x(chk: _Checked, x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    need = max(chk.inputs.values()) + 1
    if x.ndim != 2 or x.shape[1] < need:
        raise GraphSpecError(
            f"got shape {x.shape}, expected (N, >= {need}) (input columns used by the graph)",
            key="X",
        )
    return x


def _forward(
    graph: nx.DiGraph, chk: _Checked, x: np.ndarray
) -> tuple[dict[Any, np.ndarray], dict[Any, np.ndarray]]:
    """Activations $h_v$ and local derivatives $\\tau_v$ of every node, one value per row."""
    h: dict[Any, np.ndarray] = {}
    tau: dict[Any, np.ndarray] = {}
    for v in chk.order:
        if v in chk.inputs:
            h[v] = x[:, chk.inputs[v]]
            continue
        a = sum(graph.edges[u, v]["weight"] * h[u] for u in graph.predecessors(v))
        h[v], tau[v] = _act_np(chk.activation[v], np.asarray(a, dtype=float))
    return h, tau


def pre_subnetwork(graph: nx.DiGraph, edge: tuple[Any, Any]) -> Iterator[tuple[Any, ...]]:
    r"""Yield the paths of $\mathrm{pre}(w)$ for the weight on ``edge`` (Sec. 5, path-formula).

    Each path is the tuple of nodes from the edge's head $b$ to the output; the trivial
    path ``(output,)`` when $b$ is the output. A generator: nothing is listed in advance.

    Parameters
    ----------
    graph
        A DAG of scalar weights (see the module docstring: ``input``, ``activation``,
        ``weight``, one output).
    edge
        ``(a, b)``, an edge of ``graph``.

    Yields
    ------
    tuple
        The nodes of one path, from $b$ to the output.

    Raises
    ------
    GraphSpecError
        The graph is malformed or has no such edge.

    References
    ----------
    *Model architecture controls gradient descent dynamics: a combinatorial path-based
    formula*, Sec. 5 (the pre-subnetwork $\mathrm{pre}(w)$).
    """
    chk = _check(graph)
    _, b = edge
    if not graph.has_edge(*edge):
        raise GraphSpecError(f"got edge {edge!r}, which is not in the graph", key="edge")
    if b == chk.output:
        yield (b,)
        return
    for p in nx.all_simple_paths(graph, b, chk.output):
        yield tuple(p)


@dataclass(frozen=True)
class PathGram:
    r"""$H = H^S + H^W$ from the path formula (Thm. 5.1 and Eq. 20 of the path-formula paper).

    Parameters
    ----------
    H
        The Gram matrix of Eq. 12, ``(N, N)``.
    strong
        $H^S$: the symmetrical pairs $p_1=p_2$; a Gram matrix of the vectors of Eq. 21.
    weak
        $H^W$: the cross terms $p_1\ne p_2$ (paths sharing their final edge).
    n_strong, n_weak
        Number of summands of each kind in Eq. 12 (per entry $H_{ij}$).

    Raises
    ------
    GraphSpecError
        The matrices differ in shape, or a count is negative.

    References
    ----------
    *Model architecture controls gradient descent dynamics: a combinatorial path-based
    formula*, Thm. 5.1, Eqs. 12 and 20-21.
    """

    H: np.ndarray
    strong: np.ndarray
    weak: np.ndarray
    n_strong: int
    n_weak: int

    def __post_init__(self) -> None:
        if not (self.H.shape == self.strong.shape == self.weak.shape):
            raise GraphSpecError("PathGram: H, strong and weak must have one shape")
        if self.n_strong < 0 or self.n_weak < 0:
            raise GraphSpecError("PathGram: term counts must be >= 0")

    @property
    def n_terms(self) -> int:
        """All summands of Eq. 12: $\\sum_w|\\mathrm{pre}(w)|^2$."""
        return self.n_strong + self.n_weak


def path_gram(graph: nx.DiGraph, X: np.ndarray) -> PathGram:
    r"""$H$, $H^S$ and $H^W$ by enumerating weights and pre-subnetwork paths.

    Implements Eqs. 10-12 and 20 (Thm. 5.1) of the path-formula paper literally: for each
    weight, each path of its pre-subnetwork contributes the vector
    $g_{w,p}(i)=f[w](X_i)\,\mathrm{PG}_p(w,X_i)$; $H^S=\sum_{w,p}g_{w,p}g_{w,p}^\top$ and
    $H^W=\sum_w\sum_{p_1\ne p_2}g_{w,p_1}g_{w,p_2}^\top$. The cost grows with the number of
    paths; use :func:`dag_ntk` for large networks.

    Parameters
    ----------
    graph
        A DAG of scalar weights (see the module docstring: ``input``, ``activation``,
        ``weight``, one output).
    X
        ``(N, >= max input + 1)`` inputs, one row per example.

    Returns
    -------
    PathGram
        $H$, $H^S$, $H^W$ and the numbers of summands.

    Raises
    ------
    GraphSpecError
        The graph is not such a DAG, or ``X`` lacks a column the graph reads.

    References
    ----------
    *Model architecture controls gradient descent dynamics: a combinatorial path-based
    formula*, Thm. 5.1, Eqs. 10-12 and 20.

    Examples
    --------
    >>> g = example_5_2_graph()
    >>> pg = path_gram(g, np.array([[1.0, 2.0], [0.5, -1.0]]))
    >>> pg.n_strong, pg.n_weak, bool(np.allclose(pg.H, dag_ntk(g, [[1.0, 2.0], [0.5, -1.0]])))
    (3, 0, True)
    """
    chk = _check(graph)
    x = _check_x(chk, X)
    h, tau = _forward(graph, chk, x)
    n = x.shape[0]
    strong = np.zeros((n, n))
    full = np.zeros((n, n))
    n_strong = n_weak = 0
    for a, b in chk.edges:
        total = np.zeros(n)
        count = 0
        for path in pre_subnetwork(graph, (a, b)):
            pg = np.ones(n)
            for v in path:
                pg = pg * tau[v]
            for u, v in itertools.pairwise(path):
                pg = pg * graph.edges[u, v]["weight"]
            g = h[a] * pg
            strong += np.outer(g, g)
            total += g
            count += 1
        full += np.outer(total, total)
        n_strong += count
        n_weak += count * (count - 1)
    return PathGram(full, strong, full - strong, n_strong, n_weak)


def dag_ntk(graph: nx.DiGraph, X: np.ndarray | Sequence[Sequence[float]]) -> np.ndarray:
    r"""$H_{ij}=\sum_r\partial_{w_r}u_i\,\partial_{w_r}u_j$ by autodiff (Eq. 4 of path-formula).

    The reference for Thm. 5.1: the network is evaluated in ``torch`` with the edge weights
    as one parameter vector and differentiated by ``torch.func.jacrev``.

    Parameters
    ----------
    graph
        A DAG of scalar weights (see the module docstring: ``input``, ``activation``,
        ``weight``, one output).
    X
        ``(N, >= max input + 1)`` inputs, one row per example.

    Returns
    -------
    numpy.ndarray
        ``(N, N)`` Gram matrix $H$.

    Raises
    ------
    GraphSpecError
        The graph is not such a DAG, or ``X`` lacks a column the graph reads.

    References
    ----------
    *Model architecture controls gradient descent dynamics: a combinatorial path-based
    formula*, Eq. 4.
    """
    chk = _check(graph)
    # numpy in, numpy out: the autograd check runs on the CPU whatever the default device
    x = torch.as_tensor(_check_x(chk, np.asarray(X, dtype=float)), device="cpu")
    index = {e: k for k, e in enumerate(chk.edges)}
    preds = {v: list(graph.predecessors(v)) for v in chk.order}

    def out(w: torch.Tensor) -> torch.Tensor:
        h: dict[Any, torch.Tensor] = {}
        for v in chk.order:
            if v in chk.inputs:
                h[v] = x[:, chk.inputs[v]]
            else:
                a = sum(w[index[(u, v)]] * h[u] for u in preds[v])
                h[v] = _act_torch(chk.activation[v], a)  # type: ignore[arg-type]
        return h[chk.output]

    j = torch.func.jacrev(out)(torch.as_tensor(chk.weights, device="cpu"))
    return (j @ j.T).cpu().numpy()


def term_counts(graph: nx.DiGraph) -> tuple[int, int]:
    r"""Summands of Eq. 12 without listing paths: ``(n_strong, n_weak)``.

    With $N(v)$ the number of paths from $v$ to the output ($N(\mathrm{out})=1$,
    $N(v)=\sum_{v\to c}N(c)$), $|\mathrm{pre}(a\to b)|=N(b)$, so
    $n_S=\sum_{a\to b}N(b)$ and $n_W=\sum_{a\to b}N(b)(N(b)-1)$ (Eq. 20 of path-formula).

    Parameters
    ----------
    graph
        A DAG of scalar weights (see the module docstring: ``input``, ``activation``,
        ``weight``, one output).

    Returns
    -------
    (int, int)
        $n_S$ and $n_W$ per entry $H_{ij}$.

    Raises
    ------
    GraphSpecError
        The graph is not such a DAG.

    References
    ----------
    *Model architecture controls gradient descent dynamics: a combinatorial path-based
    formula*, Eqs. 12 and 20.
    """
    chk = _check(graph)
    paths: dict[Any, int] = {}
    for v in reversed(chk.order):
        paths[v] = 1 if v == chk.output else sum(paths[c] for c in graph.successors(v))
    n_s = sum(paths[b] for _, b in chk.edges)
    n_w = sum(paths[b] * (paths[b] - 1) for _, b in chk.edges)
    return int(n_s), int(n_w)


def mlp_term_counts(widths: Sequence[int]) -> tuple[int, int]:
    r"""``(n_strong, n_weak)`` of Eq. 12 for a fully connected MLP in closed form.

    For layer sizes $(n_0,\dots,n_L)$ with $n_L=1$, a weight into layer $l$ has
    $\prod_{k>l}n_k$ pre-subnetwork paths and there are $n_{l-1}n_l$ of them.

    Parameters
    ----------
    widths
        Layer sizes $(n_0, \dots, n_L)$ with $n_L = 1$.

    Returns
    -------
    (int, int)
        $n_S$ and $n_W$.

    Raises
    ------
    GraphSpecError
        ``widths`` does not end in 1 or has a size below 1.

    References
    ----------
    *Model architecture controls gradient descent dynamics: a combinatorial path-based
    formula*, Eqs. 12 and 20.
    """
    widths = [int(w) for w in widths]
    if len(widths) < 2 or any(w < 1 for w in widths) or widths[-1] != 1:
        raise GraphSpecError(
            f"got widths={widths!r}, expected at least two sizes >= 1 ending in 1", key="widths"
        )
    n_s = n_w = 0
    for layer in range(1, len(widths)):
        paths = int(np.prod(widths[layer + 1 :], dtype=object)) if layer + 1 < len(widths) else 1
        count = widths[layer - 1] * widths[layer]
        n_s += count * paths
        n_w += count * paths * (paths - 1)
    return n_s, n_w


def mlp_graph(
    widths: Sequence[int],
    *,
    activation: str = "relu",
    output_activation: str = "identity",
    weights: Sequence[np.ndarray] | None = None,
    seed: int = 0,
) -> nx.DiGraph:
    r"""A fully connected MLP as a DAG of scalar weights.

    Nodes are ``("x", i)``, ``("h", l, i)`` and ``"y"``; ``weights[l-1]`` (shape
    ``(n_{l-1}, n_l)``) gives the edge weights, default $N(0, 1/n_{l-1})$ from
    ``numpy.random.default_rng(seed)``.

    Parameters
    ----------
    widths
        Layer sizes $(n_0, \dots, n_L)$ with $n_L = 1$.
    activation
        Activation of the hidden nodes (a key of :data:`ACTIVATIONS`).
    output_activation
        Activation of the output node.
    weights
        One ``(n_{l-1}, n_l)`` matrix per layer (default: drawn as above).
    seed
        Seed of the default weights.

    Returns
    -------
    networkx.DiGraph
        The DAG, in the format of :func:`path_gram`.

    Raises
    ------
    GraphSpecError
        ``widths`` does not end in 1, an activation is unknown, or ``weights`` has the
        wrong number or shapes of matrices.

    References
    ----------
    *Model architecture controls gradient descent dynamics: a combinatorial path-based
    formula*, Sec. 5 (an MLP as a DAG of weights).
    """
    widths = [int(w) for w in widths]
    if len(widths) < 2 or any(w < 1 for w in widths) or widths[-1] != 1:
        raise GraphSpecError(
            f"got widths={widths!r}, expected at least two sizes >= 1 ending in 1", key="widths"
        )
    for name, act in (("activation", activation), ("output_activation", output_activation)):
        if act not in ACTIVATIONS:
            raise GraphSpecError(f"got {act!r}, expected one of {', '.join(ACTIVATIONS)}", key=name)
    rng = np.random.default_rng(seed)
    if weights is None:
        weights = [
            rng.normal(0, 1 / np.sqrt(a), size=(a, b)) for a, b in itertools.pairwise(widths)
        ]
    if len(weights) != len(widths) - 1:
        raise GraphSpecError(
            f"got {len(weights)} weight matrices, expected {len(widths) - 1}", key="weights"
        )
    g = nx.DiGraph()
    layers: list[list[Any]] = [[("x", i) for i in range(widths[0])]]
    for i, v in enumerate(layers[0]):
        g.add_node(v, input=i)
    for layer in range(1, len(widths)):
        last = layer == len(widths) - 1
        nodes = ["y"] if last else [("h", layer, i) for i in range(widths[layer])]
        for v in nodes:
            g.add_node(v, activation=output_activation if last else activation)
        w = np.asarray(weights[layer - 1], dtype=float)
        if w.shape != (widths[layer - 1], widths[layer]):
            raise GraphSpecError(
                f"got shape {w.shape}, expected {(widths[layer - 1], widths[layer])}",
                key=f"weights[{layer - 1}]",
            )
        for i, a in enumerate(layers[-1]):
            for j, b in enumerate(nodes):
                g.add_edge(a, b, weight=float(w[i, j]))
        layers.append(nodes)
    return g


def example_5_2_graph(weights: Sequence[float] = (0.7, -1.2, 0.4)) -> nx.DiGraph:
    """Example 5.2 of the path-formula paper: two inputs, one hidden node, one output.

    Weights $w_0$ (hidden -> output), $w_1, w_2$ (inputs -> hidden); every pre-subnetwork
    is a single path, so Eq. 12 has 3 summands, all symmetrical pairs. Figure 2a is not in
    the text we have; this is the smallest DAG matching its description.

    Parameters
    ----------
    weights
        $(w_0, w_1, w_2)$.

    Returns
    -------
    networkx.DiGraph
        The DAG, in the format of :func:`path_gram`.

    References
    ----------
    *Model architecture controls gradient descent dynamics: a combinatorial path-based
    formula*, Example 5.2.
    """
    g = nx.DiGraph()
    g.add_node("x1", input=0)
    g.add_node("x2", input=1)
    g.add_node("h", activation="sigmoid")
    g.add_node("y", activation="identity")
    g.add_edge("h", "y", weight=weights[0])
    g.add_edge("x1", "h", weight=weights[1])
    g.add_edge("x2", "h", weight=weights[2])
    return g


def example_5_3_graph(
    weights: Sequence[float] = (0.9, -0.6, 0.5, 1.1, -0.8, 0.3),
) -> nx.DiGraph:
    r"""Example 5.3 of the path-formula paper: 5 single-path weights and one with 3 paths.

    A reconstruction (Fig. 2c-d are not in the text): input $x\to b$ ($w_5$), $b\to a_1$
    ($w_2$), $b\to a_2$ ($w_3$), $b\to y$ ($w_4$, a skip edge), $a_1\to y$ ($w_0$),
    $a_2\to y$ ($w_1$). $\mathrm{pre}(w_5)$ holds the three paths $b\,a_1\,y$, $b\,a_2\,y$,
    $b\,y$, so Eq. 12 has $5+3^2=14$ summands: 8 symmetrical pairs, 6 cross terms.

    Parameters
    ----------
    weights
        $(w_0, \dots, w_5)$.

    Returns
    -------
    networkx.DiGraph
        The DAG, in the format of :func:`path_gram`.

    References
    ----------
    *Model architecture controls gradient descent dynamics: a combinatorial path-based
    formula*, Example 5.3.
    """
    g = nx.DiGraph()
    g.add_node("x", input=0)
    for v in ("b", "a1", "a2"):
        g.add_node(v, activation="tanh")
    g.add_node("y", activation="identity")
    g.add_edge("a1", "y", weight=weights[0])
    g.add_edge("a2", "y", weight=weights[1])
    g.add_edge("b", "a1", weight=weights[2])
    g.add_edge("b", "a2", weight=weights[3])
    g.add_edge("b", "y", weight=weights[4])
    g.add_edge("x", "b", weight=weights[5])
    return g
