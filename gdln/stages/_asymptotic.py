r"""The asymptotic route: rank-one stages for statistics without common bases.

When the path statistics share no bases (correlated vector modalities, a non-white input
into a deep pathway, ...) there is no exact reduced ODE, but as $u_0\to0$ only the top
singular direction of each small pathway's *residual* correlation matters at each stage.
On a plateau with weights $W$ the residual of path $p$ is

$$R_p = \Sigma^{yx}(p) - \sum_{j\in\mathcal{T}(t(p))} W_j\,\Sigma^x(j,p)$$

(the error term of Eqs. 3-4 of Saxe et al. 2022). A path whose small edges form segments
between active pieces $A_0,\dots,A_k$ grows, in the best rank-one choice $u_iv_i^\top$ of
each segment, at the rate

$$r_p = \max\;(u_k^\top A_k^\top R_p A_0^\top v_1)\prod_{i<k} v_{i+1}^\top A_i u_i$$

($\sigma_1(A_1^\top R_p A_0^\top)$ for one segment). Each trainable edge is one scalar
$\varepsilon_e$ of size $u_0$ along the direction it grows in, so the small edges see the
scalar potential $\Phi(\varepsilon) = \sum_p r_p\prod_{e\,\mathrm{small}\in p}\varepsilon_e$
and escape as :func:`~gdln.stages._escape.escape` says. The escaping pathways then move, as
full matrices, to the constrained optimum: the flow of Eqs. (3)-(4) of the active edges,
started from the rank-one escape directions with every other edge at zero, run to rest.

For two-layer late fusion this gives $t_B/t_A = 1 + (\lVert\Sigma_{yx_A}\rVert -
\lVert\Sigma_{yx_B}\rVert)/\lVert\Sigma_{yx_B} - w_A\Sigma_{AB}\rVert$ with
$w_A = \Sigma_{yx_A}\Sigma_A^{-1}$ (Zhang, Latham & Saxe 2024).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from .._edge import Edge, edge_name
from ..paths._paths import Path
from ..task._problem import Problem
from ._aligned import FORCED, path_name
from ._directions import PairSpace, Plateau, Step, pair_spaces
from ._escape import EXPONENTIAL, Escape, Sizes, advance, escape
from ._flow import Unsettled
from ._matrices import MatrixNetwork, settle_active
from ._polynomial import Polynomial, combine
from ._result import LeadingTime, Stage, Timescales, tidy_loss

__all__ = ["asymptotic_timescales"]

SEED = 1e-4  # size of a rank-one escape direction when the settling flow starts
ALTERNATIONS = 200  # sweeps of the alternating maximisation of a multi-segment path
UNTRACKED = 1e-6  # residual singular values below this of the largest correlation: none

ASSUMPTIONS = (
    "asymptotic: no exact reduced ODE is used (the route for statistics without common "
    "bases); stages are rank-one, each small pathway growing along the top singular "
    "direction of its residual correlation (leading order as u0 -> 0, O(1) corrections "
    "left out)",
    "every trainable edge starts at size u0 along the direction it grows in (no exact "
    "cancellations), and what an edge grew in one stage carries over to its new top "
    "direction in the next",
    "a pathway of two trained edges of its own learns further directions (the next "
    "singular directions of its residual) as further stages, from the budget its free "
    "hidden units have spent since the start; further directions of other pathways are "
    "not tracked: stages that could depend on them say so",
    "on each plateau the active edges sit at the rest point of the full-matrix flow "
    "(Eqs. 3-4) restricted to them, started from the escape directions",
)


@dataclass(frozen=True)
class _Form:
    """The best rank-one choice for a path's small segments: its rate and directions."""

    rate: float
    segments: tuple[tuple[int, int], ...]  # (first, last) edge positions of each segment
    left: tuple[np.ndarray, ...]  # u_i, at each segment's end node
    right: tuple[np.ndarray, ...]  # v_i, at each segment's start node
    line: np.ndarray | None = None  # the unit rank-one map W_p / |W_p| this choice makes
    sign: float = 1.0  # -1: the same line as the path's first one, with the opposite sign


def _rank_one(net: MatrixNetwork, p: Path, small: set[Edge]) -> _Form:
    """The rate $r_p$ and the directions of the best rank-one choice of $p$'s segments."""
    edges = p.edges
    flags = [e in small for e in edges]
    segments: list[tuple[int, int]] = []
    for i, flag in enumerate(flags):
        if flag and (i == 0 or not flags[i - 1]):
            segments.append((i, i))
        elif flag:
            segments[-1] = (segments[-1][0], i)
    # active pieces: A_0 before the first segment, A_i between, A_k after the last
    bounds = [0] + [x for a, b in segments for x in (a, b + 1)] + [len(edges)]
    nodes = p.nodes
    pieces = [
        net.product(edges[bounds[2 * i] : bounds[2 * i + 1]], nodes[bounds[2 * i]])
        for i in range(len(segments) + 1)
    ]
    R = net.residual(p)
    k = len(segments)
    if k == 1:
        M = pieces[1].T @ R @ pieces[0].T
        U, s, Vt = np.linalg.svd(M)
        line = _line(pieces[1] @ U[:, 0], pieces[0].T @ Vt[0], 1.0)
        return _Form(float(s[0]), tuple(segments), (U[:, 0],), (Vt[0],), line)
    rng = np.random.default_rng(0)
    u = [_unit(rng.standard_normal(net.size[nodes[b + 1]])) for _, b in segments]
    v = [_unit(rng.standard_normal(net.size[nodes[a]])) for a, _ in segments]
    value = 0.0
    for _ in range(ALTERNATIONS):
        middle = np.prod([v[i + 1] @ pieces[i + 1] @ u[i] for i in range(k - 1)])
        outer = pieces[k].T @ R @ pieces[0].T
        v[0] = _unit(outer.T @ u[k - 1] * (middle or 1.0))
        u[k - 1] = _unit(outer @ v[0] * (middle or 1.0))
        for i in range(k - 1):
            others = (u[k - 1] @ outer @ v[0]) * np.prod(
                [v[j + 1] @ pieces[j + 1] @ u[j] for j in range(k - 1) if j != i]
            )
            u[i] = _unit(pieces[i + 1].T @ v[i + 1] * others)
            v[i + 1] = _unit(pieces[i + 1] @ u[i] * others)
        new = float(
            (u[k - 1] @ outer @ v[0])
            * np.prod([v[i + 1] @ pieces[i + 1] @ u[i] for i in range(k - 1)])
        )
        if abs(new - value) <= 1e-13 * max(abs(new), 1e-300):
            value = new
            break
        value = new
    if value < 0:
        u[k - 1] = -u[k - 1]
    middle = np.prod([v[i + 1] @ pieces[i + 1] @ u[i] for i in range(k - 1)])
    line = _line(pieces[k] @ u[k - 1], pieces[0].T @ v[0], float(np.sign(middle)))
    return _Form(abs(value), tuple(segments), tuple(u), tuple(v), line)


def _line(out: np.ndarray, into: np.ndarray, sign: float) -> np.ndarray | None:
    """The unit matrix ``sign * out into^T / |...|``, or ``None`` if it vanishes."""
    W = sign * np.outer(out, into)
    norm = float(np.linalg.norm(W))
    return W / norm if norm > 0 else None


def _unit(x: np.ndarray) -> np.ndarray:
    n = float(np.linalg.norm(x))
    return x / n if n > 0 else x


def asymptotic_timescales(problem: Problem, u0: float, *, reason: str = "") -> Timescales:
    """The asymptotic route (see the module docstring)."""
    net = MatrixNetwork(problem)
    n = len(net.edges)
    position = {e: i for i, e in enumerate(net.edges)}
    active = np.zeros(n, dtype=bool)
    sizes = Sizes.start(np.ones(n))
    time = LeadingTime()
    stages: list[Stage] = []
    done: set[Path] = set()
    history: list[tuple[float, Polynomial]] = []  # exponential stages since the last power one
    spaces = pair_spaces(net)
    stopped: int | None = None  # the stage whose plateau did not come to rest, if one

    def record(mechanism: str, escaped: Sequence[int], notes: Sequence[str], label=None) -> None:
        complete = [p for p in net.paths if all(active[position[e]] for e in _trained(net, p))]
        new = [p for p in complete if p not in done]
        done.update(new)
        maps = {}
        for p in complete:
            W = net.product(p.edges, p.source)
            if np.abs(W).max() > 1e-12:
                maps[path_name(p)] = W
        stages.append(
            Stage(
                active=tuple(edge_name(net.edges[i]) for i in escaped),
                pathways=(label,) if label else tuple(path_name(p) for p in new),
                time=time.value(u0),
                time_formula=time.expression(),
                loss=tidy_loss(net.loss(), net.constant),
                maps=maps,
                mechanism=mechanism,
                holds_for=time.holds_for(),
                notes=tuple(notes),
            )
        )

    initial = ""
    try:
        forms = _forms(net, active, position)
        forced = _forced(net, forms, active, position)
        if forced:
            small = np.flatnonzero(~active)
            record("immediate", _absorb(net, forms, forced, active, position), ())
            sizes = sizes.take([k for k, i in enumerate(small) if not active[i]])
        while True:
            inactive = np.flatnonzero(~active)
            local = {int(e): i for i, e in enumerate(inactive)}
            forms = _forms(net, active, position)
            potential = _potential(net, forms, active, position, local)
            earlier = [(d, phi.on(inactive)) for d, phi in history]
            found = None
            if inactive.size:
                found = escape(potential, np.ones(len(inactive)), sizes, earlier)
                if found is not None and not found.escaping:
                    found = None
            notes = _untracked_notes(net, active, position, spaces)
            pairs = {p: space.plateau(net) for p, space in spaces.items()}
            further = _next_direction(spaces, pairs, active, position, found)
            if further is not None:
                space, step = further
                time = time.plus_log(step.coefficient)
                history.append((step.coefficient, potential.lifted(inactive, n)))
                sizes = advance(potential, np.ones(len(inactive)), sizes, step.coefficient)
                for p, other in spaces.items():
                    other.wait(pairs[p], step.coefficient)
                v, u = space.split(step.direction)
                space.learn(step.direction)
                _seed_direction(net, space, v, u)
                escaped = [position[space.first], position[space.second]]
                label = f"{path_name(space.path)} (direction {space.learned})"
                more, unsettled = _settle(net, active, position)
                sizes = sizes.take([k for k, i in enumerate(inactive) if not active[i]])
                record(EXPONENTIAL, escaped + more, notes + unsettled, label)
                if unsettled:
                    stopped = len(stages)
                    break
                continue
            if found is None:
                break
            if found.mechanism == EXPONENTIAL:
                time = time.plus_log(found.coefficient)
                history.append((found.coefficient, potential.lifted(inactive, n)))
                for p, space in spaces.items():
                    space.wait(pairs[p], found.coefficient)
            else:
                time = time.plus_power(found.power, found.coefficient).plus_log(found.log_shift)
                history = []
                for p, space in spaces.items():
                    space.wait(pairs[p], None)
            new = [int(inactive[i]) for i in found.escaping]
            for p, space in spaces.items():
                if p in forms and all(position[e] in new for e in p.edges):
                    space.learn(np.concatenate([forms[p].right[0], forms[p].left[0]]))
            strength = {e: abs(found.direction[local[e]]) for e in new}
            _seed(net, forms, new, strength, found.degree)
            active[new] = True
            more, unsettled = _settle(net, active, position)
            sizes = found.after.take([k for k, i in enumerate(inactive) if not active[i]])
            record(found.mechanism, new + more, notes + unsettled)
            if unsettled:
                stopped = len(stages)
                break
    except Unsettled as err:  # the plateau of an immediate stage (no stage yet to mark)
        stopped = 0
        initial = str(err)
    return Timescales(
        source=problem.source,
        u0=u0,
        route="matrix",
        stages=tuple(stages),
        assumptions=ASSUMPTIONS,
        initial_loss=net.constant,
        not_predicted=_not_predicted(net, active, position, spaces, stopped, initial),
        analysis="asymptotic",
        route_reason=reason,
    )


def _next_direction(
    spaces: dict[Path, PairSpace],
    pairs: dict[Path, Plateau],
    active: np.ndarray,
    position: dict[Edge, int],
    found: Escape | None,
) -> tuple[PairSpace, Step] | None:
    """The further direction of an active pathway that escapes before ``found``, if any."""
    best: tuple[PairSpace, Step] | None = None
    for p, space in spaces.items():
        if not all(active[position[e]] for e in p.edges):
            continue
        step = space.next_escape(pairs[p])
        if step is None:
            continue
        if best is None or step.coefficient < best[1].coefficient:
            best = (space, step)
    if best is None:
        return None
    if (
        found is not None
        and found.mechanism == EXPONENTIAL
        and found.coefficient <= best[1].coefficient * (1 + 1e-9)
    ):
        return None
    return best


def _seed_direction(net: MatrixNetwork, space: PairSpace, v: np.ndarray, u: np.ndarray) -> None:
    """Start the new direction $u v^\top$ through a hidden direction no active edge uses."""
    h = space.path.nodes[1]
    fresh = net.fresh(h)
    v = v / np.linalg.norm(v)
    u = u / np.linalg.norm(u)
    net.W[space.first] = net.W[space.first] + SEED * np.outer(fresh, v)
    net.W[space.second] = net.W[space.second] + SEED * np.outer(u, fresh)


def _settle(
    net: MatrixNetwork, active: np.ndarray, position: dict[Edge, int]
) -> tuple[list[int], list[str]]:
    """Settle the plateau and activate what it forces at first order (see :func:`_forced`).

    Returns the edges it activated and, if the flow did not come to rest within its
    budget (:data:`gdln.stages._matrices.BUDGET`), a note saying so (then the weights
    are where the flow stopped, and nothing after can be predicted from them).
    """
    before = active.copy()
    try:
        settle_active(net, active)
        forms = _forms(net, active, position)
        forced = _forced(net, forms, active, position)
        if forced:
            _absorb(net, forms, forced, active, position)
        notes: list[str] = []
    except Unsettled as err:
        notes = [
            f"its plateau is not at rest: {err.reason}; its loss and maps are where the flow stopped"
        ]
    return [int(i) for i in np.flatnonzero(active & ~before)], notes


def _trained(net: MatrixNetwork, p: Path) -> list[Edge]:
    return [e for e in p.edges if e not in net.fixed]


def _forms(net: MatrixNetwork, active: np.ndarray, position: dict[Edge, int]) -> dict[Path, _Form]:
    """The rank-one form of every path with a small edge, signed against its first one.

    A path whose new top direction is its old rank-one line with the opposite sign (as
    happens with scalar modalities, Zhang, Latham & Saxe 2024) must grow the component
    that shrank before: its rate enters the potential with a minus sign, which the
    max-plus bookkeeping of :func:`~gdln.stages._escape.escape` turns into the lost
    budget. Any other new direction overlaps the old one generically and keeps it.
    """
    small = {e for e in net.edges if not active[position[e]]}
    out = {}
    for p in net.paths:
        if not any(e in small for e in p.edges):
            continue
        form = _rank_one(net, p, small)
        before = net.reference.setdefault(p, form)
        flipped = (
            form.line is not None
            and before.line is not None
            and float(np.sum(form.line * before.line)) < -1 + 1e-9
        )
        if flipped:
            form = _Form(form.rate, form.segments, form.left, form.right, form.line, -1.0)
        out[p] = form
    return out


def _potential(
    net: MatrixNetwork,
    forms: dict[Path, _Form],
    active: np.ndarray,
    position: dict[Edge, int],
    local: dict[int, int],
) -> Polynomial:
    r"""$\Phi = \sum_p r_p\prod_{e\,\mathrm{small}}\varepsilon_e$ in the small edges.

    Rates below :data:`FORCED` of the largest input-output correlation are round-off of
    a residual that the plateau cancels, and are left out.
    """
    coefficients, powers = [], []
    for p, form in forms.items():
        if form.rate <= FORCED * net.scale:
            continue
        row = np.zeros(len(local), dtype=int)
        for e in _trained(net, p):
            if not active[position[e]]:
                row[local[position[e]]] += 1
        coefficients.append(form.sign * form.rate)
        powers.append(row)
    return combine(np.array(coefficients), np.array(powers).reshape(len(powers), len(local)))


def _forced(
    net: MatrixNetwork, forms: dict[Path, _Form], active: np.ndarray, position: dict[Edge, int]
) -> list[int]:
    """Small edges that are the only small edge of a path with a residual (force at once)."""
    out = []
    for p, form in forms.items():
        small = [position[e] for e in _trained(net, p) if not active[position[e]]]
        if len(small) == 1 and form.rate > FORCED * net.scale and small[0] not in out:
            out.append(small[0])
    return out


def _absorb(
    net: MatrixNetwork,
    forms: dict[Path, _Form],
    forced: list[int],
    active: np.ndarray,
    position: dict[Edge, int],
) -> list[int]:
    """Activate forced edges (repeatedly), seeded along their paths' directions."""
    added: list[int] = []
    while forced:
        _seed(net, forms, forced, dict.fromkeys(forced, 1.0), 2)
        active[forced] = True
        added += forced
        settle_active(net, active)
        forms = _forms(net, active, position)
        forced = _forced(net, forms, active, position)
    return added


def _seed(
    net: MatrixNetwork,
    forms: dict[Path, _Form],
    new: Sequence[int],
    strength: dict[int, float],
    degree: int,
) -> None:
    """Give each escaping edge a small rank-one weight along its best path's directions.

    Within a segment the direction is $v$ at its start node, $u$ at its end node and one
    fresh direction (unused by active edges) at each node inside, shared by the paths.
    """
    size = SEED ** (1.0 / max(1, degree - 2))
    top = max(strength.values()) or 1.0
    fresh: dict[Hashable, np.ndarray] = {}
    for e_index in new:
        e = net.edges[e_index]
        paths = [p for p in forms if e in p.edges]
        if not paths:
            continue
        p = max(paths, key=lambda q: forms[q].rate)
        form = forms[p]
        k = p.edges.index(e)
        s = next(i for i, (a, b) in enumerate(form.segments) if a <= k <= b)
        out = _direction(net, p, form, s, k + 1, fresh)
        into = _direction(net, p, form, s, k, fresh)
        net.W[e] = net.W[e] + size * strength[e_index] / top * np.outer(out, into)


def _direction(
    net: MatrixNetwork, p: Path, form: _Form, s: int, at: int, fresh: dict[Hashable, np.ndarray]
) -> np.ndarray:
    """The unit direction of segment ``s`` of ``p`` at the path's node number ``at``."""
    a, b = form.segments[s]
    if at == a:
        return form.right[s]
    if at == b + 1:
        return form.left[s]
    node = p.nodes[at]
    if node not in fresh:
        fresh[node] = net.fresh(node)
    return fresh[node]


def _residual_size(net: MatrixNetwork, p: Path) -> float:
    """The top singular value of $R_p$ (0 for round-off)."""
    scale = max((float(np.linalg.norm(m)) for m in net.syx.values()), default=0.0) or 1.0
    rest = float(np.linalg.svd(net.residual(p), compute_uv=False)[0])
    return rest if rest > UNTRACKED * scale else 0.0


def _rank(net: MatrixNetwork, p: Path) -> tuple[int, int]:
    """The rank of the map $W_p$ and the most it can reach (its narrowest node)."""
    W = net.product(p.edges, p.source)
    s = np.linalg.svd(W, compute_uv=False)
    rank = int(np.sum(s > 1e-9 * max(float(s.max(initial=0.0)), 1e-300)))
    return rank, min(net.size[v] for v in p.nodes)


def _untracked_notes(
    net: MatrixNetwork,
    active: np.ndarray,
    position: dict[Edge, int],
    spaces: dict[Path, PairSpace],
) -> list[str]:
    """A note per active pathway whose next direction is not tracked but could grow."""
    notes = []
    for p in net.paths:
        if p in spaces or not all(active[position[e]] for e in _trained(net, p)):
            continue
        rest = _residual_size(net, p)
        rank, most = _rank(net, p)
        if rest and rank < most:
            notes.append(
                f"assumes {path_name(p)} learns no further direction first (its residual "
                f"still has singular value {rest:.3g}; further directions are tracked only "
                "for two-layer pathways with edges of their own)"
            )
    return notes


def _not_predicted(
    net: MatrixNetwork,
    active: np.ndarray,
    position: dict[Edge, int],
    spaces: dict[Path, PairSpace],
    stopped: int | None,
    initial: str,
) -> tuple[str, ...]:
    """Every pathway that could still lower the loss without a stage here, by reason.

    One line per reason: what it is, then the pathways with the top singular value of
    the residual correlation they still see.
    """
    reasons: dict[str, list[str]] = {}
    for p in net.paths:
        rest = _residual_size(net, p)
        if not rest:
            continue
        complete = all(active[position[e]] for e in _trained(net, p))
        if stopped is not None:
            reason = (
                f"the plateau after stage {stopped} did not come to rest (see its note)"
                if stopped
                else f"the plateau at t = 0 did not come to rest ({initial})"
            )
        elif not complete:
            reason = (
                "no growing direction at leading order (the best rank-one rate of their "
                "small edges through the active ones is zero)"
            )
        elif p in spaces:
            space = spaces[p]
            if space.learned >= space.capacity:
                continue
            reason = "no free hidden unit of theirs grows in a direction of their residual"
        elif _rank(net, p)[0] < _rank(net, p)[1]:
            reason = (
                "further directions not tracked (only those of two-layer pathways with "
                "edges of their own are)"
            )
        else:
            continue
        reasons.setdefault(reason, []).append(f"{path_name(p)} ({rest:.3g})")
    return tuple(f"{reason}: {', '.join(names)}" for reason, names in reasons.items())
