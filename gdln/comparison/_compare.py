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

By default the theory (and the decoupled run) starts from the initial mode strengths of
the random weights themselves (:func:`initial_mode_strengths`), so that theory and
random-init simulation start from the same place whatever $\sigma_0$ is; a number for
``theory_init`` (or ``"file"``: the graph file's ``solve.init``) fixes $b(0)$ instead, as in
Fig. 4e ($b(0) = 0.1$ against $\sigma_0 = 0.2$).
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from .._edge import Edge, edge_name
from ..graphfile._limits import current_limits
from ..outputs import atomic_folder, check_folder
from ..reduction import Reduction, reduce
from ..simulation import (
    INITS,
    SimulationSettings,
    SimulationSpecError,
    horizon_steps,
    initial_weights,
)
from ..simulation._plan import node_sizes
from ..simulation._workload import check_workload
from ..solution._trajectory import Trajectory
from ..solution._bounds import beyond
from ._figures import plot_loss, plot_singular_values, trained_edges
from ._metrics import DEFINITIONS, Runs, loss_metrics
from ._modes import initial_mode_strengths

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

_USED_SETTINGS = ("dtype", "device", "threads", "progress")
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
        simulation from random initial weights.
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
    decoupled: Trajectory
    random: Trajectory
    files: tuple[Path, ...] = field(default=())

    def __post_init__(self) -> None:
        if not isinstance(self.metrics, Mapping):
            raise TypeError("metrics must be a mapping")

    def _repr_html_(self) -> str:
        """Metrics and the loss figure, for Jupyter (``gdln.report._notebook.comparison_html``)."""
        from ..report._notebook import comparison_html

        return comparison_html(self)


def compare(
    problem: Any,
    out_dir: str | Path,
    *,
    lr: float,
    t_max: float | None = None,
    init_scheme: str = "xavier",
    init: float = 0.2,
    theory_init: float | str = "auto",
    seeds: int = 10,
    seed: int = 0,
    lump: str = "symmetry",
    n_points: int = 201,
    settings: SimulationSettings | None = None,
    force: bool = False,
) -> CompareResult:
    r"""Run theory and simulation on one problem and write figures and ``metrics.json``.

    Parameters
    ----------
    problem
        A :class:`gdln.Problem` (from :func:`gdln.load`) with a task.
    out_dir
        Directory to write into (created, with missing folders above it). Existing
        :data:`FILES` in it are refused unless ``force``; other entries are kept. It is
        checked (writable, nothing to refuse) before anything is computed, and written
        whole or not at all (:func:`gdln.outputs.atomic_folder`: a new folder beside it
        is swapped into its place).
    lr
        Learning rate of the simulations and of the reduced map; time step in $\tau$.
    t_max
        Horizon in units of $\tau$ (default: the file's ``solve.t_max``, else 10).
    init_scheme, init
        The random runs' initialisation (a random scheme of :data:`gdln.simulation.INITS`)
        and its initial scale $\sigma_0$.
    theory_init
        Initial values $b_e(0)$ of the theory and the decoupled simulation. ``"auto"``
        (default): read off the random runs' initial weights by
        :func:`initial_mode_strengths` (one value per edge, averaged over the seeds), so
        theory and random init start from the same mode strengths. ``"file"``: the
        graph file's ``solve.init`` (else 0.001). A number: that value for every edge.
    seeds, seed
        Number of random-init repetitions and the first seed (the decoupled run's hidden
        bases $R_v$ use ``seed`` too).
    lump
        Lumping for the reduction (:func:`gdln.reduce`); the default ``"symmetry"`` is
        exact for the ODE and the gradient-descent map alike.
    n_points
        Number of recorded steps, from 2 to :class:`gdln.graphfile.Limits` ``points``: the
        same steps in all four runs (every step if there are fewer); the gaps in
        ``metrics`` are taken at them, never interpolated.
    settings
        Only ``dtype``, ``device``, ``threads`` and ``progress`` are used (as in
        :func:`gdln.simulate`); the others must keep their defaults.
    force
        Replace existing output files.

    Returns
    -------
    CompareResult
        ``metrics``: ``decoupled_vs_map`` and ``decoupled_vs_ode`` (max over time of
        $|L_\mathrm{sim}-L_\mathrm{theory}|/L(0)$), ``random_vs_ode`` (that quantity
        over the seeds: count, median, quartiles and range, by
        :func:`~gdln.comparison.summarize_seeds`; each seed's in
        ``random_vs_ode_per_seed``), ``random_mean_vs_ode`` (that quantity for the seeds'
        mean loss), ``time_to_half_loss`` (first $t$ with $L\le L(0)/2$; ``None`` if not
        within ``t_max``) for each run, and ``time_to_half_loss["random"]``, its summary
        over all seeds with the censored ones (never within ``t_max``) counted and
        reported as ``"> t_max"``; ``theory_init`` and ``init_b`` (edge -> $b_e(0)$) say
        where the theory started; ``modes`` (edge -> the reduction's numbers of the
        modes it carries) is the numbering of the figure's legends and the text report.

    Raises
    ------
    SimulationSpecError
        An option is malformed (``lr``, ``t_max``, ``seeds``, ``n_points``, ``settings``,
        ``theory_init``), ``out_dir`` is not a directory, or the runs imply more steps,
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
    out = _check_outputs(out_dir, force=force)
    steps = _check_options(
        problem,
        lr=lr,
        t_max=t_max,
        init_scheme=init_scheme,
        init=init,
        seeds=seeds,
        n_points=n_points,
    )
    base = _simulation_settings(settings)
    _check_workload(problem, base, steps=steps, seeds=seeds, n_points=n_points)
    # One set of steps for all four runs, so that every gap compares equal times.
    record = _recorded_steps(steps, n_points)
    sim_settings = replace(base, record_steps=tuple(int(k) for k in record))
    common = dict(graph=problem.graph, examples=problem.examples(), steps=steps, lr=lr)
    random_run = dict(
        common, init_scheme=init_scheme, init=init, seeds=seeds, seed=seed, settings=sim_settings
    )
    with _Simulations() as runs_of:
        runs_of.submit(random_run)  # started first: it does not need the theory
        from ..solution import solve  # scipy, while the worker imports torch
        rule, b0 = _theory_start(
            problem, theory_init, init_scheme=init_scheme, init=init, seeds=seeds, seed=seed
        )
        reduction = reduce(problem, lump=lump, init=b0, quotient=False)  # every edge has bases
        runs_of.submit(_decoupled_run(common, reduction, seed=seed, settings=sim_settings))
        times = record * lr
        ode = solve(reduction, t_max=steps * lr, times=times)
        gd_map = solve(reduction, t_max=steps * lr, lr=lr, times=times)
        random, decoupled = runs_of.results(before=_load_figure_library)
    runs = Runs(ode, gd_map, decoupled, random)
    metrics: dict[str, Any] = {
        **_description(problem, runs, lr=lr, steps=steps, rule=rule, b0=b0),
        "init_scheme": init_scheme,
        "init": float(init),
        "seeds": list(random.meta["seeds"]),
        "lump": lump,
        "modes": {
            edge_name(e): [int(a) for a in reduction.edge_bases(e, seed=seed)[2]]
            for e in trained_edges(problem.graph)
        },
        "dtype": base.dtype,
        "device": decoupled.meta["device"],
        **loss_metrics(runs, source=str(getattr(problem, "source", None) or "problem")),
        "definitions": dict(DEFINITIONS),
    }
    with atomic_folder(out, force=force, names=FILES, parents=True) as temporary:
        written = _write(temporary, metrics, reduction, runs)
    files = [out / f.name for f in written]
    return CompareResult(metrics, ode, gd_map, decoupled, random, tuple(files))


def _recorded_steps(steps: int, n_points: int) -> np.ndarray:
    """The steps :func:`compare` records in every run: ``n_points`` spread over ``steps``.

    Step 0 and the last are included; the spacing differs by at most one step where
    ``n_points - 1`` does not divide ``steps`` (every step when there are fewer steps than
    points). The reduced ODE, the reduced map and both simulations are recorded at exactly
    these steps (times ``lr * step``), so that their losses are compared at equal times.

    >>> _recorded_steps(300, 201)[:6].tolist(), len(_recorded_steps(300, 201))
    ([0, 2, 3, 4, 6, 8], 201)
    >>> _recorded_steps(5, 201).tolist()
    [0, 1, 2, 3, 4, 5]
    """
    return np.unique(np.linspace(0, steps, min(n_points, steps + 1)).round().astype(int))


def _check_outputs(out_dir: str | Path, *, force: bool) -> Path:
    """The output folder, checked before anything is computed (:func:`check_folder`):
    refused if it is a file, (unless ``force``) holds one of :data:`FILES`, or cannot be
    written."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise SimulationSpecError(f"out_dir: {out} exists and is not a directory")
    return check_folder(out, force=force, names=FILES, parents=True)


def _check_options(
    problem: Any,
    *,
    lr: float,
    t_max: float | None,
    init_scheme: str,
    init: float,
    seeds: int,
    n_points: int,
) -> int:
    """Check the options before computing anything; return the number of steps."""
    if not (isinstance(n_points, int) and n_points >= 2):
        raise SimulationSpecError(f"n_points: expected an int >= 2, got {n_points!r}")
    if init_scheme not in RANDOM_SCHEMES:
        raise SimulationSpecError(
            f"init_scheme: expected one of {sorted(RANDOM_SCHEMES)}, got {init_scheme!r}"
        )
    if not (_is_number(init) and init >= 0):
        raise SimulationSpecError(
            f"init: expected a finite number >= 0 (the initial scale sigma0), got {init!r}"
        )
    if not (isinstance(seeds, int) and not isinstance(seeds, bool) and seeds >= 1):
        raise SimulationSpecError(f"seeds: expected a count >= 1, got {seeds!r}")
    if not (_is_number(lr) and lr > 0):
        raise SimulationSpecError(f"lr: expected a finite number > 0, got {lr!r}")
    if n_points > current_limits().points:
        raise SimulationSpecError(beyond("points", f"n_points={n_points}"))
    file_settings = getattr(problem, "settings", {}) or {}
    horizon = t_max if t_max is not None else file_settings.get("t_max", 10)
    return horizon_steps(horizon, lr=lr)


def _check_workload(
    problem: Any, settings: SimulationSettings, *, steps: int, seeds: int, n_points: int
) -> None:
    """Refuse, before the theory is solved, a simulation beyond the limits (steps, records,
    numbers per step) that the random runs would reach."""
    examples = problem.examples()
    check_workload(
        replace(settings, record_every=max(1, steps // (n_points - 1))),
        steps=steps,
        seeds=seeds,
        rows=len(examples.weights),
        sizes=node_sizes(problem.graph),
        edges=list(problem.graph.edges),
    )


def _is_number(value: Any) -> bool:
    """A finite int or float, not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _simulation_settings(settings: SimulationSettings | None) -> SimulationSettings:
    """The settings of both runs: only dtype, device, threads and progress may be chosen."""
    if settings is None:
        return SimulationSettings()
    if not isinstance(settings, SimulationSettings):
        raise SimulationSpecError(
            f"settings: expected a SimulationSettings, got {type(settings).__name__}"
        )
    default = SimulationSettings()
    for f in fields(SimulationSettings):
        value = getattr(settings, f.name)
        if f.name not in _USED_SETTINGS and value != getattr(default, f.name):
            raise SimulationSpecError(
                f"settings: compare uses only {', '.join(_USED_SETTINGS)}; got {f.name}={value!r}"
            )
    return settings


def _theory_start(
    problem: Any, theory_init: float | str, *, init_scheme: str, init: float, seeds: int, seed: int
) -> tuple[str, float | dict[Edge, float]]:
    """Where the theory and the decoupled run start: the rule and $b(0)$ (one or per edge).

    ``"auto"`` reads the mode strengths off the random runs' own initial weights
    (:func:`initial_mode_strengths`, averaged over the seeds).
    """
    if theory_init == "auto":
        drawn = initial_weights(
            problem.graph, init_scheme=init_scheme, init=init, seeds=seeds, seed=seed
        )
        modes_only = reduce(problem, lump="none")
        return "auto", initial_mode_strengths(modes_only, drawn, seed=seed)
    if theory_init == "file":
        file_settings = getattr(problem, "settings", {}) or {}
        return "file", float(file_settings.get("init", 0.001))
    if _is_number(theory_init):
        return "given", float(theory_init)
    raise SimulationSpecError(
        f"theory_init: expected 'auto', 'file' or a number, got {theory_init!r}"
    )


def _decoupled_run(
    common: dict[str, Any], reduction: Reduction, *, seed: int, settings: SimulationSettings
) -> dict[str, Any]:
    """The arguments of the simulation from the decoupled weights of Eq. (9)."""
    weights = reduction.decoupled_weights(seed=seed)
    return dict(
        common,
        init_scheme="given",
        weights={(str(u), str(v)): w for (u, v), w in weights.items()},
        bases=reduction.decoupled_bases(seed=seed),
        settings=settings,
    )


class _Simulations:
    """The runs of :func:`compare`, in a second process when that can overlap the theory.

    The worker (:class:`gdln.simulation._worker.SimulationWorker`) imports torch and
    simulates while this process reduces, solves and loads matplotlib: only when torch
    is not imported here yet (its import is most of what overlaps), on POSIX, with at
    least two cores. Otherwise the runs are made here, when their results are asked for.
    """

    def __init__(self) -> None:
        self.jobs: list[dict[str, Any]] = []
        self.worker: Any = None
        if _use_worker():
            from ..simulation._worker import SimulationWorker

            try:
                self.worker = SimulationWorker()
            except OSError:  # no process to be had: simulate here
                self.worker = None

    def __enter__(self) -> _Simulations:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.worker is not None:
            self.worker.close()

    def submit(self, job: dict[str, Any]) -> None:
        """Start (or queue) one run of :func:`gdln.simulate`."""
        if self.worker is not None:
            self.worker.submit(**job)
        else:
            self.jobs.append(job)

    def results(self, *, before: Any = None) -> list[Trajectory]:
        """The trajectories in the order submitted; ``before()`` runs first (while the
        worker simulates)."""
        if before is not None:
            before()
        if self.worker is not None:
            return [self.worker.result() for _ in range(2)]
        from ..simulation import simulate

        return [simulate(**job) for job in self.jobs]


def _use_worker() -> bool:
    """Whether to simulate in a second process (see :class:`_Simulations`)."""
    if "torch" in sys.modules or os.name != "posix":
        return False
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (cores or 1) >= 2


def _load_figure_library() -> None:
    """Import matplotlib (with the Agg backend) now, while the simulations run."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot


def _description(
    problem: Any, runs: Runs, *, lr: float, steps: int, rule: str, b0: float | dict[Edge, float]
) -> dict[str, Any]:
    """The problem, the time axis and where the theory started, for ``metrics.json``."""
    graph = problem.graph
    return {
        "graph": str(graph.graph.get("name", "")),
        "source": str(getattr(problem, "source", "")),
        "params": {k: str(v) for k, v in (getattr(problem, "params", {}) or {}).items()},
        "time_unit": "tau (t/tau = lr * step)",
        "lr": float(lr),
        "t_max": float(steps * lr),
        "steps": steps,
        "theory_init": rule,
        "init_b": {
            edge_name(e): float(b0[e] if isinstance(b0, dict) else b0)
            for e in graph.edges
            if not isinstance(b0, dict) or e in b0
        },
    }


def _write(out: Path, metrics: dict[str, Any], reduction: Reduction, runs: Runs) -> list[Path]:
    """Write the trajectories, the figures and ``metrics.json`` (listing them all) into
    the new folder ``out`` (the temporary one of :func:`atomic_folder`)."""
    files = [
        runs.ode.save(out / "theory_ode.npz"),
        runs.gd_map.save(out / "theory_map.npz"),
        runs.decoupled.save(out / "sim_decoupled.npz"),
        runs.random.save(out / "sim_random.npz"),
    ]
    files += plot_loss(out, metrics, runs)
    files += plot_singular_values(out, metrics, reduction, runs)
    metrics["files"] = [f.name for f in files] + ["metrics.json"]
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    files.append(out / "metrics.json")
    return files
