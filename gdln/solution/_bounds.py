r"""What the numbers of a run imply, checked before it starts.

A horizon $t_\mathrm{max}$ and a learning rate imply ``round(t_max / lr)`` steps, a number
of recorded times implies arrays of that length, and a simulation's seeds, rows and
node sizes imply the numbers it holds per step. These checks refuse a run whose numbers
imply absurd work (beyond :class:`gdln.graphfile.Limits` ``steps``, ``points``,
``batch_elements``) or none at all (zero steps), with one line that names the numbers,
the limit and how to raise it; :func:`gdln.solve`, :func:`gdln.simulate` and
:func:`gdln.compare` share them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from .._bounded._limits import beyond, current_limits
from .._errors import GdlnError, shorten
from ..settings._constraints import POSITIVE, at_least

__all__ = [
    "check_count",
    "check_solve_settings",
    "check_times",
    "positive_number",
    "steps_for",
]


def positive_number(name: str, value: Any, *, cls: type[GdlnError] = GdlnError) -> float:
    """``value`` as a finite float > 0 (an int, float or sympy number), else ``cls``.

    An integer too large for a float (``10**400``) is refused, not an OverflowError.

    >>> positive_number("t_max", 10**2)
    100.0
    >>> positive_number("lr", 0)
    Traceback (most recent call last):
    ...
    gdln._errors.GdlnError: lr: expected a finite number > 0, got 0
    """
    return float(POSITIVE.check(name, value, cls=cls))


def check_count(
    name: str, value: Any, *, least: int, limit: str, cls: type[GdlnError] = GdlnError
) -> int:
    """``value`` as an int in ``[least, Limits.<limit>]``, else ``cls`` naming both.

    >>> check_count("n_points", 201, least=2, limit="points")
    201
    """
    count = at_least(least, noun="int").check(name, value, cls=cls)
    if count > getattr(current_limits(), limit):
        raise cls(beyond(limit, f"{name}={shorten(value)}"))
    return int(count)


def steps_for(
    t_max: Any,
    lr: Any,
    *,
    momentum: float = 0.0,
    cls: type[GdlnError] = GdlnError,
) -> int:
    r"""The steps that reach ``t_max``: ``round(t_max (1 - momentum) / lr)``, checked.

    Time is $t/\tau = \mathrm{lr}\cdot\mathrm{step}/(1-\mu)$ (the Euler step of Eq. (2)
    of Saxe et al. 2022, with heavy-ball momentum $\mu$).

    Parameters
    ----------
    t_max, lr
        The horizon in units of $\tau$ and the learning rate: finite numbers > 0.
    momentum
        Heavy-ball momentum $\mu\in[0, 1)$.
    cls
        The error class to raise.

    Returns
    -------
    int
        The number of steps, between 1 and ``Limits.steps``.

    Raises
    ------
    GdlnError
        (``cls``) ``t_max`` or ``lr`` is not a finite number > 0, the horizon is less than
        half a step (no step at all), or it takes more than ``Limits.steps`` steps.

    Examples
    --------
    >>> steps_for(10, 0.05)
    200
    >>> steps_for(10, 100)
    Traceback (most recent call last):
    ...
    gdln._errors.GdlnError: t_max: 10 is less than one step of lr=100 (t_max/lr = 0.1 rounds ...
    """
    horizon = positive_number("t_max", t_max, cls=cls)
    rate = positive_number("lr", lr, cls=cls)
    exact = horizon * (1.0 - momentum) / rate  # inf, not an error, if it overflows
    if not exact < current_limits().steps + 0.5:
        raise cls(
            beyond("steps", f"t_max/lr = {horizon:g}/{rate:g} = {exact:.3g} steps")
            + "; raise lr or lower t_max"
        )
    steps = round(exact)
    if steps < 1:
        raise cls(
            f"t_max: {horizon:g} is less than one step of lr={rate:g} (t_max/lr = "
            f"{exact:.3g} rounds to 0 steps); lower lr or raise t_max"
        )
    return steps


def check_solve_settings(
    t_max: Any, *, lr: Any = None, n_points: Any = 201
) -> tuple[float, float | None]:
    r"""Check the settings of :func:`solve` before anything is computed.

    Parameters
    ----------
    t_max
        Final time in units of $\tau$: a finite number > 0.
    lr
        ``None`` (the ODE), or the learning rate of the map: a finite number > 0 such
        that ``round(t_max / lr)`` is between 1 and :class:`gdln.graphfile.Limits`
        ``steps``.
    n_points
        Number of recorded times: an int from 2 to ``Limits.points``.

    Returns
    -------
    tuple
        ``t_max`` and ``lr`` as floats (``lr`` ``None`` for the ODE).

    Raises
    ------
    GdlnError
        A setting is malformed or implies no work or work beyond the limits; the message
        names the limit and its environment variable.

    Examples
    --------
    >>> check_solve_settings(10, lr=0.05, n_points=11)
    (10.0, 0.05)
    """
    horizon = positive_number("t_max", t_max)
    check_count("points", n_points, least=2, limit="points")
    if lr is None:
        return horizon, None
    steps_for(horizon, lr)
    return horizon, positive_number("lr", lr)


def check_times(times: npt.ArrayLike, t_max: float, lr: float | None) -> np.ndarray:
    """The ``times`` of :func:`solve`, checked: from 0, increasing, within ``t_max``, and
    whole numbers of steps of ``lr`` when it is given."""
    try:
        out = np.asarray(times, dtype=float)
    except (TypeError, ValueError) as err:
        raise GdlnError(f"times: expected an array of numbers, got {times!r:.60}") from err
    if (
        out.ndim != 1
        or out.size == 0
        or not np.all(np.isfinite(out))
        or out[0] != 0
        or np.any(np.diff(out) <= 0)
        or out[-1] > t_max * (1 + 1e-12)
    ):
        raise GdlnError(
            f"times: expected increasing times from 0 to at most t_max={t_max}, got {out!r:.80}"
        )
    if lr is not None:
        steps = out / lr
        off = np.abs(steps - np.rint(steps)) > 1e-9 * np.maximum(1.0, steps)
        if np.any(off):
            raise GdlnError(
                f"times: {out[off][0]} is not a whole number of steps of lr={lr}; "
                "the gradient-descent map is recorded at steps t/lr"
            )
    return out
