r"""Bounded reading of ``.npz`` data files: no array is read before its size is known.

An ``.npz`` file is a zip archive of ``.npy`` arrays (:func:`numpy.savez`). A hostile one can
claim an array of $10^{12}$ rows in its header, inflate a thousandfold (a zip bomb), hold a
member that is no array at all, or carry a zip directory that lies about the sizes.
:func:`read_npz` pays each cost only once it is bounded:

1. the file must be a regular file of at most ``data_bytes`` bytes
   (:func:`~gdln._bounded._read.open_regular`: a named pipe is refused unopened);
2. the record at the end of the zip directory gives the directory's size, and so the most
   members it can list; these count against ``data_arrays`` before :mod:`zipfile` builds
   one record per member;
3. every member must be an ``.npy`` array, and the decompressed sizes that the directory
   gives must sum to at most ``data_bytes``;
4. each array's ``.npy`` header (read from its first 16 KiB) gives its dtype and shape:
   numbers only (no objects, strings or records), its values counted against
   ``data_values``, and its size in the directory must be the header's plus the data the
   shape implies;
5. the data are then read, in chunks, into an array of exactly that size; a stream that
   ends early or fails its CRC is refused, and :mod:`zipfile` never inflates a member past
   the size the directory gives.

Nothing is unpickled. Each refusal is one error of the :class:`Place`'s class (a graph
file's :class:`~gdln.TaskSpecError`, say) naming the document, its key, the ``.npz`` file and
the array.
"""

from __future__ import annotations

import io
import math
import os
import struct
import zipfile
import zlib
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol

import numpy as np

from .._errors import GraphSpecError, shorten
from ._limits import Limits, count_values, current_limits
from ._read import open_regular

__all__ = ["HEADER_BYTES", "FilePlace", "Place", "read_npz"]

HEADER_BYTES = 16 * 2**10
"""Most bytes of an ``.npy`` member read to find its header (numpy caps the header's
dictionary at 10 000 characters)."""

_NPY_MAGIC = b"\x93NUMPY"
_END = b"PK\x05\x06"  # end of central directory record (22 bytes + comment)
_END64 = b"PK\x06\x06"  # its zip64 version (56 bytes)
_LOCATOR64 = b"PK\x06\x07"  # zip64 end of central directory locator (20 bytes)
_MAX_COMMENT = 2**16 - 1
_DIRECTORY_ENTRY = 46  # bytes of one central directory entry before its name
_CHUNK = 2**20
_NUMBERS = "biuf"  # bool, signed and unsigned integers, floats
_READ_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    ValueError,
    OSError,
    EOFError,
    RuntimeError,  # an encrypted member
    NotImplementedError,  # a compression method zipfile lacks
    struct.error,
    UnicodeDecodeError,
)


class Place(Protocol):
    """Where a document names a data file: the error to raise there, naming the source and
    the key (a graph file's reading scope is one; :class:`FilePlace` another)."""

    @property
    def source(self) -> str:
        """The document (or file) being read, as errors name it."""
        ...

    @property
    def key(self) -> str:
        """The key path in it, ``""`` at the top."""
        ...

    @property
    def error(self) -> type[GraphSpecError]:
        """The error class to raise."""
        ...

    def at(self, part: str) -> Place:
        """The place one key further in (``"[name]"`` is appended as it is)."""
        ...

    def fail(self, message: str) -> GraphSpecError:
        """The error to raise here, naming the source and key."""
        ...


@dataclass(frozen=True)
class FilePlace:
    """A :class:`Place` that is a file read on its own (a weight file, a saved trajectory).

    Parameters
    ----------
    source
        The file, as errors name it.
    key
        The key path errors name, ``""`` for none.
    error
        The error class to raise.
    """

    source: str
    key: str = ""
    error: type[GraphSpecError] = GraphSpecError

    def at(self, part: str) -> FilePlace:
        """The place one key further in: ``"[name]"`` appended as it is, else ``.part``."""
        bare = not self.key or part.startswith(("[", " "))
        return FilePlace(self.source, self.key + part if bare else f"{self.key}.{part}", self.error)

    def fail(self, message: str) -> GraphSpecError:
        """The error to raise here, naming the source and key."""
        return self.error(message, source=self.source, key=self.key or None)


class _Refusal(Exception):
    """A problem with the file (``array`` None) or with one of its arrays."""

    def __init__(self, message: str, array: str | None = None):
        super().__init__(message)
        self.message, self.array = message, array


def read_npz(path: Path, scope: Place, *, skip: Collection[str] = ()) -> dict[str, np.ndarray]:
    """The arrays of the ``.npz`` file ``path``, each bounded before it is read.

    Parameters
    ----------
    path
        The file.
    scope
        Where the document names it (``task.npz``, ``datasets.d.npz``; a :class:`Place`):
        errors name that key, the file and the array.
    skip
        Names of arrays not read (e.g. the text ``meta`` of a saved trajectory); their
        sizes still count against the limits.

    Returns
    -------
    dict
        Array name (its member's name without ``.npy``) -> array, in the archive's order,
        of one of the dtypes bool, int, uint or float.

    Raises
    ------
    GraphSpecError
        (the scope's error class) The file is not a regular file, not an ``.npz``, or
        beyond a limit; an array holds no numbers, or its header, size or data are
        inconsistent.
    """
    file = path.name
    limits = current_limits()
    try:
        handle = open_regular(path, cls=scope.error, what="data file", limit="data_bytes")
    except GraphSpecError as err:
        raise scope.fail(str(err)) from err
    try:
        with handle:
            _check_start(handle)
            room = _count_members(handle, file, scope)
            with zipfile.ZipFile(handle) as archive:
                members = _members(archive, limits)
                settle = len(members) - room  # at most 0: the members the directory lists
                count_values("data_arrays", settle, file, source=scope.source, cls=scope.error)
                return {
                    name: _read_array(archive, info, name, file, scope)
                    for name, info in members.items()
                    if name not in skip
                }
    except GraphSpecError:  # a limit, already naming the file (a ValueError too)
        raise
    except _Refusal as refusal:
        where = scope if refusal.array is None else scope.at(f"[{refusal.array!r}]")
        raise where.fail(f"{file}: {refusal.message}") from None
    except _READ_ERRORS as err:
        message = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise scope.fail(f"{file}: cannot read it as an .npz archive: {message}") from err


def _check_start(handle: BinaryIO) -> None:
    start = handle.read(len(_NPY_MAGIC))
    if start == _NPY_MAGIC:
        raise _Refusal(
            "is a single .npy array, not an .npz archive; save the arrays with "
            "numpy.savez(FILE, name=array, ...)"
        )
    if not start.startswith(b"PK"):
        raise _Refusal("is not an .npz archive (a zip file of .npy arrays, numpy.savez)")


def _count_members(handle: BinaryIO, file: str, scope: Place) -> int:
    """Count the most members the zip directory can list against ``data_arrays``.

    :mod:`zipfile` reads the whole directory, whose size the end record gives, and makes
    one record per entry; an entry takes at least 46 bytes, whatever count the end record
    claims. The end record is found as :mod:`zipfile` finds it (last 22 bytes, else the
    last signature within a comment's reach), and a zip64 record counts where it lies.
    Returns the number counted, settled by the caller once the members are known.
    """
    size = handle.seek(0, os.SEEK_END)
    reach = min(size, 22 + _MAX_COMMENT)
    handle.seek(size - reach)
    tail = handle.read(reach)
    at = len(tail) - 22 if tail[-22:-18] == _END else tail.rfind(_END)
    if at < 0 or len(tail) - at < 22:
        raise _Refusal("is not an .npz archive: no zip directory at its end")
    (directory,) = struct.unpack_from("<I", tail, at + 12)
    sizes = [directory]
    if at >= 20 and tail[at - 20 : at - 16] == _LOCATOR64:
        (pointed,) = struct.unpack_from("<Q", tail, at - 12)
        for offset in {pointed, size - reach + at - 20 - 56}:
            if 0 <= offset <= size - 56:
                handle.seek(offset)
                record = handle.read(56)
                if record[:4] == _END64:
                    sizes.append(struct.unpack_from("<Q", record, 40)[0])
    most = max(sizes) // _DIRECTORY_ENTRY
    count_values(
        "data_arrays",
        most,
        f"{file}: a zip directory of {max(sizes)} bytes, room for {most} arrays,",
        source=scope.source,
        key=scope.key,
        cls=scope.error,
    )
    handle.seek(0)
    return most


def _members(archive: zipfile.ZipFile, limits: Limits) -> dict[str, zipfile.ZipInfo]:
    """Array name -> member; every member an ``.npy`` array, their sizes bounded."""
    members: dict[str, zipfile.ZipInfo] = {}
    total = 0
    for info in archive.infolist():
        name = info.filename
        if info.is_dir() or not name.endswith(".npy"):
            raise _Refusal(
                f"holds the member {shorten(name)}, which is not an .npy array; an .npz "
                "holds only arrays (numpy.savez)"
            )
        if name[:-4] in members:
            raise _Refusal(f"holds two arrays named {shorten(name[:-4])}")
        if info.flag_bits & 0x1:
            raise _Refusal(f"holds the encrypted member {shorten(name)}; expected plain arrays")
        members[name[:-4]] = info
        total += info.file_size
    if total > limits.data_bytes:
        raise _Refusal(limits.exceeded("data_bytes", f"arrays of {total} bytes once decompressed"))
    return members


def _read_array(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, name: str, file: str, scope: Place
) -> np.ndarray:
    """One member: its header checked and its values counted, then its data read."""
    with archive.open(info) as member:
        prefix = member.read(min(info.file_size, HEADER_BYTES))
        head = io.BytesIO(prefix)
        shape, fortran, dtype = _header(head, name)
        values = math.prod(shape)
        count_values(
            "data_values",
            values,
            f"{file}: array {name!r} of shape {shorten(shape)}: {values} values",
            source=scope.source,
            key=scope.at(f"[{name!r}]").key,
            cls=scope.error,
        )
        start = head.tell()
        nbytes = values * dtype.itemsize
        if info.file_size != start + nbytes:
            raise _Refusal(
                f"array {name!r}: the zip directory gives {info.file_size} bytes, but its "
                f"header ({dtype}, shape {shorten(shape)}) implies {start + nbytes}",
                name,
            )
        data = bytearray(nbytes)
        view = memoryview(data)
        got = len(prefix) - start
        view[:got] = prefix[start:]
        while got < nbytes:
            chunk = member.read(min(_CHUNK, nbytes - got))
            if not chunk:
                raise _Refusal(f"array {name!r} ends after {got} of its {nbytes} bytes", name)
            view[got : got + len(chunk)] = chunk
            got += len(chunk)
        if member.read(1):  # zipfile stops at the directory's size; checked all the same
            raise _Refusal(f"array {name!r} holds more than its {nbytes} bytes", name)
    return np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C")


def _header(head: io.BytesIO, name: str) -> tuple[tuple[int, ...], bool, np.dtype]:
    """Shape, Fortran order and dtype from an ``.npy`` header; numbers only."""
    try:
        version = np.lib.format.read_magic(head)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(head)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(head)
        else:
            raise ValueError(f"format version {version}; expected 1.0, 2.0 or 3.0")
    except (ValueError, SyntaxError, RecursionError, MemoryError, TypeError) as err:
        message = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise _Refusal(
            f"array {name!r} has no valid .npy header: {shorten(message)}", name
        ) from err
    if (
        dtype.kind not in _NUMBERS
        or dtype.hasobject
        or dtype.fields is not None
        or dtype.subdtype is not None
    ):
        raise _Refusal(f"array {name!r} holds {dtype} values; expected numbers", name)
    if any(n < 0 for n in shape):
        raise _Refusal(f"array {name!r} has the shape {shorten(shape)}", name)
    return tuple(shape), bool(fortran), dtype
