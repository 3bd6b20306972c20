r"""Families of contexts: ``repeat:`` entries kept as what they are, an index set and a rule.

A ``nodes:`` or ``edges:`` entry with ``repeat:`` is a family of nodes or edges; a
``task.contexts`` entry with ``repeat:`` is a family of contexts. The graph-file reader
records each family (:class:`~gdln.task._problem.IndexFamily` in
``graph.graph["families"]``, :class:`ContextFamily` in the task's :class:`LazyContexts`,
the sequence a task's contexts are) so that the symmetry quotient of
:mod:`gdln.reduction._quotient` can read the index sets and the rules instead of the
expanded members (DESIGN.md, "Families and the quotient"). A context family of more than
:data:`EAGER_CONTEXTS` bindings whose probability does not depend on its indices is not
expanded when the file is read: its contexts are made on first use (and counted against
the ``entries`` limit then).
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, overload

from .._bounded._expressions import ExpressionError, bounded_parse
from .._bounded._limits import counting, current_limits
from .._errors import GraphSpecError
from ._task import Context

__all__ = [
    "EAGER_CONTEXTS",
    "ContextFamily",
    "LazyContexts",
    "ReaderScope",
    "names_in",
    "unique_labels",
]

EAGER_CONTEXTS = 10_000
"""Context families with more bindings than this are expanded on first use only."""


class ReaderScope(Protocol):
    """Where the graph-file reader is in a file: the key path and the names bound there
    (the reader's own scope is one); a family's contexts are made in it."""

    @property
    def key(self) -> str:
        """The key path, e.g. ``task.contexts[2]``."""
        ...

    @property
    def names(self) -> Mapping[str, Any]:
        """Parameter, symbol and ``repeat``/``let`` values that expressions may use."""
        ...

    def at(self, *parts: str | int) -> ReaderScope:
        """The scope one or more keys further in."""
        ...

    def bind(self, names: Mapping[str, Any]) -> ReaderScope:
        """The same place with other names in scope."""
        ...

    def evaluate(self, expression: Any) -> Any:
        """The value of an expression or a number, in the names in scope."""
        ...


@dataclass(frozen=True, eq=False)
class ContextFamily:
    """The contexts of one ``task.contexts`` entry with ``repeat:`` (every range a count).

    Attributes
    ----------
    entry
        The entry as written.
    scope
        Its scope, with the parameters bound.
    variables, counts, written
        As in :class:`IndexFamily`.
    lets
        The ``let:`` names and expressions, evaluated in order per binding.
    make
        ``make(scope, index)``: the context of a binding's scope (the reader's own).
    """

    entry: Mapping[str, Any]
    scope: ReaderScope
    variables: tuple[str, ...]
    counts: tuple[int, ...]
    written: tuple[Any, ...]
    lets: tuple[tuple[str, Any], ...]
    make: Callable[[Any, int], Context] = field(repr=False)  # the reader's, on its own scopes

    def __len__(self) -> int:
        return math.prod(self.counts)

    def values(self, n: int) -> tuple[int, ...]:
        """The binding of the ``n``-th context (the last variable runs fastest)."""
        out = []
        for count in reversed(self.counts):
            n, r = divmod(n, count)
            out.append(r)
        return tuple(reversed(out))

    def local(self, values: Sequence[Any]) -> ReaderScope:
        """The scope of one binding: its ``repeat:`` values and ``let:`` names."""
        names = dict(self.scope.names)
        names.update(zip(self.variables, values, strict=True))
        for var, expression in self.lets:
            names[var] = self.scope.at("let", var).bind(names).evaluate(expression)
        return self.scope.bind(names)

    def context(self, values: Sequence[int], index: int = 0) -> Context:
        """The context of one binding (``index`` names it in default labels)."""
        return self.make(self.local(values), index)


class LazyContexts(Sequence[Context]):
    """A task's contexts: single contexts and families, expanded on first use.

    ``parts`` keeps what the file wrote (a :class:`Context` or a
    :class:`ContextFamily`); indexing makes one context, iteration makes them all once
    (refused past the ``entries`` limit, with the way around it).
    """

    def __init__(self, parts: Sequence[Context | ContextFamily], *, source: str = ""):
        self.parts = tuple(parts)
        self.source = source
        self._sizes = [len(p) if isinstance(p, ContextFamily) else 1 for p in self.parts]
        self._all: tuple[Context, ...] | None = None

    @property
    def families(self) -> tuple[ContextFamily, ...]:
        """The context families, in file order."""
        return tuple(p for p in self.parts if isinstance(p, ContextFamily))

    @property
    def expanded(self) -> bool:
        """Whether every context has been made."""
        return self._all is not None

    def __len__(self) -> int:
        return sum(self._sizes)

    @overload
    def __getitem__(self, n: int) -> Context: ...
    @overload
    def __getitem__(self, n: slice) -> Sequence[Context]: ...
    def __getitem__(self, n: int | slice) -> Context | Sequence[Context]:
        if isinstance(n, slice) or self._all is not None:
            return self.all()[n]
        if n < 0:
            n += len(self)
        if not 0 <= n < len(self):
            raise IndexError(n)
        start = 0
        for part, size in zip(self.parts, self._sizes, strict=True):
            if n < start + size:
                if isinstance(part, ContextFamily):
                    return part.context(part.values(n - start), n)
                return part
            start += size
        raise IndexError(n)  # pragma: no cover

    def __iter__(self) -> Iterator[Context]:
        return iter(self.all())

    def made(self, contexts: tuple[Context, ...]) -> None:
        """Record every context, made (and checked) by the reader."""
        self._all = unique_labels(contexts)

    def all(self) -> tuple[Context, ...]:
        """Every context, made once (refused past the ``entries`` limit)."""
        if self._all is None:
            limits = current_limits()
            if len(self) > limits.entries:
                raise GraphSpecError(
                    limits.exceeded("entries", f"{len(self)} contexts")
                    + "; `--lump symmetry` derives a symmetric family from one context "
                    "per orbit without making them all",
                    source=self.source or None,
                )
            out: list[Context] = []
            with counting():  # the expression_work limit, as when the file was read
                for part in self.parts:
                    if isinstance(part, ContextFamily):
                        for values_n in range(len(part)):
                            out.append(part.context(part.values(values_n), len(out)))
                    else:
                        out.append(part)
            self._all = unique_labels(out)
        return self._all

    def __repr__(self) -> str:
        return f"LazyContexts(<{len(self)} contexts, {len(self.families)} families>)"


def unique_labels(contexts: Sequence[Context]) -> tuple[Context, ...]:
    """The contexts, a label that is already taken followed by ``#`` and the context's index.

    Labels name the per-context losses (``loss/<label>``); default labels such as
    ``x->y`` repeat whenever two contexts bind the same nodes.
    """
    taken = {c.label for c in contexts}
    if len(taken) == len(contexts):
        return tuple(contexts)
    seen: set[str] = set()
    out = []
    for index, c in enumerate(contexts):
        if c.label in seen:
            label = f"{c.label}#{index}"
            while label in taken:
                label += "'"
            c = replace(c, label=label)
            taken.add(label)
        seen.add(c.label)
        out.append(c)
    return tuple(out)


def names_in(expression: Any) -> set[str]:
    """The names an expression uses (none for a number)."""
    if not isinstance(expression, str):
        return set()
    try:
        tree, _ = bounded_parse(expression)
    except (ExpressionError, SyntaxError, RecursionError):
        return {"?"}  # not an expression: the reader's own checks will say why
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
