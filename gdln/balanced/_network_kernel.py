r"""The tangent kernel of a GDLN on a task's examples, without the Jacobian.

In the GDLN of Sec. 2 of Saxe, Sodhani & Lewallen (2022), $h_v = g_v\sum_{q:t(q)=v}
g_qW_qh_{s(q)}$. With $J_v(x) = \partial f(x)/\partial u_v$ the Jacobian of the outputs
with respect to the sum $u_v$ before the node gate,
$\partial f(x)/\partial W_e = J_{t(e)}(x)\,g_e\,h_{s(e)}(x)^\top$: the outer product of
what the edge's target passes to the outputs and what reaches its source. So the neural
tangent kernel over the trained edges is a sum of products of two Gram matrices,

$$K\big((a,i),(b,j)\big) = \sum_e g_e(a)g_e(b)\,[J_{t(e)}(x_a)J_{t(e)}(x_b)^\top]_{ij}\,
h_{s(e)}(x_a)^\top h_{s(e)}(x_b),$$

and costs (rows)$^2$ per time, never (examples $\times$ outputs $\times$ parameters).

Most rows are zero in a gated network: output unit $i$ of node $o$ depends on no trained
weight in example $a$ when every path into $o$ is gated off there (in the routing network
of Fig. 4, an example reaches one of the $M$ output domains). :class:`NetworkKernel` finds,
from the gates alone, the rows that can be nonzero and computes the kernel on those; the
edges into one node that are on in the same rows make one term, which lives on those rows
alone (:mod:`~gdln.balanced._kernel_blocks`: the kernel assembled in blocks of rows, or
its Frobenius products from the terms' factors, whichever costs less).

Hidden nodes may be given in fewer coordinates than their size: an orthonormal basis
$Q_v$ of a subspace that holds every $h_v(x)$ and every row of $J_v(x)$ leaves both Gram
matrices unchanged, with $Q_t^\top W_eQ_s$ for $W_e$ (:func:`gdln.decoupled_kernels`
takes the span of the modes of Eq. 9, so the cost does not grow with the width).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

import networkx as nx
import numpy as np

from .._edge import Edge
from ..task._examples import ExampleSet
from ._kernel_blocks import Block, BlockKernel, Values

__all__ = ["NetworkKernel"]


class NetworkKernel:
    r"""The NTK of a GDLN on a task's examples, on the rows that can be nonzero.

    Parameters
    ----------
    graph
        The architecture (node ``size``, ``fixed`` edges).
    examples
        The task's examples and their (deterministic) gates.
    widths
        Hidden node -> the number of coordinates it is given in (default: its size);
        the weights passed to :meth:`kernel` are then ``(width of target, width of
        source)``.

    Attributes
    ----------
    rows
        ``(R,)`` increasing: the rows ``a*O + i`` of the kernel over all outputs that can
        be nonzero (example ``a``, output unit ``i`` of the output nodes stacked in
        graph order, ``O`` units in all).
    side
        ``n*O``, the side of the whole kernel.
    outputs
        ``(node, size)`` of each output node, in the order of the output axis.
    hidden
        The hidden nodes (with in- and out-edges), in graph order.
    terms
        The kernel's terms, one per set of trained edges into a node that are on in the
        same rows (:class:`~gdln.balanced._kernel_blocks.BlockKernel`).
    """

    def __init__(
        self, graph: nx.DiGraph, examples: ExampleSet, widths: Mapping[Hashable, int] | None = None
    ) -> None:
        self.graph = graph
        self.n = n = len(examples.weights)
        self.order = list(nx.topological_sort(graph))
        self.hidden = [v for v in graph.nodes if graph.in_degree(v) and graph.out_degree(v)]
        self.outputs = [
            (v, int(graph.nodes[v]["size"])) for v in graph.nodes if graph.out_degree(v) == 0
        ]
        self.width = {v: int(graph.nodes[v]["size"]) for v in graph.nodes}
        self.width.update({v: int(k) for v, k in (widths or {}).items()})
        self.trained = [e for e in graph.edges if "fixed" not in graph.edges[e]]
        self._gates = {item: np.asarray(g, dtype=float) for item, g in examples.gates.items()}
        self._ones = np.ones(n)
        self.inputs = {
            v: _input(examples, v, n, self.width[v]) for v in self.order if graph.in_degree(v) == 0
        }
        nonzero, depends = self._structure()
        size = sum(k for _, k in self.outputs)
        self.side = n * size
        live = np.zeros((n, size), dtype=bool)
        offset = 0
        offsets = {}
        for v, k in self.outputs:
            offsets[v] = offset
            live[:, offset : offset + k] = depends[v][:, None]
            offset += k
        self.rows = np.flatnonzero(live.ravel())
        self.example = self.rows // max(1, size)  # (R,) the example of each row
        unit = self.rows % max(1, size)
        self._at_output: dict[Hashable, tuple[np.ndarray, np.ndarray]] = {}
        for v, k in self.outputs:
            mine = np.flatnonzero((unit >= offsets[v]) & (unit < offsets[v] + k))
            self._at_output[v] = (mine, unit[mine] - offsets[v])
        self.terms = BlockKernel(len(self.rows), self._edge_blocks(nonzero))

    def output_rows(self, node: Hashable) -> tuple[np.ndarray, np.ndarray]:
        """The positions in :attr:`rows` of an output node's rows, and their units.

        Parameters
        ----------
        node
            An output node.

        Returns
        -------
        tuple
            ``(positions, units)``, both ``(R_o,)``.
        """
        return self._at_output[node]

    def gate(self, item: Hashable) -> np.ndarray:
        """The gate of a node or edge in each example, ``(n,)`` (1 where ungated)."""
        return self._gates.get(item, self._ones)

    def _structure(self) -> tuple[dict[Hashable, np.ndarray], dict[Hashable, np.ndarray]]:
        """Per node, ``(n,)`` booleans: can $h_v(x_a)$ be nonzero; can it depend on a
        trained weight. From the gates and the inputs alone (a superset of the truth)."""
        graph = self.graph
        nonzero: dict[Hashable, np.ndarray] = {}
        depends: dict[Hashable, np.ndarray] = {}
        for v in self.order:
            if graph.in_degree(v) == 0:
                nonzero[v] = np.any(self.inputs[v] != 0, axis=1)
                depends[v] = np.zeros(self.n, dtype=bool)
                continue
            on = self.gate(v) != 0
            reach = np.zeros(self.n, dtype=bool)
            dep = np.zeros(self.n, dtype=bool)
            for s in graph.predecessors(v):
                edge_on = self.gate((s, v)) != 0
                reach |= edge_on & nonzero[s]
                dep |= edge_on & (depends[s] | (nonzero[s] & ("fixed" not in graph.edges[s, v])))
            nonzero[v], depends[v] = on & reach, on & dep
        return nonzero, depends

    def _reaches(self) -> dict[Hashable, np.ndarray]:
        """Per hidden node, ``(R,)`` booleans: can row ``r``'s output depend on $u_v$."""
        graph = self.graph
        out: dict[Hashable, np.ndarray] = {}
        for v, _ in self.outputs:
            mine = np.zeros(len(self.rows), dtype=bool)
            mine[self._at_output[v][0]] = True
            out[v] = mine & (self.gate(v)[self.example] != 0)
        for v in reversed(self.order):
            if v in out or graph.in_degree(v) == 0:
                continue
            reach = np.zeros(len(self.rows), dtype=bool)
            for t in graph.successors(v):
                reach |= out[t] & (self.gate((v, t))[self.example] != 0)
            out[v] = reach & (self.gate(v)[self.example] != 0)
        return out

    def _edge_blocks(self, nonzero: Mapping[Hashable, np.ndarray]) -> list[Block]:
        """One term per set of trained edges into one node that are on in the same rows
        (:mod:`~gdln.balanced._kernel_blocks`); ``self._edges`` and ``self._targets``
        say which edges and node each holds."""
        reaches = self._reaches()
        outputs = dict(self.outputs)
        groups: dict[tuple[Hashable, bytes], list[Edge]] = {}
        where: dict[tuple[Hashable, bytes], np.ndarray] = {}
        for e in self.trained:
            s, v = e
            on = (self.gate(e) != 0) & nonzero[s]
            mask = reaches[v] & on[self.example]
            if not mask.any():
                continue
            key = (v, mask.tobytes())
            groups.setdefault(key, []).append(e)
            where[key] = mask
        blocks = []
        self._edges: list[tuple[Edge, ...]] = []
        self._targets: list[Hashable] = []
        for key, edges in groups.items():
            v, mask = key[0], where[key]
            positions = None if mask.all() else np.flatnonzero(mask)
            seen, index = np.unique(self.example[mask], return_inverse=True)
            units = outputs.get(v, 0)
            r = units or self.width[v]
            p = sum(self.width[e[0]] for e in edges)
            blocks.append(Block(positions, seen, index, units, r, p))
            self._edges.append(tuple(edges))
            self._targets.append(v)
        return blocks

    def working_numbers(self) -> int:
        """The numbers one time holds by the way :attr:`distance` uses (two kernels and
        a block, or two sets of factors), with the Jacobians and activations."""
        held = (
            self.terms.factored_cost()[0] if self.terms.factored() else self.terms.dense_cost()[0]
        )
        widths = sum(self.width[v] for v in self.graph.nodes)
        return held + (len(self.rows) + self.n) * widths

    def activations(self, weights: Mapping[Edge, np.ndarray]) -> dict[Hashable, np.ndarray]:
        """Every node's $h_v(x_a)$, ``(n, width)``, in the nodes' coordinates.

        Parameters
        ----------
        weights
            Every edge -> ``(width of target, width of source)``.

        Returns
        -------
        dict
            Node -> ``(n, width)``.
        """
        graph = self.graph
        acts: dict[Hashable, np.ndarray] = {}
        for v in self.order:
            if graph.in_degree(v) == 0:
                acts[v] = self.inputs[v]
                continue
            u = np.zeros((self.n, self.width[v]))
            for s in graph.predecessors(v):
                u += self.gate((s, v))[:, None] * (acts[s] @ weights[(s, v)].T)
            acts[v] = self.gate(v)[:, None] * u
        return acts

    def _jacobians(self, weights: Mapping[Edge, np.ndarray]) -> dict[Hashable, np.ndarray]:
        """$J_v$ of every hidden node on the rows, ``(R, width)`` (module docstring)."""
        graph = self.graph
        at = self.example
        jac: dict[Hashable, np.ndarray] = {}
        outputs = dict(self.outputs)
        for v in reversed(self.order):
            if v in outputs or graph.in_degree(v) == 0:
                continue
            back = np.zeros((len(self.rows), self.width[v]))
            for t in graph.successors(v):
                W = weights[(v, t)]
                if t in outputs:
                    mine, units = self._at_output[t]
                    gate = (self.gate((v, t)) * self.gate(t))[at[mine]]
                    back[mine] += gate[:, None] * W[units]
                else:
                    back += self.gate((v, t))[at][:, None] * (jac[t] @ W)
            jac[v] = self.gate(v)[at][:, None] * back
        return jac

    def values(
        self,
        weights: Mapping[Edge, np.ndarray],
        activations: Mapping[Hashable, np.ndarray] | None = None,
    ) -> list[Values]:
        r"""Each term's values at the given weights: $J_v$ on its rows and the gated
        $h_{s(e)}$ of its edges on its examples (an output node's: $g_o h_{s(e)}$).

        Parameters
        ----------
        weights
            Every edge -> ``(width of target, width of source)``.
        activations
            :meth:`activations` of these weights, if computed already.

        Returns
        -------
        list
            Per term of :attr:`terms`, ``(J, H)`` (``J`` None for an output node).

        References
        ----------
        Saxe, Sodhani & Lewallen (2022), Sec. 2 (the GDLN); Jacot, Gabriel & Hongler
        (2018) (the NTK).
        """
        acts = self.activations(weights) if activations is None else activations
        jac = self._jacobians(weights)
        out: list[Values] = []
        for block, edges, v in zip(self.terms.blocks, self._edges, self._targets, strict=True):
            seen = block.seen
            H = np.hstack([self.gate(e)[seen, None] * acts[e[0]][seen] for e in edges])
            if block.units:
                out.append((None, self.gate(v)[seen, None] * H))
            else:
                rows = slice(None) if block.positions is None else block.positions
                out.append((jac[v][rows], H))
        return out

    def kernel(self, weights: Mapping[Edge, np.ndarray]) -> np.ndarray:
        """The NTK on :attr:`rows`, ``(R, R)`` (every other entry of the whole kernel is 0).

        Parameters
        ----------
        weights
            Every edge -> ``(width of target, width of source)``.

        Returns
        -------
        numpy.ndarray
            The kernel at these weights.
        """
        return self.terms.dense(self.values(weights))


def _input(examples: ExampleSet, node: Hashable, n: int, size: int) -> np.ndarray:
    """The examples' values at an input node ``(n, size)``; zeros where it is unbound."""
    value = examples.inputs.get(str(node))
    return np.zeros((n, size)) if value is None else np.asarray(value, dtype=np.float64)
