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
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from .._edge import edge_name
from .._errors import NotDiagonalizableError
from ..outputs import atomic_folder, check_folder
from ..reduction import Reduction
from ..reduction._reduce import initial_values
from ..settings._declared import NOT_GIVEN, SettingError, Settings, renamed
from ..simulation import (
    INITS,
    SimulationSettings,
    SimulationSpecError,
    horizon_steps,
)
from ..simulation._plan import node_sizes
from ..simulation._workload import check_workload
from ..solution._bounds import check_count
from ..solution._trajectory import Trajectory
from ..task._problem import Problem
from ._figures import (
    draw_side_by_side,
    plot_loss,
    plot_singular_values,
    prepare_drawing,
    trained_edges,
)
from ._matrix import (
    MATRIX_DEFINITIONS,
    matrix_metrics,
    matrix_starts,
    matrix_theory,
    typical_scale,
)
from ._metrics import DEFINITIONS, Runs, loss_metrics
from ._process import Simulations
from ._stages import predicted_stages
from ._starts import start_rule, starts_in_words, theory_start

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
    settings: SimulationSettings | None = None,
    force: bool = False,
    init: Any = NOT_GIVEN,
    theory_init: Any = NOT_GIVEN,
    n_points: Any = NOT_GIVEN,
) -> CompareResult:
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
    settings
        Only ``dtype``, ``device``, ``threads`` and ``progress`` are used (as in
        :func:`gdln.simulate`); the others must keep their defaults (the runs are full-batch
        gradient descent, the dynamics the theory describes).
    force
        Replace existing output files.
    init, theory_init, n_points
        The keywords of an earlier release for ``init_scale``, ``theory_start``/``b0`` and
        ``points`` (a deprecation warning).

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
        An option is malformed (``lr``, ``t_max``, ``seeds``, ``points``, ``settings``,
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
    if init is not NOT_GIVEN:
        old = renamed("compare", "init", "init_scale", init)
        init_scale = old if init_scale is None else init_scale
    if n_points is not NOT_GIVEN:
        points = renamed("compare", "n_points", "points", n_points) if points is None else points
    if theory_init is not NOT_GIVEN:
        old = renamed("compare", "theory_init", "theory_start (and b0)", theory_init)
        if isinstance(old, str) and old in ("auto", "file"):
            theory_start = theory_start or {"auto": "random", "file": "b0"}[old]
        else:
            b0 = old if b0 is None else b0
    out = None if out_dir is None else _check_outputs(out_dir, force=force)
    chosen = _settings(
        problem,
        lr=lr,
        t_max=t_max,
        weight_decay=weight_decay,
        init_scheme=init_scheme,
        init_scale=init_scale,
        theory_start=theory_start,
        b0=b0,
        seeds=seeds,
        seed=seed,
        lump=lump,
        route=route,
        points=points,
    )
    lr, seeds, seed = chosen.lr, chosen.seeds, chosen.seed
    steps = horizon_steps(chosen.t_max, lr=lr)
    base = _simulation_settings(settings)
    _check_workload(problem, base, steps=steps, seeds=seeds, n_points=chosen.points)
    rule, rule_source = start_rule(problem, chosen, b0=b0, init_scale=init_scale)
    # One set of steps for all four runs, so that every gap compares equal times.
    record = _recorded_steps(steps, chosen.points)
    # resolved here (the file's simulate: section), as the runs get the graph and examples
    sim_settings = replace(base, record_steps=tuple(int(k) for k in record)).resolved(
        problem.settings
    )
    common = dict(
        source=problem.graph,
        examples=problem.examples(),
        steps=steps,
        lr=lr,
        weight_decay=chosen.weight_decay,
    )
    random_run = dict(
        common,
        init_scheme=chosen.init_scheme,
        init_scale=chosen.init_scale,
        seeds=seeds,
        seed=seed,
        settings=sim_settings,
    )
    times = record * lr
    taken = _route(problem, chosen, rule)
    if taken.model is None:
        return _compare_matrix(
            problem,
            out,
            chosen=chosen,
            rule=(rule, rule_source),
            reason=taken.reason,
            run=dict(common, seeds=seeds, seed=seed, settings=sim_settings),
            times=times,
            steps=steps,
            force=force,
        )
    with Simulations() as runs_of:
        runs_of.submit(random_run, priority=1)  # sent first: it does not need the theory
        from ..solution import solve  # scipy, while the worker imports torch

        start, model = taken.start, taken.model
        whole = _bases_of(model)
        # one seed: run first if the random runs have not begun (the shorter run first
        # keeps both cores busy while the figures' library loads here)
        runs_of.submit(_decoupled_run(common, whole, seed=seed, settings=sim_settings), priority=0)
        ode = solve(model, t_max=steps * lr, times=times, dynamics="flow")
        gd_map = solve(model, t_max=steps * lr, lr=lr, times=times, dynamics="gd-map")
        stages = predicted_stages(  # while the simulations run
            problem,
            b0=start,
            route=chosen.route,
            lump=chosen.lump,
            t_max=steps * lr,
            reduction=model if isinstance(model, Reduction) else None,
        )
        random, decoupled = runs_of.results(before=prepare_drawing)
    runs = Runs(ode, gd_map, decoupled, random)
    described = _description(problem, runs, lr=lr, steps=steps, rule=rule, b0=start)
    metrics: dict[str, Any] = {
        **described,
        "theory_start_from": rule_source,
        "starts": starts_in_words(described, chosen, rule),
        "init_scheme": chosen.init_scheme,
        "init_scale": float(chosen.init_scale),
        "seeds": list(random.meta["seeds"]),
        "lump": chosen.lump,
        "route": ode.meta["route"],  # as the solver recorded it
        "route_reason": ode.meta.get("route_reason", ""),
        "modes": {
            edge_name(e): [int(a) for a in whole.edge_bases(e, seed=seed)[2]]
            for e in trained_edges(problem.graph)
        },
        "dtype": decoupled.meta["dtype"],
        "device": decoupled.meta["device"],
        **loss_metrics(runs, source=str(getattr(problem, "source", None) or "problem")),
        "stages": stages,
        "definitions": dict(DEFINITIONS),
    }
    if out is None:
        return CompareResult(metrics, ode, gd_map, decoupled, random, ())
    with atomic_folder(out, force=force, names=FILES, parents=True) as temporary:
        written = _write(temporary, metrics, model, runs)
    files = [out / f.name for f in written]
    return CompareResult(metrics, ode, gd_map, decoupled, random, tuple(files))


@dataclass(frozen=True)
class _Taken:
    """The theory's route for a comparison: its dynamics (``None`` on the matrix route),
    its start $b(0)$ and why ``auto`` took it."""

    model: Any
    start: Any
    reason: str


def _route(problem: Problem, chosen: Settings, rule: str) -> _Taken:
    """The one route rule of every command (:func:`gdln.solution._dynamics.route_of`),
    with the theory's start: the exact reduction where the statistics share bases, else
    the full-matrix flow (``model`` ``None``)."""
    from ..solution._dynamics import route_of

    if chosen.route == "matrix":
        return _Taken(None, chosen.b0, "")
    start = chosen.b0
    if rule == "random":
        try:
            start = theory_start(problem, chosen, rule)
        except NotDiagonalizableError:
            if chosen.route != "auto":
                raise
            # no bases, so no mode strengths: the route rule below takes the full matrices
    taken = route_of(
        problem,
        route=chosen.route,
        lump=chosen.lump,
        b0=start,
        weight_decay=chosen.weight_decay,
    )
    return _Taken(taken.model, start, taken.reason)


def _compare_matrix(
    problem: Problem,
    out: Path | None,
    *,
    chosen: Settings,
    rule: tuple[str, str],
    reason: str,
    run: dict[str, Any],
    times: np.ndarray,
    steps: int,
    force: bool,
) -> CompareResult:
    """:func:`compare` on the matrix route (:mod:`gdln.comparison._matrix`): the random
    runs from the starts of ``rule``, and the full-matrix flow and map from each run's own
    initial weights; no decoupled run (there are no bases)."""
    lr, t_max = chosen.lr, steps * chosen.lr
    starts = matrix_starts(
        problem, rule=rule[0], chosen=chosen, seeds=chosen.seeds, seed=chosen.seed
    )
    edges = trained_edges(problem.graph)
    given = {(str(u), str(v)): w for (u, v), w in starts.items()}
    with Simulations() as runs_of:
        runs_of.submit(dict(run, weights=given), priority=0)
        ode, gd_map = matrix_theory(
            problem, starts, t_max=t_max, lr=lr, times=times, weight_decay=chosen.weight_decay
        )
        scale = typical_scale(starts, edges)
        stages = predicted_stages(problem, b0=scale, route="matrix", lump=chosen.lump, t_max=t_max)
        (random,) = runs_of.results(before=prepare_drawing)
    runs = Runs(ode, gd_map, None, random)
    described = _description(problem, runs, lr=lr, steps=steps, rule=rule[0], b0=scale)
    start = (
        f"random W(0), singular values b0 = {float(chosen.b0):g}"
        if rule[0] == "b0"
        else f"{chosen.init_scheme}, init_scale {float(chosen.init_scale):g}"
    )
    metrics: dict[str, Any] = {
        **described,
        "theory_start_from": rule[1],
        "starts": {
            "ode": "each seed's own W(0)",
            "gd_map": "each seed's own W(0)",
            "random": start,
        },
        "init_scheme": chosen.init_scheme if rule[0] == "random" else "given",
        "init_scale": float(chosen.init_scale),
        "seeds": list(random.meta["seeds"]),
        "lump": "none",
        "route": "matrix",
        "route_reason": reason,
        "dtype": random.meta["dtype"],
        "device": random.meta["device"],
        **matrix_metrics(runs, edges=edges),
        "stages": stages,
        "definitions": {**DEFINITIONS, **MATRIX_DEFINITIONS},
    }
    result = CompareResult(metrics, ode, gd_map, None, random, ())
    if out is None:
        return result
    with atomic_folder(out, force=force, names=FILES, parents=True) as temporary:
        written = _write(temporary, metrics, None, runs)
    return replace(result, files=tuple(out / f.name for f in written))


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


def _settings(problem: Problem, **given: Any) -> Settings:
    """The problem's settings with the call's, checked before anything is computed."""
    try:
        chosen = problem.settings.given(**given)
    except SettingError as err:
        raise SimulationSpecError(str(err)) from None
    check_count("points", chosen.points, least=2, limit="points", cls=SimulationSpecError)
    if chosen.init_scheme not in RANDOM_SCHEMES:
        raise SimulationSpecError(
            f"init_scheme: the random runs take one of {', '.join(RANDOM_SCHEMES)}, got "
            f"{chosen.init_scheme!r} (the decoupled run is always made)"
        )
    return chosen


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


def _simulation_settings(settings: SimulationSettings | None) -> SimulationSettings:
    """The settings of both runs: full-batch gradient descent (the dynamics the theory
    describes); only dtype, device, threads and progress may be chosen."""
    gradient_descent: dict[str, Any] = {"optimizer": "gd", "momentum": 0.0, "batch_size": None}
    if settings is None:
        return SimulationSettings(**gradient_descent)
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
    return replace(settings, **gradient_descent)


def _bases_of(model: Any) -> Reduction:
    """The reduction whose bases give the decoupled weights of Eq. (9): the whole network's
    (:attr:`gdln.Reduction.whole`; every context, one variable per edge where the theory
    was derived on the symmetry quotient)."""
    whole = getattr(model, "whole", None)
    if whole is None:
        raise SimulationSpecError(
            f"{model.problem.source}: the moment route has no bases for the decoupled run; "
            "compare needs a problem whose paths can be listed"
        )
    return whole


def _decoupled_run(
    common: dict[str, Any], reduction: Reduction, *, seed: int, settings: SimulationSettings
) -> dict[str, Any]:
    """The arguments of the simulation from the decoupled weights of Eq. (9)."""
    weights = reduction.decoupled_weights(seed=seed)
    return dict(
        common,
        weights={(str(u), str(v)): w for (u, v), w in weights.items()},
        seeds=[seed],  # one run: given weights and full-batch steps make every seed alike
        bases=reduction.decoupled_bases(seed=seed),
        settings=settings,
    )


def _description(
    problem: Problem, runs: Runs, *, lr: float, steps: int, rule: str, b0: Any
) -> dict[str, Any]:
    """The problem, the time axis and where the theory started, for ``metrics.json``."""
    graph = problem.graph
    drawn = isinstance(b0, dict) and all(isinstance(k, tuple) for k in b0)  # per-edge strengths
    values = b0 if drawn else initial_values(problem, b0)
    return {
        "graph": str(graph.graph.get("name", "")),
        "source": str(getattr(problem, "source", "")),
        "params": {k: str(v) for k, v in (getattr(problem, "params", {}) or {}).items()},
        "time_unit": "tau (t/tau = lr * step)",
        "lr": float(lr),
        "t_max": float(steps * lr),
        "steps": steps,
        "theory_start": rule,
        "b0": {edge_name(e): float(values[e]) for e in graph.edges if e in values},
    }


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
    files += draw_side_by_side(
        [
            lambda: plot_loss(out, metrics, runs),
            lambda: plot_singular_values(out, metrics, reduction, runs),
        ]
    )
    metrics["files"] = [f.name for f in files] + ["metrics.json"]
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    files.append(out / "metrics.json")
    return files
