"""Which repetitions a run makes, and where each one's randomness comes from.

Many repetitions run as one tensor program: every weight carries a leading seed axis
``S``. Repetition ``r`` draws its initial weights from ``numpy.random.default_rng(seeds[r])``,
its minibatches (SGD) from ``default_rng((seeds[r], 1))`` and its random gates from
``default_rng((seeds[r], 2))``, and nothing else, so a batched run equals the per-seed runs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._bounded._limits import beyond, current_limits
from ._errors import SimulationSpecError

__all__ = ["GATE_STREAM", "MINIBATCH_STREAM", "seed_list"]

MINIBATCH_STREAM = 1
"""Repetition ``r`` draws its minibatches from ``default_rng((seeds[r], MINIBATCH_STREAM))``."""

GATE_STREAM = 2
"""Repetition ``r`` draws its random gates from ``default_rng((seeds[r], GATE_STREAM))``."""


def seed_list(seeds: int | Sequence[int], seed: int) -> list[int]:
    """The seeds of the repetitions: ``seed, ..., seed + seeds - 1``, or the list ``seeds``.

    >>> seed_list(3, 10)
    [10, 11, 12]
    >>> seed_list([4, 9], 0)
    [4, 9]
    """
    if isinstance(seeds, (bool, np.bool_)):
        raise SimulationSpecError(f"seeds: expected a count >= 1 or a list of ints, got {seeds!r}")
    if isinstance(seeds, (int, np.integer)):
        if seeds < 1:
            raise SimulationSpecError(f"seeds: expected a count >= 1, got {seeds}")
        if seeds > current_limits().batch_elements:  # each repetition holds numbers
            raise SimulationSpecError(beyond("batch_elements", f"seeds={seeds}"))
        return [int(seed) + r for r in range(int(seeds))]
    out = list(seeds)
    if not out or not all(isinstance(s, (int, np.integer)) and s >= 0 for s in out):
        raise SimulationSpecError(
            f"seeds: expected a non-empty list of non-negative ints, got {seeds!r}"
        )
    return [int(s) for s in out]
