r"""Neural path features, neural path value, overlap and the neural path kernel.

A path $p=(\mathcal I_0(p),\dots,\mathcal I_{d-1}(p))$ picks one input node and one hidden
unit per hidden layer of a fully connected DGN with scalar output (Sec. 2.1 of
Lakshminarayanan & Singh, *Neural Path Features and Neural Path Kernel*, NPF/NPK). Paths are
ordered lexicographically in $(\mathcal I_0,\dots,\mathcal I_{d-1})$, i.e. the row-major
order of an array of shape ``(d_in, w_1, ..., w_{d-1})``.

The path objects $\Phi$ and $v$ have $P=d_\mathrm{in}\prod_l w_l$ entries and are only
meant for small networks. The overlap $\Lambda$ and the NPK $H$ never list paths: they are
products of per-layer gate Gram matrices (:func:`overlap`), at cost $O(n^2\sum_l w_l)$.

Convolutional DGNs (:class:`gdln.kernels.ConvDGN`, circular convolutions and global average
pooling). A path starts at an input position $i_0$, takes one stencil offset $\delta_l$ and
one channel $c_l$ per convolution, so that it sits at position $i_l=i_{l-1}-\delta_l$ after
layer $l$, and reaches the output through the pooling of position $i_{d-1}$ (fixed weight
$1/D$, kept in the feature) and the read-out weight of channel $c_{d-1}$. Its value
$v=\prod_l\Theta(l)[\delta_l,c_{l-1},c_l]\cdot\Theta(d)[c_{d-1}]$ does not depend on the
position: the $D$ rotations of a path class $\bar p=(\delta_1,c_1,\dots,\delta_{d-1},c_{d-1})$
share their weights. The path-class features $\bar\phi_x(\bar p)=\sum_i\phi_x(\bar p,i)$
(:func:`conv_path_features`) give $\hat y=\bar\Phi^\top\bar v$, $K^V=\bar\Phi^\top\bar{\mathcal V}
\bar\Phi$, and the NPK $\bar H=\bar\Phi^\top\bar\Phi$ (:func:`conv_path_kernel`) is a sum over
rotations $r$ of the second input:

$$\bar H(s,s')=\frac1{D^2}\sum_r\sum_{\text{position paths}}x_s(i_0)\,x_{s'}(i_0+r)
\prod_{l=1}^{d-1}\sum_c G_{x_s}(l)[i_l,c]\,G_{x_{s'}}(l)[i_l+r,c].$$

With gates from a convolutional feature network (equivariant under rotations),
$\bar\phi_{\mathrm{rot}\,x}=\bar\phi_x$, so $\hat y$, $\bar H$ and the NTK are invariant under
rotations of either input.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ._bounds import check_finite, check_gates
from ._conv import ConvDGN
from ._dgn import DGN
from ._errors import DGNSpecError
from ._networks import AnyDGN

__all__ = [
    "NPK",
    "conv_path_features",
    "conv_path_kernel",
    "conv_path_value",
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

#: Deep overlaps are rescaled (and NPK.log_scale is nonzero) beyond $2^{\pm512}$.
_FOLD_LIMIT = 512


def num_paths(net: AnyDGN) -> int:
    """$P = d_\\mathrm{in}\\prod_{l=1}^{d-1} w_l$, the number of input-to-output paths.

    For a :class:`~gdln.kernels.ConvDGN`: the number of path classes
    $\\bar P=(|S|\\,w)^{d-1}$ (each stands for $D$ rotated paths sharing one value).

    Parameters
    ----------
    net
        A DGN or ConvDGN.

    Returns
    -------
    int
        $P$ (or $\\bar P$).

    References
    ----------
    Lakshminarayanan & Singh, *Neural Path Features and Neural Path Kernel*, Def. 2.1.
    """
    if isinstance(net, ConvDGN):
        return int(math.prod(len(net.offsets) * c for c in net.channels[1:-1]))
    return int(math.prod(net.widths[:-1]))


def _scalar_output(net: AnyDGN) -> None:
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


def neural_path_features(net: AnyDGN, x: torch.Tensor) -> np.ndarray:
    r"""The NPF matrix $\Phi\in\mathbb R^{P\times n}$ (Def. 2.1(ii) of NPF/NPK).

    $\phi_x(p) = x(\mathcal I_0(p))\,A(x,p)$ with path activity
    $A(x,p)=\prod_{l=1}^{d-1}G_x(l,\mathcal I_l(p))$ (Def. 2.1(i)); column ``s`` is the
    outer product $x_s\otimes G_{x_s}(1)\otimes\dots\otimes G_{x_s}(d-1)$ flattened.

    Parameters
    ----------
    net
        A DGN with a scalar output.
    x
        ``(n, d_in)`` inputs.

    Returns
    -------
    numpy.ndarray
        ``(P, n)`` features $\Phi$.

    Raises
    ------
    DGNSpecError
        The network's output is not scalar, or the paths to list exceed the budget
        ``MAX_PATH_ENTRIES`` (use the kernel functions, which never list paths).

    References
    ----------
    Lakshminarayanan & Singh, *Neural Path Features and Neural Path Kernel*, Def. 2.1.

    Examples
    --------
    >>> from gdln.kernels import make_dgn
    >>> net = make_dgn(2, 3, 3, seed=0)
    >>> neural_path_features(net, torch.ones(4, 2)).shape
    (18, 4)
    """
    if isinstance(net, ConvDGN):
        return conv_path_features(net, x)
    _scalar_output(net)
    x = torch.as_tensor(x, dtype=net.value[0].dtype, device=net.value[0].device)
    gates = net.gates(x)
    _path_budget(num_paths(net) * x.shape[0], "neural_path_features")
    phi = x
    for G in gates:
        phi = (phi[:, :, None] * G[:, None, :]).reshape(x.shape[0], -1)
    return phi.detach().cpu().numpy().T.copy()


def neural_path_value(net: AnyDGN) -> np.ndarray:
    r"""The NPV $v\in\mathbb R^P$ (Def. 2.1(iii) of NPF/NPK).

    $v(p)=\prod_{l=1}^{d}\Theta^V(l,\mathcal I_{l-1}(p),\mathcal I_l(p))$ with
    $\mathcal I_d(p)$ the single output unit. For a :class:`~gdln.kernels.ConvDGN`, the value
    of each path class (:func:`conv_path_value`).

    Parameters
    ----------
    net
        A DGN with a scalar output.

    Returns
    -------
    numpy.ndarray
        ``(P,)`` values $v$.

    Raises
    ------
    DGNSpecError
        The network's output is not scalar, or the paths to list exceed the budget
        ``MAX_PATH_ENTRIES`` (use the kernel functions, which never list paths).

    References
    ----------
    Lakshminarayanan & Singh, *Neural Path Features and Neural Path Kernel*, Def. 2.1(iii).
    """
    if isinstance(net, ConvDGN):
        return conv_path_value(net)
    _scalar_output(net)
    _path_budget(num_paths(net), "neural_path_value")
    return _npv_tensor(net.value).detach().cpu().numpy().copy()


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
    (``n`` must then be given). Deep products leave float64 (ReLU width 64 beyond depth
    ~200): :func:`npk_from_gates` keeps them finite with a stored scale.

    Parameters
    ----------
    gates
        One ``(n, w)`` gate array per hidden layer.
    n
        Number of inputs, needed when there is no hidden layer.

    Returns
    -------
    numpy.ndarray
        ``(n, n)`` overlap $\Lambda$ (``inf`` where it leaves float64).

    Raises
    ------
    DGNSpecError
        No gate layer and no ``n``, or gates holding inf or nan.

    References
    ----------
    Lakshminarayanan & Singh, *Neural Path Features and Neural Path Kernel*, Def. 2.2;
    Lakshminarayanan & Singh, *Deep Gated Networks*, Sec. 1.
    """
    lam, exponent = _scaled_overlap(gates, n)
    return np.ldexp(lam, exponent)


def _scaled_overlap(
    gates: Sequence[torch.Tensor] | Sequence[np.ndarray], n: int | None
) -> tuple[np.ndarray, int]:
    r"""$\Lambda = 2^E\,\tilde\Lambda$ with $\max|\tilde\Lambda|\le2^{512}$, in $O(\text{depth})$.

    Whenever the running product's largest entry leaves $[2^{-512},2^{512}]$ it is divided
    by that entry's power of two: exact (no rounding), so $\tilde\Lambda$ carries the same
    digits as the plain product and stays finite at any depth; a product that never leaves
    the range is the plain product, $E=0$.
    """
    if len(gates) == 0:
        if n is None:
            raise DGNSpecError("overlap: got no gate layers and no n, expected n")
        return np.ones((n, n)), 0
    lam: np.ndarray | None = None
    exponent = 0
    for layer in range(len(gates)):
        g = _numpy(gates[layer])
        check_finite(f"gates[{layer}]", g)
        gram = g @ g.T
        lam = gram if lam is None else lam * gram
        top = float(np.max(np.abs(lam)))
        shift = int(np.frexp(top)[1]) if top > 0.0 and np.isfinite(top) else 0
        if abs(shift) > _FOLD_LIMIT:  # rescale only far from 1: shallow products untouched
            lam = np.ldexp(lam, -shift)
            exponent += shift
    assert lam is not None
    return lam, exponent


def _numpy(t: torch.Tensor | np.ndarray) -> np.ndarray:
    """A float64-compatible numpy copy of a tensor on any device (or an array)."""
    if isinstance(t, torch.Tensor):
        return t.detach().cpu().numpy()
    return np.asarray(t, dtype=float)


@dataclass(frozen=True)
class NPK:
    r"""The neural path kernel $H=\Sigma\odot\Lambda$ and its two factors.

    Deep networks have overlaps beyond float64 ($w^{d-1}$ paths per input node), so
    ``overlap`` and ``kernel`` are stored divided by $e^{\texttt{log\_scale}}$: the true
    values are ``kernel * exp(log_scale)``, and the true eigenvalues
    ``eigenvalues() * exp(log_scale)``. ``log_scale`` is a multiple of $\log 2$ (the
    division is exact) and is 0 whenever the true largest overlap entry lies in
    $[2^{-512},2^{512}]$, so shallow kernels are stored as they are.

    Parameters
    ----------
    input_gram
        $\Sigma = X X^\top$, ``(n, n)``.
    overlap
        $\Lambda\,e^{-\texttt{log\_scale}}$, ``(n, n)`` (Def. 2.2 of NPF/NPK).
    kernel
        $H\,e^{-\texttt{log\_scale}}$, $H = \Phi^\top\Phi = \Sigma\odot\Lambda$ (Lemma 2.1
        of NPF/NPK).
    log_scale
        $\log$ of the factor divided out of ``overlap`` and ``kernel``.

    Raises
    ------
    DGNSpecError
        The matrices are not square of one shape, or ``log_scale`` is not finite.

    References
    ----------
    Lakshminarayanan & Singh, *Neural Path Features and Neural Path Kernel*, Def. 2.2 and Lemma 2.1.
    """

    input_gram: np.ndarray
    overlap: np.ndarray
    kernel: np.ndarray
    log_scale: float = 0.0

    def __post_init__(self) -> None:
        shapes = {a.shape for a in (self.input_gram, self.overlap, self.kernel)}
        if len(shapes) != 1 or len(next(iter(shapes))) != 2:
            raise DGNSpecError(f"NPK: factor shapes differ or are not square: {shapes}")
        n, m = next(iter(shapes))
        if n != m:
            raise DGNSpecError(f"NPK: got shape ({n}, {m}), expected a square matrix")
        if not isinstance(self.log_scale, float) or not np.isfinite(self.log_scale):
            raise DGNSpecError(f"NPK: log_scale = {self.log_scale!r}, expected a finite float")

    def eigenvalues(self) -> np.ndarray:
        """Eigenvalues of the stored kernel, ascending.

        Returns
        -------
        numpy.ndarray
            ``(n,)``; times ``exp(log_scale)`` they are those of $H$.
        """
        return np.linalg.eigvalsh(self.kernel)


def npk_from_gates(x: torch.Tensor | np.ndarray, gates: Sequence[torch.Tensor]) -> NPK:
    r"""$H=\Sigma\odot\Lambda$ from inputs and gates (Lemma 2.1 of NPF/NPK), at any depth.

    The overlap is accumulated layer by layer with exact power-of-two rescaling
    (:class:`NPK` explains ``log_scale``), so depth 1000-10 000 gives finite values.

    Parameters
    ----------
    x
        ``(n, d_in)`` inputs.
    gates
        One ``(n, w)`` gate tensor per hidden layer.

    Returns
    -------
    NPK
        $\Sigma$, $\Lambda$ and $H$, with their stored scale.

    Raises
    ------
    DGNSpecError
        ``x`` or the gates hold inf or nan.

    References
    ----------
    Lakshminarayanan & Singh, *Neural Path Features and Neural Path Kernel*, Def. 2.2 and Lemma 2.1.
    """
    xn = _numpy(x)
    check_finite("x", xn)
    sigma = xn @ xn.T
    lam, exponent = _scaled_overlap(gates, n=len(xn))
    top = float(np.max(np.abs(lam))) if lam.size else 0.0
    if top == 0.0 or abs(exponent) <= _FOLD_LIMIT:
        lam, exponent = np.ldexp(lam, exponent), 0
    return NPK(sigma, lam, sigma * lam, float(exponent * np.log(2.0)))


def neural_path_kernel(net: DGN, x: torch.Tensor) -> NPK:
    r"""The NPK of a DGN on inputs ``x`` (Lemma 2.1 of NPF/NPK), without listing paths.

    Parameters
    ----------
    net
        A fully connected DGN.
    x
        ``(n, d_in)`` inputs.

    Returns
    -------
    NPK
        $\Sigma$, $\Lambda$ and $H=\Sigma\odot\Lambda$, with their stored scale.

    Raises
    ------
    DGNSpecError
        ``net`` is a :class:`ConvDGN` (use :func:`conv_path_kernel`), ``x`` holds inf or
        nan, or the gates do (soft gates of a feature network whose values overflowed).

    References
    ----------
    Lakshminarayanan & Singh, *Neural Path Features and Neural Path Kernel*, Def. 2.2 and Lemma 2.1.

    Examples
    --------
    >>> from gdln.kernels import make_dgn
    >>> net = make_dgn(2, 3, 3, seed=0)
    >>> x = torch.randn(5, 2, dtype=torch.float64)
    >>> phi = neural_path_features(net, x)
    >>> bool(np.allclose(neural_path_kernel(net, x).kernel, phi.T @ phi))
    True
    """
    if isinstance(net, ConvDGN):
        raise DGNSpecError(
            "net: a ConvDGN's NPK is not Sigma . Lambda (paths share weights across "
            "positions); use conv_path_kernel(net, x)"
        )
    x = torch.as_tensor(x, dtype=net.value[0].dtype, device=net.value[0].device)
    gates = net.gates(x)
    check_gates(gates)
    return npk_from_gates(x, gates)


def normalised_nu(kernel: np.ndarray, y: np.ndarray) -> float:
    r"""$\nu = y^\top\hat H^{-1}y$ with $\hat H = H/\mathrm{trace}(H)$.

    The quantity tracked during training in Sec. 6 (item 3) of NPF/NPK and in Sec. 3
    ("hidden features are learned") of the DGN paper; it equals
    $\sum_i (u_i^\top y)^2/\hat\rho_i$ over the eigenpairs of $\hat H$.

    Parameters
    ----------
    kernel
        ``(n, n)`` symmetric positive definite kernel $H$ (any positive scale).
    y
        ``(n,)`` targets.

    Returns
    -------
    float
        $\nu$.

    Raises
    ------
    DGNSpecError
        The shapes do not fit, the trace is not positive, or the kernel is not
        positive definite.

    References
    ----------
    Lakshminarayanan & Singh, *Neural Path Features and Neural Path Kernel*, Sec. 6;
    Lakshminarayanan & Singh, *Deep Gated Networks*, Sec. 3.
    """
    h = np.asarray(kernel, dtype=float)
    y = np.asarray(y, dtype=float).reshape(-1)
    if h.ndim != 2 or h.shape[0] != h.shape[1] or h.shape[0] != len(y):
        raise DGNSpecError(
            f"kernel, y: got shapes {h.shape} and {y.shape}, expected (n, n) and (n,)"
        )
    check_finite("kernel", h)
    check_finite("y", y)
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


def _conv_path_tensor(net: ConvDGN, x: torch.Tensor) -> torch.Tensor:
    r"""$\phi_x(\bar p, i)$ as an ``(n, P_bar, D)`` tensor: path class, final position."""
    gates = net.gates(x)
    n, shape = x.shape[0], net.image_shape
    dims = tuple(range(2, 2 + len(shape)))
    t = x.reshape(n, 1, *shape)
    for G in gates:
        gp = G.movedim(-1, 1)  # (n, w, *shape)
        # phi_l[(prefix, delta, c), i] = phi_{l-1}[prefix, i + delta] * G_l[i, c]
        rolled = torch.stack(
            [torch.roll(t, shifts=tuple(-o for o in off), dims=dims) for off in net.offsets],
            dim=2,
        )
        t = (rolled[:, :, :, None] * gp[:, None, None]).reshape(n, -1, *shape)
    return t.reshape(n, t.shape[1], -1) / net.positions


def conv_path_features(net: ConvDGN, x: torch.Tensor, *, shared: bool = True) -> np.ndarray:
    r"""NPFs of a convolutional DGN with global average pooling, small networks only.

    ``shared=True``: the path-class features $\bar\Phi\in\mathbb R^{\bar P\times n}$,
    $\bar\phi_x(\bar p)=\sum_i\phi_x(\bar p,i)$, summed over the $D$ rotated paths that
    share the value $\bar v(\bar p)$, so $\hat y=\bar\Phi^\top\bar v$ (Prop. 2.1 of NPF/NPK
    with weight sharing). ``shared=False``: one row per path $(\bar p, i_{d-1})$,
    $\phi_x(p)=x(i_0)A(x,p)/D$ (Def. 2.1 with the pooling weight $1/D$), $P=\bar P D$
    rows ordered path class first. Path classes are ordered lexicographically in
    $(\delta_1,c_1,\dots,\delta_{d-1},c_{d-1})$, offsets as in ``net.offsets``.

    Parameters
    ----------
    net
        A convolutional DGN with a scalar output.
    x
        ``(n, prod(image_shape))`` inputs.
    shared
        Sum the rotated paths of a class (see above).

    Returns
    -------
    numpy.ndarray
        ``(P_bar, n)`` or ``(P_bar * D, n)`` features.

    Raises
    ------
    DGNSpecError
        The network's output is not scalar, or the paths to list exceed the budget
        ``MAX_PATH_ENTRIES`` (use the kernel functions, which never list paths).

    References
    ----------
    Lakshminarayanan & Singh, *Neural Path Features and Neural Path Kernel*, Def. 2.1 and Prop. 2.1.

    Examples
    --------
    >>> from gdln.kernels import make_conv_dgn
    >>> net = make_conv_dgn((4,), 2, 3, seed=0)
    >>> conv_path_features(net, torch.ones(3, 4)).shape
    (36, 3)
    """
    _scalar_output(net)
    x = torch.as_tensor(x, dtype=net.value[0].dtype, device=net.value[0].device)
    _path_budget(num_paths(net) * net.positions * x.shape[0], "conv_path_features")
    t = _conv_path_tensor(net, x)
    out = t.sum(dim=2) if shared else t.reshape(x.shape[0], -1)
    return out.detach().cpu().numpy().T.copy()


def _conv_npv_tensor(value: Sequence[torch.Tensor]) -> torch.Tensor:
    # t[(prefix), c]: product of the weights of the prefix ending in channel c.
    t = torch.ones(1, 1, dtype=value[-1].dtype, device=value[-1].device)
    for W in value[:-1]:
        t = (t[:, :, None, None] * W.permute(1, 0, 2)[None]).reshape(-1, W.shape[-1])
    return (t * value[-1][:, 0][None, :]).reshape(-1)


def conv_path_value(net: ConvDGN) -> np.ndarray:
    r"""The value of each path class of a convolutional DGN, in :func:`conv_path_features`' order.

    $\bar v(\bar p)=\prod_{l<d}\Theta(l)[\delta_l,c_{l-1},c_l]\,\Theta(d)[c_{d-1}]$
    (Def. 2.1(iii) of NPF/NPK with shared weights).

    Parameters
    ----------
    net
        A convolutional DGN with a scalar output.

    Returns
    -------
    numpy.ndarray
        ``(P_bar,)`` values $\bar v$.

    Raises
    ------
    DGNSpecError
        The network's output is not scalar, or the paths to list exceed the budget
        ``MAX_PATH_ENTRIES`` (use the kernel functions, which never list paths).

    References
    ----------
    Lakshminarayanan & Singh, *Neural Path Features and Neural Path Kernel*, Def. 2.1(iii).
    """
    _scalar_output(net)
    _path_budget(num_paths(net), "conv_path_value")
    return _conv_npv_tensor(net.value).detach().cpu().numpy().copy()


def conv_path_kernel(net: ConvDGN, x: torch.Tensor, *, chunk: int = 64) -> np.ndarray:
    r"""The NPK $\bar H=\bar\Phi^\top\bar\Phi$ of a convolutional DGN, without listing paths.

    The sum over rotations $r$ of the module docstring, evaluated by dynamic programming
    over layers: $a_0(i)=x_s(i)\,x_{s'}(i+r)$,
    $a_l(i)=C_l(i)\sum_{\delta}a_{l-1}(i+\delta)$ with the channel overlap
    $C_l(i)=\sum_cG_{x_s}(l)[i,c]\,G_{x_{s'}}(l)[i+r,c]$, and
    $\bar H(s,s')=D^{-2}\sum_r\sum_ia_{d-1}(i)$: the convolutional form of Lemma 2.1 of
    NPF/NPK. Cost $O(n^2D^2(d-1)(w+|S|))$ time, $O(\texttt{chunk}\cdot nD)$ memory; $\bar P$
    (exponential in depth) never appears.

    Parameters
    ----------
    net
        A convolutional DGN.
    x
        ``(n, prod(image_shape))`` inputs.
    chunk
        Pairs of inputs evaluated at once (bounds the memory).

    Returns
    -------
    numpy.ndarray
        ``(n, n)`` kernel $\bar H$.

    References
    ----------
    Lakshminarayanan & Singh, *Neural Path Features and Neural Path Kernel*, Lemma 2.1 and
    Sec. 5 (GCONV).
    """
    x = torch.as_tensor(x, dtype=net.value[0].dtype, device=net.value[0].device)
    gates = [g.detach() for g in net.gates(x)]
    n, shape = x.shape[0], net.image_shape
    xs = x.detach().reshape(n, *shape)
    spatial = tuple(range(2, 2 + len(shape)))
    h = torch.zeros(n, n, dtype=x.dtype, device=x.device)
    shifts = list(itertools.product(*(range(v) for v in shape)))
    with torch.no_grad():
        for start in range(0, n, chunk):
            rows = slice(start, min(n, start + chunk))
            for r in shifts:
                back = tuple(-v for v in r)
                # a[s, s', i] = x_s(i) x_s'(i + r)
                xr = torch.roll(xs, shifts=back, dims=tuple(range(1, 1 + len(shape))))
                a = xs[rows, None] * xr[None]
                for G in gates:
                    gr = torch.roll(G, shifts=back, dims=tuple(range(1, 1 + len(shape))))
                    c = torch.einsum("a...k,b...k->ab...", G[rows], gr)
                    box = sum(
                        torch.roll(a, shifts=tuple(-o for o in off), dims=spatial)
                        for off in net.offsets
                    )
                    a = c * box
                h[rows] += a.reshape(a.shape[0], n, -1).sum(dim=2)
    return (h / net.positions**2).cpu().numpy()
