"""The errors of a sweep, and the record of a point that did not finish."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._errors import GdlnError, shorten, shorten_text

__all__ = [
    "SweepError",
    "SweepPointError",
    "SweepSpecError",
    "SweepTableError",
    "UnfinishedPoint",
]

Point = Mapping[str, Any]
Row = dict[str, Any]

_LISTED = 3  # unfinished points a message names before "and N more"


class SweepError(GdlnError):
    """Base class of the errors :func:`gdln.run_sweep` raises."""


class SweepSpecError(SweepError, ValueError):
    """The arguments of a sweep are malformed (points, key, workers, function)."""


class SweepTableError(SweepError, ValueError):
    """The results table cannot be read or written, or does not fit the sweep's columns."""


@dataclass(frozen=True)
class UnfinishedPoint:
    """A point of a sweep that has no row in the table, and why.

    Parameters
    ----------
    point
        The parameter dict of the point.
    reason
        One line: the exception the function raised (``"ZeroDivisionError: boom"``), the
        worker process that died while computing it, or why it was not run.
    traceback
        The function's traceback where there is one (from the worker that ran it), else
        ``""``.
    """

    point: dict[str, Any]
    reason: str
    traceback: str = field(default="", repr=False)


class SweepPointError(SweepError, RuntimeError):
    """Points of a sweep did not finish; the rows of the others are in the table.

    Every point of the grid is attempted: a point whose function raises, returns
    something other than a dict of numbers, or whose worker process dies too often, is
    reported here with the points that were not run (no Dask worker left). Running the
    sweep again computes only these.

    Parameters
    ----------
    message
        The one-line message, naming the points and what went wrong.
    point
        The first point that did not finish (copied).
    unfinished
        Every point that did not finish, in the order of the grid.
    rows
        The rows of the points that did finish, in the order of the grid.

    Attributes
    ----------
    point, unfinished, rows
        As given.
    """

    def __init__(
        self,
        message: str,
        *,
        point: Point,
        unfinished: Sequence[UnfinishedPoint] = (),
        rows: Sequence[Row] = (),
    ):
        self.point = dict(point)
        self.unfinished = tuple(unfinished)
        self.rows = list(rows)
        super().__init__(message)


def incomplete(
    unfinished: Sequence[UnfinishedPoint], rows: Sequence[Row], *, total: int, table: str
) -> SweepPointError:
    """The error that lists the points of a sweep that did not finish, grouped by reason."""
    groups: dict[str, list[UnfinishedPoint]] = {}
    for entry in unfinished:
        groups.setdefault(entry.reason, []).append(entry)
    parts = []
    for reason, entries in list(groups.items())[:_LISTED]:
        shown = ", ".join(shorten(e.point, 100) for e in entries[:_LISTED])
        if len(entries) > _LISTED:
            shown += f" and {len(entries) - _LISTED} more"
        noun = "point" if len(entries) == 1 else "points"
        parts.append(f"{noun} {shown}: {shorten_text(reason, 160)}")
    if len(groups) > _LISTED:
        parts.append(f"and {len(groups) - _LISTED} other reasons (see .unfinished)")
    message = (
        f"{len(unfinished)} of {total} points did not finish (the rows of the other "
        f"{total - len(unfinished)} are in {table}; running the sweep again computes only "
        f"the missing ones): {'; '.join(parts)}"
    )
    return SweepPointError(message, point=unfinished[0].point, unfinished=unfinished, rows=rows)
