"""Concrete examples: the raw data a full network is trained on.

A :class:`~gdln.Task` is stated as contexts and datasets (Sec. 2 of Saxe et al. 2022:
the gates are part of the data). The simulator and the full-matrix dynamics need it as
plain arrays, one row per example; :class:`ExampleSet` is that form.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._edge import EDGE_SEPARATOR, edge_name

__all__ = ["EXAMPLES_KEY", "ExampleSet"]

EXAMPLES_KEY = "training_examples"
"""The key of a simulation's ``meta`` that holds its examples (:meth:`ExampleSet.as_json`),
written with ``record_patterns`` so that the gated network can be read off the run."""


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

    def as_json(self) -> dict[str, Any]:
        """These examples as plain JSON data (floats written exactly by ``repr``).

        Returns
        -------
        dict
            ``inputs``, ``targets`` (node -> rows), ``gates`` (node or ``"u->v"`` -> values),
            ``weights``, ``context`` and ``context_labels``; read back by :meth:`from_json`.
        """
        return {
            "inputs": {str(v): np.asarray(a, float).tolist() for v, a in self.inputs.items()},
            "targets": {str(v): np.asarray(a, float).tolist() for v, a in self.targets.items()},
            "gates": {
                edge_name(k) if isinstance(k, tuple) else str(k): np.asarray(g, float).tolist()
                for k, g in self.gates.items()
            },
            "weights": np.asarray(self.weights, float).tolist(),
            "context": np.asarray(self.context, int).tolist(),
            "context_labels": [str(label) for label in self.context_labels],
        }

    @classmethod
    def from_json(cls, data: Any) -> ExampleSet:
        """Examples from :meth:`as_json`'s data, every value checked (it may come from a file).

        Parameters
        ----------
        data
            The mapping :meth:`as_json` wrote.

        Returns
        -------
        ExampleSet
            The examples, gates and weights as written; random gates are not kept.

        Raises
        ------
        ValueError
            A key is missing, a value is not a finite number, or the shapes disagree.
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"expected a mapping of examples, got {type(data).__name__}")
        missing = [k for k in ("inputs", "targets", "weights", "context") if k not in data]
        if missing:
            raise ValueError(f"missing {', '.join(missing)}")

        def table(key: str, dims: int) -> dict[str, np.ndarray]:
            found = data.get(key, {})
            if not isinstance(found, Mapping):
                raise ValueError(f"{key}: expected a mapping, got {type(found).__name__}")
            return {str(k): _numbers(v, dims, f"{key}.{k}") for k, v in found.items()}

        gates = {
            (tuple(k.split(EDGE_SEPARATOR, 1)) if EDGE_SEPARATOR in k else k): g
            for k, g in table("gates", 1).items()
        }
        context = _numbers(data["context"], 1, "context")
        if not all(c.is_integer() and c >= 0 for c in context):
            raise ValueError("context: expected integers >= 0")
        labels = data.get("context_labels", [])
        if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
            raise ValueError("context_labels: expected a list of texts")
        return cls(
            inputs=table("inputs", 2),
            targets=table("targets", 2),
            gates=gates,  # type: ignore[arg-type]
            weights=_numbers(data["weights"], 1, "weights"),
            context=context.astype(np.int64),
            context_labels=tuple(labels),
        )


def _numbers(value: Any, dims: int, what: str) -> np.ndarray:
    """``value`` as a finite float array of ``dims`` dimensions, else ``ValueError``."""
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError, OverflowError) as err:
        raise ValueError(f"{what}: expected numbers in a regular array") from err
    if array.ndim != dims or not all(math.isfinite(x) for x in array.ravel().tolist()):
        raise ValueError(f"{what}: expected a {dims}-dimensional array of finite numbers")
    return array
