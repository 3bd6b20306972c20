r"""The gated network of a ReLU network's activation patterns, read off a run.

A ReLU unit computes $\max(0, z) = 1[z > 0]\,z$: with the patterns $P_v = 1[z_v > 0]$ of
a step $K$ held fixed, the network is a gated deep linear network (Sec. 2 of Saxe,
Sodhani & Lewallen 2022) whose gates are those patterns. Units with identical pattern
columns (on for the same examples) become one gated node; examples with identical
pattern rows share their gates, so they form one context of the graph file (its
``examples:`` form groups them). Its output and its gradient (Eqs. 3-4) equal the ReLU
network's at $W(K)$ exactly, and so does every gradient step until some pattern flips
(the step function has zero derivative almost everywhere): *exact for the gated network,
not for the ReLU network* once a pattern flips. The diagnostics say how far that goes:
the fraction of (example, unit) patterns that flip between records, the step from which
they are frozen (or that they never freeze), the entries near the kink, each gating
class's share of the output (Jarvis et al. 2025's $\lVert W_{\mathrm{out}}[:,u]\rVert
\lVert h_u\rVert$), and what the graph leaves out.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import networkx as nx
import numpy as np

from .._edge import Edge
from ..outputs import atomic_file, printable, save_npz
from ..solution._series import edge_key
from ..solution._trajectory import Trajectory
from ._classes import GatedGroup, context_of, flips_between, unit_groups
from ._run import RecordedNetwork, recorded_network
from ._text import Example, graph_text

if TYPE_CHECKING:
    from ..task import Problem

__all__ = ["Extraction", "extract"]

SHOWN = 12
"""The gating classes a summary lists (by share); the rest are summed in one line."""

THRESHOLD = 1e-3
r"""An entry with $|z_u(n)| < 10^{-3}\max_m|z_u(m)|$ (its unit's largest at the step) is
near the kink: a unit that never grew is small everywhere, not near it."""


@dataclass(frozen=True)
class Extraction:
    """The gated network of a ReLU network at one recorded step, with its diagnostics.

    Parameters
    ----------
    source, step, t, seed
        The run, the step extracted, its time in units of $\\tau$ and the seed.
    loss
        The ReLU network's loss of Eq. (1) at that step (as recorded).
    text
        The graph file of the gated network (:meth:`save`, :meth:`problem`).
    weights
        Edge of the extracted graph -> its weights at the step, ``(|t|, |s|)``.
    groups
        The gated nodes, node by node.
    dead
        ReLU node -> the units off on every example (left out of the graph).
    contexts
        The labels of the contexts the gating classes are over.
    flip_steps, flip_fraction
        Each record after the first, and the fraction of (example, unit) patterns that
        differ from the record before.
    frozen_from
        The recorded step from which no pattern differs up to the last record; ``None``
        when the last records still differ (they never freeze within the run).
    threshold, near_threshold
        The relative threshold: an entry is near the kink when $|z| <$ ``threshold``
        $\\times\\max|z|$ of its unit; the fraction of (example, unit) entries near it.
    consistency
        The share of (unit, task context) pairs whose unit has one value on every example
        of the context (context-level gating is a coarse-graining); ``nan`` with one context.
    left_out
        What the extracted graph does not hold, one sentence each.
    """

    source: str
    step: int
    t: float
    seed: int
    loss: float
    text: str
    weights: Mapping[Edge, np.ndarray]
    groups: tuple[GatedGroup, ...]
    dead: Mapping[str, tuple[int, ...]]
    contexts: tuple[str, ...]
    flip_steps: np.ndarray
    flip_fraction: np.ndarray
    frozen_from: int | None
    threshold: float
    near_threshold: float
    consistency: float
    left_out: tuple[str, ...]

    def class_shares(self) -> dict[frozenset[int], float]:
        """The share of the output each gating class carries (summed over its groups).

        Returns
        -------
        dict
            Gating class (the contexts where on) -> its share, summing to 1 per ReLU node.
        """
        out: dict[frozenset[int], float] = {}
        for group in self.groups:
            out[group.contexts] = out.get(group.contexts, 0.0) + group.share
        return out

    def save(self, path: str | Path, *, force: bool = False) -> Path:
        """Write the graph file (whole or not at all; refused over a file without ``force``).

        Parameters
        ----------
        path
            The ``.yaml`` file.
        force
            Replace an existing file.

        Returns
        -------
        pathlib.Path
            ``path``.
        """
        path = Path(path)
        with atomic_file(path, force=force) as temporary:
            temporary.write_text(self.text, encoding="utf-8")
        return path

    def save_weights(self, path: str | Path, *, force: bool = False) -> Path:
        """Write the weights in the ``--weights`` format: ``W/<source>-><target>``, (out, in).

        Parameters
        ----------
        path
            The ``.npz`` file.
        force
            Replace an existing file.

        Returns
        -------
        pathlib.Path
            ``path``.
        """
        path = Path(path)
        arrays = {edge_key("W", e): np.asarray(w, float) for e, w in self.weights.items()}
        with atomic_file(path, force=force) as temporary:
            save_npz(temporary, arrays, output=path)
        return path

    def problem(self) -> Problem:
        """The extracted graph file, read by :func:`gdln.load`.

        Returns
        -------
        Problem
            The gated network with its task of pattern contexts.
        """
        from ..graphfile._reader import load

        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "gated.yaml"
            path.write_text(self.text, encoding="utf-8")
            problem = load(path)
        return problem

    def summary(self) -> str:
        """The extraction in a few lines: groups, classes, flips, the kink, what is left out.

        Returns
        -------
        str
            Lines of text, names escaped.
        """
        nodes = sorted({g.relu for g in self.groups} | set(self.dead))
        lines = [
            f"{printable(self.source)}: step {self.step} (t = {self.t:.6g} tau), seed "
            f"{self.seed}, loss {self.loss:.6g}: {len(self.groups)} gated node(s) of "
            f"{len(nodes)} ReLU node(s)"
        ]
        for v in nodes:
            mine = [g for g in self.groups if g.relu == v]
            lines.append(
                f"  {printable(v)}: {len(mine)} group(s), {len(self.dead.get(v, ()))} dead unit(s)"
            )
            classes: dict[frozenset[int], list[GatedGroup]] = {}
            for g in mine:
                classes.setdefault(g.contexts, []).append(g)
            ranked = sorted(classes.items(), key=lambda item: -sum(g.share for g in item[1]))
            for cls, members in ranked[:SHOWN]:
                on = ", ".join(printable(self.contexts[c]) for c in sorted(cls))
                units = sum(len(g.units) for g in members)
                share = sum(g.share for g in members)
                names = ", ".join(printable(g.node) for g in members[:3])
                more = ", ..." if len(members) > 3 else ""
                lines.append(
                    f"    on in {len(cls)} of {len(self.contexts)} ({on}): {len(members)} "
                    f"group(s) ({names}{more}), {units} unit(s), {100 * share:.1f}% of the output"
                )
            if len(ranked) > SHOWN:
                rest = sum(g.share for _, members in ranked[SHOWN:] for g in members)
                lines.append(
                    f"    {len(ranked) - SHOWN} more class(es): {100 * rest:.1f}% of the output"
                )
        frozen = (
            "never frozen within the run (the last records differ)"
            if self.frozen_from is None
            else f"frozen from step {self.frozen_from} on (as recorded)"
        )
        most = float(self.flip_fraction.max()) if self.flip_fraction.size else 0.0
        lines.append(f"  flips between records: at most {most:.3g} of the patterns; {frozen}")
        lines.append(
            f"  near the kink (|z| < {self.threshold:g} max|z| of the unit): "
            f"{self.near_threshold:.3g} of the (example, unit) entries"
        )
        if np.isfinite(self.consistency):
            lines.append(
                f"  context-level gating: {100 * self.consistency:.1f}% of (unit, context) "
                "gates hold on every item of the context"
            )
        lines += [f"  left out: {printable(item)}" for item in self.left_out]
        return "\n".join(lines)


def extract(
    run: Trajectory | str | Path,
    *,
    step: int | None = None,
    seed: int | None = None,
    threshold: float = THRESHOLD,
) -> Extraction:
    r"""The gated network of a ReLU network's patterns at a recorded step.

    Hidden units with identical pattern columns $P_v[:, u] = 1[z_u > 0]$ become one gated
    node; each example switches on the nodes of its pattern row, and examples with one row
    form one context. With the weights at that step the graph's output and gradient
    (Eqs. 3-4 of Saxe et al. 2022) are the ReLU network's exactly; its dynamics stay so
    until a pattern flips.

    Parameters
    ----------
    run
        A :func:`gdln.simulate` trajectory recorded with ``record_patterns``, or its file.
    step
        The recorded step (default: the last).
    seed
        The seed whose network is read (default: the run's first).
    threshold
        An entry with $|z| <$ ``threshold`` $\times\max|z|$ of its unit counts as near the kink.

    Returns
    -------
    Extraction
        The graph file, the weights and the diagnostics.

    Raises
    ------
    GraphSpecError
        The run holds no patterns, the step was not recorded, the seed did not run.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Sec. 2 (ReLU as a gated linear unit) and Eqs. (3)-(4);
    Jarvis, Klein, Rosman & Saxe (2025), the output share of a unit.
    """
    net = recorded_network(run)
    row, which = net.row(step), net.seed_index(seed)
    weights = net.weights(row, which)
    patterns = net.patterns(row, which)
    labels, context = context_of(net.examples)
    z = net.forward(weights)
    groups, dead, parts = unit_groups(net, patterns, weights, z, context)
    flip_steps, flip_fraction = flips_between(net, which)
    changed = np.nonzero(flip_fraction > 0)[0]
    last = len(net.steps) - 1
    if not len(changed):
        frozen: int | None = net.steps[0]
    elif changed[-1] + 1 == last:
        frozen = None
    else:
        frozen = net.steps[changed[-1] + 1]
    entries = near = 0
    for v in net.relu:  # relative to each unit's largest |z|: a silent unit is not "near"
        size = np.abs(z[v])
        near += int((size < threshold * size.max(axis=0, keepdims=True)).sum())
        entries += z[v].size
    new_edges, new_weights = _edges(net, parts, weights)
    text = _text(net, groups, parts, new_edges, row, which)
    left = _left_out(net, dead, row, flip_fraction, frozen, near, threshold, which)
    consistency = float("nan")
    if len(set(net.examples.context.tolist())) > 1:
        held = [
            (p[m].all(axis=0) | (~p[m]).all(axis=0))
            for p in patterns.values()
            for m in (net.examples.context == c for c in set(net.examples.context.tolist()))
        ]
        consistency = float(np.mean(np.concatenate(held)))
    return Extraction(
        source=net.source,
        step=net.steps[row],
        t=float(net.t[row]),
        seed=net.seeds[which],
        loss=float(net.trajectory.loss[row, which]),
        text=text,
        weights=new_weights,
        groups=tuple(groups),
        dead=dead,
        contexts=labels,
        flip_steps=flip_steps,
        flip_fraction=flip_fraction,
        frozen_from=frozen,
        threshold=float(threshold),
        near_threshold=near / max(entries, 1),
        consistency=consistency,
        left_out=left,
    )


def _edges(
    net: RecordedNetwork,
    parts: Mapping[str, list[tuple[str, tuple[int, ...]]]],
    weights: Mapping[Edge, np.ndarray],
) -> tuple[list[Edge], dict[Edge, np.ndarray]]:
    """Every pair of (group of) source and target of each edge, with its block of $W_e$."""
    edges: list[Edge] = []
    out: dict[Edge, np.ndarray] = {}
    for u, v in net.edges:
        for a, rows_a in parts[str(u)]:
            for b, rows_b in parts[str(v)]:
                edges.append((a, b))
                out[(a, b)] = weights[(u, v)][np.ix_(rows_b, rows_a)].copy()
    return edges, out


def _text(net, groups, parts, edges, row: int, seed: int) -> str:  # type: ignore[no-untyped-def]
    """The graph file of the gated network."""
    nodes = []
    for v in (str(x) for x in nx.topological_sort(net.graph)):
        for node, units in parts[v]:
            nodes.append((node, len(units), v in net.relu))
    on: list[list[str]] = [[] for _ in range(len(net.examples))]
    for g in groups:
        for n in g.examples:
            on[n].append(g.node)
    w = np.asarray(net.examples.weights, float)
    equal = bool(np.all(w == w[0]))
    examples = [
        Example(
            inputs={v: net.examples.inputs[v][n] for v in net.examples.inputs},
            targets={v: net.examples.targets[v][n] for v in net.examples.targets},
            active=on[n],
            weight=None if equal else float(w[n]),
        )
        for n in range(len(w))
    ]
    meta = net.trajectory.meta
    lr = float(meta.get("lr", 0.05))
    remaining = float(net.t[-1] - net.t[row])
    solve = {"lr": lr, "t_max": remaining if remaining > 0 else lr}
    if float(meta.get("weight_decay", 0.0)):
        solve["weight_decay"] = float(meta["weight_decay"])
    name = f"{meta.get('graph') or 'relu'}-gated-step{net.steps[row]}"
    return graph_text(
        name=name,
        description=(
            f"The gated network of the ReLU network's patterns at step {net.steps[row]} "
            f"(t = {net.t[row]:.6g} tau, seed {net.seeds[seed]}): exact while no pattern flips"
        ),
        comments=(
            "Written by gdln extract (issue 37): units on for the same examples are one",
            "gated node; examples sharing their gates form one context. Start it from the",
            "weights gdln extract --weights-out writes (gdln solve FILE --weights W.npz).",
        ),
        nodes=nodes,
        edges=edges,
        examples=examples,
        solve=solve,
    )


def _left_out(net, dead, row, flips, frozen, near, threshold, seed) -> tuple[str, ...]:  # type: ignore[no-untyped-def]
    """What the extracted graph does not hold, one sentence each."""
    out = []
    for v, units in dead.items():
        if units:
            out.append(
                f"{len(units)} unit(s) of {v} are off on every example: left out (they carry "
                "nothing and get no gradient while no pattern flips)"
            )
    after = [s for s, f in zip(net.steps[1:], flips, strict=True) if f > 0 and s > net.steps[row]]
    if after:
        out.append(
            f"patterns flip after step {net.steps[row]} (records of steps "
            f"{', '.join(map(str, after[:3]))}{', ...' if len(after) > 3 else ''}): exact for "
            "the gated network, not for the ReLU network past the first flip"
        )
    if frozen is None:
        out.append("the patterns never freeze within the run (the last records still differ)")
    if near:
        out.append(
            f"{near} (example, unit) entries lie within |z| < {threshold:g} max|z| (of their "
            "unit) of the kink, where a step may flip them"
        )
    if len(net.seeds) > 1:
        out.append(f"seeds other than {net.seeds[seed]} (one network per extraction)")
    meta = net.trajectory.meta
    if meta.get("optimizer") != "gd" or float(meta.get("momentum", 0.0)):
        out.append(
            "the run's optimiser (sgd or momentum): the graph's own dynamics are full-batch "
            "gradient descent or flow"
        )
    return tuple(out)
