r"""Deep gated networks: a feature (gating) network and a value network.

A deep gated network (DGN) separates the two roles a ReLU plays: the *feature network*
$\Theta^F$ decides, through its pre-activations $q^F_x(l)$, which gates
$G_x(l)\in[0,1+\varepsilon]^w$ are on, and the *value network* $\Theta^V$ of the same
architecture carries the signal through those gates (Sec. 4 and Fig. 2 of Lakshminarayanan
& Singh, *Neural Path Features and Neural Path Kernel* (NPF/NPK); Tables 2-3 of
Lakshminarayanan & Singh, *Deep Gated Networks* (DGN)):

$$q^V_x(l) = \Theta^V(l)^\top z^V_x(l-1),\quad z^V_x(l) = q^V_x(l)\odot G_x(l),\quad
\hat y(x) = \Theta^V(d)^\top z^V_x(d-1).$$

:class:`DGN` is fully connected, with $d$ weight layers ($d-1$ hidden layers of width $w$)
and no biases, so that every output is a sum over paths. :class:`ConvDGN` is its
convolutional counterpart with global average pooling (GCONV of Table 2 of NPF/NPK): $d-1$
circular convolutions with $w$ channels, then the average over positions and a linear
read-out; paths that differ only by a rotation share their weights.

Gates (:class:`Gate`): hard ReLU gates $\mathbb 1\{q>0\}$; soft gates
$(1+\varepsilon)\,\mathrm{sigmoid}(\beta q)$ (the $\chi_\varepsilon(-\beta q)$ of DGN
Table 2); fixed random Bernoulli($p$) gates, one draw per example (DGN-FRG).

Modes (:data:`MODES`):

``"relu"``
    $\Theta^F=\Theta^V$ (one tied set of weights): the ordinary ReLU network, or the
    soft-ReLU network with soft gates.
``"frnpf_ii"``, ``"galu"``
    fixed random NPF, independent initialisation: $\Theta^F$ random and frozen,
    $\Theta^V$ random and independent of it. ``"galu"`` is the same network under the
    name of the DGN paper (gates from a separate frozen ReLU network).
``"frnpf_di"``
    fixed random NPF, dependent initialisation: $\Theta^V_0=\Theta^F_0$, $\Theta^F$ frozen.
``"flnpf"``
    fixed learnt NPF: $\Theta^F$ copied from a (trained) ``"relu"`` network and frozen.
``"dnpfl"``
    decoupled NPF learning: $\Theta^F$ and $\Theta^V$ both trained.
``"frg"``
    fixed random gating: Bernoulli($p$) gates drawn once per example, no feature network.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

import numpy as np
import torch

from .._errors import GdlnError

__all__ = [
    "DATASETS",
    "DGN",
    "MODES",
    "AnyDGN",
    "ConvDGN",
    "DGNSpecError",
    "Gate",
    "TrainResult",
    "bernoulli_gates",
    "conv_feature_gates",
    "conv_forward",
    "conv_offsets",
    "dgn_forward",
    "feature_gates",
    "make_conv_dgn",
    "make_dataset",
    "make_dgn",
    "train_dgn",
]

MODES: tuple[str, ...] = ("relu", "frnpf_ii", "frnpf_di", "flnpf", "dnpfl", "galu", "frg")
_FROZEN_FEATURE = ("frnpf_ii", "frnpf_di", "flnpf", "galu")


class DGNSpecError(GdlnError, ValueError):
    """A deep gated network, or the data given to it, is malformed."""


GateKind = Literal["relu", "soft", "bernoulli"]


@dataclass(frozen=True)
class Gate:
    r"""How a pre-activation $q$ of the feature network becomes a gate value.

    Attributes
    ----------
    kind
        ``"relu"``: $\mathbb 1\{q>0\}$. ``"soft"``: $(1+\varepsilon)\,\sigma(\beta q)$
        with $\sigma$ the logistic function (DGN Table 2, $\chi_\varepsilon(-\beta q)$).
        ``"bernoulli"``: no function of $q$; values are drawn once per example with
        probability ``p`` of being 1 (DGN-FRG, Sec. 2 of the DGN paper).
    beta, epsilon
        Slope and overshoot of the soft gate.
    p
        Probability that a Bernoulli gate is on.

    Examples
    --------
    >>> g = Gate("soft", beta=2.0, epsilon=0.5)
    >>> float(g(torch.tensor(0.0)))
    0.75
    """

    kind: GateKind = "relu"
    beta: float = 4.0
    epsilon: float = 0.0
    p: float = 0.5

    def __post_init__(self) -> None:
        if self.kind not in ("relu", "soft", "bernoulli"):
            raise DGNSpecError(
                f"gate kind: got {self.kind!r}, expected one of 'relu', 'soft', 'bernoulli'"
            )
        if not (math.isfinite(self.beta) and self.beta > 0):
            raise DGNSpecError(f"gate beta: got {self.beta!r}, expected a finite number > 0")
        if not (math.isfinite(self.epsilon) and self.epsilon >= 0):
            raise DGNSpecError(f"gate epsilon: got {self.epsilon!r}, expected a number >= 0")
        if not (0.0 <= self.p <= 1.0):
            raise DGNSpecError(f"gate p: got {self.p!r}, expected a probability in [0, 1]")

    def __call__(self, q: torch.Tensor) -> torch.Tensor:
        """Gate values for pre-activations ``q`` (same shape)."""
        if self.kind == "relu":
            return (q > 0).to(q.dtype)
        if self.kind == "soft":
            return (1.0 + self.epsilon) * torch.sigmoid(self.beta * q)
        raise DGNSpecError(
            "gate kind 'bernoulli': gates are drawn per example, not computed from q; "
            "use mode='frg' (make_dgn draws them) or pass gates explicitly"
        )

    @property
    def differentiable(self) -> bool:
        """Whether gate values depend smoothly on the feature weights."""
        return self.kind == "soft"


def _check_gating(
    mode: str,
    fixed_gates: Sequence[torch.Tensor] | None,
    feature: Sequence[torch.Tensor],
    value: Sequence[torch.Tensor],
    gate_shape: str,
) -> None:
    """Fixed random gates need one tensor per hidden layer; any other mode a feature network
    with the value network's architecture (Sec. 4 of the NPF/NPK paper)."""
    if mode == "frg":
        if fixed_gates is None or len(fixed_gates) != len(value) - 1:
            raise DGNSpecError(
                f"fixed_gates: mode 'frg' needs one {gate_shape} gate tensor per hidden layer"
            )
    elif len(feature) != len(value) or any(
        f.shape != v.shape for f, v in zip(feature, value, strict=True)
    ):
        raise DGNSpecError(
            "feature: expected the same architecture as value "
            f"(shapes {[tuple(v.shape) for v in value]})"
        )


class _FeatureValueNetwork:
    """What a DGN and a convolutional DGN share: a feature network that gates a value
    network (Sec. 4 of the NPF/NPK paper; Tables 2-3 of the DGN paper)."""

    mode: str
    feature: tuple[torch.Tensor, ...]
    value: tuple[torch.Tensor, ...]

    @property
    def tied(self) -> bool:
        """Whether feature and value weights are one tensor set (mode ``"relu"``)."""
        return self.mode == "relu"

    def trainable(self) -> list[torch.Tensor]:
        """The tensors gradient descent updates in this mode (Sec. 4 of NPF/NPK)."""
        if self.mode == "dnpfl":
            return [*self.feature, *self.value]
        return list(self.value)


@dataclass(frozen=True)
class DGN(_FeatureValueNetwork):
    r"""A fully connected deep gated network (Fig. 2 of the NPF/NPK paper).

    Weights are stored as in Table 1 of the NPF/NPK paper: ``value[l-1]`` is
    $\Theta^V(l)$ of shape ``(fan_in, fan_out)``, so $q(l)=\Theta(l)^\top z(l-1)$ is
    ``z @ value[l-1]`` on a batch of rows.

    Attributes
    ----------
    mode
        One of :data:`MODES`.
    gate
        The gate function (:class:`Gate`).
    feature
        Feature-network weights $\Theta^F(1..d)$; in mode ``"relu"`` the very same tensor
        objects as ``value``; empty in mode ``"frg"``.
    value
        Value-network weights $\Theta^V(1..d)$.
    fixed_gates
        Mode ``"frg"`` only: per hidden layer an ``(n, w)`` 0/1 tensor; row ``s`` gates
        example ``s`` of every batch given to this network.
    sigma
        The scale the weights were drawn with.
    """

    mode: str
    gate: Gate
    feature: tuple[torch.Tensor, ...]
    value: tuple[torch.Tensor, ...]
    fixed_gates: tuple[torch.Tensor, ...] | None = None
    sigma: float = field(default=1.0)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise DGNSpecError(f"mode: got {self.mode!r}, expected one of {', '.join(MODES)}")
        if len(self.value) < 1:
            raise DGNSpecError("value: got no weight layers, expected at least one")
        for k, (a, b) in enumerate(zip(self.value[:-1], self.value[1:], strict=False)):
            if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
                raise DGNSpecError(
                    f"value[{k}] and value[{k + 1}]: shapes {tuple(a.shape)} and "
                    f"{tuple(b.shape)} do not chain"
                )
        _check_gating(self.mode, self.fixed_gates, self.feature, self.value, "(n, w)")

    @property
    def depth(self) -> int:
        """$d$, the number of weight layers."""
        return len(self.value)

    @property
    def widths(self) -> tuple[int, ...]:
        """Layer sizes $(d_\\mathrm{in}, w_1, \\dots, w_{d-1}, d_\\mathrm{out})$."""
        return (int(self.value[0].shape[0]), *(int(v.shape[1]) for v in self.value))

    @property
    def d_in(self) -> int:
        """Input dimension."""
        return self.widths[0]

    def gates(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Gate values $G_x(l)$, one ``(n, w_l)`` tensor per hidden layer."""
        x = _check_input(self, x)
        if self.mode == "frg":
            return _check_fixed(self, x)
        return feature_gates(self.feature, x, self.gate)

    def gates_with(
        self, feature: Sequence[torch.Tensor], x: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        """Gates of this architecture and gate function from other feature weights."""
        return feature_gates(feature, x, self.gate)

    def forward_with(
        self, value: Sequence[torch.Tensor], x: torch.Tensor, gates: Sequence[torch.Tensor]
    ) -> torch.Tensor:
        """Output of this architecture with other value weights and given gates."""
        return dgn_forward(value, x, gates)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Network output $\\hat y(x)$, shape ``(n, d_out)``."""
        x = _check_input(self, x)
        return dgn_forward(self.value, x, self.gates(x))

    def clone(self, mode: str | None = None) -> DGN:
        """A deep copy (optionally under another mode with the same weights)."""
        value = tuple(v.detach().clone() for v in self.value)
        new_mode = mode or self.mode
        if new_mode == "relu":
            feature = value
        elif new_mode == "frg":
            feature = ()
        else:
            feature = tuple(f.detach().clone() for f in (self.feature or self.value))
        fixed = None if self.fixed_gates is None else tuple(g.clone() for g in self.fixed_gates)
        return DGN(new_mode, self.gate, feature, value, fixed, self.sigma)


def _check_input(net: AnyDGN, x: torch.Tensor) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        x = torch.as_tensor(np.asarray(x), dtype=net.value[0].dtype)
    if x.ndim != 2 or x.shape[1] != net.d_in:
        raise DGNSpecError(f"x: got shape {tuple(x.shape)}, expected (n, d_in={net.d_in})")
    return x.to(net.value[0].dtype)


def _check_fixed(net: AnyDGN, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    assert net.fixed_gates is not None
    n = int(net.fixed_gates[0].shape[0])
    if x.shape[0] != n:
        raise DGNSpecError(
            f"x: got {x.shape[0]} rows, expected n={n}: fixed random gates (mode 'frg') "
            "are drawn for one dataset, row s for example s"
        )
    return net.fixed_gates


def feature_gates(
    feature: Sequence[torch.Tensor], x: torch.Tensor, gate: Gate
) -> tuple[torch.Tensor, ...]:
    r"""Gates from the feature network's pre-activations (Fig. 2 of NPF/NPK).

    $q^F_x(l) = \Theta^F(l)^\top z^F_x(l-1)$, $G_x(l) = \gamma(q^F_x(l))$ and
    $z^F_x(l) = q^F_x(l)\odot G_x(l)$ for $l=1..d-1$ (DGN Table 2, gating network).
    """
    z = x
    gates = []
    for W in feature[:-1]:
        q = z @ W
        G = gate(q)
        gates.append(G)
        z = q * G
    return tuple(gates)


def dgn_forward(
    value: Sequence[torch.Tensor], x: torch.Tensor, gates: Sequence[torch.Tensor]
) -> torch.Tensor:
    r"""Value-network output given the gates (Table 1 of NPF/NPK with $G$ supplied).

    $z(0)=x$, $z(l) = (\Theta^V(l)^\top z(l-1))\odot G_x(l)$, $\hat y = \Theta^V(d)^\top z(d-1)$.
    """
    z = x
    for W, G in zip(value[:-1], gates, strict=True):
        z = (z @ W) * G
    return z @ value[-1]


def bernoulli_gates(
    n: int,
    widths: Sequence[int],
    p: float,
    *,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float64,
) -> tuple[torch.Tensor, ...]:
    """Fixed random gates, i.i.d. Bernoulli($p$), one ``(n, w)`` tensor per hidden width."""
    return tuple((torch.rand(n, w, generator=generator, dtype=dtype) < p).to(dtype) for w in widths)


def _draw(
    shape: tuple[int, ...], sigma: float, init: str, gen: torch.Generator, dtype: torch.dtype
) -> torch.Tensor:
    if init == "gaussian":
        return sigma * torch.randn(*shape, generator=gen, dtype=dtype)
    signs = torch.randint(0, 2, shape, generator=gen).to(dtype) * 2 - 1
    return sigma * signs


def _networks_for_mode(
    mode: str,
    draw: Callable[[tuple[int, ...]], torch.Tensor],
    shapes: Sequence[tuple[int, ...]],
    *,
    n_examples: int | None,
    draw_fixed: Callable[[int], tuple[torch.Tensor, ...]],
    source: Any,
    source_fits: Callable[[Any], bool],
    kind: str,
) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...], tuple[torch.Tensor, ...] | None]:
    """Feature weights, value weights and fixed gates of a new network in ``mode``.

    The modes of Sec. 4 of the NPF/NPK paper (Table 2): ``relu`` ties the two networks,
    ``frg`` draws fixed Bernoulli gates instead of a feature network, ``flnpf`` copies the
    frozen feature network from a trained ReLU ``source``, ``frnpf_di`` starts both
    networks equal, and the other modes draw them independently.
    """

    def draw_all() -> tuple[torch.Tensor, ...]:
        return tuple(draw(shape) for shape in shapes)

    fixed = None
    if mode == "relu":
        value = draw_all()
        feature = value
    elif mode == "frg":
        if n_examples is None or n_examples < 1:
            raise DGNSpecError(
                f"n_examples: got {n_examples!r}, expected the number of examples (>= 1) "
                "to draw fixed random gates for"
            )
        value = draw_all()
        feature = ()
        fixed = draw_fixed(n_examples)
    elif mode == "flnpf":
        if source is None or source.mode != "relu" or not source_fits(source):
            raise DGNSpecError(
                f"source: mode 'flnpf' needs a 'relu' {kind} of the same architecture whose "
                f"weights become the frozen feature network, got {source!r:.80}"
            )
        copied = [v.detach().clone() for v in source.value[:-1]]
        feature = (*copied, draw(shapes[-1]))
        value = draw_all()
    elif mode == "frnpf_di":
        feature = draw_all()
        value = tuple(f.clone() for f in feature)
    else:
        feature = draw_all()
        value = draw_all()
    return feature, value, fixed


def make_dgn(
    d_in: int,
    width: int,
    depth: int,
    *,
    mode: str = "relu",
    gate: Gate | None = None,
    d_out: int = 1,
    sigma: float | None = None,
    init: Literal["gaussian", "bernoulli"] = "gaussian",
    seed: int = 0,
    source: DGN | None = None,
    n_examples: int | None = None,
    dtype: torch.dtype = torch.float64,
) -> DGN:
    r"""Build a deep gated network in one of the modes of Sec. 4/6 of NPF/NPK.

    Parameters
    ----------
    d_in, width, depth
        Input size, hidden width $w$ and number of weight layers $d\ge 1$.
    mode
        One of :data:`MODES`.
    gate
        Gate function; default hard ReLU gates, Bernoulli(0.5) for ``"frg"``.
    d_out
        Output size (the path objects of :mod:`gdln.kernels` need ``d_out=1``).
    sigma
        Weight scale; default $\sqrt{2/w}$ (the "choice of $\sigma$" after Thm. 5.1 of
        NPF/NPK), used for every layer.
    init
        ``"gaussian"``: $N(0,\sigma^2)$; ``"bernoulli"``: $\pm\sigma$ with probability 1/2
        each (Assumption 5.1 of NPF/NPK, Assumption 1 of DGN).
    seed
        Seed of the ``torch.Generator`` all draws come from.
    source
        Mode ``"flnpf"``: the (trained) ``"relu"`` network whose weights become the frozen
        feature network.
    n_examples
        Mode ``"frg"``: the number of examples to draw gates for.

    Examples
    --------
    >>> net = make_dgn(3, 4, 3, mode="frnpf_di", seed=1)
    >>> net.widths, all(torch.equal(f, v) for f, v in zip(net.feature, net.value))
    ((3, 4, 4, 1), True)
    """
    for name, val, low in (("d_in", d_in, 1), ("width", width, 1), ("depth", depth, 1)):
        if not isinstance(val, (int, np.integer)) or val < low:
            raise DGNSpecError(f"{name}: got {val!r}, expected an integer >= {low}")
    if mode not in MODES:
        raise DGNSpecError(f"mode: got {mode!r}, expected one of {', '.join(MODES)}")
    if init not in ("gaussian", "bernoulli"):
        raise DGNSpecError(f"init: got {init!r}, expected 'gaussian' or 'bernoulli'")
    sigma = math.sqrt(2.0 / width) if sigma is None else float(sigma)
    if not (math.isfinite(sigma) and sigma > 0):
        raise DGNSpecError(f"sigma: got {sigma!r}, expected a finite number > 0")
    if gate is None:
        gate = Gate("bernoulli") if mode == "frg" else Gate("relu")
    if (mode == "frg") != (gate.kind == "bernoulli"):
        raise DGNSpecError(
            f"gate: got kind {gate.kind!r} for mode {mode!r}; Bernoulli gates go with "
            "mode 'frg' and only there"
        )
    gen = torch.Generator().manual_seed(int(seed))
    shapes = [(d_in, width)] + [(width, width)] * (depth - 2) + [(width, d_out)]
    if depth == 1:
        shapes = [(d_in, d_out)]

    feature, value, fixed = _networks_for_mode(
        mode,
        lambda shape: _draw(shape, sigma, init, gen, dtype),
        shapes,
        n_examples=n_examples,
        draw_fixed=lambda n: bernoulli_gates(
            n, [width] * (depth - 1), gate.p, generator=gen, dtype=dtype
        ),
        source=source,
        source_fits=lambda net: (
            isinstance(net, DGN) and net.widths[:-1] == (d_in, *([width] * (depth - 1)))
        ),
        kind="DGN",
    )
    return DGN(mode, gate, feature, value, fixed, sigma)


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

    As :func:`feature_gates` with the fully connected layer replaced by the circular
    convolution: $q^F_x(l)=\Theta^F(l)\star z^F_x(l-1)$, $G_x(l)=\gamma(q^F_x(l))$.
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
    """
    z = x.reshape(x.shape[0], *image_shape, 1)
    for W, G in zip(value[:-1], gates, strict=True):
        z = _circular_conv(z, W, offsets) * G
    pooled = z.mean(dim=tuple(range(1, z.ndim - 1)))
    return pooled @ value[-1]


@dataclass(frozen=True)
class ConvDGN(_FeatureValueNetwork):
    r"""A convolutional deep gated network with global average pooling (GCONV of NPF/NPK).

    $d-1$ layers of circular ("wrap-around") convolution with a ``kernel``-wide stencil
    in every dimension of ``image_shape`` and $w$ channels, then global average pooling
    and a linear read-out; no biases. One input channel. Same modes and gates as
    :class:`DGN`.

    Attributes
    ----------
    mode, gate, sigma
        As for :class:`DGN`.
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
        if self.mode not in MODES:
            raise DGNSpecError(f"mode: got {self.mode!r}, expected one of {', '.join(MODES)}")
        if not (1 <= len(self.image_shape) <= 2 and all(int(v) >= 1 for v in self.image_shape)):
            raise DGNSpecError(f"image_shape: got {self.image_shape!r}, expected 1 or 2 sizes >= 1")
        if self.kernel < 1 or self.kernel % 2 == 0:
            raise DGNSpecError(f"kernel: got {self.kernel!r}, expected an odd integer >= 1")
        if len(self.value) < 1:
            raise DGNSpecError("value: got no weight layers, expected at least one")
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
        _check_gating(self.mode, self.fixed_gates, self.feature, self.value, "(n, *image_shape, w)")

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
        """Same as :attr:`channels` (the interface of :class:`DGN`)."""
        return self.channels

    @property
    def positions(self) -> int:
        """$D$, the number of positions of an input."""
        return int(math.prod(self.image_shape))

    @property
    def d_in(self) -> int:
        """Input dimension (one channel): $D$."""
        return self.positions

    def gates(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Gate values $G_x(l)$, one ``(n, *image_shape, w)`` tensor per hidden layer."""
        x = _check_input(self, x)
        if self.mode == "frg":
            return _check_fixed(self, x)
        return self.gates_with(self.feature, x)

    def gates_with(
        self, feature: Sequence[torch.Tensor], x: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        """Gates of this architecture and gate function from other feature weights."""
        return conv_feature_gates(feature, x, self.gate, self.image_shape, self.offsets)

    def forward_with(
        self, value: Sequence[torch.Tensor], x: torch.Tensor, gates: Sequence[torch.Tensor]
    ) -> torch.Tensor:
        """Output of this architecture with other value weights and given gates."""
        return conv_forward(value, x, gates, self.image_shape, self.offsets)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Network output $\\hat y(x)$, shape ``(n, d_out)``."""
        x = _check_input(self, x)
        return self.forward_with(self.value, x, self.gates(x))

    def clone(self, mode: str | None = None) -> ConvDGN:
        """A deep copy (optionally under another mode with the same weights)."""
        value = tuple(v.detach().clone() for v in self.value)
        new_mode = mode or self.mode
        if new_mode == "relu":
            feature = value
        elif new_mode == "frg":
            feature = ()
        else:
            feature = tuple(f.detach().clone() for f in (self.feature or self.value))
        fixed = None if self.fixed_gates is None else tuple(g.clone() for g in self.fixed_gates)
        return ConvDGN(
            new_mode, self.gate, feature, value, self.image_shape, self.kernel, fixed, self.sigma
        )


AnyDGN = DGN | ConvDGN
"""A fully connected or a convolutional deep gated network."""


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

    As :func:`make_dgn`, with ``channels`` $w$ per convolution, a ``kernel``-wide
    circular stencil and the default scale $\sigma=\sqrt{2/(|S|\,w)}$ ($|S|$ stencil
    offsets, He's fan-in), used for every layer.

    Examples
    --------
    >>> net = make_conv_dgn((8, 8), 4, 3, seed=0)
    >>> net.channels, [tuple(v.shape) for v in net.value]
    ((1, 4, 4, 1), [(9, 1, 4), (9, 4, 4), (4, 1)])
    """
    shape = tuple(int(v) for v in image_shape)
    for name, val, low in (("channels", channels, 1), ("depth", depth, 1), ("kernel", kernel, 1)):
        if not isinstance(val, (int, np.integer)) or val < low:
            raise DGNSpecError(f"{name}: got {val!r}, expected an integer >= {low}")
    if mode not in MODES:
        raise DGNSpecError(f"mode: got {mode!r}, expected one of {', '.join(MODES)}")
    if init not in ("gaussian", "bernoulli"):
        raise DGNSpecError(f"init: got {init!r}, expected 'gaussian' or 'bernoulli'")
    k = len(conv_offsets(len(shape), kernel))
    sigma = math.sqrt(2.0 / (k * channels)) if sigma is None else float(sigma)
    if not (math.isfinite(sigma) and sigma > 0):
        raise DGNSpecError(f"sigma: got {sigma!r}, expected a finite number > 0")
    if gate is None:
        gate = Gate("bernoulli") if mode == "frg" else Gate("relu")
    if (mode == "frg") != (gate.kind == "bernoulli"):
        raise DGNSpecError(
            f"gate: got kind {gate.kind!r} for mode {mode!r}; Bernoulli gates go with "
            "mode 'frg' and only there"
        )
    gen = torch.Generator().manual_seed(int(seed))
    convs: list[tuple[int, ...]] = [(k, 1, channels), *([(k, channels, channels)] * (depth - 2))]
    shapes = [*convs[: depth - 1], (channels if depth > 1 else 1, d_out)]

    feature, value, fixed = _networks_for_mode(
        mode,
        lambda shp: _draw(shp, sigma, init, gen, dtype),
        shapes,
        n_examples=n_examples,
        draw_fixed=lambda n: tuple(
            (torch.rand(n, *shape, channels, generator=gen, dtype=dtype) < gate.p).to(dtype)
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
    return ConvDGN(mode, gate, feature, value, shape, kernel, fixed, sigma)


NetT = TypeVar("NetT", DGN, ConvDGN)


@dataclass(frozen=True)
class TrainResult(Generic[NetT]):
    """A trained network and its per-epoch training loss."""

    net: NetT
    losses: tuple[float, ...]

    def __post_init__(self) -> None:
        if not all(math.isfinite(v) for v in self.losses):
            raise DGNSpecError("training diverged: the loss became non-finite; lower lr")


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
    """
    if optimizer not in ("sgd", "adam"):
        raise DGNSpecError(f"optimizer: got {optimizer!r}, expected 'sgd' or 'adam'")
    if loss not in ("squared", "cross_entropy"):
        raise DGNSpecError(f"loss: got {loss!r}, expected 'squared' or 'cross_entropy'")
    net = net.clone()
    x = _check_input(net, x)
    y = torch.as_tensor(y)
    if y.shape[0] != x.shape[0]:
        raise DGNSpecError(f"y: got {y.shape[0]} rows, expected {x.shape[0]} (one per x row)")
    params = net.trainable()
    for t in params:
        t.requires_grad_(True)
    opt = torch.optim.Adam(params, lr=lr) if optimizer == "adam" else torch.optim.SGD(params, lr=lr)
    gen = torch.Generator().manual_seed(int(seed))
    n = x.shape[0]
    bs = n if net.mode == "frg" else max(1, min(batch_size, n))

    def batch_loss(idx: torch.Tensor) -> torch.Tensor:
        if net.mode == "frg":
            out = net(x)
        else:
            out = net.forward_with(net.value, x[idx], net.gates_with(net.feature, x[idx]))
        if loss == "squared":
            target = y[idx].to(out.dtype).reshape(out.shape)
            return 0.5 * ((out - target) ** 2).sum(dim=1).mean()
        return torch.nn.functional.cross_entropy(out, y[idx].long())

    losses = []
    if callback is not None:
        callback(0, net)
    for epoch in range(1, epochs + 1):
        perm = torch.randperm(n, generator=gen) if bs < n else torch.arange(n)
        total = 0.0
        for start in range(0, n, bs):
            idx = perm[start : start + bs]
            opt.zero_grad()
            value = batch_loss(idx)
            value.backward()
            opt.step()
            total += float(value.detach()) * len(idx)
        losses.append(total / n)
        if not math.isfinite(losses[-1]):
            break
        if callback is not None:
            callback(epoch, net)
    for t in params:
        t.requires_grad_(False)
    return TrainResult(net, tuple(losses))


DATASETS: tuple[str, ...] = ("digits", "digits47", "identical", "uniform2d")


def make_dataset(
    name: str, *, n: int, seed: int = 0, dtype: torch.dtype = torch.float64
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Inputs and targets for the kernel experiments, reproducible under ``seed``.

    ``"digits"``
        ``n`` images of sklearn's bundled 8x8 digits (the stand-in for MNIST), pixels
        scaled to $[0,1]$ then each row to unit norm; targets are class labels 0-9.
    ``"digits47"``
        "Binary" digits, 4 vs 7 (Sec. 6 of NPF/NPK), ``n/2`` of each; targets $-1$ (4) and
        $+1$ (7); inputs as for ``"digits"``.
    ``"identical"``
        Experiment 1 of DGN: $x_s=1\in\mathbb R$, $y_s\sim U[-1,1]$.
    ``"uniform2d"``
        Experiment 2 of DGN: $x_s\sim U([-1,1]^2)$, $y_s\sim U[-1,1]$.
    """
    if name not in DATASETS:
        raise DGNSpecError(f"dataset: got {name!r}, expected one of {', '.join(DATASETS)}")
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise DGNSpecError(f"n: got {n!r}, expected an integer >= 1")
    rng = np.random.default_rng(seed)
    if name in ("digits", "digits47"):
        from sklearn.datasets import load_digits

        data = load_digits()
        images, labels = data.data / 16.0, data.target
        if name == "digits":
            if n > len(images):
                raise DGNSpecError(f"n: got {n}, expected at most {len(images)} digits")
            idx = rng.permutation(len(images))[:n]
            y = labels[idx].astype(np.int64)
        else:
            if n % 2 or n // 2 > min((labels == 4).sum(), (labels == 7).sum()):
                raise DGNSpecError(
                    f"n: got {n}, expected an even number of at most 358 (179 sevens)"
                )
            fours = rng.permutation(np.flatnonzero(labels == 4))[: n // 2]
            sevens = rng.permutation(np.flatnonzero(labels == 7))[: n // 2]
            idx = rng.permutation(np.concatenate([fours, sevens]))
            y = np.where(labels[idx] == 7, 1.0, -1.0)
        x = images[idx]
        x = x / np.linalg.norm(x, axis=1, keepdims=True)
    elif name == "identical":
        x = np.ones((n, 1))
        y = rng.uniform(-1, 1, size=n)
    else:
        x = rng.uniform(-1, 1, size=(n, 2))
        y = rng.uniform(-1, 1, size=n)
    yt = torch.as_tensor(y) if y.dtype == np.int64 else torch.as_tensor(y, dtype=dtype)
    return torch.as_tensor(x, dtype=dtype), yt
