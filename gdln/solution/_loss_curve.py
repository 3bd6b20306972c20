"""What a loss curve says at a glance: the time it takes to halve."""

from __future__ import annotations

import numpy as np

__all__ = ["time_to_half_loss"]


def time_to_half_loss(t: np.ndarray, loss: np.ndarray) -> float | None:
    r"""First time with $L(t) \le L(0)/2$, linearly interpolated; ``None`` if never.

    Parameters
    ----------
    t
        ``(T,)`` times.
    loss
        ``(T,)`` loss at those times.

    Returns
    -------
    float or None
        The first time the loss falls to half its initial value, or ``None`` if it
        never does.

    Raises
    ------
    ValueError
        ``t`` and ``loss`` are empty, of other shapes, or $t$ or $L(0)$ is not finite.
    """
    t, loss = np.asarray(t, float), np.asarray(loss, float)
    if t.ndim != 1 or t.shape != loss.shape or not t.size or not np.isfinite([*t, loss[0]]).all():
        raise ValueError(f"t {t.shape}, loss {loss.shape}: expected finite t and L(0), one length")
    half = loss[0] / 2
    below = np.nonzero(loss <= half)[0]
    if len(below) == 0:
        return None
    i = int(below[0])
    if i == 0:
        return float(t[0])
    frac = (loss[i - 1] - half) / (loss[i - 1] - loss[i])
    return float(t[i - 1] + frac * (t[i] - t[i - 1]))
