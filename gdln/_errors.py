"""One exception hierarchy for gdln.

Every message names where the problem is (file, key or node), the value received and
what was expected, so that a person can act on it without reading a traceback.
"""

from __future__ import annotations

import reprlib
from fractions import Fraction
from typing import Any

from .outputs._printable import printable

__all__ = [
    "MAX_MESSAGE",
    "REMOVED_IN",
    "DegenerateStartWarning",
    "GdlnDeprecationWarning",
    "GdlnError",
    "GdlnWarning",
    "GraphSpecError",
    "NotDiagonalizableError",
    "TaskSpecError",
    "TooManyPathsError",
    "shorten",
]

MAX_MESSAGE = 280  # longest message of a GraphSpecError; the CLI adds "gdln: error: "
_SHOWN_VALUE = 60  # longest value a message echoes

REMOVED_IN = "0.3.0"
"""The release that removes the old spellings this one deprecates: two releases on, as
numpy and scikit-learn do. Every deprecation warning names it; CHANGELOG.md lists them."""


class _Repr(reprlib.Repr):
    """:mod:`reprlib` that writes an exact fraction as ``1/10``, as the user wrote it."""

    def repr_Fraction(self, value: Fraction, level: int) -> str:
        return str(value)


def _value_repr() -> reprlib.Repr:
    shown = _Repr()
    shown.maxlevel, shown.maxlist, shown.maxtuple, shown.maxdict = 2, 4, 4, 3
    shown.maxset = shown.maxfrozenset = 4
    shown.maxstring = shown.maxother = shown.maxlong = _SHOWN_VALUE
    return shown


_REPR = _value_repr()


def shorten(value: Any, limit: int = _SHOWN_VALUE) -> str:
    """The ``repr`` of ``value`` for a message, cut in the middle to at most ``limit`` chars.

    Nested containers are elided before they are formatted (:mod:`reprlib`), so a value
    built by a YAML alias bomb costs no more to show than a small one.

    >>> shorten(10**240)
    '1000000000000000000000000000...0000000000000000000000000000 (241 digits)'
    >>> shorten([[1, 2], [3, [4, [5]]], 6, 7, 8])
    '[[1, 2], [3, [...]], 6, 7, ...]'
    """
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 190:
        try:
            digits = str(value)
        except ValueError:  # more digits than sys.get_int_max_str_digits() allows
            return f"<an integer of {value.bit_length()} bits>"
        if len(digits) <= limit:
            return digits
        return f"{digits[: limit // 2 - 2]}...{digits[-(limit // 2 - 2) :]} ({len(digits)} digits)"
    return shorten_text(_REPR.repr(value), limit)


def shorten_text(text: str, limit: int) -> str:
    r"""``text`` cut in the middle to at most ``limit`` characters, on one line, with every
    character that is not printable escaped (:func:`gdln.outputs.printable`).

    >>> shorten_text("a\nb\x1b[2J" + "c" * 40, 20)
    'a b\\x1b[2...cccccccc'
    """
    text = " ".join(text.split()) if "\n" in text or "\r" in text else text
    text = printable(text)
    if len(text) <= limit:
        return text
    keep = max(limit - 3, 2)
    return f"{text[: keep - keep // 2]}...{text[len(text) - keep // 2 :]}"


class GdlnError(Exception):
    """Base class of every error gdln raises on purpose.

    Its text has every character that is not printable escaped
    (:func:`gdln.outputs.printable`): a name from a file cannot rewrite the terminal that
    shows the message.
    """

    def __str__(self) -> str:
        return printable(super().__str__())


class GraphSpecError(GdlnError, ValueError):
    """A graph file, or the parameters it is read with, is malformed.

    Parameters
    ----------
    message
        What is wrong and what was expected.
    source
        The file (or other origin) the problem was found in.
    key
        Where in that file: a key path such as ``edges[2].target``.
    """

    def __init__(self, message: str, *, source: str | None = None, key: str | None = None):
        self.source = source
        self.key = key
        where = ": ".join(
            shorten_text(part, limit) for part, limit in ((source, 100), (key, 80)) if part
        )
        room = MAX_MESSAGE - len(where) - 2
        message = shorten_text(message, room)
        super().__init__(f"{where}: {message}" if where else message)


class TaskSpecError(GraphSpecError):
    """A task (data, gates, contexts) is malformed or does not fit its graph."""


class NotDiagonalizableError(GdlnError, ValueError):
    """The path statistics admit no common bases (Eqs. 7-8 of Saxe et al. 2022).

    The exact reduction of Eq. (10) needs output bases $U_v$ and input bases $V_v$ in
    which every $\\Sigma^{yx}(p)$ and $\\Sigma^{x}(j,p)$ is diagonal. ``paths`` names the
    statistics that stay off-diagonal and ``residual``, in $[0, 1]$, is the largest share
    of one of them (by Frobenius norm) that lies off the diagonal in the best bases
    found: 0 would be diagonal, 1 has nothing on the diagonal. The full-matrix dynamics
    (Eqs. 3-4; ``gdln.solve(problem, route="matrix")``, ``gdln solve FILE --route
    matrix``) still apply.
    """

    def __init__(self, message: str, *, paths: tuple[str, ...] = (), residual: float = 0.0):
        self.paths = paths
        self.residual = residual
        super().__init__(message)


class TooManyPathsError(GdlnError):
    """A problem has too many paths for the symbolic route, which lists them.

    ``paths`` is the number of active input-output paths (counted, not listed). The moment
    route (:func:`gdln.expected_dynamics`) gives the same loss and dynamics without paths.
    """

    def __init__(self, message: str, *, paths: int = 0):
        self.paths = paths
        super().__init__(message)


class GdlnWarning(UserWarning):
    """Base class of every warning gdln gives: the run goes on, but likely not as meant.

    The command line prints each as one line, ``gdln: warning: <message>``.
    """


class GdlnDeprecationWarning(GdlnWarning, FutureWarning):
    """An old spelling (an option, a keyword or a file key) still works, until the release
    :data:`REMOVED_IN` (CHANGELOG.md lists them).

    The message names the new spelling; shown by default (a :class:`FutureWarning`), and
    on the command line as one ``gdln: warning: ...`` line.
    """


class DegenerateStartWarning(GdlnWarning):
    """The initial state is a fixed point of the dynamics, so nothing will change.

    For example $b(0) = 0$ (``--b0 0``): every path through two or more trained edges
    has a zero product and a zero gradient, so the learning curve stays flat.
    """
