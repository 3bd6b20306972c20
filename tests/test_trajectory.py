"""Trajectories: validation, files and text formats read back, and the time to half loss."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
from helpers import load
from hypothesis import given, settings
from hypothesis import strategies as st

import gdln


def example(labels: list[str] | None = None) -> gdln.Trajectory:
    """Three times, a variable over two modes, a scalar series and two contexts."""
    t = np.array([0.0, 0.5, 1.0])
    rng = np.random.default_rng(0)
    meta = {"source": "x.yaml", "method": "ode"}
    if labels is not None:
        meta["context_labels"] = labels
    return gdln.Trajectory(
        t=t,
        loss=np.array([1.0, 0.6, 0.25]),
        series={
            "B1": rng.normal(size=(3, 2)),
            "energy": rng.normal(size=3),
            "context_loss": rng.uniform(size=(3, 2)),
        },
        meta=meta,
    )


# --------------------------------------------------------------------------------------
# Validation


def test_fields_become_float_arrays() -> None:
    trajectory = gdln.Trajectory(t=[0, 1], loss=[2, 1], series={"B": [[1, 2], [3, 4]]})
    assert trajectory.t.dtype == float and trajectory.loss.dtype == float
    assert isinstance(trajectory.series["B"], np.ndarray)
    assert repr(trajectory) == "Trajectory(t=<2 times to 1>, series=[B])"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"t": [[0.0, 1.0]], "loss": [1.0]}, r"t must be one-dimensional, got shape \(1, 2\)"),
        ({"t": [0.0, 1.0], "loss": [1.0]}, "loss has 1 rows for 2 times"),
        (
            {"t": [0.0, 1.0], "loss": [1.0, 0.5], "series": {"B1": [1.0, 2.0, 3.0]}},
            "series 'B1' has 3 rows for 2 times",
        ),
    ],
)
def test_inconsistent_lengths_are_refused(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        gdln.Trajectory(**kwargs)


# --------------------------------------------------------------------------------------
# Files


def test_trajectory_round_trip(tmp_path: Path) -> None:
    trajectory = gdln.solve(gdln.reduce(load("chain")), t_max=2, points=5)
    for suffix in (".npz", ".json"):
        path = trajectory.save(tmp_path / f"t{suffix}")
        again = gdln.Trajectory.load(path)
        np.testing.assert_array_equal(again.t, trajectory.t)
        np.testing.assert_array_equal(again.loss, trajectory.loss)
        assert set(again.series) == set(trajectory.series)
        for name, values in trajectory.series.items():
            np.testing.assert_array_equal(again.series[name], values)
        assert dict(again.meta) == json.loads(json.dumps(dict(trajectory.meta)))
        with pytest.raises(FileExistsError, match="exists; pass force=True"):
            trajectory.save(path)
        trajectory.save(path, force=True)


def test_unknown_suffix_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"t\.txt: suffix must be \.npz or \.json, got '\.txt'"):
        example().save(tmp_path / "t.txt")


# --------------------------------------------------------------------------------------
# Text formats, parsed back


def test_json_format_reads_back() -> None:
    trajectory = example(["x0->y1", "x1->y0"])
    data = json.loads(gdln.format_trajectory(trajectory, "json"))
    assert data["t"] == trajectory.t.tolist() and data["loss"] == trajectory.loss.tolist()
    assert set(data["variables"]) == {"B1", "energy"}  # context_loss is listed apart
    np.testing.assert_array_equal(np.array(data["variables"]["B1"]).T, trajectory.series["B1"])
    np.testing.assert_array_equal(data["variables"]["energy"], trajectory.series["energy"])
    assert list(data["context_loss"]) == ["x0->y1", "x1->y0"]
    for c, label in enumerate(data["context_loss"]):
        np.testing.assert_array_equal(
            data["context_loss"][label], trajectory.series["context_loss"][:, c]
        )
    assert data["meta"] == trajectory.meta


def read_csv(text: str) -> tuple[list[str], np.ndarray]:
    """The header and the values of a trajectory's CSV, after its ``# variable_edges`` line."""
    lines = text.splitlines()
    rows = list(csv.reader(lines[1:] if lines[0].startswith("# ") else lines))
    return rows[0], np.array(rows[1:], dtype=float)


def test_csv_format_reads_back() -> None:
    trajectory = example(["a, with comma", "b"])
    header, values = read_csv(gdln.format_trajectory(trajectory, "csv"))
    assert header == [
        "t",
        "loss",
        "B1 (index 0)",
        "B1 (index 1)",
        "energy (index 0)",
        "loss in context a, with comma",
        "loss in context b",
    ]
    column = dict(zip(header, values.T, strict=True))
    np.testing.assert_allclose(column["t"], trajectory.t, rtol=1e-11)
    np.testing.assert_allclose(column["loss"], trajectory.loss, rtol=1e-11)
    for j in range(2):
        want = trajectory.series["B1"][:, j]
        np.testing.assert_allclose(column[f"B1 (index {j})"], want, rtol=1e-11)
    np.testing.assert_allclose(column["energy (index 0)"], trajectory.series["energy"], rtol=1e-11)
    context = trajectory.series["context_loss"]
    np.testing.assert_allclose(column["loss in context a, with comma"], context[:, 0], rtol=1e-11)
    np.testing.assert_allclose(column["loss in context b"], context[:, 1], rtol=1e-11)


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        (["same", "same"], ["same", "same#1"]),  # repeated labels stay apart
        (None, ["context0", "context1"]),  # no labels
        (["only one"], ["context0", "context1"]),  # labels that do not fit
    ],
)
def test_context_columns_are_named_once_each(labels: list[str] | None, expected: list) -> None:
    data = json.loads(gdln.format_trajectory(example(labels), "json"))
    assert list(data["context_loss"]) == expected
    header, _ = read_csv(gdln.format_trajectory(example(labels), "csv"))
    assert header[-2:] == [f"loss in context {x}" for x in expected]


def test_solved_trajectory_reads_back_from_csv() -> None:
    trajectory = gdln.solve(gdln.reduce(load("routing", M=3, K=2), lump="symmetry"), t_max=3)
    header, values = read_csv(gdln.format_trajectory(trajectory, "csv"))
    labels = trajectory.meta["context_labels"]
    assert [h for h in header if h.startswith("loss in context")] == [
        f"loss in context {x}" for x in labels
    ]
    (modes,) = trajectory.meta["modes"]
    for k, name in enumerate(header):
        if name.startswith("B"):
            variable, mode = name.removesuffix(")").split(" (mode ")
            want = trajectory.series[variable][:, modes.index(int(mode))]
            np.testing.assert_allclose(values[:, k], want, rtol=1e-11, atol=1e-300)


def test_csv_columns_name_the_networks_mode_across_systems() -> None:
    # two systems: modes 0-2 in the first, mode 3 in the second (as a reduction numbers them)
    t = np.linspace(0, 1, 3)
    first, second = np.arange(9.0).reshape(3, 3), np.array([[10.0], [11.0], [12.0]])
    sv = np.array([[3.0, 1.0]] * 3)
    trajectory = gdln.Trajectory(
        t=t,
        loss=np.ones(3),
        series={"B1@0": first, "B1@1": second, "sv[x->h]": sv},
        meta={"modes": [[0, 1, 2], [3]]},
    )
    header, values = read_csv(gdln.format_trajectory(trajectory, "csv"))
    assert header == [
        "t",
        "loss",
        "B1 (mode 0)",
        "B1 (mode 1)",
        "B1 (mode 2)",
        "B1 (mode 3)",  # the first mode of system 1 is the network's mode 3
        "sv[x->h] (singular value 1)",
        "sv[x->h] (singular value 2)",
    ]
    np.testing.assert_array_equal(values[:, 5], second[:, 0])


def test_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="format 'xml': expected json or csv"):
        gdln.format_trajectory(example(), "xml")


# --------------------------------------------------------------------------------------
# Time to half loss


@settings(max_examples=100, deadline=None)
@given(rate=st.floats(0.05, 20.0), per_decay=st.floats(2.0, 2000.0), start=st.floats(0.1, 10.0))
def test_time_to_half_loss_of_exponential_decay(
    rate: float, per_decay: float, start: float
) -> None:
    r"""$L = L_0 e^{-rt}$ halves at $\ln 2/r$; on a grid the code interpolates linearly
    between the two samples around it: the chord of the convex exponential.

    The chord lies above the curve, so it reaches $L_0/2$ no earlier. Its gap to the curve
    is at most $\Delta t^2\max L''/8 = r^2\Delta t^2 L_{i-1}/8$ and its slope at least
    $rL_i$, which bounds how much later: $r\Delta t^2 e^{2r\Delta t}/8$.
    """
    dt = 1 / (rate * per_decay)  # r dt <= 1/2: the grid resolves the decay
    t = np.arange(0, 2 * math.log(2) / rate + 2 * dt, dt)
    loss = start * np.exp(-rate * t)
    got = gdln.time_to_half_loss(t, loss)
    i = int(np.argmax(loss <= start / 2))
    assert i > 0 and got is not None
    lo, hi = loss[i - 1], loss[i]
    assert got == pytest.approx(t[i - 1] + (lo - start / 2) / (lo - hi) * dt, rel=1e-9)
    exact = math.log(2) / rate
    late = rate * dt**2 * math.exp(2 * rate * dt) / 8
    assert exact * (1 - 1e-9) <= got <= exact + late * (1 + 1e-9) + 1e-12


def test_time_to_half_loss_at_a_sample_and_never() -> None:
    t = np.array([0.0, 1.0, 2.0, 3.0])
    assert gdln.time_to_half_loss(t, np.array([4.0, 3.0, 2.0, 1.0])) == 2.0
    assert gdln.time_to_half_loss(t, np.array([4.0, 3.0, 1.0, 0.5])) == pytest.approx(1.5)
    assert gdln.time_to_half_loss(t, np.array([4.0, 3.5, 3.0, 2.5])) is None
    assert gdln.time_to_half_loss(t, np.zeros(4)) == 0.0  # L(0) = 0 is already halved
