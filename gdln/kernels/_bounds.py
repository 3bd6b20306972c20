r"""What the kernel functions check before and after they compute: sizes, seeds, values.

Before: counts are integers in range, seeds fit the generators, inputs are finite, and the
numbers a computation will hold (weights, activations, Jacobians, $n\times n$ matrices) are
estimated and refused beyond :class:`gdln.graphfile.Limits` ``batch_elements``, the limit a
simulation's numbers per step obey, before anything is allocated. After: a kernel that
left float64 (overflow to inf or nan, or underflow to 0 or to numbers too small to keep
their digits) is refused with what to change, never returned.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from .._bounded._limits import beyond, current_limits
from .._errors import shorten
from ..settings._constraints import Constraint, at_least
from ._errors import DGNSpecError

__all__ = [
    "MAX_SEED",
    "check_count",
    "check_finite",
    "check_gates",
    "check_held",
    "check_kernel",
    "check_seed",
    "check_value",
]

MAX_SEED = 2**63 - 1
"""Largest seed: numpy's and torch's generators both take ``0 <= seed < 2**63``."""

#: Smallest largest entry of a kernel whose entries down to float64's precision relative to
#: it are normal numbers (below, underflow has cost digits or made entries 0).
_SMALLEST_TOP = float(np.finfo(float).tiny / np.finfo(float).eps)


def check_value(name: str, value: Any, constraint: Constraint) -> Any:
    """``value`` read by ``constraint``, else DGNSpecError ``name: got X, expected Y``."""
    try:
        return constraint.read(value)
    except ValueError:
        raise DGNSpecError(f"{name}: got {shorten(value)}, expected {constraint}") from None


def check_count(name: str, value: Any, *, least: int = 1) -> int:
    """``value`` as a Python int ``>= least`` (a bool is no count), else DGNSpecError."""
    return int(check_value(name, value, at_least(least)))


def check_seed(seed: Any) -> int:
    """``seed`` as an int in ``[0, MAX_SEED]``, the range both random generators take."""
    if (
        isinstance(seed, bool)
        or not isinstance(seed, numbers.Integral)
        or not 0 <= int(seed) <= MAX_SEED
    ):
        raise DGNSpecError(f"seed: got {shorten(seed)}, expected an integer in [0, 2**63 - 1]")
    return int(seed)


def check_held(what: str, count: int) -> None:
    """Refuse a computation that would hold ``count`` numbers, beyond ``batch_elements``."""
    if count > current_limits().batch_elements:
        raise DGNSpecError(beyond("batch_elements", f"{what}: {count:.3g} numbers at once"))


def check_finite(name: str, value: torch.Tensor | np.ndarray) -> None:
    """Refuse an input (data, gates, weights, targets) holding inf or nan."""
    finite = (
        bool(torch.isfinite(value).all())
        if isinstance(value, torch.Tensor)
        else bool(np.all(np.isfinite(value)))
    )
    if not finite:
        raise DGNSpecError(f"{name}: holds inf or nan; expected finite numbers")


def check_gates(gates: Sequence[torch.Tensor]) -> None:
    """Refuse gates holding inf or nan: the feature network's values left float64."""
    for layer, G in enumerate(gates, start=1):
        if not bool(torch.isfinite(G).all()):
            raise DGNSpecError(
                f"the gates of hidden layer {layer} hold inf or nan: the feature network's "
                "values overflowed float64 (soft gates depend on their scale); lower sigma "
                "or the depth"
            )


def check_kernel(matrix: np.ndarray, what: str, advice: str) -> None:
    """Refuse a kernel that left float64: inf or nan, 0, or so small that it lost digits.

    ``what`` names the kernel and its network; ``advice`` says what to change.
    """
    if not np.all(np.isfinite(matrix)):
        raise DGNSpecError(f"{what}: the kernel overflowed float64 (inf or nan); {advice}")
    top = float(np.max(np.abs(matrix))) if matrix.size else 0.0
    if top * max(matrix.shape[0], 1) > np.finfo(float).max / 4:
        raise DGNSpecError(
            f"{what}: the kernel's entries ({top:.3g}) are too large for its spectrum in "
            f"float64; {advice}"
        )
    if top == 0.0:
        raise DGNSpecError(
            f"{what}: the kernel is 0: no path carries any example (every gate of some "
            f"layer is off for every input, or the values underflowed); {advice}"
        )
    if top < _SMALLEST_TOP:
        raise DGNSpecError(
            f"{what}: the kernel underflowed float64 (largest entry {top:.3g}); {advice}"
        )
