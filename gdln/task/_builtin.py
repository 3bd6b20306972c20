r"""The datasets a graph file can name with ``builtin:``, chosen through one table.

``{builtin: hierarchy}`` is the routing figures' base dataset (Fig. 4c of Saxe et al.
2022); ``{builtin: whitened, size: n}`` has whitened inputs and a symmetric target map, so
that the input and output bases coincide ($U = V$).

Each entry of :data:`BUILTIN_DATASETS` also says how many exact values a dataset of given
settings holds, so that a reader can bound its cost before building it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sympy as sp

from ._task import Dataset

__all__ = [
    "BUILTIN_DATASETS",
    "HIERARCHY_TARGETS",
    "BuiltinDataset",
    "hierarchy_dataset",
    "whitened_dataset",
]

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
    _check_size(size)
    x = sp.ImmutableMatrix(sp.eye(size))
    y = sp.ImmutableMatrix(sp.diag(*[sp.Rational(size - k, size) for k in range(size)]))
    return Dataset(name=name, fields={"x": size, "y": size}, examples={"x": x, "y": y})


def _check_size(size: Any) -> None:
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"size must be a positive integer, got {size!r}")


def _hierarchy_values() -> int:
    return 4 * 4 + 4 * len(HIERARCHY_TARGETS[0])


def _whitened_values(*, size: int) -> int:
    _check_size(size)
    return 2 * size * size


@dataclass(frozen=True)
class BuiltinDataset:
    """A builtin dataset: how to build it and how many exact values it holds.

    Parameters
    ----------
    build
        A function of the dataset's name and its settings (keywords) returning the
        :class:`~gdln.Dataset`.
    values
        A function of the same settings returning the number of exact values the dataset
        holds (its example matrices' cells), without building it; it raises
        ``ValueError`` or ``TypeError`` for settings that ``build`` refuses.
    """

    build: Callable[..., Dataset]
    values: Callable[..., int]

    def __call__(self, name: str, **settings: Any) -> Dataset:
        """The dataset called ``name`` with these settings (``build``)."""
        return self.build(name, **settings)


BUILTIN_DATASETS: dict[str, BuiltinDataset] = {
    "hierarchy": BuiltinDataset(hierarchy_dataset, _hierarchy_values),
    "whitened": BuiltinDataset(whitened_dataset, _whitened_values),
}
"""Builtin dataset name -> how to build it from its name and settings, and its size."""
