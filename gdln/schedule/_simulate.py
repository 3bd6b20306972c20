r"""A schedule simulated: the full gated network trained phase by phase in torch.

Each phase is one :func:`gdln.simulate` run of the phase's task (every context of the
schedule with the phase's probabilities) for ``duration / lr`` steps of gradient descent,
from the weights the previous phase ended with (every seed its own). Every context's own
loss is recorded all along on the evaluation examples of every context (so also while
the phase gives it probability 0: forgetting), the loss of the phase in force on its
training examples. This is the Euler map of Eq. (2) of Saxe, Sodhani & Lewallen (2022)
with the data of each phase, which the reduced gradient-descent map of
:func:`gdln.solve` with ``schedule=`` (``dynamics="gd-map"``) follows exactly from decoupled
weights.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from .._edge import Edge
from ..settings._declared import Settings
from ..solution._series import context_key, edge_in_key
from ..solution._trajectory import Trajectory
from ..task._problem import Problem
from ..task._schedule import Schedule, phase_task, schedule_task
from ..task._task import Task
from ._engine import _grid

__all__ = ["schedule_simulated"]


_STARTS = ("init_scheme", "init_scale", "b0")
"""The settings of a random start that each phase's run is given only where the call gave
them (so that :func:`gdln.simulate` refuses or reads them as it would)."""


def schedule_simulated(
    problem: Problem,
    schedule: Schedule,
    settings: Settings,
    *,
    weights: Mapping[Edge, Any] | None = None,
    seeds: Any = None,
) -> Trajectory:
    r""":func:`gdln.simulate` with ``schedule=``, on the settings resolved at its door:
    the full network trained through ``schedule``, each phase from the previous one's end
    weights.

    ``settings.lr`` is every phase's step (each phase a whole number of steps),
    ``settings.points`` about how many records there are over the whole schedule (the
    boundaries always). The start of the first phase is ``weights`` where given, else by
    ``init_scheme``: ``"decoupled"`` is the weights of Eq. (9) at ``b0`` on the bases of
    every context the schedule sees (the start of the reduced route of :func:`gdln.solve`
    with ``schedule=``, so that the reduced map and the simulation start from the same
    weights and stay equal), one run from ``seed``; any other scheme is
    :func:`gdln.simulate`'s. Returns ``t`` ``(T,)``, ``loss`` ``(T, S)`` (the phase in
    force; a boundary counts to the phase it ends), every context's own loss, the
    singular values and ``meta["schedule"]`` (the boundaries and each phase's name, key,
    times and probabilities). Refuses a problem without a schedule, or a duration that
    is not a whole number of steps of ``lr`` (Saxe, Sodhani & Lewallen 2022, Eqs. 1-2;
    Flesch et al. 2023).
    """
    from ..simulation import simulate

    step = float(settings.lr)
    _grid(schedule, [0.0, float(schedule.duration)], step)  # every boundary on a step
    union = schedule_task(problem.require_task(), schedule)
    labels = [c.label for c in union.contexts]
    share = 1 / len(union.contexts)
    even = tuple(dataclasses.replace(c, probability=share) for c in union.contexts)
    every = dataclasses.replace(problem, task=dataclasses.replace(union, contexts=even))
    evaluation = every.examples()  # every context, to record its loss while it is off
    total_steps = round(float(schedule.duration) / step)
    per_step = max(1, total_steps // max(1, int(settings.points) - 1))
    if weights is not None:
        start: dict[str, Any] = {"weights": weights, "seeds": seeds}
    elif settings.init_scheme == "decoupled":
        start = {"weights": _decoupled(problem, union, settings, seeds), "seeds": [settings.seed]}
    else:
        start = {k: getattr(settings, k) for k in _STARTS if k in settings.called}
        start["seeds"] = seeds
    parts: list[dict[str, np.ndarray]] = []
    offset = 0.0
    for k, phase in enumerate(schedule.phases):
        steps = round(float(phase.duration) / step)
        records = tuple(sorted({*range(0, steps, per_step), steps}))
        run = simulate(
            dataclasses.replace(problem, task=phase_task(union, phase)),
            steps=steps,
            lr=step,
            **{n: getattr(settings, n) for n in ("seed", "weight_decay") if n in settings.called},
            eval_examples=evaluation,
            record_weights=True,
            record_steps=records,
            **start,
        )
        start = {
            "weights": {_edge(key): w[-1] for key, w in _weights(run).items()},
            "seeds": start["seeds"],
        }
        first = 0 if k == 0 else 1  # the boundary is the previous phase's last record
        part = {"t": run.t[first:] + offset, "loss": np.asarray(run.loss)[first:]}
        for label in labels:
            evaluated = run.series[context_key(label, evaluation=True)]
            part[context_key(label)] = np.asarray(evaluated)[first:]
        for key, value in run.series.items():
            if edge_in_key("sv", key) is not None:
                part[key] = np.asarray(value)[first:]
        parts.append(part)
        offset += float(phase.duration)
    series = {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}
    t, loss = series.pop("t"), series.pop("loss")
    bounds = list(schedule.boundaries)
    meta = {
        "source": problem.source,
        "route": "simulation",
        "lr": step,
        "time_unit": "tau",
        "context_labels": labels,
        "schedule": {
            "boundaries": bounds,
            "phases": [
                {
                    "name": phase.name,
                    "key": phase.key,
                    "start": bounds[k],
                    "end": bounds[k + 1],
                    "probabilities": {
                        c.label: float(c.probability) for c in phase_task(union, phase).contexts
                    },
                }
                for k, phase in enumerate(schedule.phases)
            ],
        },
    }
    return Trajectory(t, loss, series, meta)


def _decoupled(problem: Problem, union: Task, settings: Settings, seeds: Any) -> dict[Edge, Any]:
    """The decoupled weights of Eq. (9) at ``settings.b0`` on the bases of every context
    the schedule sees (``union``): the start of the reduced route of a solved schedule,
    one run from ``settings.seed``."""
    from .._errors import GdlnError
    from ..reduction._reduce import derive

    listed = isinstance(seeds, list | tuple | np.ndarray)  # the door left these unresolved
    if listed or ("seeds" in settings.called and settings.seeds != 1):  # simulate's rule
        raise GdlnError(
            f"seeds: the decoupled start is one run (its hidden bases drawn from seed), "
            f"got seeds={seeds}"
        )
    start = dataclasses.replace(settings, lump="none", route="contexts")
    reduction = derive(dataclasses.replace(problem, task=union), start)
    return reduction.decoupled_weights(seed=settings.seed)


def _weights(run: Trajectory) -> dict[str, np.ndarray]:
    edges = {k: edge_in_key("W", k) for k in run.series}
    return {edge: np.asarray(run.series[k]) for k, edge in edges.items() if edge is not None}


def _edge(name: str) -> Edge:
    source, _, target = name.partition("->")
    return (source, target)
