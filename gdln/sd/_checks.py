"""The error of the stochastic-depth functions and the checks they share.

Sizes are bounded before anything is allocated: a chain of $L$ blocks and $M$ modes holds
about ``NUMBERS_PER_BLOCK`` numbers per block and mode (its factors, their prefix and
suffix products, the gradient, the depth and growth figures), refused beyond
:class:`gdln.graphfile.Limits` ``batch_elements``. Inputs must be finite, and a result
that leaves float64 (a chain whose expected square overflows, or inf - inf) is refused
by :func:`finite_results` with what to change, never returned as inf or nan.
"""

from __future__ import annotations

import contextlib
import numbers
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from .._bounded._limits import beyond, current_limits
from .._errors import GraphSpecError, shorten
from ..settings._constraints import at_least

__all__ = ["NUMBERS_PER_BLOCK", "StochasticDepthError"]

#: Numbers a chain computation holds per block and mode (measured: ``gdln sd -L 1000000``
#: peaks about 150 MB above its start, some 19 float64 per block).
NUMBERS_PER_BLOCK = 20


class StochasticDepthError(GraphSpecError):
    """A stochastic-depth setting (survival mode, probability, mask, budget) is invalid.

    Parameters
    ----------
    message
        What is wrong and what was expected.
    source
        The file (or other origin) the problem was found in, if any.
    key
        The setting at fault, e.g. ``"p"`` or ``"budget"``.
    """


def check_probabilities(
    p: Sequence[float] | np.ndarray, *, key: str = "p", positive: bool = False
) -> np.ndarray:
    """``p`` as a non-empty float vector of probabilities (each in $(0, 1]$ if ``positive``)."""
    p = np.asarray(p, dtype=float)  # type: ignore[assignment]
    if p.ndim != 1 or p.size == 0:
        raise StochasticDepthError(
            f"{key} must be a non-empty one-dimensional array of survival probabilities, "
            f"got shape {p.shape}",
            key=key,
        )
    bad = np.flatnonzero(~((p >= 0.0) & (p <= 1.0)))
    if bad.size:
        i = int(bad[0])
        raise StochasticDepthError(
            f"survival probability {key}[{i}] = {float(p[i])!r} is outside [0, 1]; "
            "expected every p_l in [0, 1]",
            key=f"{key}[{i}]",
        )
    if positive and np.any(p == 0.0):
        i = int(np.flatnonzero(p == 0.0)[0])
        raise StochasticDepthError(
            f"survival probability {key}[{i}] = 0 cannot be used with the inverted mask "
            "(it divides by p_l); expected p_l in (0, 1]",
            key=f"{key}[{i}]",
        )
    return p


def check_depth(L: int, modes: int = 1) -> int:
    """``L`` as a positive Python integer (the number of residual blocks), whose chains
    of ``modes`` modes hold at most ``batch_elements`` numbers."""
    if isinstance(L, bool) or not isinstance(L, (int, np.integer)) or L < 1:
        raise StochasticDepthError(
            f"L = {shorten(L)} is not a depth; expected a positive integer", key="L"
        )
    held = int(L) * int(modes) * NUMBERS_PER_BLOCK
    if held > current_limits().batch_elements:
        what = f"{int(L)} blocks" + (f" x {modes} modes" if modes > 1 else "")
        raise StochasticDepthError(
            beyond("batch_elements", f"{what} ({held:.3g} numbers)"), key="L"
        )
    return int(L)


def check_count(name: str, value: Any, *, least: int = 1) -> int:
    """``value`` as a Python int ``>= least`` (a bool is no count)."""
    constraint = at_least(least)
    try:
        return int(constraint.read(value))
    except ValueError:
        raise StochasticDepthError(
            f"{name} = {shorten(value)}; expected {constraint}", key=name
        ) from None


def check_held(what: str, count: int, key: str) -> None:
    """Refuse a computation that would hold ``count`` numbers, beyond ``batch_elements``."""
    if count > current_limits().batch_elements:
        raise StochasticDepthError(
            beyond("batch_elements", f"{what}: {count:.3g} numbers"), key=key
        )


def check_finite(name: str, value: Any) -> np.ndarray:
    """``value`` as a float array of finite numbers, else :class:`StochasticDepthError`."""
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError, OverflowError) as err:
        raise StochasticDepthError(
            f"{name} = {shorten(value)}: expected numbers", key=name
        ) from err
    if not np.all(np.isfinite(array)):
        shown = array.reshape(-1)[np.flatnonzero(~np.isfinite(array.reshape(-1)))[0]]
        raise StochasticDepthError(
            f"got {shorten(float(shown))}; expected finite numbers", key=name
        )
    return array


@contextlib.contextmanager
def quiet_floats() -> Iterator[None]:
    """numpy's overflow and invalid-value warnings off: :func:`finite_results` decides."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        yield


def finite_results(what: str, *values: Any) -> None:
    """Refuse results that left float64 (inf or nan) while finite inputs were given."""
    for value in values:
        if isinstance(value, numbers.Number) and not isinstance(value, bool):
            bad = not np.isfinite(float(value))  # type: ignore[arg-type]
        else:
            bad = not np.all(np.isfinite(np.asarray(value, dtype=float)))
        if bad:
            raise StochasticDepthError(
                f"{what} leaves float64 (inf or nan): the product of the chain's factors "
                "1 + kappa b_l, or its products with s and d, overflows; use smaller |b|, s "
                "or d, fewer blocks or stable scaling",
                key="b",
            )
