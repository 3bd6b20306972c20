r"""Tasks: data and gating as a mixture of contexts.

In a GDLN the gates are part of the data (Sec. 2 of Saxe et al. 2022). gdln states every
task in one form: a mixture of **contexts**. A context $c$ has a probability $\pi_c$, a
gate value for every gated node and edge (stored sparsely: absent means 0), and a
**dataset** whose fields are bound to input nodes (as $x$) and output nodes (as $y$).
Explicit examples are contexts too: examples that share a gate pattern form one context.

The averages of Eq. (1) and Eqs. (5)-(6) are then
$\langle f\rangle = \sum_c \pi_c \langle f\rangle_{D_c}$.

**Independent random gates** (stochastic depth, Hayou & Ayed 2021). A task may also name
gated items whose gate is $\delta\sim\mathrm{Bernoulli}(p)$, drawn independently of each
other and of the data at every step. In context $c$ such an item's gate is
$g^c\,\delta$, with $g^c$ the context's value (1 where the context does not mention the
item). Learning follows the loss of Eq. (1) averaged over the $\delta$'s (expected
full-batch gradient descent); since $\delta^2=\delta$, a product of gates averages to the
product of the deterministic parts times $\prod p$ over the *union* of the random items.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property, partial
from typing import Any

import numpy as np
import sympy as sp

from .._errors import TaskSpecError
from ._consistency import InconsistentMomentsError, check_moments
from ._examples import ExampleSet

__all__ = ["Context", "Dataset", "Task"]

Matrix = Any  # sympy.ImmutableMatrix when exact, numpy.ndarray (float64) otherwise


def _is_exact_array(values: Any) -> bool:
    return isinstance(values, sp.MatrixBase)


def is_symbolic(value: Any) -> bool:
    """Whether ``value`` is a sympy expression with free symbols (a parameter left unbound)."""
    return isinstance(value, sp.Basic) and bool(value.free_symbols)


def as_float(matrix: Matrix) -> np.ndarray:
    """A statistic as a float64 array, whatever its exact type."""
    if isinstance(matrix, np.ndarray):
        return matrix.astype(float, copy=False)
    cells = list(matrix)
    if all(isinstance(x, sp.Rational) for x in cells):  # float() of each: no evalf needed
        return np.array([float(x) for x in cells], dtype=float).reshape(matrix.shape)
    if matrix.free_symbols:
        raise TaskSpecError(unbound_message(matrix.free_symbols))
    return np.array(matrix.evalf(), dtype=float).reshape(matrix.shape)


def unbound_message(symbols: Any) -> str:
    """The error for data symbols that need a value (``symbols:`` in a graph file)."""
    names = sorted(str(x) for x in symbols)
    bind = " ".join(f"--param {n}=VALUE" for n in names)
    listed = ", ".join(repr(n) for n in names)
    return f"symbol {listed} (from 'symbols:') has no value; numbers need one: bind it with {bind}"


@dataclass(frozen=True, eq=False)
class Dataset:
    r"""Examples (or their second moments) with named fields.

    A dataset is given either by ``examples`` (field -> ``(n, dim)`` array, exact
    :class:`sympy.ImmutableMatrix` or float array) with optional ``weights``, or by its
    second moments ``moments[(a, b)]`` $=\langle a\,b^\top\rangle$. Only second moments
    enter the learning dynamics (Eqs. 3-6), so the two forms are interchangeable.

    Parameters
    ----------
    name
        The dataset's name in the task.
    fields
        Field name -> dimension.
    examples
        Field -> ``(n, dim)`` rows (exact :class:`sympy.ImmutableMatrix` or float array),
        or ``None`` when the moments are given.
    weights
        Example weights ``(n,)``: non-negative, of positive sum, normalised to sum to 1
        (default: uniform); only with ``examples``.
    moments_given
        ``(a, b)`` -> $\langle a\,b^\top\rangle$, shape ``(dim a, dim b)``, or ``None``
        when the examples are given. They are checked for being the moments of some data
        (:func:`gdln.task._consistency.check_moments`: a block given both ways is the
        other's transpose, the joint second moment of the fields is positive semidefinite).
    moments_rounding
        ``(a, b)`` -> how far each entry of ``moments_given`` may be from what its writer
        meant (half a unit in the last typed digit; a graph file's reader passes it), which
        the check admits; default: exact as given, up to float rounding.

    Raises
    ------
    ValueError
        Both or neither of ``examples`` and ``moments_given`` are given, the fields have
        different numbers of examples or none, or the weights are not one non-negative
        weight per example of positive sum.
    InconsistentMomentsError
        (a ``TaskSpecError``, a ``ValueError``) ``moments_given`` are the moments of no
        data: a block disagrees with its transpose, or an eigenvalue of the joint second
        moment is negative beyond the rounding.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eqs. (5)-(6): the second moments of the data that
    the path statistics are made of.
    """

    name: str
    fields: Mapping[str, int]
    examples: Mapping[str, Matrix] | None = None
    weights: Any = None
    moments_given: Mapping[tuple[str, str], Matrix] | None = None
    moments_rounding: Mapping[tuple[str, str], Any] | None = field(
        default=None, repr=False, compare=False
    )
    _cache: dict[tuple[str, str], Matrix] = field(  # moments computed so far
        init=False, repr=False, compare=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        if (self.examples is None) == (self.moments_given is None):
            raise ValueError(f"dataset {self.name!r}: give exactly one of examples or moments")
        if self.examples is not None:
            sizes = {len(_rows(v)) for v in self.examples.values()}
            if len(sizes) != 1:
                raise ValueError(f"dataset {self.name!r}: fields have different example counts")
            if 0 in sizes:
                raise ValueError(f"dataset {self.name!r}: no examples")
            if self.weights is not None:
                _check_weights(self.name, self.weights, sizes.pop())
        else:
            assert self.moments_given is not None
            given = self.moments_rounding or {}
            slack = {
                k: np.asarray(given[k], dtype=float) if k in given else np.zeros(np.shape(m))
                for k, m in self.moments_given.items()
            }
            check_moments(self.moments_given, slack, partial(InconsistentMomentsError, self.name))

    def __repr__(self) -> str:
        kind = f"{self.n_examples} examples" if self.examples is not None else "moments"
        return f"Dataset({self.name!r}, fields={dict(self.fields)}, {kind})"

    @property
    def n_examples(self) -> int:
        """The number of examples (a dataset given by examples only)."""
        if self.examples is None:
            raise ValueError(f"dataset {self.name!r} is given by moments")
        return len(_rows(next(iter(self.examples.values()))))

    @cached_property
    def exact(self) -> bool:
        """Whether all values are exact (rational, algebraic or symbolic)."""
        source = self.examples if self.examples is not None else self.moments_given
        assert source is not None
        ok = all(_is_exact_array(v) for v in source.values())
        return ok and (self.weights is None or isinstance(self.weights, sp.MatrixBase))

    def moment(self, a: str, b: str) -> Matrix:
        r"""$\langle a\, b^\top\rangle$ over the dataset, exact when the data are.

        Parameters
        ----------
        a, b
            Two fields of the dataset.

        Returns
        -------
        Matrix
            ``(dim a, dim b)``: an exact sympy matrix or a float array.

        Raises
        ------
        TaskSpecError
            The dataset gives moments but not this one.
        """
        key = (a, b)
        if key in self._cache:
            return self._cache[key]
        if self.moments_given is not None:
            if key in self.moments_given:
                value = self.moments_given[key]
            elif (b, a) in self.moments_given:
                value = self.moments_given[(b, a)].T
            else:
                raise TaskSpecError(
                    f"dataset {self.name!r} gives no moment <{a} {b}^T>: add it "
                    f"(moments: {{{a}: {{{b}: ...}}}}) or bind other fields"
                )
        else:
            assert self.examples is not None
            value = _weighted_outer(self.examples[a], self.examples[b], self.weights)
        self._cache[key] = value
        return value

    def has_moment(self, a: str, b: str) -> bool:
        """Whether :meth:`moment` has $\\langle a\\, b^\\top\\rangle$ to give.

        Parameters
        ----------
        a, b
            Two fields of the dataset.

        Returns
        -------
        bool
            Always for examples; for moments, when it or its transpose is given.
        """
        if self.moments_given is None:
            return True
        return (a, b) in self.moments_given or (b, a) in self.moments_given

    def realize(self) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Float examples with these second moments, and their weights (summing to 1).

        For a dataset given by examples these are the examples. For one given by
        moments, the joint moment matrix $\\Sigma = Q\\Lambda Q^\\top$ is realised by the
        rows $\\sqrt{k\\lambda_i}\\, q_i$ with weight $1/k$ each.

        Returns
        -------
        tuple
            ``(arrays, weights)``: field -> ``(n, dim)`` floats, and ``(n,)`` weights.
        """
        if self.examples is not None:
            arrays = {f: as_float(v) for f, v in self.examples.items()}
            n = self.n_examples
            w = np.full(n, 1.0 / n) if self.weights is None else as_float(self.weights).ravel()
            return arrays, w / w.sum()
        names = list(self.fields)
        offsets = np.cumsum([0] + [self.fields[f] for f in names])
        total = np.zeros((offsets[-1], offsets[-1]))
        for i, a in enumerate(names):
            for j, b in enumerate(names):
                if self.has_moment(a, b):
                    block = as_float(self.moment(a, b))
                    total[offsets[i] : offsets[i + 1], offsets[j] : offsets[j + 1]] = block
        values, vectors = np.linalg.eigh((total + total.T) / 2)
        keep = values > 1e-14 * max(1.0, float(values.max(initial=0.0)))
        k = max(int(keep.sum()), 1)
        rows = (vectors[:, keep] * np.sqrt(k * values[keep])).T
        if not keep.any():
            rows = np.zeros((1, offsets[-1]))
        arrays = {f: rows[:, offsets[i] : offsets[i + 1]] for i, f in enumerate(names)}
        return arrays, np.full(k, 1.0 / k)


def _check_weights(name: str, weights: Any, n: int) -> None:
    """One non-negative weight per example, of positive sum where they are numbers."""
    if isinstance(weights, sp.MatrixBase):
        exact = list(weights)
        count, negative = len(exact), any(w.is_negative for w in exact)
        zero = bool(sp.Add(*exact).is_zero)
    else:
        values = np.ravel(np.asarray(weights, dtype=float))
        count, negative, zero = len(values), bool((values < 0).any()), not values.sum() > 0
    if count != n:
        raise ValueError(f"dataset {name!r}: {count} weights for {n} examples")
    if negative:
        raise ValueError(f"dataset {name!r}: weights must be non-negative")
    if zero:
        raise ValueError(f"dataset {name!r}: the weights sum to 0")


def _rows(values: Matrix) -> Any:
    return values.tolist() if isinstance(values, sp.MatrixBase) else values


def _weighted_outer(a: Matrix, b: Matrix, weights: Any) -> Matrix:
    if isinstance(a, sp.MatrixBase) and isinstance(b, sp.MatrixBase):
        rational = _rational_outer(a, b, weights)
        if rational is not None:
            return rational
        n = a.rows
        if weights is None:
            return sp.ImmutableMatrix(a.T * b / n)
        w = sp.diag(*list(weights)) / sum(weights)
        return sp.ImmutableMatrix(a.T * w * b)
    fa, fb = as_float(a), as_float(b)
    w = np.full(len(fa), 1.0 / len(fa)) if weights is None else as_float(weights).ravel()
    return (fa * (w / w.sum())[:, None]).T @ fb


def _integers(matrix: Any) -> tuple[list[int], int] | None:
    """The rational entries of ``matrix`` as integers over one common denominator, or
    ``None`` when an entry is not a rational number."""
    cells = list(matrix)
    if not all(isinstance(x, sp.Rational) for x in cells):
        return None
    common = math.lcm(*(int(x.q) for x in cells)) if cells else 1
    return [int(x.p) * (common // int(x.q)) for x in cells], common


def _rational_outer(a: Any, b: Any, weights: Any) -> sp.ImmutableMatrix | None:
    r"""$\sum_k w_k a_k b_k^\top/\sum_k w_k$ exactly, in integers, for rational data.

    A sympy product costs microseconds per multiply-add (a minute for 300 examples of
    300 values); over one common denominator the same product is integer arithmetic:
    in int64 where no sum can overflow, else Python integers. ``None`` when an entry is
    not rational (the caller multiplies the sympy matrices).
    """
    ints_a, ints_b = _integers(a), _integers(b)
    ints_w = ([1] * a.rows, 1) if weights is None else _integers(weights)
    if ints_a is None or ints_b is None or ints_w is None:
        return None
    (va, la), (vb, lb), (vw, _) = ints_a, ints_b, ints_w
    n = a.rows
    total = sum(vw)
    if total == 0:
        return None  # the sympy product divides by zero as it always did
    bound = (max(map(abs, va), default=0) + 1) * (max(map(abs, vb), default=0) + 1)
    bound *= (max(map(abs, vw), default=0) + 1) * n
    kind: Any = np.int64 if bound < 2**62 else object
    ma = np.array(va, dtype=kind).reshape(n, a.cols)
    mb = np.array(vb, dtype=kind).reshape(n, b.cols) * np.array(vw, dtype=kind)[:, None]
    product = ma.T.dot(mb)
    denominator = la * lb * total
    cells = [sp.Rational(int(x), denominator) for x in product.ravel().tolist()]
    return sp.ImmutableMatrix(a.cols, b.cols, cells)


@dataclass(frozen=True)
class Context:
    r"""One context of a task: probability, gates and the data it routes.

    Parameters
    ----------
    label
        A name for the context, used in per-context losses (e.g. ``"x0->y3"``).
    probability
        $\pi_c$, an exact number or sympy expression in $[0, 1]$.
    gates
        Gated node id or gated edge ``(u, v)`` -> its value in this context. Gated nodes
        and edges absent here are off (0); ungated ones are always 1.
    dataset
        Name of the dataset this context draws from.
    inputs
        Input node -> field of the dataset it holds. Unbound input nodes hold 0.
    targets
        Output node -> field of the dataset that is its target. Unbound outputs target 0.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Sec. 2: the gating variables $g_v$, $g_e$ that a
    context sets, and the average over contexts in Eqs. (1), (5) and (6).
    """

    label: str
    probability: Any
    gates: Mapping[Hashable, Any]
    dataset: str
    inputs: Mapping[Hashable, str]
    targets: Mapping[Hashable, str]

    def gate(self, item: Hashable, gated: bool) -> Any:
        """The gate value of a node or edge in this context.

        Parameters
        ----------
        item
            A node or an edge ``(source, target)``.
        gated
            Whether the item carries a gate at all.

        Returns
        -------
        Any
            Its gate in this context (0 when the context does not open it); 1 for an
            item without a gate.
        """
        return self.gates.get(item, 0) if gated else 1


@dataclass(frozen=True)
class Task:
    r"""A mixture of contexts over named datasets (see the module docstring).

    Parameters
    ----------
    contexts
        The contexts, each with its probability $\pi_c$.
    datasets
        Dataset name -> :class:`Dataset`, for the contexts to draw from.
    random_gates
        Gated node id or edge ``(u, v)`` -> survival probability $p$ (a number in
        $[0, 1]$ or a sympy expression) of its independent Bernoulli gate. A context that
        does not mention a random item gives it the value 1 (filled in here).

    Raises
    ------
    ValueError
        A context names an unknown dataset, or a survival probability lies outside
        $[0, 1]$.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eqs. (1), (5)-(6): the averages over contexts,
    data and gates; Hayou & Ayed, "Regularization in ResNet with Stochastic Depth": the
    Bernoulli gates.
    """

    contexts: Sequence[Context]
    datasets: Mapping[str, Dataset]
    random_gates: Mapping[Hashable, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        lazy = not getattr(self.contexts, "expanded", True)  # checked where it was read
        if self.random_gates and lazy:
            object.__setattr__(self, "contexts", tuple(self.contexts))
            lazy = False
        for c in () if lazy else self.contexts:
            if c.dataset not in self.datasets:
                raise ValueError(f"context {c.label!r} names unknown dataset {c.dataset!r}")
        for item, p in self.random_gates.items():
            if not is_symbolic(p) and not 0 <= float(p) <= 1:
                raise ValueError(f"random gate {item!r}: probability {p} is outside [0, 1]")
        if self.random_gates:
            filled = tuple(
                replace(c, gates={**dict.fromkeys(self.random_gates, 1), **c.gates})
                for c in self.contexts
            )
            object.__setattr__(self, "contexts", filled)

    def __repr__(self) -> str:
        names = ", ".join(self.datasets)
        extra = f", random_gates=<{len(self.random_gates)}>" if self.random_gates else ""
        return f"Task(<{len(self.contexts)} contexts>, datasets=[{names}]{extra})"

    @property
    def exact(self) -> bool:
        """Whether every dataset is exact (rational, algebraic or symbolic)."""
        return all(d.exact for d in self.datasets.values())

    def examples(self, graph: Any) -> ExampleSet:
        """The task as concrete examples for a full-network forward pass (Eq. 1).

        Parameters
        ----------
        graph
            The architecture (``networkx.DiGraph`` with node sizes and gate flags).

        Returns
        -------
        ExampleSet
            Every context's examples, weighted by the context's probability, with the
            gates it sets.

        Raises
        ------
        TaskSpecError
            A probability or gate is still symbolic.
        """
        realized = {name: d.realize() for name, d in self.datasets.items()}
        sizes = {v: int(graph.nodes[v]["size"]) for v in graph.nodes}
        inputs = [v for v in graph.nodes if graph.in_degree(v) == 0]
        outputs = [v for v in graph.nodes if graph.out_degree(v) == 0]
        gated: list[Hashable] = [v for v in graph.nodes if graph.nodes[v].get("gated")]
        gated += [e for e in graph.edges if graph.edges[e].get("gated")]
        column = {g: j for j, g in enumerate(gated)}
        counts = [len(realized[c.dataset][1]) for c in self.contexts]
        starts = np.concatenate([[0], np.cumsum(counts)]).astype(int)
        total = int(starts[-1])
        # every array at its full length, then each context's rows filled from what it
        # binds: the work grows with the bindings, not contexts x nodes (M = 100: 800 000
        # small arrays before)
        ins = {v: np.zeros((total, sizes[v])) for v in inputs}
        outs = {v: np.zeros((total, sizes[v])) for v in outputs}
        gate_values = np.zeros((len(self.contexts), len(gated)))
        weights = np.empty(total)
        for index, c in enumerate(self.contexts):
            for value in (c.probability, *c.gates.values()):  # numbers only from here on
                if is_symbolic(value):
                    raise TaskSpecError(
                        f"context {c.label!r}: " + unbound_message(value.free_symbols)
                    )
            arrays, w = realized[c.dataset]
            rows = slice(starts[index], starts[index + 1])
            for blocks, bound in ((ins, c.inputs), (outs, c.targets)):
                for v, name in bound.items():
                    if v in blocks:
                        blocks[v][rows] = arrays[name]
            for g, value in c.gates.items():
                if g in column:
                    gate_values[index, column[g]] = float(value)
            weights[rows] = float(c.probability) * w
        return ExampleSet(
            inputs=ins,
            targets=outs,
            gates={g: np.repeat(gate_values[:, j], counts) for g, j in column.items()},
            weights=weights,
            context=np.repeat(np.arange(len(self.contexts)), counts),
            context_labels=tuple(c.label for c in self.contexts),
            random_gates=dict(self.random_gates),
        )
