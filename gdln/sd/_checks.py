"""The error of the stochastic-depth functions and the checks they share."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._errors import GraphSpecError

__all__ = ["StochasticDepthError"]


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


def check_depth(L: int) -> int:
    """``L`` as a positive Python integer (the number of residual blocks)."""
    if isinstance(L, bool) or not isinstance(L, (int, np.integer)) or L < 1:
        raise StochasticDepthError(
            f"L = {L!r} is not a depth; expected a positive integer", key="L"
        )
    return int(L)
