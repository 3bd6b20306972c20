"""gdln.schedule.compare_schedule and `gdln schedule --compare`: a schedule's theory (the
reduced GD map) against the full network trained through the same phases (issue 36).

Checks: from the decoupled weights of Eq. (9) the simulation is the reduced map to
rounding in every context all along; the end losses are the closed forms of App. A.2 of
Saxe et al. (2022) / Flesch et al. (2023) worked out by hand (blocked training of one
shared pathway forgets context 0 completely, 1/2<(x1 - x2)^2> = 1/3; two gated pathways
forget nothing); the command writes the same comparison into a folder.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import GRAPHS, run_cli

import gdln
from gdln.task import blocked

CONTEXTS = ["context0", "context1"]


def _context(pathways: int) -> gdln.Problem:
    return gdln.load(GRAPHS / "context.yaml", params={"pathways": str(pathways), "hidden": "4"})


@pytest.mark.parametrize(("pathways", "forgotten"), [(1, 1 / 3), (2, 0.0)])
def test_blocked_training_forgets_as_the_closed_form_says(
    pathways: int, forgotten: float, tmp_path
) -> None:
    result = gdln.schedule.compare_schedule(
        _context(pathways), blocked(CONTEXTS, 30.0), tmp_path / "out", lr=0.1, b0=0.1, seeds=2
    )
    contexts = result.metrics["contexts"]
    for label in CONTEXTS:
        assert contexts[label]["decoupled_vs_map"] < 1e-12
        assert contexts[label]["random_vs_map"] < 0.5  # follows it, approximately
    end = contexts["context0"]["end_loss"]
    # x ~ U[-1, 1]^2, <xx^T> = I/3: after context 1 the shared map is [0 1], and context 0's
    # loss is 1/2 <(x1 - x2)^2> = 1/3 in the limit (30 tau per phase reach it to 1e-4); the
    # gated network keeps context 0's pathway
    assert end["theory"] == pytest.approx(forgotten, abs=1e-4)
    assert end["decoupled"] == pytest.approx(forgotten, abs=1e-4)
    assert contexts["context1"]["end_loss"]["theory"] < 1e-4
    written = sorted(f.name for f in result.files)
    assert written == sorted(gdln.schedule.SCHEDULE_FILES)
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["boundaries"] == [0.0, 30.0, 60.0]
    np.testing.assert_allclose(result.decoupled.t, result.theory.trajectory.t, atol=1e-12)


def test_the_command_writes_the_comparison(tmp_path, capsys) -> None:
    out = tmp_path / "cmp"
    args = ["schedule", str(GRAPHS / "context.yaml"), "--param", "pathways=2"]
    args += ["--param", "hidden=4", "--lr", "0.1", "--seeds", "2", "--compare", str(out)]
    code, _, err = run_cli(args, capsys)
    assert code == 0, err
    assert "context0: decoupled start" in err
    assert sorted(p.name for p in out.iterdir()) == sorted(gdln.schedule.SCHEDULE_FILES)
    code, _, err = run_cli([*args[:-2], "-o", str(tmp_path / "x.json")], capsys)
    assert code == 2 and "--seeds: only with --compare" in err


def test_solve_simulate_and_compare_follow_the_files_schedule(tmp_path, capsys) -> None:
    # gdln solve/simulate/compare --schedule: the file's schedule: section phase by phase;
    # the simulation from the decoupled start is the reduced GD map to rounding
    base = ["--param", "pathways=1", "--param", "hidden=4", "--schedule", "--lr", "0.1"]
    graph = str(GRAPHS / "context.yaml")
    start = ["--b0", "0.1", "--points", "31"]
    code, _, err = run_cli(
        ["solve", graph, *base, *start, "--dynamics", "gd-map", "-o", str(tmp_path / "t.json")],
        capsys,
    )
    assert code == 0, err
    theory = json.loads((tmp_path / "t.json").read_text())
    code, _, err = run_cli(
        [
            *["simulate", graph, *base, *start, "--init-scheme", "decoupled"],
            *["--seeds", "1", "-o", str(tmp_path / "s.npz")],
        ],
        capsys,
    )
    assert code == 0, err
    sim = gdln.Trajectory.load(tmp_path / "s.npz")
    problem = _context(1)
    assert sim.meta["schedule"]["boundaries"] == list(problem.schedule.boundaries)
    t = np.asarray(theory["t"])
    for label, curve in sim.context_losses().items():
        want = np.asarray(theory["context_loss"][label])
        got = np.interp(t, sim.t, curve[:, 0])  # equal times: both record every boundary
        assert np.isin(t, sim.t).all()
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * want[0])
    code, _, err = run_cli(
        ["compare", graph, *base, "--seeds", "1", "-o", str(tmp_path / "c")], capsys
    )
    assert code == 0 and "decoupled start" in err, err
    code, _, err = run_cli(["solve", graph, *base, "--t-max", "3"], capsys)
    assert code == 2 and "--schedule and --t-max" in err


def test_solve_simulate_and_compare_take_a_schedule_in_python() -> None:
    # schedule= on the three entry points: the reduced map, and the simulation from the
    # decoupled start equal to it to rounding; the full network forgets context 0 (1/3)
    problem = _context(1)
    schedule = blocked(CONTEXTS, 30.0)
    theory = gdln.solve(problem, schedule=schedule, dynamics="gd-map", lr=0.1, points=31)
    sim = gdln.simulate(
        problem, schedule=schedule, lr=0.1, init_scheme="decoupled", seeds=1, points=31
    )
    assert theory.meta["schedule"]["boundaries"] == [0.0, 30.0, 60.0]
    for label, curve in sim.context_losses().items():
        want = theory.context_losses()[label]
        np.testing.assert_allclose(
            np.interp(theory.t, sim.t, curve[:, 0]), want, rtol=0, atol=1e-12 * want[0]
        )
    assert theory.context_losses()["context0"][-1] == pytest.approx(1 / 3, abs=1e-4)
    result = gdln.compare(problem, schedule=schedule, lr=0.1, seeds=1, points=31)
    assert result.metrics["contexts"]["context0"]["decoupled_vs_map"] < 1e-12
    with pytest.raises(gdln.GdlnError, match="schedule"):
        gdln.simulate(problem, schedule=schedule, steps=5)
    with pytest.raises(gdln.GdlnError, match="t_max"):
        gdln.solve(problem, schedule=schedule, t_max=3)
