r"""A ReLU network's run, read back: its graph, examples, weights and patterns per record.

A run of :func:`gdln.simulate` with ``record_patterns`` holds what the gated network of
its patterns needs (Sec. 2 of Saxe, Sodhani & Lewallen 2022: a ReLU unit computes
$\max(0, z) = 1[z > 0]\,z$, a gate times a linear map): the edges (``meta["edges"]``),
each weight $W_e$ ``(|t|, |s|)`` at every recorded step, each ReLU node's pattern
$P_v = 1[z_v > 0]$ ``(n, |v|)`` and the training examples. :func:`recorded_network`
checks that a file holds all of it, one line naming the file and what is missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from .._edge import EDGE_SEPARATOR, Edge
from .._errors import GraphSpecError, shorten
from ..solution._trajectory import Trajectory
from ..task._examples import EXAMPLES_KEY, ExampleSet

__all__ = ["RecordedNetwork", "recorded_network"]


@dataclass(frozen=True)
class RecordedNetwork:
    """What a run with ``record_patterns`` recorded, checked to fit together.

    ``graph`` has node attributes ``size`` and (ReLU nodes) ``activation``; ``edges`` are
    in the run's weight order; ``steps`` and ``t`` are the recorded steps and times.
    """

    source: str
    graph: nx.DiGraph
    edges: tuple[Edge, ...]
    relu: tuple[str, ...]
    examples: ExampleSet
    steps: tuple[int, ...]
    t: np.ndarray
    seeds: tuple[int, ...]
    trajectory: Trajectory

    @property
    def inputs(self) -> list[str]:
        """The input nodes, in topological order."""
        return [v for v in nx.topological_sort(self.graph) if not self.graph.in_degree(v)]

    @property
    def outputs(self) -> list[str]:
        """The output nodes, in topological order."""
        return [v for v in nx.topological_sort(self.graph) if not self.graph.out_degree(v)]

    def row(self, step: int | None) -> int:
        """The record of ``step`` (``None``: the last), refusing a step not recorded."""
        if step is None:
            return len(self.steps) - 1
        if step not in self.steps:
            below = [s for s in self.steps if s < step][-1:]
            above = [s for s in self.steps if s > step][:1]
            raise GraphSpecError(
                f"step {step} was not recorded; the nearest recorded steps are "
                f"{' and '.join(map(str, below + above))} (record it with record_steps)",
                source=self.source,
                key="step",
            )
        return self.steps.index(step)

    def seed_index(self, seed: int | None) -> int:
        """The index of ``seed`` among the run's seeds (``None``: the first)."""
        if seed is None:
            return 0
        if seed not in self.seeds:
            raise GraphSpecError(
                f"seed {seed} did not run; the run's seeds are {list(self.seeds)[:10]}",
                source=self.source,
                key="seed",
            )
        return self.seeds.index(seed)

    def weights(self, row: int, seed: int) -> dict[Edge, np.ndarray]:
        """Edge -> $W_e$ ``(|t|, |s|)`` at record ``row`` of seed index ``seed``."""
        return {e: np.array(self.trajectory.weights(e)[row, seed], float) for e in self.edges}

    def patterns(self, row: int, seed: int) -> dict[str, np.ndarray]:
        """ReLU node -> its pattern $1[z_v > 0]$ ``(n, |v|)`` at record ``row``."""
        found = self.trajectory.patterns
        return {v: np.asarray(found[v][row, seed], bool) for v in self.relu}

    def forward(self, weights: Mapping[Edge, np.ndarray]) -> dict[str, np.ndarray]:
        r"""$z_v$ of every non-input node (the gated sum before the ReLU), and $h_v$ of the
        inputs, on every example: ``(n, |v|)``; $h_v = \max(0, z_v)$ at ReLU nodes."""
        n = len(self.examples)
        h: dict[str, np.ndarray] = {}
        z: dict[str, np.ndarray] = {}
        for v in nx.topological_sort(self.graph):
            size = self.graph.nodes[v]["size"]
            if not self.graph.in_degree(v):
                given = self.examples.inputs.get(v)
                h[v] = np.zeros((n, size)) if given is None else np.asarray(given, float)
                z[v] = h[v]
                continue
            total = np.zeros((n, size))
            for u in self.graph.predecessors(v):
                total = total + h[u] @ weights[(u, v)].T
            z[v] = total
            h[v] = np.maximum(total, 0.0) if v in self.relu else total
        return z

    def loss(self, weights: Mapping[Edge, np.ndarray]) -> float:
        """Eq. (1) of Saxe et al. (2022) at ``weights``: the weighted mean of half the
        squared error over the outputs."""
        z = self.forward(weights)
        per = np.zeros(len(self.examples))
        for v in self.outputs:
            y = self.examples.targets.get(v)
            target = np.zeros_like(z[v]) if y is None else np.asarray(y, float)
            per += 0.5 * ((z[v] - target) ** 2).sum(axis=1)
        return float(per @ np.asarray(self.examples.weights, float))


def recorded_network(run: Trajectory | str | Path) -> RecordedNetwork:
    """Read a run recorded with ``record_patterns`` (a :class:`~gdln.Trajectory` or its file).

    Parameters
    ----------
    run
        The trajectory of :func:`gdln.simulate` with ``record_patterns``, or its file.

    Returns
    -------
    RecordedNetwork
        Its graph, examples, recorded steps, seeds and series.

    Raises
    ------
    GraphSpecError
        The file is not such a run: no patterns, weights or examples, fixed edges,
        gates of its own, or series that do not fit the graph; the message names the file.
    """
    source = str(run) if not isinstance(run, Trajectory) else "<trajectory>"
    trajectory = run if isinstance(run, Trajectory) else Trajectory.load(run)
    meta = trajectory.meta

    def fail(message: str, key: str | None = None) -> GraphSpecError:
        return GraphSpecError(message, source=source, key=key)

    relu, names = meta.get("relu"), meta.get("edges")
    if not meta.get("record_patterns") or not isinstance(relu, list) or not relu:
        raise fail(
            "no activation patterns: not a run of a ReLU network recorded with "
            "--record-patterns (gdln simulate FILE --record-patterns)",
            "meta",
        )
    if not isinstance(names, list) or not all(
        isinstance(e, str) and EDGE_SEPARATOR in e for e in names
    ):
        raise fail(f"expected a list of edges 'u->v', got {shorten(names)}", "meta.edges")
    if meta.get("fixed_edges"):
        raise fail("fixed edges are not read by extract (every edge must be trained)", "meta")
    try:
        examples = ExampleSet.from_json(meta.get(EXAMPLES_KEY))
    except ValueError as err:
        raise fail(f"the training examples: {err}", f"meta.{EXAMPLES_KEY}") from None
    if examples.gates or meta.get("random_gates"):
        raise fail(
            "the network has gates of its own; extract reads ReLU networks whose only gates "
            "are their patterns",
            f"meta.{EXAMPLES_KEY}",
        )
    edges = tuple(tuple(e.split(EDGE_SEPARATOR, 1)) for e in names)
    graph = nx.DiGraph()
    for u, v in edges:
        try:
            shape = trajectory.weights((u, v)).shape
        except KeyError:
            raise fail(f"no weights of edge {u}->{v}", "series") from None
        if len(shape) != 4:
            raise fail(f"weights of {u}->{v} of shape {shape}; expected (T, S, |t|, |s|)", "series")
        for node, size in ((v, shape[2]), (u, shape[3])):
            if graph.nodes.get(node, {}).get("size", size) != size:
                raise fail(f"node {node!r} has two sizes in the weights", "series")
            graph.add_node(node, size=int(size))
        graph.add_edge(u, v)
    if not nx.is_directed_acyclic_graph(graph):
        raise fail("the edges have a cycle", "meta.edges")
    _check_patterns(trajectory, graph, [str(v) for v in relu], len(examples), fail)
    for v in relu:
        graph.nodes[v]["activation"] = "relu"
    steps = meta.get("step_at")
    if not isinstance(steps, list) or len(steps) != len(trajectory.t):
        raise fail("expected one recorded step per time", "meta.step_at")
    seeds = meta.get("seeds")
    if not isinstance(seeds, list) or len(seeds) != trajectory.loss.shape[1]:
        raise fail("expected one seed per column of the loss", "meta.seeds")
    return RecordedNetwork(
        source=source,
        graph=graph,
        edges=edges,  # type: ignore[arg-type]
        relu=tuple(str(v) for v in relu),
        examples=examples,
        steps=tuple(int(s) for s in steps),
        t=np.asarray(trajectory.t, float),
        seeds=tuple(int(s) for s in seeds),
        trajectory=trajectory,
    )


def _check_patterns(
    trajectory: Trajectory, graph: nx.DiGraph, relu: list[str], n: int, fail: Any
) -> None:
    """Each ReLU node a hidden node of ``graph`` with patterns ``(T, S, n, |v|)``."""
    found: Mapping[str, np.ndarray] = trajectory.patterns
    for v in relu:
        if v not in graph or not graph.in_degree(v) or not graph.out_degree(v):
            raise fail(f"ReLU node {v!r} is not a hidden node of the run's edges", "meta.relu")
        if v not in found:
            raise fail(f"no patterns of ReLU node {v!r}", "series")
        shape = found[v].shape
        want = (len(trajectory.t), trajectory.loss.shape[1], n, graph.nodes[v]["size"])
        if shape != want:
            raise fail(f"patterns of {v!r} of shape {shape}; expected {want}", "series")
