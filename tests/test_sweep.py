"""Tests of gdln.sweep.run_sweep: serial equivalence, resume, Dask, errors."""

from __future__ import annotations

import csv
import math
import os
import signal
import subprocess
import sys
import threading
import time
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
    assert finished == 8  # every point but the four with a = 2
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


# --- Issue 22 section 6: sweeps must not lose, duplicate or corrupt results -----------------
#
# The functions below run in worker processes (a forked pool, Dask workers started with
# PYTHONPATH=tests, a second sweep process); they find their folder in GDLN_TEST_SWEEP_DIR
# and log every call there, so a test can count how often each point was computed.

SWEEP_DIR = "GDLN_TEST_SWEEP_DIR"


def _log_call(a: object) -> Path:
    folder = Path(os.environ[SWEEP_DIR])
    fd = os.open(folder / "calls.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        os.write(fd, f"{a}\n".encode())
    finally:
        os.close(fd)
    return folder


def _calls(folder: Path) -> list[str]:
    log = folder / "calls.log"
    return log.read_text().split() if log.exists() else []


def _first_time(folder: Path, name: str) -> bool:
    """True for exactly one caller across processes: the one that creates the marker file."""
    try:
        os.close(os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return False
    return True


def dies_once_at_three(a: int) -> dict[str, float]:
    """Kill the worker process the first time point a = 3 runs; every other call works."""
    folder = _log_call(a)
    time.sleep(0.05)
    if a == 3 and _first_time(folder, "died"):
        time.sleep(0.5)  # the coordinator has fetched the points finished before
        os._exit(3)
    return {"y": a / 7.0}


def killed_at_two_and_five(a: int) -> dict[str, float]:
    """Points a = 2 and a = 5 kill their worker process every time they run."""
    _log_call(a)
    if a in (2, 5):
        os.kill(os.getpid(), signal.SIGKILL)
    return {"y": a / 7.0}


def always_dies(a: int) -> dict[str, float]:
    _log_call(a)
    os._exit(3)


def slow_square(x: int) -> dict[str, float]:
    _log_call(x)
    time.sleep(0.05)
    return {"y": x * x / 7.0}


def returns_a_function(a: int) -> dict[str, object]:
    return {"y": lambda: a}


def _cannot_load() -> None:
    raise ImportError("no module named 'gone'")


class LostOnTheWay:
    """A callable that pickles but cannot be unpickled, as a function of a vanished module."""

    def __call__(self, a: int) -> dict[str, float]:
        return {"y": 1.0}

    def __reduce__(self) -> tuple:
        return (_cannot_load, ())


def key_length(name: str) -> dict[str, int]:
    _log_call("call")
    return {"n": len(str(name))}


def test_string_keys_round_trip_exactly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys that look like numbers, JSON, CSV syntax or padding stay the strings they were."""
    monkeypatch.setenv(SWEEP_DIR, str(tmp_path))
    names = ["01", "1e3", " 7", "7 ", "nan", "inf", "true", "null", '"q"', "a,b", "", "é", "x\ny"]
    points = [{"name": s} for s in names] + [{"name": 1}, {"name": 1.0}, {"name": True}]
    table = tmp_path / "t.csv"
    rows = run_sweep(key_length, points, table=table, workers=1)
    assert len(_calls(tmp_path)) == len(points)
    for got, point in zip(rows, points, strict=True):
        assert type(got["name"]) is type(point["name"]) and got["name"] == point["name"]
    read = read_table(table)
    assert [(type(r["name"]), r["name"]) for r in read] == [
        (type(p["name"]), p["name"]) for p in points
    ]
    again = run_sweep(key_length, points, table=table, workers=1)  # resume: nothing to do
    assert len(_calls(tmp_path)) == len(points)
    assert len(read_table(table)) == len(points)
    assert [r["name"] for r in again] == [p["name"] for p in points]


def test_a_row_cut_mid_number_is_recomputed(tmp_path: Path) -> None:
    """A crash that leaves `0.4` of `0.42857...` must not be taken as a finished point."""
    table = tmp_path / "t.csv"
    run_sweep(model, GRID[:4], table=table, workers=1)
    data = table.read_bytes()
    assert data.endswith(b"\n")
    last = data[:-1].rsplit(b"\n", 1)[1]
    cut = len(data) - 1 - len(last) + last.rindex(b".") + 2  # keep one digit after the point
    table.write_bytes(data[:cut])
    assert len(read_table(table)) == 3  # the torn row is not a row
    CALLS.clear()
    rows = run_sweep(counted, GRID, table=table, workers=1)
    assert GRID[3:] == CALLS
    same(rows, serial(GRID))
    same(read_table(table), serial(GRID))
    assert table.read_bytes().count(b"\n") == len(GRID) + 1  # header and whole rows only


def test_a_torn_header_is_rewritten(tmp_path: Path) -> None:
    table = tmp_path / "t.csv"
    table.write_bytes(b"a,b,se")  # killed while writing the first line
    rows = run_sweep(model, GRID[:2], table=table, workers=1)
    same(rows, serial(GRID[:2]))
    assert table.read_text().splitlines()[0] == "a,b,seed,y,z"


def test_a_file_that_is_not_a_sweep_table_is_left_alone(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_bytes(b"my notes\nnot a table, and no newline at the end")
    before = notes.read_bytes()
    with pytest.raises(SweepTableError, match=r"notes.txt: .*columns.*'seed'"):
        run_sweep(model, GRID, table=notes, workers=1)
    unterminated = tmp_path / "draft.txt"
    unterminated.write_bytes(b"half a line")
    with pytest.raises(SweepTableError, match=r"draft.txt: not a sweep table"):
        run_sweep(model, GRID, table=unterminated, workers=1)
    assert notes.read_bytes() == before and unterminated.read_bytes() == b"half a line"


def test_a_table_of_another_sweep_is_refused_before_computing(tmp_path: Path) -> None:
    other = tmp_path / "other.csv"
    other.write_text("a,b,q\n1,2,3\n")
    CALLS.clear()
    with pytest.raises(SweepTableError, match=r"other.csv: .*\['seed'\].*use a new table"):
        run_sweep(counted, GRID, table=other, workers=1)
    assert CALLS == []


def test_a_failing_point_does_not_stop_the_others(tmp_path: Path) -> None:
    table = tmp_path / "t.csv"
    with pytest.raises(SweepPointError, match=r"4 of 12 points did not finish") as info:
        run_sweep(fails_at_two, GRID, table=table, workers=1)
    failed = [u.point for u in info.value.unfinished]
    assert failed == [p for p in GRID if p["a"] == 2]
    assert all(u.reason == "ZeroDivisionError: boom" for u in info.value.unfinished)
    assert "ZeroDivisionError" in info.value.unfinished[0].traceback
    ok = [p for p in GRID if p["a"] != 2]
    same(info.value.rows, serial(ok))
    same(read_table(table), serial(ok))


def test_two_sweeps_on_one_table_at_once_write_each_point_once(tmp_path: Path) -> None:
    """Two processes start the same sweep together: 10 rows, each point computed once."""
    table, go = tmp_path / "t.csv", tmp_path / "go"
    script = tmp_path / "one_sweep.py"
    script.write_text(
        "import os, sys, time\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from test_sweep import slow_square\n"
        "from gdln.sweep import run_sweep\n"
        "open(sys.argv[1], 'w').close()\n"
        f"while not os.path.exists({str(go)!r}):\n"
        "    time.sleep(0.005)\n"
        f"rows = run_sweep(slow_square, [{{'x': i}} for i in range(10)], table={str(table)!r},"
        " workers=1)\n"
        "assert [r['y'] for r in rows] == [i * i / 7.0 for i in range(10)]\n"
    )
    env = {**os.environ, SWEEP_DIR: str(tmp_path)}
    ready = [tmp_path / f"ready{k}" for k in range(2)]
    runs = [
        subprocess.Popen(
            [sys.executable, str(script), str(flag)], env=env, stderr=subprocess.PIPE, text=True
        )
        for flag in ready
    ]
    deadline = time.monotonic() + 120
    while not all(flag.exists() for flag in ready) and time.monotonic() < deadline:
        time.sleep(0.01)  # until both processes have imported gdln and wait for the go file
    go.touch()
    errors = ""
    for run in runs:
        _, err = run.communicate(timeout=120)
        assert run.returncode == 0, err
        errors += err
    assert "another sweep is writing this table; waiting until it ends" in errors
    rows = read_table(table)
    assert sorted(r["x"] for r in rows) == list(range(10))
    assert all(r["y"] == r["x"] ** 2 / 7.0 for r in rows)
    assert sorted(int(c) for c in _calls(tmp_path)) == list(range(10))


def test_pool_retries_a_point_whose_worker_died(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SWEEP_DIR, str(tmp_path))
    points = [{"a": a} for a in range(8)]
    rows = run_sweep(dies_once_at_three, points, table=tmp_path / "t.csv", workers=2)
    assert [r["y"] for r in rows] == [a / 7.0 for a in range(8)]
    assert len(read_table(tmp_path / "t.csv")) == 8
    calls = sorted(int(c) for c in _calls(tmp_path))
    assert calls == sorted([*range(8), 3])  # only the point that died ran twice


def test_pool_names_the_points_whose_worker_died(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SWEEP_DIR, str(tmp_path))
    points = [{"a": a} for a in range(8)]
    with pytest.raises(
        SweepPointError, match=r"points \{'a': 2\}, \{'a': 5\}: .*died 3 times .killed by SIGKILL"
    ) as info:
        run_sweep(killed_at_two_and_five, points, table=tmp_path / "t.csv", workers=2)
    assert info.value.point == {"a": 2}
    assert [u.point for u in info.value.unfinished] == [{"a": 2}, {"a": 5}]
    assert all("SIGKILL" in u.reason for u in info.value.unfinished)
    assert sorted(r["a"] for r in read_table(tmp_path / "t.csv")) == [0, 1, 3, 4, 6, 7]
    assert sorted(int(c) for c in _calls(tmp_path)) == sorted([0, 1, 3, 4, 6, 7] + [2, 5] * 3)


def _dask_workers(address: str, count: int, folder: Path) -> list[subprocess.Popen]:
    """Worker processes without a nanny: one that dies stays dead."""
    env = {**os.environ, SWEEP_DIR: str(folder), "PYTHONPATH": str(Path(__file__).parent)}
    command = [sys.executable, "-m", "distributed.cli.dask_worker", address, "--no-nanny"]
    command += ["--nthreads", "1", "--no-dashboard"]
    return [
        subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(count)
    ]


def test_dask_worker_death_is_retried_and_finished_points_are_not_recomputed(
    tmp_path: Path,
) -> None:
    distributed = pytest.importorskip("distributed")
    points = [{"a": a} for a in range(12)]
    with distributed.LocalCluster(
        n_workers=0, processes=False, protocol="tcp", dashboard_address=None
    ) as cluster:
        workers = _dask_workers(cluster.scheduler_address, 2, tmp_path)
        try:
            with distributed.Client(cluster.scheduler_address) as client:
                client.wait_for_workers(2, timeout=120)
            rows = run_sweep(
                dies_once_at_three,
                points,
                table=tmp_path / "t.csv",
                scheduler=cluster.scheduler_address,
            )
        finally:
            for worker in workers:
                worker.kill()
                worker.wait()
    assert [r["y"] for r in rows] == [a / 7.0 for a in range(12)]
    assert sorted(r["a"] for r in read_table(tmp_path / "t.csv")) == list(range(12))
    assert sorted(int(c) for c in _calls(tmp_path)) == sorted([*range(12), 3])


def test_dask_sweep_with_no_worker_left_stops_and_reports_every_point(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    points = [{"a": a} for a in range(4)]
    outcome: dict[str, BaseException] = {}

    def sweep(address: str) -> None:
        try:
            run_sweep(
                always_dies,
                points,
                table=tmp_path / "t.csv",
                scheduler=address,
                no_worker_timeout=1.0,
            )
        except BaseException as error:  # handed to the test thread
            outcome["error"] = error

    with distributed.LocalCluster(
        n_workers=0, processes=False, protocol="tcp", dashboard_address=None
    ) as cluster:
        workers = _dask_workers(cluster.scheduler_address, 2, tmp_path)
        try:
            with distributed.Client(cluster.scheduler_address) as client:
                client.wait_for_workers(2, timeout=120)
            thread = threading.Thread(target=sweep, args=(cluster.scheduler_address,), daemon=True)
            start = time.monotonic()
            thread.start()
            thread.join(timeout=120)
            assert not thread.is_alive(), "run_sweep still waits with no worker left"
            took = time.monotonic() - start
        finally:
            for worker in workers:
                worker.kill()
                worker.wait()
    error = outcome.get("error")
    assert isinstance(error, SweepPointError), error
    assert "4 of 4 points did not finish" in str(error)
    assert [u.point for u in error.unfinished] == points
    assert all("no Dask worker for 1 s" in u.reason for u in error.unfinished)
    assert took < 30
    assert read_table(tmp_path / "t.csv") == []


def test_new_argument_errors(tmp_path: Path) -> None:
    table = tmp_path / "t.csv"
    with pytest.raises(SweepSpecError, match=r"points\[1\]\['x'\] = \[1, 2\]: expected a number"):
        run_sweep(slow_square, [{"x": 1}, {"x": [1, 2]}], table=table, workers=1)
    with pytest.raises(SweepSpecError, match=r"points\[0\]: parameter name 'a\\nb' must be"):
        run_sweep(slow_square, [{"a\nb": 1}], table=table, workers=1)
    with pytest.raises(SweepSpecError, match="no_worker_timeout must be a positive number"):
        run_sweep(model, GRID, table=table, workers=1, no_worker_timeout=0)
    assert not table.exists()


def test_pool_reports_a_result_it_cannot_send_back_and_a_function_it_cannot_load(
    tmp_path: Path,
) -> None:
    with pytest.raises(SweepPointError, match=r"its result cannot be sent back: .*pickle") as info:
        run_sweep(returns_a_function, [{"a": 1}, {"a": 2}], table=tmp_path / "t.csv", workers=2)
    assert len(info.value.unfinished) == 2
    with pytest.raises(SweepSpecError, match=r"cannot be loaded in a worker process .*'gone'"):
        run_sweep(LostOnTheWay(), [{"a": 1}, {"a": 2}], table=tmp_path / "u.csv", workers=2)
    assert read_table(tmp_path / "u.csv") == []


def test_points_must_share_their_parameter_names(tmp_path: Path) -> None:
    with pytest.raises(SweepSpecError, match=r"points\[1\] has the parameters \['b'\]"):
        run_sweep(slow_square, [{"a": 1}, {"b": 2}], table=tmp_path / "t.csv", workers=1)
