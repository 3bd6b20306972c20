r"""The exact reduction of GDLN learning dynamics (Sec. 3.1 of Saxe et al. 2022).

When the path statistics share bases (Eqs. 7-8), a network started from decoupled
weights $W_e = R_{t(e)} B_e R_{s(e)}^\top$ (Eq. 9) stays decoupled, and each singular
mode $\alpha$ evolves as a network with one scalar $b_e$ per edge. Its dynamics are
gradient flow on one scalar loss,

$$\mathcal{L}_\alpha(b)=\sum_c \pi_c\sum_{o}\Big[-\sum_i s^c_{o,i}F^c_{o,i}
+\tfrac12\sum_{i,i'}F^c_{o,i}\,d^c_{i,i'}\,F^c_{o,i'}\Big],\qquad
F^c_{o,i}=\sum_{p:i\to o} g^c_p\, b_p,$$

with $s^c$, $d^c$ the context's data statistics in mode $\alpha$. Then
$\tau\,\dot b_e=-\partial\mathcal{L}_\alpha/\partial b_e$ is Eq. (10), and the total loss
of Eq. (1) is $\tfrac12\langle\lVert y\rVert^2\rangle+\sum_\alpha\mathcal{L}_\alpha$.
Derivation is differentiation of this one loss; so are lumping and the printout.

Data symbols. Each distinct vector (over modes) of values $s^c_{o,i}$ gets one symbol
($s$, $s_2$, ...), and likewise $d$; their values per mode are listed with the system.

Lumping, each verified exactly, never assumed:

* **symmetry**: start from edges grouped by a directed colour refinement of the graph,
  then split every group whose members' right-hand sides differ on the tied subspace
  (random points first, then exact polynomial identity). Tying a group $O$ to one
  variable $B$ gives $\tau\dot B=-\frac1{|O|}\partial\mathcal{L}_{\rm tied}/\partial B$
  (the $1/M$ of Eqs. 44-46).
* **balanced**: start from edges grouped by initial value instead (Eqs. 47-48).
* **full**: balanced, then conserved quadratic quantities
  $Q=\sum c_{ij}B_iB_j$ with $\nabla Q\cdot f\equiv 0$ are found by linear algebra and
  used to eliminate variables (Eq. 15).

Fixed edges ($W_e = c\,I$, untrained) enter every mode's loss as the constant $b_e = c$;
the nodes they join share one basis. Independent random gates $\delta_i$ (stochastic
depth) enter the transfers $F$ as extra polynomial variables; the expected loss replaces
$F$ and $FF'$ by their means, which is reducing every power $\delta_i^k$ to $p_i$
($\delta^2=\delta$, independent items). For problems with too many paths to list, see
:func:`gdln.expected_dynamics` (the same loss, evaluated without listing paths).

The steps, one module each: bases per component of coupled paths (``_modes``, with
``_fixed`` for fixed edges), the per-mode loss (``_loss``), lumping (``_lumping``, with
``_conserved`` and ``_closed_form``), the results (``_system``) and the decoupled weights
of Eq. (9) (``_decoupled``).
"""

from __future__ import annotations

import dataclasses
import functools
import heapq
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

import networkx as nx
import sympy as sp

from .._bounded._expressions import ExpressionError, as_sympy, exact
from .._edge import Edge, edge_name
from .._errors import GdlnError, NotDiagonalizableError, TaskSpecError, TooManyPathsError
from ..paths._statistics import (
    ActivePaths,
    Successors,
    active_paths,
    require_numbers_for_float_data,
)
from ..settings._declared import Settings
from ..settings._door import AT_THE_DOOR, door
from ..task._problem import Problem, require_linear
from ..task._task import Task
from ._bases import Modes
from ._decoupled import anchor_bases
from ._internal import set_internal
from ._loss import LossBuilder, ModeLoss
from ._lumping import Names, lumped_system, partition
from ._modes import Space, alive_edges, component_modes, tidy_number
from ._narrow import check_narrow_nodes
from ._quotient import NoSymmetry, Quotient, find_quotient
from ._system import ReducedSystem, Reduction

__all__ = ["reduce"]

MAX_SYMBOLIC_PAIRS = 100_000
"""Most co-active path pairs (summed over contexts and outputs) the symbolic route lists."""


@door
def reduce(
    problem: Problem,
    *,
    lump: str | None = None,
    b0: Any = None,
    route: str | None = None,
    symbolic: Sequence[str] = (),
    weight_decay: float | str | None = None,
    resolved: Settings = AT_THE_DOOR,
) -> Reduction:
    r"""Reduce a problem's learning dynamics to one small ODE per class of modes.

    Every setting left ``None`` takes the problem's value (``problem.settings``: the
    graph file's ``solve:`` section over the declared defaults, :class:`gdln.settings.Settings`).

    Parameters
    ----------
    problem
        A loaded graph file with a task.
    lump
        ``"none"`` (one variable per edge, Eq. 10), ``"symmetry"`` (Eqs. 44-46, the
        default), ``"balanced"`` (Eqs. 47-48) or ``"full"`` (Eq. 15). See the module
        docstring.
    b0
        Initial value of every $b_e$ (a number), or a mapping from edge (``(u, v)``
        or ``"u->v"``) to value with an optional ``"default"``.
    route
        ``"auto"`` (default): derive from one context per orbit of the file's cyclic
        symmetry (:mod:`gdln.reduction._quotient`) where the task has a ``repeat:`` family
        of contexts and a lumping other than ``"none"`` is asked for, falling back to
        every context (saying why in :attr:`Reduction.route`) when the symmetry cannot be
        shown; ``"quotient"``: the same, refused when the symmetry does not hold;
        ``"contexts"``: every context. (``"moments"`` and ``"matrix"`` derive no
        equations: see :func:`gdln.expected_dynamics` and :func:`gdln.solve`.)
    symbolic
        Integer parameters of the file kept as symbols: orbit sizes, counts and
        probabilities become expressions in them (implies the quotient; an error says
        why when it does not apply).
    weight_decay
        The weight decay $\gamma \ge 0$ (default: the problem's ``weight_decay``
        setting, 0): each mode's loss gains $\tfrac\gamma2\sum_e b_e^2$, exact because
        decoupled weights have $\lVert W_e\rVert_F^2=\sum_\alpha b_{e,\alpha}^2$, and
        every right-hand side gains $-\gamma b_e$. ``lump="full"`` is refused with
        $\gamma > 0$ (its conserved quantities decay, $\dot Q = -2\gamma Q$).

    Returns
    -------
    Reduction
        The common bases and one :class:`ReducedSystem` per class of modes.

    Raises
    ------
    SettingError
        A setting is malformed (:class:`gdln.settings.SettingError`).
    NotDiagonalizableError
        If the path statistics have no common bases.
    TooManyPathsError
        If the co-active path pairs are too many to list (the moment route,
        :func:`gdln.expected_dynamics`, gives the same dynamics).
    GdlnError
        With ``symbolic`` or ``route="quotient"``, if the family has no symmetry quotient
        (the reason is given); with ``route`` ``"moments"`` or ``"matrix"``; with
        ``lump="full"`` and weight decay.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eqs. (5)-(10) (the reduction), (15) (elimination
    through a conserved quantity) and (44)-(48) (lumping).

    Examples
    --------
    >>> import gdln
    >>> problem = gdln.load("graphs/routing.yaml", params={"M": "3", "K": "2"})
    >>> reduction = gdln.reduce(problem)
    >>> [str(v) for v in reduction.systems[0].variables]
    ['B1', 'B2', 'B3']
    """
    return derive(problem, resolved, symbolic=symbolic)


def derive(problem: Problem, settings: Settings, *, symbolic: Sequence[str] = ()) -> Reduction:
    """The reduction of ``problem`` by its resolved settings: the body of :func:`reduce`
    (whose docstring says what each setting does), and what every stage below a door
    calls with the one :class:`~gdln.settings.Settings` value it was given."""
    require_linear(problem.graph, source=problem.source)
    if settings.route in ("moments", "matrix"):
        raise GdlnError(
            f"{problem.source}: route {settings.route!r} derives no symbolic equations; "
            "reduce takes auto, quotient or contexts (gdln.solve takes every route)"
        )
    lump = settings.lump
    decay = exact_decay(settings.weight_decay)
    if lump == "full" and decay:
        raise GdlnError(
            f"{problem.source}: lump 'full' eliminates variables through conserved quantities "
            f"(Eq. 15), which weight decay {settings.weight_decay:g} does not conserve "
            "(d/dt Q = -2 weight_decay Q); use lump balanced or symmetry"
        )
    init_values = initial_values(problem, settings)
    work, orbits, described = _route(problem, lump, init_values, settings.route, symbolic)
    _check_reducible(work)
    active = active_paths(work.graph, work.require_task())
    if not active.paths:
        raise GdlnError(f"{problem.source}: no context switches on any path with data at its input")
    edge_component = _edge_components(active)
    space, modes = _modes(work, active)
    check_narrow_nodes(work, space, modes, edge_component)
    slot_edges = alive_edges(work.graph, active, space, modes, edge_component)
    builder = LossBuilder(work, active, space, modes, slot_edges)
    systems, constant_modes = _systems(builder, lump, init_values, orbits, decay)
    constant, per_context = builder.constants()
    reduction = Reduction(
        problem=work,
        systems=systems,
        constant=tidy_number(constant + constant_modes),
        context_constants=per_context,
        modes=tuple(modes),
        lump=lump,
        active=active,
        route=described,
        symbolic=tuple(symbolic),
        weight_decay=decay,
    )
    return set_internal(
        reduction,
        _space=space,
        _edge_component=edge_component,
        _slot_edges=slot_edges,
        _init=init_values,
        _anchors=anchor_bases(work.graph, space, modes),
        _network=None
        if orbits is None
        else functools.partial(
            derive, problem, dataclasses.replace(settings, lump="none", route="contexts")
        ),
    )


def _route(
    problem: Problem,
    lump: str,
    init: Mapping[Edge, Any],
    route: str,
    symbolic: Sequence[str],
) -> tuple[Problem, Quotient | None, str]:
    """The problem to derive from: the symmetry quotient's representatives, or all.

    The one rule of every door (``derive``, ``solve``, ``compare``, ``timescales`` and the
    Python API): the quotient wherever the task has a ``repeat:`` family of contexts and
    the lumping ties edges, unless ``route="contexts"``.
    """
    contexts = problem.require_task().contexts
    if symbolic and lump == "none":
        raise GdlnError(f"{problem.source}: symbolic parameters need a lumping (not 'none')")
    if symbolic and route == "contexts":
        raise GdlnError(f"{problem.source}: symbolic parameters need the quotient route")
    families = bool(getattr(contexts, "families", ()))
    if route == "quotient" and lump == "none":
        raise GdlnError(f"{problem.source}: route 'quotient' needs a lumping (not 'none')")
    if route == "contexts" or lump == "none" or not (families or symbolic):
        if route == "quotient":
            raise GdlnError(
                f"{problem.source}: route 'quotient' needs a task with a repeat: family of contexts"
            )
        return problem, None, ""
    try:
        found = find_quotient(problem, init, symbolic=symbolic)
    except NoSymmetry as err:
        if symbolic or route == "quotient":
            raise GdlnError(f"{problem.source}: no symmetry quotient: {err}") from err
        return problem, None, f"every context (no symmetry quotient: {err})"
    return found.problem, found, found.route


def _check_reducible(problem: Problem) -> None:
    """Refuse symbolic values with float data, and problems too large to list."""
    try:
        require_numbers_for_float_data(problem.require_task())
    except TaskSpecError as err:
        raise TaskSpecError(str(err), source=problem.source) from err
    check_symbolic_size(problem)


def _edge_components(active: ActivePaths) -> dict[Edge, int]:
    """Edge -> the component of the active paths through it."""
    comp_of_path = active.component_of()
    return {e: comp_of_path[i] for i, p in enumerate(active.paths) for e in p.edges}


def _modes(problem: Problem, active: ActivePaths) -> tuple[Space, list[Modes]]:
    """:func:`component_modes`, with errors naming the file."""
    try:
        return component_modes(problem, active)
    except NotDiagonalizableError as err:
        raise NotDiagonalizableError(
            f"{problem.source}: {err}", paths=err.paths, residual=err.residual
        ) from err


def _systems(
    builder: LossBuilder,
    lump: str,
    init: Mapping[Edge, Any],
    quotient: Quotient | None,
    decay: Any = 0,
) -> tuple[tuple[ReducedSystem, ...], Any]:
    """One lumped system per class of modes; modes with only fixed edges add a constant.

    The systems share one :class:`Names`: a variable standing for the same edges has the
    same name in every system, and no name stands for two edge sets.
    """
    systems = []
    constant: Any = 0
    graph, source = builder.problem.graph, builder.problem.source
    names = Names()
    for slots in builder.classes():
        if builder.variable_edges(slots):
            mode_loss = builder.mode_loss(slots)
            if quotient is None:
                blocks = partition(graph, mode_loss, lump, init)
                systems.append(
                    lumped_system(
                        mode_loss,
                        blocks,
                        lump,
                        init,
                        gamma=decay,
                        names=names,
                        source=source,
                    )
                )
                continue
            mode_loss, orbits, sizes = orbit_loss(mode_loss, quotient)
            blocks = partition(graph, mode_loss, lump, init, sizes=sizes, colours=quotient.colours)
            systems.append(
                lumped_system(
                    mode_loss,
                    blocks,
                    lump,
                    init,
                    orbits=orbits,
                    sizes=sizes,
                    gamma=decay,
                    names=names,
                    source=source,
                )
            )
        else:
            constant = constant + builder.constant_loss(slots)
    return tuple(systems), constant


def orbit_loss(
    mode_loss: ModeLoss, quotient: Quotient
) -> tuple[ModeLoss, list[tuple[Edge, ...]], list[Any]]:
    """The loss with the edge variables of one orbit tied: one variable per orbit.

    On the representatives, the tied loss is the whole family's (see ``_quotient``);
    each variable keeps its orbit's edges and size.
    """
    n_edges = len(mode_loss.edges)
    first: dict[int, int] = {}  # orbit -> its new variable, in order of first appearance
    keep: list[int] = []  # per new variable, the first edge of its orbit
    mapping: dict[int, int] = {}
    for i, e in enumerate(mode_loss.edges):
        if quotient.orbit[e] not in first:
            first[quotient.orbit[e]] = len(first)
            keep.append(i)
        mapping[i] = first[quotient.orbit[e]]
    n_orbits = len(first)
    mapping |= {n_edges + j: n_orbits + j for j in range(len(mode_loss.generators) - n_edges)}
    tied = ModeLoss(
        edges=[mode_loss.edges[i] for i in keep],
        loss=mode_loss.loss.rename(mapping),
        per_context=[p.rename(mapping) for p in mode_loss.per_context],
        generators=[mode_loss.generators[i] for i in keep] + mode_loss.generators[n_edges:],
        data_values=mode_loss.data_values,
        slots=mode_loss.slots,
    )
    orbits = [quotient.members[o] for o in first]
    return tied, orbits, [quotient.sizes[o] for o in first]


def exact_decay(gamma: float) -> Any:
    r"""The weight decay $\gamma$ as an exact sympy number (``0.1`` is 1/10), as the reduced
    equations print it."""
    return as_sympy(Fraction(repr(float(gamma))))


# ---------------------------------------------------------------------------------------
# Initial values


def initial_values(problem: Problem, settings: Settings) -> dict[Edge, Any]:
    """Every edge's initial $b_e$ from the ``b0`` setting (read exactly when the settings
    were resolved): a number, or a mapping edge -> value whose ``"default"`` (else the
    declared default of ``b0``) covers the edges it omits."""
    edges = list(problem.graph.edges)
    start = settings.b0
    if isinstance(start, Mapping):
        default = start.get("default", Settings().b0)
        out = {e: start.get(e, start.get(edge_name(e), default)) for e in edges}
        return {e: _initial_number(problem, v, f"b0[{edge_name(e)}]") for e, v in out.items()}
    return dict.fromkeys(edges, _initial_number(problem, start, "b0"))


def _initial_number(problem: Problem, value: Any, key: str) -> Any:
    """An initial value (read by the setting's declaration) as an exact sympy number, or
    a sympy expression in the file's declared symbols."""
    try:
        number = exact(value)
    except ExpressionError as err:
        raise GdlnError(f"{problem.source}: {key} {value!r}: {err}") from err
    if not isinstance(number, (int, sp.Expr)) or (
        isinstance(number, sp.Expr) and not number.free_symbols and not number.is_extended_real
    ):
        raise GdlnError(f"{problem.source}: {key} {value!r}: expected a real number")
    return as_sympy(number)


# ---------------------------------------------------------------------------------------
# The size of the symbolic route


def check_symbolic_size(problem: Problem) -> None:
    """Refuse problems whose co-active path pairs are too many to list symbolically."""
    paths, pairs = _count_active(problem.graph, problem.require_task())
    if pairs > MAX_SYMBOLIC_PAIRS:
        raise TooManyPathsError(
            f"{problem.source}: {_count(paths)} active input-output paths ({_count(pairs)} "
            f"co-active pairs, "
            f"more than the {MAX_SYMBOLIC_PAIRS} the symbolic route lists); the moment route "
            f"gives the same expected loss and dynamics without listing paths: "
            f"gdln.expected_dynamics(problem), or `gdln solve` (which uses it)",
            paths=paths,
        )


def _count_active(graph: nx.DiGraph, task: Task) -> tuple[int, int]:
    r"""Active paths and co-active pairs $\sum_c\sum_o n_{c,o}^2$, counted, not listed.

    Per context, a dynamic programme over the part of the graph its bound inputs reach
    through open gates (the paths :func:`active_paths` would list), walking only the
    context's open gated edges; it stops once the pairs pass the limit.
    """
    order = {v: i for i, v in enumerate(nx.topological_sort(graph))}
    succ = Successors(graph)
    node_gated = {v: bool(g) for v, g in graph.nodes(data="gated")}
    paths = pairs = 0
    for c in task.contexts:
        gates = c.gates
        opened = succ.opened(gates)
        count = dict.fromkeys(c.inputs, 1)
        heap = [(order[v], v) for v in c.inputs]
        heapq.heapify(heap)
        while heap:
            _, v = heapq.heappop(heap)
            n = count[v]
            if v in succ.sinks:
                paths, pairs = paths + n, pairs + n * n
                continue
            for w in succ.of(v, opened):
                if node_gated[w] and gates.get(w, 0) == 0:
                    continue
                if w not in count:
                    count[w] = 0
                    heapq.heappush(heap, (order[w], w))
                count[w] += n
        if pairs > MAX_SYMBOLIC_PAIRS:
            break
    return paths, pairs


def _count(n: int) -> str:
    return str(n) if n < 10**7 else f"about 10^{len(str(n)) - 1}"
