r"""How far a ReLU network's gating agrees with the predicted winners, over its run.

At each recorded step every unit of a ReLU node has a gating class, the contexts in which
it is on for at least one item, and a share of the node's output,
$\lVert W_{\mathrm{out}}[:,u]\rVert\,\lVert h_u\rVert$ (Jarvis, Klein, Rosman & Saxe
2025). The agreement is the share carried by units whose class is a winning pathway of
:func:`~gdln.gating.predict_gating`: 1 when the network puts all its output through the
predicted gatings, 0 when none.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._errors import GdlnError
from ..solution._trajectory import Trajectory
from ._classes import context_of, unit_shares
from ._predict import GatingPrediction
from ._run import recorded_network

__all__ = ["GatingAgreement", "gating_agreement"]


@dataclass(frozen=True)
class GatingAgreement:
    """A ReLU run's output shares by gating class, against a prediction, over time.

    Parameters
    ----------
    steps, t
        The recorded steps and their times in units of $\\tau$.
    shares
        ``(T, P + 1)``: the share of the output (averaged over the ReLU nodes) carried by
        units of each candidate's class (the prediction's order), and last by units of
        any other class.
    agreement
        ``(T,)``: the share carried by the predicted winners' classes.
    sizes
        ``(T, C + 1)``: the share carried by units on in 0, 1, ..., C contexts.
    selectivity
        ``(T,)``: the share carried by units on in as many contexts as some winner (the
        predicted selectivity, whichever subsets the units pick).
    """

    steps: tuple[int, ...]
    t: np.ndarray
    shares: np.ndarray
    agreement: np.ndarray
    sizes: np.ndarray
    selectivity: np.ndarray


def gating_agreement(
    prediction: GatingPrediction, run: Trajectory | str | Path, *, seed: int | None = None
) -> GatingAgreement:
    """Score a ReLU run's gating classes against the predicted winners at every record.

    Parameters
    ----------
    prediction
        The ranked candidates of the run's task (:func:`~gdln.gating.predict_gating`).
    run
        A run recorded with ``record_patterns`` (or its file).
    seed
        The seed whose network is scored (default: the run's first).

    Returns
    -------
    GatingAgreement
        The shares per class and the agreement, per recorded step.

    Raises
    ------
    GdlnError
        The run's contexts are not the prediction's.

    References
    ----------
    Jarvis, Klein, Rosman & Saxe (2025): a unit's share of the output.
    """
    net = recorded_network(run)
    labels, context = context_of(net.examples)
    if tuple(labels) != tuple(prediction.contexts):
        raise GdlnError(
            f"{net.source}: the run's contexts ({', '.join(labels[:4])}) are not the "
            f"prediction's ({', '.join(prediction.contexts[:4])})"
        )
    which = net.seed_index(seed)
    bits = 2 ** np.arange(len(labels), dtype=np.int64)  # a class as the sum of 2^c
    column = {int(sum(bits[c] for c in s)): k for k, s in enumerate(prediction.subsets)}
    shares = np.zeros((len(net.steps), len(prediction.subsets) + 1))
    sizes = np.zeros((len(net.steps), len(labels) + 1))
    for row in range(len(net.steps)):
        weights = net.weights(row, which)
        z = net.forward(weights)
        for v, pattern in net.patterns(row, which).items():
            share = unit_shares(net, v, weights, z[v])
            on = np.stack([pattern[context == c].any(axis=0) for c in range(len(labels))])
            codes = bits @ on
            for code in np.unique(codes):
                k = column.get(int(code), len(prediction.subsets))
                shares[row, k] += float(share[codes == code].sum()) / len(net.relu)
            for size in range(len(labels) + 1):
                sizes[row, size] += float(share[on.sum(axis=0) == size].sum()) / len(net.relu)
    winners = list(prediction.winners)
    won = sorted({len(prediction.subsets[k]) for k in winners})
    return GatingAgreement(
        steps=net.steps,
        t=net.t,
        shares=shares,
        agreement=shares[:, winners].sum(axis=1),
        sizes=sizes,
        selectivity=sizes[:, won].sum(axis=1),
    )
