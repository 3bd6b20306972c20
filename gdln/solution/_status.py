r"""How a run ended: the typed status of a :class:`~gdln.Trajectory`.

diffrax's ``Solution.result`` in gdln's words. A solve or a simulation that cannot reach
its last recorded time raises, naming the time, the variable and the value, so every
trajectory it returns has the outcome ``"completed"``; its :class:`Status` also
lists the steppers that stopped on the way, before another took over (``method="auto"``:
DOP853, then LSODA where DOP853 stops), each with its outcome, its time and its
reason. A stepper that stops says which outcome it met (:class:`Stop`, one name of
:data:`OUTCOMES`), so nothing reads the words of a message to learn it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["OUTCOMES", "Status", "Stop"]


OUTCOMES: Mapping[str, str] = {
    "completed": "every recorded time was reached",
    "overflowed": "a value or its rate of change left float64's range",
    "not_finite": "a value became non-finite otherwise (a division by zero)",
    "stepper_failed": "the stepper could not go on: its step size underflowed, it needed "
    "more steps than it may take (a stiff system for DOP853) or it made no progress",
    "diverged": "a gradient-descent run's loss became non-finite or passed its limit",
}
"""How a run, or one stepper of it, can end: name -> meaning (diffrax's ``RESULTS``)."""


@dataclass(frozen=True)
class Stop:
    """One stepper that stopped before the last recorded time.

    Parameters
    ----------
    outcome
        What it met: a name of :data:`OUTCOMES` other than ``"completed"``.
    t
        The time it got to, in units of $\\tau$.
    reason
        What happened, in words, to follow "the ODE" in a sentence.
    stepper
        Its name (``"dop853"``, ``"lsoda"``).

    Raises
    ------
    ValueError
        ``outcome`` is not such a name, or ``t`` is not a finite number.
    """

    outcome: str
    t: float
    reason: str
    stepper: str = ""

    def __post_init__(self) -> None:
        _check_outcome(self.outcome)
        if self.outcome == "completed":
            raise ValueError("a stop's outcome cannot be 'completed'")
        t = float(self.t)
        if not math.isfinite(t):
            raise ValueError(f"a stop's time must be finite, got {self.t!r}")
        object.__setattr__(self, "t", t)

    def describe(self) -> str:
        """The stop in words.

        Returns
        -------
        str
            ``"dop853 stopped: the ODE overflowed at t = 3.2 tau"``.
        """
        who = f"{self.stepper} stopped: " if self.stepper else ""
        return f"{who}the ODE {self.reason} at t = {self.t:.4g} tau"


@dataclass(frozen=True)
class Status:
    """How a run ended, and the steppers that stopped on the way.

    Parameters
    ----------
    outcome
        How the run ended, a name of :data:`OUTCOMES` (``"completed"`` for every
        trajectory a solve or a simulation returns).
    stops
        The steppers that stopped before the last recorded time, in order; for a run
        that completed, each was followed by another that took over.

    Raises
    ------
    ValueError
        ``outcome`` is not a name of :data:`OUTCOMES`, or a stop is not a :class:`Stop`.

    Examples
    --------
    >>> Status().completed
    True
    >>> fell_back = Status(stops=(Stop("stepper_failed", 0.0, "stalled", "dop853"),))
    >>> fell_back.completed, fell_back.stops[0].describe()
    (True, 'dop853 stopped: the ODE stalled at t = 0 tau')
    """

    outcome: str = "completed"
    stops: tuple[Stop, ...] = ()

    def __post_init__(self) -> None:
        _check_outcome(self.outcome)
        stops = tuple(self.stops)
        if not all(isinstance(s, Stop) for s in stops):
            raise ValueError(f"stops must be Stop values, got {stops!r:.80}")
        object.__setattr__(self, "stops", stops)

    @property
    def completed(self) -> bool:
        """Whether the run reached its last recorded time."""
        return self.outcome == "completed"

    def as_json(self) -> dict[str, Any]:
        """The status as JSON values (what a saved trajectory holds).

        Returns
        -------
        dict
            ``{"outcome": ..., "stops": [{"outcome", "t", "reason", "stepper"}, ...]}``.
        """
        return {
            "outcome": self.outcome,
            "stops": [
                {"outcome": s.outcome, "t": s.t, "reason": s.reason, "stepper": s.stepper}
                for s in self.stops
            ],
        }

    @classmethod
    def from_json(cls, value: Any) -> Status:
        """The status :meth:`as_json` wrote.

        Parameters
        ----------
        value
            The JSON value.

        Returns
        -------
        Status
            The status it describes.

        Raises
        ------
        ValueError
            ``value`` is not such a description (naming what is wrong).
        """
        if not isinstance(value, Mapping) or not isinstance(value.get("stops", []), list):
            raise ValueError("expected {'outcome': ..., 'stops': [...]}")
        stops = []
        for k, stop in enumerate(value.get("stops", [])):
            if not isinstance(stop, Mapping) or set(stop) - {"outcome", "t", "reason", "stepper"}:
                raise ValueError(f"stops[{k}]: expected {{'outcome', 't', 'reason', 'stepper'}}")
            reason, stepper = stop.get("reason", ""), stop.get("stepper", "")
            t = stop.get("t")
            if not isinstance(reason, str) or not isinstance(stepper, str):
                raise ValueError(f"stops[{k}]: reason and stepper must be texts")
            if isinstance(t, bool) or not isinstance(t, int | float):
                raise ValueError(f"stops[{k}].t: expected a number")
            stops.append(Stop(stop.get("outcome", ""), t, reason, stepper))
        return cls(value.get("outcome", ""), tuple(stops))


def _check_outcome(value: Any) -> None:
    if not isinstance(value, str) or value not in OUTCOMES:
        raise ValueError(f"outcome: expected one of {', '.join(OUTCOMES)}, got {value!r:.40}")
