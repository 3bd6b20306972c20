r"""Closed forms of Sec. 2 of *Deep Gated Networks* (Lakshminarayanan & Singh), by sympy,
and the Monte Carlo estimators that check them.

Setting (Assumptions 1-2 of the DGN paper): weights i.i.d. $\pm\sigma$ with probability
1/2 each, statistically independent of the gates. The value-network NTK at initialisation
is $K_0 = \Phi^\top\mathcal V\Phi$ (Prop. 3.1 of the NPF/NPK paper) and
$\mathbb E[\mathcal V]=d\sigma^{2(d-1)}I$ (Lemma 2.1 of DGN), so

$$\mathbb E[K_0\mid\mathcal G_0] = d\sigma^{2(d-1)}\,(x^\top x\odot\lambda_0)\qquad
\text{(Thm. 2.2 of DGN).}$$

For DGN-FRG (gates i.i.d. Bernoulli($p$)) the overlaps average to
$\mathbb E[\lambda_0(s,s)]=(pw)^{d-1}$ and $\mathbb E[\lambda_0(s,s')]=(p^2w)^{d-1}$. Lemma 2.3
of DGN prints both with an extra factor $d$; that factor is inconsistent with Eq. (3) of the
same paper and with the Monte Carlo estimates here (see :func:`frg_overlap_symbolic`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import sympy as sp
import torch

from .._device import resolve_device
from .._errors import shorten
from ._bounds import check_count, check_finite, check_held, check_seed
from ._errors import DGNSpecError

__all__ = [
    "MonteCarloMean",
    "draw_value_weights",
    "eq3_eigenvalues",
    "eq3_eigenvalues_symbolic",
    "expected_ntk",
    "expected_ntk_factor_symbolic",
    "expected_path_inner_symbolic",
    "frg_overlap_mc",
    "frg_overlap_symbolic",
    "path_norm_symbolic",
    "sample_value_ntk",
    "value_ntk_samples",
]

#: Samples evaluated together in the batched Monte Carlo estimators (bounds memory).
_CHUNK = 512

sigma_sym, p_sym, w_sym, d_sym, n_sym = sp.symbols("sigma p w d n", positive=True)


def _expect_pm_sigma(expr: sp.Expr, thetas: Sequence[sp.Symbol]) -> sp.Expr:
    r"""$\mathbb E$ over independent $\theta_k=\pm\sigma$.

    Odd powers vanish and $\theta^{2j}\to\sigma^{2j}$.
    """
    poly = sp.Poly(sp.expand(expr), *thetas)
    total = sp.Integer(0)
    for powers, coeff in poly.terms():
        if any(k % 2 for k in powers):
            continue
        total += coeff * sigma_sym ** sum(powers)
    return sp.simplify(total)


def path_norm_symbolic(d: int) -> sp.Expr:
    r"""$\langle\varphi_p,\varphi_p\rangle$ for one path of $d$ weights $\pm\sigma$.

    Derived from $v(p)=\prod_{l=1}^d\theta_l$: $\lVert\nabla v(p)\rVert^2=\sum_m\prod_{l\ne m}
    \theta_l^2 = d\sigma^{2(d-1)}$ (Lemma 2.1(ii) of DGN), here computed by sympy.

    Parameters
    ----------
    d
        Number of weights of the path (at least 1).

    Returns
    -------
    sympy.Expr
        $d\sigma^{2(d-1)}$ with ``d`` substituted.

    Raises
    ------
    DGNSpecError
        ``d`` is not a positive int.

    References
    ----------
    Lakshminarayanan & Singh, *Deep Gated Networks*, Lemma 2.1(ii).

    Examples
    --------
    >>> path_norm_symbolic(3)
    3*sigma**4
    """
    check_count("d", d)
    thetas = sp.symbols(f"theta1:{d + 1}")
    v = sp.Mul(*thetas)
    norm = sum(sp.diff(v, t) ** 2 for t in thetas)
    return _expect_pm_sigma(norm, thetas)


def expected_path_inner_symbolic(d: int, differing_layers: Sequence[int]) -> sp.Expr:
    r"""$\mathbb E[\langle\varphi_{p_1},\varphi_{p_2}\rangle]$ for two paths of $d$ weights.

    ``differing_layers`` lists the layers $l\in\{1..d\}$ where the two paths use different
    weights; elsewhere they share the weight. Lemma 2.1(i) of DGN says this is 0 whenever
    the paths differ; sympy takes the expectation over $\pm\sigma$ weights exactly.

    Parameters
    ----------
    d
        Number of weights of each path.
    differing_layers
        Layers in ``1..d`` where the paths use different weights.

    Returns
    -------
    sympy.Expr
        The expectation, in the symbol ``sigma``.

    Raises
    ------
    DGNSpecError
        ``d`` is not a positive int, or a layer lies outside ``1..d``.

    References
    ----------
    Lakshminarayanan & Singh, *Deep Gated Networks*, Lemma 2.1(i).
    """
    diff = set(differing_layers)
    if not diff <= set(range(1, d + 1)):
        raise DGNSpecError(f"differing_layers: got {sorted(diff)}, expected layers within 1..{d}")
    a = sp.symbols(f"a1:{d + 1}")
    b = [sp.Symbol(f"b{k}") if k in diff else a[k - 1] for k in range(1, d + 1)]
    v1, v2 = sp.Mul(*a), sp.Mul(*b)
    thetas = list(a) + [s for s in b if s not in a]
    inner = sum(sp.diff(v1, t) * sp.diff(v2, t) for t in thetas)
    return _expect_pm_sigma(inner, thetas)


def expected_ntk_factor_symbolic() -> sp.Expr:
    r"""$d\sigma^{2(d-1)}$ for symbolic $d$: the factor of Thm. 2.2 of DGN.

    $\mathbb E[\mathcal V_{pp}]=\sum_{m=1}^{d}\sigma^{2(d-1)}$ (one term per weight of the
    path), summed by sympy.

    Returns
    -------
    sympy.Expr
        $d\sigma^{2(d-1)}$ in the symbols ``d`` and ``sigma``.

    References
    ----------
    Lakshminarayanan & Singh, *Deep Gated Networks*, Thm. 2.2 and Lemma 2.1.
    """
    m = sp.Symbol("m", integer=True, positive=True)
    return sp.simplify(sp.summation(sigma_sym ** (2 * (d_sym - 1)), (m, 1, d_sym)))


def expected_ntk(x: np.ndarray, overlap: np.ndarray, d: int, sigma: float) -> np.ndarray:
    r"""$\mathbb E[K_0]=d\sigma^{2(d-1)}(x^\top x\odot\lambda_0)$ (Thm. 2.2 of DGN).

    Parameters
    ----------
    x
        ``(n, d_in)`` inputs.
    overlap
        ``(n, n)`` overlap matrix $\lambda_0$ of the gates (:func:`overlap`).
    d
        Depth (number of weight layers).
    sigma
        Weight scale $\sigma$.

    Returns
    -------
    numpy.ndarray
        ``(n, n)`` expected NTK at initialisation.

    Raises
    ------
    DGNSpecError
        ``x`` and ``overlap`` have the wrong shapes.

    References
    ----------
    Lakshminarayanan & Singh, *Deep Gated Networks*, Thm. 2.2.
    """
    x = np.asarray(x, dtype=float)
    lam = np.asarray(overlap, dtype=float)
    if x.ndim != 2 or lam.shape != (len(x), len(x)):
        raise DGNSpecError(
            f"x, overlap: got shapes {x.shape} and {lam.shape}, expected (n, d_in) and (n, n)"
        )
    return d * sigma ** (2 * (d - 1)) * (x @ x.T) * lam


def frg_overlap_symbolic() -> tuple[sp.Expr, sp.Expr]:
    r"""$(\bar\lambda_\mathrm{self},\bar\lambda_\mathrm{cross})$ for i.i.d. Bernoulli($p$) gates.

    $\lambda_0(s,s')=\prod_{l=1}^{d-1}\sum_{i=1}^w G_l(s,i)G_l(s',i)$ with independent
    layers and units; $\mathbb E[G^2]=p$, $\mathbb E[G(s)G(s')]=p^2$ ($s\ne s'$). sympy
    gives $(pw)^{d-1}$ and $(p^2w)^{d-1}$. Lemma 2.3 of DGN prints $d(pw)^{d-1}$ and
    $d(p^2w)^{d-1}$; the factor $d$ does not survive Monte Carlo (:func:`frg_overlap_mc`)
    and contradicts Eq. (3) of the same paper, whose diagonal is 1 at $\sigma^2=1/(pw)$.

    Returns
    -------
    (sympy.Expr, sympy.Expr)
        $(pw)^{d-1}$ and $(p^2w)^{d-1}$ in the symbols ``p``, ``w``, ``d``.

    References
    ----------
    Lakshminarayanan & Singh, *Deep Gated Networks*, Lemma 2.3 and Eq. (3).
    """
    i = sp.Symbol("i", integer=True, positive=True)
    layer = sp.Symbol("l", integer=True, positive=True)
    per_layer_self = sp.summation(p_sym, (i, 1, w_sym))
    per_layer_cross = sp.summation(p_sym**2, (i, 1, w_sym))
    lam_self = sp.product(per_layer_self, (layer, 1, d_sym - 1))
    lam_cross = sp.product(per_layer_cross, (layer, 1, d_sym - 1))
    return sp.powsimp(sp.simplify(lam_self)), sp.powsimp(sp.simplify(lam_cross))


def eq3_eigenvalues_symbolic(n: int) -> dict[sp.Expr, int]:
    r"""Eigenvalues (with multiplicity) of Eq. (3) of DGN for ``n`` identical inputs, by sympy.

    $\mathbb E[K_0]/d$ has ones on the diagonal and $p^{d-1}$ elsewhere; the result is
    $\{1+(n-1)p^{d-1}:1,\;1-p^{d-1}:n-1\}$.

    Parameters
    ----------
    n
        Number of identical inputs (at least 2).

    Returns
    -------
    dict
        Eigenvalue (a sympy expression in $p$, $d$) -> multiplicity.

    Raises
    ------
    DGNSpecError
        ``n < 2``.

    References
    ----------
    Lakshminarayanan & Singh, *Deep Gated Networks*, Eq. (3).
    """
    check_count("n", n, least=2)
    c = p_sym ** (d_sym - 1)
    m = sp.Matrix(n, n, lambda i, j: 1 if i == j else c)
    return {sp.simplify(k): v for k, v in m.eigenvals().items()}


def eq3_eigenvalues(n: int, p: float, d: int) -> tuple[float, float]:
    """``(rho_max, rho_min)`` $=(1+(n-1)p^{d-1},\\;1-p^{d-1})$ of Eq. (3) of DGN.

    Parameters
    ----------
    n
        Number of identical inputs.
    p
        Gate probability of the Bernoulli gates.
    d
        Depth (number of weight layers).

    Returns
    -------
    (float, float)
        The largest and smallest eigenvalue of $\\mathbb E[K_0]/d$.

    References
    ----------
    Lakshminarayanan & Singh, *Deep Gated Networks*, Eq. (3).
    """
    c = p ** (d - 1)
    return float(1 + (n - 1) * c), float(1 - c)


@dataclass(frozen=True)
class MonteCarloMean:
    """A Monte Carlo mean with its standard error (sample std / sqrt(samples)).

    Parameters
    ----------
    mean
        The sample mean (any shape).
    sem
        Its standard error, shaped like ``mean``.
    n_samples
        The number of samples (at least 2).

    Raises
    ------
    DGNSpecError
        ``n_samples < 2``, or ``mean`` and ``sem`` differ in shape.
    """

    mean: np.ndarray
    sem: np.ndarray
    n_samples: int

    def __post_init__(self) -> None:
        if self.n_samples < 2:
            raise DGNSpecError(f"n_samples: got {self.n_samples}, expected >= 2")
        if np.shape(self.mean) != np.shape(self.sem):
            raise DGNSpecError("MonteCarloMean: mean and sem must have one shape")


def _mc(samples: np.ndarray) -> MonteCarloMean:
    r = len(samples)
    return MonteCarloMean(samples.mean(axis=0), samples.std(axis=0, ddof=1) / math.sqrt(r), r)


def draw_value_weights(
    widths: Sequence[int],
    *,
    sigma: float,
    n_samples: int,
    init: str = "bernoulli",
    generator: torch.Generator | None = None,
    device: str | torch.device | None = None,
) -> tuple[torch.Tensor, ...]:
    r"""``n_samples`` independent draws of value-network weights, one ``(R, a, b)`` per layer.

    ``init="bernoulli"``: entries $\pm\sigma$ with probability 1/2 (Assumption 1 of DGN,
    Assumption 5.1 of NPF/NPK); ``"gaussian"``: $N(0,\sigma^2)$. Drawn on the generator's
    device (the CPU without one), so a seed gives the same numbers everywhere, then moved
    to ``device``.

    Parameters
    ----------
    widths
        Layer sizes ``(d_in, w, ..., w, d_out)``.
    sigma
        The weight scale $\sigma$.
    n_samples
        Number of independent draws $R$.
    init
        ``"bernoulli"`` or ``"gaussian"``.
    generator
        Random generator of the draws (default: a fresh CPU generator).
    device
        Where the tensors end up: ``None``/``"auto"`` (CUDA when present, else the CPU;
        the rule of :func:`gdln.simulate`), ``"cpu"`` or ``"cuda[:k]"``.

    Returns
    -------
    tuple of torch.Tensor
        One ``(R, widths[l], widths[l+1])`` tensor per layer.

    Raises
    ------
    DGNSpecError
        ``n_samples`` is not a positive int, or ``init`` is unknown.

    References
    ----------
    Lakshminarayanan & Singh, *Deep Gated Networks*, Assumption 1; Lakshminarayanan & Singh,
    *Neural Path Features and Neural Path Kernel*, Assumption 5.1.
    """
    target = resolve_device(device, lambda m: DGNSpecError(f"device: {m}"))
    draw = generator.device if generator is not None else torch.device("cpu")
    n_samples = check_count("n_samples", n_samples)
    sizes = [check_count("widths", w) for w in widths]
    check_held(
        f"{n_samples} draws of widths {shorten(sizes)}",
        n_samples * sum(a * b for a, b in itertools.pairwise(sizes)),
    )
    if init not in ("bernoulli", "gaussian"):
        raise DGNSpecError(f"init: got {init!r}, expected 'bernoulli' or 'gaussian'")
    out = []
    for a, b in itertools.pairwise(widths):
        if init == "bernoulli":
            signs = torch.randint(0, 2, (n_samples, a, b), generator=generator, device=draw)
            out.append(sigma * (signs * 2 - 1).to(torch.float64))
        else:
            shape = (n_samples, a, b)
            w = torch.randn(*shape, generator=generator, dtype=torch.float64, device=draw)
            out.append(sigma * w)
    return tuple(w.to(target) for w in out)


def value_ntk_samples(
    x: np.ndarray | torch.Tensor,
    gates: Sequence[np.ndarray | torch.Tensor],
    weights: Sequence[torch.Tensor],
) -> np.ndarray:
    r"""$K^V$ of a DGN for a batch of weight draws, ``(R, n, n)``.

    The layer-wise form of :func:`gdln.kernels.value_ntk_layerwise`,
    $K^V=\sum_l(Z_{l-1}Z_{l-1}^\top)\odot(B_lB_l^\top)$ (Prop. 4.1 of NPF/NPK), evaluated for
    all ``R`` draws at once. ``weights[l]`` is ``(R, w_l, w_{l+1})``; ``gates[l]`` is
    ``(n, w_l)`` (the same gates for every draw) or ``(R, n, w_l)`` (one set per draw).

    Parameters
    ----------
    x
        ``(n, d_in)`` inputs.
    gates
        One gate array per hidden layer (shapes above).
    weights
        One ``(R, w_l, w_{l+1})`` tensor per layer (:func:`draw_value_weights`).

    Returns
    -------
    numpy.ndarray
        ``(R, n, n)`` value tangent kernels.

    Raises
    ------
    DGNSpecError
        The number of gate layers does not match the weights.

    References
    ----------
    Lakshminarayanan & Singh, *Neural Path Features and Neural Path Kernel*, Prop. 4.1.
    """
    dev = weights[0].device  # everything follows the weights
    xt = _as_float64(x, dev)
    g = [_as_float64(t, dev) for t in gates]
    if len(g) != len(weights) - 1:
        raise DGNSpecError(
            f"gates: got {len(g)} layers, expected {len(weights) - 1} (one per hidden layer)"
        )
    r = int(weights[0].shape[0])
    zs = [xt.expand(r, *xt.shape)]
    for W, G in zip(weights[:-1], g, strict=True):
        zs.append((zs[-1] @ W) * G)
    b = torch.ones(r, xt.shape[0], 1, dtype=torch.float64, device=dev)
    k = torch.zeros(r, xt.shape[0], xt.shape[0], dtype=torch.float64, device=dev)
    for layer in range(len(weights) - 1, -1, -1):
        k += (zs[layer] @ zs[layer].transpose(1, 2)) * (b @ b.transpose(1, 2))
        if layer > 0:
            b = (b @ weights[layer].transpose(1, 2)) * g[layer - 1]
    return k.cpu().numpy()


def _as_float64(t: np.ndarray | torch.Tensor, device: torch.device) -> torch.Tensor:
    if isinstance(t, torch.Tensor):
        return t.detach().to(device=device, dtype=torch.float64)
    return torch.as_tensor(np.asarray(t, dtype=float), device=device)


def sample_value_ntk(
    x: np.ndarray,
    gates: Sequence[np.ndarray | torch.Tensor],
    *,
    sigma: float,
    n_samples: int,
    init: str = "bernoulli",
    seed: int = 0,
) -> np.ndarray:
    r"""``n_samples`` draws of $K_0$ of the value network with the given (frozen) gates.

    Weights are redrawn each time (:func:`draw_value_weights`); gates stay fixed, so the
    average estimates $\mathbb E[K_0\mid\mathcal G_0]$ of Thm. 2.2 of DGN. Returns
    ``(n_samples, n, n)``, computed in batches by :func:`value_ntk_samples`.

    Parameters
    ----------
    x
        ``(n, d_in)`` inputs.
    gates
        One ``(n, w)`` 0/1 array per hidden layer.
    sigma
        Weight scale $\sigma$.
    n_samples
        Number of weight draws.
    init
        ``"bernoulli"`` or ``"gaussian"``.
    seed
        Seed of the weights.

    Returns
    -------
    numpy.ndarray
        ``(n_samples, n, n)`` samples of $K_0$.

    Raises
    ------
    DGNSpecError
        ``n_samples`` is not a positive int, or ``init`` is unknown.

    References
    ----------
    Lakshminarayanan & Singh, *Deep Gated Networks*, Thm. 2.2.
    """
    n_samples = check_count("n_samples", n_samples)
    if init not in ("bernoulli", "gaussian"):
        raise DGNSpecError(f"init: got {init!r}, expected 'bernoulli' or 'gaussian'")
    xn = np.asarray(x, dtype=float)
    check_finite("x", xn)
    widths = [xn.shape[1], *(int(np.shape(t)[1]) for t in gates), 1]
    check_held(f"{n_samples} NTK samples on {len(xn)} inputs", n_samples * len(xn) ** 2)
    gen = torch.Generator(device="cpu").manual_seed(check_seed(seed))
    parts = []
    for start in range(0, n_samples, _CHUNK):
        r = min(_CHUNK, n_samples - start)
        w = draw_value_weights(
            widths, sigma=sigma, n_samples=r, init=init, generator=gen, device="cpu"
        )
        parts.append(value_ntk_samples(xn, gates, w))
    return np.concatenate(parts)


def frg_overlap_mc(
    width: int, depth: int, p: float, *, n_samples: int, seed: int = 0
) -> tuple[MonteCarloMean, MonteCarloMean]:
    r"""Monte Carlo $\lambda_0(s,s)$ and $\lambda_0(s,s')$ for Bernoulli($p$) gates.

    Each sample draws the gates of two examples and evaluates :func:`gdln.kernels.overlap`;
    compare with :func:`frg_overlap_symbolic` (Lemma 2.3 of DGN).

    Parameters
    ----------
    width
        Hidden width $w$.
    depth
        Depth $d$ (``d - 1`` gated layers).
    p
        Gate probability.
    n_samples
        Number of samples (at least 2).
    seed
        Seed of the gates.

    Returns
    -------
    (MonteCarloMean, MonteCarloMean)
        Estimates of $\lambda_0(s,s)$ and $\lambda_0(s,s')$.

    Raises
    ------
    DGNSpecError
        ``n_samples < 2``.

    References
    ----------
    Lakshminarayanan & Singh, *Deep Gated Networks*, Lemma 2.3.
    """
    n_samples = check_count("n_samples", n_samples, least=2)
    width, depth = check_count("width", width), check_count("depth", depth)
    check_held(
        f"{n_samples} overlaps of width {width}, depth {depth}",
        2 * n_samples + 2 * _CHUNK * width * depth,
    )
    gen = torch.Generator(device="cpu").manual_seed(check_seed(seed))
    selfs, cross = [], []
    for start in range(0, n_samples, _CHUNK):
        r = min(_CHUNK, n_samples - start)
        lam = torch.ones(r, 2, 2, dtype=torch.float64, device=gen.device)
        for _ in range(depth - 1):
            u = torch.rand(r, 2, width, generator=gen, dtype=torch.float64, device=gen.device)
            g = (u < p).double()
            lam = lam * (g @ g.transpose(1, 2))  # Lambda = prod_l G_l G_l^T (Def. 2.2)
        selfs.append(lam[:, 0, 0].cpu().numpy())
        cross.append(lam[:, 0, 1].cpu().numpy())
    return _mc(np.concatenate(selfs)), _mc(np.concatenate(cross))
