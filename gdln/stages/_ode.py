r"""The exact reduced ODE beside the leading order: each stage's time to half-completion.

On the aligned route each mode's reduced ODE (Eq. 10 of Saxe, Sodhani & Lewallen 2022),
started at $b_e(0) = \pm u_0$, gives its own time for each stage: the first time the
maps of the pathways the stage completes reach half their plateau values. Its cost is
bounded, whatever $u_0$ and depth: each mode is stepped (LSODA, stiff where it must) only
until its last stage is done, never to a fixed multiple of the last time (from
$u_0 = 10^{-6}$ a four-layer network's stages come at $10^{11}$, and the fixed point after
them is where a stepper spends its steps), and within a budget of evaluations of the
right-hand side, past which the ODE column stops and says where.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.integrate import LSODA, OdeSolution
from scipy.optimize import brentq

from .._errors import GdlnError
from ._aligned import ModeNetwork, ModeStage

__all__ = ["BUDGET", "ModeTrajectory", "mode_trajectory", "ode_half_time"]

BUDGET = 100_000
"""The most evaluations of one mode's right-hand side that the ODE column may spend."""
DONE = 0.9  # a mode is followed until its last stage's progress passes this


@dataclass(frozen=True)
class ModeTrajectory:
    """The dense solution of one mode's reduced ODE on ``[0, t_reached]``.

    Parameters
    ----------
    solution
        :class:`scipy.integrate.OdeSolution` (``None`` if no step was taken).
    t_reached
        Where it ends.
    complete
        ``False`` when the budget stopped it before its last stage was done.
    evaluations
        The evaluations of the right-hand side it took.
    """

    solution: OdeSolution | None
    t_reached: float
    complete: bool
    evaluations: int


def mode_trajectory(
    network: ModeNetwork,
    u0: float,
    t_end: float,
    signs: np.ndarray | None = None,
    *,
    last: ModeStage | None = None,
    budget: int = BUDGET,
) -> ModeTrajectory:
    r"""The mode's reduced ODE from $b_e(0) = \pm u_0$, until ``last`` is done or ``t_end``.

    Raises
    ------
    GdlnError
        If the stepper fails.
    """
    n = len(network.names)
    start = np.full(n, u0) if signs is None else u0 * np.asarray(signs, float)
    solver = LSODA(lambda _t, x: network.flow(x), 0.0, start, t_end, rtol=1e-10, atol=1e-12 * u0)
    times, pieces = [0.0], []
    target = _targets([last]) if last is not None else None
    complete = True
    while solver.status == "running":
        message = solver.step()
        if solver.status == "failed":
            raise GdlnError(f"mode {network.mode}: the reduced ODE failed: {message}")
        times.append(solver.t)
        pieces.append(solver.dense_output())
        if target is not None and _progress(target, solver.y[:, None])[0] >= DONE:
            break
        if solver.nfev > budget:
            complete = False
            break
    solution = OdeSolution(times, pieces) if pieces else None
    return ModeTrajectory(solution, float(times[-1]), complete, int(solver.nfev))


Rows = list[tuple[np.ndarray, float]]


def _targets(stages: Sequence[ModeStage]) -> tuple[Rows, float]:
    """The weighted path products whose sum measures the stages' progress, and its norm."""
    rows: Rows = []
    norm = 0.0
    for stage in stages:
        for i in stage.new_paths:
            p = stage.network.paths[i]
            target = p.value(stage.plateau)
            rows.append((p.powers, target * p.factor))
            norm += target**2
        if not stage.new_paths:
            for i in stage.escaping:
                target = float(stage.plateau[i])
                unit = np.zeros(len(stage.plateau), dtype=int)
                unit[i] = 1
                rows.append((unit, target))
                norm += target**2
    return rows, norm


def _progress(target: tuple[Rows, float], xs: np.ndarray) -> np.ndarray:
    r"""$\sum_p b_p(x) b_p^* / \sum_p (b_p^*)^2$ at each column of ``xs``."""
    rows, norm = target
    total = np.zeros(xs.shape[1])
    for powers, weight in rows:
        total = total + weight * np.prod(xs ** powers[:, None], axis=0)
    return total / norm if norm else total


def ode_half_time(parts: Sequence[tuple[ModeStage, ModeTrajectory]], t_from: float) -> float | None:
    """First time after ``t_from`` at which the stage's new pathway maps are half done.

    ``parts``: per mode of the stage, its :class:`ModeStage` and trajectory. The
    progress is $\\sum_p b_p(t) b_p^* / \\sum_p (b_p^*)^2$ over the pathways the stage
    completes ($b_p^*$ their plateau values; the escaping variables if none). ``None``
    if it is not reached where every trajectory is known.
    """
    if any(trajectory.solution is None for _, trajectory in parts):
        return None
    terms = [(trajectory, _targets([stage])) for stage, trajectory in parts]
    norm = sum(target[1] for _, target in terms)
    if norm == 0:
        return None
    t_end = min(trajectory.t_reached for trajectory, _ in terms)
    if t_end <= t_from:
        return None

    def progress(t: np.ndarray) -> np.ndarray:
        total = np.zeros(np.shape(t))
        for trajectory, (rows, _) in terms:
            xs = np.asarray(trajectory.solution(t))  # type: ignore[misc]
            total = total + _progress((rows, 1.0), xs.reshape(len(xs), -1)).reshape(np.shape(t))
        return np.asarray(total / norm - 0.5)

    # the steps the stepper took resolve the transitions; a uniform grid the plateaus
    steps = np.concatenate([np.asarray(tr.solution.ts) for tr, _ in terms])  # type: ignore[union-attr]
    grid = np.unique(np.concatenate([steps, np.linspace(t_from, t_end, 2001)]))
    grid = grid[(grid >= t_from) & (grid <= t_end)]
    values = progress(grid)
    above = np.flatnonzero(values >= 0)
    if not above.size:
        return None
    i = int(above[0])
    if i == 0:
        return float(grid[0])
    return float(brentq(lambda t: float(progress(np.array([t]))[0]), grid[i - 1], grid[i]))
