r"""Theory against simulation: the reduced dynamics beside the full network (Fig. 4e-f).

:func:`compare` runs, for one problem and one time horizon,

1. the reduced ODE (Eq. 10, :func:`gdln.solve` with ``lr=None``),
2. the exact reduced gradient-descent map (``lr`` given),
3. the full network from the decoupled initial weights of Eq. (9), which the reduced map
   must reproduce to rounding error, and
4. the full network from small random weights over several seeds, which the theory
   describes approximately (Sec. 4 of Saxe et al. 2022),

and writes loss and singular-value figures (PNG and SVG), the four trajectories
(``.npz``) and ``metrics.json``. Time is in units of $\tau$ with
$t/\tau = \mathrm{lr}\cdot\mathrm{step}$ throughout.

The theory (and the decoupled run) starts by one rule (``theory_start="auto"``,
:mod:`gdln.comparison._starts`): at ``b0`` where it is given for the call, at the initial
mode strengths of the random weights themselves (:func:`initial_mode_strengths`) where
``init_scale`` is, else at the file's ``solve.b0`` if it writes one, else at the random
weights' strengths. Fig. 4e pairs $b(0) = 0.1$ with $\sigma_0 = 0.2$.

The route is the one rule of every command: where the statistics have no common bases
(Eqs. 7-8) the theory is the full-matrix flow and gradient-descent map of Eqs. (3)-(4)
from each random run's own initial weights, seed by seed (:mod:`gdln.comparison._matrix`).

:func:`compare` is the steps of a comparison, one module each: its settings resolved
(here), its plan (:mod:`~gdln.comparison._plan`: the time axis, the runs' arguments, the
theory's route), its runs and where they run (:mod:`~gdln.comparison._schedule`: the
simulations sent to a second process with their priorities while the theory is solved
here, :mod:`gdln._runtime`), its report (:mod:`~gdln.comparison._report`) and its files,
the figures drawn side by side (here).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .._runtime._fork import side_by_side
from ..outputs import atomic_folder, check_folder
from ..settings._declared import Settings
from ..settings._door import AT_THE_DOOR, door
from ..simulation import INITS, SimulationSpecError
from ..solution._bounds import check_count
from ..solution._trajectory import Trajectory
from ..task._problem import Problem
from ..task._schedule import Schedule
from ..task._scheduled import SCHEDULE_TAKES, schedule_refusal
from ._figures import plot_loss, plot_singular_values
from ._metrics import Runs
from ._plan import plan_of, theory_route
from ._report import matrix_report, reduced_report
from ._schedule import matrix_runs, reduced_runs

__all__ = ["FILES", "CompareResult", "compare"]

FILES = (
    "loss.png",
    "loss.svg",
    "singular_values.png",
    "singular_values.svg",
    "metrics.json",
    "theory_ode.npz",
    "theory_map.npz",
    "sim_decoupled.npz",
    "sim_random.npz",
)
"""The files :func:`compare` writes into its folder."""

RANDOM_SCHEMES = tuple(name for name in INITS if name != "given")


@dataclass(frozen=True)
class CompareResult:
    """What :func:`compare` computed and wrote.

    Parameters
    ----------
    metrics
        The content of ``metrics.json``.
    ode, gd_map, decoupled, random
        The four trajectories: the reduced ODE (Eq. (9) of Saxe et al. 2022), its
        gradient-descent map, the simulation from decoupled initial conditions and the
        simulation from random initial weights. On the matrix route ``ode`` and
        ``gd_map`` are the full-matrix flow and map from each seed's own initial weights
        (loss ``(T, seeds)``, as ``random``), and ``decoupled`` is ``None``.
    files
        The paths written.

    Raises
    ------
    TypeError
        ``metrics`` is not a mapping.
    """

    metrics: Mapping[str, Any]
    ode: Trajectory
    gd_map: Trajectory
    decoupled: Trajectory | None
    random: Trajectory
    files: tuple[Path, ...] = field(default=())

    def __post_init__(self) -> None:
        if not isinstance(self.metrics, Mapping):
            raise TypeError("metrics must be a mapping")

    def _repr_html_(self) -> str:
        """Metrics and the loss figure, for Jupyter (``gdln.report._notebook.comparison_html``)."""
        from ..report._notebook import comparison_html

        return comparison_html(self)


@door(error=SimulationSpecError)
def compare(
    problem: Problem,
    out_dir: str | Path | None = None,
    *,
    lr: float | None = None,
    t_max: float | None = None,
    weight_decay: float | None = None,
    init_scheme: str | None = None,
    init_scale: float | None = None,
    theory_start: str | None = None,
    b0: Any = None,
    seeds: int | None = None,
    seed: int | None = None,
    lump: str | None = None,
    route: str | None = None,
    points: int | None = None,
    dtype: str | None = None,
    device: str | None = None,
    threads: int | str | None = None,
    progress: bool | str | None = None,
    force: bool = False,
    schedule: Schedule | None = None,
    resolved: Settings = AT_THE_DOOR,
) -> Any:
    r"""Run theory and simulation on one problem; with ``out_dir``, write figures and files.

    Every setting left ``None`` takes the problem's value (``problem.settings``: its graph
    file's ``solve:`` and ``simulate:`` sections over the declared defaults,
    :class:`gdln.settings.Settings`).

    Parameters
    ----------
    problem
        A :class:`gdln.Problem` (from :func:`gdln.load`) with a task.
    out_dir
        ``None`` (default): write nothing, return the result (a notebook shows it).
        Else the directory to write into (created, with missing folders above it). Existing
        :data:`FILES` in it are refused unless ``force``; other entries are kept. It is
        checked (writable, nothing to refuse) before anything is computed, and written
        whole or not at all (:func:`gdln.outputs.atomic_folder`: a new folder beside it
        is swapped into its place).
    lr
        Learning rate of the simulations and of the reduced map; time step in $\tau$
        (default 0.05).
    t_max
        Horizon in units of $\tau$ (default 10).
    weight_decay
        The weight decay $\gamma$ of the theory and of both simulations alike (default:
        the problem's setting, 0; :class:`gdln.settings.Settings`).
    init_scheme, init_scale
        The random runs' initialisation (a random scheme of :data:`gdln.simulation.INITS`,
        default ``"xavier"``) and its initial scale $\sigma_0$ (default 0.2).
    theory_start, b0
        Where the theory and the decoupled simulation start
        (:data:`gdln.settings.THEORY_STARTS`). ``"auto"`` (default): the nearer source
        decides: ``b0`` given for this call; else ``"random"`` if ``init_scale`` is given
        for it; else ``"b0"`` if the file writes ``solve.b0``; else ``"random"``.
        ``"random"``: read off the random runs' initial weights by
        :func:`initial_mode_strengths` (one value per edge, averaged over the seeds), so
        theory and random init start from the same mode strengths. ``"b0"``: the ``b0``
        setting (given, else the file's ``solve.b0``). On the matrix route the random runs
        start at the random scheme (rule ``"random"``) or at random weights whose singular
        values all equal ``b0`` (rule ``"b0"``), and the theory at each run's own weights.
    seeds, seed
        Number of random-init repetitions and the first seed (the decoupled run's hidden
        bases $R_v$ use ``seed`` too; default 10 and 0).
    lump, route
        Lumping and route of the theory, by the same rule as :func:`gdln.solve` (default
        ``"symmetry"``, exact for the ODE and the gradient-descent map alike, and
        ``"auto"``); the decoupled weights of Eq. (9) come from the whole network's bases.
    points
        Number of recorded steps, from 2 to :class:`gdln.graphfile.Limits` ``points``: the
        same steps in all four runs (every step if there are fewer); the gaps in
        ``metrics`` are taken at them, never interpolated.
    dtype, device, threads, progress
        As for :func:`gdln.simulate` (default: the problem's settings); the runs are
        full-batch gradient descent (the dynamics the theory describes), whatever the
        file's ``simulate:`` section says of the optimiser.
    force
        Replace existing output files.
    schedule
        Compare through this :class:`gdln.task.Schedule` (or the file's,
        ``problem.schedule``) instead, phase by phase: returns a
        :class:`gdln.schedule.ScheduleComparison` (it takes ``lr``, ``points``, ``b0``,
        the random start, ``seeds``, ``seed`` and ``weight_decay``): the reduced
        gradient-descent map against the network trained from the decoupled weights of
        Eq. (9) at ``b0`` (one run; ``seed`` draws their hidden bases) and from the random
        start over ``seeds``, every context's loss all along.

    Returns
    -------
    CompareResult or ScheduleComparison
        With ``schedule``, a ``ScheduleComparison``. Else:
        ``metrics``: ``decoupled_vs_map`` and ``decoupled_vs_ode`` (max over time of
        $|L_\mathrm{sim}-L_\mathrm{theory}|/L(0)$), ``random_vs_ode`` (that quantity
        over the seeds: count, median, quartiles and range, by
        :func:`~gdln.comparison.summarize_seeds`; each seed's in
        ``random_vs_ode_per_seed``), ``random_mean_vs_ode`` (that quantity for the seeds'
        mean loss), ``time_to_half_loss`` (first $t$ with $L\le L(0)/2$; ``None`` if not
        within ``t_max``) for each run, and ``time_to_half_loss["random"]``, its summary
        over all seeds with the censored ones (never within ``t_max``) counted and
        reported as ``"> t_max"``; ``theory_start``, ``theory_start_from`` (which
        source decided, in words), ``starts`` (each curve's start in words, as in the
        legend) and ``b0`` (edge -> $b_e(0)$) say where the theory started; ``route`` (the
        declared name) and ``route_reason``; ``modes`` (edge -> the reduction's numbers
        of the modes it carries) is the numbering of the figure's legends and the text
        report. On the matrix route: ``random_vs_map`` and ``random_vs_ode`` per seed
        against the map and flow from that seed's own weights, half-loss times per seed,
        and no decoupled metrics.

    Raises
    ------
    SimulationSpecError
        An option is malformed (``lr``, ``t_max``, ``seeds``, ``points``, ``device``,
        ``theory_start``), ``out_dir`` is not a directory, or the runs imply more steps,
        records or numbers per step than :class:`gdln.graphfile.Limits` allows (all
        checked before anything is computed).
    gdln.outputs.OutputExistsError
        (a ``FileExistsError``) One of :data:`FILES` exists in ``out_dir`` and ``force``
        is false.
    gdln.outputs.OutputError
        ``out_dir`` cannot be written (checked first), or writing failed (naming the
        file); ``out_dir`` is then unchanged.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022): the reduced dynamics Eq. (9), exact from the
    decoupled initial conditions and compared with random initialisation as in Figs. 3-4;
    the loss Eq. (1) and the gradient flow Eq. (2) of the full network.
    """
    if schedule is not None:
        return _scheduled(problem, schedule, out_dir, force, resolved, seeds)
    out = None if out_dir is None else _check_outputs(out_dir, force=force)
    chosen = _checked(resolved)
    plan = plan_of(problem, chosen)
    taken = theory_route(problem, plan)
    if taken.model is None:  # no common bases: the full-matrix flow from each seed's W(0)
        runs, stages, scale = matrix_runs(problem, plan)
        metrics = matrix_report(problem, plan, taken, runs, stages, scale)
    else:
        runs, stages = reduced_runs(problem, plan, taken)
        metrics = reduced_report(problem, plan, taken, runs, stages)
    result = CompareResult(metrics, runs.ode, runs.gd_map, runs.decoupled, runs.random, ())
    if out is None:
        return result
    with atomic_folder(out, force=force, names=FILES, parents=True) as temporary:
        written = _write(temporary, metrics, taken.model, runs)
    return replace(result, files=tuple(out / f.name for f in written))


def _scheduled(
    problem: Problem,
    schedule: Schedule,
    out_dir: str | Path | None,
    force: bool,
    chosen: Settings,
    seeds: Any,
) -> Any:
    """:func:`compare` with ``schedule=``: the schedule room's comparison."""
    from ..schedule._compare import schedule_compared

    refused = sorted(chosen.called - set(SCHEDULE_TAKES["compare"]))
    if refused:
        raise SimulationSpecError(schedule_refusal("compare", refused[0]))
    return schedule_compared(problem, schedule, chosen, out_dir, seeds=seeds, force=force)


def _check_outputs(out_dir: str | Path, *, force: bool) -> Path:
    """The output folder, checked before anything is computed (:func:`check_folder`):
    refused if it is a file, (unless ``force``) holds one of :data:`FILES`, or cannot be
    written."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise SimulationSpecError(f"out_dir: {out} exists and is not a directory")
    return check_folder(out, force=force, names=FILES, parents=True)


def _checked(chosen: Settings) -> Settings:
    """The settings resolved at the door, checked before anything is computed."""
    check_count("points", chosen.points, least=2, limit="points", cls=SimulationSpecError)
    if chosen.init_scheme not in RANDOM_SCHEMES:
        raise SimulationSpecError(
            f"init_scheme: the random runs take one of {', '.join(RANDOM_SCHEMES)}, got "
            f"{chosen.init_scheme!r} (the decoupled run is always made)"
        )
    return chosen


def _write(out: Path, metrics: dict[str, Any], reduction: Any, runs: Runs) -> list[Path]:
    """Write the trajectories, the figures and ``metrics.json`` (listing them all) into
    the new folder ``out`` (the temporary one of :func:`atomic_folder`); the matrix route
    (``reduction`` ``None``) has no decoupled run."""
    files = [
        runs.ode.save(out / "theory_ode.npz"),
        runs.gd_map.save(out / "theory_map.npz"),
        *([] if runs.decoupled is None else [runs.decoupled.save(out / "sim_decoupled.npz")]),
        runs.random.save(out / "sim_random.npz"),
    ]
    files += side_by_side(
        [
            lambda: plot_loss(out, metrics, runs),
            lambda: plot_singular_values(out, metrics, reduction, runs),
        ]
    )
    metrics["files"] = [f.name for f in files] + ["metrics.json"]
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    files.append(out / "metrics.json")
    return files
