r"""Further directions of an active two-layer pathway, for the asymptotic route.

A pathway $x\to h\to y$ with weights $W_2W_1$ learns one rank-one direction per stage; it
can go on to learn the next singular direction of the residual it sees before another
pathway escapes, which changes every later residual. Each hidden unit of $h$ carries a
pair $(e_1, e_2)$ (its row of $W_1$, its column of $W_2$); while those are small they grow
linearly, $\tau\dot e_1 = R^\top e_2$, $\tau\dot e_2 = Re_1$, with $R = R_p$ the residual
of the plateau (Eqs. 3-4 of Saxe, Sodhani & Lewallen 2022): the direction
$(v_k, \pm u_k)/\sqrt2$ of each singular triple $(\sigma_k, u_k, v_k)$ of $R$ grows at rate
$\pm\sigma_k$. From small random weights every direction is present at order $u_0$ in
every unit. The units' pairs are kept as columns, one per independent random hidden
vector, each a sum of parts $u_0^{q}g$; on a plateau of duration $\Delta\ln(1/u_0)$ the
part of $g$ along an eigenvector of eigenvalue $\lambda$ leaves with order
$q - \lambda\Delta$ (the max-plus bookkeeping of :mod:`gdln.stages._escape`, done here
with one eigendecomposition per plateau for all the columns). When a direction $\xi$ escapes, the hidden
direction it takes is that of the column largest along $\xi$, and the free units hold
what is orthogonal to it: every other column minus its share of that one, with no part
along $\xi$ (:meth:`PairSpace.learn`). The next escape of a column is the pathway's next
direction (Saxe et al. 2014: from a white input each singular mode $k$ escapes at
$\ln(1/u_0)/\sigma_k$).

Tracked here: pathways of exactly two trained edges, neither shared with another path
(their hidden units' pairs then see $R_p$ alone). Others are named where their further
directions could matter.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._edge import Edge
from ..paths._paths import Path
from ._matrices import MatrixNetwork

__all__ = ["PairSpace", "Plateau", "Step", "pair_spaces"]


Part = tuple[float, np.ndarray]
CANCEL = 1e-9  # a part below this fraction of what it came from is round-off
DEPTH = 4  # orders kept per eigenvector of a plateau: the leading one and three below it


@dataclass(frozen=True)
class Plateau:
    r"""The linear flow of a free unit's pair on one plateau: the eigenpairs of
    $\begin{pmatrix}0 & R^\top\\ R & 0\end{pmatrix}$, $\pm\sigma_k$ on
    $(v_k, \pm u_k)/\sqrt2$."""

    values: np.ndarray
    vectors: np.ndarray


@dataclass(frozen=True)
class Step:
    """A further direction's escape: its duration (a coefficient of $\\ln(1/u_0)$) and pair."""

    coefficient: float
    direction: np.ndarray


@dataclass(eq=False)
class PairSpace:
    """The free hidden units of one two-layer pathway, as the pairs they carry.

    Parameters
    ----------
    path
        The pathway $x\\to h\\to y$.
    first, second
        Its edges $(x, h)$ and $(h, y)$.
    columns
        The pair content of the free units: per independent random hidden vector, its
        parts $(q, g)$, $\\sum u_0^{q}g$ in the $|x| + |y|$ numbers of a pair.
    capacity
        The most directions it can learn: $\\min(|x|, |h|, |y|)$.
    inputs
        $|x|$: a pair's first numbers are $e_1$, the rest $e_2$.
    learned
        How many directions the pathway has learned.
    """

    path: Path
    first: Edge
    second: Edge
    columns: list[list[Part]]
    capacity: int
    inputs: int
    learned: int = 0

    def plateau(self, net: MatrixNetwork) -> Plateau:
        """The linear flow of the pairs on the current plateau, from the residual $R_p$."""
        R = net.residual(self.path)
        rows, cols = R.shape
        H = np.zeros((cols + rows, cols + rows))
        H[cols:, :cols] = R
        H[:cols, cols:] = R.T
        values, vectors = np.linalg.eigh(H)
        return Plateau(values, vectors)

    def wait(self, plateau: Plateau, duration: float | None) -> None:
        """A plateau of ``duration`` (``None``: power-law, where shrinking parts vanish)."""
        values, V = plateau.values, plateau.vectors
        top = max(float(np.abs(values).max(initial=0.0)), 1e-300)
        columns = []
        for column in self.columns:
            parts: list[Part] = []
            for q, g in column:
                c = V.T @ g
                keep = np.abs(c) > CANCEL * float(np.linalg.norm(g))
                for k in np.flatnonzero(keep):
                    if duration is None:
                        if values[k] < -1e-9 * top:
                            continue
                        order = q
                    else:
                        order = q - float(values[k]) * duration
                    parts.append((max(order, 0.0), c[k] * V[:, k]))
            kept = _leading(parts, V)
            if kept:
                columns.append(kept)
        self.columns = columns

    def next_escape(self, plateau: Plateau) -> Step | None:
        """The pathway's next direction from the free units, or ``None``."""
        if self.learned >= self.capacity:
            return None
        values, V = plateau.values, plateau.vectors
        top = max(float(np.abs(values).max(initial=0.0)), 1e-300)
        best: Step | None = None
        for column in self.columns:
            times: list[tuple[float, np.ndarray]] = []
            for q, g in column:
                c = V.T @ g
                for k in np.flatnonzero(
                    (values > 1e-9 * top) & (np.abs(c) > CANCEL * float(np.linalg.norm(g)))
                ):
                    times.append((q / float(values[k]), c[k] * V[:, k]))
            if not times:
                continue
            first = min(t for t, _ in times)
            if best is None or first < best.coefficient:
                leading = [d for t, d in times if t <= first + 1e-9 * max(first, 1.0)]
                best = Step(first, np.sum(leading, axis=0))
        return best

    def learn(self, direction: np.ndarray) -> None:
        r"""The pair direction $\xi$ escaped: the unit that took it leaves the free ones.

        The unit is the column largest along $\xi$, $g_1$; every other column becomes
        $g_j - (\xi^\top g_j/\xi^\top g_1)\,g_1$ (the free units are orthogonal to the
        one that escaped), whose $\xi$ part is zero and whose other parts gain the
        parts of $g_1$, raised by the order of $\xi^\top g_j$. The columns agree at
        leading order (the fastest growth dominates every unit), so what is left of them
        is their lower parts: :func:`_leading` keeps :data:`DEPTH` of them.
        """
        xi = direction / np.linalg.norm(direction)
        self.learned += 1
        if not self.columns:
            return
        along = [_along(c, xi) for c in self.columns]
        k = min(range(len(along)), key=lambda i: along[i][0])
        q1, c1 = along[k]
        first = self.columns[k]
        rest = []
        for i, column in enumerate(self.columns):
            if i == k:
                continue
            q, c = along[i]
            parts = list(column)
            if np.isfinite(q) and c1:
                parts += [(r + q - q1, -(c / c1) * g) for r, g in first]
            merged = _summed([(r, g - xi * float(xi @ g)) for r, g in parts])
            if merged:
                rest.append(merged)
        self.columns = rest

    def split(self, direction: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A pair-space direction as its input part $v$ and output part $u$."""
        return direction[: self.inputs], direction[self.inputs :]


def _along(column: list[Part], xi: np.ndarray) -> tuple[float, float]:
    """The order and coefficient of a column's component along ``xi`` (inf, 0 if none)."""
    best = (np.inf, 0.0)
    for r, g in column:
        value = float(xi @ g)
        if abs(value) > CANCEL * float(np.linalg.norm(g)) and r < best[0]:
            best = (r, value)
    return best


def _summed(parts: list[Part]) -> list[Part]:
    """Parts of equal order summed; those below :data:`CANCEL` of the largest dropped."""
    if not parts:
        return []
    orders = np.round(np.array([q for q, _ in parts]), 9)
    vectors = np.array([g for _, g in parts])
    unique, inverse = np.unique(orders, return_inverse=True)
    sums = np.zeros((len(unique), vectors.shape[1]))
    np.add.at(sums, inverse.reshape(-1), vectors)
    norms = np.linalg.norm(sums, axis=1)
    top = float(np.linalg.norm(vectors, axis=1).max())
    return [
        (max(float(q), 0.0), g)
        for q, g, n in zip(unique, sums, norms, strict=True)
        if n > CANCEL * top
    ]


def _leading(parts: list[Part], V: np.ndarray) -> list[Part]:
    """Per eigenvector of the plateau (``V``), its :data:`DEPTH` lowest orders, summed.

    All parts lie along the eigenvectors after a plateau. The lowest order of each sets
    when it escapes; the next ones are what is left of a column once another unit has
    taken its leading part (:meth:`PairSpace.learn`); deeper ones are dropped, so that a
    column holds at most ``DEPTH`` parts per eigenvector however many plateaus pass.
    """
    summed = _summed(parts)
    if not summed:
        return []
    orders = np.array([q for q, _ in summed])
    coefficients = V.T @ np.array([g for _, g in summed]).T  # (eigenvectors, parts)
    scale = CANCEL * float(np.abs(coefficients).max(initial=0.0))
    out: list[Part] = []
    for k in range(V.shape[1]):
        live = np.flatnonzero(np.abs(coefficients[k]) > scale)
        for i in live[np.argsort(orders[live], kind="stable")][:DEPTH]:
            out.append((float(orders[i]), coefficients[k, i] * V[:, k]))
    return _summed(out)


def pair_spaces(net: MatrixNetwork) -> dict[Path, PairSpace]:
    """One :class:`PairSpace` per pathway of two trained edges that no other path shares."""
    users: dict[Edge, int] = {}
    for p in net.paths:
        for e in p.edges:
            users[e] = users.get(e, 0) + 1
    rng = np.random.default_rng(0)  # fixed draws: the generic combinations of a narrow layer
    out = {}
    for p in net.paths:
        if len(p.edges) != 2 or any(e in net.fixed for e in p.edges):
            continue
        if any(users[e] > 1 for e in p.edges):
            continue
        first, second = p.edges
        n_in, hidden, n_out = (net.size[v] for v in p.nodes)
        m = n_in + n_out
        basis = np.eye(m) if hidden >= m else rng.standard_normal((m, hidden))
        columns = [[(1.0, basis[:, j])] for j in range(basis.shape[1])]
        out[p] = PairSpace(p, first, second, columns, min(n_in, hidden, n_out), n_in)
    return out
