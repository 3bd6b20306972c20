r"""The ``datasets:`` of a graph or task file, and the matrices and ``.npz`` files they hold.

A dataset is given in one of four forms: ``builtin:`` (a name from
:data:`gdln.task._builtin.BUILTIN_DATASETS` and its settings), ``examples:`` (rows per
field, with optional ``weights:``), ``moments:`` (exact second moments
$\langle a\,b^\top\rangle$) or ``npz:`` (a file of float arrays, one per field).
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import sympy as sp

from .._errors import GraphSpecError
from ..task._builtin import BUILTIN_DATASETS
from ..task._task import Dataset
from ._document import Scope, mapping, text

__all__ = ["load_npz", "read_datasets", "read_matrix"]

FORMS = ("builtin", "examples", "moments", "npz")


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
        raise scope.fail(f"give one of 'builtin', 'examples', 'moments' or 'npz', not {forms}")
    if not forms:
        raise scope.fail("expected one of 'builtin', 'examples', 'moments' or 'npz'")
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
    try:
        return BUILTIN_DATASETS[which](name, **settings)
    except (TypeError, ValueError) as err:
        raise scope.fail(f"builtin {which!r}: {err}") from err


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
        weights = read_matrix([spec["weights"]], scope.at("weights")).T
        if any(w.is_negative for w in weights) or weights.rows != sizes.pop():
            raise scope.at("weights").fail("weights must be non-negative, one per example")
    fields = {f: m.cols for f, m in examples.items()}
    return Dataset(name=name, fields=fields, examples=examples, weights=weights)


def _moments(name: str, spec: Mapping[str, Any], scope: Scope) -> Dataset:
    here = scope.at("moments")
    moments: dict[tuple[str, str], Any] = {}
    fields: dict[str, int] = {}
    for a, row in mapping(spec["moments"], here).items():
        a = text(a, here.at(str(a)), what="a field name")
        for b, value in mapping(row, here.at(a)).items():
            b = text(b, here.at(a, str(b)), what="a field name")
            m = read_matrix(value, here.at(a, b))
            moments[(a, b)] = m
            for f, dim in ((a, m.rows), (b, m.cols)):
                if fields.setdefault(f, dim) != dim:
                    raise here.at(a, b).fail(
                        f"field {f!r} has dimension {dim} here but {fields[f]} elsewhere"
                    )
    for f in fields:
        if (f, f) not in moments:
            raise here.fail(f"missing moment {f}.{f} (the second moment of field {f!r})")
    return Dataset(name=name, fields=fields, moments_given=moments)


def _npz(name: str, spec: Mapping[str, Any], scope: Scope) -> Dataset:
    arrays = load_npz(spec["npz"], scope.at("npz"))
    for f, array in arrays.items():
        if not 1 <= array.ndim <= 2:
            raise scope.at("npz").fail(
                f"array {f!r} has shape {array.shape}; expected (examples, dimension)"
            )
    examples = {f: np.atleast_2d(a.astype(float).T).T for f, a in arrays.items() if f != "weights"}
    return Dataset(
        name=name,
        fields={f: a.shape[1] for f, a in examples.items()},
        examples=examples,
        weights=arrays.get("weights"),
    )


_READERS: dict[str, Callable[[str, Mapping[str, Any], Scope], Dataset]] = {
    "builtin": _builtin,
    "examples": _examples,
    "moments": _moments,
    "npz": _npz,
}


def read_matrix(value: Any, scope: Scope) -> sp.ImmutableMatrix:
    """An exact matrix: a number, a row ``[a, b]`` or rows ``[[a, b], [c, d]]``."""
    rows = value if isinstance(value, list) else [value]
    if rows and not isinstance(rows[0], list):
        rows = [rows]
    if (
        not rows
        or not all(isinstance(row, list) for row in rows)
        or len({len(row) for row in rows}) != 1
        or not rows[0]
    ):
        raise scope.fail(
            f"expected a number, a list or a list of equally long lists, got {value!r}"
        )
    try:
        return sp.ImmutableMatrix([[scope.number(x) for x in row] for row in rows])
    except GraphSpecError:
        raise
    except (ValueError, TypeError) as err:
        raise scope.fail(f"expected a number, a list or a list of lists, got {value!r}") from err


def load_npz(name: Any, scope: Scope) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` file named relative to the document's folder.

    Every array must hold finite numbers; nothing is unpickled.
    """
    if not isinstance(name, str) or not name:
        raise scope.fail(f"expected a file name, got {name!r}")
    path = (scope.folder / name).resolve()
    try:
        exists = path.is_file()
    except OSError as err:  # e.g. a name too long for the file system
        raise scope.fail(f"cannot use file {name!r}: {err}") from err
    if not exists:
        raise scope.fail(f"no such file {str(path)!r}")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: np.asarray(data[k]) for k in data.files}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as err:
        raise scope.fail(f"cannot read {str(path)!r}: {err}") from err
    for key, array in arrays.items():
        _check_array(path.name, key, array, scope.at(f"[{key!r}]"))
    return arrays


def _check_array(file: str, key: str, array: np.ndarray, scope: Scope) -> None:
    if array.dtype.kind not in "biuf":
        raise scope.fail(f"{file}: array {key!r} holds {array.dtype} values; expected numbers")
    bad = np.argwhere(~np.isfinite(array))
    if len(bad):
        index = tuple(int(i) for i in bad[0])
        raise scope.fail(
            f"{file}: array {key!r} has the non-finite value {array[index]} at "
            f"index {list(index)}; data must be finite numbers"
        )
