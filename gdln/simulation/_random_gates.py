r"""Independent random gates (stochastic depth), redrawn every step.

An item of ``examples.random_gates`` (a node or an edge) with survival probability $p$
multiplies its gate by $\delta\sim\mathrm{Bernoulli}(p)$, one draw per step per
repetition shared by all examples; the recorded loss is then that of the step's draw.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np
import torch

from ._errors import SimulationSpecError
from ._plan import Plan
from ._seeds import GATE_STREAM

__all__ = ["RandomGates"]


class RandomGates:
    r"""Independent Bernoulli gates, redrawn every step, folded into the weights.

    An edge's random gate multiplies $g_qW_qh_{s(q)}$, a node's multiplies every edge into
    it, so $\delta$ times the weight is the same network. Repetition ``r`` draws from
    ``numpy.random.default_rng((seeds[r], 2))`` alone, one Bernoulli per item per step.
    """

    def __init__(
        self,
        net: Plan,
        survival: Mapping[Hashable, Any],
        seeds: list[int],
        dtype: torch.dtype,
        device: torch.device,
    ) -> None:
        index = {e: i for i, e in enumerate(net.edges)}
        self.targets: list[list[int]] = []
        probabilities = []
        for item, p in survival.items():
            if isinstance(item, tuple) and tuple(item) in index:
                self.targets.append([index[tuple(item)]])
            elif item in net.sizes:
                self.targets.append([i for i, e in enumerate(net.edges) if e[1] == item])
            else:
                raise SimulationSpecError(
                    f"random_gates: {item!r} is neither a node nor an edge of the graph"
                )
            try:
                value = float(p)
            except TypeError:
                raise SimulationSpecError(
                    f"random_gates: the survival probability of {item!r} is {p}, not a "
                    "number; give it a value to simulate"
                ) from None
            if not 0 <= value <= 1:
                raise SimulationSpecError(
                    f"random_gates: survival probability of {item!r} is {value}, not in [0, 1]"
                )
            probabilities.append(value)
        self.p = np.array(probabilities)
        self.rngs = [np.random.default_rng((s, GATE_STREAM)) for s in seeds]
        self.dtype, self.device = dtype, device

    def apply(self, weights: list[torch.Tensor]) -> list[torch.Tensor]:
        """This step's weights: each multiplied by the gates of the items acting on it."""
        if not self.targets:
            return weights
        draws = np.array([rng.random(len(self.p)) < self.p for rng in self.rngs], dtype=float)
        factor: dict[int, np.ndarray] = {}
        for k, edges in enumerate(self.targets):
            for i in edges:
                factor[i] = factor.get(i, 1.0) * draws[:, k]
        out = list(weights)
        for i, f in factor.items():
            scale = torch.as_tensor(f, dtype=self.dtype, device=self.device)
            out[i] = weights[i] * scale[:, None, None]
        return out
