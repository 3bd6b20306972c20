r"""The training loop: gates, loss, divergence watch, record, gradient, update; per step.

Step ``k`` of ``steps`` evaluates the loss at the weights $W^{(k)}$, records what was
asked for, and moves to $W^{(k+1)}$; after the last update the loss of
$W^{(\mathrm{steps})}$ is evaluated (and recorded) too, so a run of ``steps`` steps has
``steps + 1`` evaluations.
"""

from __future__ import annotations

from collections.abc import Collection

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

    Bad means non-finite or above ``limit``. The first bad step is kept on the device,
    so watching costs no synchronisation; :meth:`check` raises.
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
        self.bad_step = torch.full((len(seeds),), -1, dtype=torch.int64, device=device)
        self.bad_value = torch.zeros(len(seeds), dtype=dtype, device=device)

    def watch(self, step: int, loss: torch.Tensor) -> None:
        """Note ``step`` for each repetition whose ``loss`` is bad for the first time."""
        # NaN fails every comparison; an infinite limit needs the explicit test for inf
        good = loss <= self.limit if np.isfinite(self.limit) else torch.isfinite(loss)
        new = (self.bad_step < 0).logical_and_(good.logical_not_())
        self.bad_step = torch.where(new, step, self.bad_step)
        self.bad_value = torch.where(new, loss, self.bad_value)

    def state(self) -> list[torch.Tensor]:
        """The first bad step and its loss per repetition, for :meth:`raise_if_bad`."""
        return [self.bad_step, self.bad_value]

    def check(self) -> None:
        """Raise :class:`SimulationDivergedError` for the earliest bad step seen, if any."""
        if bool((self.bad_step >= 0).any()):
            self.raise_if_bad(self.bad_step.cpu().numpy(), self.bad_value.cpu().numpy())

    def raise_if_bad(self, steps: np.ndarray, values: np.ndarray) -> None:
        """Raise for the earliest bad step in ``steps`` (host copies of :meth:`state`)."""
        steps = np.asarray(steps).astype(np.int64)
        if not (steps >= 0).any():
            return
        r = int(np.argmin(np.where(steps >= 0, steps, np.iinfo(np.int64).max)))
        first, value = int(steps[r]), float(values[r])
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
    params = optimizer.params()
    bar = progress_bar(total=steps, disable=not progress, desc="simulate", unit="step")
    for step in range(steps + 1):
        last = step == steps
        record = step in record_at
        with torch.set_grad_enabled(not last):
            gated = gates.apply(weights)  # this step's random gates, folded into the weights
            full: Pass | None
            if last:
                loss, full = optimizer.final_loss(gated)
                watched = loss.detach()
            else:
                loss, watched, full = optimizer.loss(step, gated, record=record)
            divergence.watch(step, watched)
            if full is not None and record:
                recorder.record(step, weights, *full, divergence=divergence)
            elif last or step % CHECK_EVERY == 0:
                divergence.check()
            if last:
                break
            grads = torch.autograd.grad(loss.sum(), params)
        optimizer.update(grads)
        if progress and (step % 100 == 99 or step == steps - 1):
            bar.update(step + 1 - bar.n)
    bar.close()
