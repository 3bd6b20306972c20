r"""The optimisers of :data:`~gdln.simulation.OPTIMIZERS`, chosen by name from one table.

Every optimiser takes the heavy-ball step $b \leftarrow \mu b + \nabla\mathcal L$,
$W \leftarrow W - \mathrm{lr}\, b$ ($b = \nabla\mathcal L$ without momentum); they
differ in the loss whose gradient they take. ``gd`` differentiates Eq. (1) of Saxe et
al. 2022 over all examples: with $\mu = 0$ it is the Euler discretisation, $dt =
\mathrm{lr}$, of the gradient flow of Eq. (2); it is computed on the examples' states by
the chain rule written out (:mod:`~gdln.simulation._backprop`). ``sgd`` differentiates
the average of Eq. (1) over a minibatch drawn by
:class:`~gdln.simulation._sampling.Sampler` (App. D, Table 1), with torch autograd.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from typing import ClassVar

import torch

from ._backprop import StateStep
from ._data import Data
from ._forward import forward
from ._plan import Plan
from ._sampling import Sampler
from ._weights import Weights

__all__ = ["OPTIMIZER_CLASSES", "FullBatchGD", "MinibatchSGD", "Optimizer", "Pass"]

Pass = tuple[Mapping[Hashable, torch.Tensor], torch.Tensor]
"""A forward pass: activations and per-example losses ``(S, n)``."""

Step = tuple[torch.Tensor, Callable[[], Pass] | None, Sequence[torch.Tensor]]
"""A training step: the loss to watch ``(S,)``, the pass to record (if asked for), and the
gradient of every block of weights."""


class Optimizer:
    """Heavy-ball descent on the trainable weights; a subclass chooses each step's loss.

    Parameters
    ----------
    net, train
        The plan and the training examples.
    weights
        The initial weights, one per edge; the optimiser trains copies of them kept in
        blocks (:attr:`weights`, a :class:`Weights`), updated in place (fixed edges
        excepted).
    lr, momentum
        Learning rate and heavy-ball momentum $\\mu$.
    fixed
        Indices of the fixed edges, never updated.
    decay
        The weight decay $\\gamma$: :meth:`update` adds $\\gamma W$ to each trained
        weight's gradient, the gradient of $\\tfrac\\gamma2\\lVert W\\rVert_F^2$ (the
        convention of :class:`gdln.settings.Settings`).
    sampler
        The minibatches, for the optimisers that use them (:attr:`minibatch`).
    """

    minibatch: ClassVar[bool]
    """Whether each step's loss averages a minibatch, so that a :class:`Sampler` is needed."""

    def __init__(
        self,
        net: Plan,
        train: Data,
        weights: list[torch.Tensor],
        *,
        lr: float,
        momentum: float,
        fixed: Collection[int],
        sampler: Sampler | None = None,
        decay: float = 0.0,
    ) -> None:
        if self.minibatch and sampler is None:
            raise ValueError(f"{type(self).__name__} needs a minibatch sampler")
        self.net, self.train = net, train
        self.weights = self.layout(weights)
        self.lr, self.momentum, self.fixed = lr, momentum, frozenset(fixed)
        self.weight_decay = float(decay)
        blocks = self.weights.blocks
        self.buffers = [torch.zeros_like(w) for w in blocks] if momentum > 0 else None
        self.sampler = sampler
        self.trained = _trained_masks(self.weights, self.fixed)
        # one fused update for all blocks: no momentum, no fixed edge, no decay
        self.plain = (
            self.buffers is None and not self.weight_decay and all(m is True for m in self.trained)
        )

    def layout(self, weights: list[torch.Tensor]) -> Weights:
        """The blocks to train, holding copies of ``weights``."""
        return Weights.stacked(weights, [g.group.edges for g in self.train.groups])

    def work(self) -> tuple[float, int]:
        """Floating-point operations and tensor operations of a step (to choose threads)."""
        raise NotImplementedError

    def params(self) -> list[torch.Tensor]:
        """The blocks to differentiate, in the order :meth:`update` takes the gradients."""
        return self.weights.blocks

    def step(self, step: int, factors: Mapping[int, torch.Tensor], *, record: bool) -> Step:
        """The loss to watch, the pass to record (if ``record``) and the gradients.

        ``factors``: this step's random gates, block -> factor (empty without them).
        """
        with torch.enable_grad():
            loss, watched, full = self.loss(step, self.weights.gated(factors), record=record)
            grads = torch.autograd.grad(loss.sum(), self.params())
        return watched, None if full is None else (lambda: full), grads

    def loss(
        self, step: int, weights: Weights, *, record: bool
    ) -> tuple[torch.Tensor, torch.Tensor, Pass | None]:
        """This step's loss ``(S,)`` to differentiate, the loss to watch, the pass to record.

        ``weights`` carry the step's random gates; the full-batch pass to record comes
        back only if ``record``.
        """
        raise NotImplementedError

    def final_loss(self, factors: Mapping[int, torch.Tensor]) -> tuple[torch.Tensor, Pass]:
        """After the last step: the full-batch loss and pass, without gradients."""
        with torch.no_grad():
            full = forward(self.net, self.weights.gated(factors), self.train)
        return full[1] @ self.train.w, full

    def update(self, grads: Sequence[torch.Tensor]) -> None:
        r"""$b \leftarrow \mu b + g + \gamma W$, $W \leftarrow W - \mathrm{lr}\,b$ per trained edge.

        One update per block; fixed edges (a block of their own, or a masked slot) stay.
        """
        if self.plain and not self.weights.blocks[0].requires_grad:
            torch._foreach_add_(self.weights.blocks, list(grads), alpha=-self.lr)
            return
        with torch.no_grad():
            for b, (w, g) in enumerate(zip(self.weights.blocks, grads, strict=True)):
                mask = self.trained[b]
                if mask is False:
                    continue
                if self.weight_decay:
                    g = g.add(w, alpha=self.weight_decay)
                if mask is not True:
                    g = g * mask
                if self.buffers is not None:
                    self.buffers[b].mul_(self.momentum).add_(g)
                    g = self.buffers[b]
                w.sub_(g, alpha=self.lr)


def _trained_masks(weights: Weights, fixed: frozenset[int]) -> list[bool | torch.Tensor]:
    """Per block: ``True`` (all trained), ``False`` (fixed) or a ``(1, k, 1, 1)`` 0/1 mask."""
    masks: list[bool | torch.Tensor] = [True] * len(weights.blocks)
    for i in fixed:
        b, slot = weights.where[i]
        if slot is None:
            masks[b] = False
            continue
        mask = masks[b]
        if mask is True:
            block = weights.blocks[b]
            mask = block.new_ones((1, block.shape[1], 1, 1))
        assert isinstance(mask, torch.Tensor)
        mask[:, slot] = 0.0
        masks[b] = mask
    return masks


class FullBatchGD(Optimizer):
    """The gradient of Eq. (1) over every example, on their states and by hand.

    The pass of a recorded step is the same one (its per-example losses gathered from
    the states).
    """

    minibatch = False

    def layout(self, weights: list[torch.Tensor]) -> Weights:
        states = self.train.states
        assert states is not None  # tensorise(..., states=True)
        stacked = [p.edges for p in states.products if p.stacked]
        layout = Weights.stacked(weights, stacked, grad=False)
        self.hand = StateStep(
            states, layout, self.net.sizes, self.net.hidden, relu=frozenset(self.net.relu)
        )
        return layout

    def work(self) -> tuple[float, int]:
        return self.hand.work()

    def step(self, step: int, factors: Mapping[int, torch.Tensor], *, record: bool) -> Step:
        loss, grads, full = self.hand.step(self.weights.gated(factors).blocks)
        assert grads is not None
        for b, factor in factors.items():  # d/dW of (factor W) is factor d/d(factor W)
            grads[b] = grads[b] * factor
        return loss, full if record else None, grads

    def final_loss(self, factors: Mapping[int, torch.Tensor]) -> tuple[torch.Tensor, Pass]:
        loss, _, full = self.hand.step(self.weights.gated(factors).blocks, backward=False)
        return loss, full()


class MinibatchSGD(Optimizer):
    """The gradient of the mean loss over a minibatch; a recorded step adds a full pass.

    The minibatch loss is watched for divergence, and so is a non-finite full-batch loss
    at recorded steps (recording takes SVDs, which non-finite weights would break).
    """

    minibatch = True

    def work(self) -> tuple[float, int]:
        """Three products per edge (forward, two backward) on each seed's minibatch."""
        assert self.sampler is not None
        seeds = self.weights.blocks[0].shape[0]
        rows = seeds * self.sampler.b
        area = sum(self.net.sizes[s] * self.net.sizes[t] for s, t in self.net.edges)
        return 6.0 * rows * area, 8 * len(self.net.edges)

    def loss(
        self, step: int, weights: Weights, *, record: bool
    ) -> tuple[torch.Tensor, torch.Tensor, Pass | None]:
        assert self.sampler is not None
        full = None
        if record:
            with torch.no_grad():
                full = forward(self.net, weights, self.train)
        _, batch = forward(self.net, weights, self.train, self.sampler.rows(step))
        loss = batch.mean(-1)
        watched = loss.detach()
        if full is not None:
            whole = full[1] @ self.train.w
            watched = torch.where(torch.isfinite(whole), watched, whole)
        return loss, watched, full


OPTIMIZER_CLASSES: Mapping[str, type[Optimizer]] = {"gd": FullBatchGD, "sgd": MinibatchSGD}
"""The optimisers of :data:`~gdln.simulation.OPTIMIZERS`, by the same names."""
