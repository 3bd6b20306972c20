"""Internal fields of the frozen results: out of their signatures, kept when they change.

:class:`~gdln.Reduction`, :class:`~gdln.ReducedSystem` and :class:`~gdln.ExpectedDynamics`
carry bookkeeping of their own (bases per node, the polynomial form used for numbers, the
moment program) besides the public fields they are built from. Those fields are declared
``field(init=False, repr=False, compare=False)``, so the signature and ``help()`` show
only the public fields; the function that builds a result gives them their values with
:func:`set_internal`, and :func:`replace` is :func:`dataclasses.replace` that keeps them.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

__all__ = ["replace", "set_internal"]

T = TypeVar("T")


def _internal_names(value: Any) -> list[str]:
    return [f.name for f in dataclasses.fields(value) if not f.init]


def set_internal(value: T, **fields: Any) -> T:
    """Give the frozen ``value`` its internal fields; returns ``value``.

    Raises
    ------
    TypeError
        A name is not an internal field of ``value``.
    """
    known = _internal_names(value)
    unknown = sorted(set(fields) - set(known))
    if unknown:
        raise TypeError(f"{type(value).__name__} has no internal fields {unknown}")
    for name, field_value in fields.items():
        object.__setattr__(value, name, field_value)
    return value


def replace(value: T, **changes: Any) -> T:
    """:func:`dataclasses.replace` that carries the internal fields of ``value`` over."""
    kept = {name: getattr(value, name) for name in _internal_names(value)}
    return set_internal(dataclasses.replace(value, **changes), **kept)  # type: ignore[type-var]
