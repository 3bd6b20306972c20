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
from .._errors import TaskSpecError
from ..paths._paths import Path
from ..paths._statistics import PathStatistics, path_statistics
from ..solution._flow import full_flow, zero_weight_loss
from ..task._problem import Problem
from ..task._task import as_float
from ._aligned import FORCED, path_name
from ._escape import EXPONENTIAL, Sizes, escape
from ._flow import settle
from ._polynomial import Polynomial, combine
from ._result import LeadingTime, Stage, Timescales, tidy_loss

__all__ = ["asymptotic_timescales"]

SEED = 1e-4  # size of a rank-one escape direction when the settling flow starts
ALTERNATIONS = 200  # sweeps of the alternating maximisation of a multi-segment path

ASSUMPTIONS = (
    "asymptotic: no exact reduced ODE is used (the route for statistics without common "
    "bases); stages are rank-one, each small pathway growing along the top singular "
    "direction of its residual correlation (leading order as u0 -> 0, O(1) corrections "
    "left out)",
    "every trainable edge starts at size u0 along the direction it grows in (no exact "
    "cancellations), and what an edge grew in one stage carries over to its new top "
    "direction in the next",
    "each pathway learns one rank-one direction; further directions of an active pathway "
    "(its next singular values) are not tracked",
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


class _Network:
    """Full matrices on every edge, the statistics, and the bookkeeping of the route."""

    def __init__(self, problem: Problem):
        self.problem = problem
        graph = problem.graph
        exact = path_statistics(graph, problem.require_task())
        self.paths: tuple[Path, ...] = exact.paths
        self.size = {v: int(graph.nodes[v]["size"]) for v in graph.nodes}
        try:
            self.syx = {p: as_float(exact.input_output[p]) for p in self.paths}
            self.sx = {k: as_float(m) for k, m in exact.input.items()}
        except TaskSpecError as err:
            raise TaskSpecError(str(err), source=problem.source) from err
        # float statistics once, so that each call of the flow does no conversion
        self.stats = PathStatistics(self.paths, self.syx, self.sx, exact=False)
        on_paths = {e for p in self.paths for e in p.edges}
        self.fixed = {e for e in on_paths if graph.edges[e].get("fixed") is not None}
        self.edges: list[Edge] = [e for e in graph.edges if e in on_paths and e not in self.fixed]
        self.W: dict[Edge, np.ndarray] = {}
        for e in graph.edges:
            rows, cols = self.size[e[1]], self.size[e[0]]
            fixed = graph.edges[e].get("fixed")
            self.W[e] = float(fixed) * np.eye(rows) if fixed is not None else np.zeros((rows, cols))
        self.constant = zero_weight_loss(problem)
        self.reference: dict[Path, _Form] = {}  # each path's first rank-one form
        # the size of a rate: the largest input-output correlation
        self.scale = max((float(np.linalg.norm(m, 2)) for m in self.syx.values()), default=0.0)

    def product(self, edges: Sequence[Edge], start: Hashable) -> np.ndarray:
        """The ordered product of ``edges`` (target on the left); identity if empty."""
        out = np.eye(self.size[start])
        for e in edges:
            out = self.W[e] @ out
        return out

    def residual(self, p: Path) -> np.ndarray:
        """$R_p$ at the current weights (Eqs. 3-4)."""
        R = self.syx[p].copy()
        for j in self.paths:
            if (j, p) in self.sx and j.target == p.target:
                R -= self.product(j.edges, j.source) @ self.sx[(j, p)]
        return R

    def loss(self) -> float:
        """Eq. (1) from the path statistics at the current weights."""
        Wp = {p: self.product(p.edges, p.source) for p in self.paths}
        total = self.constant - sum(float(np.sum(Wp[p] * self.syx[p])) for p in self.paths)
        for (j, p), m in self.sx.items():
            total += 0.5 * float(np.sum((Wp[j] @ m) * Wp[p]))
        return total

    def used(self, node: Hashable) -> np.ndarray:
        """An orthonormal basis of the directions the active edges use at ``node``."""
        graph = self.problem.graph
        blocks = [self.W[(u, node)] for u in graph.predecessors(node)]
        blocks += [self.W[(node, w)].T for w in graph.successors(node)]
        stacked = np.hstack(blocks) if blocks else np.zeros((self.size[node], 0))
        if not stacked.size:
            return np.zeros((self.size[node], 0))
        U, s, _ = np.linalg.svd(stacked, full_matrices=False)
        return U[:, s > 1e-9 * max(float(s.max(initial=0.0)), 1e-300)]

    def fresh(self, node: Hashable) -> np.ndarray:
        """A unit direction at ``node`` that no active edge uses (the first one free)."""
        U = self.used(node)
        basis = np.eye(self.size[node])
        rest = basis - U @ (U.T @ basis)
        k = int(np.argmax(np.linalg.norm(rest, axis=0)))
        if np.linalg.norm(rest[:, k]) < 1e-9:
            return U[:, 0]
        return rest[:, k] / np.linalg.norm(rest[:, k])


def _rank_one(net: _Network, p: Path, small: set[Edge]) -> _Form:
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


def asymptotic_timescales(problem: Problem, u0: float) -> Timescales:
    """The asymptotic route (see the module docstring)."""
    net = _Network(problem)
    n = len(net.edges)
    position = {e: i for i, e in enumerate(net.edges)}
    active = np.zeros(n, dtype=bool)
    sizes = Sizes.start(np.ones(n))
    time = LeadingTime()
    stages: list[Stage] = []
    done: set[Path] = set()

    def record(mechanism: str, escaped: Sequence[int]) -> None:
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
                pathways=tuple(path_name(p) for p in new),
                time=time.value(u0),
                time_formula=time.expression(),
                loss=tidy_loss(net.loss(), net.constant),
                maps=maps,
                mechanism=mechanism,
            )
        )

    forms = _forms(net, active, position)
    forced = _forced(net, forms, active, position)
    if forced:
        small = np.flatnonzero(~active)
        record("immediate", _absorb(net, forms, forced, active, position))
        sizes = sizes.take([k for k, i in enumerate(small) if not active[i]])
    while not active.all():
        inactive = np.flatnonzero(~active)
        local = {int(e): i for i, e in enumerate(inactive)}
        forms = _forms(net, active, position)
        potential = _potential(net, forms, active, position, local)
        found = escape(potential, np.ones(len(inactive)), sizes)
        if found is None or not found.escaping:
            break
        if found.mechanism == EXPONENTIAL:
            time = time.plus_log(found.coefficient)
        else:
            time = time.plus_power(found.power, found.coefficient)
        new = [int(inactive[i]) for i in found.escaping]
        strength = {e: abs(found.direction[local[e]]) for e in new}
        _seed(net, forms, new, strength, found.degree)
        active[new] = True
        _settle_active(net, active)
        forms = _forms(net, active, position)
        forced = _forced(net, forms, active, position)
        if forced:
            new += _absorb(net, forms, forced, active, position)
        sizes = found.after.take([k for k, i in enumerate(inactive) if not active[i]])
        record(found.mechanism, new)
    return Timescales(
        source=problem.source,
        u0=u0,
        route="asymptotic",
        stages=tuple(stages),
        assumptions=ASSUMPTIONS + _untracked(net, active, position),
        initial_loss=net.constant,
    )


def _trained(net: _Network, p: Path) -> list[Edge]:
    return [e for e in p.edges if e not in net.fixed]


def _forms(net: _Network, active: np.ndarray, position: dict[Edge, int]) -> dict[Path, _Form]:
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
    net: _Network,
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
    net: _Network, forms: dict[Path, _Form], active: np.ndarray, position: dict[Edge, int]
) -> list[int]:
    """Small edges that are the only small edge of a path with a residual (force at once)."""
    out = []
    for p, form in forms.items():
        small = [position[e] for e in _trained(net, p) if not active[position[e]]]
        if len(small) == 1 and form.rate > FORCED * net.scale and small[0] not in out:
            out.append(small[0])
    return out


def _absorb(
    net: _Network,
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
        _settle_active(net, active)
        forms = _forms(net, active, position)
        forced = _forced(net, forms, active, position)
    return added


def _seed(
    net: _Network,
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
    net: _Network, p: Path, form: _Form, s: int, at: int, fresh: dict[Hashable, np.ndarray]
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


def _settle_active(net: _Network, active: np.ndarray) -> None:
    """Run the full-matrix flow of the active edges (others held at zero) to rest."""
    edges = [e for i, e in enumerate(net.edges) if active[i]]
    shapes = [net.W[e].shape for e in edges]
    splits = np.cumsum([int(np.prod(s)) for s in shapes])[:-1]

    def unpack(y: np.ndarray) -> None:
        for e, s, part in zip(edges, shapes, np.split(y, splits), strict=True):
            net.W[e] = part.reshape(s)

    def flow(y: np.ndarray) -> np.ndarray:
        unpack(y)
        f = full_flow(net.problem, net.W, stats=net.stats)
        return np.concatenate([f[e].ravel() for e in edges])

    start = np.concatenate([net.W[e].ravel() for e in edges])
    unpack(settle(flow, start, what=f"{net.problem.source}: plateau"))


def _untracked(net: _Network, active: np.ndarray, position: dict[Edge, int]) -> tuple[str, ...]:
    """A note naming active pathways whose residual still holds untracked directions."""
    scale = max((float(np.linalg.norm(m)) for m in net.syx.values()), default=0.0) or 1.0
    left = []
    for p in net.paths:
        if all(active[position[e]] for e in _trained(net, p)):
            rest = float(np.linalg.svd(net.residual(p), compute_uv=False)[0])
            if rest > 1e-6 * scale:
                left.append(f"{path_name(p)} ({rest:.3g})")
    if not left:
        return ()
    return (
        "after the last stage these pathways still see residual correlation (top singular "
        "value) in directions not tracked here: " + ", ".join(left),
    )
