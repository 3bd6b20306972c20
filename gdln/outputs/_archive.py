"""Names of the arrays of an ``.npz`` output: each comes back as it was written, or none is
written.

:func:`numpy.savez` stores each array as the zip member ``NAME.npy``, and :mod:`zipfile`
cuts a member's name at its first NUL character (and, on Windows, turns ``\\`` into ``/``):
two series ``W/x\\0a->h`` and ``W/x\\0b->h`` would be written as two members of one name,
``W/x``, of which a reader sees one. :func:`save_npz` refuses such names before anything
is written.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterable, Mapping
from typing import Any

from .._errors import shorten
from ._errors import OutputError, shown

__all__ = ["check_npz_names", "save_npz"]


def check_npz_names(names: Iterable[str], *, output: str | os.PathLike[str]) -> None:
    """Refuse array names that an ``.npz`` file cannot hold as written.

    Parameters
    ----------
    names
        The names of the arrays (:func:`numpy.savez`'s keywords).
    output
        The ``.npz`` file to be written, named in the error.

    Raises
    ------
    OutputError
        A name holds a NUL character or another that the zip format changes, or cannot
        be encoded; two names would make one member. Nothing was written.

    Examples
    --------
    >>> check_npz_names(["t", "series/W/x->h"], output="run.npz")
    >>> check_npz_names(["series/W/x\\x00a->h"], output="run.npz")
    Traceback (most recent call last):
    ...
    gdln.outputs._errors.OutputError: run.npz: the array name 'series/W/x\\x00a->h' would be stored as 'series/W/x' (zip ends a name at NUL); rename it
    """
    members: dict[str, str] = {}
    for name in names:
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            raise OutputError(
                f"{shown(output)}: the array name {shorten(name)} is not valid text (UTF-8)",
                path=output,
            ) from None
        member = zipfile.ZipInfo(f"{name}.npy").filename.removesuffix(".npy")
        if member != name:
            why = " (zip ends a name at NUL)" if "\0" in name else ""
            raise OutputError(
                f"{shown(output)}: the array name {shorten(name)} would be stored as "
                f"{shorten(member)}{why}; rename it",
                path=output,
            )
        if member in members:
            raise OutputError(
                f"{shown(output)}: two arrays named {shorten(name)}; each name is one array",
                path=output,
            )
        members[member] = name


def save_npz(
    file: str | os.PathLike[str], arrays: Mapping[str, Any], *, output: str | os.PathLike[str]
) -> None:
    """:func:`numpy.savez` of ``arrays`` into ``file``, after :func:`check_npz_names`.

    Parameters
    ----------
    file
        Where to write (the temporary file of :func:`gdln.outputs.atomic_file`, say).
    arrays
        Name -> array, in the order of the archive.
    output
        The output the user asked for, named in an error.

    Raises
    ------
    OutputError
        A name that the archive would not hold as written; nothing was written.
    """
    import numpy as np

    check_npz_names(arrays, output=output)
    np.savez(file, **arrays)
