"""Tests of gdln.sweep.run_sweep: serial equivalence, resume, Dask, errors."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from gdln import GdlnError
from gdln.sweep._sweep import (
    SweepPointError,
    SweepSpecError,
    SweepTableError,
    read_table,
    run_sweep,
)

CALLS: list[dict] = []


def model(a: int, b: float, seed: int) -> dict[str, float]:
    """A deterministic function of its point, with a float that needs all its digits."""
    return {"y": a * b + seed / 3.0, "z": math.sin(a + 0.1 * seed)}


def counted(a: int, b: float, seed: int) -> dict[str, float]:
    CALLS.append({"a": a, "b": b, "seed": seed})
    return model(a, b, seed)


def fails_at_two(a: int, b: float, seed: int) -> dict[str, float]:
    if a == 2:
        raise ZeroDivisionError("boom")
    return model(a, b, seed)


def not_numbers(a: int, b: float, seed: int) -> dict[str, object]:
    return {"y": "text"}


GRID = [{"a": a, "b": b, "seed": s} for a in (1, 2, 3) for b in (0.5, 0.1) for s in (0, 1)]


def serial(points):
    return [{**p, **model(**p)} for p in points]


def same(rows, expected):
    assert len(rows) == len(expected)
    for got, want in zip(rows, expected, strict=True):
        assert set(got) == set(want)
        for name in want:
            assert got[name] == pytest.approx(want[name], rel=0, abs=0)


def test_serial_equals_loop(tmp_path: Path) -> None:
    rows = run_sweep(model, GRID, table=tmp_path / "t.csv", workers=1)
    same(rows, serial(GRID))
    same(read_table(tmp_path / "t.csv"), serial(GRID))


def test_process_pool_equals_serial_loop(tmp_path: Path) -> None:
    rows = run_sweep(model, GRID, table=tmp_path / "t.csv", workers=2)
    same(rows, serial(GRID))
    table = sorted(read_table(tmp_path / "t.csv"), key=lambda r: (r["a"], -r["b"], r["seed"]))
    same(table, serial(GRID))


def test_resume_skips_finished_points(tmp_path: Path) -> None:
    table = tmp_path / "t.csv"
    CALLS.clear()
    run_sweep(counted, GRID[:5], table=table, workers=1)
    assert len(CALLS) == 5
    CALLS.clear()
    rows = run_sweep(counted, GRID, table=table, workers=1)
    assert GRID[5:] == CALLS
    same(rows, serial(GRID))
    assert len(read_table(table)) == len(GRID)
    CALLS.clear()
    run_sweep(counted, GRID, table=table, workers=1)
    assert CALLS == []


def test_resume_after_a_failure_and_a_cut_line(tmp_path: Path) -> None:
    table = tmp_path / "t.csv"
    with pytest.raises(SweepPointError, match=r"'a': 2.*ZeroDivisionError: boom") as info:
        run_sweep(fails_at_two, GRID, table=table, workers=1)
    assert info.value.point["a"] == 2
    finished = len(read_table(table))
    assert finished == 4  # the a=1 points came first
    with table.open("a") as handle:  # a row cut short by a killed writer
        handle.write("3,0.5")
    assert len(read_table(table)) == finished
    CALLS.clear()
    rows = run_sweep(counted, GRID, table=table, workers=1)
    assert len(CALLS) == len(GRID) - finished
    same(rows, serial(GRID))


def test_custom_key(tmp_path: Path) -> None:
    table = tmp_path / "t.csv"
    run_sweep(model, [{"a": 1, "b": 0.5, "seed": 0}], table=table, workers=1, key=["a", "seed"])
    CALLS.clear()
    rows = run_sweep(
        counted, [{"a": 1, "b": 0.9, "seed": 0}], table=table, workers=1, key=("a", "seed")
    )
    assert CALLS == [] and rows[0]["b"] == 0.5


def test_dask_local_cluster_gives_the_same_table(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, processes=False, dashboard_address=None) as cluster:
        rows = run_sweep(model, GRID, table=tmp_path / "d.csv", scheduler=cluster.scheduler_address)
    same(rows, serial(GRID))
    run_sweep(model, GRID, table=tmp_path / "s.csv", workers=1)
    key = lambda r: (r["a"], r["b"], r["seed"])  # noqa: E731
    same(
        sorted(read_table(tmp_path / "d.csv"), key=key),
        sorted(read_table(tmp_path / "s.csv"), key=key),
    )


def test_errors(tmp_path: Path) -> None:
    table = tmp_path / "t.csv"
    with pytest.raises(SweepSpecError, match="workers must be a positive integer"):
        run_sweep(model, GRID, table=table, workers=0)
    with pytest.raises(SweepSpecError, match="missing key column"):
        run_sweep(model, GRID, table=table, key=["a", "c"])
    with pytest.raises(SweepSpecError, match="two points share the key"):
        run_sweep(model, GRID, table=table, key=["a"])
    with pytest.raises(SweepSpecError, match="cannot be sent to worker processes"):
        run_sweep(lambda a, b, seed: {"y": 1.0}, GRID, table=table, workers=2)
    with pytest.raises(SweepSpecError, match="scheduler must be a Dask scheduler address"):
        run_sweep(model, GRID, table=table, scheduler="")
    with pytest.raises(SweepPointError, match="'y' = 'text' is not a number"):
        run_sweep(not_numbers, GRID, table=table, workers=1)
    with pytest.raises(SweepPointError, match="ZeroDivisionError: boom"):
        run_sweep(fails_at_two, GRID, table=tmp_path / "p.csv", workers=2)
    other = tmp_path / "other.csv"
    with other.open("w", newline="") as handle:
        csv.writer(handle).writerows([["a", "b", "seed", "q"], [9, 9, 9, 9]])
    with pytest.raises(SweepTableError, match="use a new table"):
        run_sweep(model, GRID, table=other, workers=1)
    assert issubclass(SweepPointError, GdlnError) and issubclass(SweepTableError, GdlnError)
