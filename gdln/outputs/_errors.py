"""The errors of writing an output: both name the output the user asked for."""

from __future__ import annotations

import os
from pathlib import Path

from .._errors import GdlnError

__all__ = ["OutputError", "OutputExistsError", "reason"]


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
        super().__init__(f"{path} exists; pass force=True (CLI: --force) to replace it", path=path)


def reason(err: OSError) -> str:
    """The operating system's words for ``err`` (``No space left on device``), else its text."""
    return err.strerror or str(err) or type(err).__name__
