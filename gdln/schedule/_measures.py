r"""What a schedule did to each context: losses at phase ends, forgetting, transfer, savings.

From each context's own loss $\mathcal L_c(t)$ (Eq. 1 of Saxe, Sodhani & Lewallen 2022
within the context), recorded all along, also while the context is off:

* **end loss** $\mathcal L_c(T_k)$ at the end of every phase $k$;
* **transfer** $\mathcal L_c(T_k) - \mathcal L_c(T_{k-1})$ for a context off in phase $k$:
  the change while other contexts train (negative: they help it);
* **forgetting**, the same change for a context off in phase $k$ that some earlier phase
  trained: the rise of its loss while it is off. For three tasks trained in order,
  $F_i(T_j, T_k) = \mathcal L_i(\text{end of } T_k) - \mathcal L_i(\text{end of } T_j)$
  (Braun, Dominé, Fitzgerald & Saxe 2022; their code's definition), any two phases
  $j < k$: :meth:`ScheduleMeasures.forgetting_between`;
* **savings** on relearning: with the criterion $\ell^* $ half-way down the first training
  phase's drop of $\mathcal L_c$ and $t_1$ the time that phase took to reach it, a later
  phase that trains $c$ again after a phase without it reaches $\ell^*$ in $t_r$ (0 if it
  starts below), and the savings are $1 - t_r/t_1$ (1: nothing to relearn; 0: as slow as
  the first time). Times are read off the recorded grid, linearly interpolated.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..outputs import atomic_file

__all__ = ["ScheduleMeasures"]


@dataclass(frozen=True, eq=False)
class ScheduleMeasures:
    r"""Per context and phase, what the schedule did (module docstring).

    Parameters
    ----------
    labels
        The contexts, in the order of the rows.
    phases
        The phases' names, in order.
    boundaries
        0, then each phase's end (units of $\tau$).
    trained
        ``(contexts, phases)``: whether the context has probability > 0 in the phase.
    t
        The recorded times.
    context_loss
        ``(T, contexts)``: each context's loss at those times.

    References
    ----------
    Braun, Dominé, Fitzgerald & Saxe (2022), "Exact learning dynamics of deep linear
    networks with prior knowledge" (the forgetting $F_i(T_j, T_k)$); Flesch et al. (2023)
    (blocked against interleaved training).
    """

    labels: tuple[str, ...]
    phases: tuple[str, ...]
    boundaries: tuple[float, ...]
    trained: np.ndarray
    t: np.ndarray
    context_loss: np.ndarray

    def _at(self, time: float) -> np.ndarray:
        """Each context's loss at a recorded time (the boundary's record)."""
        k = int(np.argmin(np.abs(self.t - time)))
        return np.asarray(self.context_loss[k])

    @property
    def end_loss(self) -> np.ndarray:
        """``(contexts, phases)``: each context's loss at the end of each phase."""
        return np.stack([self._at(b) for b in self.boundaries[1:]], axis=1)

    @property
    def start_loss(self) -> np.ndarray:
        """``(contexts, phases)``: each context's loss at the start of each phase."""
        return np.stack([self._at(b) for b in self.boundaries[:-1]], axis=1)

    @property
    def transfer(self) -> np.ndarray:
        """``(contexts, phases)``: the change of a context's loss over a phase that does not
        train it (NaN where it does)."""
        change = self.end_loss - self.start_loss
        return np.where(self.trained, np.nan, change)

    @property
    def forgetting(self) -> np.ndarray:
        """``(contexts, phases)``: the rise of a context's loss over a phase that does not
        train it, after some earlier phase did (NaN elsewhere): $F_c(T_{k-1}, T_k)$."""
        before = np.cumsum(self.trained, axis=1) - self.trained > 0
        return np.where(~self.trained & before, self.transfer, np.nan)

    def forgetting_between(self, label: str, first: int, then: int) -> float:
        r"""$F_i(T_j, T_k) = \mathcal L_i(\text{end of } T_k) - \mathcal L_i(\text{end of } T_j)$.

        Parameters
        ----------
        label
            The context $i$.
        first, then
            The phases $j < k$ (indices).

        Returns
        -------
        float
            The rise of context $i$'s loss from the end of phase $j$ to the end of
            phase $k$ (negative: learning helped it).

        Raises
        ------
        ValueError
            An unknown label, or phases not in order.
        """
        if label not in self.labels:
            raise ValueError(f"no context {label!r}; the labels: {', '.join(self.labels)}")
        if not 0 <= first < then < len(self.phases):
            raise ValueError(f"phases {first}, {then}: expected 0 <= j < k < {len(self.phases)}")
        row = self.labels.index(label)
        return float(self.end_loss[row, then] - self.end_loss[row, first])

    @property
    def savings(self) -> dict[str, list[tuple[int, float]]]:
        """Label -> ``(phase, savings)`` for every phase that trains the context again after
        a phase without it (module docstring); NaN where the criterion is not reached."""
        out: dict[str, list[tuple[int, float]]] = {}
        for row, label in enumerate(self.labels):
            phases = np.flatnonzero(self.trained[row])
            if not len(phases):
                continue
            first = int(phases[0])
            start, end = self.boundaries[first], self.boundaries[first + 1]
            high, low = self._at(start)[row], self._at(end)[row]
            if not high > low:
                continue
            criterion = high - (high - low) / 2
            t_first = self._reach(row, criterion, start, end)
            found = []
            for k in phases[1:]:
                k = int(k)
                if self.trained[row, k - 1]:
                    continue  # a continuation, not relearning
                t_again = self._reach(row, criterion, self.boundaries[k], self.boundaries[k + 1])
                found.append((k, 1 - t_again / t_first if t_first > 0 else math.nan))
            if found:
                out[label] = found
        return out

    def _reach(self, row: int, level: float, start: float, end: float) -> float:
        """The time after ``start`` at which context ``row``'s loss first reaches ``level``
        within ``[start, end]`` (linear between records; NaN if never)."""
        inside = (self.t >= start - 1e-12 * max(1.0, end)) & (self.t <= end + 1e-12 * max(1.0, end))
        t, loss = self.t[inside], self.context_loss[inside, row]
        below = np.flatnonzero(loss <= level)
        if not len(below):
            return math.nan
        i = int(below[0])
        if i == 0:
            return 0.0
        t0, t1, l0, l1 = t[i - 1], t[i], loss[i - 1], loss[i]
        return float(t0 + (t1 - t0) * (l0 - level) / (l0 - l1) - start)

    def to_dict(self) -> dict[str, Any]:
        """The measures as JSON-ready data (NaN as ``null``).

        Returns
        -------
        dict
            ``labels``, ``phases``, ``boundaries`` and, per label, ``end_loss``,
            ``transfer`` and ``forgetting`` per phase, and ``savings``.
        """

        def rows(matrix: np.ndarray) -> dict[str, list[float | None]]:
            return {label: [_number(x) for x in matrix[i]] for i, label in enumerate(self.labels)}

        return {
            "labels": list(self.labels),
            "phases": list(self.phases),
            "boundaries": list(self.boundaries),
            "end_loss": rows(self.end_loss),
            "transfer": rows(self.transfer),
            "forgetting": rows(self.forgetting),
            "savings": {
                label: [{"phase": k, "savings": _number(v)} for k, v in found]
                for label, found in self.savings.items()
            },
        }

    def rows(self) -> list[tuple[str, int, str, str, float]]:
        """One row per context, phase and measure: ``(label, phase, name, measure, value)``.

        Returns
        -------
        list of tuple
            ``measure`` is ``end_loss``, ``transfer``, ``forgetting`` or ``savings``;
            NaN entries are left out.
        """
        out = []
        tables = (("end_loss", self.end_loss), ("transfer", self.transfer))
        for measure, matrix in (*tables, ("forgetting", self.forgetting)):
            for i, label in enumerate(self.labels):
                for k, name in enumerate(self.phases):
                    if not math.isnan(matrix[i, k]):
                        out.append((label, k, name, measure, float(matrix[i, k])))
        for label, found in self.savings.items():
            out += [(label, k, self.phases[k], "savings", v) for k, v in found if not math.isnan(v)]
        return out

    def save(self, path: str | Path, *, force: bool = False) -> Path:
        """Write the measures to ``.json`` (:meth:`to_dict`) or ``.csv`` (:meth:`rows`).

        Parameters
        ----------
        path
            The output file; its suffix chooses the format.
        force
            Whether an existing file may be replaced.

        Returns
        -------
        Path
            ``path``.

        Raises
        ------
        ValueError
            Another suffix.
        gdln.outputs.OutputExistsError
            The file exists and ``force`` is false.
        """
        path = Path(path)
        if path.suffix not in (".json", ".csv"):
            raise ValueError(f"{path.name}: expected a .json or .csv file")
        with (
            atomic_file(path, force=force) as temporary,
            temporary.open("w", newline="", encoding="utf-8") as f,
        ):
            if path.suffix == ".json":
                json.dump(self.to_dict(), f, indent=1)
            else:
                writer = csv.writer(f)
                writer.writerow(["context", "phase", "name", "measure", "value"])
                writer.writerows(self.rows())
        return path


def _number(x: float) -> float | None:
    return None if math.isnan(x) else float(x)


def measures_of(
    labels: Sequence[str],
    phases: Sequence[str],
    boundaries: Sequence[float],
    trained: np.ndarray,
    t: np.ndarray,
    context_loss: np.ndarray,
) -> ScheduleMeasures:
    """The measures of recorded context losses (the boundaries among the times)."""
    return ScheduleMeasures(
        tuple(labels), tuple(phases), tuple(boundaries), np.asarray(trained, bool), t, context_loss
    )
