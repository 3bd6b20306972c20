r"""The aligned route: stages from the exact reduced ODE, one singular mode at a time.

When the path statistics share bases (Eqs. 7-8 of Saxe et al. 2022), each mode $\alpha$
learns as its own scalar network, gradient flow on the per-mode loss
$\mathcal{L}_\alpha(b)$ with the tying weights of lumping (Eq. 10; Eqs. 44-46). From
$b_e(0) = u_0$ each mode goes from saddle to saddle: on a plateau the active variables sit
at the fixed point of the flow restricted to them, the small ones escape as
:func:`~gdln.stages._escape.escape` says, then the new active set settles on the next
plateau. Variables that a plateau forces at first order (a path with one small edge and a
nonzero residual) join at once. Modes are independent, so their stages interleave in time.

Beside each leading-order time, the exact reduced ODE of the mode, started at
$b_e(0) = u_0$, gives its own time to half-completion (:mod:`gdln.stages._ode`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .._edge import Edge
from .._errors import GdlnError
from ..paths._paths import Path
from ..reduction._system import Reduction
from ._escape import EXPONENTIAL, Sizes, escape
from ._flow import settle
from ._polynomial import Polynomial, from_sympy
from ._result import LeadingTime

__all__ = [
    "ModeNetwork",
    "ModeStage",
    "final_signs",
    "mode_networks",
    "mode_stages",
]

FORCED = 1e-7  # a first-order force above this fraction of the potential's terms is real
SEED = 1e-4  # size at which an escaping direction starts the settling flow (see _seed)


def path_name(path: Path) -> str:
    """``x->h->y``."""
    return "->".join(str(v) for v in path.nodes)


@dataclass(frozen=True, eq=False)
class PathProduct:
    r"""A path's scalar $b_p = c\prod_e b_e$ in one mode (``factor`` from fixed edges)."""

    path: Path
    powers: np.ndarray
    factor: float

    def value(self, x: np.ndarray) -> float:
        """$b_p$ at the variables ``x``."""
        return float(self.factor * np.prod(np.asarray(x, float) ** self.powers))

    def values(self, xs: np.ndarray) -> np.ndarray:
        """$b_p$ at each column of ``xs`` ``(variables, times)``."""
        return self.factor * np.prod(np.asarray(xs, float) ** self.powers[:, None], axis=0)


@dataclass(frozen=True, eq=False)
class ModeNetwork:
    r"""The scalar network of one mode: its loss, tying weights and paths.

    Parameters
    ----------
    system
        Index of its :class:`~gdln.ReducedSystem` in the reduction.
    mode
        The mode (slot) index.
    names
        The reduced variables' names.
    edges
        Per variable, the edges it stands for.
    weights
        $1/|O|$ per variable.
    loss
        $\mathcal{L}_\alpha$ as a polynomial in the variables (no constant).
    paths
        The paths alive in this mode.
    """

    system: int
    mode: int
    names: tuple[str, ...]
    edges: tuple[tuple[Edge, ...], ...]
    weights: np.ndarray
    loss: Polynomial
    paths: tuple[PathProduct, ...]

    def flow(self, x: np.ndarray) -> np.ndarray:
        r"""$\tau\dot b = -W\nabla\mathcal{L}_\alpha$ (Eq. 10, lumped)."""
        return np.asarray(-self.weights * self.loss.gradient(x))


def mode_networks(reduction: Reduction) -> list[ModeNetwork]:
    """One :class:`ModeNetwork` per mode of every reduced system.

    Raises
    ------
    GdlnError
        If a system eliminated variables (``lump="full"``) or an orbit size is symbolic.
    """
    graph = reduction.problem.graph
    out = []
    for k, system in enumerate(reduction.systems):
        if system.eliminated:
            raise GdlnError(
                f"{reduction.problem.source}: timescales needs a reduction without "
                "eliminated variables (lump 'none', 'symmetry' or 'balanced', not 'full')"
            )
        variables = list(system.variables)
        try:
            weights = np.array([1.0 / float(system.orbit(v)) for v in variables])
        except TypeError as err:
            raise GdlnError(
                f"{reduction.problem.source}: timescales needs numbers, not symbolic sizes"
            ) from err
        position = {e: i for i, v in enumerate(variables) for e in system.edges[v]}
        products = []
        for path in reduction.active.paths:
            product = _path_product(graph, path, position, len(variables))
            if product is not None:
                products.append(product)
        for j, mode in enumerate(system.modes):
            try:
                values = {s: _number(v[j]) for s, v in system.symbols.items()}
                loss = from_sympy(system.loss, variables, values)
            except GdlnError as err:
                raise GdlnError(f"{reduction.problem.source}: {err}") from err
            out.append(
                ModeNetwork(
                    system=k,
                    mode=int(mode),
                    names=tuple(str(v) for v in variables),
                    edges=tuple(tuple(system.edges[v]) for v in variables),
                    weights=weights,
                    loss=loss,
                    paths=tuple(products),
                )
            )
    return out


def _number(value: object) -> float:
    """A data value as a float; one that still holds symbols is refused, naming them."""
    try:
        return float(value)  # type: ignore[arg-type]
    except TypeError:
        names = ", ".join(sorted(str(x) for x in getattr(value, "free_symbols", ())))
        raise GdlnError(
            f"the data still hold the symbols {names}; give them values (--param NAME=VALUE)"
        ) from None


def _path_product(
    graph: object, path: Path, position: dict[Edge, int], n: int
) -> PathProduct | None:
    """The path's product in a system's variables, or ``None`` if it is not alive there."""
    powers = np.zeros(n, dtype=int)
    factor = 1.0
    for e in path.edges:
        if e in position:
            powers[position[e]] += 1
            continue
        fixed = graph.edges[e].get("fixed")  # type: ignore[attr-defined]
        if fixed is None:
            return None
        factor *= float(fixed)
    return PathProduct(path, powers, factor) if powers.any() else None


@dataclass(frozen=True, eq=False)
class ModeStage:
    """One stage of one mode.

    Parameters
    ----------
    network
        The mode.
    time
        The leading-order time of the stage.
    mechanism
        ``"exponential"``, ``"power"`` or ``"immediate"``.
    escaping
        The variables that become active (indices into ``network.names``).
    plateau
        Every variable's value on the plateau after the stage.
    new_paths
        The paths (indices into ``network.paths``) the stage completes.
    realized
        Whether the exact start $b_e(0) = +u_0$ reaches the stage (see
        :class:`~gdln.stages._escape.Escape`).
    """

    network: ModeNetwork
    time: LeadingTime
    mechanism: str
    escaping: tuple[int, ...]
    plateau: np.ndarray
    new_paths: tuple[int, ...]
    realized: bool = True


def mode_stages(
    network: ModeNetwork, *, source: str, signs: np.ndarray | None = None
) -> list[ModeStage]:
    r"""The stages of one mode from $b_e(0) = \pm u_0 \to 0$ (``signs``, default +), in order."""
    n = len(network.names)
    x = np.zeros(n)
    active = np.zeros(n, dtype=bool)
    start = np.ones(n) if signs is None else np.asarray(signs, float)
    sizes = Sizes.start(start)  # b_e(0) = +-u0, kept over the small variables
    time = LeadingTime()
    stages: list[ModeStage] = []
    what = f"{source}: mode {network.mode}"
    forced = _forced(network, x, active)
    if forced.size:
        small = np.flatnonzero(~active)
        x, active, more = _absorb_forced(network, x, active, forced, what)
        sizes = sizes.take(_positions(small, active))
        stages.append(_stage(network, time, "immediate", more, x, stages, True))
    history: list[tuple[float, Polynomial]] = []  # exponential stages since the last power one
    while not active.all():
        small = np.flatnonzero(~active)
        potential = _potential(network, x, active)
        earlier = [(d, phi.on(small)) for d, phi in history]
        found = escape(potential, network.weights[small], sizes, earlier)
        if found is None or not found.escaping:
            break
        if found.mechanism == EXPONENTIAL:
            time = time.plus_log(found.coefficient)
            history.append((found.coefficient, potential.lifted(small, n)))
        else:
            time = time.plus_power(found.power, found.coefficient).plus_log(found.log_shift)
            history = []
        new = small[list(found.escaping)]
        start = x.copy()
        start[new] = _seed(found.direction[list(found.escaping)], found.degree)
        active[new] = True
        x = _settle(network, start, active, what)
        forced = _forced(network, x, active)
        escaped = tuple(int(i) for i in new)
        if forced.size:
            x, active, more = _absorb_forced(network, x, active, forced, what)
            escaped += more
        sizes = found.after.take(_positions(small, active))
        stage = _stage(network, time, found.mechanism, escaped, x, stages, found.realized)
        stages.append(stage)
    return stages


def final_signs(stages: Sequence[ModeStage], n: int) -> np.ndarray:
    """The sign of each variable on the last plateau (+1 where it is zero)."""
    x = stages[-1].plateau if stages else np.zeros(n)
    return np.where(x < 0, -1.0, 1.0)


def _positions(small: np.ndarray, active: np.ndarray) -> list[int]:
    """Where the variables still small sit among ``small`` (the previous small ones)."""
    return [k for k, i in enumerate(small) if not active[i]]


def _stage(
    network: ModeNetwork,
    time: LeadingTime,
    mechanism: str,
    escaping: tuple[int, ...],
    x: np.ndarray,
    before: Sequence[ModeStage],
    realized: bool,
) -> ModeStage:
    done = {p for s in before for p in s.new_paths}
    live = x != 0
    complete = [
        i
        for i, p in enumerate(network.paths)
        if i not in done and np.all(live[p.powers > 0]) and p.value(x) != 0
    ]
    return ModeStage(network, time, mechanism, escaping, x.copy(), tuple(complete), realized)


def _seed(direction: np.ndarray, degree: int) -> np.ndarray:
    """The escape direction, scaled so that the settling flow leaves in about 1e4 tau."""
    size = SEED ** (1.0 / max(1, degree - 2))
    return size * direction / np.max(np.abs(direction))


def _potential(network: ModeNetwork, x: np.ndarray, active: np.ndarray) -> Polynomial:
    r"""$\Phi(\varepsilon) = -\mathcal{L}_\alpha(b^*, \varepsilon)$ in the small variables.

    Terms below :data:`FORCED` of the largest (of $\Phi$ or of the loss) are round-off of
    a residual that the plateau cancels, and are dropped.
    """
    fixed = np.flatnonzero(active)
    restricted = network.loss.restrict(list(fixed), x[fixed])
    live = restricted.degrees() >= 1
    scale = max(
        float(np.abs(restricted.coefficients[live]).max(initial=0.0)),
        float(np.abs(network.loss.coefficients).max(initial=0.0)),
    )
    return Polynomial(-restricted.coefficients, restricted.powers).pruned(FORCED * scale)


def _forced(network: ModeNetwork, x: np.ndarray, active: np.ndarray) -> np.ndarray:
    """Small variables with a first-order force at the plateau (indices into all)."""
    inactive = np.flatnonzero(~active)
    if not inactive.size:
        return inactive
    linear = _potential(network, x, active).part(1)  # round-off already dropped
    hit = (linear.powers > 0).any(axis=0) if len(linear.coefficients) else np.zeros(0, bool)
    return inactive[np.asarray(hit, bool)] if hit.size else np.zeros(0, dtype=int)


def _absorb_forced(
    network: ModeNetwork, x: np.ndarray, active: np.ndarray, forced: np.ndarray, what: str
) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    """Activate forced variables (repeatedly) and settle; return them too."""
    added: list[int] = []
    while forced.size:
        active = active.copy()
        active[forced] = True
        added += [int(i) for i in forced]
        x = _settle(network, x, active, what)
        forced = _forced(network, x, active)
    return x, active, tuple(added)


def _settle(network: ModeNetwork, start: np.ndarray, active: np.ndarray, what: str) -> np.ndarray:
    """The plateau: the flow of the active variables, the others held at zero."""
    idx = np.flatnonzero(active)
    full = np.zeros(len(network.names))

    def flow(y: np.ndarray) -> np.ndarray:
        full[idx] = y
        return network.flow(full)[idx]

    out = np.zeros(len(network.names))
    out[idx] = settle(flow, start[idx], what=what)
    return out


def edge_values(
    networks: Sequence[ModeNetwork], plateaus: Sequence[np.ndarray]
) -> dict[Edge, dict[int, float]]:
    """Edge -> mode -> its scalar $b_e$ on the current plateaus."""
    out: dict[Edge, dict[int, float]] = {}
    for net, x in zip(networks, plateaus, strict=True):
        for i, edges in enumerate(net.edges):
            for e in edges:
                out.setdefault(e, {})[net.mode] = float(x[i])
    return out


def path_maps(
    reduction: Reduction, values: dict[Edge, dict[int, float]], bases: dict[Edge, tuple]
) -> dict[str, np.ndarray]:
    r"""Path -> $W_p$ on the plateau, $W_e = \sum_\alpha b_e^\alpha r^\alpha_{t(e)}
    r^{\alpha\top}_{s(e)}$ (Eq. 9), for every path whose map is nonzero."""
    graph = reduction.problem.graph
    weights: dict[Edge, np.ndarray] = {}
    for e in graph.edges:
        fixed = graph.edges[e].get("fixed")
        if fixed is not None:
            weights[e] = float(fixed) * np.eye(graph.nodes[e[1]]["size"])
            continue
        left, right, slots = bases[e]
        b = np.array([values.get(e, {}).get(a, 0.0) for a in slots])
        weights[e] = (left * b[None, :]) @ right.T
    out = {}
    for path in reduction.active.paths:
        W: np.ndarray | None = None
        for e in path.edges:
            W = weights[e] if W is None else weights[e] @ W
        if W is not None and np.abs(W).max() > 1e-12:
            out[path_name(path)] = W
    return out


def edge_bases(reduction: Reduction) -> dict[Edge, tuple] | None:
    """Every edge's mode vectors (Eq. 9), or ``None`` on the symmetry quotient."""
    try:
        return {e: reduction.edge_bases(e) for e in reduction.problem.graph.edges}
    except GdlnError:
        return None
