"""The figures of gdln compare, read back artist by artist (issue 38 item 2): the band of
the random starts stays within the seeds' range (it rose above L(0)), close stage times
share one label (they were written "23"), the legend sits beside the curves, and modes of
equal strength are one curve named for both (one hid the other)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
from helpers import GRAPHS

import gdln
from gdln.comparison._figures import loss_figure, singular_value_figure
from gdln.comparison._metrics import Runs

METRICS = {"graph": "g", "params": {}, "b0": {"e": 0.1}, "theory_start": "b0", "lr": 0.05}
METRICS |= {"init_scheme": "xavier", "init_scale": 0.2}


def _runs() -> Runs:
    t = np.linspace(0.0, 10.0, 101)
    ode = gdln.Trajectory(t=t, loss=np.where(t < 5, 30.0, 2.0))
    random = np.column_stack([np.where(t < 4.5 + 0.25 * s, 30.0, 2.0) for s in range(6)])
    return Runs(ode, ode, gdln.Trajectory(t=t, loss=ode.loss[:, None]), gdln.Trajectory(t, random))


def test_the_random_band_stays_within_the_seeds_and_close_stages_share_a_label() -> None:
    runs = _runs()
    stages = [{"time": t, "within_t_max": True} for t in (2.0, 6.0, 6.1, 8.0)]
    fig = loss_figure(METRICS | {"stages": {"u0": 0.1, "stages": stages}}, runs)
    ax = fig.axes[0]
    (band,) = [c for c in ax.collections if c.get_gid() == "seed band"]
    vertices = np.concatenate([p.vertices for p in band.get_paths()])
    loss = runs.random.loss
    assert vertices[:, 1].max() <= loss.max() + 1e-12  # never above L(0) = 30
    top = np.interp(vertices[:, 0], runs.random.t, loss.max(axis=1))
    assert np.all(vertices[:, 1] <= top + 1e-9)
    assert np.any(loss.mean(1) + loss.std(1) > loss.max(1))  # mean + sd alone would rise
    labels = sorted(text.get_text() for text in ax.texts)
    assert labels == ["1", "2,3", "4"]
    fig.canvas.draw()
    legend, axes = ax.get_legend().get_window_extent(), ax.get_window_extent()
    assert legend.x0 >= axes.x1  # beside the curves, not over them


@pytest.fixture(scope="module")
def routing_runs():
    problem = gdln.load(GRAPHS / "routing.yaml", params={"M": 3, "K": 2, "hidden": 8})
    settings = dict(threads=1, progress=False)
    result = gdln.compare(problem, t_max=2.0, b0=0.1, seeds=2, points=5, **settings)
    reduction = gdln.reduce(problem, b0=0.1, route="contexts")
    return result, reduction


@pytest.mark.slow  # a compare run: about 10 s on the shared two-core machine
def test_modes_of_equal_strength_are_one_curve_named_for_each(routing_runs) -> None:
    result, reduction = routing_runs
    runs = Runs(result.ode, result.gd_map, result.decoupled, result.random)
    fig, panels = singular_value_figure(result.metrics, reduction, runs)
    equal = 0
    for ax, panel in zip(fig.axes, panels, strict=False):
        theory = {
            line.get_gid(): np.asarray(line.get_ydata())
            for line in ax.get_lines()
            if (line.get_gid() or "").startswith("theory")
        }
        curves = list(theory.values())
        for i, a in enumerate(curves):  # no theory curve hides another
            assert not any(np.allclose(a, b, rtol=0, atol=1e-12) for b in curves[i + 1 :])
        named = [int(m) for gid in theory for m in gid.split(" ", 2)[2].split(", ")]
        assert sorted(named) == sorted(panel.modes)  # every mode is named once
        equal += sum(gid.startswith("theory modes ") for gid in theory)
    assert equal >= 1  # routing's modes 2 and 3 (s = 3/4 both) share a curve
    assert fig.legends and not any(ax.get_legend() for ax in fig.axes)
