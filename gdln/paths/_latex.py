r"""LaTeX for notebooks: path statistics (Eqs. 5-6) as one MathJax ``aligned`` block.

Jupyter shows an object's ``_repr_latex_`` through MathJax, which reads one display-math
block: ``$$\begin{aligned} ... \end{aligned}$$``, one ``&=`` per row and no ``%``
comments. :func:`display_math` builds that block; the reduction's reprs use it too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import sympy as sp

__all__ = ["display_math", "latex_matrix", "latex_name", "latex_text", "statistics_latex"]

_LATEX_SPECIAL = {c: "\\" + c for c in "_{}#%&$"} | {
    "\\": r"\backslash ",
    "^": r"\hat{}",
    "~": r"\sim ",
}
"""Math-mode spellings of the characters that LaTeX does not print as themselves."""

SHOWN = 4
"""Matrices of each kind a notebook shows of a statistics; a last row counts the rest."""


def latex_text(text: Any) -> str:
    r"""``text`` as upright LaTeX that MathJax and LaTeX both show as written.

    Inside ``\text{...}`` MathJax prints every character as it stands, so an escape
    such as ``\_`` would show its backslash, while LaTeX needs the escape there. The
    special characters are therefore set in math mode, between ``\text`` pieces.

    >>> latex_text("gated_skip: lump=none")
    '\\text{gated}\\_\\text{skip: lump=none}'
    """
    pieces: list[str] = []
    plain = ""
    for c in str(text):
        if c in _LATEX_SPECIAL:
            if plain:
                pieces.append(r"\text{" + plain + "}")
                plain = ""
            pieces.append(_LATEX_SPECIAL[c])
        else:
            plain += c
    if plain or not pieces:
        pieces.append(r"\text{" + plain + "}")
    return "".join(pieces)


def latex_name(name: Any) -> str:
    r"""A node, edge or path name as upright LaTeX, ``->`` as $\to$.

    >>> latex_name("x_0->h1")
    '\\mathrm{x\\_0} \\to \\mathrm{h1}'
    """
    parts = [
        r"\mathrm{" + "".join(_LATEX_SPECIAL.get(c, c) for c in part) + "}"
        for part in str(name).split("->")
    ]
    return r" \to ".join(parts)


def latex_matrix(m: Any) -> str:
    """A sympy matrix or a float array as a bracketed LaTeX matrix (floats to 6 digits)."""
    if not isinstance(m, sp.MatrixBase):
        m = sp.Matrix(np.asarray(m, dtype=float)).evalf(6)
    return sp.latex(m, mat_delim="[", mat_str="matrix")


def display_math(rows: Sequence[str]) -> str:
    r"""Rows of ``left &= right`` as one display-math ``aligned`` block for MathJax."""
    return "$$\\begin{aligned}\n" + " \\\\\n".join(rows) + "\n\\end{aligned}$$"


class Statistics(Protocol):
    """What :func:`statistics_latex` reads: a :class:`~gdln.paths.PathStatistics`."""

    @property
    def exact(self) -> bool: ...
    @property
    def paths(self) -> Sequence[Any]: ...
    @property
    def input_output(self) -> Mapping[Any, Any]: ...
    @property
    def input(self) -> Mapping[Any, Any]: ...


def statistics_latex(stats: Statistics, *, limit: int | None = SHOWN) -> str:
    r"""$\Sigma^{yx}(p)$ (Eq. 5) and $\Sigma^x(j,p)$ (Eq. 6) of Saxe et al. 2022 as LaTeX.

    Parameters
    ----------
    stats
        The statistics to show.
    limit
        At most this many matrices of each kind; a last row counts the others and says
        how to see them all (``None``: every matrix).

    Returns
    -------
    str
        One ``$$\begin{aligned}...\end{aligned}$$`` block, one matrix per row.
    """
    kind = "exact" if stats.exact else "float"
    head = f"{len(stats.paths)} active paths, {len(stats.input)} co-active pairs ({kind})"
    rows = [rf"&{latex_text(head)}"]
    limit = max(len(stats.input_output), len(stats.input)) if limit is None else limit
    for p, m in list(stats.input_output.items())[:limit]:
        rows.append(rf"\Sigma^{{yx}}({latex_name(p)}) &= {latex_matrix(m)}")
    rows += _more(len(stats.input_output), limit, r"\Sigma^{yx}")
    for (j, p), m in list(stats.input.items())[:limit]:
        rows.append(rf"\Sigma^{{x}}({latex_name(j)},\ {latex_name(p)}) &= {latex_matrix(m)}")
    rows += _more(len(stats.input), limit, r"\Sigma^{x}")
    return display_math(rows)


def _more(total: int, limit: int, what: str) -> list[str]:
    """A row saying how many of ``total`` matrices were left out, if any."""
    if total <= limit:
        return []
    more = latex_text(f"and {total - limit} more")
    how = latex_text("(all of them: gdln stats FILE --format latex)")
    return [rf"&\ldots\ {more}\ {what}\ {how}"]
