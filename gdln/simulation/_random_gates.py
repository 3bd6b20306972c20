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
from ._weights import Weights

__all__ = ["RandomGates"]


class RandomGates:
    r"""Independent Bernoulli gates, redrawn every step, folded into the weights.

    An edge's random gate multiplies $g_qW_qh_{s(q)}$, a node's multiplies every edge into
    it, so $\delta$ times the weight is the same network. Repetition ``r`` draws from
    ``numpy.random.default_rng((seeds[r], 2))`` alone, one Bernoulli per item per step;
    ``chunk`` steps are drawn and copied to the device at once, one factor tensor per
    block of weights they act on (:class:`Weights`).
    """

    def __init__(
        self,
        net: Plan,
        survival: Mapping[Hashable, Any],
        seeds: list[int],
        dtype: torch.dtype,
        device: torch.device,
        *,
        chunk: int = 256,
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
        self.dtype, self.device, self.chunk = dtype, device, chunk
        self.chunk_factors: dict[int, torch.Tensor] = {}  # block -> this chunk's, by step
        self.left = 0  # steps of the chunk not yet used

    def apply(self, weights: Weights) -> Weights:
        """This step's weights: each multiplied by the gates of the items acting on it."""
        return weights.gated(self.factors(weights))

    def factors(self, weights: Weights) -> dict[int, torch.Tensor]:
        """This step's factor of every gated block of ``weights`` (block -> tensor)."""
        if not self.targets:
            return {}
        if self.left == 0:
            self.chunk_factors = self._draw(weights)
            self.left = self.chunk
        at = self.chunk - self.left
        self.left -= 1
        return {b: factor[at] for b, factor in self.chunk_factors.items()}

    def _draw(self, weights: Weights) -> dict[int, torch.Tensor]:
        r"""The next :attr:`chunk` steps' draws, as one factor tensor per gated block.

        Row ``c`` of ``rng.random((chunk, m))`` is what the ``c``-th of ``chunk`` draws
        ``rng.random(m)`` would give, so the stream is the same one draw per step.
        """
        draws = np.stack(
            [rng.random((self.chunk, len(self.p))) < self.p for rng in self.rngs], axis=1
        ).astype(np.float64)
        edge = np.ones((self.chunk, len(self.rngs), len(weights)))
        for k, edges in enumerate(self.targets):
            edge[:, :, edges] *= draws[:, :, k : k + 1]
        touched = sorted({i for edges in self.targets for i in edges})
        out: dict[int, torch.Tensor] = {}
        for b in sorted({weights.where[i][0] for i in touched}):
            slots = [(i, slot) for i, (bb, slot) in enumerate(weights.where) if bb == b]
            if slots[0][1] is None:
                factor = edge[:, :, slots[0][0], None, None]
            else:
                order = [i for i, _ in sorted(slots, key=lambda item: item[1] or 0)]
                factor = edge[:, :, order, None, None]
            out[b] = torch.as_tensor(factor, dtype=self.dtype, device=self.device)
        return out
