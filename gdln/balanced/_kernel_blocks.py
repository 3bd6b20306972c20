r"""A tangent kernel held as a sum of blocks of low rank, and its Frobenius products.

The kernel of a gated linear network on the rows that can be nonzero is a sum of terms,
one per group of edges into a node (:mod:`gdln.balanced._network_kernel`), each living
on the rows of the examples where those edges are on:

* a **general** term $(JJ^\top)\circ(HH^\top)$ on its rows, $J$ ``(rows, r)`` what the
  node passes to the outputs and $H$ ``(examples, p)`` what reaches it (row by row, the
  row's example); its factor is the row-wise Kronecker product $Z = J\odot H$, so the
  term is $ZZ^\top$ with $Z$ of ``r*p`` columns;
* an **output** term $\delta_{ij}\,(FF^\top)_{ab}$ of an output node of $k$ units, on
  the rows of its examples (every unit of each): the edges into an output node, whose
  Jacobian there is the identity.

The kernel itself is assembled from these in blocks of rows (:meth:`BlockKernel.dense`).
The kernel distance needs only $\langle K_0, K_t\rangle_F$ and the norms, and
$\langle\sum_g Z_gZ_g^\top, \sum_{g'} Z'_{g'}Z'^\top_{g'}\rangle_F =
\sum_{g,g'}\lVert Z_g^\top Z'_{g'}\rVert_F^2$, summed over the rows two terms share: with
terms of few columns this costs (rows $\times$ columns$^2$), not rows$^2$
(:meth:`BlockKernel.inner`). :meth:`BlockKernel.factored` says which way is cheaper.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "BLOCK_NUMBERS",
    "FACTOR_NUMBERS",
    "Block",
    "BlockKernel",
    "add_block",
    "row_blocks",
]

BLOCK_NUMBERS = 1 << 20
"""About how many numbers a block of rows of the kernel holds while it is added (8 MB)."""
FACTOR_NUMBERS = 1 << 19
"""About how many numbers the factors of the times taken together hold (4 MB)."""


def row_blocks(rows: int, side: int) -> Iterator[slice]:
    """Consecutive slices of ``range(rows)``, each about :data:`BLOCK_NUMBERS` / ``side``."""
    step = _block_rows(side)
    for start in range(0, rows, step):
        yield slice(start, min(rows, start + step))


def _block_rows(side: int) -> int:
    return max(1, BLOCK_NUMBERS // max(1, side))


def add_block(
    kernel: np.ndarray, positions: np.ndarray | None, block: np.ndarray, rows: slice
) -> None:
    """``kernel[positions[rows], positions] += block`` (``positions`` None: every row)."""
    if positions is None:
        kernel[rows] += block
    else:
        kernel[np.ix_(positions[rows], positions)] += block


def _whole_or(index: np.ndarray, size: int) -> Any:
    """``index``, or ``slice(None)`` where it is every row in order (no copy to gather)."""
    if len(index) == size and np.array_equal(index, np.arange(size)):
        return slice(None)
    return index


@dataclass(frozen=True, eq=False)
class Block:
    """Where one term of the kernel lives.

    ``positions``: its rows among the kernel's (None: every row), increasing; ``seen``:
    the examples of those rows, increasing; ``index``: each row's example as a position
    in ``seen``; ``units``: 0 for a general term, else the output node's ``k`` units (the
    rows are then ``seen`` x units, example by example); ``r``, ``p``: the columns of
    $J$ (or ``k``) and of $H$ (or $F$).
    """

    positions: np.ndarray | None
    seen: np.ndarray
    index: np.ndarray
    units: int
    r: int
    p: int

    @property
    def size(self) -> int:
        """Its number of rows."""
        return len(self.index)

    @property
    def columns(self) -> int:
        """The columns of its factor $Z$."""
        return self.r * self.p


# The values of one term at one time: (J (rows, r), H (seen, p)) for a general term,
# (None, F (seen, p)) for an output term.
Values = tuple[np.ndarray | None, np.ndarray]


class BlockKernel:
    """A kernel on ``rows`` rows as the sum of ``blocks`` (module docstring).

    Parameters
    ----------
    rows
        The side ``R`` of the kernel.
    blocks
        Where each term lives; the values passed to :meth:`dense` and :meth:`inner` are
        in the same order.
    """

    def __init__(self, rows: int, blocks: Sequence[Block]) -> None:
        self.rows = rows
        self.blocks = list(blocks)
        where = [np.arange(rows) if b.positions is None else b.positions for b in self.blocks]
        self._pairs: list[tuple[int, int, Any, Any]] = []  # rows shared: indices or a slice
        for i, a in enumerate(where):
            for j in range(i, len(where)):
                _, ia, jb = np.intersect1d(a, where[j], assume_unique=True, return_indices=True)
                if len(ia):
                    self._pairs.append((i, j, _whole_or(ia, len(a)), _whole_or(jb, len(where[j]))))

    def dense_cost(self) -> tuple[int, int]:
        """``(numbers held, operations)`` of one time of :meth:`dense` beside a kernel
        held from the first time."""
        R = self.rows
        work = sum(b.size * b.size * (b.r + 3) for b in self.blocks) + 4 * R * R
        block = 3 * max((min(b.size, _block_rows(b.size)) * b.size for b in self.blocks), default=0)
        return 2 * R * R + block, work

    def factor_numbers(self) -> int:
        """The numbers of the factors of one time (:meth:`factors`)."""
        return sum(b.size * b.columns if not b.units else len(b.seen) * b.p for b in self.blocks)

    def times_at_once(self) -> int:
        """How many times :func:`~gdln.balanced._kernel_series.distance_along` takes
        together from the factors (about :data:`FACTOR_NUMBERS` numbers)."""
        return max(1, FACTOR_NUMBERS // max(1, self.factor_numbers()))

    def factored_cost(self) -> tuple[int, int]:
        """``(numbers held, operations)`` per time of :meth:`inner` (twice: with the first
        time's factors and with its own), taking :meth:`times_at_once` times together."""
        work = 0
        largest = 0
        for i, j, ia, _ in self._pairs:
            a, b = self.blocks[i], self.blocks[j]
            shared = len(range(a.size)[ia]) if isinstance(ia, slice) else len(ia)
            work += 2 * shared * a.columns * b.columns
            largest = max(largest, shared * max(a.columns, b.columns) + a.columns * b.columns)
        times = self.times_at_once()
        return (2 * times + 1) * self.factor_numbers() + times * largest, work

    def factored(self) -> bool:
        """Whether :meth:`inner` costs fewer operations than :meth:`dense`."""
        return self.factored_cost()[1] <= self.dense_cost()[1]

    def dense(self, values: Sequence[Values]) -> np.ndarray:
        """The kernel ``(R, R)``: every term added on its rows, in blocks of rows.

        Parameters
        ----------
        values
            Per block, its :data:`Values`.

        Returns
        -------
        numpy.ndarray
            The kernel.
        """
        kernel = np.zeros((self.rows, self.rows))
        for block, (J, H) in zip(self.blocks, values, strict=True):
            gram = H @ H.T  # on the examples the block meets
            index = block.index
            if block.units:
                unit = np.arange(block.size) % block.units
            for rows in row_blocks(block.size, block.size):
                if block.units:
                    left = (unit[rows, None] == unit[None, :]).astype(float)
                else:
                    assert J is not None
                    left = J[rows] @ J.T
                left *= gram[np.ix_(index[rows], index)]
                add_block(kernel, block.positions, left, rows)
        return kernel

    def factors(self, values: Sequence[Values]) -> list[np.ndarray]:
        """Each term's factor at one time: $Z$ ``(rows, r*p)`` of a general term, $F$
        ``(seen, p)`` of an output term.

        Parameters
        ----------
        values
            Per block, its :data:`Values`.

        Returns
        -------
        list of numpy.ndarray
            Per block, its factor.
        """
        out = []
        for block, (J, H) in zip(self.blocks, values, strict=True):
            if block.units:
                out.append(H)
            else:
                assert J is not None
                out.append((J[:, :, None] * H[block.index][:, None, :]).reshape(block.size, -1))
        return out

    def inner(
        self, first: Sequence[np.ndarray], second: Sequence[np.ndarray], *, same: bool = False
    ) -> np.ndarray:
        r"""$\langle K, K'\rangle_F$ from the factors of kernels at several times.

        Parameters
        ----------
        first, second
            Per block, its factors (:meth:`factors`) stacked over times on a first axis,
            of the same length or of length 1 (taken with each of the other's).
        same
            ``second`` is ``first`` (squared norms; each pair of terms is then counted
            once and doubled).

        Returns
        -------
        numpy.ndarray
            One Frobenius inner product per time.
        """
        total = np.zeros(max(len(first[0]), len(second[0])) if first else 1)
        for i, j, ia, jb in self._pairs:
            value = self._pair(i, j, first[i], second[j], ia, jb)
            if i == j:
                total += value
            elif same:  # the pair (j, i) gives the same numbers
                total += 2 * value
            else:
                total += value + self._pair(j, i, first[j], second[i], jb, ia)
        return total

    def _pair(
        self, i: int, j: int, Za: np.ndarray, Zb: np.ndarray, ia: np.ndarray, jb: np.ndarray
    ) -> np.ndarray:
        r"""$\lVert Z_i^\top Z'_j\rVert_F^2$ per time, over the rows ``ia`` of term ``i``
        and ``jb`` of term ``j`` (the same rows of the kernel)."""
        a, b = self.blocks[i], self.blocks[j]
        if a.units:  # rows: whole examples, every unit of each
            A = Za[:, a.index[ia][:: a.units]]
            factor = a.units if b.units else 1
        else:
            A = Za[:, ia]
            if b.units:
                A = A.reshape(len(A), -1, b.units * A.shape[-1])
        if b.units:
            B = Zb[:, b.index[jb][:: b.units]]
        else:
            B = Zb[:, jb]
            if a.units:
                B = B.reshape(len(B), -1, a.units * B.shape[-1])
        M = np.swapaxes(A, 1, 2) @ B
        return (factor if a.units else 1) * np.einsum("tij,tij->t", M, M)
