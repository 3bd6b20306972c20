r"""How the NTK of a deep gated network spreads with depth at fixed width (DGN Thm. 2.2).

Lakshminarayanan & Singh, *Deep Gated Networks*, Thm. 2.2 bounds the variance of $K_0$
at initialisation by relative terms $O(\max\{d^2/w, d^3/w^2\})$: at fixed width the
kernel of a deeper network is more random. :func:`gram_variance_by_depth` measures it by
Monte Carlo with the samplers of :mod:`gdln.kernels`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ._bounds import check_count, check_held, check_seed
from ._dgn_theory import _CHUNK, draw_value_weights, value_ntk_samples
from ._errors import DGNSpecError

__all__ = ["VarianceByDepth", "gram_variance_by_depth"]


@dataclass(frozen=True)
class VarianceByDepth:
    r"""Spread of $K_0$ at fixed width across depths (Thm. 2.2 of DGN, variance part).

    ``rel_var_diag[k]`` is $\mathrm{Var}[K_0(s,s)]/\mathbb E[K_0(s,s)]^2$ at
    ``depths[k]`` (weights and FRG gates both redrawn), ``rel_var_off`` the same for
    $K_0(s,s')$; ``*_se`` are their standard errors (delta method on the sample
    variance, using the fourth central moment).

    Parameters
    ----------
    depths
        The depths $d$ measured.
    width
        The fixed width $w$.
    rel_var_diag, rel_var_diag_se
        ``(len(depths),)`` relative variance of a diagonal entry and its standard error.
    rel_var_off, rel_var_off_se
        The same for an off-diagonal entry.

    Raises
    ------
    DGNSpecError
        An array does not have one entry per depth.

    References
    ----------
    Lakshminarayanan & Singh, *Deep Gated Networks*, Thm. 2.2.
    """

    depths: tuple[int, ...]
    width: int
    rel_var_diag: np.ndarray
    rel_var_diag_se: np.ndarray
    rel_var_off: np.ndarray
    rel_var_off_se: np.ndarray

    def __post_init__(self) -> None:
        k = len(self.depths)
        for a in (self.rel_var_diag, self.rel_var_diag_se, self.rel_var_off, self.rel_var_off_se):
            if np.shape(a) != (k,):
                raise DGNSpecError(f"VarianceByDepth: arrays must have shape ({k},)")


def _rel_var(samples: np.ndarray) -> tuple[float, float]:
    r = len(samples)
    mu = samples.mean()
    c = samples - mu
    m2 = float((c**2).mean())
    m4 = float((c**4).mean())
    var = m2 * r / (r - 1)
    se_var = math.sqrt(max(m4 - m2 * m2, 0.0) / r)
    return var / mu**2, se_var / mu**2


def gram_variance_by_depth(
    width: int,
    depths: Sequence[int],
    *,
    p: float = 0.5,
    n_samples: int = 400,
    seed: int = 0,
) -> VarianceByDepth:
    r"""Relative variance of $K_0$ entries of DGN-FRG vs depth at fixed width.

    Inputs are two identical scalars $x=1$ (Experiment 1 of DGN), $\sigma=1/\sqrt{pw}$, so
    $\mathbb E[K_0]/d$ is Eq. (3). Thm. 2.2 of DGN bounds the variance by
    $O(\max\{d^2/w, d^3/w^2\})$ relative terms: it grows with depth at fixed width.

    Parameters
    ----------
    width
        Hidden width $w$.
    depths
        Depths $d$ to measure (each at least 1).
    p
        Gate probability of the FRG gates.
    n_samples
        Draws of weights and gates per depth.
    seed
        Seed of the draws.

    Returns
    -------
    VarianceByDepth
        Relative variances of a diagonal and an off-diagonal entry of $K_0$, with their
        standard errors.

    Raises
    ------
    DGNSpecError
        A depth is not a positive int.

    References
    ----------
    Lakshminarayanan & Singh, *Deep Gated Networks*, Thm. 2.2, Eq. (3) and Experiment 1.
    """
    width, n_samples = check_count("width", width), check_count("n_samples", n_samples, least=2)
    deepest = max((check_count("depths", d) for d in depths), default=1)
    check_held(
        f"{n_samples} samples of width {width}, depth up to {deepest}",
        4 * n_samples + 3 * _CHUNK * width * width * deepest,
    )
    sigma = 1.0 / math.sqrt(p * width)
    x = np.ones((2, 1))
    gen = torch.Generator(device="cpu").manual_seed(check_seed(seed))
    diag, diag_se, off, off_se = [], [], [], []
    for d in depths:
        if d < 1:
            raise DGNSpecError(f"depths: got {d!r}, expected integers >= 1")
        parts = []
        for start in range(0, n_samples, _CHUNK):
            r = min(_CHUNK, n_samples - start)
            gates = [
                (
                    torch.rand(r, 2, width, generator=gen, dtype=torch.float64, device=gen.device)
                    < p
                ).double()
                for _ in range(d - 1)
            ]
            weights = draw_value_weights(
                [1, *([width] * (d - 1)), 1],
                sigma=sigma,
                n_samples=r,
                generator=gen,
                device="cpu",
            )
            k = value_ntk_samples(x, gates, weights)
            parts.append(np.stack([k[:, 0, 0], k[:, 0, 1]], axis=1))
        ks = np.concatenate(parts)
        a, b = _rel_var(ks[:, 0])
        c, e = _rel_var(ks[:, 1])
        diag.append(a)
        diag_se.append(b)
        off.append(c)
        off_se.append(e)
    return VarianceByDepth(
        tuple(int(d) for d in depths),
        int(width),
        np.array(diag),
        np.array(diag_se),
        np.array(off),
        np.array(off_se),
    )
