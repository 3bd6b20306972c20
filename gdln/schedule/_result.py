"""A solved schedule: the trajectory of :func:`gdln.solve` with ``schedule=``, its phases
and their measures."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._errors import GdlnError
from ..solution._series import CONTEXT_LOSS
from ..solution._trajectory import Trajectory
from ._measures import ScheduleMeasures, measures_of

__all__ = ["PhaseRun", "ScheduleResult"]


@dataclass(frozen=True)
class PhaseRun:
    r"""How one phase of a schedule was solved.

    Parameters
    ----------
    name
        The phase's name.
    key
        Where it was written (``schedule[1]``, ``phases[1]``).
    start, end
        Its times, in units of $\tau$.
    probabilities
        Context label -> $\pi_c$ during the phase (every context of the schedule).
    route
        ``"contexts"`` (the reduced ODE or gradient-descent map of Eq. 10, every context),
        ``"lambda-balanced"`` (the closed form restarted from the phase's start) or
        ``"matrix"`` (the full-matrix flow or map of Eqs. 3-4).
    why
        Why not the route before it in that order, where it is not the first (``""``).
    stages
        Where the time scales from small initial weights apply at the phase's start
        (:func:`gdln.timescales` of the phase's task): each stage's pathways and its
        leading-order time, counted from the schedule's start; empty otherwise.
    stages_note
        Why the time scales were not computed for the phase, or ``""``.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eq. (10) and Eqs. (3)-(4); Braun, Dominé, Fitzgerald &
    Saxe (2022) (the closed form).
    """

    name: str
    key: str
    start: float
    end: float
    probabilities: Mapping[str, float]
    route: str
    why: str = ""
    stages: tuple[tuple[tuple[str, ...], float], ...] = ()
    stages_note: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The phase as JSON-ready data (what ``meta["schedule"]["phases"]`` holds).

        Returns
        -------
        dict
            Every field, the stages as ``{"pathways": [...], "time": t}``.
        """
        return {
            "name": self.name,
            "key": self.key,
            "start": self.start,
            "end": self.end,
            "probabilities": dict(self.probabilities),
            "route": self.route,
            "why": self.why,
            "stages": [{"pathways": list(p), "time": t} for p, t in self.stages],
            "stages_note": self.stages_note,
        }


@dataclass(frozen=True, eq=False)
class ScheduleResult:
    """A schedule solved phase by phase.

    Parameters
    ----------
    trajectory
        ``loss`` (Eq. 1 with each phase's probabilities; a boundary counts to the phase it
        ends), ``series["context_loss"]`` ``(T, contexts)`` (every context's own loss all
        along, also while its probability is 0), and the route's own series where one
        route solved every phase (reduced variables; ``W[u->v]``; ``W2W1/<pathway>``);
        ``meta["schedule"]`` holds the boundaries and the phases
        (:meth:`PhaseRun.to_dict`), ``meta["route"]`` is ``"schedule"``.
    phases
        How each phase was solved.
    labels
        The contexts, in the order of ``context_loss``'s columns.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eqs. (1)-(4) and (10).
    """

    trajectory: Trajectory
    phases: tuple[PhaseRun, ...]
    labels: tuple[str, ...]

    @classmethod
    def of(cls, trajectory: Trajectory) -> ScheduleResult:
        """The schedule a trajectory of :func:`gdln.solve` with ``schedule=`` followed.

        Parameters
        ----------
        trajectory
            What ``gdln.solve(problem, schedule=...)`` returned (or the same read back
            from its JSON file): its ``meta["schedule"]`` holds each phase's run.

        Returns
        -------
        ScheduleResult
            The trajectory, its phases and, through them, its measures.

        Raises
        ------
        GdlnError
            The trajectory did not follow a schedule of the theory.

        Examples
        --------
        >>> import gdln
        >>> problem = gdln.load("context", params={"pathways": 1})
        >>> schedule = gdln.task.blocked(["context0", "context1"], 60.0)
        >>> run = gdln.schedule.ScheduleResult.of(gdln.solve(problem, schedule=schedule))
        >>> [p.route for p in run.phases]  # y = x1, then y = x2: neither the start's bases
        ['lambda-balanced', 'lambda-balanced']
        >>> round(float(run.context_loss["context0"][-1]), 3)  # forgot context 0: 1/3
        0.333
        """
        phases = trajectory.meta.get("schedule", {}).get("phases")
        if not phases or any("route" not in p for p in phases):
            raise GdlnError(
                f"{trajectory.meta.get('source', 'trajectory')}: not a solved schedule "
                "(gdln.solve with schedule= records its phases in meta['schedule'])"
            )
        runs = tuple(
            PhaseRun(
                **{k: v for k, v in p.items() if k != "stages"},
                stages=tuple((tuple(s["pathways"]), float(s["time"])) for s in p["stages"]),
            )
            for p in phases
        )
        return cls(trajectory, runs, tuple(trajectory.meta["context_labels"]))

    def __repr__(self) -> str:
        routes = ", ".join(f"{p.name}: {p.route}" for p in self.phases)
        return f"ScheduleResult(<{len(self.phases)} phases: {routes}>)"

    @property
    def boundaries(self) -> tuple[float, ...]:
        """0, then the end of each phase (units of $\\tau$)."""
        return (self.phases[0].start, *(p.end for p in self.phases))

    @property
    def context_loss(self) -> dict[str, np.ndarray]:
        """Label -> that context's loss at every recorded time, ``(T,)``."""
        return self.trajectory.context_losses()

    @property
    def measures(self) -> ScheduleMeasures:
        """Per context and phase: loss at the phase's end, transfer, forgetting, savings."""
        trained = np.array(
            [[p.probabilities.get(label, 0) > 0 for p in self.phases] for label in self.labels],
            dtype=bool,
        ).reshape(len(self.labels), len(self.phases))
        return measures_of(
            self.labels,
            [p.name for p in self.phases],
            self.boundaries,
            trained,
            self.trajectory.t,
            np.asarray(self.trajectory.series[CONTEXT_LOSS]),
        )
