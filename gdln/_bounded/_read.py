"""Bounded reading of any file gdln reads: every failure becomes one short error.

Reading goes in the order that keeps the cost of a hostile file small: the file's kind and
size are checked before it is read (a named pipe, a device or a folder is refused
unopened), at most the limit plus one byte is read, the bytes are decoded strictly, and a
JSON document is parsed, then checked without recursion, refusing a key given twice. Graph
and task files (:mod:`gdln.graphfile`), saved trajectories, weight files and sweep tables
are all read here, within :class:`~gdln._bounded._limits.Limits`.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any, BinaryIO

from .._errors import GraphSpecError, shorten
from ._limits import current_limits

__all__ = ["open_regular", "parse_json", "read_bytes", "read_text"]

_ErrorClass = type[GraphSpecError]
_CHUNK = 2**20


_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # open() of a FIFO then returns at once
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _refuse_unless_regular(mode: int, cls: _ErrorClass, source: str, what: str) -> None:
    if stat.S_ISREG(mode):
        return
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    if kind == "a directory":  # the message users of earlier versions know
        raise cls(f"is a directory; expected a {what}", source=source)
    raise cls(f"is {kind}, not a regular file; expected a {what}", source=source)


def open_regular(
    path: Path, *, cls: _ErrorClass = GraphSpecError, what: str = "file", limit: str = "file_bytes"
) -> BinaryIO:
    """``path`` opened for binary reading: a regular file no larger than limit ``limit``.

    A directory, named pipe, device or socket is refused before it is opened, and again
    on the opened descriptor (it may have been replaced in between); the file is opened
    non-blocking, so that not even a pipe swapped in at that moment can block ``open``.
    """
    source, limits = str(path), current_limits()
    bound = getattr(limits, limit)
    try:
        _refuse_unless_regular(path.stat().st_mode, cls, source, what)
        fd = os.open(path, os.O_RDONLY | _NONBLOCK | getattr(os, "O_BINARY", 0))
        try:
            info = os.fstat(fd)
            _refuse_unless_regular(info.st_mode, cls, source, what)
            if info.st_size > bound:
                raise cls(limits.exceeded(limit, f"{info.st_size} bytes"), source=source)
            return os.fdopen(fd, "rb")
        except BaseException:
            os.close(fd)
            raise
    except FileNotFoundError as err:
        raise cls(f"no such {what}", source=source) from err
    except OSError as err:  # permission, a loop of links, a name too long, an I/O error
        raise cls(f"cannot read the {what}: {err.strerror or err}", source=source) from err


def read_bytes(path: Path, *, cls: _ErrorClass = GraphSpecError, what: str = "file") -> bytes:
    """The bytes of ``path``, refusing a missing, unreadable, too large or not regular
    file (a directory, a named pipe, a device) unread (:func:`open_regular`)."""
    source, limits = str(path), current_limits()
    with open_regular(path, cls=cls, what=what) as handle:
        try:
            data = _read_at_most(handle, limits.file_bytes)
        except OSError as err:
            raise cls(f"cannot read the {what}: {err.strerror or err}", source=source) from err
    if len(data) > limits.file_bytes:  # a file that grew while being read
        raise cls(limits.exceeded("file_bytes", "more bytes"), source=source)
    return data


def _read_at_most(handle: BinaryIO, most: int) -> bytes:
    """The bytes of ``handle`` up to ``most + 1`` (one more tells a file over the limit),
    read in chunks: ``read(n)`` makes room for ``n`` bytes first, and a limit raised to
    10^11 must not cost 100 GB to read a small file."""
    size = os.fstat(handle.fileno()).st_size
    chunks = [handle.read(min(size, most) + 1)]
    total = len(chunks[0])
    while chunks[-1] and total <= most:  # the file grew after fstat
        chunks.append(handle.read(min(_CHUNK, most + 1 - total)))
        total += len(chunks[-1])
    return b"".join(chunks)


def read_text(path: Path, *, cls: _ErrorClass = GraphSpecError, what: str = "file") -> str:
    """The text of ``path``: :func:`read_bytes`, decoded as UTF-8 (a BOM is allowed)."""
    data = read_bytes(path, cls=cls, what=what)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise cls(
            f"not UTF-8 text: byte 0x{data[err.start]:02x} at line {line}; save it as UTF-8",
            source=str(path),
        ) from err


class _RepeatedKey(Exception):
    """A JSON object that gives one key twice."""


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object as a dict, refusing a key given twice (``json`` keeps the last)."""
    out = dict(pairs)
    if len(out) < len(pairs):
        seen: dict[str, Any] = {}
        for key, value in pairs:
            if key in seen:
                raise _RepeatedKey(
                    f"repeated key {shorten(key, 40)} in one object: {shorten(seen[key], 40)}, "
                    f"then {shorten(value, 40)}; an object gives each key once"
                )
            seen[key] = value
    return out


def parse_json(text: str, *, source: str, cls: _ErrorClass = GraphSpecError) -> Any:
    """Parse a JSON document; refuse it if an object gives a key twice or if it is nested
    deeper than the current limit."""
    limits = current_limits()
    try:
        data = json.loads(text, object_pairs_hook=_object)
    except _RepeatedKey as err:
        raise cls(str(err), source=source) from None
    except RecursionError as err:
        raise cls(limits.exceeded("depth", "deeply nested JSON"), source=source) from err
    except ValueError as err:  # JSONDecodeError, an int of 5000 digits
        raise cls(f"malformed JSON: {err}".splitlines()[0], source=source) from err
    pending: list[tuple[Any, int]] = [(data, 0)]
    while pending:
        value, depth = pending.pop()
        children = value.values() if isinstance(value, dict) else value
        if not isinstance(value, (dict, list)):
            continue
        if depth + 1 > limits.depth:
            raise cls(limits.exceeded("depth", f"nesting {depth + 1} deep"), source=source)
        pending.extend((child, depth + 1) for child in children)
    return data
