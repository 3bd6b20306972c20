"""``gdln plot`` and gdln.plotting (issue 38 item 2): every kind of result file gdln
writes is drawn, and what is drawn is read back from the figure's artists and compared
with the numbers the result itself holds (the solve in memory, the table's rows, the
kernel's eigenvalues)."""

from __future__ import annotations

import json

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
from helpers import GRAPHS, run_cli

import gdln
from gdln.solution import read_trajectory


@pytest.fixture(scope="module")
def xor():
    problem = gdln.load(GRAPHS / "xor.yaml", params={"hidden": 2})
    return gdln.solve(problem, t_max=10.0, b0=0.1)


def _line(fig, gid):
    return next(line for ax in fig.axes for line in ax.get_lines() if line.get_gid() == gid)


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_solves_outputs_read_back_and_draw_as_the_solve(xor, fmt, tmp_path) -> None:
    path = tmp_path / f"xor.{fmt}"
    path.write_text(gdln.format_trajectory(xor, fmt))
    again = read_trajectory(path)
    np.testing.assert_allclose(again.loss, xor.loss, rtol=1e-11)
    for name in ("B1", "B2"):
        np.testing.assert_allclose(again.variable(name), xor.variable(name), rtol=1e-11)
    for label, values in xor.context_losses().items():
        np.testing.assert_allclose(again.context_losses()[label], values, rtol=1e-11)
    fig = gdln.plotting.plot_result(path)
    assert len(fig.axes) == 2  # the loss, the variables
    np.testing.assert_allclose(_line(fig, "loss").get_ydata(), xor.loss, rtol=1e-11)
    drawn = [np.asarray(line.get_ydata()) for line in fig.axes[1].get_lines()]
    for a in range(xor.variable("B1").shape[1]):
        assert any(np.allclose(xor.variable("B1")[:, a], y, rtol=1e-10) for y in drawn)


def test_the_command_writes_each_format_by_its_suffix(xor, tmp_path, capsys) -> None:
    result = tmp_path / "xor.json"
    result.write_text(gdln.format_trajectory(xor, "json"))
    magic = {"png": b"\x89PNG", "svg": b"<?xml", "pdf": b"%PDF"}
    for suffix, start in magic.items():
        out = tmp_path / f"xor.{suffix}"
        code, _, err = run_cli(["plot", str(result), "-o", str(out)], capsys)
        assert (code, err) == (0, f"wrote {out}\n") and out.read_bytes().startswith(start)
    before = (tmp_path / "xor.png").read_bytes()
    code, out, err = run_cli(["plot", str(result), "-o", str(tmp_path / "xor.png")], capsys)
    assert code == 2 and err.count("\n") == 1 and "exists; pass --force" in err
    assert (tmp_path / "xor.png").read_bytes() == before  # nothing overwritten unasked
    code, _, err = run_cli(["plot", str(result), "-o", str(tmp_path / "xor.jpg")], capsys)
    assert code == 2 and "expected a file ending in .png or .svg or .pdf" in err
    junk = tmp_path / "junk.json"
    junk.write_text('{"a": 1}')
    code, _, err = run_cli(["plot", str(junk), "-o", str(tmp_path / "j.png")], capsys)
    assert code == 2 and err.startswith(f"gdln: error: {junk}: not a result gdln draws")
    assert not (tmp_path / "j.png").exists()


def test_a_simulation_and_timescales_are_drawn(tmp_path) -> None:
    problem = gdln.load(GRAPHS / "xor.yaml", params={"hidden": 4})
    run = gdln.simulate(problem, t_max=2.0, lr=0.1, seeds=3, points=5, seed=0)
    run.save(tmp_path / "sim.npz")
    fig = gdln.plotting.plot_result(tmp_path / "sim.npz")
    np.testing.assert_allclose(_line(fig, "loss").get_ydata(), run.loss.mean(axis=1))
    stages = gdln.timescales(gdln.load(GRAPHS / "late_fusion.yaml"), b0=1e-6)
    (tmp_path / "st.json").write_text(gdln.format_timescales(stages, "json"))
    fig = gdln.plotting.plot_result(tmp_path / "st.json")
    for k, stage in enumerate(stages.stages, 1):
        assert _line(fig, f"stage {k}").get_xdata()[0] == pytest.approx(stage.time)


def test_a_sweep_table_draws_each_result_against_its_first_column(tmp_path) -> None:
    table = tmp_path / "sweep.csv"
    rows = [(k, s, 0.1 / k + 0.01 * s, 1.0 / k + 0.5) for k in (1, 2, 4) for s in range(3)]
    table.write_text(
        "K,seed,trained,untrained\n" + "".join(f"{k},{s},{a!r},{b!r}\n" for k, s, a, b in rows)
    )
    fig = gdln.plotting.plot_result(table)
    for j, column in ((2, "trained"), (3, "untrained")):
        line = _line(fig, column)
        assert list(line.get_xdata()) == [1.0, 2.0, 4.0]
        means = [np.mean([r[j] for r in rows if r[0] == k]) for k in (1, 2, 4)]
        np.testing.assert_allclose(line.get_ydata(), means)
    assert not any(line.get_gid() == "seed" for line in fig.axes[0].get_lines())
    with pytest.raises(gdln.plotting.PlotError, match="column 'nope' is not numeric"):
        gdln.plotting.plot_result(table, x="nope")


def test_a_kernel_record_draws_its_eigenvalues(tmp_path) -> None:
    eigenvalues = [0.5, 4.0, 1.0, 2.0]
    (tmp_path / "kernel.json").write_text(json.dumps({"kind": "npk", "eigenvalues": eigenvalues}))
    fig = gdln.plotting.plot_result(tmp_path / "kernel.json")
    assert list(_line(fig, "eigenvalues").get_ydata()) == [4.0, 2.0, 1.0, 0.5]
