r"""What a comparison reports: the content of ``metrics.json``.

The problem and its time axis, where each curve started and why, the route the theory
took and the mode numbering of the figures, then the gaps between the runs
(:func:`~gdln.comparison._metrics.loss_metrics`, or on the matrix route
:func:`~gdln.comparison._matrix.matrix_metrics`), the predicted stages and what every
metric means.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .._edge import edge_name
from ..reduction._reduce import initial_values
from ..task import Problem
from ._figures import trained_edges
from ._matrix import MATRIX_DEFINITIONS, matrix_metrics
from ._metrics import DEFINITIONS, Runs, loss_metrics
from ._plan import Plan, Route, whole_reduction
from ._starts import starts_in_words

__all__ = ["matrix_report", "reduced_report"]


def reduced_report(
    problem: Problem, plan: Plan, route: Route, runs: Runs, stages: dict[str, Any]
) -> dict[str, Any]:
    """``metrics.json`` of a comparison on an exact route (see :func:`gdln.compare`)."""
    chosen, random, decoupled = plan.chosen, runs.random, runs.decoupled
    assert decoupled is not None  # an exact route has a decoupled run
    whole = whole_reduction(route.model)
    described = _description(problem, plan, start=route.start)
    return {
        **described,
        "theory_start_from": plan.rule_source,
        "starts": starts_in_words(described, chosen, plan.rule),
        "init_scheme": chosen.init_scheme,
        "init_scale": float(chosen.init_scale),
        "seeds": list(random.meta["seeds"]),
        "lump": chosen.lump,
        "route": runs.ode.meta["route"],  # as the solver recorded it
        "route_reason": runs.ode.meta.get("route_reason", ""),
        "modes": {
            edge_name(e): [int(a) for a in whole.edge_bases(e, seed=chosen.seed)[2]]
            for e in trained_edges(problem.graph)
        },
        "dtype": decoupled.meta["dtype"],
        "device": decoupled.meta["device"],
        **loss_metrics(runs, source=str(getattr(problem, "source", None) or "problem")),
        "stages": stages,
        "definitions": dict(DEFINITIONS),
    }


def matrix_report(
    problem: Problem,
    plan: Plan,
    route: Route,
    runs: Runs,
    stages: dict[str, Any],
    scale: Any,
) -> dict[str, Any]:
    """``metrics.json`` on the matrix route: each seed's gaps against the flow and map
    from its own weights; ``scale`` is the starts' typical $b(0)$ per edge."""
    chosen, random = plan.chosen, runs.random
    described = _description(problem, plan, start=scale)
    start = (
        f"random W(0), singular values b0 = {float(chosen.b0):g}"
        if plan.rule == "b0"
        else f"{chosen.init_scheme}, init_scale {float(chosen.init_scale):g}"
    )
    return {
        **described,
        "theory_start_from": plan.rule_source,
        "starts": {
            "ode": "each seed's own W(0)",
            "gd_map": "each seed's own W(0)",
            "random": start,
        },
        "init_scheme": chosen.init_scheme if plan.rule == "random" else "given",
        "init_scale": float(chosen.init_scale),
        "seeds": list(random.meta["seeds"]),
        "lump": "none",
        "route": "matrix",
        "route_reason": route.reason,
        "dtype": random.meta["dtype"],
        "device": random.meta["device"],
        **matrix_metrics(runs, edges=trained_edges(problem.graph)),
        "stages": stages,
        "definitions": {**DEFINITIONS, **MATRIX_DEFINITIONS},
    }


def _description(problem: Problem, plan: Plan, *, start: Any) -> dict[str, Any]:
    """The problem, the time axis and where the theory started (``start``: $b(0)$, or the
    drawn mode strengths per edge), for ``metrics.json``."""
    graph = problem.graph
    drawn = isinstance(start, dict) and all(isinstance(k, tuple) for k in start)
    values = start if drawn else initial_values(problem, replace(problem.settings, b0=start))
    return {
        "graph": str(graph.graph.get("name", "")),
        "source": str(getattr(problem, "source", "")),
        "params": {k: str(v) for k, v in (getattr(problem, "params", {}) or {}).items()},
        "time_unit": "tau (t/tau = lr * step)",
        "lr": float(plan.chosen.lr),
        "t_max": float(plan.t_max),
        "steps": plan.steps,
        "theory_start": plan.rule,
        "b0": {edge_name(e): float(values[e]) for e in graph.edges if e in values},
    }
