r"""The neural tangent kernel of a deep gated network, and its value/gate split.

For a DGN with weights $\Theta^{DGN}=(\Theta^F,\Theta^V)$ the neural tangent features are
$\psi^V_x=\nabla_{\Theta^V}\hat y(x)$ and $\psi^F_x=\nabla_{\Theta^F}\hat y(x)$, and the
NTK of the trained weights is (Prop. 4.1 of Lakshminarayanan & Singh, *Neural Path
Features and Neural Path Kernel*, NPF/NPK; "twin gradient flow" $K=K^w+K^a$ of Sec. 3 of
Lakshminarayanan & Singh, *Deep Gated Networks*):

* FNPF modes (``frnpf_*``, ``flnpf``, ``galu``, ``frg``): $K = K^V$;
* DNPFL: $K = K^V + K^F$;
* tied weights (``relu``, soft-ReLU): $\psi=\psi^V+\psi^F$, so
  $K = K^V + K^F + \Psi^{V\top}\Psi^F + \Psi^{F\top}\Psi^V$ (soft-ReLU case of DGN Sec. 3).

With hard gates $\psi^F=0$. The value part is $K^V=\Phi^\top\mathcal V\Phi$ with the value
tangent kernel $\mathcal V$ (Prop. 3.1 of NPF/NPK). Everything here except
:func:`value_ntk_layerwise` works for fully connected and convolutional DGNs alike; for the
latter $\Phi$, $v$ and $\mathcal V$ are over path classes (:mod:`gdln.kernels`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch.func import jacfwd, jacrev, vmap

from ._bounds import check_finite
from ._conv import ConvDGN
from ._dgn import DGN
from ._errors import DGNSpecError
from ._networks import AnyDGN
from ._npk import _conv_npv_tensor, _npv_tensor, _path_budget, _scalar_output, num_paths

__all__ = ["NTK", "neural_tangent_kernel", "value_ntk_layerwise", "value_tangent_kernel"]


@dataclass(frozen=True)
class NTK:
    r"""An NTK and its parts (Prop. 4.1 of NPF/NPK).

    Parameters
    ----------
    value
        $K^V(s,s')=\langle\psi^V_{x_s},\psi^V_{x_{s'}}\rangle$ (strength adaptation, $K^w$).
    feature
        $K^F(s,s')=\langle\psi^F_{x_s},\psi^F_{x_{s'}}\rangle$ (gate adaptation, $K^a$);
        zero for hard gates.
    cross
        $\Psi^{V\top}\Psi^F+\Psi^{F\top}\Psi^V$; enters ``total`` only for tied weights.
    total
        The NTK of the weights that gradient descent trains in this mode.
    mode
        The DGN mode the split was computed for.

    Raises
    ------
    DGNSpecError
        The parts differ in shape.

    References
    ----------
    Lakshminarayanan & Singh, *Neural Path Features and Neural Path Kernel*, Prop. 4.1.
    """

    value: np.ndarray
    feature: np.ndarray
    cross: np.ndarray
    total: np.ndarray
    mode: str

    def __post_init__(self) -> None:
        shapes = {a.shape for a in (self.value, self.feature, self.cross, self.total)}
        if len(shapes) != 1:
            raise DGNSpecError(f"NTK: parts have different shapes {shapes}")

    def eigenvalues(self) -> np.ndarray:
        """Eigenvalues of ``total``, ascending.

        Returns
        -------
        numpy.ndarray
            ``(n,)``.
        """
        return np.linalg.eigvalsh(self.total)


def _flat_rows(jac: Sequence[torch.Tensor], n: int) -> torch.Tensor:
    return torch.cat([j.reshape(n, -1) for j in jac], dim=1)


def _jacobians(
    net: AnyDGN, x: torch.Tensor, want_feature: bool, chunk_size: int | None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Rows of $\\Psi^V$ and (optionally) $\\Psi^F$ as ``(n, d_net)`` tensors."""
    value = tuple(v.detach() for v in net.value)
    feature = tuple(f.detach() for f in net.feature)
    n = x.shape[0]
    if net.mode == "frg":
        assert net.fixed_gates is not None
        fixed = tuple(g.detach() for g in net.fixed_gates)

        def out_frg(val: tuple[torch.Tensor, ...], xr: torch.Tensor, *gr: torch.Tensor):
            return net.forward_with(val, xr[None], [g[None] for g in gr])[0, 0]

        jv = vmap(
            jacrev(out_frg, argnums=0),
            in_dims=(None, 0, *([0] * len(fixed))),
            chunk_size=chunk_size,
        )(value, x, *fixed)
        return _flat_rows(jv, n), None

    def out(feat: tuple[torch.Tensor, ...], val: tuple[torch.Tensor, ...], xr: torch.Tensor):
        xb = xr[None]
        return net.forward_with(val, xb, net.gates_with(feat, xb))[0, 0]

    if want_feature:
        jf, jv = vmap(jacrev(out, argnums=(0, 1)), in_dims=(None, None, 0), chunk_size=chunk_size)(
            feature, value, x
        )
        return _flat_rows(jv, n), _flat_rows(jf, n)
    jv = vmap(jacrev(out, argnums=1), in_dims=(None, None, 0), chunk_size=chunk_size)(
        feature, value, x
    )
    return _flat_rows(jv, n), None


def neural_tangent_kernel(net: AnyDGN, x: torch.Tensor, *, chunk_size: int | None = None) -> NTK:
    r"""The NTK of a DGN and its value/gate split by ``torch.func`` (Prop. 4.1 of NPF/NPK).

    Parameters
    ----------
    net
        A DGN (fully connected or convolutional) with scalar output.
    x
        ``(n, d_in)`` inputs.
    chunk_size
        Examples per vectorised Jacobian evaluation (``torch.func.vmap(chunk_size=...)``);
        ``None`` evaluates all at once. Memory holds the ``(n, d_net)`` Jacobian either way;
        chunking bounds the intermediate activations.

    Returns
    -------
    NTK
        The ``(n, n)`` value, feature, cross and total kernels.

    Raises
    ------
    DGNSpecError
        ``chunk_size`` is not a positive int or ``None``, or ``x`` has the wrong shape or
        holds inf or nan.

    References
    ----------
    Lakshminarayanan & Singh, *Neural Path Features and Neural Path Kernel*, Prop. 4.1.

    Examples
    --------
    >>> from gdln.kernels import make_dgn
    >>> net = make_dgn(2, 3, 3, seed=0)
    >>> k = neural_tangent_kernel(net, torch.eye(2, dtype=torch.float64))
    >>> bool(np.allclose(k.total, k.value)), float(abs(k.feature).max())
    (True, 0.0)
    """
    _scalar_output(net)
    if chunk_size is not None and chunk_size < 1:
        raise DGNSpecError(f"chunk_size: got {chunk_size!r}, expected an integer >= 1 or None")
    x = torch.as_tensor(x, dtype=net.value[0].dtype, device=net.value[0].device)
    if x.ndim != 2 or x.shape[1] != net.d_in:
        raise DGNSpecError(f"x: got shape {tuple(x.shape)}, expected (n, d_in={net.d_in})")
    check_finite("x", x)
    if net.mode == "frg":
        net.gates(x)  # checks the row count
    want_feature = net.gate.differentiable and net.mode != "frg"
    jv, jf = _jacobians(net, x, want_feature, chunk_size)
    kv = (jv @ jv.T).cpu().numpy()
    n = x.shape[0]
    if jf is None:
        kf = np.zeros((n, n))
        cross = np.zeros((n, n))
    else:
        kf = (jf @ jf.T).cpu().numpy()
        c = (jv @ jf.T).cpu().numpy()
        cross = c + c.T
    if net.tied:
        total = kv + kf + cross
    elif net.mode == "dnpfl":
        total = kv + kf
    else:
        total = kv.copy()
    return NTK(kv, kf, cross, total, net.mode)


def value_ntk_layerwise(net: DGN, x: torch.Tensor) -> np.ndarray:
    r"""$K^V$ from per-layer Gram matrices, without forming a Jacobian.

    With gates held fixed the value network is linear in each $\Theta^V(l)$ and
    $\partial\hat y/\partial\Theta^V(l)_{ij} = z(l-1)_i\,b(l)_j$, where
    $b(d)=1$ and $b(l)=(\Theta^V(l+1)\,b(l+1))\odot G(l)$. Hence
    $K^V=\sum_{l=1}^{d}\bigl(Z_{l-1}Z_{l-1}^\top\bigr)\odot\bigl(B_lB_l^\top\bigr)$,
    at cost $O(n^2\sum_l w_l + n\sum_l w_{l-1}w_l)$: the layer-wise form of
    $\langle\psi^V_{x_s},\psi^V_{x_{s'}}\rangle$ in Prop. 4.1 of NPF/NPK. Fully connected
    DGNs only.

    Parameters
    ----------
    net
        A fully connected DGN.
    x
        ``(n, d_in)`` inputs.

    Returns
    -------
    numpy.ndarray
        ``(n, n)`` value kernel $K^V$.

    Raises
    ------
    DGNSpecError
        ``net`` is a :class:`ConvDGN`.

    References
    ----------
    Lakshminarayanan & Singh, *Neural Path Features and Neural Path Kernel*, Prop. 4.1.
    """
    if isinstance(net, ConvDGN):
        raise DGNSpecError(
            "net: value_ntk_layerwise is for fully connected DGNs; use "
            "neural_tangent_kernel(net, x).value for a ConvDGN"
        )
    _scalar_output(net)
    x = torch.as_tensor(x, dtype=net.value[0].dtype, device=net.value[0].device)
    gates = net.gates(x)
    with torch.no_grad():
        zs = [x]
        for W, G in zip(net.value[:-1], gates, strict=True):
            zs.append((zs[-1] @ W) * G)
        b = torch.ones(x.shape[0], 1, dtype=x.dtype, device=x.device)
        k = torch.zeros(x.shape[0], x.shape[0], dtype=x.dtype, device=x.device)
        for layer in range(net.depth - 1, -1, -1):
            k += (zs[layer] @ zs[layer].T) * (b @ b.T)
            if layer > 0:
                b = (b @ net.value[layer].T) * gates[layer - 1]
    return k.cpu().numpy()


def value_tangent_kernel(net: AnyDGN) -> np.ndarray:
    r"""The value tangent kernel $\mathcal V=(\nabla_\Theta v)^\top(\nabla_\Theta v)$, $P\times P$.

    Def. 3.2 of NPF/NPK, with $\nabla_\Theta v$ the $d_\mathrm{net}\times P$ matrix of NPV
    derivatives (Def. 3.1), computed by ``torch.func.jacfwd`` (forward mode: $d_\mathrm{net}$
    tangents, far fewer than the $P$ outputs, so no $P\times P$ intermediates beyond
    $\mathcal V$ itself). Only for small networks:
    it lists all paths. For a :class:`~gdln.kernels.ConvDGN`, $\bar{\mathcal V}$ over path
    classes: a weight is shared by every path class that uses it.

    Parameters
    ----------
    net
        A small DGN or ConvDGN with a scalar output.

    Returns
    -------
    numpy.ndarray
        ``(P, P)`` value tangent kernel $\mathcal V$.

    Raises
    ------
    DGNSpecError
        The network's output is not scalar, or it has too many paths to list.

    References
    ----------
    Lakshminarayanan & Singh, *Neural Path Features and Neural Path Kernel*, Defs. 3.1-3.2.
    """
    _scalar_output(net)
    p = num_paths(net)
    _path_budget(p * p, "value_tangent_kernel")
    value = tuple(v.detach() for v in net.value)
    npv = _conv_npv_tensor if isinstance(net, ConvDGN) else _npv_tensor
    jac = jacfwd(npv)(value)
    j = torch.cat([t.reshape(p, -1) for t in jac], dim=1)
    return (j @ j.T).cpu().numpy()
