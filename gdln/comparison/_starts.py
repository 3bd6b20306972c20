r"""Where :func:`gdln.compare` starts the theory: one rule, and each curve's start in words.

The theory (and the decoupled run of Eq. 9 of Saxe et al. 2022) starts either at $b(0)$
= ``b0`` or at the mode strengths of the random runs' own initial weights
(:func:`~gdln.comparison.initial_mode_strengths`). ``theory_start="auto"`` honours the
nearer source: a ``b0`` or ``init_scale`` given for the call, else the file's
``solve.b0`` (before its ``simulate.init_scale``), else the random weights.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..reduction._reduce import derive
from ..settings._declared import Settings
from ..simulation import initial_weights
from ..task._problem import Problem
from ._modes import initial_mode_strengths

__all__ = ["start_rule", "starts_in_words", "theory_start"]


def start_rule(problem: Problem, chosen: Settings) -> tuple[str, str]:
    """Where the theory starts (``"b0"`` or ``"random"``) and which source decided, by the
    one rule of ``theory_start="auto"``: the nearer source wins, the call before the file
    (``chosen.called``, ``problem.settings.written``), and within one source b0 before
    init_scale (:data:`gdln.settings.THEORY_STARTS`)."""
    rule = chosen.theory_start
    if rule != "auto":
        return rule, f"theory_start {rule}"
    written = problem.settings.written
    if "b0" in chosen.called:
        return "b0", "b0 given for this run"
    if "init_scale" in chosen.called:
        return "random", "init_scale given for this run"
    if "b0" in written:
        return "b0", "the file's solve.b0"
    if "init_scale" in written:
        return "random", "the file's simulate.init_scale"
    return "random", "no b0 given: the random weights' own mode strengths"


def starts_in_words(described: Mapping[str, Any], chosen: Settings, rule: str) -> dict[str, str]:
    """Where each curve starts, in words (``metrics.json`` ``starts``, the legends)."""
    values = list(described["b0"].values())
    random = f"{chosen.init_scheme}, init_scale {float(chosen.init_scale):g}"
    if rule == "random":
        theory = (
            f"b(0) of the random weights ({min(values):.3g} to {max(values):.3g})"
            if values
            else "b(0) of the random weights"
        )
    else:
        theory = f"b(0) = {values[0]:g}" if len(set(values)) == 1 else "b(0) per edge (b0)"
    return {"ode": theory, "gd_map": theory, "decoupled": f"{theory}, Eq. 9", "random": random}


def theory_start(problem: Problem, chosen: Settings, rule: str) -> Any:
    """$b(0)$ of the theory and the decoupled run: ``chosen.b0`` (rule ``"b0"``), or per
    edge the mode strengths of the random runs' own initial weights (rule ``"random"``,
    :func:`initial_mode_strengths`, averaged over the seeds)."""
    if rule == "b0":
        return chosen.b0
    drawn = initial_weights(
        problem.graph,
        init_scheme=chosen.init_scheme,
        init_scale=chosen.init_scale,
        seeds=chosen.seeds,
        seed=chosen.seed,
    )
    modes_only = derive(problem, replace(problem.settings, lump="none", route="contexts"))
    return initial_mode_strengths(modes_only, drawn, seed=chosen.seed)
