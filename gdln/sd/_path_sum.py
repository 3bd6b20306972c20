r"""Independent random gates on explicit paths: the general path form of stochastic depth.

With independent Bernoulli gates on the gated edges, every expectation of a product of
path gates factorises over edges. :func:`expected_path_loss` averages the per-mode loss of
the decoupled reduction of Saxe et al. (2022) over such gates path pair by path pair; it is
the reference the $O(L)$ chain form (:func:`gdln.sd.expected_chain`) is checked against.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import sympy as sp

from ._checks import StochasticDepthError, check_probabilities
from ._masks import mask_convention

__all__ = ["expected_gate_product", "expected_path_loss"]


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

    Parameters
    ----------
    edges_j, edges_p
        The edge ids of the two paths.
    survival
        Gated edge id -> survival probability $p_e$ (number or sympy expression).
    mask
        ``"unscaled"`` or ``"inverted"`` (see :data:`MASK_CONVENTIONS`).

    Returns
    -------
    float or sympy.Expr
        $\mathbb E[g_jg_p]$.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eq. (6) (the gate product inside $\Sigma^x(j,p)$);
    Hayou & Ayed (2021), "Regularization in ResNet with Stochastic Depth", Eq. (1)
    (independent Bernoulli gates).

    Examples
    --------
    >>> expected_gate_product(["e1", "e2"], ["e2", "e3"], {"e1": 0.5, "e2": 0.5, "e3": 0.5})
    0.125
    >>> q = sp.Symbol("q", positive=True)
    >>> expected_gate_product(["e1", "e2"], ["e2"], {"e1": q, "e2": q / 2})
    q**2/2
    """
    conv = mask_convention(mask)
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
            check_probabilities(np.array([pe]), key=f"survival[{e!r}]", positive=conv.inverted)
        if not conv.inverted:
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
    mask
        ``"unscaled"`` or ``"inverted"`` (see :data:`MASK_CONVENTIONS`).

    Returns
    -------
    float
        $\mathbb E[\mathcal L]$ for one mode.

    Raises
    ------
    StochasticDepthError
        ``s`` or ``d`` does not match the number of paths.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eqs. (5)-(6) and (10); Hayou & Ayed (2021),
    "Regularization in ResNet with Stochastic Depth", Eq. (1).
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
