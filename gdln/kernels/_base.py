r"""What every deep gated network shares: a feature network that gates a value network.

A deep gated network (DGN) separates the two roles a ReLU plays: the *feature network*
$\Theta^F$ decides, through its pre-activations $q^F_x(l)$, which gates
$G_x(l)\in[0,1+\varepsilon]^w$ are on, and the *value network* $\Theta^V$ of the same
architecture carries the signal through those gates (Sec. 4 and Fig. 2 of Lakshminarayanan
& Singh, *Neural Path Features and Neural Path Kernel* (NPF/NPK); Tables 2-3 of
Lakshminarayanan & Singh, *Deep Gated Networks* (DGN)). The modes of :data:`MODES` say
how the two weight sets are drawn and which of them train.

This module holds that split (:class:`FeatureValueNetwork`, the base of
:class:`~gdln.kernels.DGN` and :class:`~gdln.kernels.ConvDGN`), the checks every network
and builder makes, and how each mode draws its weights (:func:`networks_for_mode`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeVar

import numpy as np
import torch

from ..settings._constraints import POSITIVE
from ._bounds import check_count, check_finite, check_value
from ._errors import DGNSpecError
from ._gates import Gate
from ._names import MODES

__all__: list[str] = []  # package-internal: the base of DGN and ConvDGN, and shared checks

NetT = TypeVar("NetT", bound="FeatureValueNetwork")
Weights = tuple[torch.Tensor, ...]


class FeatureValueNetwork:
    """The base of the deep gated networks: a feature network that gates a value network
    (Sec. 4 of the NPF/NPK paper; Tables 2-3 of the DGN paper).

    Subclasses are frozen dataclasses with the fields below and say how gates and outputs
    are computed (:meth:`gates_with`, :meth:`forward_with`) and what an input is
    (:attr:`d_in`).
    """

    __dataclass_fields__: ClassVar[dict[str, Any]]
    mode: str
    gate: Gate
    feature: Weights
    value: Weights
    fixed_gates: Weights | None

    @property
    def d_in(self) -> int:
        """Input dimension."""
        raise NotImplementedError

    def gates_with(self, feature: Sequence[torch.Tensor], x: torch.Tensor) -> Weights:
        """Gates of this architecture and gate function from other feature weights."""
        raise NotImplementedError

    def forward_with(
        self, value: Sequence[torch.Tensor], x: torch.Tensor, gates: Sequence[torch.Tensor]
    ) -> torch.Tensor:
        """Output of this architecture with other value weights and given gates."""
        raise NotImplementedError

    @property
    def tied(self) -> bool:
        """Whether feature and value weights are one tensor set (mode ``"relu"``)."""
        return self.mode == "relu"

    def trainable(self) -> list[torch.Tensor]:
        """The tensors gradient descent updates in this mode (Sec. 4 of NPF/NPK).

        Returns
        -------
        list of torch.Tensor
            Both networks' weights for ``"dnpfl"``, else the value network's.
        """
        if self.mode == "dnpfl":
            return [*self.feature, *self.value]
        return list(self.value)

    def gates(self, x: torch.Tensor) -> Weights:
        """Gate values $G_x(l)$ of the inputs ``x``.

        Parameters
        ----------
        x
            Inputs ``(n, d_in)``.

        Returns
        -------
        tuple of torch.Tensor
            One per hidden layer: ``(n, w_l)`` for a fully connected network,
            ``(n, *image_shape, w)`` for a convolutional one.
        """
        x = check_input(self, x)
        if self.mode == "frg":
            return _fixed_gates_for(self, x)
        return self.gates_with(self.feature, x)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Network output $\\hat y(x)$, shape ``(n, d_out)``."""
        x = check_input(self, x)
        return self.forward_with(self.value, x, self.gates(x))

    def clone(self: NetT, mode: str | None = None) -> NetT:
        """A deep copy, optionally under another mode with the same weights.

        Parameters
        ----------
        mode
            A mode of :data:`~gdln.kernels.MODES`; default: this network's.

        Returns
        -------
        DGN or ConvDGN
            The copy, of this network's type.
        """
        value = tuple(v.detach().clone() for v in self.value)
        new_mode = mode or self.mode
        if new_mode == "relu":
            feature = value
        elif new_mode == "frg":
            feature = ()
        else:
            feature = tuple(f.detach().clone() for f in (self.feature or self.value))
        fixed = None if self.fixed_gates is None else tuple(g.clone() for g in self.fixed_gates)
        return dataclasses.replace(
            self, mode=new_mode, feature=feature, value=value, fixed_gates=fixed
        )


def check_mode(mode: str) -> None:
    """Refuse a mode that is not one of :data:`MODES`."""
    if mode not in MODES:
        raise DGNSpecError(f"mode: got {mode!r}, expected one of {', '.join(MODES)}")


def check_gating(
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


def check_input(net: FeatureValueNetwork, x: Any) -> torch.Tensor:
    """``x`` as an ``(n, d_in)`` tensor of the network's dtype."""
    if not isinstance(x, torch.Tensor):
        try:
            x = torch.as_tensor(np.asarray(x, dtype=float), dtype=net.value[0].dtype)
        except (TypeError, ValueError) as err:
            raise DGNSpecError(f"x: expected an (n, d_in) array of numbers, got {err}") from err
    if x.ndim != 2 or x.shape[1] != net.d_in:
        raise DGNSpecError(f"x: got shape {tuple(x.shape)}, expected (n, d_in={net.d_in})")
    check_finite("x", x)
    return x.to(net.value[0].dtype)


def _fixed_gates_for(net: FeatureValueNetwork, x: torch.Tensor) -> Weights:
    """Mode ``"frg"``: the gates drawn for the network's own examples, row by row."""
    assert net.fixed_gates is not None
    n = int(net.fixed_gates[0].shape[0])
    if x.shape[0] != n:
        raise DGNSpecError(
            f"x: got {x.shape[0]} rows, expected n={n}: fixed random gates (mode 'frg') "
            "are drawn for one dataset, row s for example s"
        )
    return net.fixed_gates


def resolve_build(
    mode: str,
    init: str,
    sigma: float | None,
    gate: Gate | None,
    *,
    sizes: dict[str, Any],
    default_sigma: Callable[[], float],
) -> tuple[float, Gate]:
    """Check a builder's settings; return its weight scale and its gate.

    ``sizes`` maps each size argument to its value, each an integer >= 1; the scale
    defaults to ``default_sigma()``, the gate to ReLU gates (Bernoulli for ``"frg"``).
    """
    for name, val in sizes.items():
        check_count(name, val)
    check_mode(mode)
    if init not in ("gaussian", "bernoulli"):
        raise DGNSpecError(f"init: got {init!r}, expected 'gaussian' or 'bernoulli'")
    sigma = check_value("sigma", default_sigma() if sigma is None else sigma, POSITIVE)
    if gate is None:
        gate = Gate("bernoulli") if mode == "frg" else Gate("relu")
    if (mode == "frg") != (gate.kind == "bernoulli"):
        raise DGNSpecError(
            f"gate: got kind {gate.kind!r} for mode {mode!r}; Bernoulli gates go with "
            "mode 'frg' and only there"
        )
    return sigma, gate


def draw_weights(
    shape: tuple[int, ...], sigma: float, init: str, gen: torch.Generator, dtype: torch.dtype
) -> torch.Tensor:
    """$N(0,\\sigma^2)$ entries (``init="gaussian"``) or $\\pm\\sigma$ with probability 1/2
    each (``"bernoulli"``, Assumption 5.1 of NPF/NPK, Assumption 1 of DGN)."""
    if init == "gaussian":
        return sigma * torch.randn(*shape, generator=gen, dtype=dtype)
    signs = torch.randint(0, 2, shape, generator=gen).to(dtype) * 2 - 1
    return sigma * signs


def networks_for_mode(
    mode: str,
    draw: Callable[[tuple[int, ...]], torch.Tensor],
    shapes: Sequence[tuple[int, ...]],
    *,
    n_examples: int | None,
    draw_fixed: Callable[[int], Weights],
    source: FeatureValueNetwork | None,
    source_fits: Callable[[FeatureValueNetwork], bool],
    kind: str,
) -> tuple[Weights, Weights, Weights | None]:
    """Feature weights, value weights and fixed gates of a new network in ``mode``.

    The modes of Sec. 4 of the NPF/NPK paper (Table 2): ``relu`` ties the two networks,
    ``frg`` draws fixed Bernoulli gates instead of a feature network, ``flnpf`` copies the
    frozen feature network from a trained ReLU ``source``, ``frnpf_di`` starts both
    networks equal, and the other modes draw them independently.
    """

    def draw_all() -> Weights:
        return tuple(draw(shape) for shape in shapes)

    if mode == "relu":
        value = draw_all()
        return value, value, None
    if mode == "frg":
        if n_examples is None or n_examples < 1:
            raise DGNSpecError(
                f"n_examples: got {n_examples!r}, expected the number of examples (>= 1) "
                "to draw fixed random gates for"
            )
        return (), draw_all(), draw_fixed(n_examples)
    if mode == "flnpf":
        if source is None or source.mode != "relu" or not source_fits(source):
            raise DGNSpecError(
                f"source: mode 'flnpf' needs a 'relu' {kind} of the same architecture whose "
                f"weights become the frozen feature network, got {source!r:.80}"
            )
        copied = [v.detach().clone() for v in source.value[:-1]]
        return (*copied, draw(shapes[-1])), draw_all(), None
    feature = draw_all()
    if mode == "frnpf_di":
        return feature, tuple(f.clone() for f in feature), None
    return feature, draw_all(), None
