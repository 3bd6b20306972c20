"""The errors of writing an output: both name the output the user asked for."""

from __future__ import annotations

import os
from pathlib import Path

from .._errors import GdlnError

__all__ = ["OutputError", "OutputExistsError", "reason", "shown"]

_SHOWN = 100  # most characters of a path a message shows


def shown(path: str | os.PathLike[str]) -> str:
    """``path`` as a message shows it: cut in the middle to at most 100 characters (the
    whole message then fits the command line's line of 300).

    >>> text = shown("out/" + "a" * 200 + ".npz")
    >>> len(text), text[:8], text[46:54], text[-8:]
    (100, 'out/aaaa', 'aa...aaa', 'aaaa.npz')
    """
    text = os.fspath(path)
    text = text if isinstance(text, str) else os.fsdecode(text)
    if len(text) <= _SHOWN:
        return text
    keep = _SHOWN - 3
    return f"{text[: keep // 2]}...{text[len(text) - (keep - keep // 2) :]}"


class OutputError(GdlnError, OSError):
    """An output cannot be written where it was asked for.

    The message names the output (never a temporary name) and the reason, e.g.
    ``out/run.npz: cannot write: No space left on device``; nothing was changed.

    Parameters
    ----------
    message
        The one-line message.
    path
        The output concerned.
    """

    def __init__(self, message: str, *, path: str | os.PathLike[str] | None = None) -> None:
        super().__init__(message)
        self.path = None if path is None else Path(path)


class OutputExistsError(OutputError, FileExistsError):
    """An output exists and ``force`` was not given; nothing was changed.

    Parameters
    ----------
    path
        The existing output.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(
            f"{shown(path)} exists; pass force=True (CLI: --force) to replace it", path=path
        )


def reason(err: OSError) -> str:
    """The operating system's words for ``err`` (``No space left on device``), else its text."""
    return err.strerror or str(err) or type(err).__name__
