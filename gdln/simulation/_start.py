r"""Where a simulation starts: its settings resolved once, and its initial weights chosen.

:func:`gdln.simulate` takes a :class:`~gdln.Problem` (or a graph with its examples) and
keywords that override the problem's settings. This module turns them into what the
training loop needs: the number of steps (the horizon $t_\max$ on the clock
$t/\tau = \mathrm{step}\cdot\mathrm{lr}/(1-\mu)$), the seeds, the initial weights (a random
scheme, explicit weights, or the decoupled weights of Eq. (9) of Saxe et al. 2022 from
the problem's reduction), the projection bases and the evaluation examples.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import networkx as nx
import numpy as np

from .._edge import Edge
from ..settings._declared import SettingError, Settings
from ..solution._recording import Recording
from ..task._examples import ExampleSet
from ._errors import SimulationSpecError
from ._plan import node_sizes
from ._seeds import seed_list
from ._settings import SimulationSettings, check_positive
from ._workload import check_workload, horizon_steps

if TYPE_CHECKING:  # imported where used: a run on a graph needs no sympy (the worker's start)
    from ..reduction._system import Reduction
    from ..task import Problem

__all__ = ["Start", "start_of"]


@dataclass(frozen=True)
class Start:
    """What one call of :func:`gdln.simulate` runs: every setting resolved and checked,
    the run's size within the limits; the training loop takes it as it is."""

    graph: nx.DiGraph
    examples: ExampleSet
    steps: int
    lr: float
    weight_decay: float
    init_scheme: str
    init_scale: float
    weights: Mapping[Edge, Any] | None
    seeds: list[int]
    eval_examples: ExampleSet | None
    bases: Mapping[Edge, tuple[np.ndarray, np.ndarray]] | None
    optimizer: str
    batch_size: int | None
    momentum: float
    dtype: str
    device: str
    threads: int | str
    progress: bool | str
    diverge_above: float
    recording: Recording
    patterns: bool = False


def start_of(
    source: Problem | nx.DiGraph,
    examples: ExampleSet | None,
    *,
    steps: int | None,
    t_max: float | None,
    lr: float | None,
    weight_decay: float | str | None,
    init_scheme: str | None,
    init_scale: float | None,
    b0: Any,
    weights: Mapping[Edge, Any] | None,
    seeds: int | Sequence[int] | None,
    seed: int | None,
    eval_examples: ExampleSet | None,
    eval_task: str | Path | None,
    bases: Mapping[Edge, tuple[np.ndarray, np.ndarray]] | None,
    project: bool,
    points: int | None,
    settings: SimulationSettings | None,
) -> Start:
    """Resolve the keywords of :func:`gdln.simulate` against the problem's settings."""
    problem = _problem_of(source)
    if settings is None:
        settings = SimulationSettings()
    elif not isinstance(settings, SimulationSettings):
        raise SimulationSpecError(
            f"settings: expected a SimulationSettings, got {type(settings).__name__}"
        )
    declared = problem.settings if problem is not None else Settings()
    listed = isinstance(seeds, Sequence) and not isinstance(seeds, str)  # explicit seeds
    chosen = _given(
        declared,
        t_max=t_max,
        lr=lr,
        weight_decay=weight_decay,
        init_scheme=init_scheme,
        init_scale=init_scale,
        b0=b0,
        seed=seed,
        seeds=None if listed else seeds,
        points=points,
    )
    graph: nx.DiGraph = source.graph if problem is not None else source
    if examples is None:
        if problem is None:
            raise SimulationSpecError("examples: give the examples with a graph, or a Problem")
        examples = problem.examples()
    if steps is not None and t_max is not None:
        raise SimulationSpecError(f"give steps or t_max, not both (steps={steps}, t_max={t_max})")
    momentum = settings.momentum if settings.momentum is not None else chosen.momentum
    if steps is None:
        steps = horizon_steps(chosen.t_max, lr=chosen.lr, momentum=momentum)
    check_positive("steps", steps, integer=True, allow_zero=True)
    run = settings.resolved(chosen, steps=steps)
    scheme = chosen.init_scheme if init_scheme is not None or weights is None else "given"
    seed_values = seed_list(seeds if listed else chosen.seeds, chosen.seed)  # type: ignore[arg-type]
    reduction: Reduction | None = None
    if scheme == "decoupled" or project:
        what = "init_scheme='decoupled'" if scheme == "decoupled" else "project=True"
        reduction = _reduction(problem, chosen, what)
    if scheme == "decoupled":
        if seeds is not None and (listed or chosen.seeds != 1):
            raise SimulationSpecError(
                f"seeds: the decoupled start is one run (its hidden bases drawn from seed), "
                f"got seeds={seeds}"
            )
        assert reduction is not None
        weights, scheme, seed_values = (
            reduction.decoupled_weights(seed=chosen.seed),
            "given",
            [chosen.seed],
        )
    if project:
        assert reduction is not None
        bases = reduction.decoupled_bases(seed=chosen.seed)
    if eval_task is not None:
        if problem is None:
            raise SimulationSpecError("eval_task: needs a Problem, whose graph the task fits")
        if eval_examples is not None:
            raise SimulationSpecError("give eval_examples or eval_task, not both")
        eval_examples = problem.with_task(eval_task).examples()
    check_workload(  # before anything is allocated
        run,
        steps=steps,
        seeds=len(seed_values),
        rows=_rows(examples),
        sizes=node_sizes(graph),
        edges=list(graph.edges),
        eval_rows=0 if eval_examples is None else _rows(eval_examples),
    )
    when: dict[str, Any] = (
        {"every": run.record_every} if run.record_steps is None else {"steps": run.record_steps}
    )
    return Start(
        graph=graph,
        examples=examples,
        steps=steps,
        lr=chosen.lr,
        weight_decay=chosen.weight_decay,
        init_scheme=scheme,
        init_scale=chosen.init_scale,
        weights=weights,
        seeds=seed_values,
        eval_examples=eval_examples,
        bases=bases,
        optimizer=str(run.optimizer),
        batch_size=run.batch_size,
        momentum=float(run.momentum or 0.0),
        dtype=str(run.dtype),
        device=str(run.device),
        threads=run.threads,
        progress=run.progress,
        diverge_above=run.diverge_above,
        recording=Recording(**when, weights=run.record_weights, rsm=run.rsm),
        patterns=bool(run.record_patterns),
    )


def _rows(examples: Any) -> int:
    """The number of examples of an ExampleSet (0 if it is none: tensorise says why)."""
    try:
        return len(examples.weights)
    except (AttributeError, TypeError):
        return 0


def _given(declared: Settings, **values: Any) -> Settings:
    """``declared.given(...)`` with its errors as the simulation's."""
    try:
        return declared.given(**values)
    except SettingError as err:
        raise SimulationSpecError(str(err)) from None


def _reduction(problem: Problem | None, chosen: Settings, what: str) -> Reduction:
    """The reduction whose bases give the decoupled weights of Eq. (9) at the run's $b(0)$:
    every context, one variable per edge (:meth:`gdln.Reduction.decoupled_weights`)."""
    if problem is None:
        raise SimulationSpecError(f"{what}: needs a Problem, whose reduction gives the bases")
    from ..reduction._reduce import derive

    start = replace(problem.settings, lump="none", route="contexts", b0=chosen.b0)
    return derive(problem, start)


def _problem_of(source: Any) -> Problem | None:
    """``source`` if it is a :class:`~gdln.Problem`, ``None`` for a graph (whose check
    needs no import of the graph-file reader and sympy)."""
    if isinstance(source, nx.DiGraph):
        return None
    from ..task import Problem

    return source if isinstance(source, Problem) else None
