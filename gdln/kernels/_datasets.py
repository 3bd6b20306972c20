r"""The data sets of the kernel experiments (:data:`DATASETS`), reproducible under a seed.

Sklearn's bundled 8x8 digits stand in for MNIST (Sec. 6 of Lakshminarayanan & Singh,
*Neural Path Features and Neural Path Kernel*); the synthetic sets are Experiments 1-2 of
Lakshminarayanan & Singh, *Deep Gated Networks*.
"""

from __future__ import annotations

import numpy as np
import torch

from ._bounds import check_count, check_held, check_seed
from ._errors import DGNSpecError
from ._names import DATASETS

__all__ = ["make_dataset"]


def _digits(name: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``n`` digits (all classes) or ``n/2`` fours and sevens, rows scaled to unit norm."""
    from sklearn.datasets import load_digits

    data = load_digits()
    images, labels = data.data / 16.0, data.target
    if name == "digits":
        if n > len(images):
            raise DGNSpecError(f"n: got {n}, expected at most {len(images)} digits")
        idx = rng.permutation(len(images))[:n]
        y = labels[idx].astype(np.int64)
    else:
        if n % 2 or n // 2 > min((labels == 4).sum(), (labels == 7).sum()):
            raise DGNSpecError(f"n: got {n}, expected an even number of at most 358 (179 sevens)")
        fours = rng.permutation(np.flatnonzero(labels == 4))[: n // 2]
        sevens = rng.permutation(np.flatnonzero(labels == 7))[: n // 2]
        idx = rng.permutation(np.concatenate([fours, sevens]))
        y = np.where(labels[idx] == 7, 1.0, -1.0)
    x = images[idx]
    return x / np.linalg.norm(x, axis=1, keepdims=True), y


def make_dataset(
    name: str, *, n: int, seed: int = 0, dtype: torch.dtype = torch.float64
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Inputs and targets for the kernel experiments, reproducible under ``seed``.

    ``"digits"``
        ``n`` images of sklearn's bundled 8x8 digits (the stand-in for MNIST), pixels
        scaled to $[0,1]$ then each row to unit norm; targets are class labels 0-9.
    ``"digits47"``
        "Binary" digits, 4 vs 7 (Sec. 6 of NPF/NPK), ``n/2`` of each; targets $-1$ (4) and
        $+1$ (7); inputs as for ``"digits"``.
    ``"identical"``
        Experiment 1 of DGN: $x_s=1\in\mathbb R$, $y_s\sim U[-1,1]$.
    ``"uniform2d"``
        Experiment 2 of DGN: $x_s\sim U([-1,1]^2)$, $y_s\sim U[-1,1]$.

    Parameters
    ----------
    name
        A key of :data:`DATASETS`.
    n
        Number of examples.
    seed
        Seed of the draw (of the examples chosen, or of the random values).
    dtype
        Floating-point type of the tensors.

    Returns
    -------
    (torch.Tensor, torch.Tensor)
        Inputs ``(n, d_in)`` and targets ``(n,)``.

    Raises
    ------
    DGNSpecError
        Unknown ``name``, ``n`` is not a positive count the dataset can supply (or holds
        more numbers than :class:`gdln.graphfile.Limits` ``batch_elements``), or ``seed``
        is not in ``[0, 2**63 - 1]``.

    References
    ----------
    Lakshminarayanan & Singh, *Neural Path Features and Neural Path Kernel*, Sec. 6
    (digits); Lakshminarayanan & Singh, *Deep Gated Networks*, Experiments 1-2.

    Examples
    --------
    >>> x, y = make_dataset("uniform2d", n=5)
    >>> tuple(x.shape), tuple(y.shape)
    ((5, 2), (5,))
    """
    if name not in DATASETS:
        raise DGNSpecError(f"dataset: got {name!r}, expected one of {', '.join(DATASETS)}")
    n = check_count("n", n)
    check_held(f"dataset {name} of n={n} examples", 3 * n)
    rng = np.random.default_rng(check_seed(seed))
    if name in ("digits", "digits47"):
        x, y = _digits(name, n, rng)
    elif name == "identical":
        x = np.ones((n, 1))
        y = rng.uniform(-1, 1, size=n)
    else:
        x = rng.uniform(-1, 1, size=(n, 2))
        y = rng.uniform(-1, 1, size=n)
    yt = torch.as_tensor(y) if y.dtype == np.int64 else torch.as_tensor(y, dtype=dtype)
    return torch.as_tensor(x, dtype=dtype), yt
