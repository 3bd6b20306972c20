r"""The full-matrix route through a schedule: Eqs. (3)-(4) per phase, from explicit weights.

The full-matrix flow needs no common bases and holds from any weights (Saxe, Sodhani &
Lewallen 2022, Eqs. 3-4; :func:`gdln.solve_full`). A schedule makes its statistics
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

import numpy as np

from .._edge import Edge
from ..solution._flow import FlowPlan
from ..solution._full import integrate_weights, iterate_weights
from ..task._problem import Problem
from ..task._task import Task

__all__ = ["ContextLosses", "matrix_phase"]


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
