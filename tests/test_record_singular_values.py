"""Recording only what is asked (issue 38 part 3): ``record_singular_values=False`` leaves
out the per-record SVDs of every weight matrix and changes nothing else; the comparison's
decoupled run, whose modes are its projections, records none."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import load

import gdln
from gdln.solution import Recording

RUN = dict(steps=40, lr=0.05, seeds=2, record_every=10, progress=False, threads=1)


@pytest.fixture(scope="module")
def routing():
    return load("routing", M=3, K=2, hidden=8)


def test_left_out_singular_values_change_nothing_else(routing):
    full = gdln.simulate(routing, record_weights=True, project=True, **RUN)
    lean = gdln.simulate(
        routing, record_weights=True, project=True, record_singular_values=False, **RUN
    )
    assert not [k for k in lean.series if k.startswith("sv/")]
    assert set(full.series) - set(lean.series) == {k for k in full.series if k.startswith("sv/")}
    np.testing.assert_array_equal(lean.loss, full.loss)
    for name, values in lean.series.items():
        np.testing.assert_array_equal(values, full.series[name], err_msg=name)
    # the default run's singular values are numpy's SVD of the weights it recorded
    for key in (k for k in full.series if k.startswith("sv/")):
        weights = full.series["W/" + key[3:]]
        expected = np.linalg.svd(weights, compute_uv=False)
        np.testing.assert_allclose(full.series[key], expected, rtol=0, atol=1e-12)
    assert lean.recording == Recording(every=10, weights=True, singular_values=False)
    assert full.recording is not None and full.recording.singular_values
    with pytest.raises(KeyError):
        lean.singular_values(next(iter(routing.graph.edges)))


def test_the_spec_round_trips_and_old_files_stay_readable(tmp_path, routing):
    lean = gdln.simulate(routing, record_singular_values=False, **RUN)
    path = lean.save(tmp_path / "lean.npz")
    assert gdln.Trajectory.load(path).recording == lean.recording
    assert Recording(points=3).as_json() == {"points": 3, "weights": False, "rsm": False}
    assert Recording(points=3, singular_values=False).as_json()["singular_values"] is False
    with pytest.raises(ValueError, match="singular_values"):
        Recording(points=3, singular_values="no")  # type: ignore[arg-type]


def test_a_flag_that_is_not_a_bool_is_refused(routing):
    with pytest.raises(gdln.simulation.SimulationSpecError, match="record_singular_values"):
        gdln.simulate(routing, record_singular_values="no", **RUN)


def _gdln(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gdln", *args], cwd=cwd, capture_output=True, text=True
    )


def test_the_command_line_flag(tmp_path):
    common = ["routing", "--param", "M=3", "--param", "K=2", "--param", "hidden=8"]
    done = _gdln("simulate", *common, "--t-max", "2", "--no-singular-values", "-o", "a.npz",
                 cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    run = gdln.Trajectory.load(tmp_path / "a.npz")
    assert run.series and not [k for k in run.series if k.startswith("sv/")]
    refused = _gdln("simulate", "context", "--schedule", "--no-singular-values", "-o", "b.npz",
                    cwd=tmp_path)  # fmt: skip
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1 and "--no-singular-values" in refused.stderr


def test_the_comparisons_decoupled_run_records_no_singular_values(tmp_path, routing):
    result = gdln.compare(
        routing, tmp_path / "cmp", t_max=2.0, lr=0.05, seeds=2, points=11, progress=False
    )
    decoupled = gdln.Trajectory.load(tmp_path / "cmp" / "sim_decoupled.npz")
    random = gdln.Trajectory.load(tmp_path / "cmp" / "sim_random.npz")
    assert not [k for k in decoupled.series if k.startswith("sv/")]
    assert [k for k in decoupled.series if k.startswith("proj/")]
    assert [k for k in random.series if k.startswith("sv/")]
    metrics = json.loads((tmp_path / "cmp" / "metrics.json").read_text())
    assert metrics["files"] and result is not None
