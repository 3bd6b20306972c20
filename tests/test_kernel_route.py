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
    assert "orbit's variable on the symmetry quotient" in meta["kernel"]
    problem = load("routing", **params)
    reduction = gdln.reduce(problem, b0=0.3, route="contexts", lump="none")
    simulated = gdln.simulate(
        problem.graph,
        problem.examples(),
        steps=100,
        lr=0.05,
        init_scheme="given",
        weights=reduction.decoupled_weights(seed=3),
        record_every=50,
        record_weights=True,
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
    assert "kernel distance S(t): largest " in out and "similarity of 4 hidden nodes" in out
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
    reduction = gdln.solution.dynamics_by_route(problem, problem.settings)
    kernels = gdln.trajectory_kernels(reduction, gdln.solve(reduction, t_max=1.0, points=3))
    with pytest.raises(ValueError, match=r"the kernels are at 3 times, the trajectory at 2"):
        kernels.added_to(gdln.solve(reduction, t_max=1.0, points=2))


def test_the_summary_gives_the_largest_distance_and_when_and_no_label(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """From a λ-balanced start far from the task the kernel turns and partly returns; the
    summary gives the largest S(t), when, and the last value, and never calls a run lazy
    or rich from its last value alone."""
    problem = load("xor", hidden=1)
    start = gdln.balanced_weights(problem, lam=1.0, scale=0.3, seed=2)
    trajectory = gdln.solve_balanced(problem, start, t_max=6.0, points=21)
    kernels = gdln.trajectory_kernels(problem, trajectory)
    S = kernels.distance
    k = int(np.argmax(S))
    assert 0 < k < len(S) - 1 and S[-1] < S[k] / 10  # it peaked and came back
    np.testing.assert_allclose(kernels.largest_distance, (S[k], trajectory.t[k]))
    args = ["solve", str(GRAPHS / "xor.yaml"), "--param=hidden=1", "--kernel", "--points", "21"]
    code, out, err = run_cli(args, capsys)
    assert code == 0, err
    line = next(x for x in out.splitlines() if "kernel distance" in x)
    assert "largest " in line and " at t = " in line
    assert "lazy" not in out and "rich" not in out


def test_the_kernel_distance_is_never_negative(capsys: pytest.CaptureFixture[str]) -> None:
    """XoR from decoupled weights: each pathway's kernel keeps its direction, so S(t) is 0
    up to rounding, which 1 - cos turned into -2.2e-16 at t_max."""
    args = [str(GRAPHS / "xor.yaml"), "--param=hidden=2", "--b0", "0.1", "--t-max", "40"]
    payload = _solved(args, capsys)
    variables = payload["variables"]
    assert isinstance(variables, dict)
    S = np.asarray(variables["kernel_distance"])
    assert (
        S.min() >= 0.0 and S.max() == 0.0
    )  # within rounding (gdln.balanced._kernel_series.ROUNDING)


def test_trajectory_kernels_takes_a_balanced_solution_with_its_problem() -> None:
    """solve_balanced and solve_from_weights give one route, "lambda-balanced"."""
    problem = load("xor", hidden=1)
    start = gdln.balanced_weights(problem, lam=1.0, scale=0.3, seed=2)
    direct = gdln.solve_balanced(problem, start, t_max=6.0, points=5)
    given = gdln.solve_from_weights(problem, start, t_max=6.0, points=5)
    assert direct.meta["route"] == given.meta["route"] == "lambda-balanced"
    one = gdln.trajectory_kernels(problem, direct)
    other = gdln.trajectory_kernels(problem, given)
    np.testing.assert_array_equal(one.distance, other.distance)
    np.testing.assert_array_equal(one.ntk[-1], gdln.balanced_kernels(problem, direct).ntk[-1])


TIGHT = {"method": "dop853", "rtol": 1e-13, "atol": 1e-15}


@pytest.mark.parametrize("same_modes", [True, False], ids=["tied", "solved-again"])
def test_the_quotient_route_keeps_the_tolerance_of_the_solve(
    same_modes: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Solved at rtol 1e-13 on the quotient, the kernel is the contexts route's at that
    tolerance (1e-11), whether the quotient's variables give every edge's value or the
    whole network is solved again (where the quotient's modes are not the whole
    network's); before, the solve again took rtol 1e-10 and the kernel was 2.5e-8 off."""
    import gdln.balanced._kernel_route as route

    monkeypatch.setattr(route, "_same_modes", lambda quotient, whole: same_modes)
    problem = load("routing", M=3, K=2, hidden=4)
    quotient = gdln.solution.dynamics_by_route(problem, problem.settings.given(b0=0.05))
    assert quotient.route.startswith("symmetry quotient")
    kernels = gdln.trajectory_kernels(quotient, gdln.solve(quotient, t_max=30, points=7, **TIGHT))
    assert ("solved again" in kernels.origin) is not same_modes
    contexts = gdln.reduce(problem, b0=0.05, route="contexts", lump="none")
    reference = gdln.trajectory_kernels(contexts, gdln.solve(contexts, t_max=30, points=7, **TIGHT))
    for k in range(7):
        got, ref = kernels.ntk.live(k), reference.ntk.live(k)
        assert np.abs(got - ref).max() <= 1e-11 * np.abs(ref).max()
    np.testing.assert_allclose(kernels.distance, reference.distance, rtol=0, atol=1e-13)


def test_a_kernel_beyond_the_limit_is_one_line_naming_the_limit_and_a_step(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GDLN_MAX_BATCH_ELEMENTS", "2000")
    args = ["solve", str(GRAPHS / "routing.yaml"), "--param=M=3", "--param=K=2", "--kernel"]
    code, out, err = run_cli(args, capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and len(err) <= 300
    assert "the tangent kernel on 24 examples (168 rows that can be nonzero) holds" in err
    assert "GDLN_MAX_BATCH_ELEMENTS=N" in err and "fewer examples" in err


@pytest.mark.slow
@pytest.mark.parametrize("M", [7, 20])
def test_the_readme_routing_network_has_its_kernel_within_the_default_limits(
    M: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """M = 7, K = 4, hidden 64 (112 examples, 49 outputs), 201 times: the kernel over
    every output would be 30 million numbers per time; refused before at any --points."""
    args = ["solve", str(GRAPHS / "routing.yaml"), f"--param=M={M}", "--kernel"]
    code, out, err = run_cli(args, capsys)
    assert code == 0, err
    assert "201 points" in out and "kernel distance S(t): largest " in out
