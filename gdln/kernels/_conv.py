r"""The convolutional deep gated network with global average pooling (GCONV).

:class:`ConvDGN` is the convolutional counterpart of :class:`~gdln.kernels.DGN` (GCONV of
Table 2 of Lakshminarayanan & Singh, *Neural Path Features and Neural Path Kernel*
(NPF/NPK)): $d-1$ circular convolutions with $w$ channels, then the average over
positions and a linear read-out; paths that differ only by a rotation share their weights.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import torch

from ._base import (
    FeatureValueNetwork,
    check_gating,
    check_mode,
    draw_weights,
    networks_for_mode,
    resolve_build,
)
from ._bounds import check_count, check_held, check_seed
from ._errors import DGNSpecError
from ._gates import Gate

__all__ = ["ConvDGN", "conv_feature_gates", "conv_forward", "make_conv_dgn"]


def conv_offsets(ndim: int, kernel: int) -> tuple[tuple[int, ...], ...]:
    """Offsets $\\delta$ of a ``kernel``-wide stencil in ``ndim`` dimensions, row-major.

    Examples
    --------
    >>> conv_offsets(1, 3)
    ((-1,), (0,), (1,))
    """
    r = kernel // 2
    return tuple(itertools.product(range(-r, r + 1), repeat=ndim))


def _circular_conv(
    z: torch.Tensor, W: torch.Tensor, offsets: Sequence[tuple[int, ...]]
) -> torch.Tensor:
    r"""$q[i,c]=\sum_{\delta}\sum_{c'} z[i+\delta,c']\,W[\delta,c',c]$, indices mod the shape.

    ``z`` is ``(n, *shape, c_in)``, ``W`` is ``(len(offsets), c_in, c_out)``.
    """
    dims = tuple(range(1, z.ndim - 1))
    shifted = [torch.roll(z, shifts=tuple(-o for o in off), dims=dims) for off in offsets]
    stacked = torch.stack(shifted, dim=-2)  # (n, *shape, |S|, c_in)
    return stacked.reshape(*z.shape[:-1], -1) @ W.reshape(-1, W.shape[-1])


def conv_feature_gates(
    feature: Sequence[torch.Tensor],
    x: torch.Tensor,
    gate: Gate,
    image_shape: Sequence[int],
    offsets: Sequence[tuple[int, ...]],
) -> tuple[torch.Tensor, ...]:
    r"""Gates of a convolutional feature network, one ``(n, *shape, w)`` tensor per layer.

    As :func:`~gdln.kernels.feature_gates` with the fully connected layer replaced by the
    circular convolution: $q^F_x(l)=\Theta^F(l)\star z^F_x(l-1)$, $G_x(l)=\gamma(q^F_x(l))$.

    Parameters
    ----------
    feature
        Feature-network kernels $\Theta^F(l)$, ``(len(offsets), c_in, w)`` each.
    x
        ``(n, prod(image_shape))`` inputs, flattened row-major.
    gate
        The gate function $\gamma$.
    image_shape
        Spatial shape of an input.
    offsets
        The stencil offsets, one tuple per kernel row.

    Returns
    -------
    tuple of torch.Tensor
        One ``(n, *image_shape, w)`` gate tensor per hidden layer.

    References
    ----------
    Lakshminarayanan & Singh, *Neural Path Features and Neural Path Kernel*, Table 2;
    Lakshminarayanan & Singh, *Deep Gated Networks*, Table 2.
    """
    z = x.reshape(x.shape[0], *image_shape, 1)
    gates = []
    for W in feature[:-1]:
        q = _circular_conv(z, W, offsets)
        G = gate(q)
        gates.append(G)
        z = q * G
    return tuple(gates)


def conv_forward(
    value: Sequence[torch.Tensor],
    x: torch.Tensor,
    gates: Sequence[torch.Tensor],
    image_shape: Sequence[int],
    offsets: Sequence[tuple[int, ...]],
) -> torch.Tensor:
    r"""Value-network output of a convolutional DGN with global average pooling.

    $z(0)=x$ (one channel), $z(l)=(\Theta^V(l)\star z(l-1))\odot G_x(l)$ for
    $l=1..d-1$, $\hat y = \Theta^V(d)^\top\frac1D\sum_i z(d-1)[i,:]$ with $D$ positions.

    Parameters
    ----------
    value
        Value-network kernels $\Theta^V(l)$, then the read-out ``(w, d_out)``.
    x
        ``(n, prod(image_shape))`` inputs, flattened row-major.
    gates
        One ``(n, *image_shape, w)`` tensor per hidden layer.
    image_shape
        Spatial shape of an input.
    offsets
        The stencil offsets, one tuple per kernel row.

    Returns
    -------
    torch.Tensor
        ``(n, d_out)`` outputs $\hat y$.

    References
    ----------
    Lakshminarayanan & Singh, *Neural Path Features and Neural Path Kernel*, Table 2 (GCONV).
    """
    z = x.reshape(x.shape[0], *image_shape, 1)
    for W, G in zip(value[:-1], gates, strict=True):
        z = _circular_conv(z, W, offsets) * G
    pooled = z.mean(dim=tuple(range(1, z.ndim - 1)))
    return pooled @ value[-1]


@dataclass(frozen=True)
class ConvDGN(FeatureValueNetwork):
    r"""A convolutional deep gated network with global average pooling (GCONV of NPF/NPK).

    $d-1$ layers of circular ("wrap-around") convolution with a ``kernel``-wide stencil
    in every dimension of ``image_shape`` and $w$ channels, then global average pooling
    and a linear read-out; no biases. One input channel. Same modes and gates as
    :class:`~gdln.kernels.DGN`.

    Parameters
    ----------
    mode, gate, sigma
        As for :class:`~gdln.kernels.DGN`.
    feature, value
        ``value[l-1]`` for $l<d$ is the kernel $\Theta(l)$ of shape
        ``(len(offsets), c_in, w)``; ``value[-1]`` is the read-out ``(w, d_out)``.
    image_shape
        Spatial shape of an input, e.g. ``(8, 8)`` for the digits (rows of ``x`` are
        flattened row-major) or ``(16,)`` for signals.
    kernel
        Odd stencil width; offsets $\delta\in\{-k/2..k/2\}^{\mathrm{ndim}}$.
    fixed_gates
        Mode ``"frg"`` only: per hidden layer an ``(n, *image_shape, w)`` 0/1 tensor.

    Raises
    ------
    DGNSpecError
        The weights, gates or shapes do not fit together, or ``mode`` is unknown.

    References
    ----------
    Lakshminarayanan & Singh, *Neural Path Features and Neural Path Kernel*, Sec. 5 and
    Table 2 (GCONV: convolution with global average pooling).
    """

    mode: str
    gate: Gate
    feature: tuple[torch.Tensor, ...]
    value: tuple[torch.Tensor, ...]
    image_shape: tuple[int, ...]
    kernel: int = 3
    fixed_gates: tuple[torch.Tensor, ...] | None = None
    sigma: float = field(default=1.0)

    def __post_init__(self) -> None:
        check_mode(self.mode)
        if not (1 <= len(self.image_shape) <= 2 and all(int(v) >= 1 for v in self.image_shape)):
            raise DGNSpecError(f"image_shape: got {self.image_shape!r}, expected 1 or 2 sizes >= 1")
        if self.kernel < 1 or self.kernel % 2 == 0:
            raise DGNSpecError(f"kernel: got {self.kernel!r}, expected an odd integer >= 1")
        if len(self.value) < 1:
            raise DGNSpecError("value: got no weight layers, expected at least one")
        self._check_layer_shapes()
        check_gating(self.mode, self.fixed_gates, self.feature, self.value, "(n, *image_shape, w)")

    def _check_layer_shapes(self) -> None:
        """Each kernel is ``(|S|, c_in, c_out)`` with ``c_in`` the previous ``c_out``."""
        c_in, k = 1, len(self.offsets)
        for layer, W in enumerate(self.value[:-1]):
            if W.ndim != 3 or W.shape[0] != k or W.shape[1] != c_in:
                raise DGNSpecError(
                    f"value[{layer}]: got shape {tuple(W.shape)}, expected ({k}, {c_in}, channels)"
                )
            c_in = int(W.shape[2])
        if self.value[-1].ndim != 2 or self.value[-1].shape[0] != c_in:
            raise DGNSpecError(
                f"value[{len(self.value) - 1}]: got shape {tuple(self.value[-1].shape)}, "
                f"expected ({c_in}, d_out)"
            )

    @property
    def offsets(self) -> tuple[tuple[int, ...], ...]:
        """The stencil offsets $\\delta$ (:func:`conv_offsets`)."""
        return conv_offsets(len(self.image_shape), self.kernel)

    @property
    def depth(self) -> int:
        """$d$, the number of weight layers (convolutions + read-out)."""
        return len(self.value)

    @property
    def channels(self) -> tuple[int, ...]:
        """Channels $(1, w_1, \\dots, w_{d-1}, d_\\mathrm{out})$."""
        return (1, *(int(v.shape[-1]) for v in self.value))

    @property
    def widths(self) -> tuple[int, ...]:
        """Same as :attr:`channels` (the interface of :class:`~gdln.kernels.DGN`)."""
        return self.channels

    @property
    def positions(self) -> int:
        """$D$, the number of positions of an input."""
        return int(math.prod(self.image_shape))

    @property
    def d_in(self) -> int:
        """Input dimension (one channel): $D$."""
        return self.positions

    def gates_with(
        self, feature: Sequence[torch.Tensor], x: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        """Gates of this architecture and gate function from other feature weights.

        Parameters
        ----------
        feature
            Feature-network weights of this architecture's shapes.
        x
            Inputs ``(n, d_in)``.

        Returns
        -------
        tuple of torch.Tensor
            One gate tensor per hidden layer.
        """
        return conv_feature_gates(feature, x, self.gate, self.image_shape, self.offsets)

    def forward_with(
        self, value: Sequence[torch.Tensor], x: torch.Tensor, gates: Sequence[torch.Tensor]
    ) -> torch.Tensor:
        """Output of this architecture with other value weights and given gates.

        Parameters
        ----------
        value
            Value-network weights of this architecture's shapes.
        x
            Inputs ``(n, d_in)``.
        gates
            One gate tensor per hidden layer (e.g. from :meth:`gates_with`).

        Returns
        -------
        torch.Tensor
            The network's output for each input.
        """
        return conv_forward(value, x, gates, self.image_shape, self.offsets)


def make_conv_dgn(
    image_shape: Sequence[int],
    channels: int,
    depth: int,
    *,
    kernel: int = 3,
    mode: str = "relu",
    gate: Gate | None = None,
    d_out: int = 1,
    sigma: float | None = None,
    init: Literal["gaussian", "bernoulli"] = "gaussian",
    seed: int = 0,
    source: ConvDGN | None = None,
    n_examples: int | None = None,
    dtype: torch.dtype = torch.float64,
) -> ConvDGN:
    r"""Build a convolutional DGN with global average pooling in one of :data:`MODES`.

    As :func:`~gdln.kernels.make_dgn`, with ``channels`` $w$ per convolution, a
    ``kernel``-wide circular stencil and the default scale $\sigma=\sqrt{2/(|S|\,w)}$
    ($|S|$ stencil offsets, He's fan-in), used for every layer.

    Parameters
    ----------
    image_shape
        Spatial shape of an input, e.g. ``(8, 8)``.
    channels
        Channels $w$ of every convolution.
    depth
        Number of weight layers $d$ (the last is the read-out).
    kernel
        Odd stencil width.
    mode
        One of :data:`MODES`.
    gate
        Gate function; default hard ReLU gates, Bernoulli(0.5) for ``"frg"``.
    d_out
        Output size.
    sigma
        Weight scale (default above).
    init
        ``"gaussian"`` or ``"bernoulli"`` ($\pm\sigma$), as for
        :func:`~gdln.kernels.make_dgn`.
    seed
        Seed of the ``torch.Generator`` all draws come from.
    source
        Mode ``"flnpf"``: the (trained) ``"relu"`` network whose weights become the frozen
        feature network.
    n_examples
        Mode ``"frg"``: the number of examples to draw gates for.
    dtype
        Floating-point type of the weights.

    Returns
    -------
    ConvDGN
        The network.

    Raises
    ------
    DGNSpecError
        A size, ``mode``, ``kernel`` or ``init`` is malformed, or ``source`` or
        ``n_examples`` is missing for the mode that needs it.

    References
    ----------
    Lakshminarayanan & Singh, *Neural Path Features and Neural Path Kernel*, Secs. 4-6 (the
    modes) and Table 2 (GCONV).

    Examples
    --------
    >>> net = make_conv_dgn((8, 8), 4, 3, seed=0)
    >>> net.channels, [tuple(v.shape) for v in net.value]
    ((1, 4, 4, 1), [(9, 1, 4), (9, 4, 4), (4, 1)])
    """
    shape = tuple(check_count("image_shape", v) for v in image_shape)
    for name, size in (("channels", channels), ("depth", depth), ("kernel", kernel)):
        check_count(name, size)
    k = (kernel // 2 * 2 + 1) ** len(shape)  # len(conv_offsets(len(shape), kernel))
    positions = math.prod(shape)
    weights = (k * channels * (1 + channels * max(depth - 2, 0)) + channels) * (
        1 if mode in ("relu", "frg") else 2
    )
    gates = 0
    if mode == "frg":
        gates = check_count("n_examples", n_examples) * positions * channels * (depth - 1)
    check_held(
        f"a ConvDGN of {channels} channels, depth {depth} on {positions} positions",
        weights + gates + k,
    )
    scale, gate_fn = resolve_build(
        mode,
        init,
        sigma,
        gate,
        sizes={"channels": channels, "depth": depth, "kernel": kernel},
        default_sigma=lambda: math.sqrt(2.0 / (k * channels)),
    )
    gen = torch.Generator().manual_seed(check_seed(seed))
    convs: list[tuple[int, ...]] = [(k, 1, channels), *([(k, channels, channels)] * (depth - 2))]
    shapes = [*convs[: depth - 1], (channels if depth > 1 else 1, d_out)]
    feature, value, fixed = networks_for_mode(
        mode,
        lambda shp: draw_weights(shp, scale, init, gen, dtype),
        shapes,
        n_examples=n_examples,
        draw_fixed=lambda n: tuple(
            (torch.rand(n, *shape, channels, generator=gen, dtype=dtype) < gate_fn.p).to(dtype)
            for _ in range(depth - 1)
        ),
        source=source,
        source_fits=lambda net: (
            isinstance(net, ConvDGN)
            and net.image_shape == shape
            and net.kernel == kernel
            and net.channels[:-1] == (1, *([channels] * (depth - 1)))
        ),
        kind="ConvDGN",
    )
    return ConvDGN(mode, gate_fn, feature, value, shape, kernel, fixed, scale)
