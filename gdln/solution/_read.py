"""Reading back any file a trajectory was written to: :meth:`Trajectory.save`'s ``.npz``
and ``.json`` (``gdln simulate``, ``gdln compare``'s runs), and ``gdln solve``'s JSON and
CSV (:func:`gdln.format_trajectory`), so that ``gdln plot`` draws all of them.

This module reads the formats :mod:`._format` writes; the series' names come from
:mod:`._trajectory`'s constants, never spelled here.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import Any

import numpy as np

from .._bounded._read import parse_json, read_text
from .._errors import GdlnError
from ._saved import typed_fields
from ._series import CONTEXT_LOSS, VARIABLE_EDGES
from ._trajectory import Trajectory

__all__ = ["TrajectoryFileError", "read_trajectory"]

_COLUMN = re.compile(r"(?P<name>.+) \((?P<kind>mode|singular value|index|examples) (?P<at>[^)]*)\)")
_CONTEXT = "loss in context "


class TrajectoryFileError(GdlnError, ValueError):
    """A file is not a trajectory gdln wrote; the message names it."""


def read_trajectory(path: str | Path) -> Trajectory:
    """A trajectory from any file gdln writes one to.

    Parameters
    ----------
    path
        ``.npz`` or ``.json`` of :meth:`gdln.Trajectory.save` (``gdln simulate``), or the
        ``.json`` or ``.csv`` of ``gdln solve -o`` (:func:`gdln.format_trajectory`).

    Returns
    -------
    Trajectory
        Its times, loss and series; from a CSV, the reduced variables and the loss per
        context under their names, without the ``meta`` a CSV does not hold.

    Raises
    ------
    TrajectoryFileError
        The file is none of these.
    OSError
        The file cannot be read.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    try:
        if suffix == ".npz":
            return Trajectory.load(path)
        if suffix == ".json":  # read as every file gdln takes: bounded, keys said once
            text = read_text(path, what="trajectory")
            return _from_json(parse_json(text, source=str(path)), path)
        if suffix == ".csv":
            return _from_csv(read_text(path, what="trajectory"), path)
    except (KeyError, ValueError, TypeError, IndexError) as err:
        if isinstance(err, TrajectoryFileError):
            raise
        raise TrajectoryFileError(f"{path}: not a trajectory gdln wrote ({err})") from err
    raise TrajectoryFileError(f"{path}: expected a .npz, .json or .csv trajectory")


def _from_json(payload: Any, path: Path) -> Trajectory:
    if not isinstance(payload, dict) or "t" not in payload or "loss" not in payload:
        raise TrajectoryFileError(f"{path}: not a trajectory gdln wrote (no t and loss)")
    if "series" in payload:  # Trajectory.save
        return Trajectory.load(path)
    meta = dict(payload.get("meta") or {})
    fields = typed_fields(payload, str(path))
    series = {k: np.asarray(v, dtype=float).T for k, v in payload.get("variables", {}).items()}
    contexts = payload.get(CONTEXT_LOSS) or {}
    if contexts:
        series[CONTEXT_LOSS] = np.column_stack([np.asarray(v, float) for v in contexts.values()])
        meta["context_labels"] = list(contexts)
    return Trajectory(
        t=np.asarray(payload["t"]),
        loss=np.asarray(payload["loss"]),
        series=series,
        meta=meta,
        **fields,
    )


def _from_csv(text: str, path: Path) -> Trajectory:
    edges: Any = {}
    comment = f"# {VARIABLE_EDGES}: "
    if text.startswith(comment):  # the variable -> edges map, as JSON on the first line
        first, _, text = text.partition("\n")
        edges = parse_json(first[len(comment) :], source=str(path))
        if not isinstance(edges, dict):
            raise TrajectoryFileError(f"{path}: its {VARIABLE_EDGES} line is not a mapping")
    rows = list(csv.reader(io.StringIO(text)))
    if len(rows) < 2 or rows[0][:2] != ["t", "loss"]:
        raise TrajectoryFileError(
            f"{path}: not a trajectory gdln wrote (its header is not t,loss,...)"
        )
    header, values = rows[0], np.array(rows[1:], dtype=float).reshape(len(rows) - 1, -1)
    series: dict[str, list[np.ndarray]] = {}
    shapes: dict[str, str] = {}  # name -> the kind of its columns ("" for one plain column)
    contexts: dict[str, np.ndarray] = {}
    modes: list[int] = []
    for j, column in enumerate(header[2:], start=2):
        if column.startswith(_CONTEXT):
            contexts[column[len(_CONTEXT) :]] = values[:, j]
            continue
        match = _COLUMN.fullmatch(column)
        name = match["name"] if match else column
        if match and match["kind"] == "mode" and (not series or name == next(iter(series))):
            modes.append(int(match["at"]))
        series.setdefault(name, []).append(values[:, j])
        shapes[name] = match["kind"] if match else ""
    arrays: dict[str, np.ndarray] = {}
    for name, columns in series.items():
        stacked = np.column_stack(columns)
        if shapes[name] == "examples":  # a Gram matrix over the examples, row-major
            n = round(len(columns) ** 0.5)
            stacked = stacked.reshape(len(stacked), n, n)
        arrays[name] = stacked if shapes[name] else columns[0]
    meta: dict[str, Any] = {"modes": [modes]} if modes else {}
    if edges:
        meta[VARIABLE_EDGES] = edges
    if contexts:
        arrays[CONTEXT_LOSS] = np.column_stack(list(contexts.values()))
        meta["context_labels"] = list(contexts)
    return Trajectory(t=values[:, 0], loss=values[:, 1], series=arrays, meta=meta)
