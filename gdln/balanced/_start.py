r"""λ-balanced starts with a chosen alignment to the task.

For each pathway, with $\tilde\Sigma = USV^\top$ its whitened target (full SVD, singular
values descending), the start is

$$W_1 = R\,\Sigma_1\,O_{\rm in}^\top V_r^\top,\qquad W_2 = O_{\rm out}\,\Sigma_2\,R^\top,$$

with $R$ a random orthogonal hidden frame, $\Sigma_1$, $\Sigma_2$ diagonal with
$\sigma_{2,i}^2 - \sigma_{1,i}^2 = \lambda$ for every hidden direction $i$ (so
$W_2^\top W_2 - W_1W_1^\top = R(\Sigma_2^\top\Sigma_2 - \Sigma_1\Sigma_1^\top)R^\top =
\lambda I$, the λ-balanced condition of Dominé et al. 2025) and the smaller of the two
equal to ``scale``.
The frames $O_{\rm in}$, $O_{\rm out}$ interpolate between the task's ($V$, $U$) and random
ones: the orthogonal polar factor of $a\,T + (1-a)\,O$ for alignment $a$. At $a = 1$ the
start is decoupled, $W_2W_1 = U\Sigma_2\Sigma_1V^\top$ (Eq. 9 of Saxe et al. 2022).

Every hidden direction needs $\sigma_2 > 0$ when $\lambda > 0$ and $\sigma_1 > 0$ when
$\lambda < 0$, so $\lambda > 0$ needs $N_h \le |y|$ and $\lambda < 0$ needs $N_h \le r$
(the rank of the pathway's inputs): a λ-balanced start with $\lambda \ne 0$ exists only
for a hidden layer no wider than $\max(\text{in}, \text{out})$, and only on the side the
sign of $\lambda$ picks.
"""

from __future__ import annotations

import math
from collections.abc import Hashable

import numpy as np

from .._edge import Edge
from .._errors import GdlnError
from .._runtime._blas import one_blas_thread
from ..task._problem import Problem
from ._errors import BalancedSpecError
from ._pathways import Pathway, balanced_pathways

__all__ = ["balanced_weights"]


@one_blas_thread()
def balanced_weights(
    problem: Problem,
    *,
    lam: float,
    scale: float = 0.1,
    alignment: float = 0.0,
    seed: int = 0,
) -> dict[Edge, np.ndarray]:
    r"""Draw a λ-balanced start for every pathway of a problem.

    Parameters
    ----------
    problem
        A problem whose pathways :func:`~gdln.balanced.balanced_pathways` accepts.
    lam
        $\lambda$ of $W_2^\top W_2 - W_1W_1^\top = \lambda I$ (the same for every pathway).
    scale
        The smaller singular value of each hidden direction: $\sigma_1 = $ ``scale`` and
        $\sigma_2 = \sqrt{\mathrm{scale}^2 + \lambda}$ for $\lambda \ge 0$;
        $\sigma_2 = $ ``scale`` and $\sigma_1 = \sqrt{\mathrm{scale}^2 - \lambda}$ for
        $\lambda < 0$ (directions beyond the input or output size hold 0).
    alignment
        In $[0, 1]$: 1 aligns the input and output frames with the task's singular vectors
        (a decoupled start), 0 draws them at random (module docstring).
    seed
        Seed of ``numpy.random.default_rng``; pathways draw one after another.

    Returns
    -------
    dict of Edge to numpy.ndarray
        Every edge of the graph -> ``(|target|, |source|)``: the pathways' $W_1$, $W_2$;
        zero on edges of no pathway (a fixed edge keeps $c\,I$). Keys are
        ``(source, target)``, as :func:`gdln.simulate` takes them.

    Raises
    ------
    BalancedSpecError
        The problem is outside the λ-balanced solution, or a pathway's hidden layer is
        wider than the side $\lambda$ needs ($N_h \le |y|$ for $\lambda > 0$,
        $N_h \le r$ for $\lambda < 0$).
    GdlnError
        ``lam``, ``scale`` or ``alignment`` is not a finite number in range.

    References
    ----------
    Dominé et al. (2025), "From lazy to rich" (λ-balanced weights);
    Saxe, Sodhani & Lewallen (2022), Eq. (9) (decoupled weights).

    Examples
    --------
    >>> import gdln, numpy as np
    >>> problem = gdln.load("graphs/context.yaml", params={"pathways": 1, "hidden": 2})
    >>> w = gdln.balanced_weights(problem, lam=-0.5, scale=0.2, seed=1)
    >>> w1, w2 = w[("x", "h0")], w[("h0", "y")]
    >>> bool(np.allclose(w2.T @ w2 - w1 @ w1.T, -0.5 * np.eye(2)))
    True
    """
    for name, value, low in (("lam", lam, -math.inf), ("scale", scale, 0.0)):
        if not _finite(value) or value < low:
            raise GdlnError(f"{name}: expected a finite number >= {low}, got {value!r}")
    if not _finite(alignment) or not 0.0 <= alignment <= 1.0:
        raise GdlnError(f"alignment: expected a number in [0, 1], got {alignment!r}")
    rng = np.random.default_rng(seed)
    graph = problem.graph
    weights: dict[Edge, np.ndarray] = {}
    for e in graph.edges:
        shape = (int(graph.nodes[e[1]]["size"]), int(graph.nodes[e[0]]["size"]))
        fixed = graph.edges[e].get("fixed")
        weights[e] = float(fixed) * np.eye(*shape) if fixed is not None else np.zeros(shape)
    for pathway in balanced_pathways(problem):
        w1, w2 = _pathway_start(problem, pathway, float(lam), float(scale), alignment, rng)
        weights[pathway.first], weights[pathway.second] = w1, w2
    return weights


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _pathway_start(
    problem: Problem,
    pathway: Pathway,
    lam: float,
    scale: float,
    alignment: float,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    r"""$(W_1, W_2)$ of one pathway (module docstring)."""
    _, hidden, out = pathway.sizes
    r = pathway.rank
    side: tuple[str, int, Hashable] | None = None
    if lam > 0 and hidden > out:
        side = ("output", out, pathway.path.target)
    elif lam < 0 and hidden > r:
        side = ("input span", r, pathway.path.source)
    if side is not None:
        raise BalancedSpecError(
            f"{problem.source}: pathway {pathway.name}: hidden width {hidden} exceeds the "
            f"{side[0]} size {side[1]} of {side[2]}; W2ᵀW2 - W1W1ᵀ = λI with λ = {lam:g} "
            f"needs N_h <= {'|y|' if lam > 0 else 'r'} (λ != 0 needs N_h <= max(in, out))"
        )
    u, _, vt = np.linalg.svd(pathway.target, full_matrices=True)
    o_in = _frame(vt.T, alignment, rng)
    o_out = _frame(u, alignment, rng)
    frame = _random_orthogonal(hidden, rng)
    s1 = np.zeros(hidden)
    s2 = np.zeros(hidden)
    if lam == 0:  # a direction carries a mode only where both layers can
        k = min(r, out, hidden)
        s1[:k] = s2[:k] = scale
    elif lam > 0:  # hidden <= out: every direction has sigma_2 > 0
        s1[: min(r, hidden)] = scale
        s2[:] = np.sqrt(s1**2 + lam)
    else:  # hidden <= r: every direction has sigma_1 > 0
        s2[: min(out, hidden)] = scale
        s1[:] = np.sqrt(s2**2 - lam)
    sigma1 = np.zeros((hidden, r))
    k1 = min(hidden, r)
    sigma1[np.arange(k1), np.arange(k1)] = s1[:k1]
    sigma2 = np.zeros((out, hidden))
    k2 = min(hidden, out)
    sigma2[np.arange(k2), np.arange(k2)] = s2[:k2]
    w1 = frame @ sigma1 @ o_in.T @ pathway.basis.T
    w2 = o_out @ sigma2 @ frame.T
    return w1, w2


def _random_orthogonal(n: int, rng: np.random.Generator) -> np.ndarray:
    """A Haar-random orthogonal ``(n, n)`` matrix (QR of a Gaussian, signs fixed)."""
    q, r = np.linalg.qr(rng.standard_normal((n, n)))
    return q * np.where(np.diag(r) < 0, -1.0, 1.0)


def _frame(task: np.ndarray, alignment: float, rng: np.random.Generator) -> np.ndarray:
    r"""The orthogonal polar factor of $a\,T + (1-a)\,O$, $O$ random (module docstring)."""
    other = _random_orthogonal(task.shape[0], rng)
    if alignment == 1.0:
        return task
    u, _, vt = np.linalg.svd(alignment * task + (1.0 - alignment) * other)
    return u @ vt
