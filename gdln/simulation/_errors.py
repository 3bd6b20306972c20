"""The simulator's errors: a malformed option, and a run that diverged."""

from __future__ import annotations

from .._errors import GdlnError

__all__ = ["SimulationDivergedError", "SimulationSpecError"]


class SimulationSpecError(GdlnError, ValueError):
    """An option of :func:`gdln.simulate` is malformed; the message names it and its value."""


class SimulationDivergedError(GdlnError, FloatingPointError):
    """Training diverged: the loss became non-finite or exceeded the divergence limit.

    Parameters
    ----------
    message
        The one-line message: the step, the loss and the seed.
    step
        The first step at which the loss was bad.
    value
        The loss at that step (``nan`` or ``inf`` included).
    seed
        The seed of the first repetition that went bad.

    Attributes
    ----------
    step
        As given.
    value
        As given.
    seed
        As given.
    """

    def __init__(self, message: str, *, step: int, value: float, seed: int) -> None:
        self.step = step
        self.value = value
        self.seed = seed
        super().__init__(message)

    def __reduce__(self) -> tuple:
        """Rebuilt with its step, value and seed (sent back by a simulation worker)."""
        return (_diverged, (str(self), self.step, self.value, self.seed))


def _diverged(message: str, step: int, value: float, seed: int) -> SimulationDivergedError:
    return SimulationDivergedError(message, step=step, value=value, seed=seed)
