r"""Names from files as gdln prints them: nothing a terminal would act on gets through.

A node id, a context label, a dataset or file name comes from a file or an option and ends
up in error lines, listings and text outputs. Printed raw, ``ESC`` (``\x1b``) starts a
terminal escape sequence that can move the cursor, rewrite the screen or set the window
title; ``BEL``, ``VT``, ``NEL`` (``\x85``), the line and paragraph separators (``\u2028``,
``\u2029``) and the format characters (bidirectional overrides such as ``\u202e``,
zero-width characters) break lines or reorder what a reader sees. :func:`printable`
escapes each such character the way Python's :func:`repr` writes it, and is what every
message and every text output of gdln goes through. :func:`unprintable` says which
character a name holds, for the reader that refuses such names in graph and task files.

A character is printable when :meth:`str.isprintable` says so: letters, marks, numbers,
punctuation, symbols and the ASCII space; not the control (Cc), format (Cf), surrogate
(Cs), private-use (Co) or unassigned (Cn) characters, nor the separators other than the
ASCII space (Zs, Zl, Zp).
"""

from __future__ import annotations

import unicodedata

__all__ = ["printable", "unprintable"]

_KINDS = {
    "Cc": "control character",
    "Cf": "format character",
    "Cs": "surrogate",
    "Co": "private-use character",
    "Cn": "unassigned character",
    "Zl": "line separator",
    "Zp": "paragraph separator",
    "Zs": "space character",
}


def _escape(char: str) -> str:
    return repr(char)[1:-1] if char != "'" else char


def printable(text: str, *, keep: str = "") -> str:
    r"""``text`` with every character that is not printable escaped as :func:`repr` writes it.

    The result holds no control, format or separator character other than the ASCII
    space and those in ``keep``, so that printing it cannot move a terminal's cursor,
    change its state or reorder the text around it. Backslashes are left as they are
    (LaTeX outputs hold them), so an escape is not told from the same characters
    written out; names that hold such characters are refused in graph and task files.
    Escaping twice gives the same text as escaping once.

    Parameters
    ----------
    text
        What is to be printed.
    keep
        Characters to print as they are, e.g. ``"\n"`` for a text of several lines.

    Returns
    -------
    str
        ``text``, escaped.

    Examples
    --------
    >>> printable("x\x1b]0;title\x07")
    'x\\x1b]0;title\\x07'
    >>> print(printable("a\u2028b\u202ec\nd", keep="\n"))
    a\u2028b\u202ec
    d
    """
    if text.isprintable():
        return text
    if keep and all(part.isprintable() for part in _split(text, keep)):
        return text
    return "".join(c if c.isprintable() or c in keep else _escape(c) for c in text)


def _split(text: str, keep: str) -> list[str]:
    for char in keep[1:]:
        text = text.replace(char, keep[0])
    return text.split(keep[0])


def unprintable(text: str) -> str | None:
    r"""The first character of ``text`` that :func:`printable` escapes, described.

    Parameters
    ----------
    text
        A name (a node id, a label, a key).

    Returns
    -------
    str or None
        E.g. ``"the control character U+001B ('\x1b')"``; ``None`` when every character
        is printable.

    Examples
    --------
    >>> unprintable("h1") is None
    True
    >>> unprintable("x\x1b[2J")
    "the control character U+001B ('\\x1b')"
    >>> unprintable("a\u2028b")
    "the line separator U+2028 ('\\u2028')"
    """
    if text.isprintable():
        return None
    char = next(c for c in text if not c.isprintable())
    kind = _KINDS.get(unicodedata.category(char), "character")
    return f"the {kind} U+{ord(char):04X} ('{_escape(char)}')"
