"""A trajectory as text: JSON or CSV, for ``gdln solve`` and scripts."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import numpy as np

from ._saved import typed_json
from ._series import (
    CONTEXT_LOSS,
    KERNEL_DISTANCE,
    VARIABLE_EDGES,
    context_columns,
    matrix_key,
    node_key,
    variable_in_key,
)
from ._trajectory import Trajectory

__all__ = ["format_trajectory"]


def format_trajectory(trajectory: Trajectory, fmt: str = "json") -> str:
    """A trajectory as JSON or CSV.

    JSON: ``t``, ``loss``, ``variables`` (name -> one series per mode), ``context_loss``
    (context label -> series: the loss of Eq. (1) within that context, whose average by
    the context probabilities is ``loss``), ``meta`` (with ``meta["variable_edges"]``,
    each reduced variable's edges), ``status`` (how the run ended) and, where known,
    ``recording`` (what it recorded, when). CSV: where the trajectory has reduced
    variables, a first line ``# variable_edges: {...}`` (that map as JSON), then one row per time,
    columns ``t``, ``loss``, ``NAME (mode N)`` for a reduced variable in mode ``N`` of the
    whole network (numbered as in ``meta["modes"]``, across all systems; one name stands
    for one edge set in every system), ``sv[EDGE] (singular value k)`` for the ``k``-th
    largest singular value of an edge (the full-matrix flow), ``NAME (index j)`` for
    column ``j`` of another series, and ``loss in context LABEL``.

    Parameters
    ----------
    trajectory
        The trajectory to print.
    fmt
        ``"json"`` or ``"csv"``.

    Returns
    -------
    str
        The trajectory in that format.

    Raises
    ------
    ValueError
        ``fmt`` is neither ``"json"`` nor ``"csv"``.
    """
    names = [k for k in trajectory.series if k != CONTEXT_LOSS]
    per_context = context_columns(trajectory)
    if fmt == "json":
        payload = {
            "t": trajectory.t.tolist(),
            "loss": trajectory.loss.tolist(),
            "variables": {k: np.asarray(trajectory.series[k]).T.tolist() for k in names},
            CONTEXT_LOSS: {label: values.tolist() for label, values in per_context.items()},
            "meta": dict(trajectory.meta),
            **typed_json(trajectory),
        }
        return json.dumps(payload)
    if fmt == "csv":
        header = ["t", "loss"]
        columns = [trajectory.t, trajectory.loss]
        for k in names:
            values = np.asarray(trajectory.series[k]).reshape(len(trajectory.t), -1)
            header += _column_names(trajectory, k, values.shape[1])
            columns += list(values.T)
        for label, values in per_context.items():
            header.append(f"loss in context {label}")
            columns.append(values)
        text = io.StringIO()
        csv.writer(text, lineterminator="\n").writerow(header)  # quotes labels with commas
        rows = [text.getvalue().rstrip("\n")]
        if trajectory.variable_edges:  # JSON escapes any newline of a node's name
            rows.insert(0, f"# {VARIABLE_EDGES}: {json.dumps(trajectory.variable_edges)}")
        rows += [",".join(f"{x:.12g}" for x in row) for row in np.column_stack(columns)]
        return "\n".join(rows)
    raise ValueError(f"format {fmt!r}: expected json or csv")


def _column_names(trajectory: Trajectory, key: str, count: int) -> list[str]:
    """The CSV names of the ``count`` columns of series ``key``: a reduced variable's by
    the network's mode numbers (``meta["modes"]``: one list per system, or one list), any
    other series' by their index (singular values by rank, from 1; a representational
    similarity by its pair of examples)."""
    if key == KERNEL_DISTANCE and count == 1:
        return [key]
    if key.startswith(node_key("rsm", "")):  # (n, n) over the examples, row-major
        n = round(count**0.5)
        if n * n == count:
            return [f"{key} (examples {a} and {b})" for a in range(n) for b in range(n)]
    name, system = variable_in_key(key)
    modes: Any = trajectory.meta.get("modes")
    if modes and all(isinstance(m, list) for m in modes):
        modes = modes[system] if system < len(modes) else None
    plain = isinstance(modes, list) and all(isinstance(m, int) for m in modes)
    if plain and len(modes) == count and name.isidentifier():
        return [f"{name} (mode {m})" for m in modes]
    if key.startswith(matrix_key("sv", "")[:-1]):  # an edge's singular values, descending
        return [f"{key} (singular value {j + 1})" for j in range(count)]
    return [f"{key} (index {j})" for j in range(count)]
