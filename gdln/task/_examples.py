"""Concrete examples: the raw data a full network is trained on.

A :class:`~gdln.Task` is stated as contexts and datasets (Sec. 2 of Saxe et al. 2022:
the gates are part of the data). The simulator and the full-matrix dynamics need it as
plain arrays, one row per example; :class:`ExampleSet` is that form.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["ExampleSet"]


@dataclass(frozen=True)
class ExampleSet:
    r"""Examples with their gates and weights, ready for a forward pass.

    The loss of Eq. (1) of Saxe et al. 2022 is the weighted average over these rows of
    $\tfrac12\sum_{v\in\mathrm{Out}}\lVert y_v-h_v\rVert^2$.

    Parameters
    ----------
    inputs
        Input node id -> array ``(n, |v|)``. Input nodes absent here hold zeros.
    targets
        Output node id -> array ``(n, |v|)``. Output nodes absent here have target zero.
    gates
        Gated node id, or gated edge ``(source, target)`` -> array ``(n,)``. Ungated
        nodes and edges have gate 1 and do not appear.
    weights
        ``(n,)``, non-negative, summing to 1: the average $\langle\cdot\rangle$ in Eq. (1).
    context
        ``(n,)`` integer: the index of the context each example belongs to.
    context_labels
        One label per context, e.g. ``"x0->y3"``.
    random_gates
        Gated item -> survival probability $p$ of an independent Bernoulli gate
        $\delta$ redrawn at every step (stochastic depth); the item's gate in an example
        is ``gates[item] * delta``. Empty for tasks without random gates.

    Raises
    ------
    ValueError
        An array's shape does not match the number of examples ``n = len(weights)``.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eq. (1) (the loss as an average over examples and
    gates); Hayou & Ayed, "Regularization in ResNet with Stochastic Depth", Sec. 2 (the
    Bernoulli gates of stochastic depth).
    """

    inputs: Mapping[str, np.ndarray]
    targets: Mapping[str, np.ndarray]
    gates: Mapping[Hashable, np.ndarray]
    weights: np.ndarray
    context: np.ndarray
    context_labels: tuple[str, ...] = field(default=())
    random_gates: Mapping[Hashable, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.weights)
        for kind, table in (("inputs", self.inputs), ("targets", self.targets)):
            for node, array in table.items():
                if np.ndim(array) != 2 or len(array) != n:
                    raise ValueError(f"{kind}[{node!r}] must have shape (n={n}, size)")
        for key, array in self.gates.items():
            if np.shape(array) != (n,):
                raise ValueError(f"gates[{key!r}] must have shape ({n},)")
        if np.shape(self.context) != (n,):
            raise ValueError(f"context must have shape ({n},)")

    def __len__(self) -> int:
        return len(self.weights)

    def zero_output_loss(self) -> np.ndarray:
        r"""Per-context loss of the zero output, $\tfrac12\langle\lVert y\rVert^2\rangle_c$.

        The loss of Eq. (1) before any learning from small weights, and the natural scale
        of a route's error: a route error of 1 means no better than predicting zero.

        Returns
        -------
        numpy.ndarray
            ``(contexts,)``.
        """
        per_example = np.zeros(len(self))
        for y in self.targets.values():
            per_example += 0.5 * np.sum(np.asarray(y, dtype=float) ** 2, axis=1)
        n_contexts = max(len(self.context_labels), int(self.context.max(initial=-1)) + 1)
        mass = np.bincount(self.context, weights=self.weights, minlength=n_contexts)
        total = np.bincount(self.context, weights=self.weights * per_example, minlength=n_contexts)
        return np.divide(total, mass, out=np.zeros(n_contexts), where=mass > 0)
