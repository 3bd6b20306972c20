"""How a simulation trains and what it records: :class:`SimulationSettings`.

Nothing heavy is imported here, so settings can be built and checked (by the command line,
say) before torch is loaded.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

from .._bounded._limits import current_limits
from .._device import check_device
from ..settings._constraints import NON_NEGATIVE, POSITIVE, Interval
from ..settings._declared import SettingError, read_setting
from ._errors import SimulationSpecError
from ._steps import log_spaced_steps

__all__ = [
    "RECORDING",
    "SimulationSettings",
    "check_minibatch",
    "check_positive",
    "check_recording",
    "count_records",
    "device_error",
    "recorded_steps_of",
]

MINIBATCH = frozenset({"sgd"})
"""The optimisers that average Eq. (1) over minibatches, and so need a batch size."""


def check_positive(name: str, value: Any, *, integer: bool, allow_zero: bool = False) -> None:
    """Refuse ``value`` unless it is a finite number (an int if ``integer``) > 0 (or >= 0).

    >>> check_positive("steps", 3, integer=True)
    >>> check_positive("lr", 0.0, integer=False)
    Traceback (most recent call last):
    ...
    gdln.simulation._errors.SimulationSpecError: lr: expected a finite number > 0, got 0.0
    """
    if integer:
        low = "left" if allow_zero else "neither"
        constraint = Interval(numbers.Integral, 0, None, closed=low, noun="int")
    else:
        constraint = NON_NEGATIVE if allow_zero else POSITIVE
    constraint.check(name, value, cls=SimulationSpecError)


def device_error(message: str) -> SimulationSpecError:
    """The error a bad ``device`` of a simulation raises: ``device: <message>``."""
    return SimulationSpecError(f"device: {message}")


def _check_flag(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise SimulationSpecError(f"{name}: expected True or False, got {value!r}")


def _record_steps(value: Any) -> tuple[int, ...] | str:
    """``record_steps`` as a tuple of ints >= 0, from any non-empty sequence of ints, or the
    text ``"log:N"`` (N >= 1) or ``"3,10,40"``."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("log:"):
            count = text[4:]
            if count.isdigit() and int(count) >= 1:
                return f"log:{int(count)}"
            raise SimulationSpecError(
                f"record_steps: expected 'log:N' with an int N >= 1, got {value!r}"
            )
        parts = [p.strip() for p in text.split(",")]
        if not all(p.isdigit() for p in parts):
            raise SimulationSpecError(
                f"record_steps: expected 'log:N' or a comma list of step numbers, got {value!r}"
            )
        value = [int(p) for p in parts]
    iterable = hasattr(value, "__iter__") and not isinstance(value, str | bytes)
    items = list(value) if iterable else []
    steps = [int(k) for k in items if isinstance(k, numbers.Integral) and not isinstance(k, bool)]
    if not steps or len(steps) != len(items) or min(steps) < 0:
        raise SimulationSpecError(
            f"record_steps: expected a non-empty list of ints >= 0, got {value!r}"
        )
    return tuple(steps)


#: The fields of :class:`SimulationSettings` that are declared settings of gdln
#: (:class:`gdln.settings.Settings`): ``None`` takes the problem's value.
DECLARED: tuple[str, ...] = ("optimizer", "batch_size", "momentum", "dtype", "device", "threads")
DECLARED += ("progress", "record_patterns")


RECORDING: tuple[str, ...] = ("record_every", "record_steps", "rsm", "record_weights")
RECORDING += ("record_singular_values", "diverge_above")
"""The keywords of :func:`gdln.simulate` that say what a run records and when it stops
(not settings of a problem: they belong to one call)."""


def check_recording(
    *,
    record_every: Any = None,
    record_steps: Any = None,
    rsm: Any = False,
    record_weights: Any = False,
    record_singular_values: Any = True,
    diverge_above: Any = 1e8,
) -> dict[str, Any]:
    """The recording keywords of :func:`gdln.simulate` checked (:data:`RECORDING`):
    ``record_steps`` read as a tuple of steps or ``"log:N"``, the others as given.

    Raises
    ------
    SimulationSpecError
        A malformed value, or both ``record_steps`` and ``record_every`` (other than 1).
    """
    check_positive("diverge_above", diverge_above, integer=False)
    if record_every is not None:
        check_positive("record_every", record_every, integer=True)
    if record_steps is not None:
        record_steps = _record_steps(record_steps)
        if record_every not in (None, 1):
            raise SimulationSpecError(
                "record_steps: give either record_steps or record_every, got both "
                f"(record_every={record_every!r})"
            )
    flags = {
        "rsm": rsm,
        "record_weights": record_weights,
        "record_singular_values": record_singular_values,
    }
    for name, value in flags.items():
        _check_flag(name, value)
    return {
        "record_every": record_every,
        "record_steps": record_steps,
        "rsm": rsm,
        "record_weights": record_weights,
        "record_singular_values": record_singular_values,
        "diverge_above": diverge_above,
    }


def check_minibatch(optimizer: str, batch_size: Any) -> None:
    """Refuse a batch size without a minibatch optimiser, or a minibatch optimiser
    without a positive batch size."""
    if optimizer in MINIBATCH:
        check_positive("batch_size", batch_size, integer=True)
    elif batch_size is not None:
        raise SimulationSpecError(
            f"batch_size: only used with optimizer='sgd', got {batch_size!r} with {optimizer!r}"
        )


def count_records(record_every: int | None, record_steps: Any, steps: int) -> int:
    """How many steps a run of ``steps`` steps records (``record_steps``, a tuple or
    ``"log:N"``, else every ``record_every`` steps and the last)."""
    if isinstance(record_steps, str):  # "log:N": at most N + 1 steps
        return int(record_steps[4:]) + 1
    if record_steps is not None:
        return len(set(record_steps))
    every = record_every or 1
    return steps // every + 1 + (steps % every != 0)


def recorded_steps_of(
    record_every: int | None, record_steps: Any, steps: int, points: int
) -> dict[str, Any]:
    """The steps a run of ``steps`` steps records: ``{"steps": ...}`` (given, or
    ``"log:N"`` resolved) or ``{"every": ...}`` (given, else about ``points`` evenly
    spaced steps)."""
    if isinstance(record_steps, str):  # "log:N"
        count = int(record_steps[4:])
        if count >= current_limits().points:
            what = f"record_steps={record_steps}"
            raise SimulationSpecError(current_limits().exceeded("points", what))
        return {"steps": tuple(log_spaced_steps(steps, count))}
    if record_steps is not None:
        return {"steps": tuple(record_steps)}
    if record_every is None:
        return {"every": max(1, steps // (points - 1))}
    return {"every": record_every}


@dataclass(frozen=True)
class SimulationSettings:
    r"""How :func:`gdln.simulate` trains and what it records: the spelling of an earlier
    release.

    .. deprecated::
       Pass the fields as keywords of :func:`gdln.simulate` (and of
       :func:`gdln.compare`) instead: ``simulate(problem, optimizer="sgd",
       batch_size=8)``. A value passed as ``settings=`` is translated into those keywords
       at the door, with one warning (:data:`gdln.settings.OLD_SPELLINGS`); the value
       itself still checks its fields when made.

    The first seven fields and ``record_patterns`` are settings of gdln
    (:class:`gdln.settings.Settings`, declared there once with their defaults and
    meanings): ``None`` takes the problem's value (its
    graph file's ``simulate:`` section, else the declared default); :meth:`resolved`
    fills them in. Every field given is checked when the settings are made; a bad one
    raises :class:`~gdln.simulation.SimulationSpecError` naming it. Change a field with
    :func:`dataclasses.replace`.

    Parameters
    ----------
    optimizer, batch_size, momentum, dtype, device, threads, progress, record_every
        As the keywords of the same names of :func:`gdln.simulate`.
    record_steps, rsm, record_weights, diverge_above, record_patterns
        As the keywords of the same names of :func:`gdln.simulate`.

    Raises
    ------
    SimulationSpecError
        A field is malformed or two fields contradict each other.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eqs. (1)-(2): ``"gd"`` is the Euler discretisation of
    the gradient flow of the loss.

    Examples
    --------
    >>> SimulationSettings(optimizer="sgd", batch_size=8, momentum=0.9).momentum
    0.9
    >>> SimulationSettings(record_steps=[0, 10, 100]).record_steps
    (0, 10, 100)
    """

    optimizer: str | None = None
    batch_size: int | None = None
    momentum: float | None = None
    dtype: str | None = None
    device: str | None = None
    threads: Any = None
    progress: Any = None
    record_every: int | None = None
    record_steps: tuple[int, ...] | str | None = None
    rsm: bool = False
    record_weights: bool = False
    diverge_above: float = 1e8
    record_patterns: bool | None = None

    def __post_init__(self) -> None:
        for name in DECLARED:
            value = getattr(self, name)
            if value is None:
                continue
            if name == "device":  # gdln's one device rule, one message shape
                object.__setattr__(self, name, check_device(value, device_error))
                continue
            try:
                object.__setattr__(self, name, read_setting(name, value))
            except SettingError as err:
                raise SimulationSpecError(str(err)) from None
        if self.batch_size is not None and self.optimizer is not None:
            check_minibatch(self.optimizer, self.batch_size)
        own = (name for name in RECORDING if hasattr(self, name))  # the old type's fields
        checked = check_recording(**{name: getattr(self, name) for name in own})
        object.__setattr__(self, "record_steps", checked["record_steps"])
