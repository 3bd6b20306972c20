r"""The symmetry quotient: derive a symmetric family from one context per orbit.

A file's ``repeat:`` entries define a family (DESIGN.md, "Families and the quotient").
A cyclic shift $\sigma$ that moves every node family of one count $n$ by $+1$ (mod $n$)
is a symmetry of the problem when

1. it is an automorphism of the graph (sizes, gates and fixed values kept) and keeps
   the initial values (checked on the members it moves);
2. it maps the task to itself: every single context is fixed, and a context family
   indexed by $(v, r)$ with $|v| = n$ satisfies $\sigma(c_{v,r}) = c_{v+1,r}$. This is
   checked on the file's rules, not on the contexts: each node named by a context
   template (``x{i}``, ``h2->y{j}``) is the member $e(v, r)$ of a node family, with
   $e$ the rule evaluated with $v$, $r$ as symbols (``let: {j: pick(i, k, M, K, seed)}``
   gives $e = (v + r) \bmod n$); equivariance is the identity
   $e(v+1, r) \equiv e(v, r) + [\text{family moved}] \pmod{n}$, periodicity
   $e(v+n, r) \equiv e(v, r)$, both decided by sympy, and probabilities, gate values,
   datasets and fields may not depend on $v$.

Then $\sigma$ acts freely on $v$: each orbit has $n$ contexts, and under tying by the
orbits of $\sigma$ on edges every context of an orbit adds the same term to the lumped
loss, $\mathcal L_{\rm tied}(B) = \sum_{O}|O|\,\pi_O\,\ell_{c_O}(B)$. The terms of the
representatives $c_{0,r}$ are equal along $r$ too when a second shift $\tau$ (of some
node families) is an automorphism that keeps every edge orbit of $\sigma$ and maps
$c_{0,r}$ to $c_{0,r+1}$ (same check, with $r$ moved): then one context stands for the
whole family, with weight $\sum_c \pi_c$. Derivation proceeds on the representatives
with these weights, and the edge variables tied by orbit; a tied variable $B_O$ obeys
$\tau\dot B_O = -\frac{1}{|O|}\partial\mathcal L_{\rm tied}/\partial B_O$ (Eqs. 44-46 of
Saxe et al. 2022).

With ``symbolic`` parameter names, orbit sizes, counts and probabilities are the
expressions the file writes (``repeat: {i: M}`` gives $|O| = M$), which is exact because
every check above is an identity in the symbols; the named parameters may enter only
repeat counts, context rules and probabilities (checked on the file).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import networkx as nx
import sympy as sp

from .._bounded._expressions import ExpressionError, as_sympy, evaluate
from .._edge import EDGE_SEPARATOR, Edge
from ..task._families import ContextFamily, names_in
from ..task._problem import IndexFamily, Problem
from ..task._task import Context, Task
from ._lumping import edge_colours
from ._system import QUOTIENT_ROUTE

__all__ = ["Quotient", "find_quotient"]

MAX_REPRESENTATIVES = 20_000
"""Most representative contexts the quotient derives from."""


class NoSymmetry(Exception):
    """The reason the quotient route does not apply (shown in the output)."""


@dataclass(frozen=True)
class Shift:
    """A cyclic shift of node families of one count (see the module docstring)."""

    count: int
    written: Any
    families: tuple[IndexFamily, ...]
    nodes: Mapping[Hashable, Hashable]

    def node(self, v: Hashable) -> Hashable:
        return self.nodes.get(v, v)

    def edge(self, e: Edge) -> Edge:
        return (self.node(e[0]), self.node(e[1]))

    def item(self, x: Hashable) -> Hashable:
        return self.edge(x) if isinstance(x, tuple) else self.node(x)  # type: ignore[arg-type]

    def representative(self) -> dict[Hashable, Hashable]:
        """Moved node -> the first member of its family (its orbit's representative)."""
        return {m: f.members[0] for f in self.families for m in f.members}

    def name(self) -> str:
        return " and ".join(f.templates[0] for f in self.families)


@dataclass(frozen=True)
class Quotient:
    """The representatives of a symmetric task and the orbits of its edges.

    Attributes
    ----------
    problem
        The problem with its task replaced by the representatives, each with
        probability its orbit's total (its multiplicity times $\\pi$).
    orbit
        Edge -> the index of its orbit under the shift.
    members
        Per orbit, its edges.
    sizes
        Per orbit, its size (an int, or an expression in the symbolic parameters).
    colours
        The colour (in the whole graph, see ``_lumping.edge_colours``) of every edge of
        ``problem.graph``.
    route
        One line: what was found (printed with the derivation).
    """

    problem: Problem
    orbit: Mapping[Edge, int]
    members: tuple[tuple[Edge, ...], ...]
    sizes: tuple[Any, ...]
    colours: Mapping[Edge, int]
    route: str


def find_quotient(
    problem: Problem, init: Mapping[Edge, Any], *, symbolic: Sequence[str] = ()
) -> Quotient:
    """The symmetry quotient of ``problem``; raises :class:`NoSymmetry` with the reason.

    Parameters
    ----------
    problem
        A loaded graph file with a task.
    init
        Every edge's initial value (they must be constant on orbits).
    symbolic
        Parameter names kept as symbols in sizes, counts and probabilities.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eqs. (44)-(48) and App. C: the routing family
    lumped by hand; DESIGN.md, "Families and the quotient".
    """
    task = problem.require_task()
    if task.random_gates:
        raise NoSymmetry("the task has random gates")
    families = getattr(task.contexts, "families", ())
    if not families:
        raise NoSymmetry("the task has no repeat: family of contexts")
    symbols = _symbols(problem, symbolic)
    graph = problem.graph
    reasons = []
    for shift in _shifts(problem.families, graph, init):
        orbit, members = _edge_orbits(graph, shift)
        try:
            reps = _representatives(problem, shift, orbit, symbols, init)
        except NoSymmetry as err:
            reasons.append(f"shift of {shift.name()}: {err}")
            continue
        n_written = _written(shift.written, problem, symbols) if symbols else shift.count
        sizes = tuple(n_written if len(m) > 1 else 1 for m in members)
        contexts = tuple(replace(c, probability=w) for c, w in reps)
        pruned = _pruned(graph, contexts)
        rep_task = Task(contexts=contexts, datasets=task.datasets)
        colours = edge_colours(graph, representative=shift.representative(), edges=pruned.edges)
        count = f"{len(task.contexts)}"
        if symbols:
            at = ", ".join(f"{k}={problem.params[k]}" for k in symbols)
            count = f"{_symbolic_count(problem, symbols)} ({count} at {at})"
        route = (
            f"{QUOTIENT_ROUTE}: {count} contexts in {len(reps)} "
            f"representative{'s' if len(reps) != 1 else ''} under the cyclic shift of "
            f"{shift.name()} (mod {shift.written})"
            + (f"; {', '.join(symbols)} kept as symbols" if symbols else "")
        )
        return Quotient(
            replace(problem, graph=pruned, task=rep_task), orbit, members, sizes, colours, route
        )
    if not reasons:
        raise NoSymmetry("no node families of one count whose shift is a graph automorphism")
    raise NoSymmetry("; ".join(reasons))


def _symbolic_count(problem: Problem, symbols: Mapping[str, sp.Symbol]) -> Any:
    """The number of contexts as an expression in the symbolic parameters (``K*M``)."""
    total: Any = sp.Integer(0)
    for part in problem.require_task().contexts.parts:  # type: ignore[attr-defined]
        term: Any = 1
        for written in part.written if isinstance(part, ContextFamily) else ():
            term = term * _written(written, problem, symbols)
        total = total + term
    return total


def _pruned(graph: nx.DiGraph, contexts: Sequence[Context]) -> nx.DiGraph:
    """The part of the graph the representatives use: exact for their loss.

    Gated edges closed in every representative go; then, until nothing changes, nodes
    that lost all their out-edges (or in-edges) but had some, since no path of the
    representatives reaches an output (or starts at an input) through them.
    """
    opened = {x for c in contexts for x, g in c.gates.items() if g != 0}
    keep = [(u, v) for u, v, g in graph.edges(data="gated") if not g or (u, v) in opened]
    sub = graph.edge_subgraph(keep).copy()
    bound = {v for c in contexts for v in (*c.inputs, *c.targets)}
    changed = True
    while changed:
        changed = False
        for v in list(sub.nodes):
            lost_out = not sub._succ[v] and graph._succ[v]
            lost_in = not sub._pred[v] and graph._pred[v]
            if v not in bound and (lost_out or lost_in):
                sub.remove_node(v)
                changed = True
    for v in bound - set(sub.nodes):
        sub.add_node(v, **graph.nodes[v])
    return sub


# ---------------------------------------------------------------------------------------
# Shifts of the graph


def _shifts(
    families: Sequence[IndexFamily], graph: nx.DiGraph, init: Mapping[Edge, Any]
) -> list[Shift]:
    """Every shift of all one-index node families of one count that is an automorphism."""
    by_count: dict[int, list[IndexFamily]] = {}
    for f in _node_families(families):
        if f.counts[0] >= 2:
            by_count.setdefault(f.counts[0], []).append(f)
    out = []
    for count, fams in by_count.items():
        shift = _shift(count, fams)
        if _automorphism(graph, shift, init):
            out.append(shift)
    return out


def _shift(count: int, families: Sequence[IndexFamily]) -> Shift:
    nodes: dict[Hashable, Hashable] = {}
    for f in families:
        m = f.members
        nodes.update((m[a], m[(a + 1) % count]) for a in range(count))
    return Shift(count, families[0].written[0], tuple(families), nodes)


def _automorphism(graph: nx.DiGraph, shift: Shift, init: Mapping[Edge, Any]) -> bool:
    """Whether the shift keeps sizes, gates, edges, fixed values and initial values."""
    nodes, succ, pred = graph._node, graph._succ, graph._pred
    for v, w in shift.nodes.items():
        a, b = nodes[v], nodes[w]
        if a.get("size") != b.get("size") or bool(a.get("gated")) != bool(b.get("gated")):
            return False
        if len(succ[v]) != len(succ[w]) or len(pred[v]) != len(pred[w]):
            return False
    for e in _touching(graph, shift.nodes):
        image = shift.edge(e)
        b = succ[image[0]].get(image[1])
        if b is None:
            return False
        a = succ[e[0]][e[1]]
        if bool(a.get("gated")) != bool(b.get("gated")) or a.get("fixed") != b.get("fixed"):
            return False
        if init.get(e) != init.get(image):
            return False
    return True


def _touching(graph: nx.DiGraph, nodes: Iterable[Hashable]) -> Iterator[Edge]:
    """The edges into and out of ``nodes`` (an edge between two of them comes twice)."""
    for v in nodes:
        yield from ((v, x) for x in graph._succ[v])
        yield from ((u, v) for u in graph._pred[v])


def _edge_orbits(
    graph: nx.DiGraph, shift: Shift
) -> tuple[dict[Edge, int], tuple[tuple[Edge, ...], ...]]:
    """Edge -> orbit index, and each orbit's edges (cycles of the shift)."""
    orbit: dict[Edge, int] = {}
    members: list[tuple[Edge, ...]] = []
    for e in graph.edges:
        if e in orbit:
            continue
        cycle = [e]
        image = shift.edge(e)
        while image != e:
            cycle.append(image)
            image = shift.edge(image)
        for x in cycle:
            orbit[x] = len(members)
        members.append(tuple(cycle))
    return orbit, tuple(members)


# ---------------------------------------------------------------------------------------
# The task: equivariance on the rules, representatives


def _representatives(
    problem: Problem,
    shift: Shift,
    orbit: Mapping[Edge, int],
    symbols: Mapping[str, sp.Symbol],
    init: Mapping[Edge, Any],
) -> list[tuple[Context, Any]]:
    """Representative contexts with their weights (the probability of what they stand for)."""
    graph = problem.graph
    out: list[tuple[Context, Any]] = []
    for part in problem.require_task().contexts.parts:  # type: ignore[attr-defined]
        if isinstance(part, ContextFamily):
            out.extend(
                _family_representatives(part, shift, orbit, graph, problem.families, symbols, init)
            )
        else:
            if {shift.item(x) for x in part.gates} != set(part.gates) or any(
                shift.node(v) != v for v in (*part.inputs, *part.targets)
            ):
                raise NoSymmetry(f"context {part.label!r} is not fixed by the shift")
            out.append((part, _written(part.probability, problem, symbols)))
    if len(out) > MAX_REPRESENTATIVES:
        raise NoSymmetry(f"{len(out)} representatives, more than {MAX_REPRESENTATIVES}")
    return out


def _family_representatives(
    family: ContextFamily,
    shift: Shift,
    orbit: Mapping[Edge, int],
    graph: nx.DiGraph,
    families: Sequence[IndexFamily],
    symbols: Mapping[str, sp.Symbol],
    init: Mapping[Edge, Any],
) -> list[tuple[Context, Any]]:
    rules = _Rules(family, families, symbols)
    moving = [
        k
        for k, v in enumerate(family.variables)
        if family.counts[k] == shift.count and rules.equivariant(shift, v, period=True)
    ]
    if not moving:
        raise NoSymmetry(f"{family.scope.key}: no index moves with the shift")
    k_v = moving[0]
    rest = [k for k in range(len(family.variables)) if k != k_v]
    probability = rules.probability
    if rules.index[family.variables[k_v]] in probability.free_symbols:
        raise NoSymmetry(f"{family.scope.key}.probability depends on the moving index")
    indices = set(rules.index.values()) | set(rules.lets)
    constant = not (probability.free_symbols & indices)
    if constant and all(
        family.counts[k] == 1 or _residual_shift(family, rules, k, k_v, orbit, graph, init)
        for k in rest
    ):  # every representative adds the same term: one stands for the family
        values = tuple(0 for _ in family.variables)
        return [(family.context(values), _count(family, rules) * probability)]
    if rules.symbols and rest:
        names = ", ".join(str(family.written[k]) for k in rest)
        raise NoSymmetry(
            f"{family.scope.key}: the representatives differ along {names}; their sum is "
            "not derived symbolically"
        )
    ranges = [range(1) if k == k_v else range(family.counts[k]) for k in range(len(family.counts))]
    if math.prod(len(r) for r in ranges) > MAX_REPRESENTATIVES:
        raise NoSymmetry(f"{family.scope.key}: too many representatives")
    n = rules.count_symbol(k_v)
    reps = []
    for values in itertools.product(*ranges):
        c = family.context(values)
        reps.append((c, n * c.probability))
    return reps


def _count(family: ContextFamily, rules: _Rules) -> Any:
    out: Any = 1
    for k in range(len(family.counts)):
        out = out * rules.count_symbol(k)
    return out


def _residual_shift(
    family: ContextFamily,
    rules: _Rules,
    k: int,
    k_v: int,
    orbit: Mapping[Edge, int],
    graph: nx.DiGraph,
    init: Mapping[Edge, Any],
) -> bool:
    """Whether some shift maps the representative at ``r`` to the one at ``r + 1``."""
    fams = [f for f in rules.named_families() if f.counts[0] >= 2]
    var = family.variables[k]
    fixed = {rules.index[family.variables[k_v]]: 0}
    for size in range(1, len(fams) + 1):
        for subset in itertools.combinations(fams, size):
            counts = {f.counts[0] for f in subset}
            if len(counts) != 1:
                continue
            tau = _shift(counts.pop(), subset)
            if not rules.equivariant(tau, var, period=False, at=fixed):
                continue
            if not _automorphism(graph, tau, init):
                continue
            if all(orbit[tau.edge(e)] == orbit[e] for e in _touching(graph, tau.nodes)):
                return True
    return False


class _Rules:
    """A context family's templates and rules, evaluated with its indices as symbols."""

    def __init__(
        self,
        family: ContextFamily,
        families: Sequence[IndexFamily],
        symbols: Mapping[str, Any],
    ):
        self.family = family
        names = dict(family.scope.names)
        names.update(symbols)
        self.symbols = symbols
        self.index = {v: sp.Symbol(v, integer=True, nonnegative=True) for v in family.variables}
        names.update(self.index)
        try:
            for var, expression in family.lets:
                names[var] = evaluate(expression, names)
            self.probability = as_sympy(evaluate(family.entry["probability"], names))
        except ExpressionError as err:
            raise NoSymmetry(f"{family.scope.key}: {err}") from err
        self.names = names
        self.lets = {names[var] for var, _ in family.lets if isinstance(names[var], sp.Symbol)}
        self.node_families = _node_families(families)
        self._check_literals()

    def count_symbol(self, k: int) -> Any:
        """The count of the ``k``-th index (an expression in the symbolic parameters)."""
        return self.written(self.family.written[k], self.family.counts[k])

    def written(self, written: Any, count: int) -> Any:
        """A count as written, when it names a symbolic parameter; else its value."""
        if self.symbols and names_in(written) & set(self.symbols):
            return as_sympy(evaluate(written, self.names))
        return count

    def named_families(self) -> list[IndexFamily]:
        """The node families the family's templates name (the ones worth shifting)."""
        named = []
        for template, _ in self.items():
            for end in template.split(EDGE_SEPARATOR):
                prefix, _, tail = end.partition("{")
                family = self._family_of(prefix, tail.partition("}")[2]) if tail else None
                if family is not None and family not in named:
                    named.append(family)
        return named

    def _check_literals(self) -> None:
        entry = self.family.entry
        for key in ("dataset",):
            if "{" in str(entry.get(key, "")):
                raise NoSymmetry(f"{self.family.scope.key}.{key} depends on the indices")
        for part in ("inputs", "targets"):
            for field_name in (entry.get(part) or {}).values():
                if "{" in str(field_name):
                    raise NoSymmetry(f"{self.family.scope.key}.{part} fields depend on the indices")

    def items(self) -> list[tuple[str, Any]]:
        """Every template naming a node or edge, with its gate value expression."""
        entry = self.family.entry
        out: list[tuple[str, Any]] = [(str(t), 1) for t in entry.get("active", []) or []]
        out += [(str(t), v) for t, v in (entry.get("gates") or {}).items()]
        out += [(str(t), None) for part in ("inputs", "targets") for t in entry.get(part) or {}]
        return out

    def equivariant(
        self, shift: Shift, var: str, *, period: bool, at: Mapping[sp.Symbol, Any] | None = None
    ) -> bool:
        """Whether moving ``var`` by one moves every named node as ``shift`` does."""
        v = self.index[var]
        try:
            for template, value in self.items():
                if value is not None and not isinstance(value, (int, float)):
                    expr = as_sympy(evaluate(value, self.names))
                    if sp.simplify(expr.subs(v, v + 1) - expr) != 0:
                        return False
                ends = template.split(EDGE_SEPARATOR) if EDGE_SEPARATOR in template else [template]
                for end in ends:
                    if not self._node_moves(end, shift, v, period, at or {}):
                        return False
        except (ExpressionError, NoSymmetry, TypeError):
            return False
        return True

    def _node_moves(
        self, template: str, shift: Shift, v: sp.Symbol, period: bool, at: Mapping[Any, Any]
    ) -> bool:
        if "{" not in template:
            return shift.node(template) == template
        prefix, _, tail = template.partition("{")
        inner, _, suffix = tail.partition("}")
        if "{" in suffix:
            return False
        family = self._family_of(prefix, suffix)
        if family is None:
            return False
        count = self.written(family.written[0], family.counts[0])
        expr = as_sympy(evaluate(inner, self.names)).subs(at)
        if not self._in_range(expr, count):
            return False
        step = 1 if family in shift.families else 0
        if sp.Mod(expr.subs(v, v + 1) - expr - step, count) != 0:
            return False
        n = self.written(shift.written, shift.count)
        return not period or sp.Mod(expr.subs(v, v + n) - expr, count) == 0

    def _family_of(self, prefix: str, suffix: str) -> IndexFamily | None:
        for f in self.node_families:
            t = f.templates[0]
            if t == f"{prefix}{{{f.variables[0]}}}{suffix}":
                return f
        return None

    def _in_range(self, expr: sp.Expr, count: Any) -> bool:
        """Whether a member index provably lies in ``range(count)``."""
        if isinstance(expr, sp.Mod) and sp.simplify(expr.args[1] - count) == 0:
            return True
        if expr.is_number:
            return bool(expr.is_integer and expr >= 0 and (count - expr - 1).is_nonnegative)
        for k, var in enumerate(self.family.variables):
            if expr == self.index[var]:
                mine = self.count_symbol(k)
                if sp.simplify(mine - count) == 0:
                    return True
                if isinstance(mine, int) and isinstance(count, int) and mine <= count:
                    return True
        return False


def _node_families(families: Sequence[IndexFamily]) -> list[IndexFamily]:
    """The one-index node families (the ones a shift can move)."""
    return [f for f in families if f.kind == "node" and len(f.variables) == 1]


# ---------------------------------------------------------------------------------------
# Symbolic parameters


def _symbols(problem: Problem, symbolic: Sequence[str]) -> dict[str, sp.Symbol]:
    """The named parameters as positive integer symbols (each must be a parameter)."""
    out = {}
    for name in symbolic:
        if name not in problem.params:
            raise NoSymmetry(f"--symbolic {name}: not a parameter of the file")
        if not isinstance(problem.params[name], int):
            raise NoSymmetry(f"--symbolic {name}: only integer parameters can be symbols")
        out[name] = sp.Symbol(name, integer=True, positive=True)
    document = getattr(problem, "document", None) or {}
    for where, value in _uses(document):
        found = names_in(value) & set(out) if isinstance(value, str) else set()
        if found:
            raise NoSymmetry(
                f"--symbolic {sorted(found)[0]}: {where} uses it; a symbolic parameter may "
                "enter only repeat counts, context rules and probabilities"
            )
    return out


def _uses(document: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The values in which a symbolic parameter may not appear."""
    out: list[tuple[str, Any]] = []
    for index, node in enumerate(document.get("nodes") or []):
        if isinstance(node, Mapping):
            out.append((f"nodes[{index}].size", node.get("size")))
    for index, edge in enumerate(document.get("edges") or []):
        if isinstance(edge, Mapping):
            out.append((f"edges[{index}].fixed", edge.get("fixed")))
    out += [(f"derived.{k}", v) for k, v in (document.get("derived") or {}).items()]

    def walk(key: str, value: Any) -> None:
        if isinstance(value, Mapping):
            for k, v in value.items():
                walk(f"{key}.{k}", v)
        elif isinstance(value, list):
            for k, v in enumerate(value):
                walk(f"{key}[{k}]", v)
        else:
            out.append((key, value))

    walk("datasets", document.get("datasets") or {})
    return out


def _written(value: Any, problem: Problem, symbols: Mapping[str, sp.Symbol]) -> Any:
    """A count or probability as the file writes it, with the symbolic parameters."""
    if not symbols or not isinstance(value, str):
        return value
    names = dict(problem.params)
    names.update(symbols)
    return as_sympy(evaluate(value, names))
