r"""Summaries over seeds that never hide a seed: counts, censoring, median and spread.

A time to half loss is *censored* when a run never reached $L(0)/2$ within the horizon
$t_\mathrm{max}$: all we know is $t > t_\mathrm{max}$. Dropping such seeds (or averaging
only the others) makes a slow network look fast, so every summary here keeps them: it
says how many seeds it covers and how many are censored, and its quantiles are those of
the empirical distribution with censored seeds counted as $> t_\mathrm{max}$. The
$q$-quantile is the smallest value $v$ with at least a fraction $q$ of the seeds $\le v$
(the inverse of the empirical distribution function; with censoring at one common
horizon this is the Kaplan-Meier quantile). When fewer than a fraction $q$ of the seeds
reached the threshold, the quantile itself is "$> t_\mathrm{max}$"; so the median is
"$> t_\mathrm{max}$" as soon as more than half the seeds are censored.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["SeedSummary", "format_value", "summarize_seeds"]

SPREAD = "quartiles (q1, q3) and range (min, max) over seeds"
"""Which spread :class:`SeedSummary` reports, written into ``metrics.json``."""


@dataclass(frozen=True)
class SeedSummary:
    r"""Median, quartiles and range of one quantity over seeds, censored seeds included.

    Parameters
    ----------
    seeds
        How many seeds the summary covers (all of them).
    censored
        How many of them never reached the threshold within ``t_max``.
    t_max
        The horizon; ``None`` for a quantity that cannot be censored.
    median, q1, q3, low, high
        The quantiles $1/2$, $1/4$, $3/4$, the smallest and the largest value;
        ``math.inf`` where the quantile lies beyond the horizon ("$> t_\mathrm{max}$").

    Raises
    ------
    ValueError
        The counts are inconsistent (``seeds < 1`` or ``censored`` outside
        ``[0, seeds]``).
    """

    seeds: int
    censored: int
    t_max: float | None
    median: float
    q1: float
    q3: float
    low: float
    high: float

    def __post_init__(self) -> None:
        if self.seeds < 1 or not 0 <= self.censored <= self.seeds:
            raise ValueError(f"seeds={self.seeds}, censored={self.censored}: inconsistent counts")

    def to_json(self) -> dict[str, Any]:
        """The summary for ``metrics.json``.

        Returns
        -------
        dict
            ``seeds``, ``median``, ``q1``, ``q3``, ``min``, ``max`` (and ``censored``,
            ``t_max`` with a horizon): numbers, with ``"> t_max"`` (a string) where
            censored.
        """
        out: dict[str, Any] = {"seeds": self.seeds}
        if self.t_max is not None:
            out |= {"censored": self.censored, "t_max": self.t_max}
        for key, value in self._quantiles().items():
            out[key] = format_value(value, self.t_max, digits=None)
        return out

    def text(self, *, digits: int = 3) -> str:
        """The summary on one line.

        Parameters
        ----------
        digits
            Significant digits of each number.

        Returns
        -------
        str
            E.g. ``median 9.6 (IQR 9.2 to 10.1, range 8.7 to 12; 10 seeds)``.
        """
        counts = f"{self.seeds} seed{'s' if self.seeds != 1 else ''}"
        if self.t_max is not None and self.censored == self.seeds:
            return f"> {self.t_max:g} for all {counts} (none within t_max)"
        f = {k: format_value(v, self.t_max, digits=digits) for k, v in self._quantiles().items()}
        if self.t_max is not None:
            counts += f", {self.censored} never within t_max = {self.t_max:g}"
        return (
            f"median {f['median']} (IQR {f['q1']} to {f['q3']}, "
            f"range {f['min']} to {f['max']}; {counts})"
        )

    def _quantiles(self) -> dict[str, float]:
        return {
            "median": self.median,
            "q1": self.q1,
            "q3": self.q3,
            "min": self.low,
            "max": self.high,
        }


def summarize_seeds(values: Sequence[float | None], *, t_max: float | None = None) -> SeedSummary:
    r"""Summarise one value per seed; ``None`` marks a seed censored at ``t_max``.

    Parameters
    ----------
    values
        One value per seed (e.g. a time to half loss); ``None`` for a seed that never
        reached the threshold within ``t_max``.
    t_max
        The horizon; needed when some value is ``None``.

    Returns
    -------
    SeedSummary
        Count, censored count, median, quartiles and range, each quantile the smallest
        value with at least that fraction of the seeds at or below it (``math.inf``
        beyond the horizon).

    Raises
    ------
    ValueError
        ``values`` is empty, or has a ``None`` without ``t_max``.

    Examples
    --------
    >>> s = summarize_seeds([3.0, None, 1.0, None, None], t_max=10.0)
    >>> s.seeds, s.censored, s.low, s.q1, s.median
    (5, 3, 1.0, 3.0, inf)
    >>> s.text()
    'median > 10 (IQR 3 to > 10, range 1 to > 10; 5 seeds, 3 never within t_max = 10)'
    """
    values = list(values)
    if not values:
        raise ValueError("summarize_seeds: no seeds to summarise")
    if t_max is None and any(v is None for v in values):
        raise ValueError("summarize_seeds: censored values (None) need the horizon t_max")
    ordered = sorted(math.inf if v is None else float(v) for v in values)
    return SeedSummary(
        seeds=len(ordered),
        censored=sum(v is None for v in values),
        t_max=None if t_max is None else float(t_max),
        median=_quantile(ordered, 0.5),
        q1=_quantile(ordered, 0.25),
        q3=_quantile(ordered, 0.75),
        low=ordered[0],
        high=ordered[-1],
    )


def _quantile(ordered: Sequence[float], q: float) -> float:
    """The smallest value with at least a fraction ``q`` of ``ordered`` at or below it."""
    return ordered[max(0, math.ceil(q * len(ordered) - 1e-12) - 1)]


def format_value(value: float | None, t_max: float | None, *, digits: int | None = 3) -> Any:
    """``value`` to ``digits`` significant digits, or ``"> t_max"`` if censored (inf, None).

    ``digits=None`` keeps a finite value as it is (a float, for ``metrics.json``).

    >>> format_value(24.95550263800102, 40.0), format_value(None, 40.0)
    ('25', '> 40')
    """
    if value is None or not math.isfinite(value):
        if t_max is None:
            raise ValueError("format_value: a censored value needs the horizon t_max")
        return f"> {t_max:g}"
    if digits is None:
        return float(value)
    return f"{value:.{digits}g}"
