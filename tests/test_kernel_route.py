"""The kernel along any solved trajectory, from Python and from `gdln solve --kernel`.

What `gdln solve --kernel` writes (S(t) and each hidden node's Gram matrix over the task's
examples) is checked against the tangent kernel that torch.func computes
(test_trajectory_kernel.torch_ntk) on full weight matrices obtained without the theory:
weights that gdln.simulate trained by full-batch gradient descent from decoupled starts
(where the reduced map is exact), and weights that scipy integrated from λ-balanced starts
(test_balanced.full_flow); the refusals are one line on stderr with exit status 2.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest
from helpers import load, run_cli
from test_balanced import full_flow
from test_trajectory_kernel import torch_ntk

import gdln

GRAPHS = Path(__file__).resolve().parent.parent / "graphs"


def _solved(args: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    code, out, err = run_cli(["solve", *args, "--kernel", "--format", "json"], capsys)
    assert code == 0, err
    return json.loads(out)


def _reference(
    problem: gdln.Problem, weights_at: list[Mapping[tuple[str, str], np.ndarray]]
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """S(t) and h_v h_v^T ``(T, n, n)`` from torch.func's NTK of the given weights."""
    kernels, reps = [], {}
    hidden = [v for v in problem.graph.nodes if problem.graph.in_degree(v)]
    hidden = [v for v in hidden if problem.graph.out_degree(v)]
    for k, weights in enumerate(weights_at):
        ntk, acts = torch_ntk(problem.graph, problem.examples(), weights)
        kernels.append(ntk.ravel())
        for v in hidden:
            reps.setdefault(str(v), []).append(acts[v] @ acts[v].T)
        assert k == len(kernels) - 1
    K = np.array(kernels)
    cosine = K @ K[0] / (np.linalg.norm(K, axis=1) * np.linalg.norm(K[0]))
    return 1.0 - cosine, {v: np.array(r) for v, r in reps.items()}


def _check(payload: dict[str, object], S: np.ndarray, reps: dict[str, np.ndarray]) -> None:
    variables = payload["variables"]
    assert isinstance(variables, dict)
    np.testing.assert_allclose(variables["kernel_distance"], S, rtol=1e-10, atol=1e-12)
    for node, ref in reps.items():
        got = np.moveaxis(np.asarray(variables[f"rsm/{node}"]), -1, 0)  # JSON: time last
        assert np.abs(got - ref).max() <= 1e-10 * np.abs(ref).max()


def test_cli_kernel_on_the_symmetry_quotient_equals_torch_func_on_the_simulated_network(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Routing solves on the symmetry quotient; --kernel re-solves every context at the same
    steps. From decoupled weights the simulated GD is the reduced map, so S(t) and the
    Gram matrices equal torch.func's on the simulated weights."""
    params = {"M": 3, "K": 2, "hidden": 4}
    args = [str(GRAPHS / "routing.yaml"), *(f"--param={k}={v}" for k, v in params.items())]
    args += ["--b0", "0.3", "--dynamics", "gd-map", "--lr", "0.05", "--t-max", "5"]
    payload = _solved([*args, "--points", "3"], capsys)
    meta = payload["meta"]
    assert isinstance(meta, dict)
    assert meta["route"] == "quotient" and meta["route_reason"].startswith("symmetry quotient")
    assert "contexts route" in meta["kernel"]
    problem = load("routing", **params)
    reduction = gdln.reduce(problem, b0=0.3, route="contexts", lump="none")
    simulated = gdln.simulate(
        problem.graph,
        problem.examples(),
        steps=100,
        lr=0.05,
        init_scheme="given",
        weights=reduction.decoupled_weights(seed=3),
        settings=gdln.SimulationSettings(record_every=50, record_weights=True),
    )
    np.testing.assert_allclose(simulated.t, payload["t"])
    weights_at = [
        {e: np.asarray(simulated.weights(e)[k, 0]) for e in problem.graph.edges}
        for k in range(len(simulated.t))
    ]
    S, reps = _reference(problem, weights_at)
    assert S[-1] > 1e-3  # the kernel moved: the comparison is not of zeros
    _check(payload, S, reps)


@pytest.mark.parametrize(("lam", "hidden"), [(1.0, 1), (0.0, 2)])
def test_cli_kernel_from_a_balanced_start_equals_torch_func_on_the_integrated_flow(
    lam: float, hidden: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--balanced LAM` draws gdln.balanced_weights(lam=LAM) (scale 0.1, seed 0); the full
    flow from that start, integrated by scipy, gives torch.func's kernel and Gram matrices."""
    args = [str(GRAPHS / "xor.yaml"), f"--param=hidden={hidden}", "--balanced", str(lam)]
    payload = _solved([*args, "--t-max", "6", "--points", "4"], capsys)
    meta = payload["meta"]
    assert isinstance(meta, dict) and meta["route"] == "lambda-balanced"
    problem = load("xor", hidden=hidden)
    start = gdln.balanced_weights(problem, lam=lam)
    t = np.asarray(payload["t"])
    flow = full_flow(problem, start, t)
    weights_at = [
        {e: flow[e][k] if e in flow else start[e] for e in problem.graph.edges}
        for k in range(len(t))
    ]
    S, reps = _reference(problem, weights_at)
    assert max(np.abs(r[-1] - r[0]).max() for r in reps.values()) > 0.1  # they moved
    _check(payload, S, reps)


def test_cli_kernel_on_the_matrix_route_uses_the_recorded_weights(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = [str(GRAPHS / "xor.yaml"), "--param=hidden=2", "--route", "matrix"]
    payload = _solved([*args, "--t-max", "8", "--points", "3"], capsys)
    problem = load("xor", hidden=2)
    full = gdln.solve(problem, route="matrix", t_max=8.0, points=3)
    weights_at = [
        {e: np.asarray(full.weights(e)[k]) for e in problem.graph.edges} for k in range(3)
    ]
    S, reps = _reference(problem, weights_at)
    assert S[-1] > 1e-3
    _check(payload, S, reps)


def test_the_summary_and_the_csv_name_the_kernel(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    xor = str(GRAPHS / "xor.yaml")
    code, out, err = run_cli(["solve", xor, "--param=hidden=2", "--kernel"], capsys)
    assert code == 0, err
    assert "kernel distance S = " in out and "similarity of 4 hidden nodes" in out
    table = tmp_path / "xor.csv"
    args = ["solve", xor, "--param=hidden=2", "--kernel", "--points", "3", "-o", str(table)]
    code, _, err = run_cli(args, capsys)
    assert code == 0, err
    header = table.read_text().splitlines()[1].split(",")  # after the variable_edges line
    assert "kernel_distance" in header
    assert "rsm/h0 (examples 0 and 3)" in header
    assert len([c for c in header if c.startswith("rsm/h1 ")]) == 16


def test_cli_kernel_on_the_moment_route_is_refused_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["solve", str(GRAPHS / "xor.yaml"), "--param=hidden=2", "--route", "moments"]
    code, out, err = run_cli([*args, "--kernel"], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1
    assert err.startswith("gdln: error: ")
    assert "no kernel on route 'moments'" in err and "--route contexts" in err


def test_a_reduced_trajectory_needs_its_reduction() -> None:
    problem = load("xor", hidden=2)
    trajectory = gdln.solve(problem, t_max=1.0, points=2)
    with pytest.raises(gdln.GdlnError, match=r"route 'contexts'.*pass gdln.solution"):
        gdln.trajectory_kernels(problem, trajectory)


def test_a_matrix_trajectory_without_its_weights_is_refused() -> None:
    problem = load("xor", hidden=2)
    trajectory = gdln.solve(problem, route="matrix", t_max=1.0, points=2)
    with pytest.raises(gdln.GdlnError, match=r"no kernel on route 'matrix' without the weights"):
        gdln.trajectory_kernels(problem, trajectory.without_weights())


def test_the_moment_route_is_refused_from_python() -> None:
    problem = load("xor", hidden=2)
    dynamics = gdln.expected_dynamics(problem, b0=0.1)
    trajectory = gdln.solve(dynamics, t_max=1.0, points=2)
    with pytest.raises(gdln.GdlnError, match=r"no kernel on route 'moments'"):
        gdln.trajectory_kernels(dynamics, trajectory)


def test_added_to_refuses_other_times() -> None:
    problem = load("xor", hidden=2)
    reduction = gdln.solution.dynamics_of(problem)
    kernels = gdln.trajectory_kernels(reduction, gdln.solve(reduction, t_max=1.0, points=3))
    with pytest.raises(ValueError, match=r"the kernels are at 3 times, the trajectory at 2"):
        kernels.added_to(gdln.solve(reduction, t_max=1.0, points=2))
