r"""A schedule's theory against the full network trained through it, context by context.

:func:`compare_schedule` is :func:`gdln.compare` for a schedule: the reduced
gradient-descent map of :func:`gdln.solve_schedule` (each phase from the previous phase's
end, by the route that holds for it), the full network trained through the same phases
in torch from the same decoupled weights (Eq. 9 of Saxe, Sodhani & Lewallen 2022, on the
bases of every context the schedule sees), which the map follows to rounding, and the
network trained from small random weights, which it follows approximately. Every
context's own loss is compared all along, also while a phase switches it off: that curve
is forgetting (Flesch et al. 2023; Braun et al. 2022).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._edge import edge_name
from ..comparison._figures import save_figure
from ..outputs import atomic_folder, check_folder
from ..settings._choices import INITS
from ..settings._declared import Settings
from ..settings._door import AT_THE_DOOR, door
from ..simulation._errors import SimulationSpecError
from ..solution._trajectory import Trajectory
from ..task._problem import Problem
from ..task._schedule import Schedule
from ._engine import run_schedule
from ._result import ScheduleResult
from ._simulate import simulate_schedule

__all__ = ["SCHEDULE_FILES", "ScheduleComparison", "compare_schedule"]

SCHEDULE_FILES = ("schedule_loss.png", "metrics.json", "theory.json")
"""The files :func:`compare_schedule` writes into its folder."""

RANDOM = tuple(name for name in INITS if name not in ("given", "decoupled"))
"""The random starts of the second simulation (the decoupled one is always made)."""


@dataclass(frozen=True)
class ScheduleComparison:
    """What :func:`compare_schedule` found.

    Parameters
    ----------
    metrics
        Per context: ``decoupled_vs_map`` (the largest gap between the simulation from
        decoupled weights and the reduced map, over $\\mathcal L_c(0)$), ``random_vs_map``
        (the same for the mean over the random seeds), and the end loss of each run; the
        settings, the phases and their routes.
    theory
        The reduced map's :class:`~gdln.ScheduleResult`.
    decoupled, random
        The simulations from decoupled and from random weights.
    files
        The files written (none without ``out_dir``).
    """

    metrics: dict[str, Any]
    theory: ScheduleResult
    decoupled: Trajectory
    random: Trajectory
    files: tuple[Path, ...] = ()


@door(error=SimulationSpecError, own=("seeds",))
def compare_schedule(
    problem: Problem,
    schedule: Schedule | None = None,
    out_dir: str | Path | None = None,
    *,
    lr: float | str | None = None,
    points: int | str | None = None,
    b0: Any = None,
    init_scheme: str | None = None,
    init_scale: float | str | None = None,
    seeds: int | None = None,
    seed: int | None = None,
    weight_decay: float | str | None = None,
    force: bool = False,
    resolved: Settings = AT_THE_DOOR,
) -> ScheduleComparison:
    r"""Theory against simulation through a schedule, every context's loss all along.

    Every setting left ``None`` takes the problem's value (``problem.settings``).

    Parameters
    ----------
    problem
        A loaded problem with a task.
    schedule
        The phases; default: the file's ``schedule:``.
    out_dir
        ``None``: write nothing. Else the folder to write :data:`SCHEDULE_FILES` into
        (created; existing files refused unless ``force``; written whole or not at all).
    lr
        The learning rate of the simulations and of the reduced map (every phase a whole
        number of steps).
    points
        About how many records over the whole schedule (the boundaries always).
    b0
        The start of the reduced variables and of the decoupled simulation (Eq. 9).
    init_scheme, init_scale, seeds, seed
        The random simulation's start (a random scheme of
        :data:`gdln.settings.INITS`; ``"decoupled"`` and ``"given"`` read as ``"xavier"``) and its seeds; ``seed`` also draws the hidden bases of the
        decoupled start.
    weight_decay
        $\gamma$ of the theory and of both simulations alike.
    force
        Replace existing output files.

    Returns
    -------
    ScheduleComparison
        The metrics, the theory and both simulations, and the files written.

    Raises
    ------
    SimulationSpecError
        A malformed setting or output folder.
    GdlnError
        No schedule, or a phase that is not a whole number of steps of ``lr``.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eqs. (1)-(2) and (9)-(10); Flesch et al. (2023)
    (blocked and interleaved training).

    Examples
    --------
    >>> import gdln
    >>> problem = gdln.load("context", params={"pathways": 2, "hidden": 4})
    >>> result = gdln.schedule.compare_schedule(
    ...     problem, gdln.task.blocked(["context0", "context1"], 2.0), lr=0.1, seeds=2
    ... )
    >>> result.metrics["contexts"]["context0"]["decoupled_vs_map"] < 1e-12
    True
    """
    out = None if out_dir is None else _checked_folder(out_dir, force=force)
    chosen = resolved
    common = {"lr": chosen.lr, "points": chosen.points, "weight_decay": chosen.weight_decay}
    decoupled = simulate_schedule(
        problem,
        schedule,
        init_scheme="decoupled",
        b0=chosen.b0,
        seed=chosen.seed,
        seeds=1,
        **common,
    )
    scheme = chosen.init_scheme if chosen.init_scheme in RANDOM else "xavier"
    random = simulate_schedule(
        problem,
        schedule,
        init_scheme=scheme,
        init_scale=chosen.init_scale,
        seeds=chosen.seeds if seeds is None else seeds,
        seed=chosen.seed,
        **common,
    )
    used = problem.schedule if schedule is None else schedule
    assert used is not None  # simulate_schedule refused a problem without one
    theory = run_schedule(
        problem,
        used,
        dataclasses.replace(chosen, dynamics="gd-map", route="auto"),
        times=decoupled.t,
        weights=None,
        rtol=1e-10,
        atol=1e-12,
    )
    metrics = _metrics(problem, chosen, scheme, theory, decoupled, random)
    result = ScheduleComparison(metrics, theory, decoupled, random)
    if out is None:
        return result
    with atomic_folder(out, force=force, names=SCHEDULE_FILES, parents=True) as temporary:
        written = _write(temporary, result)
    return dataclasses.replace(result, files=tuple(out / f.name for f in written))


def _checked_folder(out_dir: str | Path, *, force: bool) -> Path:
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise SimulationSpecError(f"out_dir: {out} exists and is not a directory")
    return check_folder(out, force=force, names=SCHEDULE_FILES, parents=True)


def _gap(simulated: np.ndarray, theory: np.ndarray) -> float:
    """The largest gap over time, over the theory's loss at the start."""
    return float(np.max(np.abs(simulated - theory)) / theory[0])


def _metrics(
    problem: Problem,
    chosen: Settings,
    scheme: str,
    theory: ScheduleResult,
    decoupled: Trajectory,
    random: Trajectory,
) -> dict[str, Any]:
    sim_d, sim_r = decoupled.context_losses(), random.context_losses()
    contexts = {}
    for label, curve in theory.context_loss.items():
        mean = sim_r[label].mean(axis=1)
        contexts[label] = {
            "decoupled_vs_map": _gap(sim_d[label][:, 0], curve),
            "random_vs_map": _gap(mean, curve),
            "end_loss": {
                "theory": float(curve[-1]),
                "decoupled": float(sim_d[label][-1, 0]),
                "random_mean": float(mean[-1]),
            },
        }
    return {
        "source": str(problem.source),
        "lr": float(chosen.lr),
        "b0": _plain(chosen.b0),
        "random_start": {"init_scheme": scheme, "init_scale": float(chosen.init_scale)},
        "seeds": list(random.meta.get("seeds", [])) or int(random.loss.shape[1]),
        "weight_decay": float(chosen.weight_decay),
        "time_unit": "tau (t/tau = lr * step)",
        "boundaries": [float(b) for b in theory.boundaries],
        "phases": [
            {"name": p.name, "key": p.key, "route": p.route, "why": p.why} for p in theory.phases
        ],
        "contexts": contexts,
        "definitions": {
            "decoupled_vs_map": "max over t of |L_c,sim - L_c,map| / L_c,map(0), the "
            "simulation from the decoupled weights of Eq. (9)",
            "random_vs_map": "the same for the mean over the seeds of the random start",
        },
    }


def _plain(value: Any) -> Any:
    """A ``b0`` for JSON: a number, or edge -> number."""
    if isinstance(value, Mapping):
        return {
            edge_name(e) if isinstance(e, tuple) else str(e): float(v) for e, v in value.items()
        }
    return float(value)


def _write(out: Path, result: ScheduleComparison) -> list[Path]:
    """The figure, the theory's run and ``metrics.json`` into the new folder ``out``."""
    files = [_figure(out, result)]
    theory = out / "theory.json"
    from ..solution._format import format_trajectory

    theory.write_text(format_trajectory(result.theory.trajectory.without_weights(), "json"))
    files.append(theory)
    result.metrics["files"] = [f.name for f in files] + ["metrics.json"]
    (out / "metrics.json").write_text(json.dumps(result.metrics, indent=2) + "\n")
    files.append(out / "metrics.json")
    return files


def _figure(out: Path, result: ScheduleComparison) -> Path:
    """One panel per context: the reduced map (line), the simulation from decoupled
    weights (dots), the random seeds' mean and band; the phases shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..report._plots import seed_band, shade_phases

    theory = result.theory
    labels = list(theory.context_loss)
    fig, axes = plt.subplots(
        1,
        len(labels),
        figsize=(4.2 * len(labels), 3.4),
        sharey=True,
        squeeze=False,
        layout="constrained",
    )
    phases = theory.trajectory.meta["schedule"]["phases"]
    sim_d, sim_r = result.decoupled.context_losses(), result.random.context_losses()
    t = theory.trajectory.t
    for ax, label in zip(axes[0], labels, strict=True):
        mean, low, high = seed_band(sim_r[label])
        ax.fill_between(result.random.t, low, high, color="C1", alpha=0.2, lw=0)
        ax.plot(result.random.t, mean, color="C1", lw=1.2, label="simulation, random start")
        ax.plot(t, theory.context_loss[label], color="C0", lw=1.8, label="theory (reduced map)")
        every = max(1, len(t) // 40)
        ax.plot(
            result.decoupled.t[::every],
            sim_d[label][::every, 0],
            "o",
            ms=3,
            color="k",
            label="simulation, decoupled start",
        )
        ax.set_title(f"loss in {label}", fontsize=9)
        ax.set_xlabel(r"time $t/\tau$")
        ax.set_ylim(bottom=0)
        ax.set_xlim(t[0], t[-1])
        shade_phases(ax, phases)
    axes[0, 0].set_ylabel(r"loss $\mathcal{L}_c$")
    axes[0, 0].legend(fontsize=7, loc="center right")
    (path,) = save_figure(fig, out, "schedule_loss", dpi=120, formats=("png",))
    return path
