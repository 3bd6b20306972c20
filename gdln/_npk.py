r"""Neural path features, neural path value, overlap and the neural path kernel.

A path $p=(\mathcal I_0(p),\dots,\mathcal I_{d-1}(p))$ picks one input node and one hidden
unit per hidden layer of a fully connected DGN with scalar output (Sec. 2.1 of
Lakshminarayanan & Singh, *Neural Path Features and Neural Path Kernel*, NPF/NPK). Paths are
ordered lexicographically in $(\mathcal I_0,\dots,\mathcal I_{d-1})$, i.e. the row-major
order of an array of shape ``(d_in, w_1, ..., w_{d-1})``.

The path objects $\Phi$ and $v$ have $P=d_\mathrm{in}\prod_l w_l$ entries and are only
meant for small networks. The overlap $\Lambda$ and the NPK $H$ never list paths: they are
products of per-layer gate Gram matrices (:func:`overlap`), at cost $O(n^2\sum_l w_l)$.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ._dgn import DGN, DGNSpecError

__all__ = [
    "NPK",
    "neural_path_features",
    "neural_path_kernel",
    "neural_path_value",
    "normalised_nu",
    "npk_from_gates",
    "num_paths",
    "overlap",
]

#: Refuse to materialise more path entries than this (P * n or P).
MAX_PATH_ENTRIES = 50_000_000


def num_paths(net: DGN) -> int:
    """$P = d_\\mathrm{in}\\prod_{l=1}^{d-1} w_l$, the number of input-to-output paths."""
    return int(math.prod(net.widths[:-1]))


def _scalar_output(net: DGN) -> None:
    if net.widths[-1] != 1:
        raise DGNSpecError(
            f"net: got d_out={net.widths[-1]}, expected d_out=1 (path features are defined "
            "for a scalar output)"
        )


def _path_budget(count: int, what: str) -> None:
    if count > MAX_PATH_ENTRIES:
        raise DGNSpecError(
            f"{what}: would list {count} path entries, more than {MAX_PATH_ENTRIES}; "
            "use overlap()/neural_path_kernel(), which never list paths"
        )


def neural_path_features(net: DGN, x: torch.Tensor) -> np.ndarray:
    r"""The NPF matrix $\Phi\in\mathbb R^{P\times n}$ (Def. 2.1(ii) of NPF/NPK).

    $\phi_x(p) = x(\mathcal I_0(p))\,A(x,p)$ with path activity
    $A(x,p)=\prod_{l=1}^{d-1}G_x(l,\mathcal I_l(p))$ (Def. 2.1(i)); column ``s`` is the
    outer product $x_s\otimes G_{x_s}(1)\otimes\dots\otimes G_{x_s}(d-1)$ flattened.

    Examples
    --------
    >>> from gdln._dgn import make_dgn
    >>> net = make_dgn(2, 3, 3, seed=0)
    >>> neural_path_features(net, torch.ones(4, 2)).shape
    (18, 4)
    """
    _scalar_output(net)
    x = torch.as_tensor(x, dtype=net.value[0].dtype)
    gates = net.gates(x)
    _path_budget(num_paths(net) * x.shape[0], "neural_path_features")
    phi = x
    for G in gates:
        phi = (phi[:, :, None] * G[:, None, :]).reshape(x.shape[0], -1)
    return phi.detach().numpy().T.copy()


def neural_path_value(net: DGN) -> np.ndarray:
    r"""The NPV $v\in\mathbb R^P$ (Def. 2.1(iii) of NPF/NPK).

    $v(p)=\prod_{l=1}^{d}\Theta^V(l,\mathcal I_{l-1}(p),\mathcal I_l(p))$ with
    $\mathcal I_d(p)$ the single output unit.
    """
    _scalar_output(net)
    _path_budget(num_paths(net), "neural_path_value")
    return _npv_tensor(net.value).detach().numpy().copy()


def _npv_tensor(value: Sequence[torch.Tensor]) -> torch.Tensor:
    # t[(i_0..i_l)] = prod of weights along the prefix, ending at unit i_l of layer l.
    t = value[0]  # (d_in, w_1)
    for W in value[1:]:
        t = (t[:, :, None] * W[None, :, :]).reshape(-1, W.shape[1])
    return t.reshape(-1)


def overlap(
    gates: Sequence[torch.Tensor] | Sequence[np.ndarray], n: int | None = None
) -> np.ndarray:
    r"""The overlap $\Lambda\in\mathbb R^{n\times n}$ from per-layer gate Gram matrices.

    $\Lambda(s,s') = \sum_{p\,\ni\,i}A(x_s,p)A(x_{s'},p) = \prod_{l=1}^{d-1}
    \bigl(G(l)G(l)^\top\bigr)_{ss'}$ for any fixed input node $i$: the number of paths
    from one input node active for both inputs (Def. 2.2 of NPF/NPK; $\lambda_t$ of
    Sec. 1 of the DGN paper). The product form holds because a path picks its hidden
    units independently in each layer. With no hidden layer, $\Lambda=\mathbf 1\mathbf 1^\top$
    (``n`` must then be given).
    """
    if len(gates) == 0:
        if n is None:
            raise DGNSpecError("overlap: got no gate layers and no n, expected n")
        return np.ones((n, n))
    lam = None
    for G in gates:
        g = G.detach().numpy() if isinstance(G, torch.Tensor) else np.asarray(G, dtype=float)
        gram = g @ g.T
        lam = gram if lam is None else lam * gram
    assert lam is not None
    return lam


@dataclass(frozen=True)
class NPK:
    r"""The neural path kernel $H=\Sigma\odot\Lambda$ and its two factors.

    Attributes
    ----------
    input_gram
        $\Sigma = X X^\top$, ``(n, n)``.
    overlap
        $\Lambda$, ``(n, n)`` (Def. 2.2 of NPF/NPK).
    kernel
        $H = \Phi^\top\Phi = \Sigma\odot\Lambda$ (Lemma 2.1 of NPF/NPK).
    """

    input_gram: np.ndarray
    overlap: np.ndarray
    kernel: np.ndarray

    def __post_init__(self) -> None:
        shapes = {a.shape for a in (self.input_gram, self.overlap, self.kernel)}
        if len(shapes) != 1 or len(next(iter(shapes))) != 2:
            raise DGNSpecError(f"NPK: factor shapes differ or are not square: {shapes}")
        n, m = next(iter(shapes))
        if n != m:
            raise DGNSpecError(f"NPK: got shape ({n}, {m}), expected a square matrix")

    def eigenvalues(self) -> np.ndarray:
        """Eigenvalues of $H$, ascending."""
        return np.linalg.eigvalsh(self.kernel)


def npk_from_gates(x: torch.Tensor | np.ndarray, gates: Sequence[torch.Tensor]) -> NPK:
    r"""$H=\Sigma\odot\Lambda$ from inputs and gates (Lemma 2.1 of NPF/NPK)."""
    xn = x.detach().numpy() if isinstance(x, torch.Tensor) else np.asarray(x, dtype=float)
    sigma = xn @ xn.T
    lam = overlap(gates, n=len(xn))
    return NPK(sigma, lam, sigma * lam)


def neural_path_kernel(net: DGN, x: torch.Tensor) -> NPK:
    r"""The NPK of a DGN on inputs ``x`` (Lemma 2.1 of NPF/NPK), without listing paths.

    Examples
    --------
    >>> from gdln._dgn import make_dgn
    >>> net = make_dgn(2, 3, 3, seed=0)
    >>> x = torch.randn(5, 2, dtype=torch.float64)
    >>> phi = neural_path_features(net, x)
    >>> bool(np.allclose(neural_path_kernel(net, x).kernel, phi.T @ phi))
    True
    """
    x = torch.as_tensor(x, dtype=net.value[0].dtype)
    return npk_from_gates(x, net.gates(x))


def normalised_nu(kernel: np.ndarray, y: np.ndarray) -> float:
    r"""$\nu = y^\top\hat H^{-1}y$ with $\hat H = H/\mathrm{trace}(H)$.

    The quantity tracked during training in Sec. 6 (item 3) of NPF/NPK and in Sec. 3
    ("hidden features are learned") of the DGN paper; it equals
    $\sum_i (u_i^\top y)^2/\hat\rho_i$ over the eigenpairs of $\hat H$.
    """
    h = np.asarray(kernel, dtype=float)
    y = np.asarray(y, dtype=float).reshape(-1)
    if h.ndim != 2 or h.shape[0] != h.shape[1] or h.shape[0] != len(y):
        raise DGNSpecError(
            f"kernel, y: got shapes {h.shape} and {y.shape}, expected (n, n) and (n,)"
        )
    tr = float(np.trace(h))
    if not tr > 0:
        raise DGNSpecError(f"kernel: trace is {tr}, expected > 0 (all inputs zero?)")
    rho, u = np.linalg.eigh(h / tr)
    if rho[0] <= len(y) * np.finfo(float).eps * max(rho[-1], 0.0):
        raise DGNSpecError(
            f"kernel: not positive definite (smallest normalised eigenvalue {rho[0]:.3g}), "
            "so nu = y^T H^-1 y is undefined (repeated inputs, or too few active paths)"
        )
    return float(np.sum((u.T @ y) ** 2 / rho))
