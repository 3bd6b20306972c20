r"""The reduced route through a schedule: one small ODE (or GD map) per phase, same bases.

A network started decoupled, $W_e = R_{t(e)}B_eR_{s(e)}^\top$ (Eq. 9 of Saxe, Sodhani &
Lewallen 2022), stays decoupled across a switch iff the new phase's statistics share the
same bases (Eqs. 7-8). The start is the problem's own decoupled start (the bases of its
own mixture of contexts, as :func:`gdln.simulate` draws it). When every context's
statistics share node bases, every mixture of them does, and only $s$ and $d$ change from
phase to phase; so each phase is reduced on its own (:func:`gdln.reduce` of the task with
that phase's probabilities, symmetry lumping re-checked per phase) and its bases are
compared with the start's, mode by mode and edge by edge, up to the sign of each mode
vector (a reversal $s\to-s$ may flip it). The state at the end of one phase, with those
signs, is the start of the next.

Where the lumpings of two phases differ, every phase is reduced again without lumping
(``lump="none"``: one variable per edge), which every phase shares. Where the bases
differ (a rotated or permuted teacher on a shared input, another readout, a new input
span), the route ends at that phase and :func:`weights_of` rebuilds the weights of Eq. (9)
for the routes that need none.

A reversal from an exactly balanced, aligned state sits on the saddle at the origin: the
reduced flow then moves each variable of the mode straight to 0, and the escape is set by
whatever breaks that symmetry (:func:`check_saddle` refuses it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._edge import Edge, edge_name
from .._errors import GdlnError, NotDiagonalizableError, TooManyPathsError
from ..reduction._numeric import NumericFlow
from ..reduction._reduce import derive
from ..reduction._system import Reduction
from ..settings._declared import Settings
from ..solution._gd_map import iterate_gd_map
from ..solution._solve import integrate_flow
from ..task._problem import Problem

__all__ = [
    "RADIAL_RTOL",
    "ReducedPhase",
    "ReducedRoute",
    "check_saddle",
    "reduced_route",
    "short",
    "step",
    "trained_scale",
    "variables",
    "weights_of",
]

BASIS_ATOL = 1e-9
"""How far $|r^{(k)\\top}r^{(0)}|$ of one mode vector in two phases may be from 1."""
RADIAL_RTOL = 1e-12
"""How far a mode's rate may be from a multiple of its state to count as radial."""
MAX_REDUCTIONS = 64
"""Most distinct mixtures of a schedule reduced one by one; the route ends at the next."""
SMALL = 1e-4
"""The scale at which :func:`check_saddle` looks again along the ray to the origin."""


@dataclass(frozen=True, eq=False)
class ReducedPhase:
    """One phase on the reduced route: its reduction, its numbers, and the signs that take
    the start's coordinates to this one's (state entry by state entry)."""

    reduction: Reduction
    flow: NumericFlow
    signs: np.ndarray


@dataclass(frozen=True, eq=False)
class ReducedRoute:
    """The reduction of the start (the problem's own mixture: its decoupled weights are the
    schedule's start), the phases that share its bases (a prefix of the schedule), the
    lumping they share, and why the route ends where it does (``""`` when it covers all)."""

    start: ReducedPhase
    phases: tuple[ReducedPhase, ...]
    lump: str
    why: str


def reduced_route(
    start: Problem,
    problems: Sequence[Problem],
    settings: Settings,
    *,
    names: Sequence[str] = (),
) -> ReducedRoute:
    """The longest prefix of ``problems`` (one per phase) on the bases of ``start``, each
    reduced by the schedule's resolved ``settings`` (their ``lump``, ``b0``,
    ``weight_decay`` and ``seed``) on every context.

    ``names`` name the phases in the reason the route ends (default: their numbers).

    Raises
    ------
    NotDiagonalizableError, TooManyPathsError
        ``start`` cannot be reduced, so that the caller takes the routes of weights.
    """
    names = list(names) or [f"phase {k}" for k in range(len(problems))]
    settings = dataclasses.replace(settings, route="contexts")
    reduced = _reduce_all(start, problems, settings, names)
    if reduced.why.startswith("lumping") and settings.lump != "none":
        again = _reduce_all(start, problems, dataclasses.replace(settings, lump="none"), names)
        if len(again.phases) >= len(reduced.phases):
            return again
    return reduced


def _reduce_all(
    start: Problem,
    problems: Sequence[Problem],
    settings: Settings,
    names: Sequence[str],
) -> ReducedRoute:
    lump, seed = settings.lump, settings.seed

    def reduced(problem: Problem) -> Reduction:
        return derive(problem, settings)

    first = reduced(start)
    flow0 = first.numeric_flow(gd_map=True)
    origin = ReducedPhase(first, flow0, np.ones(len(flow0.y0)))
    cache: dict[Any, Reduction] = {}
    phases: list[ReducedPhase] = []

    def ended(why: str) -> ReducedRoute:
        return ReducedRoute(origin, tuple(phases), lump, why)

    for k, problem in enumerate(problems):
        key = tuple(c.probability for c in problem.require_task().contexts)
        if key not in cache and len(cache) >= MAX_REDUCTIONS:
            return ended(f"{names[k]}: more than {MAX_REDUCTIONS} distinct mixtures to reduce")
        try:
            if key not in cache:
                cache[key] = reduced(problem)
        except (NotDiagonalizableError, TooManyPathsError) as err:
            return ended(f"{names[k]}: {short(err)}")
        reduction = cache[key]
        flow = reduction.numeric_flow(gd_map=True)
        if flow.labels != flow0.labels or dict(flow.edges) != dict(flow0.edges):
            return ended(f"lumping: {names[k]} ties other edges or modes than the start")
        if flow.meta.get("modes") != flow0.meta.get("modes"):
            return ended(f"{names[k]}: other modes than the start")
        signs = _signs(origin, reduction, flow, seed)
        if isinstance(signs, str):
            return ended(f"{names[k]}: {signs}")
        phases.append(ReducedPhase(reduction, flow, signs))
    return ended("")


def short(err: Exception) -> str:
    text = str(err)
    return text.split(": ", 1)[1] if ": " in text else text


def _signs(first: ReducedPhase, reduction: Reduction, flow: NumericFlow, seed: int) -> Any:
    """Per state entry, the sign taking the start's variable to this phase's, or why
    the bases differ (a text)."""
    graph = reduction.problem.graph
    by_edge: dict[tuple[str, int], float] = {}
    for edge in graph.edges:
        if graph.edges[edge].get("fixed") is not None:
            continue
        left0, right0, slots0 = first.reduction.edge_bases(edge, seed=seed)
        left, right, slots = reduction.edge_bases(edge, seed=seed)
        if slots != slots0:
            return f"edge {edge_name(edge)} carries modes {slots}, not {slots0}"
        for c, slot in enumerate(slots):
            a = float(left0[:, c] @ left[:, c])
            b = float(right0[:, c] @ right[:, c])
            if abs(abs(a) - 1) > BASIS_ATOL or abs(abs(b) - 1) > BASIS_ATOL:
                return (
                    f"the bases of edge {edge_name(edge)} in mode {slot} differ from the "
                    "start's (Eqs. 7-9 hold within each phase, not across the switch)"
                )
            by_edge[(edge_name(edge), slot)] = float(np.sign(a) * np.sign(b))
    signs = np.ones(len(flow.y0))
    modes = flow.meta["modes"]
    for i, (name, system, a) in enumerate(flow.labels):
        slot = modes[system][a]
        found = {by_edge.get((e, slot), 1.0) for e in flow.edges[name]}
        if len(found) != 1:
            return f"the edges of variable {name} change sign differently in mode {slot}"
        signs[i] = found.pop()
    return signs


def step(
    phase: ReducedPhase,
    start: np.ndarray,
    times: np.ndarray,
    *,
    lr: float | None,
    method: str,
    rtol: float,
    atol: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
    """One phase from ``start`` (the start's coordinates) at local ``times`` (from 0, the
    last the phase's end): states in the start's coordinates ``(T, n)``, the context
    losses ``(T, contexts)`` and the phase's loss ``(T,)``, and notes for ``meta``."""
    flow = dataclasses.replace(phase.flow, y0=start * phase.signs)
    notes: dict[str, Any] = {}
    if lr is None:
        states, notes = integrate_flow(flow, times, method=method, rtol=rtol, atol=atol)
    else:
        steps = np.rint(times / lr).astype(int)
        _, stacked = iterate_gd_map(flow, lr, record=steps)
        states = stacked[:, :, 0]
    recorded = flow.record(states[:, :, None], flow.constants[:, None])
    return (
        states * phase.signs,
        recorded.context_loss[:, :, 0],
        recorded.loss[:, 0],
        notes,
    )


def variables(phase: ReducedPhase, states: np.ndarray) -> dict[str, np.ndarray]:
    """Each variable's series ``(T, modes)`` in the start's coordinates, by series name."""
    from ..solution._series import variable_key

    flow = phase.flow
    out: dict[str, list[np.ndarray]] = {}
    for i, (name, system, _) in enumerate(flow.labels):
        out.setdefault(variable_key(name, system, flow.systems), []).append(states[:, i])
    return {key: np.stack(columns, axis=1) for key, columns in out.items()}


def check_saddle(phase: ReducedPhase, start: np.ndarray, where: str) -> None:
    r"""Refuse a phase whose start sits on the stable manifold of the saddle at 0.

    For a mode of a phase with a nonzero target ($s \ne 0$), if $f(y) = \kappa y$ with
    $\kappa < 0$ at the start and again at ``SMALL`` times it, and $f(0) = 0$, the reduced
    flow carries the mode straight to the origin, a saddle of the mode's loss: this is a
    reversal $s\to-s$ from an exactly balanced, aligned state. The true escape is set by
    the misalignment (about $\ln(1/\epsilon)/s$ for a misalignment $\epsilon$), which the
    reduced variables of an exactly balanced start do not have.
    """
    flow = phase.flow
    y = start * phase.signs
    targets = _targets(phase)
    for block in np.unique(flow.blocks):
        rows = np.flatnonzero(flow.blocks == block)
        _, system, a = flow.labels[rows[0]]
        slot = flow.meta["modes"][system][a]
        if not targets.get(slot, False) or not np.any(y[rows]):
            continue
        if _radial_to_origin(flow, y, rows):
            raise GdlnError(
                f"{where}: mode {slot} starts exactly balanced and aligned against its new "
                "target (a reversal s -> -s), on the saddle at 0, where the reduced flow "
                "stays; the escape depends on the misalignment (about ln(1/eps)/s): start "
                "from weights (--weights) or from unlumped variables (lump none) that are "
                "not exactly balanced"
            )


def _targets(phase: ReducedPhase) -> dict[int, bool]:
    """Mode -> whether the phase's data give it a nonzero input-output value $s$."""
    out: dict[int, bool] = {}
    for system in phase.reduction.systems:
        for symbol, values in system.symbols.items():
            if not str(symbol).startswith("s"):
                continue
            for slot, value in zip(system.modes, values, strict=True):
                out[slot] = out.get(slot, False) or float(value) != 0
    return out


def trained_scale(phase: ReducedPhase, start: np.ndarray) -> float:
    """The largest variable, in size, of those the phase moves (whose rate is not zero
    everywhere: evaluated at a generic state); the others keep whatever they hold."""
    flow = phase.flow
    generic = 0.3 + 0.1 * np.arange(len(start)) / max(len(start), 1)
    with np.errstate(all="ignore"):
        moved = flow.rhs(generic) != 0
    sizes = np.abs(start * phase.signs)[moved]
    return float(np.max(sizes, initial=0.0))


def _radial_to_origin(flow: NumericFlow, y: np.ndarray, rows: np.ndarray) -> bool:
    """Whether the rate of block ``rows`` is a negative multiple of its state, here and at
    ``SMALL`` times it, and zero at its origin."""
    for scale in (1.0, SMALL, 0.0):
        z = y.copy()
        z[rows] = y[rows] * scale
        with np.errstate(all="ignore"):
            f = flow.rhs(z)[rows]
        if scale == 0.0:
            return bool(np.allclose(f, 0.0, atol=1e-300))
        v = z[rows]
        kappa = float(f @ v) / float(v @ v)
        if not kappa < 0 or np.linalg.norm(f - kappa * v) > RADIAL_RTOL * np.linalg.norm(f):
            return False
    return False  # pragma: no cover - the loop returns at scale 0


def weights_of(
    phase: ReducedPhase, state: np.ndarray, graph_edges: Sequence[Edge], *, seed: int
) -> dict[Edge, np.ndarray]:
    r"""The weights of Eq. (9), $W_e = R_{t(e)}\operatorname{diag}(B_e)R_{s(e)}^\top$, of a
    state in the start's coordinates (hidden bases drawn from ``seed``); fixed edges
    $W_e = c\,I$, edges on no active path 0."""
    reduction = phase.reduction
    flow = phase.flow
    graph = reduction.problem.graph
    modes = flow.meta["modes"]
    value: dict[tuple[str, int], float] = {}
    for i, (name, system, a) in enumerate(flow.labels):
        for e in flow.edges[name]:
            value[(e, modes[system][a])] = float(state[i])
    out = {}
    for edge in graph_edges:
        rows, cols = graph.nodes[edge[1]]["size"], graph.nodes[edge[0]]["size"]
        fixed = graph.edges[edge].get("fixed")
        if fixed is not None:
            out[edge] = float(fixed) * np.eye(rows, cols)
            continue
        left, right, slots = reduction.edge_bases(edge, seed=seed)
        b = np.array([value.get((edge_name(edge), slot), 0.0) for slot in slots])
        out[edge] = (left * b) @ right.T if slots else np.zeros((rows, cols))
    return out
