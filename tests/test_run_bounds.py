"""Numbers that imply absurd work, or none, are refused before a run starts (issue 22, §4).

Each case is checked against what the numbers imply, computed here independently:
``t_max / lr`` steps against ``Limits.steps``, recorded points against ``Limits.points``,
seeds x (rows x summed widths + weights) against ``Limits.batch_elements``. Every refusal
is one line naming the limit and its environment variable, in Python (a ``GdlnError``)
and on the command line (``gdln: error: ...``, exit 2), and comes before any work (the
functions that start a run are replaced by ones that fail the test): the cases that would
otherwise allocate terabytes or run for years end here at once.
A start that is a fixed point of the dynamics (b(0) = 0) gives a warning, checked against
the run itself (the loss does not move) and against a graph where zero is no fixed point.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from helpers import GRAPHS, load, run_cli, write

import gdln
from gdln.simulation import SimulationSpecError
from gdln.simulation import _simulate as simulate_module
from gdln.solution import _dynamics as dynamics_module
from gdln.solution import _solve as solve_module

CHAIN = str(GRAPHS / "chain.yaml")

ONE_LAYER = """\
nodes: [{id: x, size: 2}, {id: y, size: 1}]
edges: [{source: x, target: y}]
task:
  examples:
    - {inputs: {x: [1, 0]}, targets: {y: [1]}}
    - {inputs: {x: [0, 1]}, targets: {y: [-1]}}
"""


def _started(*args, **kwargs):
    raise AssertionError("the run started before its numbers were checked")


@pytest.fixture
def nothing_starts(monkeypatch):
    """Make every way of starting a run fail the test: a refusal must come first."""
    for module, name in [
        (solve_module, "_integrate_ode"),
        (solve_module, "_iterate_gd_map"),
        (simulate_module, "tensorise"),
        (simulate_module, "start_weights"),
        (dynamics_module, "derive"),  # the route rule of solve and compare reduces
        (gdln, "reduce"),  # the command line reduces before it solves
    ]:
        monkeypatch.setattr(module, name, _started)


# ----------------------------------------------------------------------------- gdln.solve


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"points": 0}, r"chain\.yaml: points \(--points\): expected an integer >= 2, got 0$"),
        ({"points": 1}, r"chain\.yaml: points \(--points\): expected an integer >= 2, got 1$"),
        ({"points": -3}, r"chain\.yaml: points \(--points\): expected an integer >= 2, got -3$"),
        ({"points": 2.5}, r"chain\.yaml: points \(--points\): expected an integer >= 2, got 2.5$"),
        (
            {"points": 100_000_000},
            r"^points=100000000 exceeds the limit points=100000 \(raise it: GDLN_MAX_POINTS=N\)$",
        ),
        (
            {"t_max": 1e12, "lr": 0.05, "dynamics": "gd-map"},
            r"^t_max/lr = 1e\+12/0.05 = 2e\+13 steps exceeds the limit steps=10000000 "
            r"\(raise it: GDLN_MAX_STEPS=N\); raise lr or lower t_max$",
        ),
        ({"lr": 1e-300, "dynamics": "gd-map"}, r"= 1e\+301 steps exceeds the limit steps=10000000"),
        ({"lr": 1e-320, "dynamics": "gd-map"}, r"= inf steps exceeds the limit steps=10000000"),
        (
            {"lr": 100, "dynamics": "gd-map"},
            r"^t_max: 10 is less than one step of lr=100 \(t_max/lr = 0.1 rounds to 0 steps\); "
            r"lower lr or raise t_max$",
        ),
        (
            {"t_max": 10**400},
            r"chain\.yaml: t_max \(--t-max\): expected a finite number > 0, got 1000.*\(401 digits\)$",
        ),
        (
            {"t_max": float("nan")},
            r"chain\.yaml: t_max \(--t-max\): expected a finite number > 0, got nan$",
        ),
        (
            {"lr": float("inf"), "dynamics": "gd-map"},
            r"chain\.yaml: lr \(--lr\): expected a finite number > 0, got inf$",
        ),
    ],
)
def test_solve_refuses_numbers_that_imply_no_work_or_absurd_work(
    kwargs, match, monkeypatch
) -> None:
    reduction = gdln.reduce(load("chain"), b0=0.1)
    options = {"t_max": 10} | kwargs
    monkeypatch.setattr(solve_module, "_integrate_ode", _started)
    monkeypatch.setattr(solve_module, "_iterate_gd_map", _started)
    with pytest.raises(gdln.GdlnError, match=match):
        gdln.solve(reduction, **options)


def test_solve_bounds_follow_the_environment(monkeypatch) -> None:
    reduction = gdln.reduce(load("chain"), b0=0.1)
    monkeypatch.setenv("GDLN_MAX_STEPS", "99")
    with pytest.raises(gdln.GdlnError, match=r"= 100 steps exceeds the limit steps=99"):
        gdln.solve(reduction, t_max=10, dynamics="gd-map", lr=0.1)
    monkeypatch.setenv("GDLN_MAX_STEPS", "100")
    monkeypatch.setenv("GDLN_MAX_POINTS", "3")
    assert len(gdln.solve(reduction, t_max=10, dynamics="gd-map", lr=0.1, points=3).t) == 3
    with pytest.raises(gdln.GdlnError, match=r"points=4 exceeds the limit points=3"):
        gdln.solve(reduction, t_max=10, points=4)


def test_a_horizon_of_one_step_is_one_step() -> None:
    # t_max/lr = 0.6 rounds to one step: the map takes it (t = lr), the first record is 0
    trajectory = gdln.solve(
        gdln.reduce(load("chain"), b0=0.1), t_max=0.6, dynamics="gd-map", lr=1.0
    )
    assert trajectory.t.tolist() == [0.0, 1.0]


def test_zero_init_warns_that_the_start_is_a_fixed_point() -> None:
    reduction = gdln.reduce(load("chain"), b0=0)
    with pytest.warns(gdln.DegenerateStartWarning, match=r"chain\.yaml: b\(0\) = 0 is a fixed"):
        trajectory = gdln.solve(reduction, t_max=10)
    # what the warning says is so: nothing moves
    assert np.ptp(trajectory.loss) == 0
    assert all(np.all(v == 0) for k, v in trajectory.series.items() if k != "context_loss")
    with pytest.warns(gdln.DegenerateStartWarning):
        gdln.solve(reduction, t_max=10, dynamics="gd-map", lr=0.1)


def test_no_warning_where_zero_is_not_a_fixed_point(tmp_path: Path) -> None:
    # one trained edge from input to output: its gradient at 0 is -Sigma_yx, not 0
    problem = gdln.load(write(tmp_path, ONE_LAYER))
    with warnings.catch_warnings():
        warnings.simplefilter("error", gdln.GdlnWarning)
        trajectory = gdln.solve(gdln.reduce(problem, b0=0), t_max=5)
        gdln.solve(gdln.reduce(load("chain"), b0=0.001), t_max=5)
    assert trajectory.loss[-1] < trajectory.loss[0] / 10


# ----------------------------------------------------------------------------- simulation


def test_horizon_steps() -> None:
    horizon_steps = gdln.simulation.horizon_steps
    assert horizon_steps(40, lr=0.05) == 800  # t/tau = lr * step
    assert horizon_steps(10, lr=0.05, momentum=0.9) == 20  # dt = lr / (1 - mu)
    with pytest.raises(SimulationSpecError, match=r"^t_max: 10 is less than one step of lr=100"):
        horizon_steps(10, lr=100)
    with pytest.raises(SimulationSpecError, match=r"= 2e\+13 steps exceeds the limit steps="):
        horizon_steps(1e12, lr=0.05)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (
            {"steps": 10**8},
            r"^steps=100000000 exceeds the limit steps=10000000 \(raise it: GDLN_MAX_STEPS=N\)$",
        ),
        (
            {"steps": 10**6, "record_every": 1},
            r"^1000001 records of 1000000 steps exceeds the limit points=100000 \(raise it: "
            r"GDLN_MAX_POINTS=N\); record fewer",
        ),
        (
            {"optimizer": "sgd", "batch_size": 10**9, "seeds": 10},
            # chain.yaml: 3 + 4 + 4 + 2 = 13 units, 12 + 16 + 8 = 36 weights
            r"^10 seed\(s\) x \(1000000000 rows x 13 units \+ 36 weights\) = 1.3e\+11 numbers "
            r"per step exceeds the limit batch_elements=50000000 \(raise it: "
            r"GDLN_MAX_BATCH_ELEMENTS=N\); use fewer seeds or a smaller batch$",
        ),
        (
            {"seeds": 2_000_000},
            r"^2000000 seed\(s\) x \(3 rows x 13 units \+ 36 weights\) = 1.5e\+08 numbers",
        ),
    ],
)
def test_simulate_refuses_absurd_work_before_allocating(kwargs, match, nothing_starts) -> None:
    problem = load("chain")
    options = {"steps": 10, "lr": 0.05} | kwargs
    with pytest.raises(SimulationSpecError, match=match):
        gdln.simulate(problem.graph, problem.examples(), **options)


def test_simulate_warns_when_zero_weights_cannot_move(tmp_path: Path) -> None:
    problem = load("chain")
    with pytest.warns(gdln.DegenerateStartWarning, match="fixed point of gradient descent"):
        run = gdln.simulate(problem.graph, problem.examples(), steps=20, lr=0.1, init_scale=0.0)
    assert np.ptp(run.loss) == 0  # the warning is right: the loss never moves
    one_layer = gdln.load(write(tmp_path, ONE_LAYER))
    with warnings.catch_warnings():
        warnings.simplefilter("error", gdln.GdlnWarning)
        moving = gdln.simulate(
            one_layer.graph, one_layer.examples(), steps=20, lr=0.1, init_scale=0.0
        )
        gdln.simulate(problem.graph, problem.examples(), steps=2, lr=0.1, init_scale=0.01)
    assert moving.loss[-1, 0] < moving.loss[0, 0] / 2


def test_compare_refuses_before_computing(tmp_path: Path, monkeypatch) -> None:
    problem = load("routing", M=2, K=1, hidden=4)
    monkeypatch.setattr(dynamics_module, "derive", _started)
    cases = [
        ({"points": 10**6}, r"^points=1000000 exceeds the limit points=100000"),
        ({"t_max": 10**300}, r"^t_max/lr = 1e\+300/0.05 = 2e\+301 steps exceeds the limit"),
        ({"seeds": 10**6}, r"numbers per step exceeds the limit batch_elements="),
    ]
    for kwargs, match in cases:
        with pytest.raises(SimulationSpecError, match=match):
            gdln.compare(problem, tmp_path / "out", **({"lr": 0.05, "t_max": 1} | kwargs))
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------- command line


def _graph_with(tmp_path: Path, solve: str) -> str:
    text = (GRAPHS / "chain.yaml").read_text().replace("solve: {b0: 0.1, t_max: 40}", solve)
    return str(write(tmp_path, text))


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--points", "0"], "points (--points): expected an integer >= 2, got 0"),
        (["--points", "-3"], "points (--points): expected an integer >= 2, got '-3'"),
        (["--points", "100000000"], "points=100000000 exceeds the limit points=100000"),
        (
            ["--t-max", "1e12", "--lr", "0.05", "--dynamics", "gd-map"],
            "2e+13 steps exceeds the limit steps=10000000",
        ),
        (
            ["--lr", "1e-320", "--dynamics", "gd-map"],
            "inf steps exceeds the limit steps=10000000 (raise it: GDLN_MAX",
        ),
        (["--lr", "100", "--dynamics", "gd-map"], "t_max: 40 is less than one step of lr=100"),
    ],
)
def test_solve_command_refuses_absurd_numbers(
    argv, match, tmp_path: Path, capsys, nothing_starts
) -> None:
    out = tmp_path / "out.json"
    code, stdout, err = run_cli(["solve", CHAIN, *argv, "-o", str(out)], capsys)
    assert (code, stdout) == (2, "")
    assert err.startswith("gdln: error: ") and match in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("solve", "match"),
    [
        (
            "solve: {t_max: '10**300', lr: 0.05, dynamics: gd-map}",
            "1e+300/0.05 = 2e+301 steps exceeds the limit",
        ),
        ("solve: {t_max: '10**400'}", "solve.t_max: expected a finite number > 0, got 1000"),
        (
            "solve: {t_max: 40, lr: 1e-300, dynamics: gd-map}",
            "4e+301 steps exceeds the limit steps=",
        ),
    ],
)
def test_the_files_solve_section_is_bounded_too(
    solve, match, tmp_path: Path, capsys, nothing_starts
) -> None:
    code, _, err = run_cli(["solve", _graph_with(tmp_path, solve)], capsys)
    assert code == 2 and match in err and err.count("\n") == 1


def test_solve_command_warns_on_init_zero(capsys) -> None:
    code, out, err = run_cli(
        ["solve", CHAIN, "--b0", "0", "--t-max", "1", "--format", "json"], capsys
    )
    assert code == 0 and '"loss"' in out
    assert err.startswith("gdln: warning: ") and "b(0) = 0 is a fixed point" in err
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (
            ["--optimizer", "sgd", "--batch-size", "1000000000"],
            "numbers per step exceeds the limit batch_elements=50000000",
        ),
        (["--lr", "100", "--t-max", "10"], "t_max: 10 is less than one step of lr=100"),
        (["--t-max", "1e12"], "2e+13 steps exceeds the limit steps=10000000"),
        (["--record-steps", "log:1000000000"], "exceeds the limit points=100000"),
        (["--seeds", "100000000"], "seeds=100000000 exceeds the limit batch_elements="),
    ],
)
def test_simulate_command_refuses_absurd_numbers(
    argv, match, tmp_path: Path, capsys, nothing_starts
) -> None:
    out = tmp_path / "run.npz"
    code, _, err = run_cli(["simulate", CHAIN, *argv, "-o", str(out)], capsys)
    assert code == 2 and match in err and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []


def test_simulate_command_warns_on_a_zero_decoupled_start(tmp_path: Path, capsys) -> None:
    out = tmp_path / "run.json"
    argv = ["simulate", CHAIN, "--init-scheme", "decoupled", "--b0", "0", "--t-max", "1"]
    code, _, err = run_cli([*argv, "--no-progress", "-o", str(out)], capsys)
    assert code == 0 and out.exists()
    assert err.splitlines()[0].startswith("gdln: warning: the initial weights are a fixed point")
    assert np.ptp(gdln.Trajectory.load(out).loss) == 0
