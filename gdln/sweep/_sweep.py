"""Parameter sweeps that append to one CSV table and resume after an interruption.

The experiments of Figs. 5c, 6 and 7 of Saxe, Sodhani & Lewallen (2022) are grids over
K/M, the initialisation scale sigma_0 and seeds. :func:`run_sweep` evaluates a top-level
function at every point of such a grid, in this process, in local worker processes or on
a Dask distributed cluster, and appends one row per finished point to a table
(:mod:`gdln.sweep._table`: whole rows, exact keys, locked against a second sweep). Points
whose key is already in the table are skipped, so an interrupted sweep loses at most the
points that were running. A point that fails does not stop the others; every point that
did not finish is reported at the end (:class:`SweepPointError`).

Dask is imported only when a scheduler address is given; the rest of gdln works
without it.
"""

from __future__ import annotations

import math
import numbers
import os
import pickle
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence, Sized
from pathlib import Path
from typing import Any

from .._bounded._limits import beyond, current_limits
from .._errors import shorten
from ._errors import (
    Point,
    Row,
    SweepError,
    SweepPointError,
    SweepSpecError,
    SweepTableError,
    UnfinishedPoint,
    incomplete,
)
from ._table import SweepTable, encode_cell, point_key, read_table

__all__ = [
    "SweepError",
    "SweepPointError",
    "SweepSpecError",
    "SweepTableError",
    "UnfinishedPoint",
    "point_key",
    "read_table",
    "run_sweep",
]


class _BadResult(Exception):
    """The function returned something that is not a row of numbers."""


def _check_result(result: Any, point: Point) -> dict[str, Any]:
    if not isinstance(result, Mapping):
        raise _BadResult(
            f"the function returned {type(result).__name__}, expected a dict of numbers"
        )
    checked = {}
    for name, value in result.items():
        if not isinstance(name, str) or not name or not name.isprintable():
            raise _BadResult(f"result name {shorten(name)} is not a non-empty printable string")
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise _BadResult(f"result {name!r} = {shorten(value)} is not a number")
        if name in point:
            raise _BadResult(f"result {name!r} has the name of a parameter")
        checked[name] = int(value) if isinstance(value, numbers.Integral) else float(value)
    return checked


def _validate_points(
    points: Iterable[Point], key: Sequence[str] | str | None
) -> tuple[list[dict[str, Any]], list[str], list[tuple[str, ...]]]:
    most = current_limits().points
    size = len(points) if isinstance(points, Sized) else None
    if size is not None and size > most:
        raise SweepSpecError(beyond("points", f"a grid of {size} points"))
    grid: list[dict[str, Any]] = []
    for index, raw in enumerate(points):
        if index >= most:  # a generator: counted as it is expanded, never beyond the limit
            raise SweepSpecError(beyond("points", f"a grid of more than {most} points"))
        if not isinstance(raw, Mapping) or not raw:
            raise SweepSpecError(f"points[{index}] = {shorten(raw)}: expected a non-empty dict")
        point = dict(raw)
        for name, value in point.items():
            if not isinstance(name, str) or not name or not name.isprintable():
                raise SweepSpecError(
                    f"points[{index}]: parameter name {shorten(name)} must be a non-empty "
                    "printable string"
                )
            try:
                encode_cell(value)
            except (TypeError, ValueError) as error:
                raise SweepSpecError(
                    f"points[{index}][{name!r}] = {shorten(value)}: expected a number, string, "
                    "bool or None (each value is one cell of the table)"
                ) from error
        if grid and set(point) != set(grid[0]):
            raise SweepSpecError(
                f"points[{index}] has the parameters {shorten(sorted(point))}, points[0] has "
                f"{shorten(sorted(grid[0]))}; a sweep's points share their parameter names"
            )
        grid.append(point)
    names = list(grid[0]) if grid else []
    names = names if key is None else [key] if isinstance(key, str) else list(key)
    missing = [name for name in names if grid and name not in grid[0]]
    if missing:
        raise SweepSpecError(f"points[0] = {shorten(grid[0])}: missing key column(s) {missing}")
    keys = [point_key(p, names) for p in grid]
    seen: set[tuple[str, ...]] = set()
    for point, k in zip(grid, keys, strict=True):
        if k in seen:
            shared = {name: point[name] for name in names}
            raise SweepSpecError(
                f"two points share the key {shorten(shared)}; add a column to key={names}"
            )
        seen.add(k)
    return grid, names, keys


def _check_arguments(function: Any, workers: Any, scheduler: Any, no_worker_timeout: Any) -> None:
    if not callable(function):
        raise SweepSpecError(f"function must be callable, got {shorten(function)}")
    if workers is not None and (
        isinstance(workers, bool) or not isinstance(workers, int) or workers < 1
    ):
        raise SweepSpecError(f"workers must be a positive integer or None, got {workers!r}")
    if scheduler is not None and (not isinstance(scheduler, str) or not scheduler.strip()):
        raise SweepSpecError(
            f"scheduler must be a Dask scheduler address such as 'tcp://127.0.0.1:8786', "
            f"got {scheduler!r}"
        )
    if no_worker_timeout is not None and (
        isinstance(no_worker_timeout, bool)
        or not isinstance(no_worker_timeout, numbers.Real)
        or not math.isfinite(no_worker_timeout)
        or no_worker_timeout <= 0
    ):
        raise SweepSpecError(
            f"no_worker_timeout must be a positive number of seconds or None, "
            f"got {no_worker_timeout!r}"
        )


def run_sweep(
    function: Callable[..., Mapping[str, Any]],
    points: Iterable[Point],
    *,
    table: str | os.PathLike[str],
    workers: int | None = None,
    scheduler: str | None = None,
    key: Sequence[str] | str | None = None,
    no_worker_timeout: float | None = 300.0,
) -> list[Row]:
    """Evaluate ``function(**point)`` on a grid of points, appending rows to a CSV table.

    Every point is attempted: one that fails does not stop the others, and when some did
    not finish, :class:`SweepPointError` lists them all after the others are written.
    Each finished point's row is written whole and flushed at once, by this process; the
    table is locked while the sweep runs, so a second sweep on it waits and then skips
    the points the first wrote. Running the same sweep again computes only the points
    that have no row.

    Parameters
    ----------
    function
        A top-level (picklable) function taking a point's parameters as keyword
        arguments and returning a dict of numbers, e.g. the trained and untrained error
        of one run of Fig. 5c at one K/M and seed.
    points
        The grid: parameter dicts with the same names, whose values are numbers,
        strings, bools or None, e.g.
        ``[{"K": k, "seed": s} for k in range(1, 11) for s in range(5)]``.
    table
        The CSV file. Its columns are the parameters, then the results. Points whose
        key is already there are skipped; each finished point is appended at once.
    workers
        Local worker processes; ``None`` uses ``os.cpu_count()``; ``1`` runs in this
        process, in order. A point whose process dies is run again in a new one, and
        reported after dying 3 times.
    scheduler
        The address of a Dask distributed scheduler (``"tcp://host:8786"``); the points
        then run there and ``workers`` is ignored. Needs ``dask[distributed]``. Dask reruns
        a point whose worker dies.
    key
        The parameter names that identify a point (default: all of the first point's).
        Keys are compared exactly as given: ``1``, ``1.0`` and ``'1'`` are three points.
    no_worker_timeout
        With ``scheduler``: seconds to wait while the cluster has no worker (all died,
        or none joined) before giving up on the points not finished; ``None`` waits
        without limit.

    Returns
    -------
    list of dict
        One row per point, in the order of ``points`` (finished earlier or now), with
        values as read back from the table.

    Raises
    ------
    SweepSpecError
        Malformed points, key, workers or timeout; more points than
        :class:`gdln.graphfile.Limits` ``points`` (counted as a generator is expanded,
        refused before it is expanded further); a function that cannot be sent to a
        worker.
    SweepTableError
        The table cannot be read, locked or written, is not a sweep table, has other
        columns or two rows for one point, or is beyond the limits ``data_bytes`` (its
        size) or ``data_values`` (its cells).
    SweepPointError
        Points did not finish (the function raised, returned something other than a dict
        of numbers, or its worker kept dying; no Dask worker was left). The message names
        them; ``.unfinished`` lists each with its reason and ``.rows`` holds the rows of
        the points that finished.

    Examples
    --------
    >>> import tempfile, os
    >>> def square(x):
    ...     return {"y": x * x}
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     rows = run_sweep(square, [{"x": 2}, {"x": 3}], table=os.path.join(tmp, "t.csv"),
    ...                      workers=1)
    >>> [row["y"] for row in rows]
    [4, 9]
    """
    _check_arguments(function, workers, scheduler, no_worker_timeout)
    points, key, keys = _validate_points(points, key)
    if not points:
        return []
    path = Path(table)
    n_workers = (os.cpu_count() or 1) if workers is None else workers
    with SweepTable(path, list(points[0])) as sheet:
        done = _rows_by_key(sheet.rows, key, path)
        todo = [(i, p) for i, (p, k) in enumerate(zip(points, keys, strict=True)) if k not in done]
        results: dict[int, Row] = {}
        failures: dict[int, UnfinishedPoint] = {}

        def fail(index: int, reason: str, trace: str) -> None:
            failures[index] = UnfinishedPoint(points[index], reason, trace)

        def report(index: int, result: Any) -> None:
            try:
                checked = _check_result(result, points[index])
            except _BadResult as error:
                fail(index, str(error), "")
                return
            results[index] = sheet.append(points[index], checked)

        if not todo:
            pass
        elif scheduler is not None:
            from ._dask import run_on_dask

            _pickled(function)
            run_on_dask(
                function, todo, scheduler, report, fail, no_worker_timeout=no_worker_timeout
            )
        elif n_workers == 1:
            for index, point in todo:
                try:
                    result = function(**point)
                except Exception as error:  # the point's failure, reported
                    fail(index, f"{type(error).__name__}: {error}", traceback.format_exc())
                else:
                    report(index, result)
        else:
            from ._pool import run_in_processes

            run_in_processes(_pickled(function), todo, min(n_workers, len(todo)), report, fail)
    found = [results.get(i) or done.get(k) for i, k in enumerate(keys)]
    rows = [row for row in found if row is not None]
    if len(rows) < len(points):
        unfinished = [
            failures.get(i) or UnfinishedPoint(points[i], "not run")
            for i, row in enumerate(found)
            if row is None
        ]
        raise incomplete(unfinished, rows, total=len(points), table=str(path))
    return rows


def _rows_by_key(rows: list[Row], key: list[str], path: Path) -> dict[tuple[str, ...], Row]:
    """The table's rows by their key; two rows for one point make the table ambiguous."""
    done: dict[tuple[str, ...], Row] = {}
    for row in rows:
        if all(name in row for name in key):
            k = point_key(row, key)
            if k in done:
                shared = {name: row[name] for name in key}
                raise SweepTableError(
                    f"{path}: two rows for the point {shorten(shared, 100)}, which one holds "
                    f"is ambiguous; remove one, or add columns to key={shorten(key, 60)}"
                )
            done[k] = row
    return done


def _pickled(function: Callable[..., Any]) -> bytes:
    try:
        return pickle.dumps(function)
    except Exception as error:
        raise SweepSpecError(
            f"function {getattr(function, '__qualname__', function)!r} cannot be sent to "
            f"worker processes ({error}); define it at the top level of a module"
        ) from error
