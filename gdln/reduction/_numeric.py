r"""The reduced dynamics in numbers: :class:`NumericFlow`, what :func:`gdln.solve` integrates.

Both routes of the reduction give one, through the same method ``numeric_flow()``: a
:class:`~gdln.Reduction` compiles the equations of its systems (Eq. 10 of Saxe et al.
2022, lumped; Eq. 15 for eliminated variables) from sympy, once per system, and an
:class:`~gdln.ExpectedDynamics` evaluates its moment tape. The solver sees one flat state
$y$ (each system's variables, each variable's modes in a row), constants $c$ (the values
of conserved quadratic forms, Eq. 15) and a batch axis: many systems of the same
equations stepped side by side, e.g. the initial scales of
:func:`gdln.solution.solve_batch` ($y \to \lambda y$, $c \to \lambda^2 c$).

A right-hand side is compiled at most two ways, plus the Jacobian:

* **vectorised** (numpy, shared subexpressions once, small integer powers as products):
  $f$ on states ``(n, batch)``, every variable one array across modes and batch;
* **scalar**: one Python function of one flat state, generated from the same equations
  with shared subexpressions, writing $f$ into a list. For the few variables that lumping
  leaves, CPython runs it several times faster per call than numpy on tiny arrays, and
  LSODA and the gradient-descent map call it about a thousand times a solve; numba (the
  ``fast`` extra) compiles this same function where a batch repays the compile
  (:mod:`gdln.solution._numba`). Only for states of at most :data:`SCALAR_STATE_MAX`
  entries;
* the **analytic Jacobian** $\partial f_i/\partial y_j$ (scalar, nonzero only within a
  mode of one system), for LSODA's stiff steps.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Mapping, MutableSequence, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import sympy as sp
from sympy.printing.numpy import NumPyPrinter
from sympy.printing.precedence import PRECEDENCE
from sympy.printing.pycode import PythonCodePrinter

from .._bounded._limits import check_work
from .._edge import Edge, edge_name
from .._errors import GdlnError, shorten_text
from ..task._problem import Problem
from ..task._task import unbound_message
from ._loss import floor_at_zero
from ._poly import Polynomial, monomial_table

__all__ = ["SCALAR_STATE_MAX", "NumericFlow", "Recorded", "moment_flow", "reduction_flow"]

COMPILE_SECONDS = 6e-4
"""Seconds per node of the right-hand sides' expression trees to compile them (common
subexpressions, the numpy and scalar functions, the Jacobian): 6-7 s for the 11 000 nodes
of a fan of 30 pathways without lumping, 4 ms per term, on a 2-core machine."""

SCALAR_STATE_MAX = 512
"""Largest flat state compiled into one scalar function (and an analytic Jacobian)."""

BatchRhs = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""$f(y, c)$ on states ``(n, batch)`` and constants ``(k, batch)``, returning ``(n, batch)``."""
ScalarRhs = Callable[[Sequence[float], Sequence[float], MutableSequence[float]], None]
"""``f(y, c, out)``: writes $f$ at one flat state ``y`` with constants ``c`` into ``out``."""


# -- what the builders read (protocols: the result types import this module) -------------


class FlowSystem(Protocol):
    """What a flow reads of a system: a :class:`~gdln.reduction.ReducedSystem`."""

    @property
    def variables(self) -> Sequence[sp.Symbol]: ...
    @property
    def edges(self) -> Mapping[sp.Symbol, Sequence[Edge]]: ...
    @property
    def rhs(self) -> Mapping[sp.Symbol, sp.Expr]: ...
    @property
    def symbols(self) -> Mapping[sp.Symbol, Sequence[Any]]: ...
    @property
    def modes(self) -> Sequence[int]: ...
    @property
    def initial(self) -> Mapping[sp.Symbol, Any]: ...
    @property
    def eliminated(self) -> Mapping[sp.Symbol, sp.Expr]: ...
    @property
    def constants(self) -> Mapping[sp.Symbol, Any]: ...
    @property
    def _lumped(self) -> Sequence[sp.Symbol]: ...
    @property
    def _context_losses(self) -> Sequence[Polynomial]: ...
    def tied(self) -> FlowSystem: ...


class FlowReduction(Protocol):
    """What :func:`reduction_flow` reads: a :class:`~gdln.Reduction`."""

    @property
    def problem(self) -> Problem: ...
    @property
    def systems(self) -> Sequence[FlowSystem]: ...
    @property
    def constant(self) -> Any: ...
    @property
    def context_constants(self) -> Sequence[Any]: ...
    @property
    def lump(self) -> str: ...
    @property
    def route(self) -> str: ...
    @property
    def route_name(self) -> str: ...
    @property
    def weight_decay(self) -> Any: ...


class FlowMoments(Protocol):
    """What :func:`moment_flow` reads: an :class:`~gdln.ExpectedDynamics`."""

    @property
    def problem(self) -> Problem: ...
    @property
    def edges(self) -> Sequence[Edge]: ...
    @property
    def variables(self) -> Sequence[sp.Symbol]: ...
    @property
    def alive(self) -> np.ndarray: ...
    @property
    def initial(self) -> np.ndarray: ...
    @property
    def n_modes(self) -> int: ...
    @property
    def weight_decay(self) -> Any: ...
    def flow(self, b: Any) -> np.ndarray: ...
    def context_losses(self, b: Any) -> np.ndarray: ...


@dataclass(frozen=True)
class Recorded:
    """What a solution records, each array with the batch on its last axis.

    Attributes
    ----------
    series
        Every variable (free and eliminated) by ``(name, system)``: ``(T, modes, batch)``
        (the trajectory names it, ``gdln.solution._series.variable_key``).
    context_loss
        Per context, $\\tfrac12\\langle\\lVert y-h\\rVert^2\\rangle_c$: ``(T, contexts, batch)``.
    loss
        The loss of Eq. (1), the contexts' losses weighted by their probabilities:
        ``(T, batch)``.
    """

    series: dict[tuple[str, int], np.ndarray]
    context_loss: np.ndarray
    loss: np.ndarray


@dataclass(frozen=True, eq=False)
class NumericFlow:
    r"""The reduced dynamics $\tau\dot y = f(y; c)$ in numbers, whichever route built them.

    What :func:`gdln.solve` and :func:`gdln.solution.solve_batch` integrate, from
    :meth:`gdln.Reduction.numeric_flow` or :meth:`gdln.ExpectedDynamics.numeric_flow`.

    Parameters
    ----------
    y0
        The initial state ``(n,)``.
    constants
        The constants $c$ ``(k,)`` (conserved quadratic forms of Eq. 15; none on the
        moment route). Scaling the initial state by $\lambda$ scales them by $\lambda^2$.
    batch_rhs
        $f(y, c)$ on states ``(n, batch)`` and constants ``(k, batch)``.
    labels
        Per state entry, ``(variable name, system, mode)``, for messages.
    blocks
        Per state entry, a block number: $\partial f_i/\partial y_j = 0$ unless entries
        ``i`` and ``j`` share a block (the modes of Eq. 10 evolve independently).
    record
        ``record(states, constants)``: the :class:`Recorded` series and losses from
        states ``(T, n, batch)`` and constants ``(k, batch)``.
    meta
        What a trajectory records about where the dynamics came from (source, lumping
        or route, modes, context labels, ...).
    source
        The graph file, for messages.
    scalar
        The scalar form of $f$ (see the module docstring), or ``None``.
    scalar_jacobian
        $\partial f_i/\partial y_j$ at one state and constants, dense ``(n, n)``, or
        ``None``.
    systems
        How many reduced systems are stacked in the state (``system`` of the labels and
        the series counts them).
    edges
        Variable name -> the names of the edges it stands for: one name, one edge set,
        in every system (a variable of several systems stands for the same edges in each).
    """

    y0: np.ndarray
    constants: np.ndarray
    batch_rhs: BatchRhs
    labels: tuple[tuple[str, int, int], ...]
    blocks: np.ndarray
    record: Callable[[np.ndarray, np.ndarray], Recorded]
    meta: Mapping[str, Any]
    source: str
    scalar: ScalarRhs | None = None
    scalar_jacobian: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None
    systems: int = 1
    edges: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"NumericFlow({self.source!r}, size={len(self.y0)}, constants={len(self.constants)})"

    def rhs(self, y: np.ndarray, constants: np.ndarray | None = None) -> np.ndarray:
        r"""$f$ at one state.

        Parameters
        ----------
        y
            The state ``(n,)``.
        constants
            The constants $c$ ``(k,)``; :attr:`constants` unless given.

        Returns
        -------
        numpy.ndarray
            $f(y; c)$, ``(n,)``.
        """
        c = self.constants if constants is None else np.asarray(constants, dtype=float)
        y = np.asarray(y, dtype=float)
        if self.scalar is not None:
            out = [0.0] * len(y)
            self.scalar(y.tolist(), c.tolist(), out)
            return np.array(out)
        return np.asarray(self.batch_rhs(y[:, None], c[:, None]))[:, 0]


# -- compiling sympy expressions ---------------------------------------------------------


class _NumpyPrinter(NumPyPrinter):
    """numpy code with small integer powers as products (``x**3`` is a slow ``pow``)."""

    def _print_Pow(self, expr: sp.Pow, rational: bool = False) -> str:
        base, exponent = expr.args
        if exponent.is_Integer and 2 <= int(exponent) <= 8:
            factor = self.parenthesize(base, PRECEDENCE["Mul"])
            return "(" + "*".join([factor] * int(exponent)) + ")"
        return str(super()._print_Pow(expr, rational=rational))


def numpy_function(
    exprs: Sequence[sp.Expr], args: Sequence[Sequence[sp.Symbol]]
) -> Callable[..., list[Any]]:
    """``f(*arrays)`` returning ``exprs`` evaluated by numpy, shared subexpressions once.

    ``args`` are argument lists as for :func:`sympy.lambdify`; a value may come back as a
    scalar where an expression does not depend on the arrays.
    """
    printer = _NumpyPrinter({"fully_qualified_modules": False, "inline": True})
    return sp.lambdify([list(a) for a in args], list(exprs), "numpy", cse=True, printer=printer)


def scalar_function(
    exprs: Sequence[sp.Expr], state: Sequence[sp.Symbol], constants: Sequence[sp.Symbol]
) -> ScalarRhs:
    """``f(y, c, out)`` setting ``out[i] = exprs[i]`` at ``y``, ``c`` (lists or arrays).

    The source is printed by sympy from ``exprs``, with every symbol renamed ``y_i``,
    ``c_i`` (and ``x_i`` for shared subexpressions); it uses only arithmetic and the
    ``math`` module, so that CPython runs it on lists and numba compiles it on arrays.
    """
    shared, reduced = sp.cse(list(exprs), symbols=sp.numbered_symbols("x"))
    # new names in the order of the old ones, so that every sum and product is printed,
    # hence evaluated, in the same order
    ordered = sorted([*state, *constants], key=sp.default_sort_key)
    width = len(str(len(ordered)))
    names = {s: sp.Symbol(f"v{k:0{width}d}") for k, s in enumerate(ordered)}
    printer = PythonCodePrinter({"fully_qualified_modules": True})
    lines = ["def rhs(y, c, out):"]
    lines += [f"    {names[s]} = y[{i}]" for i, s in enumerate(state)]
    lines += [f"    {names[s]} = c[{i}]" for i, s in enumerate(constants)]
    lines += [f"    {s} = {printer.doprint(e.xreplace(names))}" for s, e in shared]
    lines += [f"    out[{i}] = {printer.doprint(e.xreplace(names))}" for i, e in enumerate(reduced)]
    lines.append("    return None")
    namespace: dict[str, Any] = {"math": math}
    exec("\n".join(lines), namespace)  # the source printed above by sympy, no text of a file
    function: ScalarRhs = namespace["rhs"]
    return function


# -- a reduced system in numbers ----------------------------------------------------------


class _SystemNumbers:
    """One :class:`~gdln.reduction.ReducedSystem` with its data as floats and its equations compiled for
    numpy (vectorised across modes and batch)."""

    def __init__(self, system: FlowSystem):
        self.system = system
        self.free = list(system.variables)
        self.data_symbols = list(system.symbols)
        self.constant_symbols = list(system.constants)
        self.n_modes = len(system.modes)
        self.data = [np.array([float(x) for x in system.symbols[s]]) for s in self.data_symbols]
        self.columns = [d[:, None] for d in self.data]  # broadcast against (modes, batch)
        self.consts = np.array([float(system.constants[c]) for c in self.constant_symbols])
        self.y0 = np.array([[float(system.initial[v])] * self.n_modes for v in self.free])
        args = [self.free, self.data_symbols, self.constant_symbols]
        self.vector = numpy_function([system.rhs[v] for v in self.free], args)
        self.eliminated = list(system.eliminated)
        self.eliminated_values = (
            numpy_function([system.eliminated[v] for v in self.eliminated], args)
            if self.eliminated
            else None
        )
        self.lumped = list(system._lumped)
        self.monomials, self.table = monomial_table(system._context_losses)

    @property
    def size(self) -> int:
        return len(self.free) * self.n_modes

    def rhs_into(self, out: np.ndarray, y: np.ndarray, c: Sequence[np.ndarray]) -> None:
        """$f$ of this system's rows ``y`` ``(vars * modes, batch)`` into ``out``."""
        m = self.n_modes
        rows = [y[i * m : (i + 1) * m] for i in range(len(self.free))]
        for i, value in enumerate(self.vector(rows, self.columns, list(c))):
            out[i * m : (i + 1) * m] = value

    def entries(
        self, state: Sequence[sp.Symbol], constants: Sequence[sp.Symbol]
    ) -> list[list[sp.Expr]]:
        """Per mode, the right-hand sides of its variables in the flat-state symbols
        ``state`` (this system's, variable-major) and ``constants``, data as floats."""
        m = self.n_modes
        shared = dict(zip(self.constant_symbols, constants, strict=True))
        out = []
        for a in range(m):
            values = {v: state[i * m + a] for i, v in enumerate(self.free)} | shared
            values |= {
                s: sp.Float(d[a], 17) for s, d in zip(self.data_symbols, self.data, strict=True)
            }
            out.append([self.system.rhs[v].xreplace(values) for v in self.free])
        return out

    def values(self, y: np.ndarray, c: Sequence[np.ndarray]) -> dict[sp.Symbol, np.ndarray]:
        """Free and eliminated variables ``(T, modes, batch)`` from ``y`` ``(T, vars, m, b)``."""
        values = {v: y[:, i] for i, v in enumerate(self.free)}
        if self.eliminated_values is not None:
            shape = (y.shape[0], *y.shape[2:])
            found = self.eliminated_values(list(values.values()), self.columns, list(c))
            for v, value in zip(self.eliminated, found, strict=True):
                values[v] = np.broadcast_to(np.asarray(value, dtype=float), shape)
        return values

    def context_losses(self, values: Mapping[sp.Symbol, np.ndarray]) -> np.ndarray:
        r"""$\sum_\alpha \ell^c_\alpha$ per context and member: ``(T, contexts, batch)``."""
        T, _, b = next(iter(values.values())).shape
        summed = np.zeros((T, len(self.monomials), b))
        args = [values[v] for v in self.lumped] + self.columns
        for k, monomial in enumerate(self.monomials):  # products: no pow on large arrays
            product: np.ndarray | float = 1.0
            for v, e in monomial:
                for _ in range(e):
                    product = product * args[v]
            summed[:, k] = np.broadcast_to(product, (T, self.n_modes, b)).sum(axis=1)
        return np.asarray(self.table @ summed)


_NUMBERS: weakref.WeakKeyDictionary[FlowSystem, _SystemNumbers] = weakref.WeakKeyDictionary()
_FLOWS: weakref.WeakKeyDictionary[FlowReduction, dict[bool, NumericFlow]] = (
    weakref.WeakKeyDictionary()
)


def _numbers(system: FlowSystem) -> _SystemNumbers:
    """Compile a system once; later flows of the same system reuse it."""
    if system not in _NUMBERS:
        _NUMBERS[system] = _SystemNumbers(system)
    return _NUMBERS[system]


def require_numbers(reduction: FlowReduction) -> None:
    """Refuse a reduction whose data, initial values or equations still hold symbols."""
    task = reduction.problem.require_task()
    values: list[Any] = [reduction.constant, *reduction.context_constants]
    values += [c.probability for c in task.contexts]
    free: set[sp.Basic] = set()
    for system in reduction.systems:
        values += [x for vals in system.symbols.values() for x in vals]
        values += [*system.constants.values(), *system.initial.values()]
        # symbols left in the equations themselves, e.g. a symbolic survival probability
        known = {*system.variables, *system.symbols, *system.constants}
        free |= {x for rhs in system.rhs.values() for x in rhs.free_symbols if x not in known}
    free |= set().union(*(v.free_symbols for v in values if isinstance(v, sp.Basic)))
    if free:
        raise GdlnError(f"{reduction.problem.source}: {unbound_message(free)}")


def reduction_flow(reduction: FlowReduction, *, gd_map: bool = False) -> NumericFlow:
    """The :class:`NumericFlow` of a reduction (see :meth:`gdln.Reduction.numeric_flow`),
    built once per reduction and use."""
    cached = _FLOWS.setdefault(reduction, {})
    if gd_map not in cached:
        require_numbers(reduction)
        systems = reduction.systems
        note = "reduced"
        if gd_map:  # Eq. (15) holds for the flow only: the map iterates the tied systems
            tied = tuple(s.tied() for s in systems)
            if any(new is not old for new, old in zip(tied, systems, strict=True)):
                systems, note = tied, "tied"
        check_compile_work(reduction, systems)
        cached[gd_map] = _build(reduction, [_numbers(s) for s in systems], note)
    return cached[gd_map]


def check_compile_work(reduction: FlowReduction, systems: Sequence[Any]) -> None:
    """Refuse right-hand sides too large to compile (:data:`COMPILE_SECONDS` a node of
    their expression trees) within the limit ``work``, before any is compiled."""
    nodes = sum(
        1 for system in systems for rhs in system.rhs.values() for _ in sp.preorder_traversal(rhs)
    )
    check_work(
        nodes * COMPILE_SECONDS,
        f"{reduction.problem.source}: compiling {sum(len(s.rhs) for s in systems)} reduced "
        f"equations of {nodes} expression nodes to numbers",
        advice="lump symmetry or balanced ties more edges, or --route moments",
    )


def _build(reduction: FlowReduction, numbers: list[_SystemNumbers], note: str) -> NumericFlow:
    """The systems ``numbers`` stacked into one flat state."""
    sizes = [n.size for n in numbers]
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
    n_consts = [len(n.consts) for n in numbers]
    cstarts = np.concatenate([[0], np.cumsum(n_consts)]).astype(int)

    def batch_rhs(y: np.ndarray, c: np.ndarray) -> np.ndarray:
        out = np.empty_like(y)
        for n, s0, s1, c0, c1 in zip(
            numbers, starts, starts[1:], cstarts, cstarts[1:], strict=False
        ):
            n.rhs_into(out[s0:s1], y[s0:s1], list(c[c0:c1]))
        return out

    task = reduction.problem.require_task()
    probabilities = np.array([float(c.probability) for c in task.contexts])
    context_constants = np.array([float(v) for v in reduction.context_constants])

    def record(states: np.ndarray, c: np.ndarray) -> Recorded:
        T, _, b = states.shape
        context_loss = np.broadcast_to(context_constants[:, None], (T, len(probabilities), b))
        series: dict[tuple[str, int], np.ndarray] = {}
        for k, (n, s0, c0, c1) in enumerate(
            zip(numbers, starts, cstarts, cstarts[1:], strict=False)
        ):
            y = states[:, s0 : s0 + n.size].reshape(T, len(n.free), n.n_modes, b)
            values = n.values(y, list(c[c0:c1]))
            context_loss = context_loss + n.context_losses(values)
            series |= {(str(v), k): np.asarray(arr) for v, arr in values.items()}
        context_loss = floor_at_zero(context_loss, context_constants[:, None])
        return Recorded(series, context_loss, np.einsum("c,tcb->tb", probabilities, context_loss))

    labels = tuple(
        (str(v), k, a) for k, n in enumerate(numbers) for v in n.free for a in range(n.n_modes)
    )
    blocks, block = [], 0
    for n in numbers:
        blocks += [block + a for _ in n.free for a in range(n.n_modes)]
        block += n.n_modes
    problem = reduction.problem
    meta = {
        "source": problem.source,
        "params": {k: str(v) for k, v in problem.params.items()},
        "lump": reduction.lump,
        "route": reduction.route_name,
        "route_reason": reduction.route,
        "weight_decay": float(reduction.weight_decay),
        "time_unit": "tau",
        "modes": [list(s.modes) for s in reduction.systems],
        "context_labels": [c.label for c in task.contexts],
        "system": note,
    }
    y0 = np.concatenate([n.y0.ravel() for n in numbers]) if numbers else np.zeros(0)
    consts = np.concatenate([n.consts for n in numbers]) if numbers else np.zeros(0)
    scalar, jacobian = None, None
    if 0 < len(y0) <= SCALAR_STATE_MAX:
        stacked = _Stacked(numbers)
        scalar, jacobian = stacked.scalar(), _LazyJacobian(stacked)
    return NumericFlow(
        y0=y0,
        constants=consts,
        batch_rhs=batch_rhs,
        labels=labels,
        blocks=np.array(blocks, dtype=int),
        record=record,
        meta=meta,
        source=problem.source,
        scalar=scalar,
        scalar_jacobian=jacobian,
        systems=len(numbers),
        edges=_variable_edges(reduction.systems),
    )


def _variable_edges(systems: Sequence[FlowSystem]) -> dict[str, tuple[str, ...]]:
    """Variable name -> its edges' names, over every system; a name given to two edge sets
    (which :func:`gdln.reduce` never does) is refused."""
    out: dict[str, tuple[str, ...]] = {}
    for system in systems:
        for variable, edges in system.edges.items():
            names = tuple(edge_name(e) for e in edges)
            if set(out.setdefault(str(variable), names)) != set(names):
                raise GdlnError(
                    f"variable {variable} stands for two edge sets: "
                    f"{shorten_text(', '.join(out[str(variable)]), 100)} and "
                    f"{shorten_text(', '.join(names), 100)}"
                )
    return out


class _Stacked:
    """The stacked systems' right-hand sides in flat-state symbols, for the scalar forms."""

    def __init__(self, numbers: list[_SystemNumbers]):
        self.state: list[sp.Symbol] = []
        self.constants: list[sp.Symbol] = []
        self.exprs: list[sp.Expr] = []
        self.blocks: list[tuple[list[sp.Symbol], list[int], list[sp.Expr]]] = []
        for k, n in enumerate(numbers):
            start = len(self.state)
            suffix = f"#{k}" if k else ""  # names as the variables', one per system
            mine = [sp.Dummy(f"{v}_{a}{suffix}") for v in n.free for a in range(n.n_modes)]
            consts = [sp.Dummy(f"{c}{suffix}") for c in n.constant_symbols]
            self.state += mine
            self.constants += consts
            m = n.n_modes
            flat: list[sp.Expr] = [sp.S.Zero] * n.size
            for a, fs in enumerate(n.entries(mine, consts)):
                where = [start + i * m + a for i in range(len(n.free))]
                self.blocks.append(([mine[k - start] for k in where], where, fs))
                for k, f in zip(where, fs, strict=True):
                    flat[k - start] = f
            self.exprs += flat

    def scalar(self) -> ScalarRhs:
        return scalar_function(self.exprs, self.state, self.constants)

    def jacobian(self) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
        r"""$\partial f_i/\partial y_j$, dense; only entries within a block can be nonzero."""
        entries: list[sp.Expr] = []
        rows: list[int] = []
        cols: list[int] = []
        for variables, where, fs in self.blocks:
            for i, f in zip(where, fs, strict=True):
                for j, v in zip(where, variables, strict=True):
                    entries.append(sp.diff(f, v))
                    rows.append(i)
                    cols.append(j)
        derivative = scalar_function(entries, self.state, self.constants)
        size = len(self.state)

        def jacobian(y: np.ndarray, c: np.ndarray) -> np.ndarray:
            values = [0.0] * len(entries)
            derivative(np.asarray(y).tolist(), np.asarray(c).tolist(), values)
            out = np.zeros((size, size))
            out[rows, cols] = values
            return out

        return jacobian


class _LazyJacobian:
    """The analytic Jacobian of :class:`_Stacked`, compiled on its first call."""

    def __init__(self, stacked: _Stacked):
        self.stacked: _Stacked | None = stacked
        self.function: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None

    def __call__(self, y: np.ndarray, c: np.ndarray) -> np.ndarray:
        if self.function is None:
            assert self.stacked is not None
            self.function, self.stacked = self.stacked.jacobian(), None
        return self.function(y, c)


# -- the moment route ----------------------------------------------------------------------


def moment_flow(dynamics: FlowMoments) -> NumericFlow:
    r"""The :class:`NumericFlow` of expected dynamics (see
    :meth:`gdln.ExpectedDynamics.numeric_flow`): the state is the live entries of ``b``
    edge by edge, the right-hand side the moment tape's flow (Eq. 10 in expectation)."""
    alive = dynamics.alive
    rows, cols = np.nonzero(alive)

    def batch_rhs(y: np.ndarray, c: np.ndarray) -> np.ndarray:
        out = np.empty_like(y)
        b = np.zeros(alive.shape)
        for k in range(y.shape[1]):
            b[alive] = y[:, k]
            out[:, k] = dynamics.flow(b)[alive]
        return out

    task = dynamics.problem.require_task()
    probabilities = np.array([float(c.probability) for c in task.contexts])

    def record(states: np.ndarray, c: np.ndarray) -> Recorded:
        T, _, n = states.shape
        bs = np.zeros((T, *alive.shape, n))
        bs[:, alive, :] = states
        context_loss = np.empty((T, len(probabilities), n))
        for t in range(T):
            for k in range(n):  # never below 0
                context_loss[t, :, k] = dynamics.context_losses(bs[t, :, :, k])
        series = {(str(v), 0): bs[:, i] for i, v in enumerate(dynamics.variables)}
        loss = np.einsum("c,tcb->tb", probabilities, context_loss)
        return Recorded(series, context_loss, loss)

    meta = {
        "source": dynamics.problem.source,
        "params": {k: str(v) for k, v in dynamics.problem.params.items()},
        "route": "moments",
        "weight_decay": float(dynamics.weight_decay),
        "time_unit": "tau",
        "modes": list(range(dynamics.n_modes)),
        "context_labels": [c.label for c in task.contexts],
    }
    return NumericFlow(
        y0=dynamics.initial[alive].astype(float),
        constants=np.zeros(0),
        batch_rhs=batch_rhs,
        labels=tuple(
            (str(dynamics.variables[int(r)]), 0, int(c)) for r, c in zip(rows, cols, strict=True)
        ),
        blocks=cols.astype(int),
        record=record,
        meta=meta,
        source=dynamics.problem.source,
        edges={
            str(v): (edge_name(e),) for v, e in zip(dynamics.variables, dynamics.edges, strict=True)
        },
    )
