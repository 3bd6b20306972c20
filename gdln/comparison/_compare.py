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
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from .._edge import Edge, edge_name
from .._errors import GdlnError
from ..reduction._reduce import reduce
from ..simulation._errors import SimulationSpecError
from ..simulation._init import initial_weights
from ..simulation._names import INITS
from ..simulation._settings import SimulationSettings
from ..simulation._simulate import simulate
from ..solution._solve import solve
from ..solution._trajectory import Trajectory, time_to_half_loss
from ._figures import save_figure

__all__ = [
    "CompareResult",
    "compare",
    "initial_mode_strengths",
    "max_relative_gap",
    "theory_edge_values",
    "time_to_half_loss",
]


_USED_SETTINGS = ("dtype", "device", "threads", "progress")

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


@dataclass(frozen=True)
class CompareResult:
    """What :func:`compare` computed and wrote.

    Attributes
    ----------
    metrics
        The content of ``metrics.json``.
    ode, gd_map, decoupled, random
        The four trajectories.
    files
        The paths written.
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


def theory_edge_values(reduction: Any, trajectory: Trajectory) -> dict[Edge, np.ndarray]:
    r"""The reduced variable of every mode at every edge, from a solved reduction.

    Returns
    -------
    dict
        Edge -> ``(T, k)``, column ``a`` being mode ``reduction.edge_bases(edge)[2][a]``,
        i.e. $b_e^\alpha(t)$ with $W_e = \sum_\alpha b_e^\alpha\, l_\alpha r_\alpha^\top$
        (Eq. 9). Edges carrying no mode are absent.
    """
    per_edge: dict[Edge, dict[int, np.ndarray]] = {}
    several = len(reduction.systems) > 1
    for k, system in enumerate(reduction.systems):
        suffix = f"@{k}" if several else ""
        for variable, edges in system.edges.items():
            name = f"{variable}{suffix}"
            if name not in trajectory.series:
                continue
            values = np.asarray(trajectory.series[name], dtype=float)
            for edge in edges:
                cols = per_edge.setdefault(tuple(edge), {})
                for a, mode in enumerate(system.modes):
                    cols[int(mode)] = values[:, a]
    out = {}
    for edge, cols in per_edge.items():
        slots = reduction.edge_bases(edge)[2]
        if all(s in cols for s in slots) and slots:
            out[edge] = np.column_stack([cols[s] for s in slots])
    return out


def initial_mode_strengths(
    reduction: Any, weights: Mapping[Edge, np.ndarray], *, seed: int = 0
) -> dict[Edge, float]:
    r"""Initial values $b_e(0)$ of the reduced variables, read off (random) weights.

    The theory of Eq. (9) writes $W_e = \sum_\alpha b_e^\alpha\, d_{t(e)}^\alpha
    (d_{s(e)}^\alpha)^\top$, with $d_v^\alpha$ the data's mode vectors at input and output
    nodes and free directions at hidden nodes. For arbitrary weights this reads
    $b_e^\alpha = (d_{t(e)}^\alpha)^\top W_e\, d_{s(e)}^\alpha$ once a direction is chosen
    at every hidden node $v$: the normalised sum of what the weights already carry to
    $v$ for mode $\alpha$, i.e. $W_e d_{s(e)}^\alpha$ over in-edges from inputs and
    hidden nodes earlier in topological order, plus $W_e^\top d_{t(e)}^\alpha$ over
    out-edges into outputs (the reduction's own hidden basis where nothing arrives).

    For a two-layer pathway $x\to h\to y$ this is exact for the early, linear phase of
    learning from small weights: $w_1 = W_1 r$ and $w_2 = W_2^\top l$ grow along
    $w_1 + w_2$ at the rate of the reduced theory, and the rule gives the same growing
    part, $b_1 + b_2 = \lVert w_1 + w_2\rVert$, and the same conserved quantity,
    $b_1^2 - b_2^2 = \lVert w_1\rVert^2 - \lVert w_2\rVert^2$, which gradient flow
    conserves in both. For deeper, shared pathways it is an estimate
    (misaligned random directions learn more slowly than aligned ones); README "Theory
    vs simulation" gives the measured agreement.

    Parameters
    ----------
    reduction
        From :func:`gdln.reduce` (only its mode vectors are used).
    weights
        Edge -> ``(|t|, |s|)`` or ``(S, |t|, |s|)`` (e.g. :func:`gdln.simulation.initial_weights`).
    seed
        Seed of the reduction's hidden bases, used only where no weight reaches a node.

    Returns
    -------
    dict
        Edge -> $b_e(0)$, the mean of $b_e^\alpha$ over the edge's modes and the seeds
        (one number per edge, as :func:`gdln.reduce` takes). Edges carrying no mode are
        absent.
    """
    graph = reduction.problem.graph
    inputs = {v for v in graph if graph.in_degree(v) == 0}
    outputs = {v for v in graph if graph.out_degree(v) == 0}
    stacks = {tuple(e): np.asarray(w, dtype=float) for e, w in weights.items()}
    stacks = {e: w[None] if w.ndim == 2 else w for e, w in stacks.items()}
    n_seeds = next(iter(stacks.values())).shape[0]
    bases = {tuple(e): reduction.edge_bases(tuple(e), seed=seed) for e in graph.edges}
    values: dict[Edge, list[float]] = {}
    for r in range(n_seeds):
        W = {e: w[r] for e, w in stacks.items()}
        direction: dict[tuple[Any, int], np.ndarray] = {}
        for v in nx.topological_sort(graph):
            if v in inputs or v in outputs:
                continue
            arriving: dict[int, np.ndarray] = {}
            for e in [*graph.in_edges(v), *graph.out_edges(v)]:
                left, right, slots = bases[e]
                for k, a in enumerate(slots):
                    if e[1] == v and e[0] in inputs:
                        image = W[e] @ right[:, k]
                    elif e[1] == v and (e[0], a) in direction:
                        image = W[e] @ direction[(e[0], a)]
                    elif e[0] == v and e[1] in outputs:
                        image = W[e].T @ left[:, k]
                    else:
                        continue
                    arriving[a] = arriving.get(a, 0.0) + image
            for a, total in arriving.items():
                norm = float(np.linalg.norm(total))
                if norm > 0:
                    direction[(v, a)] = total / norm
        for e in graph.edges:
            left, right, slots = bases[e]
            if not slots:
                continue
            strengths = [
                direction.get((e[1], a), left[:, k]) @ W[e] @ direction.get((e[0], a), right[:, k])
                for k, a in enumerate(slots)
            ]
            values.setdefault(e, []).append(float(np.mean(strengths)))
    return {e: float(np.mean(v)) for e, v in values.items()}


def max_relative_gap(t: np.ndarray, loss: np.ndarray, t_ref: np.ndarray, ref: np.ndarray) -> float:
    r"""$\max_t |L(t) - L_\mathrm{ref}(t)| / L_\mathrm{ref}(0)$, the reference interpolated."""
    on_grid = np.interp(np.asarray(t, float), np.asarray(t_ref, float), np.asarray(ref, float))
    return float(np.max(np.abs(np.asarray(loss, float) - on_grid)) / float(ref[0]))


def _plot_edges(graph: nx.DiGraph, edges: Sequence[Edge]) -> list[Edge]:
    """One representative edge per depth of its target (input layer, hidden, output...)."""
    depth: dict[Hashable, int] = {}
    for v in nx.topological_sort(graph):
        preds = list(graph.predecessors(v))
        depth[v] = 1 + max(depth[u] for u in preds) if preds else 0
    chosen: dict[int, Edge] = {}
    for e in edges:
        chosen.setdefault(depth[e[1]], e)
    return [chosen[d] for d in sorted(chosen)]


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
        Directory to write into (created). Existing files are refused unless ``force``.
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
        Number of recorded times.
    settings
        Only ``dtype``, ``device``, ``threads`` and ``progress`` are used (as in
        :func:`gdln.simulate`); the others must keep their defaults.
    force
        Replace existing output files.

    Returns
    -------
    CompareResult
        ``metrics``: ``decoupled_vs_map`` and ``decoupled_vs_ode`` (max over time of
        $|L_\mathrm{sim}-L_\mathrm{theory}|/L(0)$), ``random_vs_ode`` (that quantity's
        mean over seeds, and ``random_vs_ode_per_seed``), ``random_mean_vs_ode`` (that
        quantity for the seeds' mean loss), ``time_to_half_loss`` (first
        $t$ with $L\le L(0)/2$) for each run; ``theory_init`` and ``init_b`` (edge ->
        $b_e(0)$) say where the theory started.
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise SimulationSpecError(f"out_dir: {out} exists and is not a directory")
    existing = [out / f for f in FILES if (out / f).exists()]
    if existing and not force:
        raise FileExistsError(f"{existing[0]} exists; pass force=True (CLI: --force) to replace it")
    if not (isinstance(n_points, int) and n_points >= 2):
        raise SimulationSpecError(f"n_points: expected an int >= 2, got {n_points!r}")
    random_schemes = [k for k in INITS if k != "given"]
    if init_scheme not in random_schemes:
        raise SimulationSpecError(
            f"init_scheme: expected one of {sorted(random_schemes)}, got {init_scheme!r}"
        )
    if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
        raise SimulationSpecError(f"lr: expected a finite number > 0, got {lr!r}")
    base = _simulation_settings(settings)
    file_settings = getattr(problem, "settings", {}) or {}
    horizon = float(t_max if t_max is not None else file_settings.get("t_max", 10))
    steps = round(horizon / lr)
    if steps < 1:
        raise SimulationSpecError(f"t_max: {horizon} is less than one step of lr={lr}")
    record_every = max(1, steps // (n_points - 1))
    graph = problem.graph
    if theory_init == "auto":
        rule = "auto"
        drawn = initial_weights(graph, init_scheme=init_scheme, init=init, seeds=seeds, seed=seed)
        modes_only = reduce(problem, lump="none")  # type: ignore[arg-type]
        b0: Any = initial_mode_strengths(modes_only, drawn, seed=seed)
    elif theory_init == "file":
        rule, b0 = "file", float(file_settings.get("init", 0.001))
    elif (
        isinstance(theory_init, (int, float))
        and not isinstance(theory_init, bool)
        and math.isfinite(theory_init)
    ):
        rule, b0 = "given", float(theory_init)
    else:
        raise SimulationSpecError(
            f"theory_init: expected 'auto', 'file' or a number, got {theory_init!r}"
        )

    reduction = reduce(problem, lump=lump, init=b0)  # type: ignore[arg-type]
    ode = solve(reduction, t_max=steps * lr, n_points=n_points)
    gd_map = solve(reduction, t_max=steps * lr, lr=lr, n_points=n_points)
    examples = problem.examples()
    sim_settings = replace(base, record_every=record_every)
    decoupled = simulate(
        graph,
        examples,
        steps=steps,
        lr=lr,
        init_scheme="given",
        weights={
            (str(u), str(v)): w for (u, v), w in reduction.decoupled_weights(seed=seed).items()
        },
        bases=reduction.decoupled_bases(seed=seed),
        settings=sim_settings,
    )
    random = simulate(
        graph,
        examples,
        steps=steps,
        lr=lr,
        init_scheme=init_scheme,
        init=init,
        seeds=seeds,
        seed=seed,
        settings=sim_settings,
    )

    l0 = float(ode.loss[0])
    if not l0 > 0:
        raise GdlnError(
            f"{getattr(problem, 'source', 'problem')}: the initial loss is {l0}; nothing to learn"
        )
    per_seed = [
        max_relative_gap(random.t, random.loss[:, s], ode.t, ode.loss)
        for s in range(random.loss.shape[1])
    ]
    half_random = [time_to_half_loss(random.t, random.loss[:, s]) for s in range(len(per_seed))]
    reached = [h for h in half_random if h is not None]
    metrics: dict[str, Any] = {
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
        "init_scheme": init_scheme,
        "init": float(init),
        "seeds": list(random.meta["seeds"]),
        "lump": lump,
        "dtype": base.dtype,
        "device": decoupled.meta["device"],
        "initial_loss": l0,
        "decoupled_vs_map": max_relative_gap(
            decoupled.t, decoupled.loss[:, 0], gd_map.t, gd_map.loss
        ),
        "decoupled_vs_ode": max_relative_gap(decoupled.t, decoupled.loss[:, 0], ode.t, ode.loss),
        "map_vs_ode": max_relative_gap(gd_map.t, gd_map.loss, ode.t, ode.loss),
        "random_vs_ode": float(np.mean(per_seed)),
        "random_vs_ode_per_seed": per_seed,
        "random_mean_vs_ode": max_relative_gap(random.t, random.loss.mean(1), ode.t, ode.loss),
        "time_to_half_loss": {
            "ode": time_to_half_loss(ode.t, ode.loss),
            "gd_map": time_to_half_loss(gd_map.t, gd_map.loss),
            "decoupled": time_to_half_loss(decoupled.t, decoupled.loss[:, 0]),
            "random_per_seed": half_random,
            "random_mean": float(np.mean(reached)) if reached else None,
        },
        "definitions": {
            "decoupled_vs_map": "max_t |L_sim(t) - L_map(t)| / L(0), decoupled init (Eq. 9)",
            "random_vs_ode": "mean over seeds of max_t |L_sim(t) - L_ode(t)| / L(0)",
            "random_mean_vs_ode": "max_t |mean over seeds of L_sim(t) - L_ode(t)| / L(0)",
            "theory_init": "auto: b_e(0) read off the random initial weights "
            "(gdln.comparison.initial_mode_strengths); file: solve.init; given: a number",
            "time_to_half_loss": "first t/tau with L(t) <= L(0)/2, linear interpolation",
        },
    }

    out.mkdir(parents=True, exist_ok=True)
    files = [
        ode.save(out / "theory_ode.npz", force=force),
        gd_map.save(out / "theory_map.npz", force=force),
        decoupled.save(out / "sim_decoupled.npz", force=force),
        random.save(out / "sim_random.npz", force=force),
    ]
    files += _plot_loss(out, metrics, ode, gd_map, decoupled, random)
    files += _plot_singular_values(out, metrics, reduction, ode, decoupled, random)
    metrics["files"] = [f.name for f in files] + ["metrics.json"]
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    files.append(out / "metrics.json")
    return CompareResult(metrics, ode, gd_map, decoupled, random, tuple(files))


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


def _title(metrics: Mapping[str, Any]) -> str:
    params = ", ".join(f"{k}={v}" for k, v in metrics["params"].items())
    values = list(metrics["init_b"].values())
    if metrics["theory_init"] == "auto":
        start = f"b(0) from the random weights ({min(values):.3g}–{max(values):.3g})"
    else:
        start = f"b(0) = {values[0]:g}"
    return (
        f"{metrics['graph']}" + (f" ({params})" if params else "") + f"; lr = {metrics['lr']:g}, "
        f"{start}, random: {metrics['init_scheme']} $\\sigma_0$ = {metrics['init']:g}"
    )


def _figure(figsize: tuple[float, float] = (7.5, 4.8)) -> Any:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt.figure(figsize=figsize, layout="constrained")


def _plot_loss(
    out: Path,
    metrics: Mapping[str, Any],
    ode: Trajectory,
    gd_map: Trajectory,
    decoupled: Trajectory,
    random: Trajectory,
) -> list[Path]:
    fig = _figure()
    ax = fig.add_subplot()
    n = random.loss.shape[1]
    mean, std = random.loss.mean(1), random.loss.std(1)
    for s in range(n):
        ax.plot(random.t, random.loss[:, s], color="tab:red", lw=0.5, alpha=0.35)
    ax.fill_between(random.t, mean - std, mean + std, color="tab:red", alpha=0.2, lw=0)
    ax.plot(
        random.t,
        mean,
        color="tab:red",
        lw=1.5,
        label=f"simulation, random init ({n} seeds, mean ± sd)",
    )
    step = max(1, len(decoupled.t) // 25)
    ax.plot(
        decoupled.t[::step],
        decoupled.loss[::step, 0],
        "o",
        color="tab:green",
        ms=4,
        label="simulation, decoupled init (Eq. 9)",
    )
    ax.plot(ode.t, ode.loss, color="tab:blue", lw=2, label="theory, reduced ODE (Eq. 10)")
    ax.plot(gd_map.t, gd_map.loss, "--", color="navy", lw=1, label="theory, reduced GD map")
    ax.set_xlabel(r"time $t$ (units of $\tau$; $t/\tau$ = lr $\times$ step)")
    ax.set_ylabel(r"training loss $\mathcal{L}$ (Eq. 1)")
    ax.set_title(_title(metrics), fontsize=9)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    return save_figure(fig, out, "loss")


def _plot_singular_values(
    out: Path,
    metrics: Mapping[str, Any],
    reduction: Any,
    ode: Trajectory,
    decoupled: Trajectory,
    random: Trajectory,
) -> list[Path]:
    """One panel per depth of edge, so that edges with equal theory curves stay visible."""
    graph = reduction.problem.graph
    theory = theory_edge_values(reduction, ode)
    edges = _plot_edges(graph, [tuple(e) for e in graph.edges if tuple(e) in theory])
    colours = ["tab:blue", "tab:orange", "tab:purple", "tab:brown", "tab:olive", "tab:cyan"]
    styles: list[Any] = ["-", (0, (6, 2)), (0, (3, 3)), (3, (3, 3)), (0, (1, 1)), (1, (1, 1))]
    fig = _figure((3.3 * max(len(edges), 2), 4.2))
    axes = fig.subplots(1, len(edges), sharey=True, squeeze=False)[0]
    step = max(1, len(decoupled.t) // 25)
    for ax, edge in zip(axes, edges, strict=True):
        name = edge_name(edge)
        sv_theory = np.sort(np.abs(theory[edge]), axis=1)[:, ::-1]
        k = sv_theory.shape[1]
        sv_random = random.series[f"sv/{name}"][:, :, :k]
        mean, std = sv_random.mean(1), sv_random.std(1)
        for a in range(k):
            colour = colours[a % len(colours)]
            ax.plot(  # a line style per mode too: degenerate modes share a theory curve
                ode.t,
                sv_theory[:, a],
                color=colour,
                lw=2,
                ls=styles[a % len(styles)],
                label=f"mode {a + 1}: theory",
            )
            ax.fill_between(
                random.t,
                mean[:, a] - std[:, a],
                mean[:, a] + std[:, a],
                color=colour,
                alpha=0.15,
                lw=0,
            )
            ax.plot(
                random.t,
                mean[:, a],
                ":",
                color=colour,
                lw=1.5,
                label="random init, mean ± sd" if a == 0 else None,
            )
            ax.plot(
                decoupled.t[::step],
                decoupled.series[f"sv/{name}"][::step, 0, a],
                "o",
                color=colour,
                ms=3,
                mfc="none",
                label="decoupled init" if a == 0 else None,
            )
        ax.set_title(f"edge {name}", fontsize=9)
        ax.set_xlabel(r"time $t/\tau$ (lr $\times$ step)")
    axes[0].set_ylabel("singular values of $W_e$ (one colour per mode)")
    axes[0].legend(fontsize=7, ncol=1)
    fig.suptitle(_title(metrics), fontsize=9)
    return save_figure(fig, out, "singular_values")
