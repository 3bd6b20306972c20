r"""The datasets a graph file can name with ``builtin:``, chosen through one table.

``{builtin: hierarchy}`` is the routing figures' base dataset (Fig. 4c of Saxe et al.
2022); ``{builtin: whitened, size: n}`` has whitened inputs and a symmetric target map, so
that the input and output bases coincide ($U = V$).
"""

from __future__ import annotations

from collections.abc import Callable

import sympy as sp

from ._task import Dataset

__all__ = ["BUILTIN_DATASETS", "HIERARCHY_TARGETS", "hierarchy_dataset", "whitened_dataset"]

# The targets of Fig. 4c of Saxe et al. 2022: four items, seven hierarchical features.
HIERARCHY_TARGETS = (
    (6, 4, 0, 3, 0, 0, 0),
    (6, 4, 0, 0, 3, 0, 0),
    (6, 0, 4, 0, 0, 3, 0),
    (6, 0, 4, 0, 0, 0, 3),
)


def hierarchy_dataset(name: str = "hierarchy") -> Dataset:
    """The routing figures' base dataset (Fig. 4c): one-hot items, hierarchical targets."""
    x = sp.ImmutableMatrix(sp.eye(4))
    y = sp.ImmutableMatrix(HIERARCHY_TARGETS)
    return Dataset(name=name, fields={"x": 4, "y": 7}, examples={"x": x, "y": y})


def whitened_dataset(name: str = "whitened", *, size: int) -> Dataset:
    r"""Whitened one-hot inputs and a symmetric target map, so that $U = V$.

    ``size`` examples: $x_k = e_k$ ($\Sigma^x = I/n$) and $y = Ax$ with
    $A=\mathrm{diag}(1, \frac{n-1}{n}, \dots, \frac1n)$, so $\Sigma^{yx} = A/n$. The input
    and output bases coincide, as a residual network whose input and output are joined by
    identity skips needs (``graphs/resnet_sd.yaml``).
    """
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"size must be a positive integer, got {size!r}")
    x = sp.ImmutableMatrix(sp.eye(size))
    y = sp.ImmutableMatrix(sp.diag(*[sp.Rational(size - k, size) for k in range(size)]))
    return Dataset(name=name, fields={"x": size, "y": size}, examples={"x": x, "y": y})


BUILTIN_DATASETS: dict[str, Callable[..., Dataset]] = {
    "hierarchy": hierarchy_dataset,
    "whitened": whitened_dataset,
}
"""Builtin dataset name -> a function of the dataset's name and its settings."""
