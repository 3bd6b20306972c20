"""A saved :class:`~gdln.Trajectory`: the file format, written and read within the limits.

:meth:`gdln.Trajectory.save` writes an ``.npz`` (``t``, ``loss``, ``series/<name>`` and a
text ``meta`` member of JSON) or a ``.json`` file (``t``, ``loss``, ``series``, ``meta``).
The trajectory's :attr:`~gdln.Trajectory.status` and :attr:`~gdln.Trajectory.recording`
are saved in the meta JSON under the keys ``status`` and ``recording``, so that a file
reads in any release: one saved before they were kept (no such keys) loads as completed
with its recording unknown (``None``), and an earlier release reads a new file with both
as two more entries of its ``meta``.

:meth:`gdln.Trajectory.load` reads through gdln's bounded readers (:mod:`gdln._bounded`):
a ``.json`` file as a graph file is read (a regular file of at most ``file_bytes``,
UTF-8, nested at most ``depth`` deep), an ``.npz`` file as a data file is
(:func:`~gdln._bounded._npz.read_npz`: the zip directory, each ``.npy`` header and the
decompressed sizes checked against ``data_bytes`` and ``data_arrays`` before any array is
read; nothing unpickled). ``data_values`` is raised to ``data_bytes`` there: no second
moments follow from a saved result, so its bytes bound what it costs. Its text ``meta`` member must be one
Unicode string whose size the header gives, holding a JSON object. Then the arrays must
fit together (one time axis of at least one finite time, every series with a row per
time), so that a hostile file ends in one :class:`~gdln.GraphSpecError` naming the file
and the key, never a KeyError, a RecursionError or an allocation the file only claims.
"""

from __future__ import annotations

import dataclasses
import io
import json
import struct
import zipfile
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from .._bounded._limits import current_limits, use_limits
from .._bounded._npz import FilePlace, read_npz
from .._bounded._read import open_regular, parse_json, read_text
from .._errors import GraphSpecError, shorten
from ..outputs import atomic_file, save_npz
from ._recording import Recording
from ._status import Status


class Saved(Protocol):
    """What a file keeps of a :class:`~gdln.Trajectory` (its fields, by name)."""

    @property
    def t(self) -> np.ndarray: ...
    @property
    def loss(self) -> np.ndarray: ...
    @property
    def series(self) -> Mapping[str, np.ndarray]: ...
    @property
    def meta(self) -> Mapping[str, Any]: ...
    @property
    def status(self) -> Status: ...
    @property
    def recording(self) -> Recording | None: ...


__all__ = ["read_trajectory", "save_trajectory", "saved_meta", "typed_fields", "typed_json"]

SERIES = "series/"
"""Where an ``.npz`` trajectory keeps its series (:meth:`gdln.Trajectory.save`)."""
STATUS, RECORDING = "status", "recording"
"""The keys of a saved ``meta`` that hold the trajectory's status and recording."""

_ZIP_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    ValueError,
    OSError,
    EOFError,
    RuntimeError,
    NotImplementedError,
    struct.error,
    UnicodeDecodeError,
    SyntaxError,
)


def save_trajectory(trajectory: Saved, path: Path, *, force: bool = False) -> Path:
    """Write ``trajectory`` to ``path`` (``.npz`` or ``.json``), whole or not at all.

    See :meth:`gdln.Trajectory.save`, whose docstring says what is refused.
    """
    if path.suffix not in (".json", ".npz"):
        raise ValueError(f"{path}: suffix must be .npz or .json, got {path.suffix!r}")
    meta = saved_meta(trajectory)
    with atomic_file(path, force=force) as temporary:
        if path.suffix == ".json":
            series = trajectory.series.items()
            payload = {
                "t": trajectory.t.tolist(),
                "loss": trajectory.loss.tolist(),
                "series": {k: np.asarray(v, dtype=float).tolist() for k, v in series},
                "meta": meta,
            }
            temporary.write_text(json.dumps(payload))
        else:
            arrays = {f"{SERIES}{k}": v for k, v in trajectory.series.items()}
            members = {"t": trajectory.t, "loss": trajectory.loss, **arrays}
            save_npz(temporary, {**members, "meta": np.array(json.dumps(meta))}, output=path)
    return path


def saved_meta(trajectory: Saved) -> dict[str, Any]:
    """The meta JSON a file holds: ``trajectory.meta`` with :func:`typed_json`."""
    return dict(trajectory.meta) | typed_json(trajectory)


def typed_json(trajectory: Saved) -> dict[str, Any]:
    """The trajectory's status and recording (where known) as JSON, by their keys."""
    out = {STATUS: trajectory.status.as_json()}
    if trajectory.recording is not None:
        out[RECORDING] = trajectory.recording.as_json()
    return out


def typed_fields(values: Any, source: str, *, within: str = "") -> dict[str, Any]:
    """The keyword arguments ``status`` and ``recording`` of :class:`~gdln.Trajectory`
    read from the keys of :func:`typed_json` in ``values``, which loses them (a file
    without them was saved completed, its recording unknown); ``within`` is where
    ``values`` sits in the file, for messages."""
    fields: dict[str, Any] = {"status": Status(), "recording": None}
    for key, kind in ((STATUS, Status), (RECORDING, Recording)):
        if key in values:
            try:
                fields[key] = kind.from_json(values.pop(key))
            except (ValueError, TypeError) as err:
                raise GraphSpecError(str(err), source=source, key=within + key) from None
    return fields


def read_trajectory(path: Path) -> dict[str, Any]:
    """``t``, ``loss``, ``series`` and ``meta`` of a file written by :meth:`Trajectory.save`.

    Parameters
    ----------
    path
        A ``.json`` file, or any other name read as an ``.npz`` file.

    Returns
    -------
    dict
        The keyword arguments of :class:`~gdln.Trajectory`, checked to fit together
        (``status`` and ``recording`` taken out of the meta JSON).

    Raises
    ------
    GraphSpecError
        The file is missing, not a regular file, beyond a limit, malformed, or its arrays
        do not fit together; the message names the file and the key.
    """
    source = str(path)
    if path.suffix == ".json":
        payload = parse_json(read_text(path, what="trajectory file"), source=source)
        if not isinstance(payload, dict):
            raise GraphSpecError(f"expected a JSON object, got {shorten(payload)}", source=source)
        missing = [key for key in ("t", "loss", "series") if key not in payload]
        if missing:
            raise GraphSpecError(
                f"no {', '.join(missing)}: not a trajectory saved by Trajectory.save", source=source
            )
        series = payload["series"]
        if not isinstance(series, dict):
            raise GraphSpecError(
                f"expected an object, got {shorten(series)}", source=source, key="series"
            )
        arrays = {name: _numbers(value, source, f"series.{name}") for name, value in series.items()}
        t, loss = _numbers(payload["t"], source, "t"), _numbers(payload["loss"], source, "loss")
        meta = payload.get("meta", {})
    else:
        scope = FilePlace(source)
        limits = current_limits()  # no second moments follow: the bytes bound the values
        values = max(limits.data_values, limits.data_bytes)
        with use_limits(dataclasses.replace(limits, data_values=values)):
            found = read_npz(path, scope, skip=("meta",))
        missing = [key for key in ("t", "loss") if key not in found]
        if missing:
            raise GraphSpecError(
                f"no array {', '.join(missing)}: not a trajectory saved by Trajectory.save",
                source=source,
            )
        t, loss = found["t"].astype(float), found["loss"].astype(float)
        arrays = {k[len(SERIES) :]: v for k, v in found.items() if k.startswith(SERIES)}
        meta = _meta(path)
    if not isinstance(meta, dict):
        raise GraphSpecError(
            f"expected a JSON object, got {shorten(meta)}", source=source, key="meta"
        )
    _check_shapes(t, loss, arrays, source)
    meta = dict(meta)
    fields = typed_fields(meta, source, within="meta.")
    return {"t": t, "loss": loss, "series": arrays, "meta": meta, **fields}


def _numbers(value: Any, source: str, key: str) -> np.ndarray:
    """A JSON list (of lists) of numbers as a float array, refusing ragged or other values."""
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError, OverflowError) as err:
        raise GraphSpecError(
            f"expected a (nested) list of numbers of one shape, got {shorten(value)}",
            source=source,
            key=key,
        ) from err
    return array


def _check_shapes(
    t: np.ndarray, loss: np.ndarray, series: dict[str, np.ndarray], source: str
) -> None:
    if t.ndim != 1 or t.size == 0 or not np.all(np.isfinite(t)):
        raise GraphSpecError(
            f"expected at least one finite time in one dimension, got shape {t.shape}",
            source=source,
            key="t",
        )
    for key, value in (("loss", loss), *((f"series/{k}", v) for k, v in series.items())):
        if value.ndim == 0 or len(value) != len(t):
            raise GraphSpecError(
                f"shape {value.shape}: expected one row per time ({len(t)})",
                source=source,
                key=key,
            )


def _meta(path: Path) -> Any:
    """The JSON object of the ``meta`` member (``{}`` if there is none), read bounded."""
    source, limits = str(path), current_limits()
    try:
        handle = open_regular(path, what="data file", limit="data_bytes")
        with handle, zipfile.ZipFile(handle) as archive:
            if "meta.npy" not in archive.namelist():
                return {}
            info = archive.getinfo("meta.npy")
            if info.file_size > limits.data_bytes:
                raise GraphSpecError(
                    limits.exceeded("data_bytes", f"meta of {info.file_size} bytes"),
                    source=source,
                    key="meta",
                )
            with archive.open(info) as member:
                raw = member.read(info.file_size + 1)
        head = io.BytesIO(raw)
        version = np.lib.format.read_magic(head)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(head)
        else:
            shape, _, dtype = np.lib.format.read_array_header_2_0(head)
    except GraphSpecError:
        raise
    except _ZIP_ERRORS as err:
        message = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise GraphSpecError(
            f"cannot read it as an .npz archive: {shorten(message, 120)}", source=source, key="meta"
        ) from err
    start = head.tell()
    if dtype.kind != "U" or shape != () or len(raw) != start + dtype.itemsize:
        raise GraphSpecError(
            f"expected one Unicode string of JSON, got {dtype} of shape {shape} in "
            f"{len(raw) - start} bytes",
            source=source,
            key="meta",
        )
    text = str(np.frombuffer(raw, dtype=dtype, count=1, offset=start)[0])
    return parse_json(text, source=f"{source}: meta")
