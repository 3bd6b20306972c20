"""Trajectories: what a solve or a simulation records over time.

One value for theory and simulation alike, so that comparisons and plots read both the
same way. Time is in units of $\\tau$ (see :mod:`gdln.solution` for the convention
$t/\\tau = \\mathrm{lr}\\times\\mathrm{step}$).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..outputs import atomic_file

__all__ = ["Trajectory", "format_trajectory", "time_to_half_loss"]


@dataclass(frozen=True)
class Trajectory:
    """Recorded quantities at a sequence of times.

    Parameters
    ----------
    t
        ``(T,)`` times, in units of $\\tau$.
    loss
        ``(T,)`` or ``(T, seeds)``: the loss of Eq. (1) of Saxe et al. 2022.
    series
        Name -> array whose axis 0 is time. From :func:`gdln.solve`: every reduced
        variable, e.g. ``"B1"`` -> ``(T, modes)``, and ``"context_loss"`` ->
        ``(T, contexts)`` with the labels in ``meta["context_labels"]``. From
        :func:`gdln.simulate`: e.g. ``"loss/x0->y3"`` -> ``(T, seeds)``.
    meta
        JSON-serialisable description: source file, parameters, method, seeds, ...

    Raises
    ------
    ValueError
        ``t`` is not one-dimensional, or ``loss`` or a series has a row count other
        than the number of times.
    """

    t: np.ndarray
    loss: np.ndarray
    series: Mapping[str, np.ndarray] = field(default_factory=dict)
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        t = np.asarray(self.t, dtype=float)
        object.__setattr__(self, "t", t)
        object.__setattr__(self, "loss", np.asarray(self.loss, dtype=float))
        if t.ndim != 1:
            raise ValueError(f"t must be one-dimensional, got shape {t.shape}")
        if len(self.loss) != len(t):
            raise ValueError(f"loss has {len(self.loss)} rows for {len(t)} times")
        series = {name: np.asarray(value) for name, value in self.series.items()}
        for name, value in series.items():
            if len(value) != len(t):
                raise ValueError(f"series {name!r} has {len(value)} rows for {len(t)} times")
        object.__setattr__(self, "series", series)

    def __repr__(self) -> str:
        names = ", ".join(sorted(self.series))
        return f"Trajectory(t=<{len(self.t)} times to {self.t[-1]:.4g}>, series=[{names}])"

    def _repr_html_(self) -> str:
        """A table and a loss plot, for Jupyter (``report._notebook.trajectory_html``)."""
        from ..report._notebook import trajectory_html

        return trajectory_html(self)

    def save(self, path: str | Path, *, force: bool = False) -> Path:
        """Write to ``.npz`` or ``.json`` (by suffix); refuse to overwrite unless ``force``.

        The file appears whole or not at all, and an existing one is never replaced
        without ``force``, even by a concurrent writer (:func:`gdln.outputs.atomic_file`;
        ``FileExistsError`` otherwise).
        """
        path = Path(path)
        if path.suffix not in (".json", ".npz"):
            raise ValueError(f"{path}: suffix must be .npz or .json, got {path.suffix!r}")
        with atomic_file(path, force=force) as temporary:
            if path.suffix == ".json":
                payload = {
                    "t": self.t.tolist(),
                    "loss": self.loss.tolist(),
                    "series": {
                        k: np.asarray(v, dtype=float).tolist() for k, v in self.series.items()
                    },
                    "meta": dict(self.meta),
                }
                temporary.write_text(json.dumps(payload))
            else:
                arrays = {f"series/{k}": v for k, v in self.series.items()}
                np.savez(
                    temporary,
                    t=self.t,
                    loss=self.loss,
                    meta=np.array(json.dumps(dict(self.meta))),
                    **arrays,  # type: ignore[arg-type]
                )
        return path

    @classmethod
    def load(cls, path: str | Path) -> Trajectory:
        """Read a file written by :meth:`save`."""
        path = Path(path)
        if path.suffix == ".json":
            payload = json.loads(path.read_text())
            return cls(
                t=np.asarray(payload["t"]),
                loss=np.asarray(payload["loss"]),
                series={k: np.asarray(v) for k, v in payload["series"].items()},
                meta=payload.get("meta", {}),
            )
        with np.load(path, allow_pickle=False) as data:
            series = {k[len("series/") :]: data[k] for k in data.files if k.startswith("series/")}
            return cls(
                t=data["t"], loss=data["loss"], series=series, meta=json.loads(str(data["meta"]))
            )


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
    names = [k for k in trajectory.series if k != "context_loss"]
    per_context = _context_columns(trajectory)
    if fmt == "json":
        payload = {
            "t": trajectory.t.tolist(),
            "loss": trajectory.loss.tolist(),
            "variables": {k: np.asarray(trajectory.series[k]).T.tolist() for k in names},
            "context_loss": {label: values.tolist() for label, values in per_context.items()},
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
            header.append(f"context_loss[{label}]")
            columns.append(values)
        text = io.StringIO()
        csv.writer(text, lineterminator="\n").writerow(header)  # quotes labels with commas
        rows = [text.getvalue().rstrip("\n")]
        rows += [",".join(f"{x:.12g}" for x in row) for row in np.column_stack(columns)]
        return "\n".join(rows)
    raise ValueError(f"format {fmt!r}: expected json or csv")


def _context_columns(trajectory: Trajectory) -> dict[str, np.ndarray]:
    """``series["context_loss"]`` ``(T, contexts)`` as label -> ``(T,)``."""
    if "context_loss" not in trajectory.series:
        return {}
    values = np.asarray(trajectory.series["context_loss"]).reshape(len(trajectory.t), -1)
    labels = [str(x) for x in trajectory.meta.get("context_labels", [])]
    if len(labels) != values.shape[1]:
        labels = [f"context{c}" for c in range(values.shape[1])]
    out: dict[str, np.ndarray] = {}
    for c, label in enumerate(labels):
        out[label if label not in out else f"{label}#{c}"] = values[:, c]  # labels may repeat
    return out


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
    """
    t, loss = np.asarray(t, float), np.asarray(loss, float)
    half = loss[0] / 2
    below = np.nonzero(loss <= half)[0]
    if len(below) == 0:
        return None
    i = int(below[0])
    if i == 0:
        return float(t[0])
    frac = (loss[i - 1] - half) / (loss[i - 1] - loss[i])
    return float(t[i - 1] + frac * (t[i] - t[i - 1]))
