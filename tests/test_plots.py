"""Pictures of results (gdln/report/_plots.py; issue 38 item 2): every plotted artist's
data is read back and compared with the result's own arrays, and the details a first-hour
user hit are checked on the drawn figure (equal curves drawn once and named, the band over
seeds within the seeds' range, stage labels that do not collide, legends beside the axes).
"""

from __future__ import annotations

import json

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
from helpers import GRAPHS

import gdln
from gdln.report._plots import equal_groups, mark_stages, seed_band


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def routing():
    return gdln.solve(gdln.load(GRAPHS / "routing.yaml"), t_max=40.0, b0=0.1)


def test_the_loss_plot_is_the_loss_and_the_loss_per_context(routing) -> None:
    ax = routing.plot()
    assert isinstance(ax, matplotlib.axes.Axes)
    (loss,) = [line for line in ax.get_lines() if line.get_gid() == "loss"]
    np.testing.assert_array_equal(loss.get_xdata(), routing.t)
    np.testing.assert_array_equal(loss.get_ydata(), routing.loss)
    drawn = [np.asarray(line.get_ydata()) for line in ax.get_lines() if line.get_gid() != "loss"]
    for values in routing.context_losses().values():  # every context is one of the lines
        assert any(np.allclose(values, y, rtol=0, atol=1e-12) for y in drawn)


def test_equal_modes_are_drawn_once_and_named_together(routing) -> None:
    """routing: s per mode sqrt(185)/4, sqrt(41)/4, 3/4, 3/4, so modes 2 and 3 are equal
    (one used to hide the other); B1 and B3 are equal too (conserved B1^2 - B3^2 = 0)."""
    ax = routing.plot("variables")
    lines = [line for line in ax.get_lines() if (line.get_gid() or "").startswith("curve")]
    drawn = [np.asarray(line.get_ydata()) for line in lines]
    for i, a in enumerate(drawn):  # no curve hides another
        assert not any(np.allclose(a, b, rtol=0, atol=1e-9) for b in drawn[i + 1 :])
    for name in ("B1", "B2", "B3"):
        values = routing.variable(name)
        np.testing.assert_allclose(values[:, 2], values[:, 3], rtol=1e-12)
        for a in range(values.shape[1]):  # every variable in every mode is drawn
            assert any(np.allclose(values[:, a], y, rtol=0, atol=1e-9) for y in drawn)
    labels = [line.get_label() for line in lines]
    assert "B2 [h1->h2], modes 2, 3" in labels
    assert "B1 [x0->h1 +6], mode 0 = B3 [h2->y0 +6], mode 0" in labels  # names its edges


def test_the_legend_sits_beside_the_axes_not_over_the_curves(routing) -> None:
    ax = routing.plot("variables")
    fig = ax.figure
    fig.canvas.draw()
    legend = ax.get_legend().get_window_extent()
    assert legend.x0 >= ax.get_window_extent().x1


def test_a_simulation_plots_its_seeds_within_their_range() -> None:
    rng = np.random.default_rng(0)
    t = np.linspace(0, 1, 50)
    loss = np.column_stack([np.where(t < 0.5 + 0.02 * s, 10.0, 1.0) for s in range(5)])
    loss += rng.uniform(0, 0.01, loss.shape)
    trajectory = gdln.Trajectory(t=t, loss=loss)
    ax = trajectory.plot()
    (band,) = [c for c in ax.collections if c.get_gid() == "seed band"]
    vertices = np.concatenate([p.vertices for p in band.get_paths()])
    top = np.interp(vertices[:, 0], t, loss.max(axis=1))
    bottom = np.interp(vertices[:, 0], t, loss.min(axis=1))
    assert np.all(vertices[:, 1] <= top + 1e-12) and np.all(vertices[:, 1] >= bottom - 1e-12)
    mean, sd = loss.mean(1), loss.std(1)
    assert np.any(mean + sd > loss.max(1))  # an unclipped band would have risen above
    mean_line = next(line for line in ax.get_lines() if line.get_gid() == "loss")
    np.testing.assert_allclose(mean_line.get_ydata(), mean)


def test_seed_band_and_equal_groups() -> None:
    mean, low, high = seed_band(np.array([[1.0, 1.0, 1.0, 9.0], [2.0, 2.0, 2.0, 2.0]]))
    assert (mean.tolist(), high[1], low[1]) == ([3.0, 2.0], 2.0, 2.0)
    assert 1.0 <= low[0] <= high[0] <= 9.0
    assert equal_groups([np.ones(2), np.ones(2) * (1 + 1e-12), np.zeros(2)]) == [[0, 1], [2]]


def test_stage_labels_of_close_stages_are_written_once() -> None:
    """Stages 2 and 3 one percent of the axis apart were labelled "23"."""
    fig, ax = plt.subplots()
    ax.plot([0, 100], [0, 1])
    ax.set_xlim(0, 100)
    labels = mark_stages(ax, [10.0, 50.0, 51.0, 90.0, 200.0])
    assert [text for _, text in labels] == ["1", "2,3", "4"]
    lines = {line.get_gid(): line.get_xdata()[0] for line in ax.get_lines() if line.get_gid()}
    assert lines == {"stage 1": 10.0, "stage 2": 50.0, "stage 3": 51.0, "stage 4": 90.0}
    fig.canvas.draw()
    boxes = [t.get_window_extent() for t in ax.texts]
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])


def test_timescales_plot_draws_the_plateaus_at_the_stage_times() -> None:
    result = gdln.timescales(gdln.load(GRAPHS / "late_fusion.yaml"), b0=1e-6)
    ax = result.plot()
    (steps,) = [line for line in ax.get_lines() if line.get_gid() == "plateaus"]
    losses = [result.initial_loss, *(s.loss for s in result.stages)]
    assert sorted(set(np.round(steps.get_ydata(), 12))) == sorted(set(np.round(losses, 12)))
    stage_lines = {line.get_gid(): line.get_xdata()[0] for line in ax.get_lines()}
    for k, stage in enumerate(result.stages, 1):
        assert stage_lines[f"stage {k}"] == pytest.approx(stage.time)


def test_timescales_round_trip_through_json_and_show_as_a_table() -> None:
    result = gdln.timescales(gdln.load(GRAPHS / "late_fusion.yaml"), b0=1e-6)
    again = gdln.Timescales.from_dict(json.loads(gdln.format_timescales(result, "json")))
    assert gdln.format_timescales(again) == gdln.format_timescales(result)
    html = result._repr_html_()
    for stage in result.stages:
        assert f"{stage.time:.6g}" in html and f"{stage.ode_time:.6g}" in html
    assert html.count("<tr>") == 1 + len(result.stages)


def test_problem_shows_its_nodes_edges_and_contexts_in_a_notebook() -> None:
    problem = gdln.load(GRAPHS / "xor.yaml")
    html = problem._repr_html_()
    for node, data in problem.graph.nodes(data=True):
        assert (
            f"<td style='text-align:left'>{node}</td><td style='text-align:left'>{data['size']}</td>"
            in html
        )
    for source, target in problem.graph.edges:
        assert f"{source}-&gt;{target}" in html
    for context in problem.require_task().contexts:
        assert context.label in html
    big = gdln.load(GRAPHS / "routing.yaml", params={"M": 30, "K": 30})
    assert "... 860 more contexts" in big._repr_html_()  # 900 contexts, 40 shown


def test_trajectory_kernels_show_their_distance_in_a_notebook() -> None:
    problem = gdln.load(GRAPHS / "xor.yaml", params={"hidden": 2})
    reduction = gdln.reduce(problem, b0=0.1)
    kernels = gdln.trajectory_kernels(reduction, gdln.solve(reduction, t_max=10.0, points=11))
    html = kernels._repr_html_()
    assert f"NTK {kernels.ntk.shape[1]}x{kernels.ntk.shape[2]} over 11 times" in html
    for t, s in zip(kernels.t, kernels.distance, strict=True):  # 11 times: all shown but 6
        if f"<td style='text-align:left'>{t:.4g}</td>" in html:
            assert f"<td style='text-align:left'>{s:.4g}</td>" in html
    assert html.count("<tr>") == 1 + 6 and "h0, h1" in html
