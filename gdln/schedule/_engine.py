r"""Solving a schedule: each phase from the previous phase's end state, on its route.

Gradient flow sees the data only through $\Sigma^{yx}(p)$ and $\Sigma^x(j,p)$ (Eqs. 3-6
of Saxe, Sodhani & Lewallen 2022); a schedule makes them piecewise constant, so the flow
map is a semigroup: the state at the end of one phase *is* the start of the next. The
only numerical rule is to restart the stepper at every boundary (never step across a jump
of the right-hand side); the gradient-descent map is exact when the boundaries fall on
whole steps.

The routes, in the order :func:`run_schedule` tries them:

1. **contexts**: the reduced ODE of Eq. (10) or its exact gradient-descent map, from
   $b(0)$ (the problem's own decoupled start, as a simulation draws it), for the phases
   whose statistics share that start's bases
   (:mod:`gdln.schedule._reduced`; lumping re-checked per phase);
2. **lambda-balanced**: the closed form of a λ-balanced two-layer pathway (Braun, Dominé,
   Fitzgerald & Saxe 2022), restarted at each phase: $\Lambda = W_2^\top W_2 -
   W_1W_1^\top$ is conserved under any data, so every phase starts λ-balanced again
   (:mod:`gdln.balanced._phases`; gradient flow without weight decay only);
3. **matrix**: the full-matrix flow or map of Eqs. (3)-(4) from explicit weights
   (:mod:`gdln.schedule._matrix`), which holds always.

From $b(0)$ the reduced route takes the phases it can, then the weights of Eq. (9) carry
on by the other two; from given weights, each phase takes the closed form where it holds,
else the full matrices. Each context's loss is recorded all along, also in phases that do
not train it (that curve is forgetting).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import sympy as sp

from .._bounded._limits import check_memory
from .._edge import Edge, edge_name
from .._errors import GdlnError, NotDiagonalizableError, TooManyPathsError
from ..balanced._errors import BalancedSpecError, NotBalancedError
from ..balanced._phases import balanced_phase, prepare_schedule, refuse_decay
from ..balanced._weights import read_weights
from ..settings._declared import Settings
from ..solution._bounds import check_count, check_solve_settings, check_times
from ..solution._flow import FlowPlan
from ..solution._full import MEMORY_COPIES, initial_full_weights
from ..solution._series import CONTEXT_LOSS, matrix_key, pathway_key
from ..solution._trajectory import Trajectory
from ..task._problem import Problem
from ..task._schedule import Schedule, phase_task, schedule_task
from ..task._task import Task
from . import _reduced
from ._matrix import ContextLosses, check_saddle_weights, matrix_phase
from ._result import PhaseRun, ScheduleResult

__all__ = ["ROUTES", "run_schedule", "schedule_solved"]

ROUTES = ("contexts", "lambda-balanced", "matrix")
"""The routes of a phase (``PhaseRun.route``), in the order they are tried."""
SCHEDULE_ROUTE = "schedule"
"""``meta["route"]`` of a solved schedule (each phase's route is in ``meta["schedule"]``)."""


def run_schedule(
    problem: Problem,
    schedule: Schedule,
    settings: Settings,
    *,
    times: np.ndarray,
    weights: Mapping[Any, Any] | None,
    rtol: float,
    atol: float,
    stages: bool = True,
) -> ScheduleResult:
    r"""Solve ``schedule`` on ``problem`` from resolved settings (the engine of
    :func:`gdln.solve` with ``schedule=``; module docstring for the routes).

    Parameters
    ----------
    problem
        The network and its task (the schedule's labels are its contexts').
    schedule
        The phases.
    settings
        The settings resolved at :func:`gdln.solve`'s door: ``dynamics`` and ``lr``
        (gradient flow, or gradient descent with every phase a whole number of steps),
        ``b0`` (without ``weights``: the start of the reduced variables, Eq. 9, or of the
        full matrices' singular values where the problem has no common bases),
        ``weight_decay`` ($\gamma \ge 0$), ``lump`` (of the reduced route, re-checked per
        phase; ``"none"`` where the phases lump differently), ``route`` (``"auto"``, the
        order of the module docstring; ``"contexts"`` or ``"quotient"``, the reduced route
        for every phase or refused, derived on every context; ``"matrix"``, the full
        matrices from the start), ``method`` (the stepper of the reduced ODE) and ``seed``
        (of the random bases: hidden nodes of Eq. 9, the singular vectors of a
        full-matrix start from ``b0``).
    times
        Increasing times from 0 to at most the schedule's duration; the boundaries are
        recorded besides. With the map, each a whole number of steps.
    weights
        Edge -> weights at the start (every trained edge), instead of ``b0``.
    rtol, atol
        The tolerances of every integration.
    stages
        Whether to compute the time scales from small initial weights where they apply.

    Returns
    -------
    ScheduleResult
        The trajectory, the phases (route and why, stages) and their measures.

    Raises
    ------
    GdlnError
        A phase boundary that is not a whole number of steps of ``lr`` (naming the file,
        the phase's key and the duration), a reversal from an exactly balanced aligned
        start on the reduced route, a route asked for that does not hold, malformed
        weights or times.
    """
    lr = settings.lr if settings.dynamics == "gd-map" else None
    route = settings.route
    task = problem.require_task()
    schedule.check(task)
    if route == "moments":
        raise GdlnError(
            f"{problem.source}: route 'moments' has no schedule; use auto, contexts or matrix"
        )
    union = schedule_task(task, schedule)
    labels = tuple(c.label for c in union.contexts)
    phases = [dataclasses.replace(problem, task=phase_task(union, p)) for p in schedule.phases]
    grid, spans = _grid(schedule, times, lr)
    runner = _Runner(problem, union, phases, grid, settings)
    runner.bounds = schedule.boundaries
    runner.rtol, runner.atol = rtol, atol
    if weights is not None:
        runner.start_from(_given(problem, weights), "weights given")
    elif route == "matrix":
        runner.start_from(
            initial_full_weights(problem, settings, seed=settings.seed), "route matrix"
        )
    else:
        try:
            reduced = _reduced.reduced_route(
                dataclasses.replace(problem, task=union),
                phases,
                settings,
                names=[p.key for p in schedule.phases],
            )
        except (NotDiagonalizableError, TooManyPathsError) as err:
            if route != "auto":
                raise
            runner.start_from(
                initial_full_weights(problem, settings, seed=settings.seed),
                f"the start has no reduced dynamics ({_reduced.short(err)})",
            )
        else:
            if not len(reduced.start.flow.y0):
                raise GdlnError(
                    f"{problem.source}: the task's own mixture of contexts gives no mode any "
                    "data (its statistics cancel), so its decoupled start (Eq. 9) is zero "
                    "weights, a fixed point; give the task the first phase's probabilities, "
                    "or start from weights"
                )
            if route != "auto" and len(reduced.phases) < len(phases):
                raise GdlnError(f"{problem.source}: route {route!r} ends at {reduced.why}")
            runner.start_reduced(reduced)
    runs = []
    for k, phase in enumerate(schedule.phases):
        route_name, why = runner.phase(k, spans[k], where=f"{schedule.source}: {phase.key}")
        note, found = runner.stages_of(k) if stages else ("not asked for", ())
        shown = {c.label: float(c.probability) for c in phases[k].require_task().contexts}
        runs.append(
            PhaseRun(
                name=phase.name,
                key=phase.key,
                start=schedule.boundaries[k],
                end=schedule.boundaries[k + 1],
                probabilities=shown,
                route=route_name,
                why=why,
                stages=found,
                stages_note=note,
            )
        )
    trajectory = runner.trajectory(schedule, runs, labels)
    return ScheduleResult(trajectory, tuple(runs), labels)


def _grid(
    schedule: Schedule, times: npt.ArrayLike, lr: float | None
) -> tuple[np.ndarray, list[np.ndarray]]:
    """The recorded times (``times`` and the boundaries) and, per phase, the indices of
    the times in it (its start and end included)."""
    bounds = np.array(schedule.boundaries)
    total = float(bounds[-1])
    if lr is not None:
        for k, phase in enumerate(schedule.phases):
            steps = phase.duration / lr
            if abs(steps - round(steps)) > 1e-9 * max(1.0, steps) or round(steps) < 1:
                raise schedule.fail(
                    k,
                    "duration",
                    f"duration {phase.duration:g} is not a whole number of steps of lr={lr:g} "
                    f"(duration/lr = {steps:.6g}); the gradient-descent map needs every "
                    "boundary on a step",
                )
    check_solve_settings(total, lr=lr, n_points=2)
    recorded = check_times(times, total, lr)
    merged = np.sort(np.concatenate([recorded, bounds]))
    keep = np.concatenate([[True], np.diff(merged) > 1e-12 * max(total, 1.0)])
    grid = merged[keep]
    for b in bounds:  # a time within rounding of a boundary is the boundary
        grid[int(np.argmin(np.abs(grid - b)))] = b
    if lr is not None:
        grid = np.rint(grid / lr) * lr
    check_count("recorded times with the boundaries", len(grid), least=2, limit="points")
    spans = []
    for k in range(len(schedule.phases)):
        inside = np.flatnonzero((grid >= bounds[k]) & (grid <= bounds[k + 1]))
        spans.append(inside)
    return grid, spans


def _given(problem: Problem, weights: Mapping[Any, Any]) -> dict[Edge, np.ndarray]:
    """The given weights by edge, every trained edge present, fixed edges $cI$."""
    read = read_weights(problem, weights)
    graph = problem.graph
    out = {}
    for edge in graph.edges:
        fixed = graph.edges[edge].get("fixed")
        if fixed is not None:
            out[edge] = float(fixed) * np.eye(int(graph.nodes[edge[1]]["size"]))
        elif edge in read:
            out[edge] = read[edge]
        else:
            raise GdlnError(f"{problem.source}: weights: no array for edge {edge_name(edge)}")
    return out


class _Runner:
    """The state of a schedule being solved, phase by phase, and what it has recorded."""

    def __init__(
        self,
        problem: Problem,
        union: Task,
        phases: Sequence[Problem],
        grid: np.ndarray,
        settings: Settings,
    ) -> None:
        self.problem, self.phases, self.grid = problem, phases, grid
        n = len(union.contexts)
        share = sp.Rational(1, n)
        whole = Task(
            contexts=tuple(dataclasses.replace(c, probability=share) for c in union.contexts),
            datasets=union.datasets,
            random_gates=union.random_gates,
        )
        self.union = dataclasses.replace(problem, task=whole)
        self.lr = settings.lr if settings.dynamics == "gd-map" else None
        self.weight_decay, self.seed = settings.weight_decay, settings.seed
        self.rtol, self.atol, self.method = 1e-10, 1e-12, settings.method
        self.edges = list(problem.graph.edges)
        self.context_loss = np.zeros((len(grid), n))
        self.loss = np.zeros(len(grid))
        self.reduced: _reduced.ReducedRoute | None = None
        self.state: np.ndarray | None = None  # reduced variables (first-phase coordinates)
        self.weights: dict[Edge, np.ndarray] | None = None
        self.why = ""
        self.balanced_why = ""
        self.prepared: Any = None
        self.plans: dict[tuple[float, ...], FlowPlan] = {}
        self.losses: ContextLosses | None = None
        self.series: dict[str, dict[int, np.ndarray]] = {}
        self.routes: list[str] = []
        self.start_scale = 0.0
        self.scales: list[float] = []
        self.bounds: Sequence[float] = ()

    # -- starts ----------------------------------------------------------------------------
    def start_reduced(self, reduced: _reduced.ReducedRoute) -> None:
        self.reduced = reduced
        self.state = reduced.start.flow.y0.copy()
        self.start_scale = float(np.max(np.abs(self.state), initial=0.0))
        self.why = reduced.why

    def start_from(self, weights: dict[Edge, np.ndarray], why: str) -> None:
        self.weights = weights
        self.why = why
        self.start_scale = self._weight_scale(weights)

    def _weight_scale(self, weights: Mapping[Edge, np.ndarray]) -> float:
        graph = self.problem.graph
        trained = [w for e, w in weights.items() if graph.edges[e].get("fixed") is None]
        return max((float(np.linalg.norm(w, 2)) for w in trained if w.size), default=0.0)

    # -- one phase -------------------------------------------------------------------------
    def phase(self, k: int, rows: np.ndarray, *, where: str) -> tuple[str, str]:
        """Solve phase ``k`` at the grid rows ``rows``; its route and why."""
        local = self.grid[rows] - self.grid[rows[0]]
        reduced = self.reduced
        if reduced is not None and self.state is not None and k < len(reduced.phases):
            phase = reduced.phases[k]
            self.scales.append(_reduced.trained_scale(phase, self.state))
            _reduced.check_saddle(phase, self.state, where)
            states, contexts, loss, _ = _reduced.step(
                phase,
                self.state,
                local,
                lr=self.lr,
                method=self.method,
                rtol=self.rtol,
                atol=self.atol,
            )
            self._record(k, rows, contexts, loss)
            for key, values in _reduced.variables(phase, states).items():
                self.series.setdefault(key, {})[k] = values
            self.state = states[-1]
            self.routes.append("contexts")
            return "contexts", ""
        if self.weights is None:
            assert reduced is not None and self.state is not None
            self.weights = _reduced.weights_of(
                reduced.start, self.state, self.edges, seed=self.seed
            )
            self.state = None
        self.scales.append(self._weight_scale(self.weights))
        check_saddle_weights(self._plan(k), self.weights, where, rtol=_reduced.RADIAL_RTOL)
        why = self.why
        if self.lr is None and not self.balanced_why:
            try:
                self._balanced(k, rows, local, where)
            except (BalancedSpecError, NotBalancedError) as err:
                self.balanced_why = str(err)
            else:
                self.routes.append("lambda-balanced")
                return "lambda-balanced", why
        self._matrix(k, rows, local, where)
        self.routes.append("matrix")
        if self.lr is not None:
            return "matrix", why or "the gradient-descent map: the closed form is the flow's"
        return "matrix", "; ".join(x for x in (why, self.balanced_why) if x)

    def _balanced(self, k: int, rows: np.ndarray, local: np.ndarray, where: str) -> None:
        if self.prepared is None:
            self.prepared = prepare_schedule(self.union)
        assert self.weights is not None
        refuse_decay(self.weight_decay, f"{where}: ")
        done = balanced_phase(self.prepared, self.phases[k], self.weights, local, what=f"{where}: ")
        probabilities = _probabilities(self.phases[k])
        self._record(k, rows, done.context_loss, done.context_loss @ probabilities)
        for name, product in done.products.items():
            self.series.setdefault(pathway_key("W2W1", name), {})[k] = product
        self.weights = done.end

    def _matrix(self, k: int, rows: np.ndarray, local: np.ndarray, where: str) -> None:
        plan = self._plan(k)
        if self.losses is None:
            graph = self.problem.graph
            entries = sum(graph.nodes[u]["size"] * graph.nodes[v]["size"] for u, v in self.edges)
            check_memory(
                8.0 * entries * (len(self.grid) + MEMORY_COPIES),
                f"{self.problem.source}: the full-matrix flow of {entries} weights recorded "
                f"{len(self.grid)} times",
                advice="lower the points or the node sizes",
            )
            self.losses = ContextLosses.of(self.union, self.edges)
        assert self.weights is not None
        states = matrix_phase(
            plan,
            self.weights,
            local,
            lr=self.lr,
            rtol=self.rtol,
            atol=self.atol,
            source=where,
        )
        contexts = self.losses(states)
        self._record(k, rows, contexts, contexts @ _probabilities(self.phases[k]))
        for i, edge in enumerate(self.edges):
            stacked = np.array([w[i] for w in states])
            self.series.setdefault(matrix_key("W", edge), {})[k] = stacked
        self.weights = dict(zip(self.edges, states[-1], strict=True))

    def _plan(self, k: int) -> FlowPlan:
        """The full-matrix flow of phase ``k`` (one per mixture)."""
        key = tuple(_probabilities(self.phases[k]))
        if key not in self.plans:
            self.plans[key] = FlowPlan.of(self.phases[k], self.edges, gamma=self.weight_decay)
        return self.plans[key]

    def _record(self, k: int, rows: np.ndarray, contexts: np.ndarray, loss: np.ndarray) -> None:
        self.context_loss[rows] = contexts
        # a boundary's loss counts to the phase it ends
        first = 0 if k == 0 else 1
        self.loss[rows[first:]] = loss[first:]

    # -- time scales from small starts -----------------------------------------------------
    def stages_of(self, k: int) -> tuple[str, tuple[tuple[tuple[str, ...], float], ...]]:
        """The stages of phase ``k`` (:func:`gdln.timescales` of its task) where every
        variable its data reach is still at the schedule's small start (on the reduced
        route; every weight on the others), else why not."""
        scale = self.scales[k]
        u0 = self.start_scale
        if self.weight_decay:
            return "weight decay: the time scales assume none", ()
        if not 0 < u0 < 1:
            return f"the start's scale {u0:.3g} is not small (in (0, 1))", ()
        if scale > u0 * (1 + 1e-6):
            return (
                f"the phase starts from learned weights (largest {scale:.3g} > the start's "
                f"{u0:.3g}, where its data reach); the time scales hold from small weights",
                (),
            )
        from ..stages._timescales import stages_of

        try:
            phase = self.phases[k]
            found = stages_of(phase, dataclasses.replace(phase.settings, b0=u0), ode=False)
        except GdlnError as err:
            return f"not computed: {err}", ()
        start = float(self.bounds[k])
        return "", tuple((tuple(s.pathways), start + float(s.time)) for s in found.stages)

    # -- the result ------------------------------------------------------------------------
    def trajectory(
        self, schedule: Schedule, runs: Sequence[PhaseRun], labels: Sequence[str]
    ) -> Trajectory:
        series: dict[str, np.ndarray] = {CONTEXT_LOSS: self.context_loss}
        one_route = len(set(self.routes)) == 1
        if one_route:
            for key, parts in self.series.items():
                if len(parts) == len(runs):
                    series[key] = _joined(parts, len(self.grid), self._spans(schedule))
            if self.routes[0] == "matrix":
                for edge in self.edges:
                    key = matrix_key("W", edge)
                    if key in series:
                        series[matrix_key("sv", edge)] = np.linalg.svd(
                            series[key], compute_uv=False
                        )
        meta: dict[str, Any] = {
            "source": self.problem.source,
            "params": {k: str(v) for k, v in self.problem.params.items()},
            "route": SCHEDULE_ROUTE,
            "method": "gd-map" if self.lr is not None else "flow",
            "lr": self.lr,
            "weight_decay": float(self.weight_decay),
            "time_unit": "tau",
            "context_labels": list(labels),
            "schedule": {
                "boundaries": list(schedule.boundaries),
                "phases": [run.to_dict() for run in runs],
            },
        }
        if one_route and self.routes[0] == "contexts" and self.reduced is not None:
            flow = self.reduced.start.flow
            meta["variable_edges"] = {k: list(v) for k, v in flow.edges.items()}
            meta["lump"] = self.reduced.lump
            meta["modes"] = flow.meta.get("modes")
        return Trajectory(self.grid.copy(), self.loss.copy(), series, meta)

    def _spans(self, schedule: Schedule) -> list[np.ndarray]:
        bounds = schedule.boundaries
        return [
            np.flatnonzero((self.grid >= bounds[k]) & (self.grid <= bounds[k + 1]))
            for k in range(len(schedule.phases))
        ]


def _joined(
    parts: Mapping[int, np.ndarray], length: int, spans: Sequence[np.ndarray]
) -> np.ndarray:
    """One series from its parts per phase (each on its phase's rows, boundaries shared)."""
    first = parts[0]
    out = np.zeros((length, *first.shape[1:]))
    for k, rows in enumerate(spans):
        out[rows] = parts[k]
    return out


def _probabilities(problem: Problem) -> np.ndarray:
    return np.array([float(c.probability) for c in problem.require_task().contexts])


def schedule_solved(
    problem: Problem,
    schedule: Schedule,
    settings: Settings,
    *,
    times: npt.ArrayLike | None = None,
    weights: Mapping[Any, Any] | None = None,
    rtol: float = 1e-10,
    atol: float = 1e-12,
) -> ScheduleResult:
    """:func:`gdln.solve` with ``schedule=``, on the settings resolved at its door:
    ``schedule`` recorded at ``times`` or ``settings.points`` evenly spaced ones, each
    phase on its route (:func:`run_schedule`)."""
    step = settings.lr if settings.dynamics == "gd-map" else None
    total = schedule.duration
    if times is None:
        grid = np.linspace(0.0, total, settings.points)
        if step is not None:
            grid = np.unique(np.rint(grid / step)) * step
    else:
        grid = np.asarray(times, dtype=float)
    return run_schedule(
        problem, schedule, settings, times=grid, weights=weights, rtol=rtol, atol=atol
    )
