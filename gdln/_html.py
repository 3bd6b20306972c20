"""HTML tables for notebooks (``_repr_html_``), every cell escaped.

Layer 0, so that values of any layer (a :class:`gdln.Problem` as much as a
:class:`gdln.Timescales`) show as a table in Jupyter without importing what comes after
them.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

__all__ = ["html_table"]


def html_table(
    header: Sequence[str], rows: Sequence[Sequence[object]], *, caption: str = ""
) -> str:
    """A table with a header row and ``rows`` (each cell ``str()``-ed and escaped).

    >>> html_table(["a"], [["<b>"]], caption="x")
    "<table><caption>x</caption><tr><th style='text-align:left'>a</th></tr><tr><td style='text-align:left'>&lt;b&gt;</td></tr></table>"
    """
    head = "".join(f"<th style='text-align:left'>{html.escape(str(h))}</th>" for h in header)
    body = "".join(
        "<tr>"
        + "".join(f"<td style='text-align:left'>{html.escape(str(c))}</td>" for c in row)
        + "</tr>"
        for row in rows
    )
    title = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f"<table>{title}<tr>{head}</tr>{body}</table>"
