"""Constraints that carry their message: one object per kind of value.

As scikit-learn's ``utils._param_validation`` does with ``Interval`` and ``StrOptions``, a
reader (a setting's declaration, a command-line option, a function's check of its
arguments) names the constraint a value must meet and where the value came from; the
constraint reads the value, checks it and words the one-line refusal::

    t_max: expected a finite number > 0, got -1

Each kind of value is declared once below (:data:`POSITIVE`, :data:`NON_NEGATIVE`,
:data:`UNIT_INTERVAL`, :data:`PROBABILITY`, :data:`FINITE`, :func:`at_least`); what a
value must be is said by the constraint, never written again beside it.

>>> POSITIVE.parse("1/10")
0.1
>>> POSITIVE.check("lr", 0)
Traceback (most recent call last):
...
gdln._errors.GdlnError: lr: expected a finite number > 0, got 0
>>> str(at_least(2)), str(UNIT_INTERVAL)
('an integer >= 2', 'a number in [0, 1)')
"""

from __future__ import annotations

import functools
import math
import numbers
import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from .._errors import GdlnError, shorten

__all__ = [
    "FINITE",
    "NON_NEGATIVE",
    "POSITIVE",
    "PROBABILITY",
    "UNIT_INTERVAL",
    "Constraint",
    "Interval",
    "Options",
    "at_least",
]


class Constraint:
    """What a value must be, said once: :meth:`read` checks and converts a Python value,
    :meth:`parse` also reads text (an option, a graph file), and every refusal says
    ``expected <what>, got <value>``."""

    def read(self, value: Any) -> Any:
        """``value`` converted (a float, an int, a name), else a ``ValueError`` whose text
        is :meth:`refusal`.

        Parameters
        ----------
        value
            What was given in Python: a number, a name.

        Returns
        -------
        Any
            The value, converted.

        Raises
        ------
        ValueError
            The value does not meet the constraint.
        """
        raise NotImplementedError

    def parse(self, value: Any) -> Any:
        """Like :meth:`read`, also reading numeric text (``"1/10"``, ``"1e-3"``, ``"5"``)
        exactly, never evaluated: the reader of settings, options and graph files.

        Parameters
        ----------
        value
            A value or its text.

        Returns
        -------
        Any
            The value, converted.

        Raises
        ------
        ValueError
            The value does not meet the constraint.
        """
        return self.read(value)

    def refusal(self, value: Any) -> str:
        """``expected <this constraint>, got <value>``: the message of every reader.

        Parameters
        ----------
        value
            The value refused.

        Returns
        -------
        str
            The refusal, without the name of what was read.
        """
        return f"expected {self}, got {shorten(value)}"

    def check(self, name: str, value: Any, *, cls: type[GdlnError] = GdlnError) -> Any:
        """:meth:`read`, refusing with ``cls("<name>: expected ..., got ...")``.

        Parameters
        ----------
        name
            What the value is (a keyword, an option, ``file: key``), named first.
        value
            The value.
        cls
            The error class to raise.

        Returns
        -------
        Any
            The value, converted.

        Raises
        ------
        GdlnError
            (``cls``) The value does not meet the constraint.
        """
        try:
            return self.read(value)
        except ValueError:
            raise cls(f"{name}: {self.refusal(value)}") from None


_INTEGER_TEXT = re.compile(r"[+]?\d{1,18}")


def _fraction(text: str) -> Fraction | None:
    """The exact number a text writes (``"1/10"``, ``"0.1"``, ``"1e-3"``, ``"-2"``), or
    ``None``: text is never evaluated."""
    try:
        return Fraction(text.strip())
    except (ValueError, ZeroDivisionError):
        return None


@dataclass(frozen=True)
class Interval(Constraint):
    """A real number (``kind`` :class:`numbers.Real`, finite) or an integer
    (:class:`numbers.Integral`) between two bounds.

    A bool is no number; :meth:`parse` reads numeric text (``"1/10"``, ``"1e-3"``; an
    integer's decimal digits) exactly, never evaluated.

    Parameters
    ----------
    kind
        :class:`numbers.Real` or :class:`numbers.Integral`.
    low, high
        The bounds, ``None`` for none.
    closed
        Which bounds belong to the interval: ``"left"``, ``"right"``, ``"both"`` or
        ``"neither"``.
    noun
        How an integer is named in messages (``"integer"``; ``"int"`` where a reader's
        messages have always said so).
    """

    kind: type
    low: float | None = None
    high: float | None = None
    closed: str = "left"
    noun: str = "integer"

    def __str__(self) -> str:
        left = "[" if self.closed in ("left", "both") else "("
        right = "]" if self.closed in ("right", "both") else ")"
        if self.kind is numbers.Integral:
            if self.high is None and self.low is not None:
                sign = ">=" if left == "[" else ">"
                return f"an {self.noun} {sign} {self.low}"
            return f"an {self.noun} in {left}{self.low}, {self.high}{right}"
        if self.low is None and self.high is None:
            return "a finite number"
        if self.high is None:
            return f"a finite number {'>=' if left == '[' else '>'} {self.low}"
        if self.low is None:
            return f"a finite number {'<=' if right == ']' else '<'} {self.high}"
        return f"a number in {left}{self.low}, {self.high}{right}"

    def accepts(self, number: float) -> bool:
        """Whether a number (of the right kind) lies within the bounds.

        Parameters
        ----------
        number
            The number.

        Returns
        -------
        bool
            ``True`` inside the interval.
        """
        if self.low is not None:
            inside = number >= self.low if self.closed in ("left", "both") else number > self.low
            if not inside:
                return False
        if self.high is not None:
            closed = self.closed in ("right", "both")
            return number <= self.high if closed else number < self.high
        return True

    def read(self, value: Any) -> Any:
        """``value`` as a float (or an int), else a ``ValueError`` saying what was expected.

        Parameters
        ----------
        value
            A number (a bool is none).

        Returns
        -------
        float or int
            The value.

        Raises
        ------
        ValueError
            Not a number of the kind, not finite, or outside the bounds.
        """
        return self._checked(value, value)

    def parse(self, value: Any) -> Any:
        """:meth:`read`, numeric text read exactly first (a refusal shows the text).

        Parameters
        ----------
        value
            A number or numeric text.

        Returns
        -------
        float or int
            The value.

        Raises
        ------
        ValueError
            Not a number of the kind, not finite, or outside the bounds.
        """
        if not isinstance(value, str):
            return self.read(value)
        text = value.strip()
        if self.kind is numbers.Integral:  # an integer read is shown as read: got 0
            number: Any = int(text) if _INTEGER_TEXT.fullmatch(text) else None
            return self._checked(number, value if number is None else number)
        return self._checked(_fraction(text), value)  # a number's text is shown as written

    def _checked(self, value: Any, given: Any) -> Any:
        """``value`` converted and checked; a refusal names ``given``."""
        number = self._integer(value) if self.kind is numbers.Integral else self._real(value)
        if number is None or not self.accepts(number):
            raise ValueError(self.refusal(given))
        return number

    @staticmethod
    def _real(value: Any) -> float | None:
        if value is None or isinstance(value, bool | str):
            return None
        try:
            number = float(value)
        except (OverflowError, TypeError, ValueError):
            return None
        return number if math.isfinite(number) else None

    @staticmethod
    def _integer(value: Any) -> int | None:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            return None
        return int(value)


@dataclass(frozen=True, eq=False)
class Options(Constraint):
    """One of a table of names (:data:`gdln.settings.LUMPINGS` and the like).

    Parameters
    ----------
    names
        Each name with its meaning, in the order messages list them.
    """

    names: Mapping[str, str]

    def __str__(self) -> str:
        return f"one of {', '.join(self.names)}"

    def refusal(self, value: Any) -> str:
        """``expected one of a, b, c; got <value>``.

        Parameters
        ----------
        value
            The value refused.

        Returns
        -------
        str
            The refusal.
        """
        return f"expected {self}; got {shorten(value)}"

    def read(self, value: Any) -> str:
        """``value``, if it is one of the names.

        Parameters
        ----------
        value
            A name.

        Returns
        -------
        str
            The name.

        Raises
        ------
        ValueError
            Not one of the names.
        """
        if isinstance(value, str) and value in self.names:
            return value
        raise ValueError(self.refusal(value))


POSITIVE = Interval(numbers.Real, 0, None, closed="neither")
"""A finite number > 0: a horizon, a learning rate, a scale that must not vanish."""

NON_NEGATIVE = Interval(numbers.Real, 0, None, closed="left")
"""A finite number >= 0: a weight decay, an initial scale."""

UNIT_INTERVAL = Interval(numbers.Real, 0, 1, closed="left")
"""A number in [0, 1): a momentum."""

PROBABILITY = Interval(numbers.Real, 0, 1, closed="both")
"""A number in [0, 1]: a probability, a share."""

FINITE = Interval(numbers.Real)
"""A finite number."""


@functools.cache
def at_least(least: int, *, noun: str = "integer") -> Interval:
    """An integer >= ``least``: a count, a number of points, a seed.

    Parameters
    ----------
    least
        The smallest integer allowed.
    noun
        How messages name it (``"integer"``; ``"int"`` where a reader always said so).

    Returns
    -------
    Interval
        The constraint (one object per bound).
    """
    return Interval(numbers.Integral, least, None, closed="left", noun=noun)
