r"""Gates of a deep gated network: how the feature network switches the value network.

Hard ReLU gates $\mathbb 1\{q>0\}$; soft gates $(1+\varepsilon)\,\mathrm{sigmoid}(\beta q)$
(the $\chi_\varepsilon(-\beta q)$ of Table 2 of Lakshminarayanan & Singh, *Deep Gated
Networks* (DGN)); fixed random Bernoulli($p$) gates, one draw per example (DGN-FRG).
The feature network's pre-activations decide the gates (Fig. 2 of Lakshminarayanan &
Singh, *Neural Path Features and Neural Path Kernel* (NPF/NPK)).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch

from ..settings._constraints import POSITIVE
from ._bounds import check_value
from ._errors import DGNSpecError

__all__ = ["Gate", "bernoulli_gates", "feature_gates"]

GateKind = Literal["relu", "soft", "bernoulli"]


@dataclass(frozen=True)
class Gate:
    r"""How a pre-activation $q$ of the feature network becomes a gate value.

    Parameters
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

    Raises
    ------
    DGNSpecError
        Unknown ``kind``, or a parameter out of range.

    References
    ----------
    Lakshminarayanan & Singh, *Deep Gated Networks*, Sec. 2 and Table 2; Lakshminarayanan &
    Singh, *Neural Path Features and Neural Path Kernel*, Sec. 4.

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
        check_value("gate beta", self.beta, POSITIVE)
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


def bernoulli_gates(
    n: int,
    widths: Sequence[int],
    p: float,
    *,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float64,
) -> tuple[torch.Tensor, ...]:
    """Fixed random gates, i.i.d. Bernoulli($p$), one ``(n, w)`` tensor per hidden width.

    Parameters
    ----------
    n
        Number of examples.
    widths
        Hidden widths, one per gated layer.
    p
        Probability that a gate is on.
    generator
        Random generator of the draws.
    dtype
        Floating-point type of the 0/1 tensors.

    Returns
    -------
    tuple of torch.Tensor
        One ``(n, w)`` 0/1 tensor per width.

    References
    ----------
    Lakshminarayanan & Singh, *Deep Gated Networks*, Sec. 2 (DGN-FRG, fixed random gates).

    Examples
    --------
    >>> [tuple(g.shape) for g in bernoulli_gates(5, [3, 2], 0.5)]
    [(5, 3), (5, 2)]
    """
    return tuple((torch.rand(n, w, generator=generator, dtype=dtype) < p).to(dtype) for w in widths)


def feature_gates(
    feature: Sequence[torch.Tensor], x: torch.Tensor, gate: Gate
) -> tuple[torch.Tensor, ...]:
    r"""Gates from the feature network's pre-activations (Fig. 2 of NPF/NPK).

    $q^F_x(l) = \Theta^F(l)^\top z^F_x(l-1)$, $G_x(l) = \gamma(q^F_x(l))$ and
    $z^F_x(l) = q^F_x(l)\odot G_x(l)$ for $l=1..d-1$ (DGN Table 2, gating network).

    Parameters
    ----------
    feature
        Feature-network weights $\Theta^F(1..d)$, ``(fan_in, fan_out)`` each.
    x
        ``(n, d_in)`` inputs.
    gate
        The gate function $\gamma$.

    Returns
    -------
    tuple of torch.Tensor
        One ``(n, w)`` gate tensor $G_x(l)$ per hidden layer.

    Notes
    -----
    A hard ReLU gate depends only on the sign of $q$, and $q$ scales with $z$, so for
    ``"relu"`` gates each row of $z$ is divided by a power of two near its largest entry
    after every layer: exact (the gates are those of the plain product, bit for bit), and
    the feature network's values can neither overflow nor underflow at any depth or
    weight scale. Soft gates depend on the scale of $q$ and are computed as they are.

    References
    ----------
    Lakshminarayanan & Singh, *Neural Path Features and Neural Path Kernel*, Fig. 2;
    Lakshminarayanan & Singh, *Deep Gated Networks*, Table 2.
    """
    z = x
    gates = []
    for W in feature[:-1]:
        q = z @ W
        G = gate(q)
        gates.append(G)
        z = q * G
        if gate.kind == "relu":
            z = z / _power_of_two_near(z.detach())
    return tuple(gates)


def _power_of_two_near(z: torch.Tensor) -> torch.Tensor:
    """Per row (last axis), a power of two within a factor 2 of the largest ``|z|`` (1 for
    a row of zeros); elementwise tensor operations only, so it works under ``vmap``."""
    top = z.abs().amax(dim=-1, keepdim=True)
    top = torch.where(torch.isfinite(top) & (top > 0), top, torch.ones_like(top))
    return torch.exp2(torch.floor(torch.log2(top)))
