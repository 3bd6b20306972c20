r"""Second moments typed by a user, checked for being the moments of some data.

A ``moments:`` dataset gives $\langle a\,b^\top\rangle$ block by block (Eqs. 5-6 of Saxe
et al. 2022 are averages of such products). Blocks that come from data satisfy two
things that typed numbers need not:

* **symmetry**: $\langle b\,a^\top\rangle = \langle a\,b^\top\rangle^\top$, so a block
  given both ways must agree, and $\langle a\,a^\top\rangle$ is symmetric;
* **positivity**: the joint second moment $\langle z z^\top\rangle$ of the stacked
  fields $z = (a, b, \dots)$ is positive semidefinite, since
  $v^\top\langle z z^\top\rangle v = \langle (v^\top z)^2\rangle \ge 0$.

Both are checked on every set of fields whose blocks are all given. A typed decimal is
taken as rounded to its last digit: an entry written ``0.333`` may be off by
$\tfrac12 10^{-3}$ (:func:`rounding`), and by Weyl's inequality a symmetric change
$E$ moves every eigenvalue by at most $\lVert E\rVert_2 \le \lVert E\rVert_F$, so an
eigenvalue down to $-\lVert E\rVert_F$ (plus float rounding, $10^{-12}$ of the largest
eigenvalue) is taken as zero. Exact entries (integers, fractions such as ``1/3``) carry no
rounding.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

import networkx as nx
import numpy as np
import sympy as sp

from .._errors import TaskSpecError

__all__ = ["MAX_FIELD_SETS", "InconsistentMomentsError", "check_moments", "rounding"]

Pair = tuple[str, str]

FLOAT_RTOL = 1e-12
"""Eigenvalues and differences within this fraction of the largest eigenvalue (or
entry) are float rounding, whatever was typed."""

MAX_FIELD_SETS = 1000
"""Most sets of mutually given fields whose joint moment is checked (a dataset whose
blocks form more such sets is checked on the first ones found)."""

_LITERAL = re.compile(r"(?<![A-Za-z_0-9.])(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?(?![A-Za-z_0-9.])")


class InconsistentMomentsError(TaskSpecError):
    """Second moments no data have, found by :func:`check_moments` in a dataset.

    Parameters
    ----------
    dataset
        The dataset's name.
    block
        Where: ``(a, b)`` for the block ``<a b^T>``, ``()`` for the dataset as a whole.
    reason
        What is wrong, in one line.
    """

    def __init__(self, dataset: str, block: tuple[str, ...], reason: str) -> None:
        place = f"{block[0]}.{block[1]}: " if len(block) == 2 else ""
        super().__init__(f"dataset {dataset!r}: moments: {place}{reason}")
        self.block, self.reason = block, reason


def rounding(raw: Any, value: Any) -> float:
    r"""How far an entry may be from what its writer meant: half a unit in its last digit.

    A YAML number written with a decimal point or an exponent (``0.333``, ``1e-3``) may
    be off by half a unit in its last place; in an expression each such literal $L$
    contributes its relative rounding, $\lvert v\rvert\sum_L \tfrac12 u_L/\lvert L\rvert$
    (first order). Integers and fractions (``1/3``) are exact: 0.

    >>> rounding(0.333, 0.333), rounding("1/3", sp.Rational(1, 3)), rounding(2, 2)
    (0.0005, 0.0, 0.0)
    >>> rounding("0.5*k", 1.0)
    0.1
    """
    if isinstance(raw, (bool, int)):
        return 0.0
    if isinstance(raw, float):
        return _half_unit(repr(raw)) or 0.0
    text = str(raw).strip()
    alone = _half_unit(text) if _LITERAL.fullmatch(text) else None
    if alone is not None:
        return alone
    relative = 0.0
    for literal in _LITERAL.findall(text):
        half = _half_unit(literal)
        if half is not None:
            relative += half / max(abs(float(literal)), half)
    if not relative:
        return 0.0
    try:
        size = abs(float(value))
    except (TypeError, ValueError):
        size = 1.0
    return relative * size


def _half_unit(literal: str) -> float | None:
    """Half a unit in the last place of a decimal literal; ``None`` for an integer."""
    if not any(c in literal for c in ".eE"):
        return None
    try:
        exponent = Decimal(literal).as_tuple().exponent
    except InvalidOperation:  # pragma: no cover - the pattern matches numbers only
        return None
    return 0.5 * 10.0 ** int(exponent)


def check_moments(
    moments: Mapping[Pair, Any],
    slack: Mapping[Pair, np.ndarray],
    fail: Callable[[tuple[str, ...], str], Exception],
    *,
    what: str = "second moment",
    title: str | None = None,
) -> None:
    r"""Refuse typed second moments that no data have (see the module docstring).

    Parameters
    ----------
    moments
        ``(a, b)`` -> $\langle a\,b^\top\rangle$, exact sympy matrices or arrays of floats.
    slack
        ``(a, b)`` -> the rounding of each entry (:func:`rounding`), same shape.
    fail
        Makes the error to raise from the key's parts (``(a, b)`` for a block, ``()`` for
        the dataset) and the message.
    what
        The name of the matrix in messages (``"covariance"`` for a teacher's inputs).
    title
        How messages name a field's own block (default ``<a a^T>``).

    Raises
    ------
    Exception
        What ``fail`` makes: for a block given both ways that disagrees, or one that is
        not symmetric, beyond the typed rounding; for a set of fields whose joint second
        moment has an eigenvalue below minus the rounding (not positive semidefinite).

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eqs. (5)-(6): the statistics are averages of
    $y x^\top$ and $x x^\top$ over data, hence symmetric and positive semidefinite
    jointly.
    """
    numbers: dict[Pair, np.ndarray] = {}
    for (a, b), block in moments.items():
        if a == b or ((b, a) in moments and a < b):
            other = moments[(b, a)]
            floats = not (_exact(block) or _exact(other))
            check = _check_transpose_floats if floats else _check_transpose
            check(a, b, block, other, slack, fail, what, title)
        if not _exact(block):
            numbers[(a, b)] = np.asarray(block, dtype=float)
        elif not block.free_symbols:
            numbers[(a, b)] = np.array(block.evalf(), dtype=float).reshape(block.shape)
    given = nx.Graph()
    for a, b in numbers:
        given.add_node(a)
        if a != b:
            given.add_edge(a, b)
    for fields in itertools.islice(nx.find_cliques(given), MAX_FIELD_SETS):
        if any((f, f) not in numbers for f in fields):
            continue
        found = _negative(sorted(fields), numbers, slack)
        if found is None:
            continue
        # the smallest failing set of these fields: one field, then pairs, then all
        for size in range(1, len(fields)):
            for part in itertools.combinations(sorted(fields), size):
                smaller = _negative(list(part), numbers, slack)
                if smaller is not None:
                    _refuse(list(part), *smaller, fail=fail, what=what, title=title)
        _refuse(sorted(fields), *found, fail=fail, what=what, title=title)


def _check_transpose(
    a: str,
    b: str,
    block: Any,
    other: Any,
    slack: Mapping[Pair, np.ndarray],
    fail: Callable[[tuple[str, ...], str], Exception],
    what: str,
    title: str | None,
) -> None:
    """``<a b^T>`` against ``<b a^T>^T`` (for ``a == b``: against its own transpose)."""
    rows, cols = block.shape  # a sympy matrix, or floats beside one
    for i, j in itertools.product(range(rows), range(cols)):
        if a == b and j <= i:
            continue
        here, there = block[i, j], other[j, i]
        difference = sp.expand(here - there)
        if difference == 0:
            continue
        if difference.free_symbols:
            close = False
        else:
            allowed = slack[(a, b)][i, j] + slack[(b, a)][j, i]
            scale = max(abs(float(here)), abs(float(there)), 1e-300)
            close = abs(float(difference)) < allowed + FLOAT_RTOL * scale
        if close:
            continue
        raise _not_transposed(a, b, (i, j), (_shown(here), _shown(there)), fail, what, title)


def _exact(block: Any) -> bool:
    """Whether a block is a sympy matrix (else an array of floats)."""
    return isinstance(block, sp.MatrixBase)


def _check_transpose_floats(
    a: str,
    b: str,
    block: Any,
    other: Any,
    slack: Mapping[Pair, np.ndarray],
    fail: Callable[[tuple[str, ...], str], Exception],
    what: str,
    title: str | None,
) -> None:
    """:func:`_check_transpose` for blocks of floats, in numpy (any size)."""
    here, there = np.asarray(block, dtype=float), np.asarray(other, dtype=float).T
    allowed = np.asarray(slack[(a, b)]) + np.asarray(slack[(b, a)]).T
    scale = np.maximum(np.maximum(np.abs(here), np.abs(there)), 1e-300)
    bad = np.argwhere(~(np.abs(here - there) <= allowed + FLOAT_RTOL * scale))
    if a == b:
        bad = bad[bad[:, 1] > bad[:, 0]]
    if not len(bad):
        return
    i, j = (int(k) for k in bad[0])
    shown = (f"{here[i, j]:.6g}", f"{there[i, j]:.6g}")
    raise _not_transposed(a, b, (i, j), shown, fail, what, title)


def _not_transposed(
    a: str,
    b: str,
    entry: tuple[int, int],
    shown: tuple[str, str],
    fail: Callable[[tuple[str, ...], str], Exception],
    what: str,
    title: str | None,
) -> Exception:
    """The error for entry ``[i, j]`` of ``<a b^T>`` that is not ``[j, i]`` of ``<b a^T>``."""
    (i, j), (here, there) = entry, shown
    if a == b:
        return fail(
            (a, a),
            f"{title or f'<{a} {a}^T>'} is not symmetric, as a {what} is: entry [{i}, {j}] is "
            f"{here} but [{j}, {i}] is {there}",
        )
    return fail(
        (a, b),
        f"<{a} {b}^T> entry [{i}, {j}] is {here} but {b}.{a} gives <{b} {a}^T> entry "
        f"[{j}, {i}] = {there}; a block given both ways must be the other's transpose",
    )


def _joint(fields: list[str], numbers: Mapping[Pair, np.ndarray]) -> np.ndarray:
    """The stacked fields' joint second moment, each block as given (or transposed)."""
    rows = []
    for a in fields:
        row = []
        for b in fields:
            block = numbers.get((a, b))
            row.append(block if block is not None else numbers[(b, a)].T)
        rows.append(np.hstack(row))
    matrix = np.vstack(rows)
    return (matrix + matrix.T) / 2


def _joint_slack(fields: list[str], numbers: Mapping[Pair, np.ndarray], slack: Any) -> float:
    """$\\lVert E\\rVert_F$ of the largest change the typed rounding allows."""
    total = 0.0
    for a in fields:
        for b in fields:
            parts = [slack[(a, b)]] if (a, b) in numbers else []
            parts += [slack[(b, a)].T] if (b, a) in numbers else []
            total += float(np.sum(np.maximum.reduce(parts) ** 2))
    return float(np.sqrt(total))


def _negative(
    fields: list[str], numbers: Mapping[Pair, np.ndarray], slack: Any
) -> tuple[float, float] | None:
    """The lowest eigenvalue of the fields' joint moment and the bound it is below, if
    it is below minus the rounding; else ``None``."""
    values = np.linalg.eigvalsh(_joint(fields, numbers))
    allowed = _joint_slack(fields, numbers, slack) + FLOAT_RTOL * max(
        float(np.max(np.abs(values))), 1e-300
    )
    lowest = float(values[0])
    return (lowest, allowed) if lowest < -allowed else None


def _refuse(
    fields: list[str],
    lowest: float,
    allowed: float,
    *,
    fail: Callable[[tuple[str, ...], str], Exception],
    what: str,
    title: str | None,
) -> None:
    names = ", ".join(fields)
    own = title or f"<{fields[0]} {fields[0]}^T>"
    block = own if len(fields) == 1 else f"the joint {what} of {names}"
    typed = f"; typed decimals' rounding admits down to {-allowed:.3g}" if allowed > 1e-9 else ""
    raise fail(
        (fields[0], fields[0]) if len(fields) == 1 else (),
        f"{block} is not positive semidefinite, so no data have it: eigenvalue {lowest:.4g}{typed}",
    )


def _shown(value: Any) -> str:
    """An entry as a message shows it: short, exact where it is short."""
    text = str(value)
    return text if len(text) <= 24 else f"{float(value):.6g}"
