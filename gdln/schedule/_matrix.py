r"""The full-matrix route through a schedule: Eqs. (3)-(4) per phase, from explicit weights.

The full-matrix flow needs no common bases and holds from any weights (Saxe, Sodhani &
Lewallen 2022, Eqs. 3-4; the matrix route of :func:`gdln.solve`). A schedule makes its statistics
piecewise constant, so each phase is integrated on its own from the weights the previous
phase ended with, with a fresh DOP853 stepper (never across a jump of the right-hand side),
or iterated by gradient descent, whose boundaries fall on whole steps. Each context's loss
(Eq. 1 within the context) is evaluated from the weights at every recorded time, whether
the context is trained in the phase or not.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._edge import Edge, edge_name
from .._errors import GdlnError
from ..solution._flow import FlowPlan
from ..solution._full import integrate_weights, iterate_weights
from ..task._problem import Problem
from ..task._task import Task

__all__ = ["ContextLosses", "check_saddle_weights", "matrix_phase"]


@dataclass(frozen=True, eq=False)
class ContextLosses:
    """Eq. (1) within each context of a task, from weights: one flow plan per context (its
    statistics with probability 1), so that a context with probability 0 in a phase still
    has its loss."""

    plans: tuple[FlowPlan, ...]

    @classmethod
    def of(cls, problem: Problem, edges: Sequence[Edge]) -> ContextLosses:
        """The plans of every context of ``problem``'s task, for weights on ``edges``."""
        task = problem.require_task()
        plans = []
        for c in task.contexts:
            alone = Task(
                contexts=(dataclasses.replace(c, probability=1),),
                datasets=task.datasets,
                random_gates=task.random_gates,
            )
            plans.append(FlowPlan.of(dataclasses.replace(problem, task=alone), edges))
        return cls(tuple(plans))

    def __call__(self, states: Sequence[Sequence[np.ndarray]]) -> np.ndarray:
        """``(T, contexts)`` from weights per recorded time (in the plans' edge order)."""
        return np.array([[plan.loss(w) for plan in self.plans] for w in states])


def matrix_phase(
    plan: FlowPlan,
    weights: Mapping[Edge, np.ndarray],
    times: np.ndarray,
    *,
    lr: float | None,
    rtol: float,
    atol: float,
    source: str,
) -> list[list[np.ndarray]]:
    """The weights (in ``plan.edges`` order) at local ``times`` (from 0; the last is the
    phase's end) of one phase: the flow from ``weights``, or ``round(t/lr)`` steps of
    gradient descent."""
    values = [np.array(weights[e], dtype=float) for e in plan.edges]
    if lr is None:
        _, states = integrate_weights(
            plan, values, float(times[-1]), times, source, rtol=rtol, atol=atol
        )
        return states
    steps = np.rint(times / lr).astype(int)
    _, states = iterate_weights(plan, values, lr, steps, source)
    by_step = dict(zip(sorted(set(steps.tolist())), states, strict=True))
    return [by_step[int(s)] for s in steps]


def check_saddle_weights(
    plan: FlowPlan, weights: Mapping[Edge, np.ndarray], where: str, *, rtol: float
) -> None:
    r"""Refuse a phase whose weights start on the stable manifold of the saddle at 0.

    The weights of a group of coupled paths (sharing an edge or an output) whose flow is
    $\dot W = \kappa W$ with $\kappa < 0$, here and at ``SMALL`` times the weights, with
    zero flow at zero weights and a nonzero target, move straight to the origin, a saddle
    of the loss: a reversal $s \to -s$ from exactly balanced, aligned weights (Eqs. 3-4
    of Saxe, Sodhani & Lewallen 2022 keep that ray). The escape is set by a misalignment
    these weights do not have.
    """
    values = [np.array(weights[e], dtype=float) for e in plan.edges]
    for group in _groups(plan):
        if not any(np.any(target.input_output) for target in group[1]):
            continue
        edges = sorted(group[0])
        if not any(np.any(values[i]) for i in edges) or not all(plan.trained[i] for i in edges):
            continue
        if _radial(plan, values, edges, rtol):
            raise GdlnError(
                f"{where}: the weights of {', '.join(edge_name(plan.edges[i]) for i in edges[:3])} "
                "start exactly balanced and aligned against their new target (a reversal "
                "s -> -s), on the saddle at 0, where the flow stays; the escape depends on "
                "the misalignment (about ln(1/eps)/s): start from weights that are not "
                "exactly balanced and aligned"
            )


SMALL = 1e-4
"""The scale at which :func:`check_saddle_weights` looks again along the ray to 0."""


def _groups(plan: FlowPlan) -> list[tuple[set[int], list[Any]]]:
    """The edges of coupled paths (one output, or a shared edge) with their targets."""
    groups: list[tuple[set[int], list[Any]]] = []
    for target in plan.targets:
        edges = {e for p in target.paths for e in plan.paths[p]}
        joined = [g for g in groups if g[0] & edges]
        for g in joined:
            groups.remove(g)
            edges |= g[0]
        groups.append((edges, [target] + [t for g in joined for t in g[1]]))
    return groups


def _radial(plan: FlowPlan, values: list[np.ndarray], edges: list[int], rtol: float) -> bool:
    for scale in (1.0, SMALL, 0.0):
        moved = [w * scale if i in edges else w for i, w in enumerate(values)]
        with np.errstate(all="ignore"):
            flow = plan.flow(moved)
        f = np.concatenate([flow[i].ravel() for i in edges])
        if scale == 0.0:
            return bool(not np.any(f))
        v = np.concatenate([moved[i].ravel() for i in edges])
        kappa = float(f @ v) / float(v @ v)
        if not kappa < 0 or np.linalg.norm(f - kappa * v) > rtol * np.linalg.norm(f):
            return False
    return False  # pragma: no cover - the loop returns at scale 0
