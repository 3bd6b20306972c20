r"""The weights $W_e$ of every edge, stored in blocks that the forward pass uses whole.

Edges that one batched product computes (a sparse group of
:func:`~gdln.simulation._plan.sparse_groups`: same shape, same gating pattern) share one
``(S, k, |t|, |s|)`` tensor, so a training step reads, differentiates and updates the
group as one tensor instead of ``k``; every other edge has its own ``(S, |t|, |s|)``
block. The values are those of Sec. 2 of Saxe et al. 2022 whatever the storage.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import torch

__all__ = ["Weights"]


class Weights:
    """Per-edge weights ``(S, |t|, |s|)`` kept in blocks.

    ``blocks[b]`` holds one edge, or a stacked group ``(S, k, |t|, |s|)`` whose edges are
    ``groups[edges] = b``; ``where[i] = (b, slot)`` (``slot`` is ``None`` for a lone edge).
    """

    def __init__(
        self,
        blocks: Sequence[torch.Tensor],
        where: Sequence[tuple[int, int | None]],
        groups: dict[tuple[int, ...], int],
    ) -> None:
        self.blocks, self.where, self.groups = list(blocks), tuple(where), groups

    @classmethod
    def of_edges(cls, weights: Sequence[torch.Tensor]) -> Weights:
        """One block per edge: the weights as given."""
        return cls(weights, [(i, None) for i in range(len(weights))], {})

    @classmethod
    def stacked(
        cls,
        weights: Sequence[torch.Tensor],
        groups: Sequence[tuple[int, ...]],
        *,
        grad: bool = True,
    ) -> Weights:
        """New leaf blocks holding ``weights``, ``groups`` stacked; requiring gradients if ``grad``."""
        grouped = {i for g in groups for i in g}
        blocks: list[torch.Tensor] = []
        where: list[tuple[int, int | None]] = [(-1, None)] * len(weights)
        table: dict[tuple[int, ...], int] = {}
        for i, w in enumerate(weights):
            if i not in grouped:
                where[i] = (len(blocks), None)
                blocks.append(w.detach().clone())
        for g in groups:
            table[g] = len(blocks)
            for slot, i in enumerate(g):
                where[i] = (len(blocks), slot)
            blocks.append(torch.stack([weights[i].detach() for i in g], dim=1))
        return cls([b.requires_grad_(grad) for b in blocks], where, table)

    def gated(self, factors: Mapping[int, torch.Tensor]) -> Weights:
        """The blocks times this step's random-gate ``factors`` (block -> factor)."""
        if not factors:
            return self
        return self.with_blocks(
            [b * factors[i] if i in factors else b for i, b in enumerate(self.blocks)]
        )

    def with_blocks(self, blocks: Sequence[torch.Tensor]) -> Weights:
        """The same layout holding ``blocks`` (e.g. the blocks times this step's gates)."""
        return Weights(blocks, self.where, self.groups)

    def map(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> Weights:
        """Every block through ``fn``."""
        return self.with_blocks([fn(b) for b in self.blocks])

    def __len__(self) -> int:
        return len(self.where)

    def edge(self, i: int) -> torch.Tensor:
        """$W_e$ of edge ``i`` ``(S, |t|, |s|)`` (a view into its block, made now).

        Not cached: a view made without gradients would not carry them later.
        """
        b, slot = self.where[i]
        return self.blocks[b] if slot is None else self.blocks[b][:, slot]

    def edges(self) -> list[torch.Tensor]:
        """$W_e$ of every edge, in the plan's order."""
        return [self.edge(i) for i in range(len(self))]

    def group(self, edges: tuple[int, ...]) -> torch.Tensor:
        """The weights of ``edges`` stacked ``(S, k, |t|, |s|)``: a block, or stacked now."""
        b = self.groups.get(edges)
        if b is not None:
            return self.blocks[b]
        return torch.stack([self.edge(i) for i in edges], dim=1)
