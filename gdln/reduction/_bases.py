r"""Common bases for the path statistics (Eqs. 7-8 of Saxe et al. 2022).

The exact reduction needs, for every input space an orthonormal basis $V$ and for every
output space an orthonormal basis $U$, such that each statistic
$\Sigma^{yx}(p)=U S(p) V^\top$ and $\Sigma^x(j,p)=V D(j,p) V^\top$ is diagonal. A
**mode** is one column of each of these bases, matched across spaces: mode $\alpha$
couples only to mode $\alpha$. Modes need not sit at the same column index in every
space, and need not reach every space.

Algorithm. Embed every statistic (a *block* between two spaces) in one symmetric matrix
$T$ over the direct sum of the spaces, with random positive weights. If common bases
exist, $T$ is block diagonal over modes, so each eigenvector of $T$ lies in one mode (or,
for exactly degenerate modes, in a rotation of several, which is a valid choice of
modes) and its restriction to a space is that mode's vector there. Eigenvectors are
taken in order of $|\lambda|$; one whose restrictions are already spanned adds nothing,
one orthogonal to all found modes starts a new mode. Spaces are completed with
orthonormal complements (dead modes). Every block is then checked: a block whose share
off the diagonal (:func:`off_diagonal_share`, by Frobenius norm, in $[0, 1]$) exceeds
``1e-8`` raises :class:`~gdln.NotDiagonalizableError` naming the block.

With exact data the float modes are made exact: degenerate groups are rotated to a
canonical basis, one seed vector per mode is recognised as a rational direction, the
others follow exactly through the blocks, and the exact blocks are checked again. When
the seed vector is not a rational direction (e.g. the singular vectors of
$\begin{pmatrix}1&2\\3&4\end{pmatrix}$), it is found exactly as an eigenvector of
$A_s=\sum_b r_b B_b^\top B_b + \sum_b r_b B_b B_b^\top$ (rational weights $r_b$, the blocks
$B_b$ leaving or entering its space $s$), provided its eigenvalue is a simple root of a
factor of degree at most 2 of the characteristic polynomial of $A_s$ over the rationals,
and $s$ has at most ``MAX_ALGEBRAIC_DIM`` dimensions. Values are then written with square
roots, e.g. $\sqrt{15/4+\sqrt{221}/4}$. Otherwise the modes stay float.

Symbolic data (``symbols:`` in a graph file) are handled the same way: the bases are found
with the symbols replaced by generic rational values (``symbols`` of :func:`joint_modes`),
and kept only if the exact check holds for every value of the symbols.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy as sp

from .._errors import NotDiagonalizableError, shorten_text

__all__ = ["Modes"]

TOLERANCE = 1e-9
MAX_ALGEBRAIC_DIM = 12  # largest space whose vectors may be found as exact eigenvectors
MAX_EXACT_COMPLEMENT = 32  # largest space whose dead directions are completed exactly


@dataclass(frozen=True)
class Block:
    """One statistic between two spaces: rows in ``row``, columns in ``col``."""

    row: Hashable
    col: Hashable
    value: np.ndarray
    exact: Any = None
    tag: str = ""


@dataclass(frozen=True)
class Modes:
    r"""Matched orthonormal bases of several spaces (see the module docstring).

    Parameters
    ----------
    spaces
        Space label -> dimension.
    vectors
        Per live mode (strongest first): space -> unit vector (float).
    exact_vectors
        The same, exact (sympy column matrices), or ``None`` if not available.
    complement
        Space -> orthonormal columns completing the live vectors to a basis.
    exact_directions
        With ``exact_vectors``: the same vectors before normalisation (entries rational
        or of the form $a+b\sqrt{c}$), from which values are computed without nested roots.
    exact_complement
        Space -> exact orthonormal completion (sympy matrix), where it could be found.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eqs. (7)-(8): the common bases $U$, $V$.
    """

    spaces: Mapping[Hashable, int]
    vectors: tuple[Mapping[Hashable, np.ndarray], ...]
    exact_vectors: tuple[Mapping[Hashable, Any], ...] | None = None
    complement: Mapping[Hashable, np.ndarray] = field(default_factory=dict)
    exact_directions: tuple[Mapping[Hashable, Any], ...] | None = None
    exact_complement: Mapping[Hashable, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.vectors)

    def basis(self, space: Hashable) -> tuple[np.ndarray, list[int | None]]:
        """The full basis of a data space and which mode each column carries.

        Parameters
        ----------
        space
            A space label of :attr:`spaces`.

        Returns
        -------
        tuple
            ``(matrix, owners)``: the basis as columns, the modes' vectors first, then the
            complement; ``owners[k]`` is the mode of column ``k``, ``None`` for the
            complement.
        """
        cols, owners = [], []
        for alpha, mode in enumerate(self.vectors):
            if space in mode:
                cols.append(mode[space])
                owners.append(alpha)
        rest = self.complement.get(space, np.zeros((self.spaces[space], 0)))
        matrix = np.column_stack([*cols, rest]) if cols else rest
        return matrix, owners + [None] * rest.shape[1]

    def value(self, block: Block, alpha: int, *, exact: bool = False) -> Any:
        r"""The diagonal value $u_\alpha^\top B\, v_\alpha$ of a block of statistics (Eqs. 7-8).

        Parameters
        ----------
        block
            A block $B$ of a statistic, between the spaces ``block.row`` and ``block.col``.
        alpha
            The mode.
        exact
            The exact (sympy) value where the block and the bases are exact.

        Returns
        -------
        Any
            The value; 0 when the mode misses one of the two spaces.
        """
        if exact and self.exact_vectors is not None and block.exact is not None:
            mode = self.exact_vectors[alpha]
            if block.row not in mode or block.col not in mode:
                return sp.Integer(0)
            if self.exact_directions is not None:
                d = self.exact_directions[alpha]
                if not (_rational(d[block.row]) and _rational(d[block.col])):
                    return _root_value(block.exact, d[block.col], self.value(block, alpha))
            return sp.radsimp((mode[block.row].T * block.exact * mode[block.col])[0, 0])
        mode_f = self.vectors[alpha]
        if block.row not in mode_f or block.col not in mode_f:
            return 0.0
        return float(mode_f[block.row] @ block.value @ mode_f[block.col])


def joint_modes(
    spaces: Mapping[Hashable, int],
    blocks: Sequence[Block],
    *,
    outputs: frozenset[Hashable] = frozenset(),
    exact: bool = False,
    seed: int = 0,
    symbols: Mapping[sp.Symbol, Any] | None = None,
) -> Modes:
    """Find matched bases diagonalising every block (see the module docstring).

    Parameters
    ----------
    spaces
        Space label -> dimension.
    blocks
        The statistics. A block from a space to itself must be symmetric in aggregate.
    outputs
        Spaces on the output side: their vectors are signed so that the largest
        input-output value of each mode is positive.
    exact
        Try to make the modes exact (needs ``Block.exact`` on every block).
    seed
        Seed of the random weights.
    symbols
        Generic rational values of the symbols in ``Block.exact`` (``Block.value`` holds
        the blocks at these values). Exact modes are kept only if they diagonalise the
        blocks for every value of the symbols.
    """
    labels = list(spaces)
    offsets = dict(zip(labels, np.cumsum([0] + [spaces[s] for s in labels[:-1]]), strict=True))
    total = sum(spaces.values())
    rng = np.random.default_rng(seed)
    T = np.zeros((total, total))
    scale = max((float(np.abs(b.value).max()) for b in blocks), default=0.0) or 1.0
    for b in blocks:
        w = rng.uniform(1.0, 2.0) / scale
        r, c = offsets[b.row], offsets[b.col]
        T[r : r + spaces[b.row], c : c + spaces[b.col]] += w * b.value
        T[c : c + spaces[b.col], r : r + spaces[b.row]] += w * b.value.T
    values, vectors = np.linalg.eigh(T)
    order = np.argsort(-np.abs(values), kind="stable")
    cutoff = TOLERANCE * max(float(np.abs(values).max(initial=0.0)), 1e-300)
    modes: list[dict[Hashable, np.ndarray]] = []
    for k in order:
        if abs(values[k]) <= cutoff:
            break
        _absorb(modes, vectors[:, k], labels, offsets, spaces)
    _orient(modes, blocks, outputs)
    modes.sort(key=lambda m: _strength(m, blocks, outputs), reverse=True)
    complement = {s: _complement([m[s] for m in modes if s in m], spaces[s]) for s in labels}
    result = Modes(spaces=dict(spaces), vectors=tuple(modes), complement=complement)
    _verify(result, blocks)
    if exact and modes and all(b.exact is not None for b in blocks):
        return _exact_modes(result, blocks, dict(symbols or {}))
    return result


def _exact_modes(modes: Modes, blocks: Sequence[Block], symbols: Mapping[sp.Symbol, Any]) -> Modes:
    """``modes`` made exact (vectors and completions), or unchanged if that fails."""
    found = _exactify(modes, blocks, dict(symbols))
    if found is None:
        return modes
    spaces = modes.spaces
    exact_vectors, directions = found
    floats = tuple({s: _to_float(v) for s, v in m.items()} for m in exact_vectors)
    exact_complement = {}
    for s in spaces:
        rest = _exact_complement([d[s] for d in directions if s in d], spaces[s])
        if rest is not None:
            exact_complement[s] = rest
    complement = {
        s: (
            np.array(exact_complement[s].evalf(30), dtype=float).reshape(spaces[s], -1)
            if s in exact_complement
            else _complement([m[s] for m in floats if s in m], spaces[s])
        )
        for s in spaces
    }
    return Modes(
        spaces=dict(spaces),
        vectors=floats,
        exact_vectors=exact_vectors,
        complement=complement,
        exact_directions=directions,
        exact_complement=exact_complement,
    )


def generic_values(symbols: Any) -> dict[sp.Symbol, sp.Rational]:
    """Generic rational values in $(1, 2)$ for symbols, fixed by each symbol's name.

    Bases of symbolic data are found at these values (and kept only if they hold for all
    values); a value depends on the name alone, so every block sees the same one.
    """
    return {
        x: 1 + sp.Rational(zlib.crc32(x.name.encode()) % 99991 + 1, 99993)
        for x in sorted(symbols, key=str)
    }


def _absorb(
    modes: list[dict[Hashable, np.ndarray]],
    w: np.ndarray,
    labels: list[Hashable],
    offsets: Mapping[Hashable, int],
    spaces: Mapping[Hashable, int],
) -> None:
    """Add what an eigenvector of T says about the modes."""
    eps = 1e-6
    fresh: dict[Hashable, np.ndarray] = {}
    overlap: dict[int, float] = {}
    for s in labels:
        r = w[offsets[s] : offsets[s] + spaces[s]].copy()
        if np.linalg.norm(r) < eps:
            continue
        for alpha, mode in enumerate(modes):
            if s in mode:
                c = float(mode[s] @ r)
                r -= c * mode[s]
                overlap[alpha] = overlap.get(alpha, 0.0) + c * c
        if np.linalg.norm(r) > eps:
            fresh[s] = r / np.linalg.norm(r)
    if not fresh:
        return
    touched = [a for a, v in overlap.items() if v > eps * eps]
    if len(touched) == 1 and not any(s in modes[touched[0]] for s in fresh):
        modes[touched[0]].update(fresh)
    else:
        modes.append(fresh)


def _orient(
    modes: list[dict[Hashable, np.ndarray]], blocks: Sequence[Block], outputs: frozenset[Hashable]
) -> None:
    for mode in modes:
        for s in [s for s in mode if s in outputs]:
            best = 0.0
            for b in blocks:
                if b.row == s and b.col in mode:
                    v = float(mode[s] @ b.value @ mode[b.col])
                    if abs(v) > abs(best):
                        best = v
            if best < 0:
                mode[s] = -mode[s]


def _strength(
    mode: Mapping[Hashable, np.ndarray], blocks: Sequence[Block], outputs: frozenset[Hashable]
) -> tuple[bool, float, float]:
    """Modes that reach an output first, then by input-output value, then by variance."""
    yx, xx = 0.0, 0.0
    for b in blocks:
        if b.row in mode and b.col in mode:
            value = abs(float(mode[b.row] @ b.value @ mode[b.col]))
            if b.row in outputs:
                yx = max(yx, value)
            else:
                xx = max(xx, value)
    return (any(s in outputs for s in mode), round(yx, 12), round(xx, 12))


def _complement(vectors: list[np.ndarray], dim: int) -> np.ndarray:
    if not vectors:
        return np.eye(dim)
    Q = np.column_stack(vectors)
    u, _s, _ = np.linalg.svd(Q, full_matrices=True)
    return u[:, len(vectors) :]


def off_diagonal_share(modes: Modes, block: Block) -> float:
    r"""The share of a block that the modes leave off the diagonal, in $[0, 1]$.

    $\lVert P_{\rm off}\rVert_F / \lVert B\rVert_F$ for $P = U^\top B V$ in the full
    orthonormal bases of the block's spaces (live modes and their completion), where
    $P_{\rm off}$ keeps the entries not joining a live mode to itself. Orthonormal bases
    keep the Frobenius norm ($\lVert P\rVert_F = \lVert B\rVert_F$), so the share is 0
    for a block the modes diagonalise (Eqs. 7-8) and at most 1. A zero block has share 0.
    """
    U, row_owner = modes.basis(block.row)
    V, col_owner = modes.basis(block.col)
    whole = float(np.linalg.norm(block.value))
    if whole == 0.0:
        return 0.0
    projected = U.T @ block.value @ V
    same = np.array([[r is not None and r == c for c in col_owner] for r in row_owner], dtype=bool)
    off = float(np.linalg.norm(np.where(same, 0.0, projected)))
    return min(off / whole, 1.0)


def _verify(modes: Modes, blocks: Sequence[Block]) -> None:
    offenders = []
    for b in blocks:
        share = off_diagonal_share(modes, b)
        if share > TOLERANCE * 10:
            offenders.append((share, b.tag))
    if offenders:
        offenders.sort(reverse=True)
        worst = offenders[0][0]
        names = tuple(tag for _, tag in offenders)
        listed = ", ".join(shorten_text(n, 40) for n in names[:2]) + (
            f" and {len(names) - 2} more" if len(names) > 2 else ""
        )
        raise NotDiagonalizableError(
            f"no common bases (Eqs. 7-8): {listed} stay off-diagonal (relative residual "
            f"{worst:.3g}: the largest share of one off the diagonal), so no reduced "
            "ODE (Eq. 10); solve/compare take the full-matrix flow (Eqs. 3-4), timescales "
            "asymptotic stages",
            paths=names,
            residual=worst,
        )


# -- exact modes ----------------------------------------------------------------------


def _to_float(v: Any) -> np.ndarray:
    return np.array(v.evalf(30), dtype=float).ravel()


def _exactify(
    modes: Modes, blocks: Sequence[Block], symbols: Mapping[sp.Symbol, Any]
) -> tuple[tuple[dict[Hashable, Any], ...], tuple[dict[Hashable, Any], ...]] | None:
    """Exact unit vectors and their unnormalised directions per mode, or ``None``."""
    vectors = [dict(m) for m in modes.vectors]
    _canonical_rotation(vectors, blocks)
    # symbol-free exact blocks (the symbols at generic values) give the directions
    numeric = [b.exact.xreplace(symbols) if symbols else b.exact for b in blocks]
    gram: dict[Hashable, Any] = {}
    directions: list[dict[Hashable, Any]] = []
    for mode in vectors:
        seed_space = next(iter(mode))
        direction = _rational_direction(mode[seed_space])
        if direction is None:
            direction = _eigen_direction(seed_space, mode[seed_space], blocks, numeric, gram)
        if direction is None:
            return None
        found = {seed_space: direction}
        frontier = [seed_space]
        while frontier:
            s = frontier.pop()
            for b, exact in zip(blocks, numeric, strict=True):
                for here, there, matrix in ((b.col, b.row, exact), (b.row, b.col, exact.T)):
                    if here == s and there in mode and there not in found:
                        image = matrix * found[s]
                        if float(np.abs(_to_float(image)).max(initial=0.0)) > 1e-12:
                            found[there] = _primitive(image)
                            frontier.append(there)
        for s in mode:
            if s not in found:
                d = _rational_direction(mode[s])
                if d is None:
                    d = _eigen_direction(s, mode[s], blocks, numeric, gram)
                if d is None:
                    return None
                found[s] = d
        for s, v in found.items():
            if float(_to_float(v) @ mode[s]) < 0:
                found[s] = -v
        directions.append(found)
    # exact check on the unnormalised directions, for every value of the symbols
    for b in blocks:
        for a, da in enumerate(directions):
            for c, dc in enumerate(directions):
                if (
                    a != c
                    and b.row in da
                    and b.col in dc
                    and not _is_zero((da[b.row].T * b.exact * dc[b.col])[0, 0])
                ):
                    return None
    unit = tuple({s: _normalize(v) for s, v in d.items()} for d in directions)
    frozen = tuple({s: sp.ImmutableMatrix(v) for s, v in d.items()} for d in directions)
    return unit, frozen


def _is_zero(x: Any) -> bool:
    x = sp.expand(x)
    return x == 0 or sp.simplify(x) == 0


def _rational(v: Any) -> bool:
    return all(isinstance(x, sp.Rational) for x in v)


def _eigen_direction(
    space: Hashable,
    v: np.ndarray,
    blocks: Sequence[Block],
    numeric: Sequence[Any],
    gram: dict[Hashable, Any],
) -> Any:
    r"""An exact eigenvector of $A_s$ along the float vector ``v``, or ``None``.

    $A_s=\sum_b r_b B_b^\top B_b+\sum_b r_b B_bB_b^\top$ over the blocks leaving or
    entering ``space``: every mode vector in ``space`` is one of its eigenvectors. Found
    when the eigenvalue is a simple root of a rational factor of degree 1 or 2 of the
    characteristic polynomial (then the vector has entries $a+b\sqrt c$).
    """
    if space not in gram:
        rng = np.random.default_rng(2022)
        A = None
        for b, exact in zip(blocks, numeric, strict=True):
            for here, product in ((b.col, lambda m: m.T * m), (b.row, lambda m: m * m.T)):
                if here == space:
                    term = product(exact) * int(rng.integers(1, 1000))
                    A = term if A is None else A + term
        ok = A is not None and A.rows <= MAX_ALGEBRAIC_DIM and all(x.is_Rational for x in A)
        gram[space] = sp.Matrix(A) if ok else None
    A = gram[space]
    if A is None:
        return None
    target = float(v @ np.array(A.evalf(20), dtype=float) @ v)
    x = sp.Dummy("x")
    candidates = []
    for factor, multiplicity in sp.factor_list(A.charpoly(x).as_expr(x), x)[1]:
        degree = sp.degree(factor, x)
        if degree > 2:
            continue
        for root in sp.roots(factor, x):
            if abs(float(root) - target) <= 1e-7 * max(1.0, abs(target)):
                candidates.append((root, factor, multiplicity, degree))
    if len(candidates) != 1 or candidates[0][2] != 1:
        return None
    root, factor, _, degree = candidates[0]
    n = A.rows
    if degree == 1:
        (w,) = (A - root * sp.eye(n)).nullspace()
    else:
        # the 2-D rational invariant subspace W of this factor, and the eigenvector in it
        p, q, r = sp.Poly(factor, x).all_coeffs()
        W = sp.Matrix.hstack(*(p * A * A + q * A + r * sp.eye(n)).nullspace())
        if W.cols != 2:
            return None
        R = (W.T * W).inv() * W.T * A * W
        if R[0, 1] != 0:
            e = sp.Matrix([R[0, 1], root - R[0, 0]])
        elif R[1, 0] != 0:
            e = sp.Matrix([root - R[1, 1], R[1, 0]])
        else:
            return None
        w = (W * e).applyfunc(sp.expand)
    w = _primitive(w)
    w_f = _to_float(w)
    if abs(abs(float(w_f @ v)) / np.linalg.norm(w_f) - 1) > 1e-6:
        return None
    return w


def _root_value(matrix: Any, direction: Any, approx: Any) -> Any:
    r"""$u^\top B v$ for unit $u \parallel Bv$, $v \parallel$ ``direction``: $\pm|Bv|/|v|$.

    Written as the square root of a number $a+b\sqrt c$, so that values stay readable
    (e.g. $\sqrt{15/4+\sqrt{221}/4}$) where normalising vectors would nest radicals.
    """
    image = matrix * direction
    square = sp.radsimp(
        sp.expand((image.T * image)[0, 0]) / sp.expand((direction.T * direction)[0, 0])
    )
    if square == 0:
        return sp.Integer(0)
    root = sp.sqrtdenest(sp.sqrt(square))
    return -root if float(approx) < 0 else root


def _exact_complement(directions: list[Any], dim: int) -> Any:
    """Exact orthonormal columns completing the directions to a basis, or ``None``."""
    if not directions:
        return sp.ImmutableMatrix(sp.eye(dim))
    if len(directions) == dim:
        return sp.ImmutableMatrix.zeros(dim, 0)
    if all(_rational(d) for d in directions) and dim <= MAX_EXACT_COMPLEMENT:
        rest = sp.Matrix.hstack(*directions).T.nullspace()
        unit = [_normalize(v) for v in sp.GramSchmidt(rest)]
        return sp.ImmutableMatrix.hstack(*unit)
    if dim == 2:
        (d,) = directions
        return sp.ImmutableMatrix(_normalize(sp.Matrix([-d[1], d[0]])))
    return None


def _canonical_rotation(vectors: list[dict[Hashable, np.ndarray]], blocks: Sequence[Block]) -> None:
    """Rotate groups of exactly degenerate modes to a canonical, exactly expressible basis."""

    def signature(mode: Mapping[Hashable, np.ndarray]) -> tuple[Any, ...]:
        vals: list[float | None] = []
        for b in blocks:
            if b.row in mode and b.col in mode:
                vals.append(round(abs(float(mode[b.row] @ b.value @ mode[b.col])), 9))
            else:
                vals.append(None)
        return (tuple(sorted(mode, key=str)), tuple(vals))

    groups: dict[tuple[Any, ...], list[int]] = {}
    for alpha, mode in enumerate(vectors):
        groups.setdefault(signature(mode), []).append(alpha)
    for members in groups.values():
        if len(members) < 2:
            continue
        seed_space = next(iter(vectors[members[0]]))
        Q = np.column_stack([vectors[a][seed_space] for a in members])
        projector = Q @ Q.T
        chosen: list[np.ndarray] = []
        for i in range(Q.shape[0]):
            v = projector[:, i].copy()
            for q in chosen:
                v -= (q @ v) * q
            if np.linalg.norm(v) > 1e-8:
                chosen.append(v / np.linalg.norm(v))
            if len(chosen) == len(members):
                break
        R = Q.T @ np.column_stack(chosen)  # old coordinates of the new vectors
        spaces = list(vectors[members[0]])
        rotated = {s: np.column_stack([vectors[a][s] for a in members]) @ R for s in spaces}
        for k, a in enumerate(members):
            vectors[a] = {s: rotated[s][:, k] for s in spaces}


def _rational_direction(v: np.ndarray) -> Any:
    scaled = v / v[np.argmax(np.abs(v))]
    entries = []
    for x in scaled:
        r = sp.nsimplify(float(x), rational=True, tolerance=1e-10)
        if r.q > 10_000:
            return None
        entries.append(r)
    return sp.Matrix(entries)


def _primitive(v: Any) -> Any:
    v = sp.Matrix(v).applyfunc(sp.nsimplify)
    if all(x.is_Rational for x in v):
        denominators = math.lcm(*[int(x.q) for x in v]) if len(v) else 1
        ints = [int(x * denominators) for x in v]
        g = math.gcd(*ints) if any(ints) else 1
        return sp.Matrix([sp.Integer(i // g) for i in ints])
    if v.free_symbols:
        return v.applyfunc(sp.expand)
    # entries a + b sqrt(c): scale the first nonzero entry to 1, then clear denominators
    pivot = next((x for x in v if x != 0), sp.Integer(1))
    v = v.applyfunc(lambda x: sp.radsimp(x / pivot))
    scale = math.lcm(*[int(sp.fraction(sp.together(x))[1]) for x in v if x.is_number] or [1])
    return v.applyfunc(lambda x: sp.expand(x * scale))


def _normalize(v: Any) -> Any:
    norm = sp.sqrt(sum(x**2 for x in v))
    return sp.ImmutableMatrix(v.applyfunc(lambda x: sp.radsimp(x / norm)))
