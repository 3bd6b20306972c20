"""Parameter sweeps that append to one CSV table and resume after an interruption.

The experiments of Figs. 5c, 6 and 7 of Saxe, Sodhani & Lewallen (2022) are grids over
K/M, the initialisation scale sigma_0 and seeds. :func:`run_sweep` evaluates a top-level
function at every point of such a grid, locally in a process pool or on a Dask
distributed cluster, and appends one CSV row per finished point (the point's
parameters, then the function's numbers). Points whose key is already in the table are
skipped, so an interrupted sweep loses at most the points that were running.

Dask is imported only when a scheduler address is given; the rest of gdln works
without it.
"""

from __future__ import annotations

import csv
import numbers
import os
import pickle
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

from .._errors import GdlnError

__all__ = [
    "SweepError",
    "SweepPointError",
    "SweepSpecError",
    "SweepTableError",
    "point_key",
    "read_table",
    "run_sweep",
]

Point = Mapping[str, Any]
Row = dict[str, Any]


class SweepError(GdlnError):
    """Base class of the errors :func:`run_sweep` raises."""


class SweepSpecError(SweepError, ValueError):
    """The arguments of a sweep are malformed (points, key, workers, function)."""


class SweepTableError(SweepError, ValueError):
    """The results table cannot be read or does not fit the sweep's columns."""


class SweepPointError(SweepError, RuntimeError):
    """The function failed, or returned something other than a dict of numbers, at a point.

    ``point`` is the parameter dict it failed at. Rows of the points that finished
    before are already in the table, so running the sweep again resumes.

    Parameters
    ----------
    message
        The one-line message, naming the point and what went wrong.
    point
        The parameter dict of the failed point (copied).

    Attributes
    ----------
    point
        As given.
    """

    def __init__(self, message: str, *, point: Point):
        self.point = dict(point)
        super().__init__(message)


def _cell(value: Any) -> str:
    """A value as written in the table (floats round-trip exactly through ``repr``)."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        return repr(float(value))
    return str(value)


def _parse(text: str) -> Any:
    """A table cell back to an int, a float, or the string itself."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def point_key(point: Point, key: Sequence[str]) -> tuple[str, ...]:
    """The identity of a point: its values of the ``key`` columns, as table cells.

    Parameters
    ----------
    point
        Parameter name -> value.
    key
        The names of the columns that identify a point.

    Returns
    -------
    tuple of str
        The values of ``key`` as written in the table (floats by ``repr``, so they
        round-trip exactly); two points with equal keys are the same table row.

    Raises
    ------
    KeyError
        ``point`` lacks a column of ``key``.

    Examples
    --------
    >>> point_key({"lr": 0.1, "seed": 3, "depth": 2}, ["seed", "lr"])
    ('3', '0.1')
    """
    return tuple(_cell(point[name]) for name in key)


def read_table(table: str | os.PathLike[str]) -> list[Row]:
    """Read a sweep table; numbers come back as int or float.

    Incomplete rows (a line cut short when a sweep was killed while writing it) are
    dropped, so their points count as unfinished.

    Parameters
    ----------
    table
        The CSV file a sweep writes.

    Returns
    -------
    list of dict
        One dict per complete row, column -> value (int, float or the text); empty when
        the file does not exist.

    Raises
    ------
    SweepTableError
        The file cannot be read or is not a CSV table.
    """
    path = Path(table)
    if not path.exists():
        return []
    try:
        with path.open(newline="") as handle:
            reader = csv.DictReader(handle)
            rows = [
                {name: _parse(value) for name, value in raw.items()}
                for raw in reader
                if None not in raw.values() and None not in raw
            ]
    except (OSError, csv.Error, UnicodeDecodeError) as error:
        raise SweepTableError(f"{path}: cannot read the sweep table: {error}") from error
    return rows


def _header(path: Path) -> list[str] | None:
    if not path.exists() or path.stat().st_size == 0:
        return None
    with path.open(newline="") as handle:
        first = next(csv.reader(handle), None)
    return list(first) if first else None


def _check_result(result: Any, point: Point) -> dict[str, Any]:
    if not isinstance(result, Mapping):
        raise SweepPointError(
            f"point {dict(point)}: the function returned {type(result).__name__}, "
            "expected a dict of numbers",
            point=point,
        )
    for name, value in result.items():
        if not isinstance(name, str):
            raise SweepPointError(
                f"point {dict(point)}: result key {name!r} is not a string", point=point
            )
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise SweepPointError(
                f"point {dict(point)}: result {name!r} = {value!r} is not a number",
                point=point,
            )
        if name in point:
            raise SweepPointError(
                f"point {dict(point)}: result {name!r} has the name of a parameter",
                point=point,
            )
    return dict(result)


class _Writer:
    """Appends rows to the table, writing the header with the first row."""

    def __init__(self, path: Path):
        self.path = path
        self.columns = _header(path)

    def append(self, point: Point, result: Mapping[str, Any]) -> Row:
        row: Row = {**point, **result}
        if self.columns is None:
            self.columns = list(row)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("w", newline="") as handle:
                csv.writer(handle).writerow(self.columns)
        if set(row) != set(self.columns):
            raise SweepTableError(
                f"{self.path}: the row for point {dict(point)} has columns "
                f"{sorted(row)}, but the table has {sorted(self.columns)}; "
                "use a new table for a different sweep"
            )
        needs_newline = False
        with self.path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            if handle.tell():
                handle.seek(-1, os.SEEK_END)
                needs_newline = handle.read(1) != b"\n"
        with self.path.open("a", newline="") as handle:
            if needs_newline:  # a line cut short by a killed run stays a separate line
                handle.write("\n")
            csv.writer(handle).writerow([_cell(row[c]) for c in self.columns])
            handle.flush()
        return {name: _parse(_cell(value)) for name, value in row.items()}


def _validate_points(points: Iterable[Point], key: Sequence[str] | None) -> tuple:
    points = [dict(p) for p in points]
    for index, point in enumerate(points):
        if not point or not all(isinstance(name, str) for name in point):
            raise SweepSpecError(
                f"points[{index}] = {point!r}: expected a non-empty dict with string keys"
            )
    if key is None:
        key = list(points[0]) if points else []
    elif isinstance(key, str):
        key = [key]
    key = list(key)
    for index, point in enumerate(points):
        missing = [name for name in key if name not in point]
        if missing:
            raise SweepSpecError(f"points[{index}] = {point!r}: missing key column(s) {missing}")
    keys = [point_key(p, key) for p in points]
    if len(set(keys)) != len(keys):
        seen: set[tuple[str, ...]] = set()
        for k in keys:
            if k in seen:
                raise SweepSpecError(
                    f"two points share the key {dict(zip(key, k, strict=True))}; "
                    f"add a column to key={key}"
                )
            seen.add(k)
    return points, key, keys


def _call(function: Callable[..., Mapping[str, Any]], point: Point) -> Any:
    return function(**point)


def run_sweep(
    function: Callable[..., Mapping[str, Any]],
    points: Iterable[Point],
    *,
    table: str | os.PathLike[str],
    workers: int | None = None,
    scheduler: str | None = None,
    key: Sequence[str] | str | None = None,
) -> list[Row]:
    """Evaluate ``function(**point)`` on a grid of points, appending rows to a CSV table.

    Parameters
    ----------
    function
        A top-level (picklable) function taking a point's parameters as keyword
        arguments and returning a dict of numbers, e.g. the trained and untrained error
        of one run of Fig. 5c at one K/M and seed.
    points
        The grid: parameter dicts (numbers or strings), e.g.
        ``[{"K": k, "seed": s} for k in range(1, 11) for s in range(5)]``.
    table
        The CSV file. Its columns are the parameters, then the results. Points whose
        key is already there are skipped; each finished point is appended at once.
    workers
        Local processes (``concurrent.futures.ProcessPoolExecutor``); ``None`` uses
        ``os.cpu_count()``; ``1`` runs in this process, in order.
    scheduler
        The address of a Dask distributed scheduler (``"tcp://host:8786"``); the points
        then run there and ``workers`` is ignored. Needs ``dask[distributed]``.
    key
        The parameter names that identify a point (default: all of the first point's).

    Returns
    -------
    list of dict
        One row per point, in the order of ``points`` (finished earlier or now), with
        values as read back from the table.

    Raises
    ------
    SweepSpecError
        Malformed points, key or workers; a function that cannot be sent to a worker.
    SweepTableError
        The table cannot be read or has other columns.
    SweepPointError
        The function raised, or returned something other than a dict of numbers.

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
    if not callable(function):
        raise SweepSpecError(f"function must be callable, got {function!r}")
    if workers is not None and (
        isinstance(workers, bool) or not isinstance(workers, int) or workers < 1
    ):
        raise SweepSpecError(f"workers must be a positive integer or None, got {workers!r}")
    if scheduler is not None and (not isinstance(scheduler, str) or not scheduler.strip()):
        raise SweepSpecError(
            f"scheduler must be a Dask scheduler address such as 'tcp://127.0.0.1:8786', "
            f"got {scheduler!r}"
        )
    points, key, keys = _validate_points(points, key)
    path = Path(table)
    done: dict[tuple[str, ...], Row] = {}
    for row in read_table(path):
        if all(name in row for name in key):
            done[tuple(_cell(row[name]) for name in key)] = row
    todo = [(i, p) for i, (p, k) in enumerate(zip(points, keys, strict=True)) if k not in done]
    results: dict[int, Row] = {}
    writer = _Writer(path)
    n_workers = (os.cpu_count() or 1) if workers is None else workers
    if todo and (scheduler is not None or (n_workers > 1 and len(todo) > 1)):
        try:
            pickle.dumps(function)
        except Exception as error:
            raise SweepSpecError(
                f"function {getattr(function, '__qualname__', function)!r} cannot be sent to "
                f"worker processes ({error}); define it at the top level of a module"
            ) from error
    if not todo:
        pass
    elif scheduler is not None:
        _run_dask(function, todo, scheduler, writer, results)
    elif n_workers == 1 or len(todo) == 1:
        for index, point in todo:
            results[index] = writer.append(point, _evaluate(function, point))
    else:
        _run_pool(function, todo, n_workers, writer, results)
    rows: list[Row] = []
    for index, k in enumerate(keys):
        rows.append(results[index] if index in results else done[k])
    return rows


def _evaluate(function: Callable[..., Mapping[str, Any]], point: Point) -> dict[str, Any]:
    try:
        result = function(**point)
    except Exception as error:
        raise SweepPointError(
            f"point {dict(point)}: {type(error).__name__}: {error}", point=point
        ) from error
    return _check_result(result, point)


def _finish(future: Any, point: Point) -> dict[str, Any]:
    try:
        result = future.result()
    except Exception as error:
        raise SweepPointError(
            f"point {dict(point)}: {type(error).__name__}: {error}", point=point
        ) from error
    return _check_result(result, point)


def _run_pool(
    function: Callable[..., Mapping[str, Any]],
    todo: list[tuple[int, Point]],
    workers: int,
    writer: _Writer,
    results: dict[int, Row],
) -> None:
    with ProcessPoolExecutor(max_workers=min(workers, len(todo))) as pool:
        pending: dict[Future[Any], tuple[int, Point]] = {
            pool.submit(_call, function, point): (index, point) for index, point in todo
        }
        try:
            while pending:
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    index, point = pending.pop(future)
                    results[index] = writer.append(point, _finish(future, point))
        except BaseException:
            for future in pending:
                future.cancel()
            raise


def _run_dask(
    function: Callable[..., Mapping[str, Any]],
    todo: list[tuple[int, Point]],
    scheduler: str,
    writer: _Writer,
    results: dict[int, Row],
) -> None:
    try:
        from distributed import Client, as_completed
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise SweepSpecError(
            f"scheduler={scheduler!r} needs Dask: pip install 'dask[distributed]' ({error})"
        ) from error
    try:
        client = Client(scheduler, timeout=30)
    except Exception as error:
        raise SweepSpecError(
            f"cannot connect to the Dask scheduler at {scheduler!r}: {error}"
        ) from error
    try:
        futures = {}
        for index, point in todo:
            future = client.submit(_call, function, point, pure=False)
            futures[future] = (index, point)
        for future in as_completed(list(futures)):
            index, point = futures[future]
            results[index] = writer.append(point, _finish(future, point))
    finally:
        client.close()
