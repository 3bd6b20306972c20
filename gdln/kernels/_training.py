r"""Training a deep gated network: mini-batch SGD or Adam on its trainable weights.

Which weights train depends on the mode (Sec. 4 of Lakshminarayanan & Singh, *Neural Path
Features and Neural Path Kernel* (NPF/NPK)): the value network always, the feature
network only in mode ``"dnpfl"`` (and through the tied weights in ``"relu"``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

import torch

from .._bounded._limits import WorkMeter, beyond, current_limits
from ..settings._constraints import POSITIVE
from ._base import check_input
from ._bounds import check_count, check_finite, check_seed, check_value
from ._conv import ConvDGN
from ._dgn import DGN
from ._errors import DGNSpecError

__all__ = ["TrainResult", "train_dgn"]

NetT = TypeVar("NetT", DGN, ConvDGN)


@dataclass(frozen=True)
class TrainResult(Generic[NetT]):
    """A trained network and its per-epoch training loss.

    Parameters
    ----------
    net
        The trained network (a copy; the one given to :func:`train_dgn` is unchanged).
    losses
        The mean minibatch training loss of each epoch, one entry per epoch.

    Raises
    ------
    DGNSpecError
        A loss is not finite (training diverged).
    """

    net: NetT
    losses: tuple[float, ...]

    def __post_init__(self) -> None:
        if not all(math.isfinite(v) for v in self.losses):
            raise DGNSpecError("training diverged: the loss became non-finite; lower lr")


def _check_training(optimizer: str, loss: str) -> None:
    if optimizer not in ("sgd", "adam"):
        raise DGNSpecError(f"optimizer: got {optimizer!r}, expected 'sgd' or 'adam'")
    if loss not in ("squared", "cross_entropy"):
        raise DGNSpecError(f"loss: got {loss!r}, expected 'squared' or 'cross_entropy'")


def _batch_loss(
    net: DGN | ConvDGN, x: torch.Tensor, y: torch.Tensor, idx: torch.Tensor, loss: str
) -> torch.Tensor:
    r"""$\tfrac12\,\mathrm{mean}_s\lVert\hat y(x_s)-y_s\rVert^2$ or the cross-entropy on the
    rows ``idx`` (mode ``"frg"``: every row, its gates being tied to the rows)."""
    if net.mode == "frg":
        out = net(x)
    else:
        out = net.forward_with(net.value, x[idx], net.gates_with(net.feature, x[idx]))
    if loss == "squared":
        target = y[idx].to(out.dtype).reshape(out.shape)
        return 0.5 * ((out - target) ** 2).sum(dim=1).mean()
    return torch.nn.functional.cross_entropy(out, y[idx].long())


def train_dgn(
    net: NetT,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    epochs: int = 10,
    lr: float = 1e-3,
    optimizer: Literal["sgd", "adam"] = "adam",
    batch_size: int = 32,
    loss: Literal["squared", "cross_entropy"] = "squared",
    seed: int = 0,
    callback: Callable[[int, NetT], None] | None = None,
) -> TrainResult[NetT]:
    r"""Train the trainable weights of a copy of ``net`` by mini-batch SGD or Adam.

    The squared loss is $\tfrac12\,\mathrm{mean}_s\lVert \hat y(x_s)-y_s\rVert^2$; the
    cross-entropy loss takes integer class labels ``y``. ``callback(epoch, net)`` is
    called after every epoch (epoch 0 = before training) with the live network.
    Mode ``"frg"`` trains full-batch on its own examples (the gates are tied to rows).

    Parameters
    ----------
    net
        The network (not modified).
    x
        ``(n, d_in)`` inputs.
    y
        ``(n,)`` or ``(n, d_out)`` targets, or ``(n,)`` integer labels for
        ``"cross_entropy"``.
    epochs
        Passes over the data.
    lr
        Learning rate.
    optimizer
        ``"sgd"`` or ``"adam"``.
    batch_size
        Examples per minibatch.
    loss
        ``"squared"`` or ``"cross_entropy"``.
    seed
        Seed of the minibatch order.
    callback
        Called as ``callback(epoch, net)`` after every epoch and before training.

    Returns
    -------
    TrainResult
        The trained copy and its loss per epoch.

    Raises
    ------
    DGNSpecError
        Unknown ``optimizer`` or ``loss``, ``y`` with the wrong number of rows, inputs or
        targets holding inf or nan, a count or ``lr`` out of range (more epochs than
        :class:`gdln.graphfile.Limits` ``steps``), a non-finite loss, or epochs whose
        pace would take more CPU time than the limit ``work``.

    References
    ----------
    Lakshminarayanan & Singh, *Neural Path Features and Neural Path Kernel*, Secs. 4 and 6
    (training the value and feature networks of each mode).
    """
    _check_training(optimizer, loss)
    epochs, batch_size = (
        check_count("epochs", epochs, least=0),
        check_count("batch_size", batch_size),
    )
    if epochs > current_limits().steps:
        raise DGNSpecError(beyond("steps", f"epochs={epochs}"))
    check_value("lr", lr, POSITIVE)
    seed = check_seed(seed)
    net = net.clone()
    x = check_input(net, x)
    y = torch.as_tensor(y)
    if y.ndim == 0:
        raise DGNSpecError(f"y: got a scalar, expected {x.shape[0]} rows (one per x row)")
    if y.shape[0] != x.shape[0]:
        raise DGNSpecError(f"y: got {y.shape[0]} rows, expected {x.shape[0]} (one per x row)")
    check_finite("y", y)
    params = net.trainable()
    for t in params:
        t.requires_grad_(True)
    opt = torch.optim.Adam(params, lr=lr) if optimizer == "adam" else torch.optim.SGD(params, lr=lr)
    gen = torch.Generator().manual_seed(int(seed))
    n = x.shape[0]
    bs = n if net.mode == "frg" else max(1, min(batch_size, n))
    losses = []
    meter = WorkMeter(  # the epochs cost what they cost: metered, refused at the pace
        f"training the deep gated network ({epochs} epochs on {n} examples)",
        horizon=epochs,
        cls=DGNSpecError,
        advice="lower the epochs, n, the width or the depth",
    )
    if callback is not None:
        callback(0, net)
    for epoch in range(1, epochs + 1):
        perm = torch.randperm(n, generator=gen) if bs < n else torch.arange(n)
        total = 0.0
        for start in range(0, n, bs):
            idx = perm[start : start + bs]
            opt.zero_grad()
            value = _batch_loss(net, x, y, idx, loss)
            value.backward()
            opt.step()
            total += float(value.detach()) * len(idx)
        losses.append(total / n)
        meter.measure(epoch)
        if not math.isfinite(losses[-1]):
            break
        if callback is not None:
            callback(epoch, net)
    for t in params:
        t.requires_grad_(False)
    return TrainResult(net, tuple(losses))
