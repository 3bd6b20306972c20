"""The ``gdln simulate`` and ``gdln compare`` commands, through the real entry point."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import GRAPHS, full_loss_and_gradient, run_cli

import gdln
from gdln.cli import main

ROUTING = str(GRAPHS / "routing.yaml")
SMALL = ["--param", "M=3", "--param", "K=2", "--param", "hidden=8"]

ALL_ROUTES_TASK = """\
datasets:
  base: {builtin: hierarchy}
task:
  contexts:
    - repeat: {i: M, j: M}
      label: "x{i}->y{j}"
      probability: 1/(M*M)
      active: ["x{i}->h1", "h2->y{j}"]
      dataset: base
      inputs: {"x{i}": x}
      targets: {"y{j}": y}
"""


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Small networks: one torch thread (see tests/test_simulate.py)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Run ``gdln ARGV``; return the exit status and stderr."""
    code, _, err = run_cli(argv, capsys)
    return code, err


def test_simulate_writes_a_trajectory(tmp_path: Path, capsys) -> None:
    out = tmp_path / "run.npz"
    argv = ["simulate", ROUTING, *SMALL, "--lr", "0.05", "--t-max", "2", "--seeds", "3"]
    code, err = run([*argv, "--points", "5", "--threads", "1", "-o", str(out)], capsys)
    assert code == 0, err
    assert f"wrote {out}" in err
    traj = gdln.Trajectory.load(out)
    assert traj.loss.shape == (5, 3)
    np.testing.assert_allclose(traj.t, [0, 0.5, 1, 1.5, 2], rtol=1e-12)
    assert traj.meta["seeds"] == [0, 1, 2] and traj.meta["init_scheme"] == "xavier"
    # refuses to overwrite: one line, exit 2
    code, err = run([*argv, "-o", str(out)], capsys)
    assert code == 2
    assert err.strip().splitlines() == [f"gdln: error: {out} exists; pass --force to replace it"]
    code, err = run([*argv, "--points", "3", "--no-progress", "--force", "-o", str(out)], capsys)
    assert code == 0, err
    assert len(gdln.Trajectory.load(out).t) == 3


def test_simulate_orthogonal_init_with_a_gain(tmp_path: Path, capsys) -> None:
    """--init-scheme orthogonal --init 0.5: every W_e = 0.5 x (semi-)orthogonal at step 0."""
    out = tmp_path / "orth.npz"
    argv = ["simulate", ROUTING, *SMALL, "--lr", "0.05", "--t-max", "0.5", "--seeds", "2"]
    argv += ["--init-scheme", "orthogonal", "--init", "0.5", "--seed", "3"]
    code, err = run([*argv, "--points", "2", "-o", str(out)], capsys)
    assert code == 0, err
    traj = gdln.Trajectory.load(out)
    assert traj.meta["init_scheme"] == "orthogonal"
    problem = gdln.load(ROUTING, params={"M": 3, "K": 2, "hidden": 8})
    drawn = gdln.simulation.initial_weights(
        problem.graph, init_scheme="orthogonal", init_scale=0.5, seeds=2, seed=3
    )
    for s in range(2):
        for (u, v), w in drawn.items():
            sv = traj.series[f"sv/{u}->{v}"][0, s]
            np.testing.assert_allclose(sv[: min(w.shape[1:])], 0.5, rtol=1e-12)
        loss, _ = full_loss_and_gradient(problem, {e: w[s] for e, w in drawn.items()})
        assert traj.loss[0, s] == pytest.approx(loss, rel=1e-12)


def test_simulate_decoupled_equals_reduced_map(tmp_path: Path, capsys) -> None:
    out = tmp_path / "dec.json"
    argv = ["simulate", ROUTING, *SMALL, "--lr", "0.05", "--t-max", "5"]
    argv += ["--init-scheme", "decoupled", "--b0", "0.1"]
    code, err = run([*argv, "--points", "11", "--project", "-o", str(out)], capsys)
    assert code == 0, err
    sim = gdln.Trajectory.load(out)
    problem = gdln.load(ROUTING, params={"M": 3, "K": 2, "hidden": 8})
    theory = gdln.solve(
        gdln.reduce(problem, lump="none", route="contexts", b0=0.1),
        t_max=5,
        dynamics="gd-map",
        lr=0.05,
        points=11,
    )
    np.testing.assert_allclose(sim.loss[:, 0], theory.loss, rtol=1e-10)
    np.testing.assert_allclose(
        sim.series["proj/h1->h2"][:, 0], theory.series["b_h1_h2"], rtol=1e-10
    )


def test_simulate_eval_task_and_rsm(tmp_path: Path, capsys) -> None:
    task = tmp_path / "all_routes.yaml"
    task.write_text(ALL_ROUTES_TASK)
    out = tmp_path / "ev.npz"
    argv = ["simulate", ROUTING, *SMALL, "--lr", "0.05", "--t-max", "1", "--seeds", "2"]
    code, err = run([*argv, "--eval-task", str(task), "--rsm", "-o", str(out)], capsys)
    assert code == 0, err
    traj = gdln.Trajectory.load(out)
    assert traj.meta["eval_contexts"] == [f"x{i}->y{j}" for i in range(3) for j in range(3)]
    # 9 routes x 4 items; RSM at both hidden nodes over the evaluation examples
    assert traj.series["eval/example_loss"].shape[1:] == (2, 36)
    assert traj.series["rsm/h1"].shape[1:] == (2, 36, 36)
    # the trained routes' evaluation loss equals their training loss
    np.testing.assert_allclose(
        traj.series["eval/loss/x0->y1"], traj.series["loss/x0->y1"], rtol=1e-12
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["-o", "x.txt"], r"-o x\.txt: expected a file ending in \.npz or \.json"),
        (["-o", "no/x.npz"], r"-o no/x\.npz: the folder no does not exist"),
        (
            ["--init-scale", "-1", "-o", "x.npz"],
            r"init_scale \(--init-scale\): expected a finite number >= 0, got '-1'",
        ),
        (["--points", "1", "-o", "x.npz"], r"points \(--points\): expected an integer >= 2, got"),
        (["--lr", "-1", "-o", "x.npz"], r"lr \(--lr\): expected a finite number > 0, got '-1'"),
        (["--param", "Q=3", "-o", "x.npz"], r"unknown parameter 'Q'"),
        (["--optimizer", "sgd", "-o", "x.npz"], r"batch_size: expected an int > 0, got None"),
        (
            ["--momentum", "1", "-o", "x.npz"],
            r"momentum \(--momentum\): expected a number in \[0, 1\), got '1'",
        ),
        (["--record-steps", "log:0", "-o", "x.npz"], r"record_steps: expected 'log:N' with"),
        (["--record-steps", "3,a", "-o", "x.npz"], r"record_steps: expected 'log:N' or a comma"),
        (
            ["--record-steps", "0,99", "-o", "x.npz"],
            r"record_steps: expected a non-empty list of ints in \[0, steps=20\], got \[0, 99\]",
        ),
    ],
)
def test_simulate_bad_input_is_one_line(
    extra, message, tmp_path: Path, capsys, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, err = run(["simulate", ROUTING, *SMALL, "--t-max", "1", *extra], capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gdln: error: ")

    assert re.search(message, lines[0]), lines[0]


def test_simulate_momentum_keeps_t_max_in_tau(tmp_path: Path, capsys) -> None:
    """--momentum 0.9: t is flow time, so --t-max 2 takes (1 - 0.9) * 2 / 0.01 = 20 steps."""
    out = tmp_path / "m.npz"
    argv = ["simulate", ROUTING, *SMALL, "--lr", "0.01", "--t-max", "2", "--momentum", "0.9"]
    code, err = run([*argv, "--points", "5", "-o", str(out)], capsys)
    assert code == 0, err
    traj = gdln.Trajectory.load(out)
    assert traj.meta["steps"] == 20
    np.testing.assert_allclose(traj.t, np.linspace(0, 2, 5), rtol=1e-12)
    assert "lr / (1 - momentum)" in traj.meta["time"]


def test_simulate_record_steps(tmp_path: Path, capsys) -> None:
    argv = ["simulate", ROUTING, *SMALL, "--lr", "0.05", "--t-max", "5", "--seeds", "1"]
    out = tmp_path / "log.npz"
    code, err = run([*argv, "--record-steps", "log:4", "-o", str(out)], capsys)
    assert code == 0, err
    # 100 steps: 0 and 4 log-spaced steps from 1 to 100
    expected = [0, *np.rint(np.geomspace(1, 100, 4)).astype(int)]
    assert gdln.Trajectory.load(out).meta["step_at"] == expected
    out = tmp_path / "list.npz"
    code, err = run([*argv, "--record-steps", "50,3,0", "-o", str(out)], capsys)
    assert code == 0, err
    traj = gdln.Trajectory.load(out)
    assert traj.meta["step_at"] == [0, 3, 50]
    np.testing.assert_allclose(traj.t, [0, 0.15, 2.5], rtol=1e-12)


def test_simulate_cuda_missing(tmp_path: Path, capsys) -> None:
    if torch.cuda.is_available():
        pytest.skip("CUDA present")
    argv = ["simulate", ROUTING, *SMALL, "--t-max", "1", "--device", "cuda"]
    code, err = run([*argv, "-o", str(tmp_path / "c.npz")], capsys)
    assert code == 2
    assert "device: 'cuda' requested but CUDA is not available" in err


@pytest.mark.parametrize("command", ["simulate", "compare"])
def test_help_has_an_example(command: str, capsys) -> None:
    code = 0
    try:
        main([command, "--help"])
    except SystemExit as exc:
        code = int(exc.code or 0)
    text = capsys.readouterr().out
    assert code == 0
    assert "Example:" in text and f"gdln {command} graphs/routing.yaml" in text
    assert "--force" in text and "--seed" in text and "--device" in text and "--dtype" in text


def test_compare_bad_b0_is_one_line(tmp_path: Path, capsys) -> None:
    argv = ["compare", ROUTING, *SMALL, "--t-max", "1", "--b0", "small"]
    code, err = run([*argv, "-o", str(tmp_path)], capsys)
    assert code == 2
    assert err.strip().splitlines() == [
        f"gdln: error: {ROUTING}: b0 (--b0): expected a real number, got 'small'"
    ]


def test_compare_help_explains_the_default_start(capsys) -> None:
    try:
        main(["compare", "--help"])
    except SystemExit as exc:
        assert not exc.code
    text = " ".join(capsys.readouterr().out.split())
    assert "(--theory-start auto) at b0 where --b0 is given, or the file's solve.b0" in text


def test_compare_refuses_existing_outputs(tmp_path: Path, capsys) -> None:
    (tmp_path / "metrics.json").write_text("{}")
    argv = ["compare", ROUTING, *SMALL, "--t-max", "1", "-o", str(tmp_path)]
    code, err = run(argv, capsys)
    assert code == 2
    assert err == f"gdln: error: {tmp_path} exists; pass --force to replace it\n"
    assert (tmp_path / "metrics.json").read_text() == "{}"


@pytest.mark.slow
def test_compare_command_writes_everything(tmp_path: Path, capsys) -> None:
    out = tmp_path / "cmp"
    argv = ["compare", ROUTING, *SMALL, "--lr", "0.05", "--t-max", "10", "--theory-init", "0.1"]
    code, err = run([*argv, "--seeds", "2", "--points", "21", "-o", str(out)], capsys)
    assert code == 0, err
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["decoupled_vs_map"] < 1e-10
    assert sorted(metrics["files"]) == sorted(p.name for p in out.iterdir())


def test_compare_line_counts_every_seed_and_never_prints_none(tmp_path: Path, capsys) -> None:
    """A deep chain stopped early: most seeds never halve; the line says so, no None."""
    out = tmp_path / "cmp"
    argv = ["compare", str(GRAPHS / "chain.yaml"), "--lr", "0.05", "--t-max", "6"]
    code, err = run([*argv, "--seeds", "5", "--points", "11", "-o", str(out)], capsys)
    assert code == 0, err
    assert "None" not in err and "nan" not in err
    metrics = json.loads((out / "metrics.json").read_text())
    half = metrics["time_to_half_loss"]
    per_seed = half["random_per_seed"]
    censored = sum(t is None for t in per_seed)
    assert len(per_seed) == 5 and censored > 5 / 2  # the case of the issue: most seeds
    assert half["ode"] is None and "ODE > 6," in err
    q1 = np.quantile([np.inf if t is None else t for t in per_seed], 0.25, method="inverted_cdf")
    assert f"median > 6 (IQR {q1:.3g} to " in err
    assert f"5 seeds, {censored} never within t_max = 6)" in err
    random = half["random"]
    assert (random["seeds"], random["censored"], random["median"]) == (5, censored, "> 6")
    # the median and quartiles from their definition, censored seeds as +inf
    times = np.array([np.inf if t is None else t for t in per_seed])
    for key, q in (("q1", 0.25), ("median", 0.5), ("q3", 0.75)):
        expected = np.quantile(times, q, method="inverted_cdf")
        assert random[key] == (expected if np.isfinite(expected) else "> 6")


def _routing_with(tmp_path: Path, settings: str) -> Path:
    """routing.yaml with its ``solve:`` section replaced by ``settings``."""
    text = (GRAPHS / "routing.yaml").read_text()
    assert "solve: {b0: 0.1, t_max: 40}" in text
    path = tmp_path / "routing_settings.yaml"
    path.write_text(text.replace("solve: {b0: 0.1, t_max: 40}", f"solve: {{{settings}}}"))
    return path


def test_simulate_takes_lr_t_max_and_init_from_the_file(tmp_path: Path, capsys) -> None:
    graph = _routing_with(tmp_path, "b0: 0.05, t_max: 1, lr: 0.1")
    out = tmp_path / "dec.npz"
    argv = ["simulate", str(graph), *SMALL, "--init-scheme", "decoupled", "--points", "11"]
    code, err = run([*argv, "-o", str(out)], capsys)
    assert code == 0, err
    sim = gdln.Trajectory.load(out)
    problem = gdln.load(ROUTING, params={"M": 3, "K": 2, "hidden": 8})
    theory = gdln.solve(
        gdln.reduce(problem, b0=0.05), t_max=1, dynamics="gd-map", lr=0.1, points=11
    )
    assert sim.meta["steps"] == 10
    np.testing.assert_allclose(sim.t, theory.t, rtol=1e-12)
    np.testing.assert_allclose(sim.loss[:, 0], theory.loss, rtol=1e-10)
    # the command line overrides the file
    code, err = run([*argv, "--lr", "0.05", "--init", "0.2", "-o", str(out), "--force"], capsys)
    assert code == 0, err
    theory = gdln.solve(
        gdln.reduce(problem, b0=0.2), t_max=1, dynamics="gd-map", lr=0.05, points=11
    )
    np.testing.assert_allclose(gdln.Trajectory.load(out).loss[:, 0], theory.loss, rtol=1e-10)


def test_compare_error_leaves_the_output_folder_untouched(tmp_path: Path, capsys) -> None:
    out = tmp_path / "cmp"
    argv = ["compare", ROUTING, *SMALL, "--lr", "0.05", "--t-max", "0.01", "-o", str(out)]
    code, err = run(argv, capsys)
    assert code == 2 and "less than one step" in err and len(err.splitlines()) == 1
    assert list(tmp_path.iterdir()) == []  # neither the folder nor a temporary one
    code, err = run([*argv[:-1], str(tmp_path / "missing" / "cmp")], capsys)
    assert code == 2 and err.startswith("gdln: error: -o ") and "does not exist" in err
