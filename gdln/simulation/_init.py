r"""Initial weights: the random schemes of :data:`~gdln.simulation.INITS`, or given ones.

Repetition ``r`` draws its weights from ``numpy.random.default_rng(seeds[r])`` alone, edge
by edge in the plan's order, so a batched run starts where the per-seed runs start.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import networkx as nx
import numpy as np

from .._edge import Edge
from .._runtime._blas import blas_threads
from ..settings._declared import Settings
from ..settings._door import door
from ._errors import SimulationSpecError
from ._plan import Plan, edge_order, node_sizes
from ._seeds import seed_list

__all__ = ["DRAWS", "given_weights", "initial_weights", "start_weights"]


def _draw_xavier(rng: np.random.Generator, rows: int, cols: int, scale: float) -> np.ndarray:
    r"""Xavier (Glorot) normal entries times $\sigma_0$.

    Standard deviation $\sigma_0\sqrt{2/(\mathrm{fan_{in}}+\mathrm{fan_{out}})}$.
    """
    return scale * rng.normal(0.0, math.sqrt(2.0 / (rows + cols)), size=(rows, cols))


def _haar_columns(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    """``k`` orthonormal columns in $R^n$, Haar distributed (QR with the sign fix)."""
    with blas_threads(n):
        q, r = np.linalg.qr(rng.normal(size=(n, k)))
    return q * np.where(np.diag(r) < 0, -1.0, 1.0)


def _draw_singular(rng: np.random.Generator, rows: int, cols: int, scale: float) -> np.ndarray:
    r"""A random matrix whose $\min(\text{rows}, \text{cols})$ singular values all equal $\sigma_0$.

    $W = \sigma_0 U V^\top$ with Haar-random orthonormal columns (Sec. 4.3 of Saxe et al.
    2022 varies this scale).
    """
    k = min(rows, cols)
    return scale * _haar_columns(rng, rows, k) @ _haar_columns(rng, cols, k).T


def _draw_orthogonal(rng: np.random.Generator, rows: int, cols: int, gain: float) -> np.ndarray:
    r"""A random (semi-)orthogonal matrix times the gain $g$ (``init``).

    $W^\top W = g^2 I$, or $W W^\top = g^2 I$ when the matrix is wide.

    The algorithm of ``torch.nn.init.orthogonal_``, the authors' default for the full
    network: QR of a standard normal ``(max, min)`` matrix, columns' signs fixed by
    $\operatorname{sign}\operatorname{diag} R$ (so Haar distributed), transposed when
    ``rows < cols``.
    """
    wide = rows < cols
    with blas_threads(max(rows, cols)):
        q, r = np.linalg.qr(rng.normal(size=(cols, rows) if wide else (rows, cols)))
    q = q * np.where(np.diag(r) < 0, -1.0, 1.0)
    return gain * (q.T if wide else q)


DRAWS: Mapping[str, Callable[[np.random.Generator, int, int, float], np.ndarray] | None] = {
    "xavier": _draw_xavier,
    "singular": _draw_singular,
    "orthogonal": _draw_orthogonal,
    "given": None,
}
"""The schemes of :data:`~gdln.simulation.INITS` by the same names; ``None``: given weights."""


@door
def initial_weights(
    graph: nx.DiGraph,
    *,
    init_scheme: str | None = None,
    init_scale: float | None = None,
    seeds: int | Sequence[int] | None = None,
    seed: int | None = None,
) -> dict[Edge, np.ndarray]:
    r"""Draw the random initial weights that :func:`gdln.simulate` would use.

    Parameters
    ----------
    graph
        The architecture (node attribute ``size``).
    init_scheme
        A random scheme of :data:`~gdln.simulation.INITS`: ``"xavier"`` (the default),
        ``"singular"`` or ``"orthogonal"``.
    init_scale
        The initial scale $\sigma_0$ (for ``"orthogonal"``: the gain; default 0.2).
    seeds, seed
        As in :func:`gdln.simulate` (default 10 and 0).

    Returns
    -------
    dict
        Edge ``(source, target)`` -> float64 array ``(S, |target|, |source|)``; repetition
        ``r`` is drawn from ``numpy.random.default_rng(seeds[r])`` only.

    Raises
    ------
    SimulationSpecError
        ``init_scheme`` is not a random scheme, or ``init_scale`` or ``seeds`` is
        malformed.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Sec. 3: small random initial weights of scale
    $\sigma_0$, the regime in which the reduced dynamics of Eq. (9) describe learning.
    """
    defaults = Settings()
    init_scheme = defaults.init_scheme if init_scheme is None else init_scheme
    draw = DRAWS.get(init_scheme)
    if draw is None:
        random = sorted(k for k, v in DRAWS.items() if v is not None)
        raise SimulationSpecError(f"init_scheme: expected one of {random}, got {init_scheme!r}")
    scale = defaults.init_scale if init_scale is None else init_scale
    if not (isinstance(scale, (int, float)) and math.isfinite(scale) and scale >= 0):
        raise SimulationSpecError(
            f"init_scale: expected a finite number >= 0 (the initial scale sigma0), got {scale!r}"
        )
    sizes = node_sizes(graph)
    edges = edge_order(graph)
    out: dict[Edge, list[np.ndarray]] = {e: [] for e in edges}
    repetitions = defaults.seeds if seeds is None else seeds
    for s in seed_list(repetitions, defaults.seed if seed is None else seed):
        rng = np.random.default_rng(s)
        for e in edges:
            out[e].append(draw(rng, sizes[e[1]], sizes[e[0]], float(scale)))
    return {e: np.stack(v) for e, v in out.items()}


def start_weights(
    net: Plan,
    *,
    init_scheme: str,
    init: float,
    weights: Mapping[Edge, Any] | None,
    seeds: list[int],
    fixed: Mapping[int, float],
) -> list[np.ndarray]:
    r"""The weights of step 0, one ``(S, |t|, |s|)`` array per edge in the plan's order.

    Drawn by ``init_scheme`` at scale ``init``, or ``weights`` for ``"given"``; a fixed
    edge (index -> $c$ in ``fixed``) holds $W_e = c\,I$ whatever the scheme.
    """
    if DRAWS[init_scheme] is None:
        w0 = given_weights(net, weights, len(seeds))
    else:
        if weights is not None:
            raise SimulationSpecError(
                f"weights: only used with init_scheme='given', got init_scheme={init_scheme!r}"
            )
        drawn = initial_weights(net.graph, init_scheme=init_scheme, init_scale=init, seeds=seeds)
        w0 = [drawn[e] for e in net.edges]
    for i, c in fixed.items():  # W_e = c I, never trained
        w0[i] = np.broadcast_to(c * np.eye(net.sizes[net.edges[i][0]]), w0[i].shape)
    return w0


def given_weights(net: Plan, weights: Mapping[Edge, Any] | None, n_seeds: int) -> list[np.ndarray]:
    """The weights of ``init_scheme="given"``, checked, one ``(S, |t|, |s|)`` array per edge."""
    if weights is None:
        raise SimulationSpecError(
            "weights: init_scheme='given' needs weights {edge: array}, got None"
        )
    unknown = [e for e in weights if tuple(e) not in net.edges]
    if unknown:
        raise SimulationSpecError(
            f"weights: {unknown[0]!r} is not an edge of the graph; "
            f"expected one of {list(net.edges)}"
        )
    out = []
    for e in net.edges:
        if e not in weights:
            raise SimulationSpecError(
                f"weights: missing edge {e!r}; init_scheme='given' needs every edge"
            )
        a = np.asarray(weights[e], dtype=np.float64)
        shape = (net.sizes[e[1]], net.sizes[e[0]])
        if a.shape == shape:
            a = np.broadcast_to(a, (n_seeds, *shape))
        elif a.shape != (n_seeds, *shape):
            raise SimulationSpecError(
                f"weights[{e!r}]: expected shape {shape} or {(n_seeds, *shape)}, got {a.shape}"
            )
        if not np.all(np.isfinite(a)):
            raise SimulationSpecError(f"weights[{e!r}]: expected finite values")
        out.append(a)
    return out
