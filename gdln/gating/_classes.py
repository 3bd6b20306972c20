r"""Gating classes: units grouped by their patterns, examples by their contexts.

A ReLU node's units with one pattern column $1[z_u > 0]$ over the examples are one gated
node of the network's gated linear network (Sec. 2 of Saxe, Sodhani & Lewallen 2022);
the contexts in which a group is on (for at least one item) are its *gating class*, and
$\lVert W_{\mathrm{out}}[:,u]\rVert\,\lVert h_u\rVert$ its share of the output
(Jarvis, Klein, Rosman & Saxe 2025).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .._edge import Edge
from ..task._examples import ExampleSet
from ._run import RecordedNetwork

__all__ = ["GatedGroup", "context_of", "flips_between", "unit_groups", "unit_shares"]


@dataclass(frozen=True)
class GatedGroup:
    """Units of one ReLU node that are on for the same examples: one gated node.

    Parameters
    ----------
    node
        Its id in the extracted graph, ``"<relu node>.<k>"``.
    relu
        The ReLU node it comes from.
    units
        The units (indices into the ReLU node).
    examples
        The examples it is on for.
    contexts
        Its gating class: the contexts in which it is on for at least one example (the
        task's contexts, or the examples when the task has one context).
    share
        Its share of the ReLU node's output, $\\sum_u \\lVert W_{\\mathrm{out}}[:,u]\\rVert
        \\lVert h_u\\rVert$ over its units, divided by that of every unit.
    """

    node: str
    relu: str
    units: tuple[int, ...]
    examples: tuple[int, ...]
    contexts: frozenset[int]
    share: float


def context_of(examples: ExampleSet) -> tuple[tuple[str, ...], np.ndarray]:
    """The contexts gating classes are over, and each example's: the task's contexts, or
    every example its own (``"example<n>"``) when the task has one context."""
    labels = tuple(examples.context_labels)
    context = np.asarray(examples.context, dtype=np.int64)
    if len(set(context.tolist())) > 1 and len(labels) > int(context.max()):
        return labels, context
    return tuple(f"example{n}" for n in range(len(examples))), np.arange(len(examples))


def unit_shares(
    net: RecordedNetwork, v: str, weights: Mapping[Edge, np.ndarray], z: np.ndarray
) -> np.ndarray:
    r"""Each unit's share of ReLU node ``v``'s output, $\lVert W_{\mathrm{out}}[:,u]\rVert
    \lVert h_u\rVert$ (out-edges stacked, $h_u$ over the examples by their weights),
    normalised to sum 1 (0 for a silent node)."""
    columns = np.concatenate([weights[(v, w)] for w in net.graph.successors(v)], axis=0)
    h = np.maximum(z, 0.0)
    w = np.asarray(net.examples.weights, float)
    size = np.linalg.norm(columns, axis=0) * np.sqrt(w @ h**2)
    total = float(size.sum())
    return size / total if total > 0 else size


def unit_groups(
    net: RecordedNetwork,
    patterns: Mapping[str, np.ndarray],
    weights: Mapping[Edge, np.ndarray],
    z: Mapping[str, np.ndarray],
    context: np.ndarray,
) -> tuple[
    list[GatedGroup], dict[str, tuple[int, ...]], dict[str, list[tuple[str, tuple[int, ...]]]]
]:
    """The gated groups of every ReLU node (in order of their first unit), its dead units,
    and every node's parts ``(id, units)`` in the extracted graph."""
    groups: list[GatedGroup] = []
    dead: dict[str, tuple[int, ...]] = {}
    parts: dict[str, list[tuple[str, tuple[int, ...]]]] = {}
    for v in (str(x) for x in net.graph.nodes):
        size = net.graph.nodes[v]["size"]
        if v not in patterns:
            parts[v] = [(v, tuple(range(size)))]
            continue
        p = patterns[v]
        share = unit_shares(net, v, weights, z[v])
        _, first, inverse = np.unique(p.T, axis=0, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
        dead[v], parts[v] = (), []
        for k in np.argsort(first, kind="stable"):
            units = tuple(int(u) for u in np.nonzero(inverse == k)[0])
            on = tuple(int(n) for n in np.nonzero(p[:, units[0]])[0])
            if not on:
                dead[v] = units
                continue
            node = f"{v}.{len(parts[v])}"
            parts[v].append((node, units))
            groups.append(
                GatedGroup(
                    node=node,
                    relu=v,
                    units=units,
                    examples=on,
                    contexts=frozenset(int(context[n]) for n in on),
                    share=float(share[list(units)].sum()),
                )
            )
    return groups, dead, parts


def flips_between(net: RecordedNetwork, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Each record after the first, and the fraction of (example, unit) patterns of every
    ReLU node that differ from the record before."""
    found = net.trajectory.patterns
    changed = np.zeros(len(net.steps) - 1)
    entries = 0
    for v in net.relu:
        p = np.asarray(found[v][:, seed], bool)
        changed += (p[1:] != p[:-1]).reshape(len(p) - 1, -1).sum(axis=1)
        entries += p[0].size
    return np.asarray(net.steps[1:], dtype=np.int64), changed / max(entries, 1)
