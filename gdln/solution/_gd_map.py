r"""The exact gradient-descent map $y \leftarrow y + \mathrm{lr}\,f(y)$ of the reduced dynamics.

From decoupled initial weights, full-batch gradient descent with learning rate ``lr`` on
the full network is, mode by mode, this map of the reduced variables (the Euler step
$dt = \mathrm{lr}$ of Eq. 10 of Saxe et al. 2022). It iterates the flow that
``numeric_flow(gd_map=True)`` gives: under ``lump="full"`` the tied system before the
elimination of Eq. (15), which only gradient flow respects
(:meth:`gdln.ReducedSystem.tied`).
"""

from __future__ import annotations

import numpy as np

from .._bounded._limits import tick
from .._errors import GdlnError
from ..reduction._numeric import NumericFlow
from ._stepper import worst_entry

__all__ = ["iterate_gd_map"]


def iterate_gd_map(
    flow: NumericFlow, lr: float, *, record: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    r"""Gradient descent $y \leftarrow y + \mathrm{lr}\,f(y)$: times ``(T,)``, states ``(T, n, 1)``.

    Up to the last of the increasing steps ``record``, each of them recorded (the steps
    of a :class:`~gdln.solution.Recording`, :meth:`~gdln.solution.Recording.steps_of`).
    A step that overflows is found by replaying from the last record.

    Raises
    ------
    GdlnError
        A step that overflows or turns non-finite (naming the step, its time, the
        variable and its value).
    """
    states, y, step = [], flow.y0.copy(), 0
    with np.errstate(all="ignore"):
        for target in record:
            good, good_step = y, step
            try:
                while step < target:
                    y = y + lr * flow.rhs(y)
                    step += 1
                    tick(step * lr)
                finite = bool(np.all(np.isfinite(y)))
            except (OverflowError, ZeroDivisionError):
                finite = False
            if not finite:
                step, y = _first_bad_step(flow, lr, good, good_step)
                raise GdlnError(
                    f"{flow.source}: the gradient-descent map diverged at step {step} "
                    f"(t = {step * lr:.4g} tau, lr={lr}), where {worst_entry(flow, y)}; lower lr or b0 (--b0)"
                )
            states.append(y.copy())
    return record * lr, np.array(states)[:, :, None]


def _first_bad_step(
    flow: NumericFlow, lr: float, y: np.ndarray, step: int
) -> tuple[int, np.ndarray]:
    """Replay the map from a finite state to the first step that is not finite."""
    try:
        while np.all(np.isfinite(y)):
            y = y + lr * flow.rhs(y)
            step += 1
    except (OverflowError, ZeroDivisionError):
        step += 1
    return step, y
