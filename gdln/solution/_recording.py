r"""What a run records, and at which times: one spec for every solve and simulation.

diffrax's ``SaveAt`` in gdln's words. :func:`gdln.solve` (every route) and
:func:`gdln.simulate` turn their keywords (``points``, ``times``, a simulation's
``record_every`` and ``record_steps``, ``record_weights`` and ``rsm``) into one
:class:`Recording`, record what it says, and keep it on the trajectory they return
(:attr:`gdln.Trajectory.recording`). A continuous run (an ODE) is recorded at times, a
discrete one (gradient descent: the reduced map, the full-matrix map, a simulation) at
whole steps, $t/\tau = \mathrm{lr}\cdot\mathrm{step}$ (with momentum $\mu$,
$\mathrm{lr}/(1-\mu)$ per step).
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Recording"]

_WHEN = ("points", "times", "every", "steps")


@dataclass(frozen=True)
class Recording:
    r"""What a run records and when: exactly one of ``points``, ``times``, ``every``,
    ``steps``, and what beside the loss and the series every run records.

    Parameters
    ----------
    points
        That many times evenly spaced from 0 to the horizon (step 0 and the last included);
        a discrete run takes the nearest whole steps (each once: every step when there are
        fewer).
    times
        Exactly these times (increasing, from 0); a discrete run records the steps
        ``t/lr``.
    every
        A discrete run: steps ``0, every, 2 every, ...`` and the last.
    steps
        A discrete run: exactly these steps.
    weights
        Record the weight matrices too (``W/<edge>``, ``W[<edge>]``).
    rsm
        Record the representational similarity $h_vh_v^\top$ at hidden nodes.
    singular_values
        Record the singular values of every weight matrix (``sv/<edge>``); a full SVD per
        edge at every record, most of a wide network's run when it records often.

    Raises
    ------
    ValueError
        Not exactly one of ``points``, ``times``, ``every``, ``steps``, or one that is
        not a count of at least 1 (``points``: 2), or a sequence of them.

    Examples
    --------
    >>> Recording(points=5).steps_of(8).tolist()
    [0, 2, 4, 6, 8]
    >>> Recording(every=3).steps_of(8).tolist()
    [0, 3, 6, 8]
    >>> Recording(points=3).times_of(10.0).tolist()
    [0.0, 5.0, 10.0]
    """

    points: int | None = None
    times: tuple[float, ...] | None = None
    every: int | None = None
    steps: tuple[int, ...] | None = None
    weights: bool = False
    rsm: bool = False
    singular_values: bool = True

    def __post_init__(self) -> None:
        given = [name for name in _WHEN if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(
                f"give exactly one of points, times, every and steps, got {given or 'none'}"
            )
        for name, least in (("points", 2), ("every", 1)):
            value = getattr(self, name)
            if value is not None and not _count(value, least):
                raise ValueError(f"{name}: expected an integer >= {least}, got {value!r:.40}")
        if self.times is not None:
            times = tuple(float(t) for t in np.asarray(self.times, dtype=float).ravel())
            if not times:
                raise ValueError("times: expected at least one time")
            object.__setattr__(self, "times", times)
        if self.steps is not None:
            steps = tuple(self.steps)
            if not steps or not all(_count(k, 0) for k in steps):
                raise ValueError(f"steps: expected integers >= 0, got {steps!r:.60}")
            object.__setattr__(self, "steps", tuple(int(k) for k in steps))
        for name in ("weights", "rsm", "singular_values"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name}: expected True or False")

    def __repr__(self) -> str:
        when = next(name for name in _WHEN if getattr(self, name) is not None)
        value = getattr(self, when)
        shown = f"<{len(value)}>" if isinstance(value, tuple) and len(value) > 6 else repr(value)
        extra = "".join(f", {name}=True" for name in ("weights", "rsm") if getattr(self, name))
        extra += "" if self.singular_values else ", singular_values=False"
        return f"Recording({when}={shown}{extra})"

    def times_of(self, t_max: float) -> np.ndarray:
        """The times a continuous run (an ODE) records up to ``t_max``.

        Parameters
        ----------
        t_max
            The horizon, in units of $\\tau$.

        Returns
        -------
        numpy.ndarray
            ``points`` evenly spaced times from 0 to ``t_max``, or ``times``.

        Raises
        ------
        ValueError
            The spec names steps (``every``, ``steps``): a continuous run has none.
        """
        if self.points is not None:
            return np.linspace(0.0, t_max, self.points)
        if self.times is not None:
            return np.asarray(self.times)
        raise ValueError(f"{self!r} names steps; a continuous run is recorded at times")

    def steps_of(self, total: int, *, lr: float | None = None) -> np.ndarray:
        """The steps a discrete run of ``total`` steps records, increasing.

        Parameters
        ----------
        total
            The run's number of steps.
        lr
            Its time per step (for ``times``).

        Returns
        -------
        numpy.ndarray
            The recorded steps, each once.

        Raises
        ------
        ValueError
            ``times`` without ``lr``, or a step beyond ``total``.
        """
        if self.points is not None:
            count = min(self.points, total + 1)
            return np.unique(np.linspace(0, total, count).round().astype(int))
        if self.every is not None:
            steps = np.arange(0, total + 1, self.every)
            return steps if steps[-1] == total else np.append(steps, total)
        if self.times is not None:
            if lr is None:
                raise ValueError("times: a discrete run needs its time per step, lr")
            return np.rint(np.asarray(self.times) / lr).astype(int)
        assert self.steps is not None
        if max(self.steps) > total:
            raise ValueError(
                f"steps: expected a non-empty list of ints in [0, steps={total}], "
                f"got {list(self.steps)}"
            )
        return np.array(sorted(set(self.steps)))

    def as_json(self) -> dict[str, Any]:
        """The spec as JSON values (what a saved trajectory holds).

        Returns
        -------
        dict
            The one of ``points``, ``times``, ``every``, ``steps`` given, ``weights``
            and ``rsm``, and ``singular_values`` where it is ``False`` (so that an earlier
            release, which knows no such key, reads what it can).
        """
        out: dict[str, Any] = {
            name: list(v) if isinstance(v, tuple) else v
            for name in _WHEN
            if (v := getattr(self, name)) is not None
        }
        out |= {"weights": self.weights, "rsm": self.rsm}
        return out if self.singular_values else out | {"singular_values": False}

    @classmethod
    def from_json(cls, value: Any) -> Recording:
        """The spec :meth:`as_json` wrote.

        Parameters
        ----------
        value
            The JSON value.

        Returns
        -------
        Recording
            The spec it describes.

        Raises
        ------
        ValueError
            ``value`` is not such a description (naming what is wrong).
        """
        known = {*_WHEN, "weights", "rsm", "singular_values"}
        if not isinstance(value, Mapping) or set(value) - known:
            raise ValueError(f"expected a mapping of {', '.join(sorted(known))}")
        given = dict(value)
        for name in ("times", "steps"):
            if name in given and not isinstance(given[name], Sequence):
                raise ValueError(f"{name}: expected a list")
        if "times" in given and not all(
            isinstance(t, int | float) and not isinstance(t, bool) for t in given["times"]
        ):
            raise ValueError("times: expected a list of numbers")
        return cls(**given)


def _count(value: Any, least: int) -> bool:
    """Whether ``value`` is an integer (not a bool) of at least ``least``."""
    return (
        isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) >= least
    )
