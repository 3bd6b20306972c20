"""Writing figures: every figure gdln or its examples make is saved the same way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["save_figure"]


def save_figure(
    fig: Any,
    out: str | Path,
    stem: str,
    *,
    dpi: int = 150,
    formats: tuple[str, ...] = ("png", "svg"),
    tight: bool = False,
) -> list[Path]:
    """Write a matplotlib figure as ``out/stem.png`` and ``out/stem.svg``, then close it.

    Parameters
    ----------
    fig
        A ``matplotlib.figure.Figure``.
    out
        The folder; it must exist.
    stem
        File name without extension.
    dpi
        Resolution of the raster formats.
    formats
        Extensions to write, each a format matplotlib knows.
    tight
        Call ``fig.tight_layout()`` first (not for figures made with a constrained layout).

    Returns
    -------
    list of Path
        The files written, in the order of ``formats``.
    """
    import matplotlib.pyplot as plt

    if tight:
        fig.tight_layout()
    paths = [Path(out) / f"{stem}.{ext}" for ext in formats]
    for path in paths:
        fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return paths
