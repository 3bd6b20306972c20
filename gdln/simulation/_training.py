r"""The training loop: gates, loss, divergence watch, record, gradient, update; per step.

Step ``k`` of ``steps`` evaluates the loss at the weights $W^{(k)}$, records what was
asked for, and moves to $W^{(k+1)}$; after the last update the loss of
$W^{(\mathrm{steps})}$ is evaluated (and recorded) too, so a run of ``steps`` steps has
``steps + 1`` evaluations.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

import numpy as np
import torch

from ._errors import SimulationDivergedError
from ._optimizers import Optimizer, Pass
from ._progress import progress_bar
from ._random_gates import RandomGates
from ._recording import Recorder

__all__ = ["Divergence", "train"]

CHECK_EVERY = 256
"""Steps between divergence checks when nothing is recorded (a check syncs a GPU)."""


class Divergence:
    """Watches the loss of every repetition for the first step at which it went bad.

    Bad means non-finite or above ``limit``. Each step's losses are kept on the device in a
    ring of :data:`CHECK_EVERY` rows (one copy a step, no synchronisation); :meth:`check`
    (or a record, which brings :meth:`state` to the host with its series) raises for the
    first bad step since the last check. Checks come at least every :data:`CHECK_EVERY`
    steps, so no step is overwritten before it is seen.
    """

    def __init__(
        self,
        seeds: list[int],
        dtype: torch.dtype,
        device: torch.device,
        *,
        limit: float,
        dt: float,
        lr: float,
    ) -> None:
        self.seeds, self.limit, self.dt, self.lr = seeds, limit, dt, lr
        self.ring = torch.zeros((CHECK_EVERY, len(seeds)), dtype=dtype, device=device)
        self.pending: list[int] = []

    def watch(self, step: int, loss: torch.Tensor) -> None:
        """Keep ``step``'s losses ``(S,)`` until the next check."""
        self.ring[step % CHECK_EVERY].copy_(loss)
        self.pending.append(step)

    def state(self) -> list[torch.Tensor]:
        """The losses since the last check, for :meth:`raise_if_bad`."""
        return [self.ring]

    def check(self) -> None:
        """Raise :class:`SimulationDivergedError` for the earliest bad step seen, if any."""
        if self.pending:
            self.raise_if_bad(self.ring.cpu().numpy())

    def raise_if_bad(self, ring: np.ndarray) -> None:
        """Raise for the earliest bad step since the last check (``ring``: a host copy of
        :meth:`state`); the steps checked are then forgotten."""
        steps, self.pending = self.pending, []
        values = np.asarray(ring)[[s % CHECK_EVERY for s in steps]]
        # NaN fails every comparison; an infinite limit needs the explicit test for inf
        good = values <= self.limit if np.isfinite(self.limit) else np.isfinite(values)
        bad = ~good
        if not bad.any():
            return
        row = int(np.argmax(bad.any(axis=1)))
        r = int(np.argmax(bad[row]))
        first, value = steps[row], float(values[row, r])
        raise SimulationDivergedError(
            f"training diverged at step {first} (t = {first * self.dt:.6g} tau), seed "
            f"{self.seeds[r]}: loss = {value!r}, expected a finite loss <= diverge_above="
            f"{self.limit:g}; lower lr (got {self.lr!r}) or the initial scale",
            step=first,
            value=value,
            seed=self.seeds[r],
        )


def train(
    optimizer: Optimizer,
    *,
    steps: int,
    gates: RandomGates,
    recorder: Recorder,
    record_at: Collection[int],
    divergence: Divergence,
    progress: bool = False,
) -> None:
    """Take ``steps`` steps of ``optimizer`` on its weights (in place), recording on the way.

    Divergence is checked at every recorded step before anything is stored (the step's
    record and the check come to the host in one copy), at the end, and every
    :data:`CHECK_EVERY` steps.
    """
    weights = optimizer.weights
    bar = progress_bar(total=steps, disable=not progress, desc="simulate", unit="step")
    for step in range(steps + 1):
        last = step == steps
        record = step in record_at
        factors = gates.factors(weights)  # this step's random gates, block -> factor
        full: Callable[[], Pass] | None
        if last:
            watched, made = optimizer.final_loss(factors)
            full = lambda made=made: made  # noqa: E731
        else:
            watched, full, grads = optimizer.step(step, factors, record=record)
        divergence.watch(step, watched)
        if full is not None and record:
            recorder.record(step, weights, *full(), divergence=divergence)
        elif last or step % CHECK_EVERY == 0:
            divergence.check()
        if last:
            break
        optimizer.update(grads)
        if progress and (step % 100 == 99 or step == steps - 1):
            bar.update(step + 1 - bar.n)
    bar.close()
