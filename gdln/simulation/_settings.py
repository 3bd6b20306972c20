"""How a simulation trains and what it records: :class:`SimulationSettings`.

Only the standard library is imported here, so settings can be built and checked (by the
command line, say) before torch is loaded.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._errors import SimulationSpecError
from ._names import DTYPES, OPTIMIZERS

__all__ = ["SimulationSettings", "check_positive"]

_DEVICE = re.compile(r"auto|cpu(:\d+)?|cuda(:\d+)?")
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
    kind = numbers.Integral if integer else numbers.Real
    ok = isinstance(value, kind) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (value >= 0 if allow_zero else value > 0)
    if not ok:
        what = "an int" if integer else "a finite number"
        raise SimulationSpecError(
            f"{name}: expected {what} {'>=' if allow_zero else '>'} 0, got {value!r}"
        )


def _check_choice(name: str, value: Any, choices: Mapping[str, Any] | Sequence[str]) -> None:
    if not (isinstance(value, str) and value in choices):
        raise SimulationSpecError(f"{name}: expected one of {sorted(choices)}, got {value!r}")


def _check_flag(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise SimulationSpecError(f"{name}: expected True or False, got {value!r}")


def _record_steps(value: Any) -> tuple[int, ...]:
    """``record_steps`` as a tuple of ints >= 0, from any non-empty sequence of ints."""
    iterable = hasattr(value, "__iter__") and not isinstance(value, str | bytes)
    items = list(value) if iterable else []
    steps = [int(k) for k in items if isinstance(k, numbers.Integral) and not isinstance(k, bool)]
    if not steps or len(steps) != len(items) or min(steps) < 0:
        raise SimulationSpecError(
            f"record_steps: expected a non-empty list of ints >= 0, got {value!r}"
        )
    return tuple(steps)


@dataclass(frozen=True)
class SimulationSettings:
    r"""How :func:`gdln.simulate` trains and what it records.

    Every field is checked when the settings are made; a bad one raises
    :class:`~gdln.simulation.SimulationSpecError` naming it. Change a field with
    :func:`dataclasses.replace`.

    Parameters
    ----------
    optimizer
        A key of :data:`~gdln.simulation.OPTIMIZERS`: ``"gd"`` (full batch) or ``"sgd"``
        (minibatches of ``batch_size`` examples drawn with probability equal to their
        weight, per seed).
    batch_size
        Minibatch size, for ``"sgd"`` only.
    momentum
        Heavy-ball momentum $\mu\in[0, 1)$: $b \leftarrow \mu b + \nabla$,
        $W \leftarrow W - \mathrm{lr}\, b$; the recorded time advances
        $\mathrm{lr}/(1-\mu)$ per step.
    dtype
        One of :data:`~gdln.simulation.DTYPES`: ``"float64"`` or ``"float32"``.
    device
        ``None``/``"auto"`` (CUDA when present), ``"cpu"`` or ``"cuda[:k]"``.
    threads
        CPU threads for torch during the run (restored afterwards). ``None``: chosen from
        the work of a training step, one thread unless its mean operation is large, and
        never more than the cores free at the start (:func:`auto_threads
        <gdln.simulation._threads.auto_threads>`); the trajectory's ``meta["threads"]``
        says how many ran. Small networks run fastest on one thread, and on a busy
        machine several threads can be orders of magnitude slower.
    record_every
        Record at steps ``0, record_every, 2 record_every, ...`` and at the last step.
    record_steps
        Record at exactly these steps instead (ints in ``[0, steps]``, any order, e.g.
        :func:`~gdln.simulation.log_spaced_steps`); any int sequence, stored as a tuple.
        ``record_every`` must then stay 1.
    rsm
        Record $h_v h_v^\top$ at hidden nodes (Fig. 4g), on the evaluation examples if
        given, else on the training examples.
    record_weights
        Also record every weight matrix as ``"W/<edge>"`` ``(T, S, |t|, |s|)``.
    diverge_above
        The run stops with :class:`~gdln.simulation.SimulationDivergedError` once a loss
        is non-finite or above this value.
    progress
        Show a tqdm progress bar.

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

    optimizer: str = "gd"
    batch_size: int | None = None
    momentum: float = 0.0
    dtype: str = "float64"
    device: str | None = None
    threads: int | None = None
    record_every: int = 1
    record_steps: tuple[int, ...] | None = None
    rsm: bool = False
    record_weights: bool = False
    diverge_above: float = 1e8
    progress: bool = False

    def __post_init__(self) -> None:
        self._check_training()
        self._check_hardware()
        self._check_recording()

    def _check_training(self) -> None:
        _check_choice("optimizer", self.optimizer, OPTIMIZERS)
        if self.optimizer in MINIBATCH:
            check_positive("batch_size", self.batch_size, integer=True)
        elif self.batch_size is not None:
            raise SimulationSpecError(
                f"batch_size: only used with optimizer='sgd', got {self.batch_size!r} with "
                f"{self.optimizer!r}"
            )
        momentum = self.momentum
        if not (
            isinstance(momentum, numbers.Real)
            and not isinstance(momentum, bool)
            and 0.0 <= momentum < 1.0
        ):
            raise SimulationSpecError(f"momentum: expected a number in [0, 1), got {momentum!r}")
        check_positive("diverge_above", self.diverge_above, integer=False)

    def _check_hardware(self) -> None:
        _check_choice("dtype", self.dtype, DTYPES)
        device = self.device
        if device is not None and not (isinstance(device, str) and _DEVICE.fullmatch(device)):
            raise SimulationSpecError(
                f"device: expected 'auto', 'cpu' or 'cuda[:k]', got {device!r}"
            )
        if self.threads is not None:
            check_positive("threads", self.threads, integer=True)

    def _check_recording(self) -> None:
        check_positive("record_every", self.record_every, integer=True)
        if self.record_steps is not None:
            object.__setattr__(self, "record_steps", _record_steps(self.record_steps))
            if self.record_every != 1:
                raise SimulationSpecError(
                    "record_steps: give either record_steps or record_every, got both "
                    f"(record_every={self.record_every!r})"
                )
        for name in ("rsm", "record_weights", "progress"):
            _check_flag(name, getattr(self, name))
