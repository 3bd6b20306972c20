"""How each setting's value is read and checked: the ``parse`` of a :class:`Declaration`.

A parser takes what was given (a keyword, an option's text, a graph file's value) and
returns the value or raises ``ValueError`` with what it expected; text numbers are read
exactly (:class:`fractions.Fraction`), never evaluated.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

from .._device import check_device
from .._errors import shorten

Parse = Callable[[Any], Any]


def _choice(names: Mapping[str, str]) -> Parse:
    def parse(value: Any) -> str:
        if isinstance(value, str) and value in names:
            return value
        raise ValueError(f"expected one of {', '.join(names)}; got {shorten(value)}")

    return parse


def _fraction(text: str) -> Fraction | None:
    """The exact number a text writes (``"1/10"``, ``"0.1"``, ``"1e-3"``, ``"-2"``), or
    ``None``: text is never evaluated (a graph file's expressions are evaluated by the
    file's reader, in its parameters, before they get here)."""
    try:
        return Fraction(text.strip())
    except (ValueError, ZeroDivisionError):
        return None


def _number(value: Any, expected: str = "a finite number") -> float:
    """A finite real number from a number or a numeric text (``1/10``, ``1e-3``); a
    ``ValueError`` says ``expected`` otherwise."""
    wrong = ValueError(f"expected {expected}, got {shorten(value)}")
    if isinstance(value, str):
        value = _fraction(value)
    if value is None or isinstance(value, bool):
        raise wrong
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    except (TypeError, ValueError):
        raise wrong from None
    if not math.isfinite(number):
        raise wrong
    return number


def _positive(value: Any) -> float:
    expected = "a finite number > 0"
    number = _number(value, expected)
    if number <= 0:
        raise ValueError(f"expected {expected}, got {shorten(value)}")
    return number


def _non_negative(value: Any) -> float:
    expected = "a finite number >= 0"
    number = _number(value, expected)
    if number < 0:
        raise ValueError(f"expected {expected}, got {shorten(value)}")
    return number


def _unit_interval(value: Any) -> float:
    expected = "a number in [0, 1)"
    number = _number(value, expected)
    if not 0 <= number < 1:
        raise ValueError(f"expected {expected}, got {shorten(value)}")
    return number


def _count(least: int) -> Parse:
    def parse(value: Any) -> int:
        if isinstance(value, str):
            value = value.strip()
            if re.fullmatch(r"[+]?\d{1,18}", value):
                value = int(value)
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise ValueError(f"expected an integer >= {least}, got {shorten(value)}")
        if int(value) < least:
            raise ValueError(f"expected an integer >= {least}, got {shorten(value)}")
        return int(value)

    return parse


def _optional(parse: Parse) -> Parse:
    def optional(value: Any) -> Any:
        return None if value is None or value == "none" else parse(value)

    return optional


def _auto_or(parse: Parse) -> Parse:
    def auto_or(value: Any) -> Any:
        return "auto" if value is None or value == "auto" else parse(value)

    return auto_or


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if value in ("true", "yes", "on", "1"):
        return True
    if value in ("false", "no", "off", "0"):
        return False
    raise ValueError(f"expected true or false, got {shorten(value)}")


def _value_error(message: str) -> Any:
    return ValueError(message)


def _device(value: Any) -> str:
    """The device's spelling, by gdln's one device rule (:func:`gdln._device.check_device`)."""
    if value == "auto":
        return "auto"
    checked = check_device(value, _value_error)
    return "auto" if checked is None else checked


def _initial_value(value: Any) -> Any:
    """$b(0)$: an exact number (``1/10``), or a mapping edge -> value with ``default``."""
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            try:
                out[key] = _exact_real(item)
            except ValueError as err:
                raise ValueError(f"[{shorten(key)}]: {err}") from None
        return out
    return _exact_real(value)


def _exact_real(value: Any) -> Any:
    """An exact real number: a text or a float becomes a :class:`~fractions.Fraction`
    (``0.1`` is 1/10), an int or a sympy value (a number, or an expression in declared
    symbols) is kept."""
    wrong = ValueError(f"expected a real number, got {shorten(value)}")
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


_SEEDS = _count(1)
_SEED = _count(0)
_POINTS = _count(2)
