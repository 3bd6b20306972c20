"""The sweep table: a CSV file of whole rows, appended under a lock, keyed exactly.

Each cell is one value written so that reading it gives the same value back:

* an int as its digits, a float by ``repr`` (``0.1``, ``1e-300``, ``nan``, ``inf``), so
  floats round-trip to the last bit; ``true``/``false``/``null`` for bools and None;
* a string as itself when it reads back as that same string (``relu``, ``01``, ``a b``),
  and otherwise as a JSON string literal: ``"1e3"``, ``" 7"``, ``"true"``, ``"\\n"``. So a
  key is never re-normalised: the string ``'01'`` and the int ``1`` stay two points.

Every row is one line, written with its newline by one ``os.write`` on a file opened with
``O_APPEND`` and flushed to disk (``fdatasync``) before the next point is written. A last
line without its newline is a row cut short by a crash: readers ignore it and the next
sweep that opens the table removes it before appending, so its point is computed again. A
sweep holds an exclusive ``flock`` on the table from the moment it reads it until it
returns, so a second sweep on the same table waits and then skips what the first wrote.

A table is read within :class:`gdln.graphfile.Limits`: a regular file (a named pipe or a
device is refused unopened) of at most ``data_bytes`` bytes, whose cells (counted by their
separators before any line is parsed) number at most ``data_values``.
"""

from __future__ import annotations

import csv
import io
import json
import numbers
import os
import stat
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from .._bounded._limits import beyond, current_limits
from .._bounded._read import open_regular
from .._errors import GraphSpecError, shorten
from ._errors import Row, SweepTableError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: tables are not locked
    fcntl = None  # type: ignore[assignment]

__all__ = ["SweepTable", "decode_cell", "encode_cell", "point_key", "read_table"]

_FLOAT_WORDS = ("nan", "inf", "-inf")


def decode_cell(text: str) -> Any:
    """A table cell back to the value it was written from (see the module docstring)."""
    if text in _FLOAT_WORDS:
        return float(text)
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return text
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return text


def encode_cell(value: Any) -> str:
    """A point's or a result's value as one table cell; :func:`decode_cell` inverts it.

    Raises
    ------
    TypeError
        ``value`` is not a number, a string, a bool or None.
    ValueError
        An int with more digits than Python converts to text.
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        return repr(float(value))
    if isinstance(value, str):
        if value.isprintable():
            decoded = decode_cell(value)
            if isinstance(decoded, str) and decoded == value:
                return value
        return json.dumps(value)  # ASCII only: no newline, no lone surrogate
    raise TypeError(f"expected a number, string, bool or None, got {type(value).__name__}")


def point_key(point: Mapping[str, Any], key: Sequence[str]) -> tuple[str, ...]:
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
        round-trip exactly; strings that would read back as something else as JSON
        strings); two points with equal keys are the same table row, and ``1``, ``1.0``
        and ``'1'`` are three different keys.

    Raises
    ------
    KeyError
        ``point`` lacks a column of ``key``.

    Examples
    --------
    >>> point_key({"lr": 0.1, "seed": 3, "depth": 2}, ["seed", "lr"])
    ('3', '0.1')
    >>> point_key({"name": "01"}, ["name"]), point_key({"name": "1e3"}, ["name"])
    (('01',), ('"1e3"',))
    """
    return tuple(encode_cell(point[name]) for name in key)


def _line(cells: Sequence[str]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow(cells)
    return out.getvalue()


def _cells(line: bytes) -> list[str] | None:
    """The cells of one line, or None when it does not parse."""
    try:
        text = line.removesuffix(b"\r").decode("utf-8")
        return next(csv.reader([text], strict=True))
    except (UnicodeDecodeError, csv.Error, StopIteration):
        return None


@dataclass(frozen=True)
class _Contents:
    columns: list[str] | None  # None: no complete first line
    rows: list[Row]
    whole: int  # bytes up to the last newline; what follows is a row cut short


def _scan(data: bytes, where: str) -> _Contents:
    limits = current_limits()
    count = data.count(b",") + data.count(b"\n")  # the cells (and quoted commas), unparsed
    if count > limits.data_values:
        raise SweepTableError(f"{where}: " + beyond("data_values", f"a table of {count} cells"))
    whole = data.rfind(b"\n") + 1
    lines = data[:whole].split(b"\n")[:-1]
    if not lines:
        return _Contents(None, [], whole)
    columns = _cells(lines[0])
    if not columns or "" in columns or len(set(columns)) != len(columns):
        raise SweepTableError(
            f"{where}: not a sweep table: its first line is not a header of distinct column "
            "names; choose another table"
        )
    rows = []
    for line in lines[1:]:
        cells = _cells(line)
        if cells is not None and len(cells) == len(columns):  # else not a whole row
            rows.append(
                {name: decode_cell(cell) for name, cell in zip(columns, cells, strict=True)}
            )
    return _Contents(columns, rows, whole)


def read_table(table: str | os.PathLike[str]) -> list[Row]:
    """Read a sweep table; every cell comes back as the value that was written.

    A line that does not parse as a whole row (one cut short when a sweep was killed
    while writing it) is not returned, so its point counts as unfinished.

    Parameters
    ----------
    table
        The CSV file a sweep writes.

    Returns
    -------
    list of dict
        One dict per whole row, column -> value (int, float, bool, None or str, exactly
        as the sweep wrote it); empty when the file does not exist or holds no row.

    Raises
    ------
    SweepTableError
        The file cannot be read or is not a sweep table: a named pipe, a device or a
        folder (refused unopened), or a file beyond :class:`gdln.graphfile.Limits`
        ``data_bytes`` or with more cells than ``data_values``.
    """
    path = Path(table)
    limit = current_limits().data_bytes
    try:
        with open_regular(path, what="sweep table", limit="data_bytes") as handle:
            data = handle.read(limit + 1)
    except GraphSpecError as error:
        if isinstance(error.__cause__, FileNotFoundError):
            return []
        raise SweepTableError(str(error)) from error
    except OSError as error:
        raise SweepTableError(
            f"{path}: cannot read the sweep table: {error.strerror or error}"
        ) from error
    if len(data) > limit:  # it grew while being read
        raise SweepTableError(f"{path}: " + beyond("data_bytes", "more bytes"))
    return _scan(data, str(path)).rows


class SweepTable:
    """The table of one running sweep, locked from opening until closing.

    Use as a context manager: on entering, the table (and its folder) is created if
    needed, locked (waiting for another sweep that holds it, with a warning), read,
    checked against the sweep's parameter names, and a last row cut short by a crash is
    removed. :meth:`append` then writes one whole row at a time.

    Parameters
    ----------
    path
        The CSV file.
    parameters
        The sweep's parameter names, in the order of its first point: the table's first
        columns.
    """

    def __init__(self, path: Path, parameters: Sequence[str]):
        self.path = path
        self.parameters = list(parameters)
        self.columns: list[str] | None = None
        self.rows: list[Row] = []
        self._fd = -1

    def __enter__(self) -> SweepTable:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC)
        except OSError as error:
            raise SweepTableError(
                f"{self.path}: cannot open the sweep table: {error.strerror or error}"
            ) from error
        try:
            self._lock()
            data = self._read()
            contents = _scan(data, str(self.path))
            self._check(contents, data)
            if contents.whole < len(data):  # a row (or the header) cut short by a crash
                os.ftruncate(self._fd, contents.whole)
                os.fsync(self._fd)
        except OSError as error:
            self._close()
            raise SweepTableError(
                f"{self.path}: cannot use the sweep table: {error.strerror or error}"
            ) from error
        except BaseException:
            self._close()
            raise
        self.columns, self.rows = contents.columns, contents.rows
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._close()

    def _close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # releases the lock
            self._fd = -1

    def _lock(self) -> None:
        if fcntl is None:  # pragma: no cover - not POSIX
            return
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            warnings.warn(
                f"{self.path}: another sweep is writing this table; waiting until it ends",
                RuntimeWarning,
                stacklevel=4,
            )
            fcntl.flock(self._fd, fcntl.LOCK_EX)

    def _read(self) -> bytes:
        info = os.fstat(self._fd)
        if not stat.S_ISREG(info.st_mode):
            raise SweepTableError(f"{self.path}: not a regular file; choose another table")
        limits = current_limits()
        chunks, offset = [], 0
        while chunk := os.pread(self._fd, 1 << 20, offset):
            chunks.append(chunk)
            offset += len(chunk)
            if offset > limits.data_bytes:
                raise SweepTableError(
                    f"{self.path}: " + beyond("data_bytes", f"a table of over {offset} bytes")
                )
        return b"".join(chunks)

    def _check(self, contents: _Contents, data: bytes) -> None:
        """Refuse a file that is not this sweep's table before anything is written to it."""
        if contents.columns is not None:
            missing = [name for name in self.parameters if name not in contents.columns]
            if missing:
                raise SweepTableError(
                    f"{self.path}: the table's columns {shorten(contents.columns, 100)} lack "
                    f"the parameter(s) {shorten(missing, 80)} of this sweep; use a new table "
                    "for a different sweep"
                )
            return
        tail = data.decode("utf-8", errors="replace")
        start = _line(self.parameters)[:-1]
        if tail and not (start.startswith(tail) or tail.startswith(start + ",")):
            raise SweepTableError(
                f"{self.path}: not a sweep table: its only line {shorten(tail, 60)} is not "
                f"the start of a header with the columns {shorten(self.parameters, 80)}; "
                "choose another table"
            )

    def append(self, point: Mapping[str, Any], result: Mapping[str, Any]) -> Row:
        """Write the row of one finished point, whole, and flush it to disk.

        Parameters
        ----------
        point
            The point's parameters.
        result
            The function's numbers at the point (checked by the caller).

        Returns
        -------
        dict
            The row as :func:`read_table` will read it back.

        Raises
        ------
        SweepTableError
            The row has other columns than the table, or cannot be written.
        """
        row = {**point, **result}
        text = ""
        columns = self.columns
        if columns is None:
            columns = list(row)
            text = _line(columns)
        elif set(row) != set(columns):
            raise SweepTableError(
                f"{self.path}: the row for point {shorten(dict(point), 100)} has columns "
                f"{shorten(sorted(row), 80)}, but the table has {shorten(sorted(columns), 80)}; "
                "use a new table for a different sweep"
            )
        cells = [encode_cell(row[name]) for name in columns]
        self._write((text + _line(cells)).encode("utf-8"))
        self.columns = columns
        return {name: decode_cell(cell) for name, cell in zip(columns, cells, strict=True)}

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:  # one write for a row; a short write (disk full) is continued
                view = view[os.write(self._fd, view) :]
            getattr(os, "fdatasync", os.fsync)(self._fd)
        except OSError as error:
            raise SweepTableError(
                f"{self.path}: cannot append to the sweep table: {error.strerror or error}; "
                "the rows before are kept and a row cut short is computed again next time"
            ) from error
