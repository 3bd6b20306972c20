r"""What every ODE stepper of :func:`gdln.solve` is: the small base of the stepper table.

A stepper integrates the reduced dynamics $\tau\dot y = f(y; c)$ (Eq. 10 of Saxe et al.
2022, lumped) of a :class:`~gdln.reduction.NumericFlow` for a batch of initial states
``(n, batch)`` and constants ``(k, batch)`` through given times, each member as it would
be integrated alone, and records the states at exactly those times. A single solve is a
batch of one. Where it cannot finish it raises :class:`Stopped`, saying why, when, in
which member and where; :mod:`gdln.solution._methods` holds the table of steppers by name
and the ``"auto"`` rule.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

import numpy as np

from ..reduction._numeric import NumericFlow
from ._series import variable_key
from ._status import Stop

__all__ = ["Stepper", "Stopped", "worst_entry", "worst_member"]


class Stopped(Exception):
    """A stepper stopped before the last recorded time.

    Attributes
    ----------
    reason
        What happened, to follow "the ODE" in a message (``"overflowed"``, ...).
    t
        The time it got to.
    state
        The state ``(n,)`` of the member that stopped it, there.
    member
        Which member of the batch.
    outcome
        What it met: a name of :data:`~gdln.solution.OUTCOMES`.
    """

    def __init__(
        self,
        reason: str,
        t: float,
        state: np.ndarray,
        member: int = 0,
        outcome: str = "stepper_failed",
    ):
        super().__init__(reason)
        self.reason, self.t, self.state, self.member = reason, float(t), state, member
        self.outcome = outcome

    def stop(self, stepper: str) -> Stop:
        """This stop as the :class:`~gdln.solution.Stop` of a status."""
        return Stop(self.outcome, self.t, self.reason, stepper)


class Stepper(ABC):
    """A method of integrating a :class:`~gdln.reduction.NumericFlow` (one entry of the
    table :data:`gdln.solution._methods.STEPPERS`)."""

    name: ClassVar[str]
    """The name in the table, and what ``meta["integrator"]`` starts with."""

    @abstractmethod
    def integrate(
        self,
        flow: NumericFlow,
        y0: np.ndarray,
        constants: np.ndarray,
        times: np.ndarray,
        *,
        rtol: float,
        atol: float,
    ) -> tuple[np.ndarray, str]:
        """States ``(T, n, batch)`` at ``times`` (``times[0]`` is the start, where the
        states are ``y0``), and the integrator that computed them (for
        ``meta["integrator"]``).

        Raises
        ------
        Stopped
            Where the stepper cannot reach ``times[-1]``.
        """

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def worst_member(states: np.ndarray) -> int:
    """The member ``(n, batch)`` that went furthest: the first with a value that is not
    finite, else the one with the largest value in size."""
    bad = ~np.isfinite(states).all(axis=0)
    if bad.any():
        return int(np.flatnonzero(bad)[0])
    return int(np.argmax(np.abs(states).max(axis=0))) if states.size else 0


def worst_entry(flow: NumericFlow, state: np.ndarray) -> str:
    """The entry of ``state`` ``(n,)`` that went furthest, for messages: the first that is
    not finite, else the largest in size, as ``name = value in mode a`` (the variable's
    series name)."""
    bad = np.flatnonzero(~np.isfinite(state))
    i = int(bad[0]) if len(bad) else int(np.argmax(np.abs(state)))
    name, system, mode = flow.labels[i]
    return f"{variable_key(name, system, flow.systems)} = {state[i]:.4g} in mode {mode}"
