r"""Stochastic depth as a gated network with independent random gates.

Stochastic depth (SD, Huang et al. 2016; analysed by Hayou & Ayed 2021) multiplies
residual block $l$ by a gate $\delta_l\sim\mathrm{Bernoulli}(p_l)$ that is redrawn at
every step, while the skip connections stay on. In the language of Saxe et al. (2022)
this is a gated network whose gated edges carry *independent random* gates, so every
expectation of a product of path gates factorises over edges:

$$\mathbb E[g_j g_p] = \prod_{e\in j\cup p} p_e \qquad\text{(unscaled mask)}.$$

For a linear residual network in a decoupled mode every layer carries one scalar and
the transfer of the mode is a scalar residual chain

$$f(\delta) = c\,a\prod_{l=1}^{L}\bigl(1 + \kappa\,\tilde\delta_l\, b_l\bigr),$$

with $\kappa = 1$ (plain) or $1/\sqrt L$ (Stable ResNet, Eq. 3 of Hayou & Ayed),
$\tilde\delta_l=\delta_l$ for the paper's *unscaled* mask or $\delta_l/p_l$ for the
*inverted* mask of timm/torchvision. Its $2^L$ paths never need listing: because the
gates are independent, $\mathbb E[f]$ and $\mathbb E[f^2]$ are products of one factor
per layer, which gives the exact expected per-mode loss

$$\mathbb E[\mathcal L] = -s\,\mathbb E[f] + \tfrac12 d\,\mathbb E[f^2]$$

and its gradient in $O(L)$ (the constant $\tfrac12\mathbb E[y^2]$ of Eq. (1) of Saxe et
al. is dropped, as in the per-mode loss of the decoupled reduction).

Time convention: full-batch gradient descent with learning rate ``lr`` is the Euler
step $\mathrm dt=\mathrm{lr}$ of $\tau\,\mathrm db/\mathrm dt=-\partial\mathcal L/\partial b$
with $\tau=1$.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy as sp
from scipy.integrate import solve_ivp

from .._errors import GraphSpecError
from ..solution._trajectory import Trajectory

__all__ = [
    "MASK_CONVENTIONS",
    "SURVIVAL_MODES",
    "ChainExpectation",
    "LinearResNetExpectation",
    "MaskConvention",
    "StochasticDepthError",
    "SymbolicChain",
    "brute_force_chain",
    "chain_scale",
    "expected_chain",
    "expected_chain_symbolic",
    "expected_gate_product",
    "expected_linear_resnet",
    "expected_path_loss",
    "expected_sd_flow",
    "expected_sd_gd",
    "mode_for_budget",
    "simulate_sd_gd",
    "survival_probabilities",
]


class StochasticDepthError(GraphSpecError):
    """A stochastic-depth setting (survival mode, probability, mask, budget) is invalid."""


# ----------------------------------------------------------------------------------------
# Mask conventions
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MaskConvention:
    r"""How a Bernoulli gate $\delta\sim\mathrm{Bernoulli}(p)$ enters the network.

    Attributes
    ----------
    name
        ``"unscaled"`` (Hayou & Ayed Eq. 1: $\tilde\delta=\delta$, test-time network uses
        the mean $p$) or ``"inverted"`` (timm/torchvision: $\tilde\delta=\delta/p$,
        test-time network uses 1).
    description
        One line for help texts.
    """

    name: str
    description: str

    def gate_value(self, delta: np.ndarray, p: np.ndarray) -> np.ndarray:
        r"""The multiplier $\tilde\delta$ for Bernoulli draws ``delta``."""
        delta = np.asarray(delta, dtype=float)
        if self.name == "unscaled":
            return delta
        return delta / p

    def mean(self, p: np.ndarray) -> np.ndarray:
        r"""$\mathbb E[\tilde\delta]$: $p$ (unscaled) or $1$ (inverted)."""
        p = np.asarray(p, dtype=float)
        return p.copy() if self.name == "unscaled" else np.ones_like(p)

    def second_moment(self, p: np.ndarray) -> np.ndarray:
        r"""$\mathbb E[\tilde\delta^2]$: $p$ (unscaled) or $1/p$ (inverted)."""
        p = np.asarray(p, dtype=float)
        return p.copy() if self.name == "unscaled" else 1.0 / p

    def variance(self, p: np.ndarray) -> np.ndarray:
        r"""$\mathrm{Var}[\tilde\delta]$: $p(1-p)$ (unscaled) or $(1-p)/p$ (inverted)."""
        return self.second_moment(p) - self.mean(p) ** 2

    def test_value(self, p: np.ndarray) -> np.ndarray:
        r"""The deterministic multiplier used at test time (the mean, $\mathbb E\tilde\delta$)."""
        return self.mean(p)


MASK_CONVENTIONS: dict[str, MaskConvention] = {
    "unscaled": MaskConvention(
        "unscaled", "delta_l in {0,1}; test time multiplies block l by p_l (Hayou & Ayed)"
    ),
    "inverted": MaskConvention(
        "inverted", "delta_l/p_l in {0,1/p_l}; test time uses the full network (timm)"
    ),
}


def _mask(mask: str | MaskConvention) -> MaskConvention:
    if isinstance(mask, MaskConvention):
        return mask
    try:
        return MASK_CONVENTIONS[mask]
    except KeyError:
        raise StochasticDepthError(
            f"mask = {mask!r} is not a mask convention; expected one of {sorted(MASK_CONVENTIONS)}",
            key="mask",
        ) from None


# ----------------------------------------------------------------------------------------
# Survival modes
# ----------------------------------------------------------------------------------------


def _check_probabilities(
    p: Sequence[float] | np.ndarray, *, key: str = "p", positive: bool = False
) -> np.ndarray:
    p = np.asarray(p, dtype=float)  # type: ignore[assignment]
    if p.ndim != 1 or p.size == 0:
        raise StochasticDepthError(
            f"{key} must be a non-empty one-dimensional array of survival probabilities, "
            f"got shape {p.shape}",
            key=key,
        )
    bad = np.flatnonzero(~((p >= 0.0) & (p <= 1.0)))
    if bad.size:
        i = int(bad[0])
        raise StochasticDepthError(
            f"survival probability {key}[{i}] = {float(p[i])!r} is outside [0, 1]; "
            "expected every p_l in [0, 1]",
            key=f"{key}[{i}]",
        )
    if positive and np.any(p == 0.0):
        i = int(np.flatnonzero(p == 0.0)[0])
        raise StochasticDepthError(
            f"survival probability {key}[{i}] = 0 cannot be used with the inverted mask "
            "(it divides by p_l); expected p_l in (0, 1]",
            key=f"{key}[{i}]",
        )
    return p


def _check_depth(L: int) -> int:
    if isinstance(L, bool) or not isinstance(L, (int, np.integer)) or L < 1:
        raise StochasticDepthError(
            f"L = {L!r} is not a depth; expected a positive integer", key="L"
        )
    return int(L)


def _uniform(L: int, *, p_L: float, **_: Any) -> np.ndarray:
    r"""Uniform mode $p_l = p_L$ (Huang et al. 2016; Sec. 2 of Hayou & Ayed)."""
    return np.full(L, float(p_L))


def _linear(L: int, *, p_L: float, **_: Any) -> np.ndarray:
    r"""Linear mode $p_l = 1 - \frac{l}{L}(1-p_L)$ (Sec. 2 of Hayou & Ayed)."""
    ell = np.arange(1, L + 1, dtype=float)
    return 1.0 - ell / L * (1.0 - float(p_L))


def _per_layer(L: int, *, p: Sequence[float] | np.ndarray, **_: Any) -> np.ndarray:
    given = np.array(p, dtype=float)
    if given.shape != (L,):
        raise StochasticDepthError(
            f"p has shape {given.shape}; expected ({L},), one survival probability per block",
            key="p",
        )
    return given


def _sensemode(
    L: int, *, sensitivities: Sequence[float] | np.ndarray, p_min: float, **_: Any
) -> np.ndarray:
    r"""SenseMode (Sec. 5 of Hayou & Ayed): $|S_l|$ mapped linearly onto $[p_{\min}, 1]$.

    The smallest sensitivity gets $p_{\min}$ and the largest gets 1; equal sensitivities
    give the uniform mode $p_l = 1$.
    """
    s = np.abs(np.asarray(sensitivities, dtype=float))
    if s.shape != (L,) or not np.all(np.isfinite(s)):
        raise StochasticDepthError(
            f"sensitivities has shape {s.shape} (or non-finite entries); expected ({L},) finite",
            key="sensitivities",
        )
    span = s.max() - s.min()
    r = np.ones(L) if span == 0 else (s - s.min()) / span
    return float(p_min) + (1.0 - float(p_min)) * r


def _sensemode_proportional(
    L: int, *, sensitivities: Sequence[float] | np.ndarray, budget: float, **_: Any
) -> np.ndarray:
    r"""The rule of Sec. 6 of Hayou & Ayed: $p_l\propto|S_l|$, at budget $\sum_l p_l=\bar L$.

    Probabilities that would exceed 1 are clipped and the rest rescaled (water filling),
    so the budget is met exactly whenever $\bar L\le L$.
    """
    s = np.abs(np.asarray(sensitivities, dtype=float))
    if s.shape != (L,) or not np.all(np.isfinite(s)) or s.sum() == 0:
        raise StochasticDepthError(
            f"sensitivities has shape {s.shape} or sums to zero; expected ({L},) finite, "
            "not all zero",
            key="sensitivities",
        )
    p = np.zeros(L)
    free = np.ones(L, dtype=bool)
    remaining = float(budget)
    for _round in range(L):
        scale = remaining / s[free].sum() if s[free].sum() > 0 else 0.0
        p[free] = s[free] * scale
        over = free & (p > 1.0)
        if not over.any():
            break
        p[over] = 1.0
        free &= ~over
        remaining = float(budget) - p[~free].sum()
    return np.clip(p, 0.0, 1.0)


SURVIVAL_MODES: dict[str, Callable[..., np.ndarray]] = {
    "uniform": _uniform,
    "linear": _linear,
    "per_layer": _per_layer,
    "sensemode": _sensemode,
    "sensemode_proportional": _sensemode_proportional,
}
_MODE_NEEDS = {
    "uniform": ("p_L",),
    "linear": ("p_L",),
    "per_layer": ("p",),
    "sensemode": ("sensitivities", "p_min"),
    "sensemode_proportional": ("sensitivities", "budget"),
}


def survival_probabilities(mode: str, L: int, **settings: Any) -> np.ndarray:
    r"""Survival probabilities $(p_1,\dots,p_L)$ of a named survival mode.

    Parameters
    ----------
    mode
        A key of :data:`SURVIVAL_MODES`: ``"uniform"`` ($p_l=p_L$), ``"linear"``
        ($p_l = 1-\frac lL(1-p_L)$, Sec. 2 of Hayou & Ayed), ``"per_layer"`` (given ``p``),
        ``"sensemode"`` (sensitivities mapped linearly to $[p_{\min},1]$, Sec. 5) or
        ``"sensemode_proportional"`` ($p_l\propto|S_l|$ at a budget, Sec. 6).
    L
        Number of residual blocks.
    **settings
        ``p_L`` (uniform, linear), ``p`` (per_layer), ``sensitivities`` and ``p_min``
        (sensemode), ``sensitivities`` and ``budget`` (sensemode_proportional).

    Returns
    -------
    numpy.ndarray
        ``(L,)`` probabilities in $[0,1]$.

    Examples
    --------
    >>> survival_probabilities("linear", 4, p_L=0.5).tolist()
    [0.875, 0.75, 0.625, 0.5]
    """
    L = _check_depth(L)
    if mode not in SURVIVAL_MODES:
        raise StochasticDepthError(
            f"mode = {mode!r} is not a survival mode; expected one of {sorted(SURVIVAL_MODES)}",
            key="mode",
        )
    missing = [k for k in _MODE_NEEDS[mode] if settings.get(k) is None]
    if missing:
        raise StochasticDepthError(
            f"survival mode {mode!r} needs {', '.join(missing)}; got only "
            f"{sorted(k for k, v in settings.items() if v is not None) or 'nothing'}",
            key=missing[0],
        )
    for key in ("p_L", "p_min"):
        if key in _MODE_NEEDS[mode]:
            value = float(settings[key])
            if not 0.0 <= value <= 1.0:
                raise StochasticDepthError(
                    f"survival probability {key} = {value!r} is outside [0, 1]; "
                    "expected a value in [0, 1]",
                    key=key,
                )
    if mode == "sensemode_proportional":
        budget = float(settings["budget"])
        if not 0.0 < budget <= L:
            raise StochasticDepthError(
                f"budget = {budget!r} is not an average depth of {L} blocks; expected 0 < "
                f"budget <= {L}",
                key="budget",
            )
    return _check_probabilities(SURVIVAL_MODES[mode](L, **settings))


def mode_for_budget(
    mode: str, L: int, budget: float, *, sensitivities: Sequence[float] | np.ndarray | None = None
) -> np.ndarray:
    r"""Survival probabilities of a mode whose average depth $\sum_l p_l$ equals ``budget``.

    The training budget $\bar L$ of Sec. 2 of Hayou & Ayed. Uniform: $p_l=\bar L/L$.
    Linear: $\sum_l p_l = L-(1-p_L)(L+1)/2$, so $p_L = 1-2(L-\bar L)/(L+1)$, feasible only
    for $\bar L\ge (L-1)/2$. SenseMode: the linear map onto $[p_{\min},1]$ with $p_{\min}$
    solved from the budget (feasible only when $\bar L\ge\sum_l r_l$ with
    $r_l=(|S_l|-\min|S|)/(\max|S|-\min|S|)$); ``"sensemode_proportional"``: Sec. 6 rule.

    Examples
    --------
    >>> round(float(mode_for_budget("linear", 9, 7.0).sum()), 12)
    7.0
    """
    L = _check_depth(L)
    budget = float(budget)
    if not 0.0 < budget <= L:
        raise StochasticDepthError(
            f"budget = {budget!r} is not an average depth of {L} blocks; expected "
            f"0 < budget <= {L}",
            key="budget",
        )
    if mode == "uniform":
        return survival_probabilities("uniform", L, p_L=budget / L)
    if mode == "linear":
        p_L = 1.0 - 2.0 * (L - budget) / (L + 1)
        if p_L < 0.0:
            raise StochasticDepthError(
                f"budget = {budget!r} is below the smallest average depth of the linear mode "
                f"with L = {L} ({(L - 1) / 2}); expected budget >= (L - 1)/2",
                key="budget",
            )
        return survival_probabilities("linear", L, p_L=p_L)
    if mode == "sensemode":
        if sensitivities is None:
            raise StochasticDepthError("survival mode 'sensemode' needs sensitivities", key="mode")
        r = survival_probabilities("sensemode", L, sensitivities=sensitivities, p_min=0.0)
        R = float(r.sum())
        if budget < R - 1e-12 or R >= L:
            raise StochasticDepthError(
                f"budget = {budget!r} cannot be met by SenseMode's linear map for these "
                f"sensitivities; expected budget >= {R:.6g} (p_min = 0)",
                key="budget",
            )
        p_min = (budget - R) / (L - R)
        return survival_probabilities("sensemode", L, sensitivities=sensitivities, p_min=p_min)
    if mode == "sensemode_proportional":
        return survival_probabilities(mode, L, sensitivities=sensitivities, budget=budget)
    raise StochasticDepthError(
        f"mode = {mode!r} has no budget rule; expected one of "
        "['linear', 'sensemode', 'sensemode_proportional', 'uniform']",
        key="mode",
    )


# ----------------------------------------------------------------------------------------
# Independent random gates: general path form
# ----------------------------------------------------------------------------------------


def expected_gate_product(
    edges_j: Iterable[Any],
    edges_p: Iterable[Any],
    survival: Mapping[Any, Any],
    *,
    mask: str = "unscaled",
) -> Any:
    r"""$\mathbb E[g_j g_p]$ for two paths whose gated edges carry independent gates.

    With independent Bernoulli gates the expectation factorises over edges. Unscaled mask:
    $\mathbb E[g_jg_p]=\prod_{e\in j\cup p}p_e$ (a shared edge contributes
    $\mathbb E[\delta_e^2]=p_e$ once). Inverted mask: edges in only one path contribute
    $\mathbb E[\delta_e/p_e]=1$ and shared edges $\mathbb E[\delta_e^2/p_e^2]=1/p_e$, so
    $\mathbb E[g_jg_p]=\prod_{e\in j\cap p}1/p_e$. Edges absent from ``survival`` are
    always on. Pass the same path twice for $\mathbb E[g_p^2]$; pass an empty path for
    $\mathbb E[g_p]$. Probabilities may be sympy symbols or expressions; the result is
    then a sympy expression (a float otherwise).

    Examples
    --------
    >>> expected_gate_product(["e1", "e2"], ["e2", "e3"], {"e1": 0.5, "e2": 0.5, "e3": 0.5})
    0.125
    >>> q = sp.Symbol("q", positive=True)
    >>> expected_gate_product(["e1", "e2"], ["e2"], {"e1": q, "e2": q / 2})
    q**2/2
    """
    conv = _mask(mask)
    a = {e for e in edges_j if e in survival}
    b = {e for e in edges_p if e in survival}
    value: Any = 1.0
    symbolic = False
    for e in a | b:
        pe: Any = survival[e]
        if isinstance(pe, sp.Basic) and pe.free_symbols:
            symbolic = True
            if value == 1.0:
                value = sp.Integer(1)
        else:
            pe = float(pe)
            _check_probabilities(
                np.array([pe]), key=f"survival[{e!r}]", positive=conv.name == "inverted"
            )
        if conv.name == "unscaled":
            value *= pe
        elif e in a and e in b:
            value /= pe
    return sp.nsimplify(value) if symbolic else float(value)


def expected_path_loss(
    paths: Sequence[Sequence[Any]],
    weights: Mapping[Any, float],
    survival: Mapping[Any, float],
    s: Sequence[float] | np.ndarray,
    d: np.ndarray,
    *,
    mask: str = "unscaled",
) -> float:
    r"""Expected per-mode loss from an explicit list of paths (brute force over path pairs).

    $\mathbb E[\mathcal L] = -\sum_p s_p\,\mathbb E[g_p]\,b_p
    + \tfrac12\sum_{j,p} b_j\,d(j,p)\,b_p\,\mathbb E[g_jg_p]$ with $b_p=\prod_{e\in p}b_e$
    (the per-mode loss of the decoupled reduction of Saxe et al. 2022, averaged over
    independent gates with :func:`expected_gate_product`). Costs $O(P^2)$ for $P$ paths;
    it is the reference the $O(L)$ chain form is checked against.

    Parameters
    ----------
    paths
        Each path as the sequence of its edge ids.
    weights
        Edge id -> scalar $b_e$ (a missing edge has weight 1, e.g. a fixed skip).
    survival
        Gated edge id -> survival probability; other edges are always on.
    s, d
        ``(P,)`` input-output strengths $s_p$ and ``(P, P)`` input strengths $d(j,p)$
        (zero for paths to different targets).
    """
    d = np.asarray(d, dtype=float)
    strengths = np.asarray(s, dtype=float)
    P = len(paths)
    if strengths.shape != (P,) or d.shape != (P, P):
        raise StochasticDepthError(
            f"s has shape {strengths.shape} and d {d.shape}; expected ({P},) and ({P}, {P}) for {P} paths",
            key="d",
        )
    bp = np.array([np.prod([float(weights.get(e, 1.0)) for e in path]) for path in paths])
    eg = np.array([expected_gate_product(path, (), survival, mask=mask) for path in paths])
    loss = -float(np.sum(strengths * eg * bp))
    for j, p in itertools.product(range(P), repeat=2):
        if d[j, p] != 0.0:
            gjp = expected_gate_product(paths[j], paths[p], survival, mask=mask)
            loss += 0.5 * bp[j] * d[j, p] * bp[p] * gjp
    return float(loss)


# ----------------------------------------------------------------------------------------
# Scalar residual chains: exact expectations in O(L)
# ----------------------------------------------------------------------------------------


def chain_scale(scaling: str | float, L: int) -> float:
    r"""Residual scale $\kappa$: 1 for ``"plain"``, $1/\sqrt L$ for ``"stable"`` (Eq. 3).

    A number is taken as $\kappa$ itself.
    """
    if isinstance(scaling, str):
        if scaling == "plain":
            return 1.0
        if scaling == "stable":
            return 1.0 / float(np.sqrt(L))
        raise StochasticDepthError(
            f"scaling = {scaling!r} is not a residual scaling; expected 'plain', 'stable' "
            "or a number",
            key="scaling",
        )
    kappa = float(scaling)
    if not np.isfinite(kappa):
        raise StochasticDepthError(f"scaling = {scaling!r} is not finite", key="scaling")
    return kappa


@dataclass(frozen=True)
class ChainExpectation:
    r"""Exact expectations over the masks of scalar residual chains (one per mode).

    Attributes
    ----------
    loss
        $\sum_\alpha \mathbb E[\mathcal L_\alpha]$, summed over modes.
    loss_modes
        ``(M,)`` $\mathbb E[\mathcal L_\alpha] = -s_\alpha\mathbb E f_\alpha
        + \tfrac12 d_\alpha\mathbb E f_\alpha^2$.
    mean, second
        ``(M,)`` $\mathbb E[f]$ and $\mathbb E[f^2]$.
    grad
        $\partial\,\mathbb E[\mathcal L]/\partial b$, same shape as the ``b`` given.
    average_loss
        $\sum_\alpha -s_\alpha\mathbb E f_\alpha + \tfrac12 d_\alpha(\mathbb E f_\alpha)^2$:
        the loss of the average network (mask replaced by its mean).
    """

    loss: float
    loss_modes: np.ndarray
    mean: np.ndarray
    second: np.ndarray
    grad: np.ndarray
    average_loss: float

    def __post_init__(self) -> None:
        m = np.asarray(self.mean).shape
        if np.asarray(self.loss_modes).shape != m or np.asarray(self.second).shape != m:
            raise ValueError("loss_modes, mean and second must have one entry per mode")
        if not isinstance(self.loss, float) or not isinstance(self.average_loss, float):
            raise TypeError("loss and average_loss must be Python floats")

    @property
    def variance(self) -> np.ndarray:
        r"""$\mathrm{Var}[f] = \mathbb E f^2 - (\mathbb E f)^2$ per mode."""
        return self.second - self.mean**2


def _chain_inputs(
    b: np.ndarray, p: np.ndarray, mask: str, s: Any, d: Any, a: Any, c: Any
) -> tuple[np.ndarray, np.ndarray, MaskConvention, np.ndarray, np.ndarray, np.ndarray, bool]:
    conv = _mask(mask)
    b = np.asarray(b, dtype=float)
    vector = b.ndim == 1
    B = b.reshape(b.shape[0], -1) if b.ndim in (1, 2) else None
    if B is None or B.shape[0] == 0:
        raise StochasticDepthError(
            f"b has shape {b.shape}; expected (L,) or (L, modes) with L >= 1", key="b"
        )
    L, M = B.shape
    p = _check_probabilities(p, positive=conv.name == "inverted")
    if p.shape != (L,):
        raise StochasticDepthError(
            f"p has shape {p.shape}; expected ({L},), one survival probability per block",
            key="p",
        )
    out = []
    for name, value in (("s", s), ("d", d), ("a", a), ("c", c)):
        arr = np.broadcast_to(np.asarray(value, dtype=float), (M,)) if np.ndim(value) <= 1 else None
        if arr is None:
            raise StochasticDepthError(
                f"{name} has shape {np.shape(value)}; expected a scalar or ({M},)", key=name
            )
        out.append(np.array(arr))
    sa, da, aa, ca = out
    return B, p, conv, sa, da, aa * ca, vector


def _exclusive_products(m: np.ndarray) -> np.ndarray:
    """Product over all rows but row l, for each l (axis 0), without division."""
    ones = np.ones((1, *m.shape[1:]))
    prefix = np.cumprod(np.concatenate([ones, m[:-1]]), axis=0)
    suffix = np.cumprod(np.concatenate([ones, m[::-1][:-1]]), axis=0)[::-1]
    return prefix * suffix


def expected_chain(
    b: np.ndarray,
    p: np.ndarray,
    *,
    s: float | np.ndarray,
    d: float | np.ndarray = 1.0,
    scaling: str | float = "plain",
    mask: str = "unscaled",
    a: float | np.ndarray = 1.0,
    c: float | np.ndarray = 1.0,
) -> ChainExpectation:
    r"""Exact expected loss and gradient of SD scalar residual chains in $O(L)$.

    Each mode is $f=c\,a\prod_l(1+\kappa\tilde\delta_lb_l)$ with independent gates, so
    $\mathbb E f = ca\prod_l m_l$ and $\mathbb E f^2=(ca)^2\prod_l q_l$ where
    $m_l = 1+\kappa\mu_lb_l$, $q_l = 1+2\kappa\mu_lb_l+\kappa^2\nu_lb_l^2$,
    $\mu_l=\mathbb E\tilde\delta_l$, $\nu_l = \mathbb E\tilde\delta_l^2$ (for the unscaled
    mask this is $\mathbb E[F]=\prod_l(1+p_lb_l)$, $\mathbb E[F^2]=\prod_l(1+2p_lb_l+p_lb_l^2)$).
    The per-mode loss is $-s\,\mathbb E f+\frac12 d\,\mathbb E f^2$ (gradient flow on it is
    the expected version of Eq. 10 of Saxe et al. 2022); derivatives use prefix and suffix
    products, so no division by a factor that may vanish.

    Parameters
    ----------
    b
        ``(L,)`` or ``(L, M)`` residual scalars, one column per mode.
    p
        ``(L,)`` survival probabilities (shared by all modes: one mask per step).
    s, d
        Per-mode input-output and input strengths (scalars or ``(M,)``).
    scaling
        ``"plain"``, ``"stable"`` ($\kappa=1/\sqrt L$) or a number $\kappa$.
    mask
        ``"unscaled"`` or ``"inverted"`` (see :data:`MASK_CONVENTIONS`).
    a, c
        Fixed input and output scalars of each mode (default 1).

    Examples
    --------
    >>> e = expected_chain([0.5, 0.5], [0.5, 0.5], s=1.0, d=1.0)
    >>> round(float(e.mean[0]), 6), round(float(e.second[0]), 6)
    (1.5625, 2.640625)
    """
    B, p, conv, s_, d_, ca, vector = _chain_inputs(b, p, mask, s, d, a, c)
    L = B.shape[0]
    kappa = chain_scale(scaling, L)
    mu = conv.mean(p)[:, None]
    nu = conv.second_moment(p)[:, None]
    m = 1.0 + kappa * mu * B
    q = 1.0 + 2.0 * kappa * mu * B + kappa**2 * nu * B**2
    mean = ca * np.prod(m, axis=0)
    second = ca**2 * np.prod(q, axis=0)
    dmean = ca * _exclusive_products(m) * (kappa * mu)
    dsecond = ca**2 * _exclusive_products(q) * (2.0 * kappa * mu + 2.0 * kappa**2 * nu * B)
    grad = -s_ * dmean + 0.5 * d_ * dsecond
    loss_modes = -s_ * mean + 0.5 * d_ * second
    average = -s_ * mean + 0.5 * d_ * mean**2
    return ChainExpectation(
        loss=float(loss_modes.sum()),
        loss_modes=loss_modes,
        mean=mean,
        second=second,
        grad=grad[:, 0] if vector else grad,
        average_loss=float(average.sum()),
    )


def brute_force_chain(
    b: np.ndarray,
    p: np.ndarray,
    *,
    s: float | np.ndarray,
    d: float | np.ndarray = 1.0,
    scaling: str | float = "plain",
    mask: str = "unscaled",
    a: float | np.ndarray = 1.0,
    c: float | np.ndarray = 1.0,
) -> tuple[float, np.ndarray]:
    r"""Expected loss and gradient by enumerating all $2^L$ masks (reference; $L\le 20$).

    $\mathbb E[\mathcal L]=\sum_{\delta\in\{0,1\}^L}\prod_l p_l^{\delta_l}(1-p_l)^{1-\delta_l}
    \,\mathcal L(\delta)$, with the gradient of each masked loss taken in closed form.

    Returns
    -------
    (float, numpy.ndarray)
        Expected loss summed over modes, and its gradient shaped like ``b``.
    """
    B, p, conv, s_, d_, ca, vector = _chain_inputs(b, p, mask, s, d, a, c)
    L = B.shape[0]
    if L > 20:
        raise StochasticDepthError(
            f"L = {L} is too deep to enumerate 2^L masks; expected L <= 20", key="L"
        )
    kappa = chain_scale(scaling, L)
    total = 0.0
    g = np.zeros_like(B)
    chunk = 1 << min(L, 14)
    bits = 1 << np.arange(L - 1, -1, -1)
    for start in range(0, 1 << L, chunk):
        # masks start .. start + chunk - 1 in binary, first block as the highest bit
        masks = ((np.arange(start, start + chunk)[:, None] & bits) > 0).astype(float)
        prob = np.prod(np.where(masks == 1.0, p, 1.0 - p), axis=1)
        gate = conv.gate_value(masks, p)
        h = 1.0 + kappa * gate[:, :, None] * B[None]  # (chunk, L, M)
        f = ca * np.prod(h, axis=1)  # (chunk, M)
        loss = -s_ * f + 0.5 * d_ * f**2
        ones = np.ones((chunk, 1, B.shape[1]))
        prefix = np.cumprod(np.concatenate([ones, h[:, :-1]], axis=1), axis=1)
        suffix = np.cumprod(np.concatenate([ones, h[:, ::-1][:, :-1]], axis=1), axis=1)[:, ::-1]
        df = ca * prefix * suffix * kappa * gate[:, :, None]
        g += ((-s_ + d_ * f)[:, None, :] * df * prob[:, None, None]).sum(axis=0)
        total += float((prob[:, None] * loss).sum())
    return total, (g[:, 0] if vector else g)


# ----------------------------------------------------------------------------------------
# Full linear SD ResNets (matrices, not aligned): second-moment recursion
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LinearResNetExpectation:
    r"""Exact expected loss of a linear SD ResNet and its gradients.

    Attributes
    ----------
    loss
        $\mathbb E_\delta[\mathcal L]$ (Eq. 1 of Saxe et al. with the $\frac12\mathrm{tr}
        \Sigma^{yy}$ term when given).
    average_loss
        Loss of the average network
        $W_{\rm out}\prod_l(I+\kappa\,\mathbb E\tilde\delta_l\,W_l)W_{\rm in}$.
    grad_blocks
        ``(L, N, N)`` gradient of ``loss`` in the block weights.
    grad_in, grad_out
        Gradients in $W_{\rm in}$ and $W_{\rm out}$.
    """

    loss: float
    average_loss: float
    grad_blocks: np.ndarray
    grad_in: np.ndarray
    grad_out: np.ndarray

    def __post_init__(self) -> None:
        if not isinstance(self.loss, float) or not isinstance(self.average_loss, float):
            raise TypeError("loss and average_loss must be Python floats")
        if self.grad_blocks.ndim != 3:
            raise ValueError("grad_blocks must be (L, N, N)")


def expected_linear_resnet(
    blocks: np.ndarray,
    p: np.ndarray,
    sigma_x: np.ndarray,
    sigma_yx: np.ndarray,
    *,
    w_in: np.ndarray | None = None,
    w_out: np.ndarray | None = None,
    trace_yy: float = 0.0,
    scaling: str | float = "plain",
    mask: str = "unscaled",
) -> LinearResNetExpectation:
    r"""Exact expected loss of $y=W_{\rm out}\prod_l(I+\kappa\tilde\delta_lW_l)W_{\rm in}x$.

    No path is listed: with independent gates the mean map is
    $\mathbb E F = W_{\rm out}\prod_l(I+\kappa\mu_lW_l)W_{\rm in}$ and the second moment
    of the hidden state obeys $S_0=W_{\rm in}\Sigma^xW_{\rm in}^T$,
    $S_l = S_{l-1}+\kappa\mu_l(W_lS_{l-1}+S_{l-1}W_l^T)+\kappa^2\nu_lW_lS_{l-1}W_l^T$
    ($\mu=\mathbb E\tilde\delta$, $\nu=\mathbb E\tilde\delta^2$), so
    $\mathbb E\mathcal L = \frac12\mathrm{tr}\Sigma^{yy}-\mathrm{tr}(\mathbb EF\,\Sigma^{yx\,T})
    +\frac12\mathrm{tr}(W_{\rm out}S_LW_{\rm out}^T)$, in $O(LN^3)$ for the $2^L$ paths of
    Saxe et al.'s path sum. Gradients by reverse-mode AD (torch, float64).

    Parameters
    ----------
    blocks
        ``(L, N, N)`` residual weights $W_l$.
    p
        ``(L,)`` survival probabilities.
    sigma_x, sigma_yx
        Input covariance $\Sigma^x$ ``(D, D)`` and input-output covariance $\Sigma^{yx}$
        ``(O, D)``.
    w_in, w_out
        ``(N, D)`` and ``(O, N)``; identity when omitted (then $D=N$ or $O=N$).
    trace_yy
        $\mathrm{tr}\,\Sigma^{yy}$ (a constant).
    """
    import torch

    conv = _mask(mask)
    blocks = np.asarray(blocks, dtype=float)
    if blocks.ndim != 3 or blocks.shape[1] != blocks.shape[2]:
        raise StochasticDepthError(
            f"blocks has shape {blocks.shape}; expected (L, N, N)", key="blocks"
        )
    L, N, _ = blocks.shape
    p = _check_probabilities(p, positive=conv.name == "inverted")
    if p.shape != (L,):
        raise StochasticDepthError(
            f"p has shape {p.shape}; expected ({L},), one survival probability per block",
            key="p",
        )
    kappa = chain_scale(scaling, L)
    sx = np.asarray(sigma_x, dtype=float)
    syx = np.asarray(sigma_yx, dtype=float)
    win = np.eye(N) if w_in is None else np.asarray(w_in, dtype=float)
    wout = np.eye(N) if w_out is None else np.asarray(w_out, dtype=float)
    if (
        win.shape != (N, sx.shape[0])
        or wout.shape != (syx.shape[0], N)
        or syx.shape[1] != sx.shape[0]
    ):
        raise StochasticDepthError(
            f"shapes do not chain: w_in {win.shape}, blocks {(N, N)}, w_out {wout.shape}, "
            f"sigma_x {sx.shape}, sigma_yx {syx.shape}",
            key="sigma_yx",
        )
    t = {
        k: torch.tensor(v, dtype=torch.float64, requires_grad=k in ("W", "win", "wout"))
        for k, v in (("W", blocks), ("win", win), ("wout", wout), ("sx", sx), ("syx", syx))
    }
    mu = conv.mean(p)
    nu = conv.second_moment(p)
    W, win_t, wout_t = t["W"], t["win"], t["wout"]
    mean_map = win_t
    S = win_t @ t["sx"] @ win_t.T
    for ell in range(L):
        Wl = W[ell]
        mean_map = mean_map + kappa * mu[ell] * (Wl @ mean_map)
        WS = Wl @ S
        S = S + kappa * mu[ell] * (WS + WS.T) + kappa**2 * nu[ell] * (WS @ Wl.T)
    EF = wout_t @ mean_map
    cross = torch.trace(EF @ t["syx"].T)
    loss = 0.5 * trace_yy - cross + 0.5 * torch.trace(wout_t @ S @ wout_t.T)
    average = 0.5 * trace_yy - cross + 0.5 * torch.trace(EF @ t["sx"] @ EF.T)
    gW, gin, gout = torch.autograd.grad(loss, (W, win_t, wout_t))
    return LinearResNetExpectation(
        loss=float(loss.detach()),
        average_loss=float(average.detach()),
        grad_blocks=gW.numpy(),
        grad_in=gin.numpy(),
        grad_out=gout.numpy(),
    )


# ----------------------------------------------------------------------------------------
# Symbolic form
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SymbolicChain:
    r"""The exact expected loss of one SD scalar chain as sympy expressions.

    Attributes
    ----------
    loss, mean, second
        $\mathbb E[\mathcal L]$, $\mathbb E[f]$, $\mathbb E[f^2]$.
    b, p
        The symbols $b_1..b_L$ and $p_1..p_L$.
    s, d, kappa
        The symbols $s$, $d$ and $\kappa$ (``kappa`` is the number 1 for plain scaling).
    """

    loss: sp.Expr
    mean: sp.Expr
    second: sp.Expr
    b: tuple[sp.Symbol, ...]
    p: tuple[sp.Symbol, ...]
    s: sp.Symbol
    d: sp.Symbol
    kappa: sp.Expr

    def __post_init__(self) -> None:
        if len(self.b) != len(self.p):
            raise ValueError("b and p must have one symbol per block")

    def gradient(self) -> tuple[sp.Expr, ...]:
        r"""$\partial\,\mathbb E[\mathcal L]/\partial b_l$ for each $l$."""
        return tuple(sp.diff(self.loss, bl) for bl in self.b)

    def flow(self) -> tuple[sp.Expr, ...]:
        r"""Right-hand sides of $\tau\dot b_l = -\partial\,\mathbb E[\mathcal L]/\partial b_l$."""
        return tuple(-g for g in self.gradient())


def expected_chain_symbolic(
    L: int, *, scaling: str = "plain", mask: str = "unscaled"
) -> SymbolicChain:
    r"""The exact expected per-mode loss of an SD scalar chain as a sympy expression.

    Same factorised form as :func:`expected_chain`; $\kappa$ is kept as a symbol for
    ``scaling="stable"`` (substitute $1/\sqrt L$) and is 1 for ``"plain"``.

    Examples
    --------
    >>> ch = expected_chain_symbolic(1)
    >>> ch.loss
    d*(b_1**2*p_1 + 2*b_1*p_1 + 1)/2 - s*(b_1*p_1 + 1)
    """
    L = _check_depth(L)
    conv = _mask(mask)
    b = sp.symbols(f"b_1:{L + 1}", real=True)
    p = sp.symbols(f"p_1:{L + 1}", positive=True)
    s, d = sp.symbols("s d", real=True)
    if scaling == "plain":
        kappa: sp.Expr = sp.Integer(1)
    elif scaling == "stable":
        kappa = sp.Symbol("kappa", positive=True)
    else:
        raise StochasticDepthError(
            f"scaling = {scaling!r} is not a residual scaling; expected 'plain' or 'stable'",
            key="scaling",
        )
    mean = sp.Integer(1)
    second = sp.Integer(1)
    for bl, pl in zip(b, p, strict=True):
        mu = pl if conv.name == "unscaled" else sp.Integer(1)
        nu = pl if conv.name == "unscaled" else 1 / pl
        mean *= 1 + kappa * mu * bl
        second *= 1 + 2 * kappa * mu * bl + kappa**2 * nu * bl**2
    loss = -s * mean + d * second / 2
    return SymbolicChain(loss, mean, second, tuple(b), tuple(p), s, d, kappa)


# ----------------------------------------------------------------------------------------
# Dynamics
# ----------------------------------------------------------------------------------------


def _chain_settings(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    allowed = {"s", "d", "scaling", "mask", "a", "c"}
    unknown = set(kwargs) - allowed
    if unknown:
        raise StochasticDepthError(
            f"unknown chain setting(s) {sorted(unknown)}; expected some of {sorted(allowed)}",
            key=sorted(unknown)[0],
        )
    return dict(kwargs)


def expected_sd_flow(
    b0: np.ndarray,
    p: np.ndarray,
    t: np.ndarray,
    *,
    rtol: float = 1e-10,
    atol: float = 1e-12,
    **chain: Any,
) -> Trajectory:
    r"""Gradient flow on the exact expected SD loss, $\tau\dot b=-\nabla_b\mathbb E[\mathcal L]$.

    The small-learning-rate limit of SD training with masks redrawn every step: the
    update averaged over one step's mask is exactly $-\mathrm{lr}\,\nabla\mathbb E[\mathcal L]$
    (:func:`expected_sd_gd`), and its Euler limit is this ODE ($\tau=1$, $t=\mathrm{lr}\times$
    step). The expected loss and gradient come from :func:`expected_chain`.

    Parameters
    ----------
    b0
        ``(L,)`` or ``(L, M)`` initial residual scalars.
    p
        ``(L,)`` survival probabilities.
    t
        Increasing times (in units of $\tau$) at which to record.
    **chain
        ``s``, ``d``, ``scaling``, ``mask``, ``a``, ``c`` as for :func:`expected_chain`.

    Returns
    -------
    Trajectory
        ``loss`` is the expected loss; series ``"b"`` ``(T, L, M)``, ``"mean_transfer"``
        $\mathbb E f$ ``(T, M)`` and ``"average_loss"`` ``(T,)``.
    """
    chain = _chain_settings(chain)
    b0 = np.asarray(b0, dtype=float)
    shape = b0.shape
    t = np.asarray(t, dtype=float)
    if t.ndim != 1 or t.size == 0 or np.any(np.diff(t) <= 0) or t[0] < 0:
        raise StochasticDepthError("t must be non-negative and strictly increasing times", key="t")

    def rhs(_: float, y: np.ndarray) -> np.ndarray:
        return -expected_chain(y.reshape(shape), p, **chain).grad.ravel()

    sol = solve_ivp(
        rhs, (0.0, float(t[-1])), b0.ravel(), t_eval=t, rtol=rtol, atol=atol, method="DOP853"
    )
    if not sol.success:  # pragma: no cover - depends on the integrator
        raise StochasticDepthError(f"the ODE solver failed: {sol.message}", key="t")
    bs = sol.y.T.reshape((len(t), *shape))
    return _record(t, bs, p, chain, method="expected gradient flow")


def _record(
    t: np.ndarray, bs: np.ndarray, p: np.ndarray, chain: Mapping[str, Any], *, method: str
) -> Trajectory:
    ex = [expected_chain(bk, p, **chain) for bk in bs]
    b3 = bs.reshape(len(t), bs.shape[1], -1)
    return Trajectory(
        t=t,
        loss=np.array([e.loss for e in ex]),
        series={
            "b": b3,
            "mean_transfer": np.array([e.mean for e in ex]),
            "average_loss": np.array([e.average_loss for e in ex]),
        },
        meta={
            "method": method,
            "p": np.asarray(p, dtype=float).tolist(),
            **{
                k: (np.asarray(v).tolist() if not isinstance(v, str) else v)
                for k, v in chain.items()
            },
        },
    )


def expected_sd_gd(
    b0: np.ndarray, p: np.ndarray, *, lr: float, steps: int, record_every: int = 1, **chain: Any
) -> Trajectory:
    r"""The expected GD map $b\mapsto b-\mathrm{lr}\,\nabla_b\mathbb E[\mathcal L](b)$, iterated.

    One SD step from $b$ with a fresh mask has conditional mean exactly this map
    (the gradient is linear in the masked loss). Iterating it is the deterministic
    reference for the mean of many simulations (:func:`simulate_sd_gd`); the two differ
    only through the step-to-step fluctuations, at $O(\mathrm{lr})$.
    """
    chain = _chain_settings(chain)
    lr, steps, record_every = _check_gd(lr, steps, record_every)
    b = np.asarray(b0, dtype=float).copy()
    recs, ts = [b.copy()], [0.0]
    for k in range(1, steps + 1):
        b = b - lr * expected_chain(b, p, **chain).grad
        if k % record_every == 0:
            recs.append(b.copy())
            ts.append(k * lr)
    return _record(np.array(ts), np.array(recs), p, chain, method="expected GD map")


def _check_gd(lr: float, steps: int, record_every: int) -> tuple[float, int, int]:
    if not (np.isfinite(lr) and lr > 0):
        raise StochasticDepthError(f"lr = {lr!r} is not a positive learning rate", key="lr")
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
        raise StochasticDepthError(f"steps = {steps!r}; expected a positive integer", key="steps")
    if not isinstance(record_every, (int, np.integer)) or record_every < 1:
        raise StochasticDepthError(
            f"record_every = {record_every!r}; expected a positive integer", key="record_every"
        )
    return float(lr), int(steps), int(record_every)


def simulate_sd_gd(
    b0: np.ndarray,
    p: np.ndarray,
    *,
    lr: float,
    steps: int,
    runs: int,
    seed: int = 0,
    record_every: int = 1,
    **chain: Any,
) -> Trajectory:
    r"""Monte Carlo SD training of scalar chains: a fresh mask every step, ``runs`` copies.

    Each step draws $\delta_l\sim\mathrm{Bernoulli}(p_l)$ (shared by the modes of a run)
    and applies $b\leftarrow b-\mathrm{lr}\,\nabla_b\mathcal L(\delta)$ with
    $\mathcal L(\delta)=\sum_\alpha -s_\alpha f_\alpha(\delta)+\frac12d_\alpha f_\alpha(\delta)^2$.

    Returns
    -------
    Trajectory
        ``loss`` ``(T, runs)``: the *exact expected* loss at each run's current weights;
        series ``"b"`` ``(T, runs, L, M)``.
    """
    chain = _chain_settings(chain)
    lr, steps, record_every = _check_gd(lr, steps, record_every)
    if not isinstance(runs, (int, np.integer)) or runs < 1:
        raise StochasticDepthError(f"runs = {runs!r}; expected a positive integer", key="runs")
    b0 = np.asarray(b0, dtype=float)
    B0 = b0.reshape(b0.shape[0], -1)
    L, M = B0.shape
    _, pc, conv, s_, d_, ca, _ = _chain_inputs(
        B0,
        p,
        chain.get("mask", "unscaled"),
        chain.get("s"),
        chain.get("d", 1.0),
        chain.get("a", 1.0),
        chain.get("c", 1.0),
    )
    if chain.get("s") is None:
        raise StochasticDepthError("simulate_sd_gd needs s", key="s")
    kappa = chain_scale(chain.get("scaling", "plain"), L)
    rng = np.random.default_rng(seed)
    B = np.broadcast_to(B0, (runs, L, M)).copy()
    recs, ts = [B.copy()], [0.0]
    for k in range(1, steps + 1):
        delta = (rng.random((runs, L)) < pc).astype(float)
        gate = conv.gate_value(delta, pc)[:, :, None]
        h = 1.0 + kappa * gate * B
        f = ca * np.prod(h, axis=1)  # (runs, M)
        ones = np.ones((runs, 1, M))
        prefix = np.cumprod(np.concatenate([ones, h[:, :-1]], axis=1), axis=1)
        suffix = np.cumprod(np.concatenate([ones, h[:, ::-1][:, :-1]], axis=1), axis=1)[:, ::-1]
        df = ca * prefix * suffix * kappa * gate
        B = B - lr * (-s_ + d_ * f)[:, None, :] * df
        if k % record_every == 0:
            recs.append(B.copy())
            ts.append(k * lr)
    bs = np.array(recs)  # (T, runs, L, M)
    loss = np.array([[expected_chain(bk, pc, **chain).loss for bk in row] for row in bs])
    return Trajectory(
        t=np.array(ts),
        loss=loss,
        series={"b": bs},
        meta={
            "method": "SD gradient descent (Monte Carlo)",
            "runs": int(runs),
            "seed": int(seed),
            "p": pc.tolist(),
        },
    )
