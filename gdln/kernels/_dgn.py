r"""The fully connected deep gated network.

The value network carries the signal through the gates the feature network chose (Sec. 4
and Fig. 2 of Lakshminarayanan & Singh, *Neural Path Features and Neural Path Kernel*
(NPF/NPK); Tables 2-3 of Lakshminarayanan & Singh, *Deep Gated Networks* (DGN)):

$$q^V_x(l) = \Theta^V(l)^\top z^V_x(l-1),\quad z^V_x(l) = q^V_x(l)\odot G_x(l),\quad
\hat y(x) = \Theta^V(d)^\top z^V_x(d-1).$$

:class:`DGN` has $d$ weight layers ($d-1$ hidden layers of width $w$) and no biases, so
that every output is a sum over paths. The modes (:data:`MODES`) and gates
(:class:`Gate`) are those of :mod:`gdln.kernels._base` and :mod:`gdln.kernels._gates`.
"""

from __future__ import annotations

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
from ._gates import Gate, bernoulli_gates, feature_gates

__all__ = ["DGN", "dgn_forward", "make_dgn"]


@dataclass(frozen=True)
class DGN(FeatureValueNetwork):
    r"""A fully connected deep gated network (Fig. 2 of the NPF/NPK paper).

    Weights are stored as in Table 1 of the NPF/NPK paper: ``value[l-1]`` is
    $\Theta^V(l)$ of shape ``(fan_in, fan_out)``, so $q(l)=\Theta(l)^\top z(l-1)$ is
    ``z @ value[l-1]`` on a batch of rows.

    Parameters
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

    Raises
    ------
    DGNSpecError
        The weights or gates do not fit together, or ``mode`` is unknown.

    References
    ----------
    Lakshminarayanan & Singh, *Neural Path Features and Neural Path Kernel*, Sec. 4, Fig. 2
    and Table 1; Lakshminarayanan & Singh, *Deep Gated Networks*, Tables 2-3.
    """

    mode: str
    gate: Gate
    feature: tuple[torch.Tensor, ...]
    value: tuple[torch.Tensor, ...]
    fixed_gates: tuple[torch.Tensor, ...] | None = None
    sigma: float = field(default=1.0)

    def __post_init__(self) -> None:
        check_mode(self.mode)
        if len(self.value) < 1:
            raise DGNSpecError("value: got no weight layers, expected at least one")
        for k, (a, b) in enumerate(zip(self.value[:-1], self.value[1:], strict=False)):
            if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
                raise DGNSpecError(
                    f"value[{k}] and value[{k + 1}]: shapes {tuple(a.shape)} and "
                    f"{tuple(b.shape)} do not chain"
                )
        check_gating(self.mode, self.fixed_gates, self.feature, self.value, "(n, w)")

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
        return feature_gates(feature, x, self.gate)

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
        return dgn_forward(value, x, gates)


def dgn_forward(
    value: Sequence[torch.Tensor], x: torch.Tensor, gates: Sequence[torch.Tensor]
) -> torch.Tensor:
    r"""Value-network output given the gates (Table 1 of NPF/NPK with $G$ supplied).

    $z(0)=x$, $z(l) = (\Theta^V(l)^\top z(l-1))\odot G_x(l)$, $\hat y = \Theta^V(d)^\top z(d-1)$.

    Parameters
    ----------
    value
        Value-network weights $\Theta^V(1..d)$, ``(fan_in, fan_out)`` each.
    x
        ``(n, d_in)`` inputs.
    gates
        One ``(n, w)`` gate tensor $G_x(l)$ per hidden layer.

    Returns
    -------
    torch.Tensor
        ``(n, d_out)`` outputs $\hat y$.

    References
    ----------
    Lakshminarayanan & Singh, *Neural Path Features and Neural Path Kernel*, Table 1.
    """
    z = x
    for W, G in zip(value[:-1], gates, strict=True):
        z = (z @ W) * G
    return z @ value[-1]


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
    dtype
        Floating-point type of the weights.

    Returns
    -------
    DGN
        The network.

    Raises
    ------
    DGNSpecError
        A size, ``mode`` or ``init`` is malformed, or ``source`` or ``n_examples`` is
        missing for the mode that needs it.

    References
    ----------
    Lakshminarayanan & Singh, *Neural Path Features and Neural Path Kernel*, Secs. 4 and 6,
    Thm. 5.1 and Assumption 5.1; Lakshminarayanan & Singh, *Deep Gated Networks*, Assumption
    1.

    Examples
    --------
    >>> net = make_dgn(3, 4, 3, mode="frnpf_di", seed=1)
    >>> net.widths, all(torch.equal(f, v) for f, v in zip(net.feature, net.value))
    ((3, 4, 4, 1), True)
    """
    scale, gate_fn = resolve_build(
        mode,
        init,
        sigma,
        gate,
        sizes={"d_in": d_in, "width": width, "depth": depth},
        default_sigma=lambda: math.sqrt(2.0 / width),
    )
    shapes = [(d_in, width)] + [(width, width)] * (depth - 2) + [(width, d_out)]
    if depth == 1:
        shapes = [(d_in, d_out)]
    check_count("d_out", d_out)
    weights = sum(a * b for a, b in shapes) * (1 if mode in ("relu", "frg") else 2)
    gates = 0 if mode != "frg" else check_count("n_examples", n_examples) * width * (depth - 1)
    check_held(f"a DGN of width {width} and depth {depth}", weights + gates)
    gen = torch.Generator().manual_seed(check_seed(seed))
    feature, value, fixed = networks_for_mode(
        mode,
        lambda shape: draw_weights(shape, scale, init, gen, dtype),
        shapes,
        n_examples=n_examples,
        draw_fixed=lambda n: bernoulli_gates(
            n, [width] * (depth - 1), gate_fn.p, generator=gen, dtype=dtype
        ),
        source=source,
        source_fits=lambda net: (
            isinstance(net, DGN) and net.widths[:-1] == (d_in, *([width] * (depth - 1)))
        ),
        kind="DGN",
    )
    return DGN(mode, gate_fn, feature, value, fixed, scale)
