"""A trajectory as text: JSON or CSV, for ``gdln solve`` and scripts."""

from __future__ import annotations

import csv
import io
import json

import numpy as np

from ._trajectory import CONTEXT_LOSS, Trajectory, context_columns

__all__ = ["format_trajectory"]


def format_trajectory(trajectory: Trajectory, fmt: str = "json") -> str:
    """A trajectory as JSON or CSV.

    JSON: ``t``, ``loss``, ``variables`` (name -> one series per mode), ``context_loss``
    (context label -> series: the loss of Eq. (1) within that context, whose average by
    the context probabilities is ``loss``) and ``meta``. CSV: one row per time, columns
    ``t``, ``loss``, ``NAME[mode]`` and ``context_loss[LABEL]``.

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
        }
        return json.dumps(payload)
    if fmt == "csv":
        header = ["t", "loss"]
        columns = [trajectory.t, trajectory.loss]
        for k in names:
            values = np.asarray(trajectory.series[k]).reshape(len(trajectory.t), -1)
            for j in range(values.shape[1]):
                header.append(f"{k}[{j}]")
                columns.append(values[:, j])
        for label, values in per_context.items():
            header.append(f"{CONTEXT_LOSS}[{label}]")
            columns.append(values)
        text = io.StringIO()
        csv.writer(text, lineterminator="\n").writerow(header)  # quotes labels with commas
        rows = [text.getvalue().rstrip("\n")]
        rows += [",".join(f"{x:.12g}" for x in row) for row in np.column_stack(columns)]
        return "\n".join(rows)
    raise ValueError(f"format {fmt!r}: expected json or csv")
