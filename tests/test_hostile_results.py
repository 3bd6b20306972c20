"""Hostile saved results: sweep tables, sweep grids and saved trajectories.

:func:`gdln.sweep.read_table`, :func:`gdln.run_sweep` and :meth:`gdln.Trajectory.load` read
files that people pass around; each hostile payload (a named pipe, a device, a file beyond
the limits, two rows for one point, a grid of 10^9 points, a lying ``.npy`` header, deep
nesting, missing or ill-fitting arrays) ends quickly in one gdln error naming the file,
never in a hang, an exhausted memory, a KeyError or a RecursionError. The array functions
beside them (:func:`gdln.time_to_half_loss`) refuse empty and non-finite input.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

import gdln
from gdln.solution._loss_curve import time_to_half_loss
from gdln.sweep import SweepSpecError, SweepTableError, read_table, run_sweep


def square(x: int) -> dict[str, int]:
    return {"y": x * x}


def _fifo(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    os.mkfifo(path)
    return path


def _device(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.symlink_to("/dev/zero")
    return path


# ------------------------------------------------------------------ sweep tables
@pytest.mark.parametrize("make", [_fifo, _device], ids=["fifo", "/dev/zero"])
def test_read_table_refuses_what_is_no_regular_file_unopened(tmp_path: Path, make) -> None:  # type: ignore[no-untyped-def]
    path = make(tmp_path, "table.csv")
    start = time.perf_counter()
    with pytest.raises(SweepTableError, match=r"not a regular file; expected a sweep table"):
        read_table(path)
    assert time.perf_counter() - start < 2


def test_read_table_refuses_a_table_beyond_the_limits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "table.csv"
    path.write_text("x,y\n" + "".join(f"{i},{i * i}\n" for i in range(50)))
    assert len(read_table(path)) == 50
    monkeypatch.setenv("GDLN_MAX_DATA_BYTES", "100")
    with pytest.raises(SweepTableError, match=r"exceeds the limit data_bytes=100 .*GDLN_MAX_DATA"):
        read_table(path)
    with pytest.raises(SweepTableError, match="data_bytes=100"):
        run_sweep(square, [{"x": 1}], table=path, workers=1)
    monkeypatch.delenv("GDLN_MAX_DATA_BYTES")
    monkeypatch.setenv("GDLN_MAX_DATA_VALUES", "40")
    with pytest.raises(SweepTableError, match=r"table of 102 cells exceeds the limit data_values"):
        read_table(path)


def test_a_header_of_a_million_columns_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    path = tmp_path / "table.csv"
    path.write_bytes(b"a," * 3_000_000 + b"b\n")
    with pytest.raises(SweepTableError, match="data_values"):
        read_table(path)


def test_two_rows_for_one_point_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "table.csv"
    path.write_text("x,y\n1,1\n2,4\n2,5\n")
    with pytest.raises(SweepTableError, match=r"two rows for the point \{'x': 2\}"):
        run_sweep(square, [{"x": 1}, {"x": 2}, {"x": 3}], table=path, workers=1)
    assert path.read_text() == "x,y\n1,1\n2,4\n2,5\n"  # nothing written


def test_a_huge_grid_is_refused_before_it_is_expanded(monkeypatch: pytest.MonkeyPatch) -> None:
    start = time.perf_counter()
    grid = ({"a": a, "b": b} for a, b in itertools.product(range(10**5), range(10**4)))
    with pytest.raises(SweepSpecError, match=r"more than 100000 points exceeds the limit points"):
        run_sweep(square, grid, table="never-written.csv", workers=1)
    assert time.perf_counter() - start < 5
    assert not Path("never-written.csv").exists()
    monkeypatch.setenv("GDLN_MAX_POINTS", "3")
    with pytest.raises(SweepSpecError, match=r"grid of 4 points exceeds the limit points=3"):
        run_sweep(square, [{"x": i} for i in range(4)], table="never-written.csv", workers=1)


# ------------------------------------------------------------------ saved trajectories
def _trajectory_json(tmp_path: Path, payload: object, name: str = "t.json") -> Path:
    path = tmp_path / name
    path.write_text(payload if isinstance(payload, str) else json.dumps(payload))
    return path


GOOD = {"t": [0.0, 1.0], "loss": [1.0, 0.5], "series": {"B1": [[1.0], [2.0]]}, "meta": {}}

JSON_PAYLOADS = {
    "no t": ({k: v for k, v in GOOD.items() if k != "t"}, "no t"),
    "not an object": ([1, 2], "expected a JSON object"),
    "deep meta": ('{"t": [0], "loss": [1], "series": {}, "meta": ' + "[" * 50_000, "depth"),
    "ragged series": ({**GOOD, "series": {"B1": [[1.0], [2.0, 3.0]]}}, "series.B1"),
    "text series": ({**GOOD, "series": {"B1": ["a", "b"]}}, "series.B1"),
    "rows": ({**GOOD, "series": {"B1": [1.0, 2.0, 3.0]}}, "one row per time"),
    "scalar series": ({**GOOD, "series": {"B1": 3.0}}, "one row per time"),
    "no times": ({**GOOD, "t": [], "loss": [], "series": {}}, "at least one finite time"),
    "nan time": ({**GOOD, "t": [0.0, float("nan")]}, "at least one finite time"),
    "meta list": ({**GOOD, "meta": [1]}, "meta: expected a JSON object"),
    "not json": ("{t: 1", "malformed JSON"),
}


@pytest.mark.parametrize("kind", list(JSON_PAYLOADS))
def test_load_refuses_a_hostile_json_trajectory(kind: str, tmp_path: Path) -> None:
    payload, needle = JSON_PAYLOADS[kind]
    path = _trajectory_json(tmp_path, payload)
    with pytest.raises(gdln.GraphSpecError, match=needle) as info:
        gdln.Trajectory.load(path)
    assert str(path) in str(info.value) and len(str(info.value)) <= 300


def _npz(tmp_path: Path, members: dict[str, bytes], name: str = "t.npz") -> Path:
    path = tmp_path / name
    with zipfile.ZipFile(path, "w") as archive:
        for member, data in members.items():
            archive.writestr(member, data)
    return path


def _npy(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.lib.format.write_array(out, array, allow_pickle=False)
    return out.getvalue()


def _lying_header(shape: tuple[int, ...], descr: str = "<f8") -> bytes:
    """An ``.npy`` member whose header claims ``shape`` of ``descr`` and whose data are 8
    bytes."""
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        out, {"descr": descr, "fortran_order": False, "shape": shape}
    )
    return out.getvalue() + b"\0" * 8


def _meta(value: object) -> bytes:
    return _npy(np.array(json.dumps(value)))


NPZ_PAYLOADS = {
    "7 TiB claimed": (
        {"t.npy": _lying_header((10**12,)), "loss.npy": _npy(np.ones(1)), "meta.npy": _meta({})},
        "data_values|implies",
    ),
    "no t": ({"loss.npy": _npy(np.ones(2)), "meta.npy": _meta({})}, "no array t"),
    "pickled meta": (
        {"t.npy": _npy(np.zeros(1)), "loss.npy": _npy(np.ones(1)), "meta.npy": b"\x80\x04K\x01."},
        "meta",
    ),
    "numeric meta": (
        {"t.npy": _npy(np.zeros(1)), "loss.npy": _npy(np.ones(1)), "meta.npy": _npy(np.ones(3))},
        "expected one Unicode string",
    ),
    "deep meta": (
        {
            "t.npy": _npy(np.zeros(1)),
            "loss.npy": _npy(np.ones(1)),
            "meta.npy": _npy(np.array("[" * 50_000)),
        },
        "depth",
    ),
    "object series": (
        {
            "t.npy": _npy(np.zeros(1)),
            "loss.npy": _npy(np.ones(1)),
            "series/x.npy": _lying_header((1,), "|O") + b"\x80\x04N.",
            "meta.npy": _meta({}),
        },
        "expected numbers",
    ),
    "series rows": (
        {
            "t.npy": _npy(np.zeros(2)),
            "loss.npy": _npy(np.ones(2)),
            "series/B1.npy": _npy(np.ones(3)),
            "meta.npy": _meta({}),
        },
        "one row per time",
    ),
    "not a zip": ({}, "not an .npz"),
}


@pytest.mark.parametrize("kind", list(NPZ_PAYLOADS))
def test_load_refuses_a_hostile_npz_trajectory(kind: str, tmp_path: Path) -> None:
    members, needle = NPZ_PAYLOADS[kind]
    path = _npz(tmp_path, members) if members else tmp_path / "t.npz"
    if not members:
        path.write_bytes(b"hello, not a zip file")
    start = time.perf_counter()
    with pytest.raises(gdln.GraphSpecError, match=needle) as info:
        gdln.Trajectory.load(path)
    assert str(path) in str(info.value) and len(str(info.value)) <= 300
    assert time.perf_counter() - start < 5


@pytest.mark.parametrize("make", [_fifo, _device], ids=["fifo", "/dev/zero"])
@pytest.mark.parametrize("suffix", [".npz", ".json"])
def test_load_refuses_what_is_no_regular_file(tmp_path: Path, make, suffix: str) -> None:  # type: ignore[no-untyped-def]
    path = make(tmp_path, "t" + suffix)
    with pytest.raises(gdln.GraphSpecError, match="not a regular file"):
        gdln.Trajectory.load(path)


def test_saved_trajectories_still_load(tmp_path: Path) -> None:
    trajectory = gdln.Trajectory(
        t=np.linspace(0.0, 1.0, 5),
        loss=np.array([1.0, 0.5, np.nan, np.inf, 0.1]),  # a diverged run is still a result
        series={"B1": np.ones((5, 2)), "W/x->h": np.arange(20.0).reshape(5, 1, 2, 2)},
        meta={"context_labels": ["a", "b"], "nested": {"k": [1, 2]}},
    )
    for suffix in (".npz", ".json"):
        back = gdln.Trajectory.load(trajectory.save(tmp_path / f"t{suffix}"))
        np.testing.assert_array_equal(back.t, trajectory.t)
        np.testing.assert_array_equal(back.loss, trajectory.loss)
        np.testing.assert_array_equal(back.weights("x->h"), trajectory.weights("x->h"))
        assert back.meta == trajectory.meta


# ------------------------------------------------------------------ arrays
@pytest.mark.parametrize(
    ("t", "loss"),
    [([], []), ([0.0, 1.0], [1.0]), ([0.0, np.nan], [1.0, 0.2]), ([0.0, 1.0], [np.nan, 0.2])],
    ids=["empty", "lengths", "nan time", "nan L(0)"],
)
def test_time_to_half_loss_refuses_what_has_no_half_time(t: list, loss: list) -> None:
    with pytest.raises(ValueError, match="expected finite t and L"):
        time_to_half_loss(np.array(t), np.array(loss))


def test_a_saved_trajectory_is_bounded_by_its_bytes_not_its_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No second moments follow from a saved result: data_values does not apply to it."""
    path = gdln.Trajectory(t=np.arange(50.0), loss=np.ones(50)).save(tmp_path / "t.npz")
    monkeypatch.setenv("GDLN_MAX_DATA_VALUES", "10")
    assert len(gdln.Trajectory.load(path).t) == 50
    monkeypatch.setenv("GDLN_MAX_DATA_BYTES", "500")
    with pytest.raises(gdln.GraphSpecError, match="data_bytes=500"):
        gdln.Trajectory.load(path)
