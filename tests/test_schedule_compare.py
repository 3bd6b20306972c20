"""gdln.compare with schedule= and `gdln schedule --compare`: a schedule's theory (the
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
from gdln.task import Schedule, blocked, interleaved

CONTEXTS = ["context0", "context1"]

SIGMA_X = np.eye(2) / 3
SIGMA_YX = {"context0": np.array([[1 / 3, 0.0]]), "context1": np.array([[0.0, 1 / 3]])}
SIGMA_Y = 1 / 3


def _numpy_gd(weights: dict, pathways: int, schedule: Schedule, lr: float) -> np.ndarray:
    """Full-batch gradient descent of the schedule on the full matrices: ``(steps + 1, 2)``
    each context's loss 1/2 E[(y - F_c x)^2] after every step, F_c = sum over the pathways
    context c opens of W2_k W1_k (one always-on pathway, or x -> h_c gated by context c)."""
    w1 = [np.array(weights[("x", f"h{k}")], dtype=float) for k in range(pathways)]
    w2 = [np.array(weights[(f"h{k}", "y")], dtype=float) for k in range(pathways)]
    labels = ["context0", "context1"]

    def gate(c: int, k: int) -> float:
        return 1.0 if pathways == 1 or k == c else 0.0

    def transfer(c: int) -> np.ndarray:
        return sum(gate(c, k) * w2[k] @ w1[k] for k in range(pathways))

    def losses() -> list[float]:
        out = []
        for c, label in enumerate(labels):
            f = transfer(c)
            sxy = SIGMA_YX[label]
            out.append(0.5 * (SIGMA_Y - 2 * np.sum(f * sxy) + np.trace(f @ SIGMA_X @ f.T)))
        return out

    rows = [losses()]
    for phase in schedule.phases:
        pi = [float(phase.probabilities.get(label, 0)) for label in labels]
        for _ in range(round(float(phase.duration) / lr)):
            # dL/dF_c = pi_c (F_c Sigma_x - Sigma_yx^c); chain rule through W2_k W1_k
            d = [pi[c] * (transfer(c) @ SIGMA_X - SIGMA_YX[lab]) for c, lab in enumerate(labels)]
            g1 = [sum(gate(c, k) * w2[k].T @ d[c] for c in range(2)) for k in range(pathways)]
            g2 = [sum(gate(c, k) * d[c] @ w1[k].T for c in range(2)) for k in range(pathways)]
            for k in range(pathways):
                w1[k] = w1[k] - lr * g1[k]
                w2[k] = w2[k] - lr * g2[k]
            rows.append(losses())
    return np.array(rows)


def _context(pathways: int) -> gdln.Problem:
    return gdln.load(GRAPHS / "context.yaml", params={"pathways": str(pathways), "hidden": "4"})


@pytest.mark.parametrize(("pathways", "forgotten"), [(1, 1 / 3), (2, 0.0)])
def test_blocked_training_forgets_as_the_closed_form_says(
    pathways: int, forgotten: float, tmp_path
) -> None:
    result = gdln.compare(
        _context(pathways),
        tmp_path / "out",
        schedule=blocked(CONTEXTS, 30.0),
        lr=0.1,
        b0=0.1,
        seeds=2,
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


@pytest.mark.parametrize("pathways", [1, 2])
def test_simulation_and_map_equal_numpy_gradient_descent_of_the_schedule(pathways: int) -> None:
    # an independent reference: full-batch gradient descent of the full matrices through
    # three phases, the gradient by hand from the moments (x ~ U[-1, 1]^2, target x_c)
    problem = _context(pathways)
    schedule = Schedule(blocked(CONTEXTS, 1.0).phases + interleaved(CONTEXTS, 1.0).phases)
    lr, b0 = 0.25, 0.3
    result = gdln.compare(problem, schedule=schedule, lr=lr, b0=b0, points=13, seeds=1)
    start = gdln.reduce(problem, b0=b0, lump="none", route="contexts").decoupled_weights(seed=0)
    want = _numpy_gd(start, pathways, schedule, lr)
    steps = np.rint(result.decoupled.t / lr).astype(int)
    assert steps[-1] == 12 and len(steps) == 13  # every step recorded, boundaries too
    sim = result.decoupled.context_losses()
    for c, label in enumerate(CONTEXTS):
        scale = want[0, c]
        np.testing.assert_allclose(sim[label][:, 0], want[steps, c], rtol=0, atol=1e-12 * scale)
        got = result.theory.context_loss[label]
        np.testing.assert_allclose(got, want[steps, c], rtol=0, atol=1e-12 * scale)
    # two gated pathways keep the start's bases (reduced map); one pathway does not
    routes = [p["route"] for p in result.metrics["phases"]]
    assert routes == (["contexts"] * 3 if pathways == 2 else ["matrix"] * 3)


def test_every_random_scheme_starts_the_random_simulation() -> None:
    # the random simulation takes each random scheme of gdln.settings.INITS as asked
    problem = _context(2)
    schedule = blocked(CONTEXTS, 0.5)
    for scheme in ("singular", "orthogonal"):
        result = gdln.compare(
            problem,
            schedule=schedule,
            lr=0.25,
            init_scheme=scheme,
            init_scale=0.25,
            seeds=1,
            points=3,
        )
        assert result.metrics["random_start"]["init_scheme"] == scheme
        # both schemes start every singular value at the initial scale (xavier would not)
        for key, sv in result.random.series.items():
            if key.startswith("sv/"):
                np.testing.assert_allclose(sv[0], 0.25, rtol=1e-12)
