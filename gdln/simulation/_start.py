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
from ..settings._declared import Settings
from ..solution._recording import Recording
from ..task._examples import ExampleSet
from ._errors import SimulationSpecError
from ._plan import node_sizes
from ._seeds import seed_list
from ._settings import (
    MINIBATCH,
    check_minibatch,
    check_positive,
    count_records,
    recorded_steps_of,
)
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
    chosen: Settings,
    *,
    steps: int | None,
    weights: Mapping[Edge, Any] | None,
    seeds: int | Sequence[int] | None,
    eval_examples: ExampleSet | None,
    eval_task: str | Path | None,
    bases: Mapping[Edge, tuple[np.ndarray, np.ndarray]] | None,
    project: bool,
    recording: Mapping[str, Any],
) -> Start:
    """What one call of :func:`gdln.simulate` runs, from the settings resolved at its door
    (``chosen``; ``chosen.called``: what the call gave) and the call's other keywords
    (``recording``: those of :data:`~gdln.simulation._settings.RECORDING`, checked)."""
    problem = _problem_of(source)
    listed = isinstance(seeds, Sequence) and not isinstance(seeds, str)  # explicit seeds
    graph: nx.DiGraph = source.graph if problem is not None else source
    if examples is None:
        if problem is None:
            raise SimulationSpecError("examples: give the examples with a graph, or a Problem")
        examples = problem.examples()
    if steps is not None and "t_max" in chosen.called:
        raise SimulationSpecError(
            f"give steps or t_max, not both (steps={steps}, t_max={chosen.t_max:g})"
        )
    if steps is None:
        steps = horizon_steps(chosen.t_max, lr=chosen.lr, momentum=chosen.momentum)
    check_positive("steps", steps, integer=True, allow_zero=True)
    batch_size = chosen.batch_size
    chose = "optimizer" in chosen.called and "batch_size" not in chosen.called
    if chose and chosen.optimizer not in MINIBATCH:
        batch_size = None  # a file's batch size belongs to its own optimiser
    check_minibatch(chosen.optimizer, batch_size)
    when = recorded_steps_of(
        recording["record_every"], recording["record_steps"], steps, chosen.points
    )
    scheme = chosen.init_scheme if "init_scheme" in chosen.called or weights is None else "given"
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
        records=count_records(when.get("every"), when.get("steps"), steps),
        batch=(batch_size or 0) if chosen.optimizer in MINIBATCH else 0,
        steps=steps,
        seeds=len(seed_values),
        rows=_rows(examples),
        sizes=node_sizes(graph),
        edges=list(graph.edges),
        eval_rows=0 if eval_examples is None else _rows(eval_examples),
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
        optimizer=str(chosen.optimizer),
        batch_size=batch_size,
        momentum=float(chosen.momentum or 0.0),
        dtype=str(chosen.dtype),
        device=str(chosen.device),
        threads=chosen.threads,
        progress=chosen.progress,
        diverge_above=recording["diverge_above"],
        recording=Recording(
            **when,
            weights=recording["record_weights"],
            rsm=recording["rsm"],
            singular_values=recording["record_singular_values"],
        ),
        patterns=bool(chosen.record_patterns),
    )


def _rows(examples: Any) -> int:
    """The number of examples of an ExampleSet (0 if it is none: tensorise says why)."""
    try:
        return len(examples.weights)
    except (AttributeError, TypeError):
        return 0


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
