r"""A schedule's theory against the full network trained through it, context by context.

:func:`gdln.compare` with ``schedule=`` (:func:`schedule_compared`): the reduced
gradient-descent map of a solved schedule (each phase from the previous phase's end, by
the route that holds for it), the full network trained through the same phases
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
from ..simulation._errors import SimulationSpecError
from ..solution._trajectory import Trajectory
from ..task._problem import Problem
from ..task._schedule import Schedule
from ._engine import run_schedule
from ._result import ScheduleResult
from ._simulate import schedule_simulated

__all__ = ["SCHEDULE_FILES", "ScheduleComparison", "schedule_compared"]

SCHEDULE_FILES = ("schedule_loss.png", "metrics.json", "theory.json")
"""The files :func:`gdln.compare` with ``schedule=`` writes into its folder."""

RANDOM = tuple(name for name in INITS if name not in ("given", "decoupled"))
"""The random starts of the second simulation (the decoupled one is always made)."""


@dataclass(frozen=True)
class ScheduleComparison:
    """What :func:`gdln.compare` with ``schedule=`` found.

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


def schedule_compared(
    problem: Problem,
    schedule: Schedule,
    chosen: Settings,
    out_dir: str | Path | None = None,
    *,
    seeds: Any = None,
    force: bool = False,
) -> ScheduleComparison:
    r""":func:`gdln.compare` with ``schedule=``, on the settings resolved at its door:
    theory against simulation through ``schedule``, every context's loss all along.

    Two simulations (:func:`schedule_simulated`): from the decoupled weights of Eq. (9) at
    ``b0`` (one run; ``seed`` also draws their hidden bases), and from a random start
    (``init_scheme`` and ``init_scale``, a random scheme of :data:`gdln.settings.INITS`,
    ``"decoupled"`` and ``"given"`` read as ``"xavier"``, over ``seeds``); the theory is
    the reduced gradient-descent map at the same steps (:func:`run_schedule`), with the
    same ``lr`` and ``weight_decay``. With ``out_dir`` the files of
    :data:`SCHEDULE_FILES` are written there whole or not at all (existing ones refused
    unless ``force``). Saxe, Sodhani & Lewallen (2022), Eqs. (1)-(2) and (9)-(10);
    Flesch et al. (2023) (blocked and interleaved training).
    """
    out = None if out_dir is None else _checked_folder(out_dir, force=force)
    common = frozenset({"lr", "points", "weight_decay", "seed"})
    decoupled = schedule_simulated(
        problem,
        schedule,
        dataclasses.replace(chosen, init_scheme="decoupled", called=common | {"init_scheme", "b0"}),
        seeds=1,
    )
    scheme = chosen.init_scheme if chosen.init_scheme in RANDOM else "xavier"
    random = schedule_simulated(
        problem,
        schedule,
        dataclasses.replace(
            chosen, init_scheme=scheme, called=common | {"init_scheme", "init_scale"}
        ),
        seeds=chosen.seeds if seeds is None else seeds,
    )
    theory = run_schedule(
        problem,
        schedule,
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
