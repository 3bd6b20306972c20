r"""Which gating wins: a GDLN with one pathway per candidate gating, solved and ranked.

Jarvis, Klein, Rosman & Saxe (2025) predict a ReLU network's learning from a "rectified
linear network": a GDLN with one two-layer pathway per non-empty subset of the task's $C$
contexts (Sec. 2 of Saxe, Sodhani & Lewallen 2022: pathway $S$ is gated on exactly in the
contexts of $S$), written by hand. Here it is built from any task with contexts: every
input node feeds every pathway node, every pathway node every output, and the pathways
race for the same targets under the joint gradient flow of Eqs. (3)-(4). Their statistics
rarely share bases, so the full-matrix flow solves it (the matrix route of :func:`gdln.solve`), from
random weights whose singular values all equal ``b0``. A pathway's strength is the top
singular value of its map $W_{\mathrm{out}}W_{\mathrm{in}}$; the ranking by final
strength and by escape time (the time the strength first reaches half its final value)
predicts the selectivity of the units a ReLU network learns: on in which contexts.
"""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import networkx as nx
import numpy as np

from .._errors import GdlnError
from ..outputs import printable
from ..solution._trajectory import Trajectory
from ._classes import context_of
from ._text import Example, graph_text

if TYPE_CHECKING:
    from ..task import Problem

__all__ = ["MAX_CANDIDATES", "GatingPrediction", "candidate_subsets", "predict_gating"]

MAX_CANDIDATES = 63
"""The most candidate gatings built by default (all $2^C - 1$ subsets up to $C = 6$)."""
ESCAPED = 0.1
"""A pathway whose final strength is below this fraction of the strongest has no escape time."""


@dataclass(frozen=True)
class GatingPrediction:
    """The candidate gatings of a task, solved and ranked.

    Parameters
    ----------
    contexts
        The labels of the contexts (the task's, or its examples when it has one).
    subsets
        Each pathway's gating: the contexts (indices into ``contexts``) it is on in.
    t
        ``(T,)`` times in units of $\\tau$.
    strengths
        ``(T, P)``: each pathway's strength, the top singular value of its map.
    escape
        ``(P,)``: the time each pathway's strength first reaches half its final value;
        ``nan`` for a pathway that ends below 10% of the strongest.
    winners
        The pathways whose final strength is at least ``winner_fraction`` of the strongest.
    note
        Why some candidates were left out (the cap), else empty.
    text
        The graph file of the candidate network (pathway ``k`` is node ``p<k>``).
    trajectory
        Its full-matrix flow (the matrix route of :func:`gdln.solve`): the loss and every weight.
    """

    contexts: tuple[str, ...]
    subsets: tuple[frozenset[int], ...]
    t: np.ndarray
    strengths: np.ndarray
    escape: np.ndarray
    winners: tuple[int, ...]
    note: str
    text: str
    trajectory: Trajectory

    @property
    def final(self) -> np.ndarray:
        """Each pathway's strength at the last time, ``(P,)``.

        Returns
        -------
        numpy.ndarray
            The last row of :attr:`strengths`.
        """
        return np.asarray(self.strengths[-1])

    def ranking(self, by: str = "strength") -> list[int]:
        """The pathways, strongest first (``"strength"``) or earliest first (``"escape"``).

        Parameters
        ----------
        by
            ``"strength"`` (final strength, descending) or ``"escape"`` (escape time,
            ascending; pathways that do not escape last).

        Returns
        -------
        list of int
            Pathway indices.
        """
        order = range(len(self.subsets))
        if by == "strength":
            return sorted(order, key=lambda k: -float(self.final[k]))
        if by == "escape":
            return sorted(order, key=lambda k: (np.isnan(self.escape[k]), self.escape[k]))
        raise ValueError(f"by: expected 'strength' or 'escape', got {by!r}")

    def label(self, k: int) -> str:
        """Pathway ``k``'s gating in words, e.g. ``"{context0, context2}"``.

        Parameters
        ----------
        k
            A pathway index.

        Returns
        -------
        str
            Its contexts' labels in braces.
        """
        return "{" + ", ".join(self.contexts[c] for c in sorted(self.subsets[k])) + "}"

    def selectivity(self) -> str:
        """The predicted selectivity of the winners, e.g. ``"on in 2 of 3 contexts"``.

        Returns
        -------
        str
            The sizes of the winning gatings other than the one on in every context, the
            most frequent first (the shared pathway named apart).
        """
        c = len(self.contexts)
        sizes = [len(self.subsets[k]) for k in self.winners]
        specific = [s for s in sizes if s < c]
        parts = []
        for size in sorted(set(specific), key=lambda s: (-specific.count(s), -s)):
            parts.append(f"on in {size} of {c} contexts ({specific.count(size)} pathways)")
        if c in sizes:
            parts.append(f"besides the shared pathway on in all {c}")
        return "; ".join(parts) if parts else "no pathway learns"

    def summary(self) -> str:
        """The ranking in a few lines: strength, escape time, the winners' selectivity.

        Returns
        -------
        str
            Lines of text, names escaped.
        """
        lines = [
            f"{len(self.subsets)} candidate gatings of {len(self.contexts)} contexts, solved "
            f"to t = {self.t[-1]:.6g} tau; predicted: {self.selectivity()}"
        ]
        if self.note:
            lines.append(f"  {self.note}")
        winners = set(self.winners)
        for k in self.ranking():
            escape = "does not escape" if np.isnan(self.escape[k]) else f"{self.escape[k]:.4g}"
            mark = " *" if k in winners else ""
            lines.append(
                f"  {printable(self.label(k))}: strength {self.final[k]:.4g}, escape {escape}{mark}"
            )
        return "\n".join(lines)


def candidate_subsets(
    contexts: int, *, cap: int = MAX_CANDIDATES
) -> tuple[list[frozenset[int]], str]:
    """All non-empty subsets of ``contexts`` contexts, the most and least selective first.

    Ordered by size C, C-1, 1, C-2, 2, ... (each size in lexicographic order); beyond
    ``cap`` the rest are left out, and the note says so.

    Parameters
    ----------
    contexts
        The number of contexts $C$.
    cap
        The most subsets kept.

    Returns
    -------
    tuple
        The subsets, and a note (empty when none were left out).

    Examples
    --------
    >>> [sorted(s) for s in candidate_subsets(3)[0]]
    [[0, 1, 2], [0, 1], [0, 2], [1, 2], [0], [1], [2]]
    """
    order = [contexts]
    for d in range(1, contexts):
        for size in (contexts - d, d):
            if size not in order:
                order.append(size)
    found = [frozenset(s) for size in order for s in itertools.combinations(range(contexts), size)]
    total = 2**contexts - 1
    if total <= cap:
        return found, ""
    note = (
        f"{contexts} contexts have {total} candidate gatings: kept the {cap} most and least "
        "selective (by size C, C-1, 1, C-2, 2, ...); give subsets= for others"
    )
    return found[:cap], note


def predict_gating(
    problem: Problem,
    *,
    subsets: Iterable[Iterable[int | str]] | None = None,
    cap: int = MAX_CANDIDATES,
    hidden: int | None = None,
    b0: float = 1e-3,
    t_max: float | None = None,
    points: int | None = None,
    seed: int = 0,
    winner_fraction: float = 0.5,
) -> GatingPrediction:
    r"""Solve the GDLN with one pathway per candidate gating of a task, and rank them.

    Parameters
    ----------
    problem
        Any problem with a task: its input and output nodes and its examples are used, its
        contexts are the candidates' contexts (its examples, when it has one context).
    subsets
        The candidate gatings, each a collection of context indices or labels; default
        all $2^C - 1$ non-empty subsets, at most ``cap`` (:func:`candidate_subsets`).
    cap
        The most candidates built by default.
    hidden
        The width of each pathway (default: the smaller of the summed input and output
        widths, so that a pathway can carry any linear map).
    b0
        Every weight matrix starts with all singular values ``b0`` (random singular vectors
        from ``seed``): the same small start for every pathway.
    t_max, points
        The horizon in units of $\tau$ and the recorded times (default: the problem's).
    seed
        The seed of the initial singular vectors.
    winner_fraction
        A pathway wins when its final strength is at least this fraction of the strongest.

    Returns
    -------
    GatingPrediction
        The strengths over time, escape times, winners and the candidate network's file.

    Raises
    ------
    GdlnError
        The task has fewer than two contexts (or examples), or a subset names an unknown
        context or none.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Sec. 2 and Eqs. (3)-(4); Jarvis, Klein, Rosman & Saxe
    (2025), the rectified linear network of one pathway per subset of contexts.
    """
    from ..solution._dynamics import solve

    examples = problem.examples()
    labels, context = context_of(examples)
    if len(labels) < 2:
        raise GdlnError(f"{problem.source}: one context and one example: nothing to gate")
    if subsets is None:
        chosen, note = candidate_subsets(len(labels), cap=cap)
    else:
        chosen, note = [_subset(s, labels, problem.source) for s in subsets], ""
    graph = problem.graph
    inputs = [v for v in nx.topological_sort(graph) if not graph.in_degree(v)]
    outputs = [v for v in nx.topological_sort(graph) if not graph.out_degree(v)]
    size = {v: int(graph.nodes[v]["size"]) for v in graph}
    width = hidden or min(sum(size[v] for v in inputs), sum(size[v] for v in outputs))
    text = _candidate_text(problem, examples, context, chosen, inputs, outputs, size, width)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "candidates.yaml"
        path.write_text(text, encoding="utf-8")
        from ..graphfile._reader import load

        candidates = load(path)
    trajectory = solve(candidates, route="matrix", t_max=t_max, points=points, b0=b0, seed=seed)
    strengths = np.stack(
        [_strength(trajectory, f"p{k}", inputs, outputs) for k in range(len(chosen))], axis=1
    )
    final = strengths[-1]
    top = float(final.max())
    escape = np.full(len(chosen), np.nan)
    for k in range(len(chosen)):
        if top > 0 and final[k] >= ESCAPED * top:
            escape[k] = float(trajectory.t[np.argmax(strengths[:, k] >= 0.5 * final[k])])
    winners = (
        tuple(int(k) for k in np.nonzero(final >= winner_fraction * top)[0]) if top > 0 else ()
    )
    return GatingPrediction(
        contexts=labels,
        subsets=tuple(chosen),
        t=np.asarray(trajectory.t, float),
        strengths=strengths,
        escape=escape,
        winners=winners,
        note=note,
        text=text,
        trajectory=trajectory,
    )


def _subset(given: Iterable[int | str], labels: Sequence[str], source: str) -> frozenset[int]:
    """A candidate of context indices or labels, checked."""
    found = set()
    for item in given:
        if isinstance(item, str) and item in labels:
            found.add(labels.index(item))
        elif (
            isinstance(item, (int, np.integer))
            and not isinstance(item, bool)
            and 0 <= item < len(labels)
        ):
            found.add(int(item))
        else:
            raise GdlnError(
                f"{source}: subsets: {item!r} is no context; expected an index below "
                f"{len(labels)} or one of {', '.join(labels[:6])}"
            )
    if not found:
        raise GdlnError(f"{source}: subsets: an empty gating is on nowhere")
    return frozenset(found)


def _candidate_text(problem, examples, context, chosen, inputs, outputs, size, width) -> str:  # type: ignore[no-untyped-def]
    """The graph file of the candidate network, pathway ``p<k>`` on in ``chosen[k]``."""
    names = [f"p{k}" for k in range(len(chosen))]
    nodes = [(v, size[v], False) for v in inputs]
    nodes += [(p, width, True) for p in names]
    nodes += [(v, size[v], False) for v in outputs]
    edges = [(v, p) for p in names for v in inputs] + [(p, v) for p in names for v in outputs]
    w = np.asarray(examples.weights, float)
    equal = bool(np.all(w == w[0]))
    rows = [
        Example(
            inputs={v: examples.inputs[v][n] for v in inputs if v in examples.inputs},
            targets={v: examples.targets[v][n] for v in outputs if v in examples.targets},
            active=[p for p, s in zip(names, chosen, strict=True) if int(context[n]) in s],
            weight=None if equal else float(w[n]),
        )
        for n in range(len(w))
    ]
    return graph_text(
        name=f"{problem.name}-candidate-gatings",
        description="One two-layer pathway per candidate gating (Jarvis et al. 2025)",
        comments=("Written by gdln.predict_gating (issue 37).",),
        nodes=nodes,
        edges=edges,
        examples=rows,
    )


def _strength(trajectory: Any, pathway: str, inputs: list[str], outputs: list[str]) -> np.ndarray:
    """The top singular value of the pathway's map $W_{\\mathrm{out}}W_{\\mathrm{in}}$ over time."""
    w_in = np.concatenate([trajectory.weights((v, pathway)) for v in inputs], axis=2)
    w_out = np.concatenate([trajectory.weights((pathway, v)) for v in outputs], axis=1)
    return np.linalg.svd(w_out @ w_in, compute_uv=False)[:, 0]
