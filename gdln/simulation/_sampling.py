"""Minibatches for ``optimizer="sgd"``: examples drawn with probability equal to their weight.

Repetition ``r`` draws its minibatches from ``numpy.random.default_rng((seeds[r], 1))``
alone, with replacement, so that the average of a minibatch's losses is an unbiased
estimate of Eq. (1) of Saxe et al. 2022.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from ..task._examples import ExampleSet
from ._seeds import MINIBATCH_STREAM, seed_list
from ._settings import check_positive

__all__ = ["Sampler", "minibatch_indices"]


def minibatch_indices(
    examples: ExampleSet,
    *,
    steps: int,
    batch_size: int,
    seeds: int | Sequence[int] = 1,
    seed: int = 0,
) -> np.ndarray:
    """The example indices of every minibatch of :func:`gdln.simulate` with ``"sgd"``.

    That is, with ``simulate(optimizer="sgd", batch_size=batch_size)``
    and the same ``seeds`` and ``seed``.

    Parameters
    ----------
    examples
        The training examples; example ``i`` is drawn with probability ``weights[i]``.
    steps
        Number of updates (minibatches per repetition).
    batch_size
        Examples per minibatch.
    seeds, seed
        As in :func:`gdln.simulate`: a count ``S`` (seeds ``seed, ..., seed+S-1``) or an
        explicit list of seeds.

    Returns
    -------
    numpy.ndarray
        ``(steps, S, batch_size)`` ints: step ``k`` of repetition ``r`` averages Eq. (1)
        over the examples ``out[k, r]`` (drawn with replacement, with probability equal
        to their weight, from ``numpy.random.default_rng((seeds[r], 1))`` alone).

    Raises
    ------
    SimulationSpecError
        ``steps`` or ``batch_size`` is not a positive int (``steps`` may be 0).

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eq. (1): the loss is an expectation over examples, of
    which a minibatch is an unbiased estimate.
    """
    check_positive("steps", steps, integer=True, allow_zero=True)
    check_positive("batch_size", batch_size, integer=True)
    sampler = Sampler(examples.weights, seed_list(seeds, seed), batch_size, torch.device("cpu"))
    rows = [sampler.rows(k).numpy() for k in range(steps)]
    return np.stack(rows) if rows else np.zeros((0, sampler.n_seeds, batch_size), dtype=np.int64)


CHUNK_ELEMENTS = 2**22
"""Most indices a :class:`Sampler` draws at once (32 MiB of int64), over all seeds."""


class Sampler:
    """Per-seed minibatch indices, drawn in chunks from ``default_rng((seed, 1))``.

    A chunk holds up to 1024 steps, fewer for large batches (at most
    :data:`CHUNK_ELEMENTS` indices); the draws do not depend on the chunk size, since
    ``Generator.choice`` consumes one uniform number per index, in order.
    """

    def __init__(self, weights: Any, seeds: list[int], batch_size: int, device: torch.device):
        self.p = np.asarray(weights, dtype=np.float64)
        self.p = self.p / self.p.sum()
        self.n, self.b, self.device = len(self.p), batch_size, device
        self.n_seeds = len(seeds)
        self.chunk = max(1, min(1024, CHUNK_ELEMENTS // max(1, batch_size * len(seeds))))
        self.rngs = [np.random.default_rng((s, MINIBATCH_STREAM)) for s in seeds]
        self.start = -self.chunk
        self.block: torch.Tensor | None = None

    def rows(self, step: int) -> torch.Tensor:
        """The minibatch of step ``step``, ``(S, batch_size)``; steps come in increasing order."""
        if step >= self.start + self.chunk:
            self.start = step - step % self.chunk
            draws = [r.choice(self.n, size=(self.chunk, self.b), p=self.p) for r in self.rngs]
            self.block = torch.as_tensor(np.stack(draws, axis=1), device=self.device)
        assert self.block is not None
        return self.block[step - self.start]
