"""Which steps of a run to record."""

from __future__ import annotations

import math

__all__ = ["log_spaced_steps"]


def log_spaced_steps(steps: int, count: int) -> list[int]:
    """Step 0 and ``count`` log-spaced steps from 1 to ``steps``, rounded, without repeats.

    For ``record_steps`` of :func:`gdln.simulate`: early learning is fast, so log-spaced
    records resolve it without recording every step of a long run.

    Parameters
    ----------
    steps
        The last step (an int >= 0).
    count
        How many log-spaced steps to aim for in ``[1, steps]`` (an int >= 1); rounding
        may merge some, so fewer can come back.

    Returns
    -------
    list of int
        Sorted distinct steps, starting at 0 and (for ``steps > 0``) ending at ``steps``.

    Raises
    ------
    ValueError
        ``steps`` or ``count`` is not an int in range.

    Examples
    --------
    >>> log_spaced_steps(1000, 4)
    [0, 1, 10, 100, 1000]
    >>> log_spaced_steps(0, 3)
    [0]
    """
    if not (isinstance(steps, int) and steps >= 0):
        raise ValueError(f"steps: expected an int >= 0, got {steps!r}")
    if not (isinstance(count, int) and count >= 1):
        raise ValueError(f"count: expected an int >= 1, got {count!r}")
    if steps == 0:
        return [0]
    if count == 1:
        return [0, 1]
    ratio = math.log(steps) / (count - 1)
    return sorted({0, *(min(steps, round(math.exp(k * ratio))) for k in range(count))})
