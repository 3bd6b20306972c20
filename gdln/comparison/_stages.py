r"""The stage times :func:`gdln.compare` marks on its loss figure (:func:`gdln.timescales`).

From small initial weights learning goes in stages, each escaping its plateau at a time
whose leading order in the initial scale $u_0$ :func:`gdln.timescales` derives from the
reduced ODE (Eq. 10 of Saxe et al. 2022). :func:`predicted_stages` runs it on the problem
and start of a comparison, so theory, exact ODE and simulation read off one figure.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from .._errors import GdlnError
from ..reduction import Reduction
from ..settings._choices import ELIMINATING
from ..settings._declared import Settings
from ..task import Problem

__all__ = ["predicted_stages"]


def predicted_stages(
    problem: Problem,
    chosen: Settings,
    *,
    start: Any,
    t_max: float,
    reduction: Reduction | None = None,
) -> dict[str, Any]:
    r"""The stages of learning that :func:`gdln.timescales` predicts for a comparison.

    Parameters
    ----------
    problem
        The compared problem.
    chosen
        The comparison's settings, resolved at its door: its ``route`` and ``lump``
        (``full``, which timescales does not take, is read as ``symmetry``: the lumpings
        are exact, the stage times do not depend on it).
    start
        The theory's start $b(0)$: one number, or edge -> number (then $u_0$ is their
        geometric mean, the one scale the leading order takes).
    t_max
        The comparison's horizon: stages after it are listed and flagged, not drawn.
    reduction
        The reduction the comparison solved, if any: its stages are read off it (they
        depend on its structure and on $u_0$, not on its $b(0)$) instead of reducing again,
        where it is one :func:`gdln.timescales` takes (lumping none, symmetry or balanced,
        no weight decay).

    Returns
    -------
    dict
        ``u0``, ``route`` (``"aligned"`` or ``"asymptotic"``), ``stages`` (each with
        ``time``, ``time_formula``, ``active``, ``loss`` and ``within_t_max``) and
        ``note`` (why ``stages`` is empty, else ``""``).

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eq. (10); the leading-order escape times of
    :func:`gdln.timescales`.
    """
    from ..stages._timescales import aligned_timescales, stages_of

    route = chosen.route
    values = list(start.values()) if isinstance(start, Mapping) else [start]
    try:
        numbers = [float(v) for v in values]
    except (TypeError, ValueError):
        numbers = []
    if not numbers or not all(0 < v < 1 for v in numbers):
        note = "timescales needs a small start, 0 < b(0) < 1"
        return {"u0": None, "route": None, "stages": [], "note": note}
    u0 = math.exp(sum(math.log(v) for v in numbers) / len(numbers))
    if route == "moments":
        note = "the moment route lists no pathways, so it has no stages"
        return {"u0": u0, "route": None, "stages": [], "note": note}
    lump = "symmetry" if chosen.lump in ELIMINATING else chosen.lump
    reusable = (
        reduction is not None and reduction.lump not in ELIMINATING and not reduction.weight_decay
    )
    try:
        if reusable:
            assert reduction is not None
            result = aligned_timescales(reduction, u0, ode=False)
        else:
            # the file's settings (its weight decay) with the comparison's route and lumping
            settings = dataclasses.replace(problem.settings, route=route, lump=lump, b0=u0)
            result = stages_of(problem, settings, ode=False)
    except GdlnError as err:
        return {"u0": u0, "route": None, "stages": [], "note": str(err)}
    stages = [
        {
            "time": stage.time,
            "time_formula": str(stage.time_formula),
            "active": list(stage.active),
            "loss": stage.loss,
            "within_t_max": stage.time <= t_max,
        }
        for stage in result.stages
    ]
    return {
        "u0": u0,
        "route": result.route,
        "analysis": result.analysis,
        "stages": stages,
        "note": "",
    }
