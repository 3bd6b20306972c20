r"""The ``task:`` of a graph or task file: a mixture of contexts (Sec. 2 of Saxe et al. 2022).

A task is given in one of three forms. ``contexts:`` lists contexts, each with a
probability $\pi_c$, its gates and a dataset whose fields are bound to input and output
nodes. ``examples:`` lists explicit examples, and ``npz:`` names a file of them; examples
that share a gate pattern become one context with its own dataset, of probability the
share of their weights. The probabilities must sum to 1.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

import networkx as nx
import numpy as np
import sympy as sp

from .._bounded._expressions import as_sympy
from .._bounded._limits import count_entries, count_values
from ..task._families import EAGER_CONTEXTS, ContextFamily, LazyContexts, names_in
from ..task._task import Context, Dataset, Task
from ._datasets import check_moment_work, check_weights, load_npz, read_datasets, read_matrix
from ._document import (
    Scope,
    _repeat_ranges,
    counted_repeat,
    entry_of,
    expand,
    mapping,
    name,
    printable_name,
    sequence,
    text,
)
from ._gates import Gating, in_unit_interval, read_random_gates

__all__ = ["read_task"]

FORMS = ("contexts", "examples", "npz")
CONTEXT_KEYS = {"repeat", "let", "probability", "label", "active", "gates", "dataset"}
CONTEXT_KEYS |= {"inputs", "targets"}
EXAMPLE_KEYS = {"repeat", "let", "inputs", "targets", "active", "gates", "weight"}
PARTS = (("inputs", "an input"), ("targets", "an output"))


@dataclass(frozen=True)
class _Example:
    """One example as read: values at input and output nodes, gates and weight."""

    key: str
    inputs: Mapping[str, Any]
    targets: Mapping[str, Any]
    gates: Mapping[Hashable, Any]
    weight: Any


def read_task(doc: Mapping[str, Any], graph: nx.DiGraph, scope: Scope) -> Task:
    """The task of a document (its ``datasets:`` and ``task:``) on ``graph``.

    ``scope`` is a task scope (:class:`~gdln.TaskSpecError`) with the parameters bound.
    """
    datasets = read_datasets(doc, scope)
    here = scope.at("task")
    spec = mapping(doc.get("task"), here)
    forms = [k for k in FORMS if k in spec]
    if len(forms) != 1:
        raise here.fail("give exactly one of 'contexts', 'examples' or 'npz'")
    gating = Gating.of(graph)
    random = read_random_gates(spec.get("random_gates"), gating, here.at("random_gates"))
    gating = replace(gating, random=random)
    contexts: Sequence[Context]
    if forms[0] == "contexts":
        contexts, keys = _read_contexts(spec["contexts"], datasets, gating, here.at("contexts"))
    else:
        if forms[0] == "examples":
            rows = _read_examples(spec["examples"], gating, here.at("examples"))
            grouped, extra, keys = _group_examples(rows, graph, here)
        else:
            grouped, extra, keys = _read_npz_task(spec["npz"], gating, here.at("npz"))
        contexts = tuple(grouped)
        datasets.update(extra)
    task = Task(contexts=contexts, datasets=datasets, random_gates=random)
    _check_probabilities(task, keys, here)
    return task


def _ends(graph: nx.DiGraph) -> dict[str, list[Hashable]]:
    """The input nodes (no edges in) and output nodes (no edges out), in graph order."""
    return {
        "inputs": [v for v in graph.nodes if graph.in_degree(v) == 0],
        "targets": [v for v in graph.nodes if graph.out_degree(v) == 0],
    }


def _read_contexts(
    raw: Any, datasets: Mapping[str, Dataset], gating: Gating, scope: Scope
) -> tuple[LazyContexts, list[str]]:
    """``task.contexts`` and where each was written; each ``repeat:`` entry kept as a :class:`ContextFamily`.

    Families are expanded here (every context checked) unless one of them is larger than
    :data:`EAGER_CONTEXTS` and its probability does not depend on its indices: then each
    family is checked at sample bindings and its contexts are made on first use.
    """
    ends = _ends(gating.graph)
    parts: list[Context | ContextFamily] = []
    keys: list[str] = []
    for index, entry in enumerate(sequence(raw, scope)):
        here = scope.at(index)
        entry = entry_of(entry, here, allowed=CONTEXT_KEYS, required=("probability", "dataset"))

        make = _ContextMaker(entry, datasets, gating, ends)
        family = _family(entry, here, make)
        if family is not None:
            parts.append(family)
            keys.append(here.key)
            continue
        for local in expand(entry, here):
            parts.append(make(local, len(parts)))
            keys.append(_keyed(local, entry))
    contexts = LazyContexts(parts, source=scope.source)
    if any(isinstance(p, ContextFamily) and _lazy(p) for p in parts):
        for family in contexts.families:
            for values in _samples(family):
                family.context(values)
        return contexts, keys
    made: list[Context] = []
    made_keys: list[str] = []
    for part, key in zip(parts, keys, strict=True):
        if not isinstance(part, ContextFamily):
            made.append(part)
            made_keys.append(key)
            continue
        family_scope = cast(Scope, part.scope)  # the reader's own, as _family made it
        for local in expand(part.entry, family_scope):  # counts the entries against the limit
            made.append(part.make(local, len(made)))
            made_keys.append(_keyed(local, part.entry))
    if not made:
        raise scope.fail("no contexts")
    contexts.made(tuple(made))
    return contexts, made_keys


@dataclass(frozen=True)
class _ContextMaker:
    """The context of one binding of a ``task.contexts`` entry (picklable, unlike a closure)."""

    entry: Mapping[str, Any]
    datasets: Mapping[str, Dataset]
    gating: Gating
    ends: Mapping[str, list[Hashable]]

    def __call__(self, local: Scope, n: int) -> Context:
        return _read_context(self.entry, local, self.datasets, self.gating, self.ends, n)


def _keyed(local: Scope, entry: Mapping[str, Any]) -> str:
    """Where a binding was written: ``task.contexts[0] (i=1, k=2)``."""
    repeated = ", ".join(f"{var}={local.names[str(var)]}" for var in entry.get("repeat", {}))
    return f"{local.key} ({repeated})" if repeated else local.key


def _family(
    entry: Mapping[str, Any], scope: Scope, make: Callable[[Scope, int], Context]
) -> ContextFamily | None:
    """The family of a ``repeat:`` entry whose every range is a count, else ``None``."""
    if not counted_repeat(entry):
        return None
    ranges = _repeat_ranges(entry, scope)
    lets = mapping(entry.get("let", {}), scope.at("let"))
    return ContextFamily(
        entry=entry,
        scope=scope,
        variables=tuple(var for var, _ in ranges),
        counts=tuple(len(values) for _, values in ranges),
        written=tuple(entry["repeat"].values()),
        lets=tuple((name(var, scope.at("let", str(var))), value) for var, value in lets.items()),
        make=make,
    )


def _lazy(family: ContextFamily) -> bool:
    """Whether a family is left unexpanded: large, and one probability for every context."""
    indices = set(family.variables) | {var for var, _ in family.lets}
    return len(family) > EAGER_CONTEXTS and not names_in(family.entry["probability"]) & indices


def _samples(family: ContextFamily) -> list[tuple[int, ...]]:
    """Bindings checked when a family is read unexpanded: the corners and a spread."""
    n = len(family)
    picks = {0, n - 1, *(n * k // 8 for k in range(1, 8))}
    return [family.values(k) for k in sorted(picks)]


def _read_context(
    entry: Mapping[str, Any],
    scope: Scope,
    datasets: Mapping[str, Dataset],
    gating: Gating,
    ends: Mapping[str, list[Hashable]],
    index: int,
) -> Context:
    """One context: one binding of a ``task.contexts`` entry's ``repeat:``."""
    dataset = scope.at("dataset").render(entry["dataset"])
    if dataset not in datasets:
        raise scope.at("dataset").fail(f"unknown dataset {dataset!r}; defined: {sorted(datasets)}")
    data = datasets[dataset]
    binding = {
        part: _bind_fields(
            entry.get(part, {}), data, gating.graph, ends[part], kind, scope.at(part)
        )
        for part, kind in PARTS
    }
    probability = scope.at("probability").number(entry["probability"])
    if not isinstance(probability, (int, float, sp.Expr)):
        raise scope.at("probability").fail(f"expected a number, got {probability!r}")
    label = scope.at("label").render(entry.get("label", "")) or _default_label(binding, index)
    printable_name(label, scope.at("label"), what="label")
    return Context(
        label=label,
        probability=probability,
        gates=gating.values(entry, scope),
        dataset=dataset,
        inputs=binding["inputs"],
        targets=binding["targets"],
    )


def _bind_fields(
    raw: Any,
    data: Dataset,
    graph: nx.DiGraph,
    allowed: list[Hashable],
    kind: str,
    scope: Scope,
) -> dict[Hashable, str]:
    """A context's ``inputs:`` or ``targets:`` (``kind`` of node): node -> its field."""
    binding: dict[Hashable, str] = {}
    for ref, value in mapping(raw, scope).items():
        node = scope.render(ref, integer_ok=True)
        if node not in allowed:
            raise scope.fail(f"{node!r} is not {kind} node")
        here = scope.at(node)
        field_name = text(value, here, what="a field name")
        if field_name not in data.fields:
            raise here.fail(
                f"dataset {data.name!r} has no field {field_name!r}; fields: {sorted(data.fields)}"
            )
        if data.fields[field_name] != graph.nodes[node]["size"]:
            raise here.fail(
                f"field {field_name!r} has dimension {data.fields[field_name]} but node "
                f"{node!r} has size {graph.nodes[node]['size']}"
            )
        binding[node] = field_name
    return binding


def _default_label(binding: Mapping[str, Mapping[Hashable, str]], index: int) -> str:
    sources = ",".join(str(v) for v in binding["inputs"])
    targets = ",".join(str(v) for v in binding["targets"])
    return f"{sources}->{targets}" if sources or targets else f"context{index}"


def _read_examples(raw: Any, gating: Gating, scope: Scope) -> list[_Example]:
    """``task.examples``: one example per entry and binding of its ``repeat:``."""
    rows: list[_Example] = []
    for index, entry in enumerate(sequence(raw, scope)):
        here = scope.at(index)
        entry = entry_of(entry, here, allowed=EXAMPLE_KEYS)
        for local in expand(entry, here):
            values = {
                part: {
                    local.at(part).render(node, integer_ok=True): read_matrix(
                        value, local.at(part, str(node))
                    )
                    for node, value in mapping(entry.get(part, {}), local.at(part)).items()
                }
                for part, _ in PARTS
            }
            gates = gating.values(entry, local)
            weight = local.at("weight").number(entry.get("weight", 1))
            if not isinstance(weight, (int, sp.Expr)) or as_sympy(weight).is_negative:
                raise local.at("weight").fail(
                    f"weight must be a non-negative number, got {weight!r}"
                )
            rows.append(_Example(here.key, values["inputs"], values["targets"], gates, weight))
    return rows


def _read_npz_task(
    name: Any, gating: Gating, scope: Scope
) -> tuple[list[Context], dict[str, Dataset], list[str]]:
    """``task.npz``: arrays ``inputs/<node>``, ``targets/<node>``, ``gates/<item>``, ``weights``.

    As for ``task.examples``, the rows that share a gate pattern become one context with
    its own dataset, of probability the share of their weights; here on whole arrays, so
    that a row costs no Python object. What the rows imply is bounded before it is built:
    the contexts count against ``entries`` and their second moments against
    ``data_values``.
    """
    arrays = load_npz(name, scope)
    file = Path(name).name
    graph = gating.graph
    ends = _ends(graph)
    n = _count_rows(arrays, file, scope)
    missing = [
        g
        for g, item in gating.items.items()
        if f"gates/{g}" not in arrays and item not in gating.random
    ]
    if missing:
        raise scope.fail(f"missing gate value for {missing[0]!r}: no array 'gates/{missing[0]}'")
    fields: dict[str, np.ndarray] = {}
    for part, kind in PARTS:
        for key, array in arrays.items():
            if not key.startswith(part + "/"):
                continue
            node, where = key.split("/", 1)[1], scope.at(f"[{key!r}]")
            if node not in ends[part]:
                raise where.fail(f"{file}: array {key!r}: {node!r} is not {kind} node")
            values = array.reshape(n, -1)
            size = graph.nodes[node]["size"]
            if values.shape[1] != size:
                raise where.fail(
                    f"{file}: array {key!r} has {values.shape[1]} columns but node {node!r} "
                    f"has size {size}"
                )
            fields[node] = values.astype(float, copy=False)
    items = [(g, item) for g, item in gating.items.items() if f"gates/{g}" in arrays]
    for g, _ in items:
        if arrays[f"gates/{g}"].shape != (n,):
            raise scope.at(f"['gates/{g}']").fail(
                f"{file}: array 'gates/{g}' has shape {arrays[f'gates/{g}'].shape}; expected "
                f"one gate value per example, shape ({n},)"
            )
    weights = check_weights(arrays.get("weights"), n, file, scope.at("['weights']"))
    weights = np.ones(n) if weights is None else weights
    patterns, groups = _gate_patterns(
        [arrays[f"gates/{g}"] for g, _ in items], n, file, fields, scope
    )
    total = float(weights.sum())
    contexts, datasets, keys = [], {}, []
    for index, rows in enumerate(groups):
        dataset = f"examples{index}"
        share = weights[rows]
        columns = {f: v[rows] for f, v in fields.items()} or {"__none__": np.zeros((len(share), 1))}
        datasets[dataset] = Dataset(
            name=dataset,
            fields={f: v.shape[1] for f, v in columns.items()},
            examples=columns,
            weights=share if share.sum() > 0 else None,  # a context of probability 0
        )
        label = f"context{index}" if len(groups) > 1 else "all"
        keys.append(f"{scope.key} ({label})")
        contexts.append(
            Context(
                label=label,
                probability=float(share.sum()) / total,
                gates={
                    item: float(value)
                    for (_, item), value in zip(items, patterns[index], strict=True)
                    if value != 0 or item in gating.random
                },
                dataset=dataset,
                inputs={v: str(v) for v in ends["inputs"] if str(v) in fields},
                targets={v: str(v) for v in ends["targets"] if str(v) in fields},
            )
        )
    return contexts, datasets, keys


def _gate_patterns(
    gates: list[np.ndarray], n: int, file: str, fields: Mapping[str, np.ndarray], scope: Scope
) -> tuple[np.ndarray, list[Any]]:
    """The distinct rows of the gate arrays in order of first appearance, and the rows
    of each (a slice when there is one pattern), counted against the limits first."""
    table = np.column_stack([g.astype(float) for g in gates]) + 0.0 if gates else np.zeros((n, 0))
    groups: list[Any]
    if not gates or (table == table[0]).all():
        found, groups = table[:1], [slice(None)]
    else:  # sort the rows (stably), cut where they change, order the runs by first row
        order = np.lexsort(table.T[::-1])
        ordered = table[order]
        starts = np.flatnonzero(np.r_[True, (ordered[1:] != ordered[:-1]).any(axis=1)])
        runs = np.split(order, starts[1:])
        ranked = np.argsort(order[starts])
        found, groups = ordered[starts][ranked], [runs[k] for k in ranked]
    count_entries(len(groups), source=scope.source, key=scope.key, cls=scope.error)
    width = sum(v.shape[1] for v in fields.values()) or 1
    count_values(
        "data_values",
        len(groups) * width**2,
        f"{file}: {len(groups)} gate patterns (contexts), each with the second moments of "
        f"{width} columns: {len(groups) * width**2} values",
        source=scope.source,
        key=scope.key,
        cls=scope.error,
    )
    return found, groups


def _count_rows(arrays: Mapping[str, np.ndarray], file: str, scope: Scope) -> int:
    """The number of examples in an npz task: every array has one row per example."""
    n, first = None, None
    for k, a in arrays.items():
        if a.ndim == 0 or (a.ndim > 2 and k.startswith(("inputs/", "targets/"))):
            raise scope.at(f"[{k!r}]").fail(
                f"{file}: array {k!r} has shape {a.shape}; expected one row per example"
            )
        n, first = (n, first) if n is not None else (len(a), k)
        if len(a) != n:
            raise scope.at(f"[{k!r}]").fail(
                f"{file}: array {k!r} has {len(a)} rows but {first!r} has {n}; expected one "
                "row per example in every array"
            )
    if n is None:
        raise scope.fail(f"{file}: holds no arrays; expected inputs/<node> and targets/<node>")
    if n == 0:
        raise scope.fail(f"{file}: its arrays have no rows; expected at least one example")
    return n


def _group_examples(
    rows: list[_Example], graph: nx.DiGraph, scope: Scope
) -> tuple[list[Context], dict[str, Dataset], list[str]]:
    """Examples sharing a gate pattern become one context with its own dataset."""
    ends = _ends(graph)
    groups: dict[tuple[Any, ...], list[_Example]] = {}
    for row in rows:
        _check_example(row, graph, ends, scope)
        pattern = tuple(sorted((str(k), str(v)) for k, v in row.gates.items()))
        groups.setdefault(pattern, []).append(row)
    total = sum(r.weight if isinstance(r.weight, float) else as_sympy(r.weight) for r in rows)
    if total == 0:
        raise scope.fail("the example weights sum to 0")
    built = {f"examples{k}": _example_fields(m, graph, ends) for k, m in enumerate(groups.values())}
    check_moment_work(list(built.values()), scope)
    contexts, datasets, keys = [], {}, []
    for index, members in enumerate(groups.values()):
        name = f"examples{index}"
        fields, weights = built[name]
        columns = {f: v.cols for f, v in fields.items()}
        data = datasets[name] = Dataset(name=name, fields=columns, examples=fields, weights=weights)
        probability = sum(r.weight for r in members) / total
        label = f"context{index}" if len(groups) > 1 else "all"
        keys.append(f"{members[0].key.split('[')[0]} ({label})")
        contexts.append(
            Context(
                label=label,
                probability=probability,
                gates=members[0].gates,
                dataset=name,
                inputs={v: str(v) for v in ends["inputs"] if v in data.fields},
                targets={v: str(v) for v in ends["targets"] if v in data.fields},
            )
        )
    return contexts, datasets, keys


def _check_example(
    row: _Example, graph: nx.DiGraph, ends: Mapping[str, list[Hashable]], scope: Scope
) -> None:
    """Values only at input and output nodes, with as many entries as the node's size."""
    for part, kind in PARTS:
        where = scope.with_key(f"{row.key}.{part}")
        for node, value in getattr(row, part).items():
            if node not in ends[part]:
                raise where.fail(f"{node!r} is not {kind} node")
            size = graph.nodes[node]["size"]
            if np.size(value) != size:
                raise where.at(node).fail(
                    f"value has {np.size(value)} entries but node {node!r} has size {size}"
                )


def _example_fields(
    members: list[_Example], graph: nx.DiGraph, ends: Mapping[str, list[Hashable]]
) -> tuple[dict[str, Any], Any]:
    """The exact fields and weights of one group of examples: a field per node that any of
    them sets."""
    fields: dict[str, Any] = {}
    for part, _ in PARTS:
        for node in ends[part]:
            cells = [getattr(r, part).get(node) for r in members]
            if any(c is not None for c in cells):
                fields[str(node)] = _stack(cells, graph.nodes[node]["size"])
    if not fields:
        fields["__none__"] = _stack([None] * len(members), 1)
    shares = [r.weight for r in members]
    weights = sp.ImmutableMatrix(shares) if any(w != 0 for w in shares) else None  # or p = 0
    return fields, weights


def _stack(cells: list[Any], size: int) -> sp.ImmutableMatrix:
    """Rows of one field, zeros where an example sets nothing."""
    return sp.ImmutableMatrix([list(c) if c is not None else [0] * size for c in cells])


def _check_probabilities(task: Task, keys: list[str], scope: Scope) -> None:
    """Every numeric context probability lies in [0, 1], and together they sum to 1.

    ``keys`` names each context, or each part when the task's contexts are not expanded;
    an unexpanded family has one probability for all its contexts: checked once, counted
    ``len(family)`` times.
    """
    contexts = task.contexts
    weighted: list[tuple[str, Context, int]]
    if isinstance(contexts, LazyContexts) and not contexts.expanded:
        weighted = [
            (key, p.context(p.values(0)), len(p)) if isinstance(p, ContextFamily) else (key, p, 1)
            for key, p in zip(keys, contexts.parts, strict=True)
        ]
    else:
        weighted = [(key, c, 1) for key, c in zip(keys, contexts, strict=True)]
    total: Any = 0
    for key, c, count in weighted:
        p = c.probability
        if isinstance(p, sp.Basic) and p.free_symbols:
            total = None
            continue
        if not in_unit_interval(p):
            raise scope.with_key(f"{key}.probability").fail(
                f"probability {p} of context {c.label!r} is outside [0, 1]"
            )
        if total is not None:
            total = total + count * p
    if total is not None and abs(float(total) - 1) > 1e-9:
        raise scope.fail(f"context probabilities sum to {total}, expected 1")
