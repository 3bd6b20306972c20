"""The progress bar of a simulation: a widget in a notebook that has widgets, else text.

``tqdm.auto`` picks the notebook bar inside any Jupyter kernel and, where ``ipywidgets``
is not installed, warns ``TqdmWarning: IProgress not found`` on import, in every notebook
that imports gdln (the docs' walkthrough page included). Here the widget bar is taken
only when ``ipywidgets`` imports; otherwise the plain text bar, with no warning.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["progress_bar"]


def progress_bar(*, total: int, disable: bool, desc: str, unit: str) -> Any:
    """A tqdm bar over ``total`` steps (nothing shown when ``disable``).

    Parameters
    ----------
    total
        The number of steps.
    disable
        Show nothing.
    desc, unit
        The bar's label and the name of one step.

    Returns
    -------
    tqdm.std.tqdm
        ``tqdm.notebook.tqdm`` in a Jupyter kernel where ``ipywidgets`` imports, else the
        text bar ``tqdm.std.tqdm``.
    """
    return bar_class()(total=total, disable=disable, desc=desc, unit=unit)


def bar_class() -> type:
    """The tqdm class :func:`progress_bar` uses here (see the module's docstring)."""
    if "ipykernel.zmqshell" in sys.modules:  # inside a Jupyter kernel
        try:
            import ipywidgets  # noqa: F401
        except ImportError:
            pass
        else:
            from tqdm.notebook import tqdm as widget

            return widget
    from tqdm.std import tqdm as text

    return text
