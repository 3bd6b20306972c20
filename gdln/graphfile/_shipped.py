"""The paper's graphs that ship with gdln, found by name.

The graph files of the repository's top-level ``graphs/`` folder are package data: the
package ``gdln.graphs`` is mapped to that folder (``[tool.setuptools.package-dir]`` in
``pyproject.toml``), so a wheel installs them as ``gdln/graphs/*.yaml``, while a checkout
and an editable install read them where they are. Every reader of graph files takes a name
such as ``routing`` in place of a path (:func:`find_graph`, used by :func:`gdln.load`); a
path that exists always wins over a name.

Each file says what it is in two top-level keys that the loader does not use:
``description`` (one line) and ``reproduces`` (the paper and figure it reproduces), which
:func:`shipped_graphs` and ``gdln graphs`` list.

>>> [graph.name for graph in shipped_graphs()][:3]
['chain', 'context', 'crosspath']
>>> find_graph("routing").name
'routing.yaml'
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path

from .._bounded._read import read_text
from .._errors import GraphSpecError
from ._safe_read import parse_yaml

__all__ = ["ShippedGraph", "find_graph", "graphs_folder", "shipped_graphs"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
"""What counts as a graph's name on the command line: no folder, no extension."""


@dataclass(frozen=True)
class ShippedGraph:
    """One graph file shipped with gdln.

    Parameters
    ----------
    name
        The name it is found by (the file's stem), e.g. ``"routing"``.
    description
        One line: what the network and its task are.
    reproduces
        The paper and figure (or section) it reproduces; empty for a test case.
    path
        The file.
    """

    name: str
    description: str
    reproduces: str
    path: Path


def graphs_folder() -> Path:
    """The folder of the shipped graph files.

    Returns
    -------
    pathlib.Path
        ``gdln/graphs`` of an installed wheel, else the top-level ``graphs/`` of the
        checkout (or editable install) that this package belongs to.

    Raises
    ------
    GraphSpecError
        Neither exists: the installation is broken.
    """
    package = Path(__file__).resolve().parent.parent
    installed = package / "graphs"
    if installed.is_dir():
        return installed
    checkout = package.parent / "graphs"
    if checkout.is_dir() and (package.parent / "pyproject.toml").is_file():
        return checkout
    raise GraphSpecError(
        f"the shipped graphs are missing (neither {installed} nor {checkout}); reinstall gdln"
    )


@functools.cache
def _catalogue(folder: Path) -> tuple[ShippedGraph, ...]:
    graphs = []
    for path in sorted(folder.glob("*.yaml")):
        document = parse_yaml(read_text(path), source=str(path))
        meta = document if isinstance(document, dict) else {}
        graphs.append(
            ShippedGraph(
                name=path.stem,
                description=str(meta.get("description", "")),
                reproduces=str(meta.get("reproduces", "")),
                path=path,
            )
        )
    return tuple(graphs)


def shipped_graphs() -> tuple[ShippedGraph, ...]:
    """The graph files shipped with gdln, by name, with what each reproduces.

    Returns
    -------
    tuple of ShippedGraph
        In the order of their names.

    Raises
    ------
    GraphSpecError
        The shipped graphs are missing (a broken installation).

    Examples
    --------
    >>> routing = {g.name: g for g in shipped_graphs()}["routing"]
    >>> routing.reproduces
    'Saxe, Sodhani & Lewallen 2022, Figs. 4e-h, 5c and 6'
    """
    return _catalogue(graphs_folder())


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except (OSError, ValueError):  # a name too long for the file system: not a file
        return False


def find_graph(path: str | os.PathLike[str]) -> Path:
    """The graph file that ``path`` names: the path itself when it exists, else the shipped
    graph of that name.

    Parameters
    ----------
    path
        A file, or the name of a shipped graph (``"routing"``: no folder, no extension).

    Returns
    -------
    pathlib.Path
        ``path`` when it exists or is not a bare name (reading it then says what is
        wrong), else the shipped file.

    Raises
    ------
    GraphSpecError
        ``path`` is a bare name that is neither a file nor a shipped graph; the message
        lists the shipped names.
    """
    given = Path(path)
    text = os.fspath(path)
    if not _NAME.fullmatch(text) or _exists(given):
        return given
    shipped = shipped_graphs()
    for graph in shipped:
        if graph.name == text:
            return graph.path
    names = ", ".join(graph.name for graph in shipped)
    raise GraphSpecError(
        f"no such file, and no shipped graph of that name (shipped: {names}; gdln graphs "
        "lists them)",
        source=text,
    )
