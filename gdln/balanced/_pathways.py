r"""Which graphs the λ-balanced solution covers: independent, whitened two-layer pathways.

A pathway $p = (x \xrightarrow{W_1} h \xrightarrow{W_2} y)$ evolves on its own under
Eqs. (3)-(4) of Saxe, Sodhani & Lewallen (2022) when no other active path shares one of
its edges (else Eq. 3 sums over both) and none is on together with it into $y$ with a
nonzero input correlation (else Eq. 4 couples them): then
$\tau\dot W_1 = W_2^\top(\Sigma^{yx}(p) - W_2W_1\Sigma^x(p,p))$ and
$\tau\dot W_2 = (\Sigma^{yx}(p) - W_2W_1\Sigma^x(p,p))W_1^\top$, a two-layer linear network
with the pathway's gated statistics (Eqs. 5-6). The closed form needs these whitened on
the inputs' span: $\Sigma^x(p,p) = c\,\Pi$ with $\Pi = V_rV_r^\top$ an orthogonal projector
($\Pi = I$ for full-rank inputs; XoR's pathways have rank one, Eq. 19). On the span,
$W_1V_r$ and $W_2$ then follow the whitened flow in the time $ct$ with target
$\tilde\Sigma = \Sigma^{yx}(p)V_r/c$; the part $W_1(I-\Pi)$ never changes.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._edge import Edge, edge_name
from .._errors import GdlnError
from ..paths._paths import Path
from ..paths._statistics import ActivePaths, active_paths, path_statistics
from ..task._problem import Problem
from ..task._task import as_float
from ._errors import BalancedSpecError

__all__ = ["Pathway", "balanced_pathways"]

WHITENED_RTOL = 1e-9
"""How far the nonzero eigenvalues of $\\Sigma^x(p,p)$ may differ, relative to the largest."""
NULL_RTOL = 1e-12
"""Eigenvalues of $\\Sigma^x(p,p)$ below this fraction of the largest count as zero."""


@dataclass(frozen=True, eq=False)
class Pathway:
    r"""One two-layer pathway $x \to h \to y$ and its whitened statistics.

    Parameters
    ----------
    path
        The path $x \to h \to y$.
    scale
        $c$ in $\Sigma^x(p,p) = c\,\Pi$ (Eq. 6): the pathway's clock runs at $ct$.
    basis
        $V_r$, ``(|x|, r)``: orthonormal columns spanning the inputs the pathway sees,
        $\Pi = V_rV_r^\top$.
    target
        $\tilde\Sigma = \Sigma^{yx}(p)V_r/c$, ``(|y|, r)``: the whitened target (Eq. 5).
    sizes
        ``(|x|, |h|, |y|)``.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eqs. (3)-(6); Braun, Dominé, Fitzgerald & Saxe (2022),
    "Exact learning dynamics of deep linear networks with prior knowledge" (whitened inputs).
    """

    path: Path
    scale: float
    basis: np.ndarray
    target: np.ndarray
    sizes: tuple[int, int, int]

    def __repr__(self) -> str:
        return f"Pathway({self.name!r}, scale={self.scale:.6g}, sizes={self.sizes})"

    @property
    def name(self) -> str:
        """The pathway as ``"x->h->y"``."""
        return str(self.path)

    @property
    def first(self) -> Edge:
        """The edge $x \\to h$ of $W_1$."""
        return self.path.edges[0]

    @property
    def second(self) -> Edge:
        """The edge $h \\to y$ of $W_2$."""
        return self.path.edges[1]

    @property
    def hidden(self) -> Hashable:
        """The hidden node $h$."""
        return self.path.nodes[1]

    @property
    def rank(self) -> int:
        """$r$, the dimension of the inputs' span."""
        return int(self.basis.shape[1])


@dataclass(frozen=True, eq=False)
class LossTerm:
    """What one pathway adds to one context's loss: $-g\\,\\mathrm{tr}(WA^\\top) +
    \\tfrac12 g^2\\,\\mathrm{tr}(WBW^\\top)$ with $A = \\langle yx^\\top\\rangle_c$ (or 0)
    and $B = \\langle xx^\\top\\rangle_c$."""

    pathway: int
    context: int
    gate: float
    yx: np.ndarray | None
    xx: np.ndarray


@dataclass(frozen=True, eq=False)
class BalancedProblem:
    """The pathways of a problem, with what the loss of Eq. (1) needs per context."""

    problem: Problem
    pathways: tuple[Pathway, ...]
    probabilities: np.ndarray
    constants: np.ndarray
    terms: tuple[LossTerm, ...]
    labels: tuple[str, ...]


def balanced_pathways(problem: Problem) -> tuple[Pathway, ...]:
    r"""The independent, whitened two-layer pathways of a problem, or why there are none.

    Parameters
    ----------
    problem
        A loaded graph file with a task.

    Returns
    -------
    tuple of Pathway
        One per active path, in the order :func:`gdln.enumerate_paths` finds them.

    Raises
    ------
    BalancedSpecError
        The task has random gates; an active path is not two edges long or runs through
        a fixed edge; two active paths share an edge or are on together into one output
        with a nonzero input correlation; or a pathway's $\Sigma^x(p,p)$ is not $c\,\Pi$.
        The message names the pathway or edge and the reason.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eqs. (3)-(6); Dominé et al. (2025), "From lazy to
    rich" (the two-layer network with whitened inputs that the solution covers).
    """
    return prepare(problem).pathways


def prepare(problem: Problem) -> BalancedProblem:
    """:func:`balanced_pathways` with the per-context loss terms, checked once."""
    task = problem.require_task()
    source = problem.source
    if task.random_gates:
        raise BalancedSpecError(
            f"{source}: random gates {sorted(map(str, task.random_gates))[:3]}: the "
            "λ-balanced solution covers deterministic gates only"
        )
    graph = problem.graph
    active = active_paths(graph, task)
    if not active.paths:
        raise BalancedSpecError(f"{source}: no context switches on a path from input to output")
    for p in active.paths:
        _check_shape(problem, p)
    _check_independent(problem, active)
    try:
        stats = path_statistics(graph, task, active)
        pathways = tuple(
            _whitened(problem, p, as_float(stats.input_output[p]), as_float(stats.input[(p, p)]))
            for p in active.paths
        )
        probabilities = np.array([float(c.probability) for c in task.contexts])
        constants, terms = _loss_terms(problem, active)
    except (TypeError, ValueError) as err:
        if isinstance(err, GdlnError):
            raise
        raise BalancedSpecError(f"{source}: the statistics are not numbers: {err}") from err
    return BalancedProblem(
        problem=problem,
        pathways=pathways,
        probabilities=probabilities,
        constants=constants,
        terms=terms,
        labels=tuple(c.label for c in task.contexts),
    )


def _check_shape(problem: Problem, p: Path) -> None:
    if len(p.edges) != 2:
        raise BalancedSpecError(
            f"{problem.source}: pathway {p} has {len(p.edges)} edge(s); the λ-balanced "
            "solution covers two-layer pathways x -> h -> y"
        )
    for e in p.edges:
        if "fixed" in problem.graph.edges[e]:
            raise BalancedSpecError(
                f"{problem.source}: pathway {p}: edge {edge_name(e)} is fixed (untrained); "
                "the λ-balanced solution needs both edges trained"
            )


def _check_independent(problem: Problem, active: ActivePaths) -> None:
    """Each active path alone in its component: no shared edge, no co-active partner."""
    paths = active.paths
    on_edge: dict[Edge, Path] = {}
    for p in paths:
        for e in p.edges:
            if e in on_edge:
                raise BalancedSpecError(
                    f"{problem.source}: pathways {on_edge[e]} and {p} share edge "
                    f"{edge_name(e)}; the λ-balanced solution needs pathways that share no edge"
                )
            on_edge[e] = p
    for members in active.components:
        if len(members) < 2:
            continue
        into: dict[Hashable, Path] = {}
        for i in members:  # no shared edge: the component joins pathways into one output
            p = paths[i]
            if p.target in into:
                raise BalancedSpecError(
                    f"{problem.source}: pathways {into[p.target]} and {p} are on together "
                    f"into output {p.target} with a nonzero input correlation (Eq. 6), so "
                    "their dynamics couple; the λ-balanced solution needs independent pathways"
                )
            into[p.target] = p
        raise AssertionError(f"component {members} joined without a reason")  # pragma: no cover


def _whitened(problem: Problem, p: Path, yx: np.ndarray, xx: np.ndarray) -> Pathway:
    r"""$\Sigma^x(p,p) = c\,V_rV_r^\top$ checked, and $\tilde\Sigma = \Sigma^{yx}V_r/c$."""
    values, vectors = np.linalg.eigh((xx + xx.T) / 2)
    top = float(values.max(initial=0.0))
    keep = values > NULL_RTOL * top
    if top <= 0 or not keep.any():
        raise BalancedSpecError(f"{problem.source}: pathway {p}: its input statistics are zero")
    kept = values[keep]
    if (
        float(kept.max() - kept.min()) > WHITENED_RTOL * top
        or float(values.min()) < -NULL_RTOL * top
    ):
        shown = ", ".join(f"{v:.4g}" for v in sorted(values[np.abs(values) > NULL_RTOL * top]))
        raise BalancedSpecError(
            f"{problem.source}: pathway {p}: input statistics Σx(p,p) have eigenvalues "
            f"{shown}; the λ-balanced solution needs Σx(p,p) = c·I on the inputs' span"
        )
    c = float(kept.mean())
    basis = vectors[:, keep][:, ::-1]
    off = yx - yx @ basis @ basis.T
    if float(np.linalg.norm(off)) > 1e-9 * max(float(np.linalg.norm(yx)), c):
        raise BalancedSpecError(
            f"{problem.source}: pathway {p}: Σyx(p) reaches inputs outside the span of "
            "Σx(p,p); the task's moments are inconsistent"
        )
    sizes = tuple(int(problem.graph.nodes[v]["size"]) for v in p.nodes)
    return Pathway(
        path=p,
        scale=c,
        basis=basis,
        target=yx @ basis / c,
        sizes=(sizes[0], sizes[1], sizes[2]),
    )


def _loss_terms(problem: Problem, active: ActivePaths) -> tuple[np.ndarray, tuple[LossTerm, ...]]:
    r"""Per context $\tfrac12\langle\lVert y\rVert^2\rangle_c$, and each pathway's terms.

    Within a context the loss of Eq. (1) is
    $\tfrac12\langle\lVert y\rVert^2\rangle_c - \sum_p [g_p\,\mathrm{tr}(W_p
    \langle y\,x^\top\rangle_c^\top) - \tfrac12 g_p^2\,\mathrm{tr}(W_p\langle x\,x^\top
    \rangle_c W_p^\top)]$: cross terms between pathways vanish for independent pathways.
    """
    task = problem.require_task()
    constants = []
    terms = []
    for k, (c, found) in enumerate(zip(task.contexts, active.gates, strict=True)):
        data = task.datasets[c.dataset]
        constants.append(
            0.5 * sum(float(np.trace(as_float(data.moment(f, f)))) for f in c.targets.values())
        )
        for i, gate in found.items():
            p = active.paths[i]
            field = c.inputs[p.source]
            target = c.targets.get(p.target)
            yx = None if target is None else as_float(data.moment(target, field))
            xx = as_float(data.moment(field, field))
            terms.append(LossTerm(i, k, float(gate), yx, xx))
    return np.array(constants), tuple(terms)


def context_losses(prepared: BalancedProblem, products: Mapping[int, Any]) -> np.ndarray:
    r"""The loss of Eq. (1) within each context, ``(T, contexts)``, from each pathway's
    $W_2W_1(t)$ ``(T, |y|, |x|)`` (``products``: pathway index -> array)."""
    T = len(next(iter(products.values())))
    out = np.tile(prepared.constants, (T, 1))
    for term in prepared.terms:
        W = products[term.pathway]
        value = 0.5 * term.gate**2 * np.einsum("tij,jk,tik->t", W, term.xx, W)
        if term.yx is not None:
            value = value - term.gate * np.einsum("tij,ij->t", W, term.yx)
        out[:, term.context] += value
    return out
