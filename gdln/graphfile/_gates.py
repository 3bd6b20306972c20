r"""The gates of a task: which gated items are on in a context or example, and random gates.

A context or example gives its gates as ``active:`` (a list of the gated nodes and
``u->v`` edges that are on, value 1) or ``gates:`` (a complete mapping of every gated item
to a value). ``random_gates:`` lists items whose gate is further multiplied by an
independent $\delta\sim\mathrm{Bernoulli}(p)$ (stochastic depth).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import sympy as sp

from .._edge import EDGE_SEPARATOR, edge_name
from ._document import Scope, entry_of, expand, mapping, sequence

__all__ = ["Gating", "in_unit_interval", "read_random_gates"]

RANDOM_GATE_KEYS = {"item", "p", "repeat", "let"}


@dataclass(frozen=True)
class Gating:
    """The gated items of a graph, by the names a file gives them, and the random ones.

    Attributes
    ----------
    graph
        The architecture.
    items
        Name in a file (``"h"``, ``"x->h"``) -> gated node id or edge ``(u, v)``.
    random
        Gated item -> survival probability $p$ of its random gate.
    """

    graph: nx.DiGraph
    items: Mapping[str, Hashable]
    random: Mapping[Hashable, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, graph: nx.DiGraph) -> Gating:
        """The gated nodes and edges of ``graph``, none of them random."""
        items: dict[str, Hashable] = {str(v): v for v, g in graph.nodes(data="gated") if g}
        items.update({edge_name((u, v)): (u, v) for u, v, g in graph.edges(data="gated") if g})
        return cls(graph, items)

    def item(self, name: str, scope: Scope) -> Hashable:
        """The gated item a name refers to; an unknown or ungated one is an error."""
        if name in self.items:
            return self.items[name]
        u, sep, v = name.partition(EDGE_SEPARATOR)
        exists = self.graph.has_edge(u, v) if sep else name in self.graph
        what = "edge" if sep else "node"
        reason = "is not gated (mark it 'gated: true')" if exists else "does not exist"
        raise scope.fail(f"{what} {name!r} {reason}")

    def values(self, entry: Mapping[str, Any], scope: Scope) -> dict[Hashable, Any]:
        """The gate values an entry's ``active:`` or ``gates:`` gives (0 is left out).

        ``scope`` is the entry's, with its ``repeat``/``let`` names bound.
        """
        if "active" in entry and "gates" in entry:
            raise scope.fail(
                "give either 'active' (a list) or 'gates' (a complete mapping), not both"
            )
        if "active" in entry:
            here = scope.at("active")
            names = [here.render(ref, integer_ok=True) for ref in sequence(entry["active"], here)]
            return {self.item(name, here): 1 for name in names}
        return self._mapped(mapping(entry.get("gates", {}), scope.at("gates")), scope.at("gates"))

    def _mapped(self, given: Mapping[Any, Any], scope: Scope) -> dict[Hashable, Any]:
        values: dict[Hashable, Any] = {}
        named = set()
        for ref, raw in given.items():
            name = scope.render(ref, integer_ok=True)
            item = self.item(name, scope)
            value = scope.at(name).number(raw)
            if isinstance(value, str):
                raise scope.at(name).fail(f"expected a number, got {value!r}")
            if value != 0 or item in self.random:
                values[item] = value
            named.add(name)
        missing = [
            n for n, item in self.items.items() if n not in named and item not in self.random
        ]
        if missing:
            raise scope.fail(
                f"missing gate value for {missing[0]!r} (gated items need a value in every "
                f"context or example; or list the ones that are on with 'active:')"
            )
        return values


def in_unit_interval(value: Any) -> bool:
    """Whether a number (not a symbolic expression) lies in $[0, 1]$."""
    try:
        return 0 <= float(value) <= 1
    except TypeError:  # a complex number
        return False


def read_random_gates(raw: Any, gating: Gating, scope: Scope) -> dict[Hashable, Any]:
    """``task.random_gates``: gated items with an independent Bernoulli($p$) gate each."""
    out: dict[Hashable, Any] = {}
    for index, entry in enumerate(sequence(raw, scope)):
        here = scope.at(index)
        entry = entry_of(entry, here, allowed=RANDOM_GATE_KEYS, required=("item", "p"))
        for local in expand(entry, here):
            name = local.at("item").render(entry["item"], integer_ok=True)
            item = gating.item(name, local.at("item"))
            p = _survival(entry["p"], name, local.at("p"))
            if item in out:
                raise local.at("item").fail(f"{name!r} is listed twice")
            out[item] = p
    return out


def _survival(raw: Any, name: str, scope: Scope) -> Any:
    p = scope.number(raw)
    if not isinstance(p, (int, float, sp.Expr)):
        raise scope.fail(f"p of {name!r}: expected a number, got {p!r}")
    symbolic = isinstance(p, sp.Basic) and bool(p.free_symbols)
    if not symbolic and not in_unit_interval(p):
        raise scope.fail(f"survival probability p = {p} of {name!r} is outside [0, 1]")
    return p
