"""The constraints of the settings that are not intervals or names: how each is read.

A constraint (:mod:`gdln.settings._constraints`) takes what was given (a keyword, an
option's text, a graph file's value) and returns the value or raises ``ValueError`` with
what it expected; text numbers are read exactly (:class:`fractions.Fraction`), never
evaluated.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from .._device import check_device
from .._errors import shorten
from ._constraints import Constraint, _fraction

__all__ = ["FLAG", "AutoOr", "Device", "ExactReal", "Optional"]


@dataclass(frozen=True)
class Optional(Constraint):
    """``None`` (or ``"none"``), else what ``inner`` reads; messages say ``inner``'s.

    Parameters
    ----------
    inner
        The constraint of a value given.
    """

    inner: Constraint

    def __str__(self) -> str:
        return str(self.inner)

    def read(self, value: Any) -> Any:
        """``None`` for ``None`` or ``"none"``, else ``inner.read(value)``.

        Parameters
        ----------
        value
            The value.

        Returns
        -------
        Any
            ``None`` or the inner value.
        """
        return None if value is None or value == "none" else self.inner.read(value)

    def parse(self, value: Any) -> Any:
        """:meth:`read`, ``inner`` reading text.

        Parameters
        ----------
        value
            The value or its text.

        Returns
        -------
        Any
            ``None`` or the inner value.
        """
        return None if value is None or value == "none" else self.inner.parse(value)


@dataclass(frozen=True)
class AutoOr(Constraint):
    """``"auto"`` (also for ``None``), else what ``inner`` reads.

    Parameters
    ----------
    inner
        The constraint of a value other than ``"auto"``.
    """

    inner: Constraint

    def __str__(self) -> str:
        return f"'auto' or {self.inner}"

    def read(self, value: Any) -> Any:
        """``"auto"`` for ``None`` or ``"auto"``, else ``inner.read(value)``.

        Parameters
        ----------
        value
            The value.

        Returns
        -------
        Any
            ``"auto"`` or the inner value.
        """
        return "auto" if value is None or value == "auto" else self.inner.read(value)

    def parse(self, value: Any) -> Any:
        """:meth:`read`, ``inner`` reading text.

        Parameters
        ----------
        value
            The value or its text.

        Returns
        -------
        Any
            ``"auto"`` or the inner value.
        """
        return "auto" if value is None or value == "auto" else self.inner.parse(value)


class _Flag(Constraint):
    """True or false: a bool, or ``true``/``yes``/``on``/``1`` and their opposites."""

    def __str__(self) -> str:
        return "true or false"

    def read(self, value: Any) -> bool:
        """The flag.

        Parameters
        ----------
        value
            A bool or its text.

        Returns
        -------
        bool
            The flag.
        """
        if isinstance(value, bool):
            return value
        if value in ("true", "yes", "on", "1"):
            return True
        if value in ("false", "no", "off", "0"):
            return False
        raise ValueError(self.refusal(value))


FLAG = _Flag()
"""True or false."""


def _value_error(message: str) -> Any:
    return ValueError(message)


class Device(Constraint):
    """Where a simulation runs, by gdln's one device rule (:func:`gdln._device.check_device`)."""

    def __str__(self) -> str:
        return "'auto', 'cpu' or 'cuda[:k]'"

    def read(self, value: Any) -> str:
        """The device's spelling.

        Parameters
        ----------
        value
            ``"auto"``, ``"cpu"``, ``"cuda[:k]"`` or a torch device.

        Returns
        -------
        str
            The spelling.
        """
        if value == "auto":
            return "auto"
        checked = check_device(value, _value_error)
        return "auto" if checked is None else checked


class ExactReal(Constraint):
    """$b(0)$: an exact real number (``1/10``), or a mapping edge -> value with
    ``default``.

    A text or a float becomes a :class:`~fractions.Fraction` (``0.1`` is 1/10); an int or
    a sympy value (a number, or an expression in symbols the file declares) is kept.
    """

    def __str__(self) -> str:
        return "a real number"

    def read(self, value: Any) -> Any:
        """The exact number, or the mapping of exact numbers.

        Parameters
        ----------
        value
            A number, a numeric text, or a mapping edge -> such a value.

        Returns
        -------
        Any
            The exact value (or mapping).
        """
        if isinstance(value, Mapping):
            out = {}
            for key, item in value.items():
                try:
                    out[key] = self._exact(item)
                except ValueError as err:
                    raise ValueError(f"[{shorten(key)}]: {err}") from None
            return out
        return self._exact(value)

    def _exact(self, value: Any) -> Any:
        wrong = ValueError(self.refusal(value))
        if isinstance(value, bool):
            raise wrong
        if isinstance(value, str):
            number = _fraction(value)
            if number is None:
                raise wrong
            return number
        if isinstance(value, float):
            if not math.isfinite(value):
                raise wrong
            return Fraction(repr(value))
        if isinstance(value, int | Fraction):
            return value
        if getattr(value, "free_symbols", None):  # sympy, in symbols the file declares
            return value
        if getattr(value, "is_extended_real", False) and getattr(value, "is_finite", True):
            return value  # a sympy number
        raise wrong
