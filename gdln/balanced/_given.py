r"""The exact dynamics from given weights: λ-balanced where the graph qualifies, else full.

What ``gdln solve FILE --weights W.npz`` and ``--balanced LAM`` compute. A start that
:func:`~gdln.balanced.solve_balanced` covers (independent whitened two-layer pathways,
each λ-balanced, no weight decay) is solved in closed form (Braun et al. 2022; Dominé et
al. 2025); any other start by the full-matrix gradient flow of Eqs. (3)-(4) of Saxe,
Sodhani & Lewallen (2022) (:func:`gdln.solve` with ``weights``, with weight decay where set).
``meta["route"]`` says which, and ``meta["why"]`` why not the closed form.

Weight files are read only through the bounded reader (:func:`gdln._bounded._npz.read_npz`,
nothing unpickled): one array ``W/<source>-><target>`` of shape ``(|target|, |source|)`` per
trained edge (the names :func:`gdln.simulate` records), or a trajectory saved by
:meth:`gdln.Trajectory.save` whose ``series/W/<edge>`` arrays ``(T, seeds, |t|, |s|)`` give
their first record (first seed).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .._bounded._npz import FilePlace, read_npz
from .._edge import Edge, edge_name
from .._errors import GdlnError, GraphSpecError
from .._runtime._blas import one_blas_thread
from ..settings._declared import Settings
from ..settings._door import AT_THE_DOOR, door
from ..solution._series import edge_in_key, edge_key, matrix_key
from ..solution._trajectory import Trajectory
from ..task._problem import Problem
from ._errors import BalancedSpecError, NotBalancedError
from ._solve import solve_balanced

__all__ = ["read_weight_file", "solve_from_weights"]

TRAJECTORY_PREFIX = "series/"
"""Where a saved trajectory keeps its series (:meth:`gdln.Trajectory.save`)."""


def read_weight_file(problem: Problem, path: str | Path) -> dict[Edge, np.ndarray]:
    """Edge -> initial weights from an ``.npz`` file (module docstring), checked.

    Parameters
    ----------
    problem
        The network the weights are for.
    path
        The ``.npz`` file.

    Returns
    -------
    dict
        Every trained edge -> ``(|target|, |source|)`` float array; fixed edges
        $W_e = c\\,I$.

    Raises
    ------
    GraphSpecError
        One line naming the file, the array and what is wrong: not a bounded ``.npz``
        of numbers, an array that names no edge or has the wrong shape or non-finite
        values, two arrays for one edge (``W/x->h`` and ``series/W/x->h``), or a trained
        edge without weights.
    """
    path = Path(path)
    scope = FilePlace(str(path), key="weights")
    arrays = read_npz(path, scope, skip=("meta",))
    graph = problem.graph
    by_name = {edge_name(e): e for e in graph.edges}
    out: dict[Edge, np.ndarray] = {}
    given: dict[Edge, str] = {}  # the array that gave each edge its weights
    for key, array in arrays.items():
        recorded = key.startswith(TRAJECTORY_PREFIX)
        name = edge_in_key("W", key[len(TRAJECTORY_PREFIX) :] if recorded else key)
        if name is None:
            if recorded or key in ("t", "loss"):
                continue  # another series of a saved trajectory
            raise scope.at(f"[{key!r}]").fail(
                f"{path.name}: array {key!r} names no weight; expected "
                f"{edge_key('W', '<source>-><target>')!r}"
            )
        edge = by_name.get(name)
        where = scope.at(f"[{key!r}]")
        if edge is None:
            raise where.fail(
                f"{path.name}: {name!r} is not an edge of {problem.source}; expected one of "
                f"{', '.join(sorted(by_name))}"
            )
        if edge in given:
            raise where.fail(
                f"{path.name}: arrays {given[edge]!r} and {key!r} both give the weights of "
                f"{name}; keep one"
            )
        given[edge] = key
        shape = (int(graph.nodes[edge[1]]["size"]), int(graph.nodes[edge[0]]["size"]))
        value = np.asarray(array, dtype=float)
        while value.ndim > 2 and recorded:
            value = value[0]  # the first record, then the first seed
        if value.shape != shape:
            raise where.fail(
                f"{path.name}: shape {tuple(np.shape(array))}; expected {shape} "
                "(|target|, |source|)" + (" after the record and seed axes" if recorded else "")
            )
        if not np.all(np.isfinite(value)):
            raise where.fail(f"{path.name}: holds non-finite values")
        out[edge] = value
    for edge in graph.edges:
        fixed = graph.edges[edge].get("fixed")
        if fixed is not None:
            out[edge] = float(fixed) * np.eye(int(graph.nodes[edge[1]]["size"]))
        elif edge not in out:
            raise scope.fail(
                f"{path.name}: no array {edge_key('W', edge)!r} for the trained edge "
                f"{edge_name(edge)}"
            )
    return out


@door
@one_blas_thread()
def solve_from_weights(
    problem: Problem,
    weights: Mapping[Edge, Any],
    *,
    t_max: float | str | None = None,
    points: int | str | None = None,
    weight_decay: float | str | None = None,
    resolved: Settings = AT_THE_DOOR,
) -> Trajectory:
    r"""The gradient flow from given weights: closed form where it holds, else full matrices.

    Parameters
    ----------
    problem
        The network and its task.
    weights
        Edge -> ``(|target|, |source|)`` initial weights, every trained edge.
    t_max, points, weight_decay
        As for :func:`gdln.solve` (``None``: the problem's settings).

    Returns
    -------
    Trajectory
        With ``meta["route"] == "lambda-balanced"``: :func:`gdln.solve_balanced`'s output
        (network function and representations per pathway, Braun et al. 2022;
        Dominé et al. 2025). Else ``"matrix"``: :func:`gdln.solve`'s from the weights (every
        ``W[u->v]``) plus the representations ``"WTW[u->v]"`` $W_e^\top W_e$ and
        ``"WWT[u->v]"`` $W_eW_e^\top$ of every trained edge; ``meta["why"]`` says why
        the closed form did not apply.

    Raises
    ------
    GdlnError
        A setting is malformed, the weights do not fit the graph, or the solver fails.
    """
    from ..solution._full import full_solution

    settings = resolved
    why = ""
    if settings.weight_decay:
        why = f"weight_decay {settings.weight_decay:g}: the closed form holds without decay"
    else:
        try:
            trajectory = solve_balanced(
                problem, weights, t_max=settings.t_max, points=settings.points
            )
        except (BalancedSpecError, NotBalancedError) as err:
            why = str(err)
        else:
            return trajectory  # meta["route"] == "lambda-balanced"
    try:
        full = full_solution(problem, dataclasses.replace(settings, dynamics="flow"), dict(weights))
    except GraphSpecError:
        raise
    except GdlnError as err:
        raise GdlnError(f"{problem.source}: weights: {err}") from err
    series = dict(full.series)
    for edge in weights:
        if problem.graph.edges[edge].get("fixed") is not None:
            continue
        stacked = series[matrix_key("W", edge)]
        series[matrix_key("WTW", edge)] = np.swapaxes(stacked, 1, 2) @ stacked
        series[matrix_key("WWT", edge)] = stacked @ np.swapaxes(stacked, 1, 2)
    meta = {**full.meta, "route": "matrix", "why": why}
    return dataclasses.replace(full, series=series, meta=meta)
