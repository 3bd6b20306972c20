r"""The runs of a comparison, and where and in which order they run.

The simulations go to a second process (:class:`gdln._runtime._jobs.Jobs`, where that
overlaps work here) the moment their arguments are known, each with a priority: the
random runs first, since they need nothing from the theory, and the decoupled run of
Eq. (9) of Saxe et al. 2022 (one seed, the shorter) ahead of them if they have not begun.
Meanwhile this process solves the theory and the stages, then loads the figures' library
(:func:`~gdln.comparison._figures.prepare_drawing`) while it waits for the simulations.
:func:`start_simulations` starts that process before the comparison is called.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from .._runtime._jobs import Jobs
from .._runtime._worker import standby
from ..reduction import Reduction
from ..task import Problem
from ._figures import prepare_drawing, trained_edges
from ._matrix import matrix_starts, matrix_theory, typical_scale
from ._metrics import Runs
from ._plan import Plan, Route, whole_reduction
from ._stages import predicted_stages

__all__ = ["SIMULATE", "matrix_runs", "reduced_runs", "start_simulations"]

SIMULATE = "gdln.simulation._simulate:simulate"
"""The target the simulation process runs (:func:`gdln.simulate`; it imports torch)."""
RANDOM_PRIORITY, DECOUPLED_PRIORITY = 1, 0
"""Of the runs waiting when the process is free, the lower number runs first."""


def simulations() -> Jobs:
    """Where a comparison's simulations run: a second process, where worthwhile."""
    return Jobs(SIMULATE, what="simulation")


def reduced_runs(problem: Problem, plan: Plan, route: Route) -> tuple[Runs, dict[str, Any]]:
    """The four runs on an exact route, and the stages :func:`gdln.timescales` predicts."""
    chosen = plan.chosen
    with simulations() as runs_of:
        runs_of.submit(plan.random_run(problem), priority=RANDOM_PRIORITY)  # needs no theory
        from ..solution._dynamics import solve_resolved  # scipy, while the worker imports torch

        whole = whole_reduction(route.model)
        # one seed: run first if the random runs have not begun (the shorter run first
        # keeps both cores busy while the figures' library loads here)
        runs_of.submit(_decoupled_run(problem, plan, whole), priority=DECOUPLED_PRIORITY)
        t_max, times = plan.t_max, plan.times
        flow = replace(chosen, t_max=t_max, dynamics="flow")
        ode = solve_resolved(route.model, flow, times=times)
        gd_map = solve_resolved(
            route.model, replace(flow, dynamics="gd-map", method="auto"), times=times
        )
        stages = predicted_stages(  # while the simulations run
            problem,
            chosen,
            start=route.start,
            t_max=plan.t_max,
            reduction=route.model if isinstance(route.model, Reduction) else None,
        )
        random, decoupled = runs_of.results(before=prepare_drawing)
    return Runs(ode, gd_map, decoupled, random), stages


def matrix_runs(problem: Problem, plan: Plan) -> tuple[Runs, dict[str, Any], Any]:
    """The runs on the matrix route (:mod:`gdln.comparison._matrix`): the random runs from
    the starts of the plan's rule, and the full-matrix flow and map from each run's own
    initial weights; no decoupled run (there are no bases). Also the stages and the
    typical scale of the starts (the theory's $b(0)$ per edge)."""
    chosen = plan.chosen
    starts = matrix_starts(
        problem, rule=plan.rule, chosen=chosen, seeds=chosen.seeds, seed=chosen.seed
    )
    edges = trained_edges(problem.graph)
    given = {(str(u), str(v)): w for (u, v), w in starts.items()}
    job = plan.run(problem, weights=given, seeds=chosen.seeds, seed=chosen.seed)
    with simulations() as runs_of:
        runs_of.submit(job, priority=DECOUPLED_PRIORITY)
        ode, gd_map = matrix_theory(problem, starts, chosen, t_max=plan.t_max, times=plan.times)
        scale = typical_scale(starts, edges)
        stages = predicted_stages(
            problem, replace(chosen, route="matrix"), start=scale, t_max=plan.t_max
        )
        (random,) = runs_of.results(before=prepare_drawing)
    return Runs(ode, gd_map, None, random), stages, scale


def _decoupled_run(problem: Problem, plan: Plan, reduction: Any) -> dict[str, Any]:
    """The arguments of the simulation from the decoupled weights of Eq. (9)."""
    seed = plan.chosen.seed
    weights = reduction.decoupled_weights(seed=seed)
    return plan.run(
        problem,
        weights={(str(u), str(v)): w for (u, v), w in weights.items()},
        seeds=[seed],  # one run: given weights and full-batch steps make every seed alike
        bases=reduction.decoupled_bases(seed=seed),
        record_singular_values=False,  # its modes are the projections; nothing reads these
    )


@contextlib.contextmanager
def start_simulations() -> Iterator[None]:
    """Start the process that the next :func:`gdln.compare` in this block simulates in, now.

    :func:`gdln.compare` starts that process itself when it is called; started earlier, its
    import of torch (about a second) overlaps what comes before the call, e.g. reading
    the graph file (``gdln compare`` does this). Nothing is started where a second process
    would not overlap anything (torch already imported here, one core, not POSIX); a
    process not used by a :func:`gdln.compare` in the block is ended on the way out.

    Yields
    ------
    None

    Examples
    --------
    >>> import gdln
    >>> with gdln.comparison.start_simulations():  # doctest: +SKIP
    ...     result = gdln.compare(gdln.load("graphs/routing.yaml"), t_max=20)
    """
    with standby(SIMULATE, what="simulation"):
        yield
