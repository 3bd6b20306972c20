r"""The ``datasets:`` of a graph or task file, and the matrices and ``.npz`` files they hold.

A dataset is given in one of five forms: ``builtin:`` (a name from
:data:`gdln.task._builtin.BUILTIN_DATASETS` and its settings), ``examples:`` (rows per
field, with optional ``weights:``), ``moments:`` (exact second moments
$\langle a\,b^\top\rangle$, checked by :mod:`gdln.task._consistency`: a block
given both ways must agree and the joint moment must be positive semidefinite),
``teacher:`` (inputs of a given covariance, targets from a teacher matrix plus noise,
whose moments gdln computes exactly) or ``npz:`` (a file of float arrays, one per field).

What a dataset costs is bounded before it is built: exact values (``examples:``,
``moments:``, built-in datasets) count against the limit ``exact_values``, and an ``.npz``
file is read within ``data_bytes`` and ``data_values``
(:mod:`gdln._bounded._limits`). Every value lies within $\pm 10^{100}$
(:data:`MAX_MAGNITUDE`), so that the second moments of Eqs. (5)-(6) of Saxe et al. 2022,
averages of products of two values, stay finite in float64.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import sympy as sp

from .._bounded._limits import check_work, count_values
from .._bounded._npz import read_npz
from .._errors import GraphSpecError, shorten
from ..task._builtin import BUILTIN_DATASETS
from ..task._consistency import InconsistentMomentsError, check_moments, rounding
from ..task._task import Dataset
from ._document import Scope, mapping, text

__all__ = [
    "MAX_MAGNITUDE",
    "check_moment_work",
    "check_weights",
    "load_npz",
    "read_datasets",
    "read_matrix",
]

FORMS = ("builtin", "examples", "moments", "npz", "teacher")

_FORMS_LISTED = ", ".join(f"'{f}'" for f in FORMS[:-1]) + f" or '{FORMS[-1]}'"

RATIONAL_SECONDS = 4e-8
"""Seconds of one multiply-add of the exact second moments of rational data (integers
over a common denominator; measured 38 ns in Python integers on a 2-core machine)."""
SYMBOLIC_SECONDS = 1e-5
"""Seconds of one multiply-add of sympy numbers (roots, symbols): 6-7 microseconds measured."""

MAX_MAGNITUDE = 1e100
r"""Largest magnitude of a data value: squares stay below $10^{200}$, far from float64's
$1.8\cdot 10^{308}$, however many of them a moment or a loss adds up."""


def read_datasets(doc: Mapping[str, Any], scope: Scope) -> dict[str, Dataset]:
    """The document's ``datasets:``, by name (``scope`` is a task scope)."""
    datasets: dict[str, Dataset] = {}
    for key, spec in mapping(doc.get("datasets", {}), scope.at("datasets")).items():
        here = scope.at("datasets", str(key))
        name = text(key, here, what="a dataset name")
        datasets[name] = read_dataset(name, spec, here)
    return datasets


def read_dataset(name: str, spec: Any, scope: Scope) -> Dataset:
    """One dataset, in whichever of the four forms it is given."""
    spec = mapping(spec, scope)
    forms = [k for k in FORMS if k in spec]
    if len(forms) > 1:
        raise scope.fail(f"give one of {_FORMS_LISTED}, not {forms}")
    if not forms:
        raise scope.fail(f"expected one of {_FORMS_LISTED}")
    return _READERS[forms[0]](name, spec, scope)


def _builtin(name: str, spec: Mapping[str, Any], scope: Scope) -> Dataset:
    which = spec["builtin"]
    if not isinstance(which, str) or which not in BUILTIN_DATASETS:
        raise scope.at("builtin").fail(
            f"unknown builtin dataset {which!r}; expected one of {sorted(BUILTIN_DATASETS)}"
        )
    settings = {
        text(k, scope.at(str(k)), what="a setting name"): scope.at(str(k)).number(v)
        for k, v in spec.items()
        if k != "builtin"
    }
    builtin = BUILTIN_DATASETS[which]
    try:
        values = builtin.values(**settings)
    except (TypeError, ValueError) as err:
        raise scope.fail(f"builtin {which!r}: {err}") from err
    count_values(
        "exact_values",
        values,
        f"builtin {which!r} with {shorten(settings)}: {values} exact values",
        source=scope.source,
        key=scope.key,
        cls=scope.error,
    )
    return builtin(name, **settings)


def _examples(name: str, spec: Mapping[str, Any], scope: Scope) -> Dataset:
    here = scope.at("examples")
    examples = {
        text(f, here.at(str(f)), what="a field name"): read_matrix(v, here.at(str(f)))
        for f, v in mapping(spec["examples"], here).items()
    }
    sizes = {m.rows for m in examples.values()}
    if not sizes:
        raise here.fail("no fields")
    if len(sizes) != 1:
        raise here.fail(f"fields have different numbers of examples: {sorted(sizes)}")
    weights = None
    if "weights" in spec:
        here = scope.at("weights")
        raw = spec["weights"]
        if isinstance(raw, list) and any(isinstance(w, (list, dict)) for w in raw):
            raise here.fail(f"expected a list of numbers, one per example, got {shorten(raw)}")
        weights = read_matrix([raw], here).T
        rows = sizes.pop()
        if weights.rows != rows:
            raise here.fail(f"{weights.rows} weights; expected one weight per example ({rows})")
        negative = next((k for k, w in enumerate(weights) if w.is_negative), None)
        if negative is not None:
            raise here.fail(
                f"weights must be non-negative, one per example; weights[{negative}] is "
                f"{shorten(weights[negative])}"
            )
        if all(w.is_zero for w in weights):
            raise here.fail("the weights sum to 0; expected a positive total")
    fields = {f: m.cols for f, m in examples.items()}
    check_moment_work([(examples, weights)], scope)
    return Dataset(name=name, fields=fields, examples=examples, weights=weights)


def check_moment_work(
    groups: Sequence[tuple[Mapping[str, Any], Any]], scope: Scope, *, what: str = "examples"
) -> None:
    r"""Refuse exact examples whose second moments (Eqs. 5-6) would take too long.

    ``groups`` holds ``(fields, weights)`` of each dataset (a group of examples that share
    a gate pattern is one). The moments $\langle a\,b^\top\rangle$ of fields with $D$
    columns in all over $n$ examples take up to $nD^2$ multiply-adds: integer arithmetic
    when every value is rational, sympy's (hundreds of times slower) otherwise. Checked
    against the limit ``work`` before the datasets are built.
    """
    rows = steps = 0
    seconds = 0.0
    rational = True
    for examples, weights in groups:
        columns = sum(m.cols for m in examples.values())
        n = next(iter(examples.values())).rows if examples else 0
        rows, steps = rows + n, steps + n * columns**2
        if n * columns**2 * RATIONAL_SECONDS <= 1e-3:
            seconds += n * columns**2 * RATIONAL_SECONDS
            continue
        cells = [x for m in examples.values() for x in m]
        cells += list(weights) if weights is not None else []
        exact = all(isinstance(x, sp.Rational) for x in cells)
        rational = rational and exact
        seconds += n * columns**2 * (RATIONAL_SECONDS if exact else SYMBOLIC_SECONDS)
    kind = "" if rational else "symbolic or irrational "
    check_work(
        seconds,
        f"exact second moments of {rows} {what} of {kind}values ({steps} multiply-adds)",
        cls=scope.fail,
        advice="or give float data (an npz file)",
    )


def _moments(name: str, spec: Mapping[str, Any], scope: Scope) -> Dataset:
    here = scope.at("moments")
    moments: dict[tuple[str, str], Any] = {}
    slack: dict[tuple[str, str], np.ndarray] = {}
    fields: dict[str, int] = {}
    for a, row in mapping(spec["moments"], here).items():
        a = text(a, here.at(str(a)), what="a field name")
        for b, value in mapping(row, here.at(a)).items():
            b = text(b, here.at(a, str(b)), what="a field name")
            m = read_matrix(value, here.at(a, b))
            moments[(a, b)] = m
            slack[(a, b)] = typed_rounding(value, m)
            for f, dim in ((a, m.rows), (b, m.cols)):
                if fields.setdefault(f, dim) != dim:
                    raise here.at(a, b).fail(
                        f"field {f!r} has dimension {dim} here but {fields[f]} elsewhere"
                    )
    for f in fields:
        if (f, f) not in moments:
            raise here.fail(f"missing moment {f}.{f} (the second moment of field {f!r})")
    try:  # the dataset checks its moments (admitting the typed rounding)
        return Dataset(name=name, fields=fields, moments_given=moments, moments_rounding=slack)
    except InconsistentMomentsError as err:
        raise here.at(*err.block).fail(err.reason) from None


TEACHER_KEYS = ("inputs", "covariance", "targets", "noise")


def _teacher(name: str, spec: Mapping[str, Any], scope: Scope) -> Dataset:
    r"""Inputs of a given covariance and targets from a teacher matrix plus noise.

    With the inputs stacked, $x = (a; b; \dots)$, of covariance $C$ and each target
    $t = W_t x + n_t$ with noise $n_t$ of covariance $N_t$, independent of $x$ and of the
    other targets' noise, the second moments of Eqs. (5)-(6) of Saxe et al. 2022 are

    $$\langle x x^\top\rangle = C,\quad \langle t\,x^\top\rangle = W_t C,\quad
    \langle t\,s^\top\rangle = W_t C W_s^\top + [t = s]\,N_t,$$

    computed exactly from the file's numbers, and positive semidefinite jointly once $C$
    and each $N_t$ are (checked), so they cannot contradict each other.
    """
    here = scope.at("teacher")
    spec = mapping(spec["teacher"], here)
    unknown = [str(k) for k in spec if k not in TEACHER_KEYS]
    if unknown:
        raise here.fail(f"unknown key {shorten(unknown[0])}; expected {', '.join(TEACHER_KEYS)}")
    for key in ("inputs", "targets"):
        if key not in spec:
            raise here.fail(f"missing {key!r}: {_TEACHER_HINT}")
    inputs: dict[str, int] = {}
    for f, dim in mapping(spec["inputs"], here.at("inputs")).items():
        at = here.at("inputs", str(f))
        field = text(f, at, what="a field name")
        size = at.number(dim)
        if not isinstance(size, int) or not 1 <= size <= MAX_FIELD_SIZE:
            raise at.fail(
                f"expected the field's dimension, an integer from 1 to "
                f"{MAX_FIELD_SIZE}, got {shorten(dim)}"
            )
        inputs[field] = size
    if not inputs:
        raise here.at("inputs").fail(f"no input fields: {_TEACHER_HINT}")
    n = sum(inputs.values())
    covariance = _covariance(spec, n, inputs, here)
    maps: dict[str, sp.ImmutableMatrix] = {}
    for f, value in mapping(spec["targets"], here.at("targets")).items():
        at = here.at("targets", str(f))
        field = text(f, at, what="a field name")
        if field in inputs:
            raise at.fail(f"field {field!r} is an input too; name the target another way")
        maps[field] = read_matrix(value, at)
        if maps[field].cols != n:
            raise at.fail(
                f"the teacher matrix has {maps[field].cols} columns; expected one per input "
                f"dimension ({n}: {', '.join(f'{k} {d}' for k, d in inputs.items())})"
            )
    if not maps:
        raise here.at("targets").fail(f"no target fields: {_TEACHER_HINT}")
    noise = _noise(spec, maps, here)
    rows = sum(m.rows for m in maps.values())
    count_values(
        "exact_values",
        rows * n * (n + rows),
        f"the teacher's moments W C and W C W^T: {rows * n * (n + rows)} exact products",
        source=scope.source,
        key=here.key,
        cls=scope.error,
    )
    offsets = dict(zip(inputs, itertools.accumulate([0, *inputs.values()]), strict=False))
    moments: dict[tuple[str, str], Any] = {}
    for f, start in offsets.items():
        for g, other in offsets.items():
            block = covariance[start : start + inputs[f], other : other + inputs[g]]
            moments[(f, g)] = sp.ImmutableMatrix(block)
    for t, w in maps.items():
        product = w * covariance
        for g, other in offsets.items():
            moments[(t, g)] = sp.ImmutableMatrix(product[:, other : other + inputs[g]])
        for s, v in maps.items():
            block = product * v.T + (noise[t] if s == t else sp.zeros(w.rows, v.rows))
            moments[(t, s)] = sp.ImmutableMatrix(block)
    fields = {**inputs, **{t: w.rows for t, w in maps.items()}}
    return Dataset(name=name, fields=fields, moments_given=moments)


_TEACHER_HINT = (
    "expected teacher: {inputs: {FIELD: dimension}, covariance: matrix, "
    "targets: {FIELD: teacher matrix}, noise: {FIELD: variance or matrix}}"
)
MAX_FIELD_SIZE = 1_000_000
"""Largest dimension of a teacher dataset's input field."""


def _covariance(
    spec: Mapping[str, Any], n: int, inputs: Mapping[str, int], here: Scope
) -> sp.ImmutableMatrix:
    """The stacked inputs' covariance (default the identity), symmetric and PSD."""
    if "covariance" not in spec:
        count_values(
            "exact_values",
            n * n,
            f"an identity covariance of {n} x {n} exact values",
            source=here.source,
            key=here.key,
            cls=here.error,
        )
        return sp.ImmutableMatrix(sp.eye(n))
    at = here.at("covariance")
    value = spec["covariance"]
    matrix = read_matrix(value, at)
    if matrix.shape != (n, n):
        raise at.fail(
            f"shape {matrix.rows} x {matrix.cols}; expected {n} x {n}, one row and column "
            f"per input dimension ({', '.join(f'{k} {d}' for k, d in inputs.items())})"
        )
    check_moments(
        {("x", "x"): matrix},
        {("x", "x"): typed_rounding(value, matrix)},
        _failing_at(at),
        what="covariance",
        title="the covariance",
    )
    return matrix


def _noise(
    spec: Mapping[str, Any], maps: Mapping[str, sp.ImmutableMatrix], here: Scope
) -> dict[str, sp.ImmutableMatrix]:
    """Each target's noise covariance: a number (times the identity) or a matrix, PSD."""
    given = mapping(spec.get("noise", {}), here.at("noise"))
    unknown = [str(k) for k in given if k not in maps]
    if unknown:
        raise here.at("noise").fail(
            f"no target field {shorten(unknown[0])}; noise is given per target field "
            f"({', '.join(maps)})"
        )
    noise = {}
    for t, w in maps.items():
        if t not in given:
            noise[t] = sp.ImmutableMatrix(sp.zeros(w.rows, w.rows))
            continue
        at = here.at("noise", t)
        value = given[t]
        if not isinstance(value, list):
            value = [[value if i == j else 0 for j in range(w.rows)] for i in range(w.rows)]
        matrix = read_matrix(value, at)
        if matrix.shape != (w.rows, w.rows):
            raise at.fail(
                f"shape {matrix.rows} x {matrix.cols}; expected a variance or a "
                f"{w.rows} x {w.rows} covariance (target {t!r} has dimension {w.rows})"
            )
        check_moments(
            {("n", "n"): matrix},
            {("n", "n"): typed_rounding(value, matrix)},
            _failing_at(at),
            what="noise covariance",
            title="the noise covariance",
        )
        noise[t] = matrix
    return noise


def _failing_at(scope: Scope) -> Callable[[tuple[str, ...], str], Exception]:
    """The errors of :func:`check_moments` for one matrix, all at ``scope``."""
    return lambda _key, message: scope.fail(message)


def _npz(name: str, spec: Mapping[str, Any], scope: Scope) -> Dataset:
    here = scope.at("npz")
    arrays = load_npz(spec["npz"], here)
    file = Path(spec["npz"]).name
    weights = arrays.pop("weights", None)
    if not arrays:
        raise here.fail(f"{file}: holds no arrays; expected one (examples, dimension) per field")
    for f, array in arrays.items():
        if not 1 <= array.ndim <= 2 or array.size == 0:
            raise here.at(f"[{f!r}]").fail(
                f"{file}: array {f!r} has shape {array.shape}; expected (examples, dimension), "
                "at least one of each"
            )
    first, rows = next((f, len(a)) for f, a in arrays.items())
    for f, array in arrays.items():
        if len(array) != rows:
            raise here.at(f"[{f!r}]").fail(
                f"{file}: array {f!r} has {len(array)} rows but {first!r} has {rows}; "
                "expected one row per example in every field"
            )
    columns = sum(a.size // rows for a in arrays.values())
    count_values(
        "data_values",
        columns**2,
        f"{file}: the second moments of its {columns} columns: {columns**2} values",
        source=scope.source,
        key=here.key,
        cls=scope.error,
    )
    examples = {f: a.reshape(rows, -1).astype(float, copy=False) for f, a in arrays.items()}
    return Dataset(
        name=name,
        fields={f: a.shape[1] for f, a in examples.items()},
        examples=examples,
        weights=check_weights(weights, rows, file, here.at("['weights']")),
    )


def check_weights(weights: np.ndarray | None, rows: int, file: str, scope: Scope) -> Any:
    """An npz's ``weights`` as floats: one per example, non-negative, of positive sum.

    The same rules as the ``weights:`` of an ``examples:`` dataset; ``None`` stays ``None``
    (equal weights).
    """
    if weights is None:
        return None
    if weights.shape != (rows,):
        raise scope.fail(
            f"{file}: array 'weights' has shape {weights.shape}; expected one weight per "
            f"example, shape ({rows},)"
        )
    weights = weights.astype(float)
    negative = np.flatnonzero(weights < 0)
    if len(negative):
        raise scope.fail(
            f"{file}: weights must be non-negative, one per example; weights[{negative[0]}] "
            f"is {weights[negative[0]]}"
        )
    if not weights.sum() > 0:
        raise scope.fail(f"{file}: the weights sum to 0; expected a positive total")
    return weights


_READERS: dict[str, Callable[[str, Mapping[str, Any], Scope], Dataset]] = {
    "builtin": _builtin,
    "examples": _examples,
    "moments": _moments,
    "npz": _npz,
    "teacher": _teacher,
}


def typed_rounding(value: Any, matrix: sp.MatrixBase) -> np.ndarray:
    """How far each entry of a matrix read by :func:`read_matrix` may be from what its
    writer meant (:func:`~gdln.task._consistency.rounding`: typed decimals)."""
    rows = _rows(value)
    return np.array(
        [[rounding(x, matrix[i, j]) for j, x in enumerate(row)] for i, row in enumerate(rows)]
    ).reshape(matrix.shape)


def _rows(value: Any) -> list[Any]:
    """A matrix as written: a number, a row or rows, as a list of rows."""
    rows = value if isinstance(value, list) else [value]
    if rows and not isinstance(rows[0], list):
        rows = [rows]
    return rows


def read_matrix(value: Any, scope: Scope) -> sp.ImmutableMatrix:
    """An exact matrix: a number, a row ``[a, b]`` or rows ``[[a, b], [c, d]]``."""
    rows = _rows(value)
    if (
        not rows
        or not all(isinstance(row, list) for row in rows)
        or len({len(row) for row in rows}) != 1
        or not rows[0]
    ):
        raise scope.fail(
            f"expected a number, a list or a list of equally long lists, got {shorten(value)}"
        )
    count_values(
        "exact_values",
        len(rows) * len(rows[0]),
        f"a matrix of {len(rows)} x {len(rows[0])} exact values",
        source=scope.source,
        key=scope.key,
        cls=scope.error,
    )
    try:
        cells = [[_bounded(scope.number(x), scope) for x in row] for row in rows]
        return sp.ImmutableMatrix(cells)
    except GraphSpecError:
        raise
    except (ValueError, TypeError) as err:
        raise scope.fail(
            f"expected a number, a list or a list of lists, got {shorten(value)}"
        ) from err


def _bounded(value: Any, scope: Scope) -> Any:
    """``value``, refused if it is a number beyond :data:`MAX_MAGNITUDE`."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() < 300:
        return value
    try:
        size = abs(float(value))
    except OverflowError:
        size = float("inf")
    except TypeError:  # symbolic: checked once the symbols have values
        return value
    if not size <= MAX_MAGNITUDE:
        raise scope.fail(
            f"value {shorten(value)} is beyond ±{MAX_MAGNITUDE:g}: its square would overflow "
            "the second moments; rescale the data"
        )
    return value


def load_npz(name: Any, scope: Scope) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` file named relative to the document's folder.

    The file is read by :func:`~gdln._bounded._npz.read_npz`, every size bounded before it
    is read; every array must hold finite numbers of magnitude at most
    :data:`MAX_MAGNITUDE`. Nothing is unpickled.
    """
    if not isinstance(name, str) or not name:
        raise scope.fail(f"expected a file name, got {name!r}")
    path = (scope.folder / name).resolve()
    try:
        exists = path.exists()
    except OSError as err:  # e.g. a name too long for the file system
        raise scope.fail(f"cannot use file {name!r}: {err}") from err
    if not exists:
        raise scope.fail(f"no such file {str(path)!r}")
    arrays = read_npz(path, scope)
    for key, array in arrays.items():
        _check_array(path.name, key, array, scope.at(f"[{key!r}]"))
    return arrays


def _check_array(file: str, key: str, array: np.ndarray, scope: Scope) -> None:
    if array.dtype.kind not in "biuf":
        raise scope.fail(f"{file}: array {key!r} holds {array.dtype} values; expected numbers")
    if array.dtype.kind != "f":  # integers and booleans are finite and below 2**64
        return
    bad = np.argwhere(~(np.abs(array) <= MAX_MAGNITUDE))
    if not len(bad):
        return
    index = tuple(int(i) for i in bad[0])
    value = array[index]
    if np.isfinite(value):
        raise scope.fail(
            f"{file}: array {key!r} has the value {value} at index {list(index)}, beyond "
            f"±{MAX_MAGNITUDE:g}: its square would overflow the second moments; rescale the data"
        )
    raise scope.fail(
        f"{file}: array {key!r} has the non-finite value {value} at index "
        f"{list(index)}; data must be finite numbers"
    )
