r"""The tangent kernel and the hidden representations along a trajectory, one time at a time.

A kernel over $n$ examples and $O$ outputs has $(nO)^2$ entries: 30 million for the
routing network of Fig. 4 (112 examples, 49 outputs), so the kernels of every recorded
time are never held together. :class:`KernelSeries` computes the matrix of one time when
it is asked for; :class:`TrajectoryKernels` holds what one pass over the times gives, the
kernel distance $S(t)$, and the series themselves.

$S(t) = 1 - \langle K_0, K_t\rangle_F/(\lVert K_0\rVert_F\lVert K_t\rVert_F)$ (Fort et al.
2020; Kunin et al. 2024, "Get rich quick") is computed as
$\tfrac12\lVert K_0/\lVert K_0\rVert_F - K_t/\lVert K_t\rVert_F\rVert_F^2$, which is the
same number without the cancellation of $1 - \cos$: it is never negative, and at most 1
since two positive semidefinite matrices have $\langle K_0, K_t\rangle_F \ge 0$. From
the factors of a kernel's terms (:mod:`~gdln.balanced._kernel_blocks`) it is $1 - \cos$,
clipped to $[0, 1]$; either way a value within rounding (:data:`ROUNDING`) is 0.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._bounded._limits import beyond, current_limits
from .._errors import GdlnError
from .._html import html_table
from .._runtime._blas import one_blas_thread
from ..solution._series import KERNEL_DISTANCE, node_key
from ..solution._trajectory import Trajectory
from ._kernel_blocks import BlockKernel, Values, row_blocks

__all__ = ["ROUNDING", "KernelSeries", "TrajectoryKernels"]

ROUNDING = 1e-14
r"""$S(t)$ at most this is reported as 0: $1 - \cos$ from Frobenius products rounds to a
few $10^{-16}$ times the number of terms summed, so a kernel that keeps its direction
(XoR from decoupled weights) would read $\pm 2\cdot10^{-16}$ or $7\cdot10^{-16}$."""


@dataclass(frozen=True, eq=False)
class KernelSeries:
    r"""A square matrix at each time of a trajectory, computed when one is asked for.

    ``series[k]`` is the ``(side, side)`` matrix at the ``k``-th time; only the rows and
    columns in ``rows`` can be nonzero, and :meth:`live` gives the matrix on those alone.
    ``numpy.asarray(series)`` stacks every time (within the limit ``batch_elements``).

    Parameters
    ----------
    times
        The number of times ``T``.
    side
        The side ``N`` of each matrix.
    rows
        ``(R,)`` increasing indices in ``[0, N)``: the rows (and columns) that can be
        nonzero.
    compute
        ``k`` -> the ``(R, R)`` matrix on ``rows`` at the ``k``-th time.

    Raises
    ------
    ValueError
        ``rows`` is not increasing within ``[0, side)``.
    """

    times: int
    side: int
    rows: np.ndarray
    compute: Callable[[int], np.ndarray] = field(repr=False)
    # internal (set by of_terms): the kernel as a sum of terms, and their values per time
    _terms: BlockKernel | None = field(init=False, repr=False, default=None)
    _values: Callable[[int], list[Values]] | None = field(init=False, repr=False, default=None)

    def __post_init__(self) -> None:
        rows = np.asarray(self.rows, dtype=np.int64)
        object.__setattr__(self, "rows", rows)
        if (
            rows.ndim != 1
            or np.any(np.diff(rows) <= 0)
            or (len(rows) and (rows[0] < 0 or rows[-1] >= self.side))
        ):
            raise ValueError(f"rows must be increasing indices in [0, {self.side})")

    @classmethod
    def of(cls, matrices: Any) -> KernelSeries:
        """The series of matrices held already.

        Parameters
        ----------
        matrices
            ``(T, N, N)``.

        Returns
        -------
        KernelSeries
            Every row counted as one that can be nonzero.

        Raises
        ------
        ValueError
            ``matrices`` is not ``(T, N, N)``.
        """
        held = np.asarray(matrices, dtype=float)
        if held.ndim != 3 or held.shape[1] != held.shape[2]:
            raise ValueError(f"expected (T, N, N) matrices, got shape {held.shape}")
        return cls(held.shape[0], held.shape[1], np.arange(held.shape[1]), held.__getitem__)

    @classmethod
    def of_terms(
        cls,
        times: int,
        side: int,
        rows: Any,
        terms: BlockKernel,
        values: Callable[[int], list[Values]],
    ) -> KernelSeries:
        """The series of a kernel that is a sum of terms (:mod:`~gdln.balanced._kernel_blocks`).

        Parameters
        ----------
        times, side, rows
            As for the class.
        terms
            Where each term lives.
        values
            ``k`` -> each term's values at the ``k``-th time.

        Returns
        -------
        KernelSeries
            Whose matrices are assembled from the terms when asked for, and whose
            Frobenius products (:func:`distance_along`) come from the terms' factors
            where that costs less.
        """
        series = cls(times, side, rows, lambda k: terms.dense(values(k)))
        object.__setattr__(series, "_terms", terms)
        object.__setattr__(series, "_values", values)
        return series

    @property
    def shape(self) -> tuple[int, int, int]:
        """``(T, N, N)``."""
        return (self.times, self.side, self.side)

    def __len__(self) -> int:
        return self.times

    def __repr__(self) -> str:
        return (
            f"KernelSeries(<{self.times} times of {self.side}x{self.side}, {len(self.rows)} rows>)"
        )

    def _index(self, k: int) -> int:
        if not isinstance(k, (int, np.integer)) or not -self.times <= k < self.times:
            raise IndexError(f"time index {k!r} out of range for {self.times} times")
        return int(k) % self.times

    def live(self, k: int) -> np.ndarray:
        """The matrix at the ``k``-th time on :attr:`rows` alone.

        Parameters
        ----------
        k
            The time index (negative counts from the end).

        Returns
        -------
        numpy.ndarray
            ``(R, R)``.
        """
        return np.asarray(self.compute(self._index(k)), dtype=float)

    def __getitem__(self, k: int) -> np.ndarray:
        """The whole ``(N, N)`` matrix at the ``k``-th time (zero outside :attr:`rows`)."""
        _check_held(self.side * self.side, f"one {self.side}x{self.side} matrix", "take live(k)")
        live = self.live(k)
        if len(self.rows) == self.side:
            return live
        whole = np.zeros((self.side, self.side))
        whole[np.ix_(self.rows, self.rows)] = live
        return whole

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        _check_held(
            self.times * self.side * self.side,
            f"{self.times} times of {self.side}x{self.side}",
            "index one time",
        )
        with one_blas_thread():
            stacked = np.stack([self[k] for k in range(self.times)])
        return stacked if dtype is None else stacked.astype(dtype)


def _check_held(numbers: int, what: str, instead: str) -> None:
    if numbers > current_limits().batch_elements:
        raise GdlnError(beyond("batch_elements", f"{what} = {numbers} numbers") + f"; {instead}")


@dataclass(frozen=True, eq=False)
class TrajectoryKernels:
    r"""The neural tangent kernel and hidden representations at each time of a trajectory.

    Parameters
    ----------
    t
        ``(T,)`` times, in units of $\tau$.
    ntk
        $K((a, i), (b, j))$ at row ``a*O + i``, for example ``a`` of the task's examples
        (:meth:`gdln.Problem.examples`) and output unit ``i`` of the outputs listed in
        ``outputs``, stacked in that order: a :class:`KernelSeries` (``ntk[k]`` the
        ``(n*O, n*O)`` kernel at the ``k``-th time, computed then), or a ``(T, N, N)``
        array.
    representations
        Hidden node -> $h_v(x_a)^\top h_v(x_b)$ ``(n, n)`` at each time: a
        :class:`KernelSeries` or a ``(T, n, n)`` array.
    outputs
        ``(node, size)`` of each output node, in the order of the output axis.
    origin
        How they were obtained, in words (recorded as ``meta["kernel"]`` by
        :meth:`added_to`).

    Attributes
    ----------
    distance
        $S(t)$, ``(T,)``, in $[0, 1]$ (0 within rounding, :data:`ROUNDING`), computed
        from ``ntk`` when the value is made, one pass over the times (module docstring).

    Raises
    ------
    ValueError
        The shapes disagree.

    References
    ----------
    Jacot, Gabriel & Hongler (2018) (the NTK); Saxe, Sodhani & Lewallen (2022), Fig. 4g
    (representational similarity); Kunin et al. (2024), "Get rich quick" (kernel distance).
    """

    t: np.ndarray
    ntk: KernelSeries
    representations: Mapping[str, KernelSeries] = field(default_factory=dict)
    outputs: tuple[tuple[str, int], ...] = ()
    origin: str = ""
    distance: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        t = np.asarray(self.t, dtype=float)
        object.__setattr__(self, "t", t)
        ntk = self.ntk if isinstance(self.ntk, KernelSeries) else KernelSeries.of(self.ntk)
        object.__setattr__(self, "ntk", ntk)
        if ntk.times != len(t):
            raise ValueError(f"ntk must be (T={len(t)}, N, N), got {ntk.shape}")
        size = sum(k for _, k in self.outputs)
        if self.outputs and ntk.side % size:
            raise ValueError(f"ntk side {ntk.side} is not a multiple of {size} outputs")
        reps = {
            str(node): rep if isinstance(rep, KernelSeries) else KernelSeries.of(rep)
            for node, rep in self.representations.items()
        }
        object.__setattr__(self, "representations", reps)
        for node, rep in reps.items():
            if rep.times != len(t):
                raise ValueError(f"representation {node!r} has {rep.times} rows for {len(t)} times")
        object.__setattr__(self, "distance", distance_along(ntk))

    def __repr__(self) -> str:
        nodes = ", ".join(self.representations)
        return (
            f"TrajectoryKernels(t=<{len(self.t)} times>, ntk=<{self.ntk.side}x"
            f"{self.ntk.side}>, representations=[{nodes}])"
        )

    def _repr_html_(self) -> str:
        """The kernels' sizes, the kernel distance $S(t)$ at a few times, and the
        representations, as a table for Jupyter."""
        shown = np.unique(np.linspace(0, len(self.t) - 1, min(len(self.t), 6)).round().astype(int))
        rows = [[f"{self.t[i]:.4g}", f"{self.distance[i]:.4g}"] for i in shown]
        caption = f"NTK {self.ntk.side}x{self.ntk.side} over {len(self.t)} times"
        if self.outputs:
            caption += f"; outputs {', '.join(f'{n} ({k})' for n, k in self.outputs)}"
        if self.representations:
            caption += f"; representations at {', '.join(self.representations)}"
        if self.origin:
            caption += f"; {self.origin}"
        return html_table(["t / tau", "kernel distance S(t)"], rows, caption=caption)

    @property
    def largest_distance(self) -> tuple[float, float]:
        r"""The largest $S(t)$ and the first time it is reached: ``(S, t)``."""
        k = int(np.argmax(self.distance))
        return float(self.distance[k]), float(self.t[k])

    def added_to(self, trajectory: Trajectory) -> Trajectory:
        r"""``trajectory`` with the kernel distance and the representations as series.

        Parameters
        ----------
        trajectory
            The trajectory these kernels were computed along (the same times).

        Returns
        -------
        Trajectory
            Its series plus ``kernel_distance`` $S(t)$ ``(T,)``
            (:meth:`gdln.Trajectory.kernel_distance`) and each hidden node's
            $h_v(x_a)^\top h_v(x_b)$ ``(T, n, n)`` (:meth:`gdln.Trajectory.rsm`);
            ``meta["kernel"]`` says how they were obtained, ``meta["kernel_examples"]``
            how many examples they run over.

        Raises
        ------
        ValueError
            The trajectory's times are not these kernels'.
        GdlnError
            The representations at every time would hold more numbers than the limit
            ``batch_elements`` (the message says how many times fit).
        """
        if len(trajectory.t) != len(self.t) or not np.allclose(trajectory.t, self.t):
            raise ValueError(
                f"the kernels are at {len(self.t)} times, the trajectory at "
                f"{len(trajectory.t)} other ones"
            )
        per_time = sum(rep.side * rep.side for rep in self.representations.values())
        held = len(self.t) * per_time
        limit = current_limits().batch_elements
        if held > limit:
            fit = limit // max(1, per_time)
            raise GdlnError(
                beyond(
                    "batch_elements",
                    f"the Gram matrices of {len(self.representations)} hidden node(s) at "
                    f"{len(self.t)} times = {held} numbers",
                )
                + (f"; record at most {fit} times (--points)" if fit >= 2 else "")
            )
        series = dict(trajectory.series)
        series[KERNEL_DISTANCE] = self.distance
        for node, rep in self.representations.items():
            series[node_key("rsm", node)] = np.asarray(rep)
        meta = {**trajectory.meta, "kernel": self.origin}
        meta["kernel_examples"] = int(self.ntk.side // max(1, sum(k for _, k in self.outputs)))
        return dataclasses.replace(trajectory, series=series, meta=meta)  # status, recording kept


def distance_along(ntk: KernelSeries) -> np.ndarray:
    r"""$S(t)$ from the kernel of each time in turn, holding two (module docstring).

    From a sum of terms whose factors are cheaper (:meth:`BlockKernel.factored`), from
    $\langle K_0,K_t\rangle_F$ and the norms of the factors, as
    $1 - \cos$ clipped to $[0, 1]$. $S = 0$ where either kernel is zero.

    References
    ----------
    Kunin et al. (2024), "Get rich quick" (the kernel distance).
    """
    with one_blas_thread():
        terms, values = ntk._terms, ntk._values
        if terms is not None and values is not None and terms.factored():
            return _factored_distance(ntk.times, terms, values)
        return _distance(ntk)


def _clipped(distance: np.ndarray) -> np.ndarray:
    """$S$ within $[0, 1]$, and 0 where it is within rounding (:data:`ROUNDING`)."""
    return np.where(np.abs(distance) <= ROUNDING, 0.0, np.clip(distance, 0.0, 1.0))


def _factored_distance(
    times: int, terms: BlockKernel, values: Callable[[int], list[Values]]
) -> np.ndarray:
    distance = np.zeros(times)
    if times < 2:
        return distance
    first = [z[None] for z in terms.factors(values(0))]
    first_norm = float(terms.inner(first, first, same=True)[0])
    step = terms.times_at_once()
    for start in range(1, times, step):
        chunk = [terms.factors(values(k)) for k in range(start, min(times, start + step))]
        now = [np.stack(z) for z in zip(*chunk, strict=True)]
        norms = terms.inner(now, now, same=True)
        cosine = terms.inner(first, now) / np.sqrt(np.maximum(first_norm * norms, 1e-300))
        part = _clipped(1.0 - cosine)
        distance[start : start + len(chunk)] = np.where((norms > 0) & (first_norm > 0), part, 0.0)
    return distance


def _distance(ntk: KernelSeries) -> np.ndarray:
    distance = np.zeros(ntk.times)
    first: np.ndarray | None = None
    for k in range(ntk.times):
        kernel = ntk.live(k)
        norm = float(np.linalg.norm(kernel))
        if k == 0:
            first = kernel / norm if norm > 0 else None
            continue
        if first is None or norm == 0:
            continue
        total = 0.0
        for rows in row_blocks(len(kernel), len(kernel)):
            apart = kernel[rows] / norm - first[rows]
            total += float(np.einsum("ij,ij->", apart, apart))
        distance[k] = float(_clipped(np.array(0.5 * total)))
    return distance
