"""A trajectory says how its run ended and what it recorded when (issue 35, item 4).

The references are independent of the code under test: the times each run records are
computed here from the rules the docs state (evenly spaced times, the nearest whole steps,
every k-th step), the steppers that stop are forced by a test double, and the files
written by the code before this change (``tests/data/*_before_issue35.*``, written by
main at 7707a26) must load with the same arrays and meta.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import gdln
from gdln.solution import (
    OUTCOMES,
    Recording,
    Status,
    Stop,
    Trajectory,
    _dop853,
    _numba,
    read_trajectory,
    solve_batch,
)

DATA = Path(__file__).parent / "data"
SMALL = {"M": "3", "K": "2", "hidden": "4"}


@pytest.fixture(scope="module")
def routing() -> gdln.Problem:
    return gdln.load("routing", params=SMALL)


# ------------------------------------------------------------------------ what runs record
def test_a_solve_records_evenly_spaced_times_and_completes(routing: gdln.Problem) -> None:
    flow = gdln.solve(routing, t_max=2.0, points=5, b0=0.1)
    assert flow.recording == Recording(points=5)
    np.testing.assert_array_equal(flow.t, [0.0, 0.5, 1.0, 1.5, 2.0])
    assert flow.status == Status() and flow.status.completed and flow.status.stops == ()
    chosen = gdln.solve(routing, t_max=2.0, times=[0.0, 0.25, 2.0], b0=0.1)
    assert chosen.recording == Recording(times=(0.0, 0.25, 2.0))
    np.testing.assert_array_equal(chosen.t, [0.0, 0.25, 2.0])


def test_the_map_records_the_nearest_whole_steps(routing: gdln.Problem) -> None:
    lr, t_max, points = 0.3, 3.0, 4  # 10 steps: linspace(0, 10, 4) = 0, 3.33, 6.67, 10
    run = gdln.solve(routing, t_max=t_max, lr=lr, dynamics="gd-map", points=points, b0=0.1)
    assert run.recording == Recording(points=points)
    np.testing.assert_allclose(run.t, np.array([0, 3, 7, 10]) * lr)
    few = gdln.solve(routing, t_max=0.9, lr=lr, dynamics="gd-map", points=50, b0=0.1)
    np.testing.assert_allclose(few.t, np.arange(4) * lr)  # every step, each once


def test_the_full_matrix_flow_records_its_weights(routing: gdln.Problem) -> None:
    full = gdln.solve(routing, route="matrix", t_max=1.0, points=3, b0=0.1)
    assert full.recording == Recording(points=3, weights=True)
    assert not full.without_weights().recording.weights  # type: ignore[union-attr]
    steps = gdln.solve(
        routing, route="matrix", t_max=1.0, lr=0.25, dynamics="gd-map", times=[0, 0.5]
    )
    assert steps.recording == Recording(times=(0.0, 0.5), weights=True)
    np.testing.assert_allclose(steps.t, [0.0, 0.5])


def test_a_simulation_records_what_its_settings_say(routing: gdln.Problem) -> None:
    settings = dict(record_every=3, rsm=True, threads=1)
    run = gdln.simulate(routing, steps=7, lr=0.05, seeds=1, **settings)
    assert run.recording == Recording(every=3, rsm=True)
    assert run.meta["step_at"] == [0, 3, 6, 7] and run.status.completed
    listed = dict(record_steps=[5, 0, 2], record_weights=True, threads=1)
    run = gdln.simulate(routing, steps=7, lr=0.05, seeds=1, **listed)
    assert run.recording == Recording(steps=(5, 0, 2), weights=True)
    assert run.meta["step_at"] == [0, 2, 5]


@given(points=st.integers(2, 300), total=st.integers(0, 400))
def test_points_of_a_discrete_run_are_the_rounded_even_steps(points: int, total: int) -> None:
    """``points`` evenly spaced times, each at its nearest step (a tie either way), or
    every step, each once, where there are fewer steps."""
    got = Recording(points=points).steps_of(total)
    n = min(points, total + 1)
    assert len(got) == n and got[0] == 0 and got[-1] == total
    exact = [k * total / max(n - 1, 1) for k in range(n)]
    assert all(abs(step - x) <= 0.5 + 1e-9 for step, x in zip(got, exact, strict=True))


@given(every=st.integers(1, 50), total=st.integers(0, 400))
def test_every_kth_step_and_the_last(every: int, total: int) -> None:
    got = Recording(every=every).steps_of(total).tolist()
    assert got == sorted({k for k in range(total + 1) if k % every == 0} | {total})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "exactly one of points, times, every and steps, got none"),
        ({"points": 5, "every": 2}, r"exactly one .* got \['points', 'every'\]"),
        ({"points": 1}, "points: expected an integer >= 2"),
        ({"every": 0}, "every: expected an integer >= 1"),
        ({"steps": (1, -1)}, "steps: expected integers >= 0"),
        ({"steps": (1.5,)}, "steps: expected integers >= 0"),
        ({"points": 3, "rsm": "yes"}, "rsm: expected True or False"),
    ],
)
def test_a_malformed_recording_is_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Recording(**kwargs)


def test_a_continuous_run_has_no_steps() -> None:
    with pytest.raises(ValueError, match="names steps; a continuous run is recorded at times"):
        Recording(every=2).times_of(1.0)


# ------------------------------------------------------------------------ how runs ended
def test_the_steppers_that_stopped_are_typed(monkeypatch: pytest.MonkeyPatch) -> None:
    """DOP853 forced to give up at once: LSODA finishes, and the status names the stop
    with its outcome; the meta line of earlier releases stays, in the stop's words."""
    monkeypatch.setattr(_numba, "MIN_BATCH", 10**9)
    monkeypatch.setattr(_dop853, "STIFF_STEPS", -(10**6))
    reduction = gdln.reduce(gdln.load("routing", params=SMALL), b0=1)
    one, _ = solve_batch(reduction, [0.3, 0.05], t_max=2, points=5)
    assert one.status.completed and one.meta["integrator"] == "lsoda"
    (stop,) = one.status.stops
    assert (stop.outcome, stop.stepper, stop.t) == ("stepper_failed", "dop853", 0.0)
    assert "DOP853 steps" in stop.reason
    assert one.meta["integrator_fallback"] == stop.describe()


def test_a_status_refuses_what_is_not_an_outcome() -> None:
    assert set(OUTCOMES) >= {"completed", "overflowed", "not_finite", "stepper_failed"}
    with pytest.raises(ValueError, match="outcome: expected one of completed, overflowed"):
        Status("fine")
    with pytest.raises(ValueError, match="a stop's outcome cannot be 'completed'"):
        Stop("completed", 1.0, "done")
    with pytest.raises(ValueError, match="a stop's time must be finite"):
        Stop("overflowed", float("nan"), "overflowed")
    with pytest.raises(ValueError, match="status must be a Status"):
        Trajectory(t=[0.0], loss=[1.0], status="completed")  # type: ignore[arg-type]


# --------------------------------------------------------------------------------- files
@pytest.mark.parametrize("suffix", [".npz", ".json"])
def test_status_and_recording_are_saved_and_read_back(tmp_path: Path, suffix: str) -> None:
    stop = Stop("overflowed", 2.5, "overflowed", "dop853")
    trajectory = Trajectory(
        t=[0.0, 1.0, 2.0],
        loss=[1.0, 0.5, 0.25],
        series={"B1": np.ones((3, 2))},
        meta={"method": "ode"},
        status=Status(stops=(stop,)),
        recording=Recording(times=(0.0, 1.0, 2.0)),
    )
    back = Trajectory.load(trajectory.save(tmp_path / f"t{suffix}"))
    assert back.status == trajectory.status and back.recording == trajectory.recording
    assert back.meta == {"method": "ode"}  # the two live in the file's meta, not in memory
    text = tmp_path / "solve.json"
    text.write_text(gdln.format_trajectory(trajectory, "json"))
    again = read_trajectory(text)
    assert again.status == trajectory.status and again.recording == trajectory.recording
    assert again.meta == {"method": "ode"}


@pytest.mark.parametrize(
    "name",
    [
        "solve_before_issue35.npz",
        "solve_before_issue35.json",
        "simulate_before_issue35.npz",
        "solve_fallback_before_issue35.npz",
    ],
)
def test_a_file_saved_before_the_change_still_loads(tmp_path: Path, name: str) -> None:
    """Written by main's code (7707a26): no status or recording in them; they load as
    completed with the recording unknown, every array and meta entry as saved."""
    old = Trajectory.load(DATA / name)
    assert old.status == Status() and old.recording is None
    if name.endswith(".json"):
        saved = json.loads((DATA / name).read_text())
        assert old.meta == saved["meta"] and set(old.series) == set(saved["series"])
    else:
        with np.load(DATA / name) as data:
            assert old.meta == json.loads(str(data["meta"]))
            np.testing.assert_array_equal(old.loss, data["loss"])
            for key, value in old.series.items():
                np.testing.assert_array_equal(value, data[f"series/{key}"])
    assert "status" not in old.meta and "recording" not in old.meta
    resaved = Trajectory.load(old.save(tmp_path / name))  # and writes the new format
    assert resaved.meta == old.meta and resaved.status == old.status


@pytest.mark.parametrize(
    ("status", "message"),
    [
        ("done", r"meta\.status: expected \{'outcome': \.\.\., 'stops': \[\.\.\.\]\}"),
        ({"outcome": "fine"}, r"meta\.status: outcome: expected one of completed"),
        ({"outcome": "completed", "stops": [{"t": "x"}]}, r"meta\.status: stops\[0\]\.t"),
    ],
)
def test_a_malformed_status_in_a_file_is_one_error(
    tmp_path: Path, status: object, message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(
        json.dumps({"t": [0.0], "loss": [1.0], "series": {}, "meta": {"status": status}})
    )
    with pytest.raises(gdln.GraphSpecError, match=message):
        Trajectory.load(path)
