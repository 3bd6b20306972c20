r"""A comparison planned: one time axis, the runs' arguments and the theory's route.

The first steps of :func:`gdln.compare` once its settings are resolved: the steps that
reach the horizon and the steps every run records (so that every gap compares equal
times, $t/\tau = \mathrm{lr}\cdot\mathrm{step}$), the simulations' settings (full-batch
gradient descent, the dynamics the theory describes), their workload checked against the
limits before anything runs, the rule of the theory's start, and the route the theory
takes (:func:`theory_route`: the exact reduction where the statistics share bases, else
the full-matrix flow).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .._errors import NotDiagonalizableError
from ..reduction import Reduction
from ..settings._declared import Settings
from ..settings._spellings import COMPARE_RUN
from ..simulation import SimulationSpecError, horizon_steps
from ..simulation._plan import node_sizes
from ..simulation._settings import count_records
from ..simulation._workload import check_workload
from ..task import ExampleSet, Problem
from ._starts import start_rule, theory_start

__all__ = ["Plan", "Route", "plan_of", "theory_route", "whole_reduction"]


@dataclass(frozen=True)
class Plan:
    """What a comparison runs, before anything is computed.

    Attributes
    ----------
    chosen
        The resolved settings.
    rule, rule_source
        Where the theory starts (``"b0"`` or ``"random"``) and which source decided.
    steps
        The simulations' number of steps, ``round(t_max / lr)``.
    record
        The steps every run records.
    simulation
        The simulations' keywords of :func:`gdln.simulate` (full-batch gradient descent,
        ``record`` recorded, and of the settings only ``dtype``, ``device``, ``threads``,
        ``progress`` and ``record_patterns`` as resolved).
    examples
        The problem's examples, which every simulation trains on.
    """

    chosen: Settings
    rule: str
    rule_source: str
    steps: int
    record: np.ndarray
    simulation: dict[str, Any]
    examples: ExampleSet

    @property
    def t_max(self) -> float:
        """The horizon the steps reach, in units of $\\tau$."""
        return self.steps * self.chosen.lr

    @property
    def times(self) -> np.ndarray:
        """The recorded times, $\\mathrm{lr}\\cdot\\mathrm{step}$."""
        return self.record * self.chosen.lr

    def run(self, problem: Problem, **job: Any) -> dict[str, Any]:
        """The keyword arguments of one simulation (:func:`gdln.simulate`) of ``problem``
        with these, the rest as planned."""
        common = dict(
            source=problem.graph,
            examples=self.examples,
            steps=self.steps,
            lr=self.chosen.lr,
            weight_decay=self.chosen.weight_decay,
        )
        return common | self.simulation | job

    def random_run(self, problem: Problem) -> dict[str, Any]:
        """The simulations from random initial weights, batched over the seeds."""
        chosen = self.chosen
        return self.run(
            problem,
            init_scheme=chosen.init_scheme,
            init_scale=chosen.init_scale,
            seeds=chosen.seeds,
            seed=chosen.seed,
        )


def plan_of(problem: Problem, chosen: Settings) -> Plan:
    """The plan of a comparison of ``problem`` with the settings ``chosen`` resolved at
    :func:`gdln.compare`'s door (which of them the call gave, ``chosen.called``, decides
    the theory's start: :func:`~gdln.comparison._starts.start_rule`)."""
    steps = horizon_steps(chosen.t_max, lr=chosen.lr)
    examples = problem.examples()
    check_workload(  # the random runs', before the theory is solved
        records=count_records(max(1, steps // (chosen.points - 1)), None, steps),
        batch=0,
        steps=steps,
        seeds=chosen.seeds,
        rows=len(examples.weights),
        sizes=node_sizes(problem.graph),
        edges=list(problem.graph.edges),
    )
    rule, rule_source = start_rule(problem, chosen)
    # One set of steps for all four runs, so that every gap compares equal times.
    record = recorded_steps(steps, chosen.points)
    simulation: dict[str, Any] = {name: getattr(chosen, name) for name in COMPARE_RUN}
    simulation |= {
        "optimizer": "gd",  # full-batch gradient descent, the dynamics the theory describes
        "momentum": 0.0,
        "record_patterns": chosen.record_patterns,
        "record_steps": tuple(int(k) for k in record),
    }
    return Plan(chosen, rule, rule_source, steps, record, simulation, examples)


@dataclass(frozen=True)
class Route:
    """The theory's route for a comparison: its dynamics (``None`` on the matrix route),
    its start $b(0)$ and why ``auto`` took it."""

    model: Any
    start: Any
    reason: str


def theory_route(problem: Problem, plan: Plan) -> Route:
    """The one route rule of every command (:func:`gdln.solution._dynamics.route_of`),
    with the theory's start: the exact reduction where the statistics share bases, else
    the full-matrix flow (``model`` ``None``)."""
    from ..solution._dynamics import route_of

    chosen = plan.chosen
    if chosen.route == "matrix":
        return Route(None, chosen.b0, "")
    start = chosen.b0
    if plan.rule == "random":
        try:
            start = theory_start(problem, chosen, plan.rule)
        except NotDiagonalizableError:
            if chosen.route != "auto":
                raise
            # no bases, so no mode strengths: the route rule below takes the full matrices
    taken = route_of(problem, replace(chosen, b0=start))
    return Route(taken.model, start, taken.reason)


def whole_reduction(model: Any) -> Reduction:
    """The reduction whose bases give the decoupled weights of Eq. (9): the whole network's
    (:attr:`gdln.Reduction.whole`; every context, one variable per edge where the theory
    was derived on the symmetry quotient)."""
    whole = getattr(model, "whole", None)
    if whole is None:
        raise SimulationSpecError(
            f"{model.problem.source}: the moment route has no bases for the decoupled run; "
            "compare needs a problem whose paths can be listed"
        )
    return whole


def recorded_steps(steps: int, n_points: int) -> np.ndarray:
    """The steps :func:`gdln.compare` records in every run: ``n_points`` spread over ``steps``.

    Step 0 and the last are included; the spacing differs by at most one step where
    ``n_points - 1`` does not divide ``steps`` (every step when there are fewer steps than
    points). The reduced ODE, the reduced map and both simulations are recorded at exactly
    these steps (times ``lr * step``), so that their losses are compared at equal times.

    >>> recorded_steps(300, 201)[:6].tolist(), len(recorded_steps(300, 201))
    ([0, 2, 3, 4, 6, 8], 201)
    >>> recorded_steps(5, 201).tolist()
    [0, 1, 2, 3, 4, 5]
    """
    return np.unique(np.linspace(0, steps, min(n_points, steps + 1)).round().astype(int))
