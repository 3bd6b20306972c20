r"""A ReLU run against the theory of its own gated network, on one time axis.

From the step $K$ where the activation patterns freeze, the ReLU network *is* the gated
deep linear network of those patterns (Sec. 2 of Saxe, Sodhani & Lewallen 2022), so the
full-matrix dynamics of that GDLN (Eqs. 3-4, the matrix route of :func:`gdln.solve`),
started from the network's own weights at $K$, predict its loss from there on: exactly
for the gradient-descent map with the run's learning rate, to $O(\mathrm{lr})$ for the
flow. Before $K$, or on a task whose patterns never freeze, it is exact for the gated
network, not for the ReLU network; the flip rate drawn beside it says how far that is.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._errors import GdlnError
from ..solution._trajectory import Trajectory
from ._agreement import GatingAgreement, gating_agreement
from ._extract import Extraction, extract
from ._predict import GatingPrediction
from ._run import recorded_network

__all__ = ["ReluTheory", "relu_theory"]

DYNAMICS = ("gd-map", "flow")
"""The extracted GDLN's dynamics: the run's own gradient-descent map, or the flow."""


@dataclass(frozen=True)
class ReluTheory:
    """A ReLU run's loss, its extracted GDLN's dynamics from a step, and the flip rate.

    Parameters
    ----------
    source, seed
        The run and the seed drawn.
    t, loss
        The run's recorded times (units of $\\tau$) and the ReLU network's loss there.
    flip_t, flip_fraction
        The time of each record after the first, and the fraction of (example, unit)
        patterns that differ from the record before.
    extraction
        The gated network of the patterns at the start step (:func:`gdln.extract`).
    theory
        Its full-matrix dynamics from the network's weights at that step; its times are
        counted from the start (add :attr:`start` to put them on the run's axis).
    dynamics
        ``"gd-map"`` or ``"flow"``.
    agreement, prediction
        With a prediction: the run's output shares by gating class against the predicted
        winners over time (:func:`gdln.gating.gating_agreement`), and the prediction;
        else ``None``.
    """

    source: str
    seed: int
    t: np.ndarray
    loss: np.ndarray
    flip_t: np.ndarray
    flip_fraction: np.ndarray
    extraction: Extraction
    theory: Trajectory
    dynamics: str
    agreement: GatingAgreement | None = None
    prediction: GatingPrediction | None = None

    @property
    def start(self) -> float:
        """The time (units of $\\tau$) the theory starts at: the extracted step's.

        Returns
        -------
        float
            ``extraction.t``.
        """
        return float(self.extraction.t)

    def gap(self) -> float:
        """The largest gap between the ReLU loss and the theory's at the run's records in
        the theory's span, relative to the ReLU loss at the start.

        Returns
        -------
        float
            $\\max_t |L_{\\mathrm{ReLU}}(t) - L_{\\mathrm{GDLN}}(t)| / L_{\\mathrm{ReLU}}(K)$
            over the records both have (``nan`` when none after the start).
        """
        end = self.start + float(self.theory.t[-1])
        after = (self.t >= self.start - 1e-12) & (self.t <= end + 1e-12)
        if not after.any():
            return float("nan")
        got = np.interp(self.t[after], self.theory.t + self.start, self.theory.loss)
        scale = abs(float(self.loss[after][0])) or 1.0
        return float(np.max(np.abs(got - self.loss[after])) / scale)


def relu_theory(
    run: Trajectory | str | Path,
    *,
    step: int | None = None,
    seed: int | None = None,
    dynamics: str = "gd-map",
    t_max: float | None = None,
    points: int | None = None,
    prediction: GatingPrediction | None = None,
) -> ReluTheory:
    r"""A ReLU run against the full-matrix dynamics of its extracted gated network.

    Parameters
    ----------
    run
        A :func:`gdln.simulate` run recorded with ``record_patterns``, or its file.
    step
        The recorded step the theory starts from (default: the step from which the patterns
        are frozen, or the first record when they never freeze within the run).
    seed
        The seed drawn (default: the run's first).
    dynamics
        ``"gd-map"`` (the run's gradient-descent map with its learning rate, exact while
        no pattern flips) or ``"flow"`` (the gradient flow of Eqs. 3-4).
    t_max
        How long the theory runs from the start, in units of $\tau$ (default: to the end
        of the run).
    points
        The theory's recorded times (default: one per record of the run in its span, at
        least 2).
    prediction
        A :func:`gdln.predict_gating` of the run's task, to score the run's gating against.

    Returns
    -------
    ReluTheory
        The run's loss and flip rate, the extraction and its dynamics.

    Raises
    ------
    GdlnError
        An unknown ``dynamics``; the run holds no patterns (a ``GraphSpecError``).

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Sec. 2 (ReLU as a gated linear unit) and Eqs. (3)-(4);
    Jarvis, Klein, Rosman & Saxe (2025), the rectified linear network of a ReLU network.
    """
    from ..solution._dynamics import solve

    if dynamics not in DYNAMICS:
        raise GdlnError(f"dynamics: expected one of {', '.join(DYNAMICS)}, got {dynamics!r}")
    net = recorded_network(run)
    which = net.seed_index(seed)
    if step is None:
        frozen = extract(net.trajectory, seed=seed).frozen_from
        step = net.steps[0] if frozen is None else frozen
    found = extract(net.trajectory, step=step, seed=seed)
    lr = float(net.trajectory.meta.get("lr", 0.05))
    remaining = float(net.t[-1] - found.t) if t_max is None else float(t_max)
    after = int(np.sum((net.t >= found.t) & (net.t <= found.t + remaining + 1e-12)))
    theory = solve(
        found.problem(),
        weights=found.weights,
        t_max=remaining if remaining > 0 else lr,
        dynamics=dynamics,
        lr=lr,
        points=points or max(2, after),
    )
    agreement = None if prediction is None else gating_agreement(prediction, run, seed=seed)
    return ReluTheory(
        source=net.source,
        seed=net.seeds[which],
        t=np.asarray(net.t, float),
        loss=np.asarray(net.trajectory.loss[:, which], float),
        flip_t=np.asarray(net.t[1:], float),
        flip_fraction=np.asarray(found.flip_fraction, float),
        extraction=found,
        theory=theory,
        dynamics=dynamics,
        agreement=agreement,
        prediction=prediction,
    )
