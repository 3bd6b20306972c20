"""The tangent kernel and representations along a trajectory, from the theory alone.

Against quantities computed here from full weight matrices: the NTK by torch.func (jacrev
over the trained edges of a GDLN forward pass written in this file) and the Gram matrices
of hidden activations, on weights that gdln.simulate trained from decoupled starts
(where the reduced gradient-descent map is exact) or that scipy integrated from
λ-balanced starts (test_balanced.full_flow).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
import torch
from helpers import load
from test_balanced import dense_problem, full_flow
from torch.func import jacrev

import gdln
from gdln._bounded._limits import use_limits
from gdln.balanced import BalancedSpecError, TrajectoryKernels, balanced_kernels
from gdln.balanced._kernel_blocks import BlockKernel
from gdln.graphfile import Limits


def torch_ntk(
    graph: nx.DiGraph,
    examples: gdln.ExampleSet,
    weights: Mapping[tuple[Hashable, Hashable], np.ndarray],
) -> tuple[np.ndarray, dict[Hashable, np.ndarray]]:
    """NTK ``(n*O, n*O)`` (row ``a*O + i``) by torch.func.jacrev over the trained edges of
    h_v = g_v sum_q g_q W_q h_s(q), and every node's activations ``(n, |v|)``."""
    order = list(nx.topological_sort(graph))
    n = len(examples.weights)
    outputs = [v for v in graph.nodes if graph.out_degree(v) == 0]
    trained = [e for e in graph.edges if "fixed" not in graph.edges[e]]
    gates = {k: torch.as_tensor(np.asarray(v, dtype=float)) for k, v in examples.gates.items()}
    ones = torch.ones(n, dtype=torch.float64)

    def forward(
        params: dict[str, torch.Tensor],
    ) -> tuple[torch.Tensor, dict[Hashable, torch.Tensor]]:
        h: dict[Hashable, torch.Tensor] = {}
        for v in order:
            if graph.in_degree(v) == 0:
                zeros = np.zeros((n, graph.nodes[v]["size"]))
                h[v] = torch.as_tensor(np.asarray(examples.inputs.get(v, zeros), dtype=float))
                continue
            u = torch.zeros((n, graph.nodes[v]["size"]), dtype=torch.float64)
            for s in graph.predecessors(v):
                fixed = torch.as_tensor(np.asarray(weights[(s, v)], dtype=float))
                W = params[f"{s}->{v}"] if (s, v) in trained else fixed
                u = u + gates.get((s, v), ones)[:, None] * (h[s] @ W.T)
            h[v] = gates.get(v, ones)[:, None] * u
        return torch.cat([h[o] for o in outputs], dim=1), h

    params = {
        f"{a}->{b}": torch.as_tensor(np.asarray(weights[(a, b)], dtype=float)) for a, b in trained
    }
    jacobians = jacrev(lambda p: forward(p)[0])(params)
    kernel = sum(
        J.reshape(J.shape[0] * J.shape[1], -1) @ J.reshape(J.shape[0] * J.shape[1], -1).T
        for J in jacobians.values()
    )
    _, acts = forward(params)
    return kernel.numpy(), {v: a.numpy() for v, a in acts.items()}


def _relative(got: np.ndarray, ref: np.ndarray) -> float:
    return float(np.abs(got - ref).max() / np.abs(ref).max())


DECOUPLED = [
    ("routing", {"M": 3, "K": 2, "hidden": 4}),  # shared hidden layers, gated edges
    ("chain", {}),  # depth 3, rectangular
    ("crosspath", {}),  # co-active paths into one output, a skip edge, gated nodes
    ("xor", {"hidden": 3}),
    ("context", {"pathways": 2, "hidden": 3}),  # a dataset given by its moments
]


@pytest.mark.parametrize(("name", "params"), DECOUPLED, ids=[d[0] for d in DECOUPLED])
def test_decoupled_kernels_equal_torch_func_on_the_simulated_network(
    name: str, params: dict[str, object]
) -> None:
    """From decoupled weights the simulation is the reduced GD map (exact), so the theory's
    kernel at each recorded step equals the autograd NTK of the simulated weights."""
    problem = load(name, **params)
    reduction = gdln.reduce(problem, b0=0.3, route="contexts")
    lr, steps = 0.05, 100
    theory = gdln.solve(reduction, t_max=lr * steps, dynamics="gd-map", lr=lr, points=3)
    kernels = gdln.decoupled_kernels(reduction, theory, seed=1)
    simulated = gdln.simulate(
        problem.graph,
        problem.examples(),
        steps=steps,
        lr=lr,
        init_scheme="given",
        weights=reduction.decoupled_weights(seed=1),
        record_every=50,
        record_weights=True,
        rsm=True,
    )
    np.testing.assert_allclose(simulated.t, kernels.t)
    along = gdln.balanced.weights_along(reduction, theory, seed=1)
    examples = problem.examples()
    for k in range(len(kernels.t)):
        weights = {e: simulated.series[f"W/{e[0]}->{e[1]}"][k, 0] for e in problem.graph.edges}
        for e, W in weights.items():  # Eq. (9) along the trajectory is the simulated network
            assert np.abs(along[e][k] - W).max() <= 1e-13 * max(1.0, np.abs(W).max())
        ntk, _ = torch_ntk(problem.graph, examples, weights)
        assert _relative(kernels.ntk[k], ntk) < 1e-12
        for node, rep in kernels.representations.items():
            assert _relative(rep[k], simulated.series[f"rsm/{node}"][k, 0]) < 1e-12
    assert set(kernels.representations) == {
        str(v)
        for v in problem.graph.nodes
        if problem.graph.in_degree(v) and problem.graph.out_degree(v)
    }


@pytest.mark.parametrize("lump", ["symmetry", "full"])
def test_lumped_trajectories_give_the_simulated_representations(lump: str) -> None:
    """Lumped variables (and those lump="full" eliminates) stand for every edge of their
    orbit; the representations rebuilt from them are the simulated network's."""
    problem = load("routing", M=3, K=2, hidden=4)
    reduction = gdln.reduce(problem, lump=lump, b0=0.3, route="contexts")
    theory = gdln.solve(reduction, t_max=5.0, dynamics="gd-map", lr=0.05, points=3)
    kernels = gdln.decoupled_kernels(reduction, theory, seed=1)
    simulated = gdln.simulate(
        problem.graph,
        problem.examples(),
        steps=100,
        lr=0.05,
        init_scheme="given",
        weights=reduction.decoupled_weights(seed=1),
        record_every=50,
        rsm=True,
    )
    for node in ("h1", "h2"):
        rep, ref = kernels.representations[node], simulated.series[f"rsm/{node}"][:, 0]
        assert _relative(rep, ref) < 1e-12


def test_the_moment_route_is_refused() -> None:
    problem = load("xor", hidden=2)
    dynamics = gdln.expected_dynamics(problem, b0=0.1)
    with pytest.raises(
        gdln.GdlnError, match=r"expected a Reduction from gdln.reduce, got ExpectedDynamics"
    ):
        gdln.balanced.weights_along(dynamics, gdln.solve(dynamics, t_max=1.0, points=2))  # type: ignore[arg-type]


BALANCED = [
    ("xor", 2.0),
    ("context", -1.0),
    ("dense", 1.0),
]


@pytest.mark.parametrize(("name", "lam"), BALANCED, ids=[b[0] for b in BALANCED])
def test_balanced_kernels_equal_torch_func_on_the_integrated_flow(
    name: str, lam: float, tmp_path: Path
) -> None:
    problem = {
        "xor": lambda: load("xor", hidden=1),
        "context": lambda: load("context", pathways=2, hidden=2),
        "dense": lambda: dense_problem(tmp_path, 3, 3, 5),
    }[name]()
    start = gdln.balanced_weights(problem, lam=lam, scale=0.3, seed=2)
    trajectory = gdln.solve_balanced(problem, start, t_max=10.0, points=6)
    kernels = balanced_kernels(problem, trajectory)
    flow = full_flow(problem, start, trajectory.t)
    examples = problem.examples()
    for k in range(len(kernels.t)):
        weights = {e: flow[e][k] if e in flow else start[e] for e in problem.graph.edges}
        ntk, acts = torch_ntk(problem.graph, examples, weights)
        assert _relative(kernels.ntk[k], ntk) < 1e-10
        for node, rep in kernels.representations.items():
            assert _relative(rep[k], acts[node] @ acts[node].T) < 1e-10


def test_kernel_distance_is_the_cosine_distance_to_the_first_kernel() -> None:
    K0 = np.diag([1.0, 0.0])
    kernels = TrajectoryKernels(
        t=np.arange(4.0),
        ntk=np.stack([K0, 3 * K0, np.diag([0.0, 2.0]), np.diag([1.0, 1.0])]),
    )
    np.testing.assert_allclose(kernels.distance, [0.0, 0.0, 1.0, 1 - 1 / np.sqrt(2)], atol=1e-15)


def _moved(problem: gdln.Problem, lam: float, scale: float, t_max: float) -> float:
    start = gdln.balanced_weights(problem, lam=lam, scale=scale, seed=0)
    trajectory = gdln.solve_balanced(problem, start, t_max=t_max, points=2)
    return float(balanced_kernels(problem, trajectory).distance[-1])


def test_large_lambda_is_lazy_and_the_scale_of_an_isotropic_start_does_not_matter(
    tmp_path: Path,
) -> None:
    """Square network: S(inf) falls to 0 as |λ| grows, for both signs (the lazy limit of
    Dominé et al. 2025). Every hidden direction at the same scale σ makes K0 the same kernel
    up to a factor, and K(inf) depends on λ alone (the fixed point), so S(inf) does not
    depend on σ."""
    problem = dense_problem(tmp_path, 3, 3, 3, seed=4)  # whitened singular values >= 0.8
    for sign in (1.0, -1.0):
        moved = [_moved(problem, sign * size, 0.1, 100.0) for size in (0.0, 1.0, 10.0, 100.0)]
        assert moved[0] > moved[1] > moved[2] > moved[3] and moved[3] < 1e-5 < 0.01 < moved[0]
    for lam in (0.0, 3.0, -3.0):
        by_scale = [_moved(problem, lam, scale, 100.0) for scale in (0.01, 0.3, 3.0)]
        np.testing.assert_allclose(by_scale, by_scale[0], rtol=1e-8)


def test_a_hidden_layer_narrower_than_the_output_is_not_lazy_at_large_positive_lambda(
    tmp_path: Path,
) -> None:
    """4 -> 4 -> 7 on the hierarchy of Fig. 4c: λ -> -inf gives W1ᵀW1 -> |λ| I on all four
    inputs (lazy), but λ -> +inf fixes the 4-dimensional range of W2 in the 7 outputs at
    random, and learning must turn it onto the task's output directions."""
    path = tmp_path / "hierarchy.yaml"
    path.write_text(
        "nodes: [{id: x, size: 4}, {id: h, size: 4}, {id: y, size: 7}]\n"
        "edges: [{source: x, target: h}, {source: h, target: y}]\n"
        "datasets: {base: {builtin: hierarchy}}\n"
        "task: {contexts: [{probability: 1, dataset: base, inputs: {x: x}, targets: {y: y}}]}\n"
    )
    problem = gdln.load(path)
    moved = {lam: _moved(problem, lam, 0.05, 400.0) for lam in (-20.0, 0.0, 20.0)}
    assert moved[-20.0] < 0.02 < moved[0.0] < moved[20.0]


def test_a_trajectory_of_another_problem_is_refused(tmp_path: Path) -> None:
    problem = load("xor", hidden=1)
    other = gdln.solve_balanced(
        load("context", pathways=1, hidden=1),
        gdln.balanced_weights(load("context", pathways=1, hidden=1), lam=0.0),
        t_max=1.0,
        points=2,
    )
    with pytest.raises(BalancedSpecError, match=r"the trajectory has no series 'W1TW1/x->h\d->y'"):
        balanced_kernels(problem, other)
    reduction = gdln.reduce(problem, b0=0.1)
    with pytest.raises(gdln.GdlnError, match=r"the trajectory has no series 'B1'"):
        gdln.decoupled_kernels(reduction, other)


def test_a_hidden_node_with_another_in_edge_has_no_representation(tmp_path: Path) -> None:
    path = tmp_path / "spare.yaml"
    path.write_text(
        "nodes: [{id: x, size: 2}, {id: z, size: 2}, {id: h, size: 1}, {id: y, size: 1}]\n"
        "edges: [{source: x, target: h}, {source: z, target: h, gated: true},"
        " {source: h, target: y}]\n"
        "datasets: {d: {examples: {a: [[1, 0], [0, 1]], b: [[1], [0]]}}}\n"
        "task: {contexts: [{probability: 1, dataset: d, active: [], inputs: {x: a},"
        " targets: {y: b}}]}\n"
    )
    problem = gdln.load(path)  # z->h is gated off: z->h->y is on no active path
    start = gdln.balanced_weights(problem, lam=0.0)
    trajectory = gdln.solve_balanced(problem, start, t_max=1.0, points=2)
    with pytest.raises(
        BalancedSpecError, match=r"node h of pathway x->h->y has another in-edge z->h"
    ):
        balanced_kernels(problem, trajectory)


def test_a_kernel_beyond_the_limit_is_refused_naming_its_rows() -> None:
    """The check counts what the method holds at one time (here the factors of the
    kernel's terms), not the (T, n*O, n*O) of every time."""
    problem = load("routing", M=3, K=2, hidden=4)
    reduction = gdln.reduce(problem, b0=0.1, route="contexts")
    trajectory = gdln.solve(reduction, t_max=1.0, points=3)
    with (
        use_limits(Limits(batch_elements=2000)),
        pytest.raises(
            gdln.GdlnError,
            match=r"the tangent kernel on 24 examples \(168 rows that can be nonzero\) holds "
            r"\d+ numbers at a time exceeds the limit batch_elements=2000 \(raise it: "
            r"GDLN_MAX_BATCH_ELEMENTS=N\); or take a task with fewer examples",
        ),
    ):
        gdln.decoupled_kernels(reduction, trajectory)


def test_representations_beyond_the_limit_name_the_times_that_fit() -> None:
    problem = load("xor", hidden=1)
    trajectory = gdln.solve_balanced(
        problem, gdln.balanced_weights(problem, lam=0.0), t_max=1.0, points=11
    )
    kernels = balanced_kernels(problem, trajectory)  # 4 pathways, 4 examples: 64 per time
    with (
        use_limits(Limits(batch_elements=300)),
        pytest.raises(
            gdln.GdlnError,
            match=r"hidden node\(s\) at 11 times = 704 numbers exceeds the limit "
            r"batch_elements=300 .*; record at most 4 times \(--points\)",
        ),
    ):
        kernels.added_to(trajectory)
    tight = use_limits(Limits(batch_elements=100))
    with tight, pytest.raises(gdln.GdlnError, match=r"11 times of 4x4 = 176 numbers exceeds"):
        np.asarray(kernels.ntk)


def test_a_reduction_on_the_symmetry_quotient_is_refused() -> None:
    problem = load("routing", M=3, K=2, hidden=4)
    reduction = gdln.reduce(problem, lump="symmetry", b0=0.1, route="auto")
    trajectory = gdln.solve(reduction, t_max=1.0, points=2)
    with pytest.raises(gdln.GdlnError, match=r"symmetry quotient"):
        gdln.decoupled_kernels(reduction, trajectory)


# A gated edge beside gated nodes (crosspath with its skip edge x->y gated), and a residual
# block: fixed skip and merge edges join h0, r and h1 (one basis of Eq. 9), r and the edge
# into it gated; its hidden nodes are wider (5) than its modes (3).
GATED = """\
nodes: [{id: x, size: 3}, {id: a, size: 4, gated: true}, {id: b, size: 5, gated: true},
        {id: y, size: 2}]
edges: [{source: x, target: a}, {source: x, target: b}, {source: a, target: y},
        {source: b, target: y}, {source: x, target: y, gated: true}]
task:
  examples:
    - {inputs: {x: [1, 1, 0]},  targets: {y: [2, 0]}, active: [a, b, "x->y"]}
    - {inputs: {x: [1, -1, 0]}, targets: {y: [0, 1]}, active: [a]}
    - {inputs: {x: [0, 0, 1]},  targets: {y: [0, 0]}, active: [b, "x->y"]}
"""
RESIDUAL = """\
nodes: [{id: x, size: 3}, {id: h0, size: 5}, {id: r, size: 5, gated: true},
        {id: h1, size: 5}, {id: y, size: 3}]
edges: [{source: x, target: h0}, {source: h0, target: h1, fixed: 1},
        {source: h0, target: r, gated: true}, {source: r, target: h1, fixed: 0.5},
        {source: h1, target: y}]
task:
  examples:
    - {inputs: {x: [1, 0, 0]}, targets: {y: [2, 0, 0]}, active: [r, "h0->r"]}
    - {inputs: {x: [0, 1, 0]}, targets: {y: [0, 1, 0]}, active: [r]}
    - {inputs: {x: [0, 0, 1]}, targets: {y: [0, 0, 3]}, active: ["h0->r"]}
"""


def _from_file(folder: Path, name: str, text: str) -> gdln.Problem:
    path = folder / f"{name}.yaml"
    path.write_text(text)
    return gdln.load(path)


def _simulated(
    problem: gdln.Problem, reduction: gdln.Reduction
) -> tuple[gdln.Trajectory, list[dict[tuple[str, str], np.ndarray]]]:
    """The reduced GD map from b = 0.3 (3 times over 100 steps), and the weights that
    gdln.simulate trains from the decoupled start (the map is exact there)."""
    theory = gdln.solve(reduction, t_max=5.0, dynamics="gd-map", lr=0.05, points=3)
    simulated = gdln.simulate(
        problem.graph,
        problem.examples(),
        steps=100,
        lr=0.05,
        init_scheme="given",
        weights=reduction.decoupled_weights(seed=1),
        record_every=50,
        record_weights=True,
    )
    np.testing.assert_allclose(simulated.t, theory.t)
    graph = problem.graph
    at = []
    for k in range(3):
        weights = {}
        for e in graph.edges:
            fixed = graph.edges[e].get("fixed")
            size = (graph.nodes[e[1]]["size"], graph.nodes[e[0]]["size"])
            weights[e] = (
                float(fixed) * np.eye(*size)
                if fixed is not None
                else np.asarray(simulated.weights(e)[k, 0])
            )
        at.append(weights)
    return theory, at


ROUTES = ["quotient", "gated", "residual", "matrix", "balanced"]


@pytest.mark.parametrize("factored", [True, False], ids=["factored", "dense"])
@pytest.mark.parametrize("route", ROUTES)
def test_the_kernel_at_three_times_equals_torch_func_of_the_rebuilt_network(
    route: str, factored: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """trajectory_kernels on each route against torch.func's NTK of the full network at
    three times: routing on the symmetry quotient (hidden 6 > its 4 modes), gated nodes
    and a gated edge, a residual block of fixed edges (contexts route), the full-matrix
    route, and a λ-balanced solution (the problem passed, as for any λ-balanced
    trajectory). S(t) by either way (the terms' factors, or the kernels assembled)."""
    monkeypatch.setattr(BlockKernel, "factored", lambda self: factored)
    if route == "quotient":
        problem = load("routing", M=3, K=2, hidden=6)
        reduction = gdln.solution.dynamics_by_route(problem, problem.settings.given(b0=0.3))
        assert reduction.route.startswith("symmetry quotient")
        trajectory, weights_at = _simulated(problem, reduction)
        kernels = gdln.trajectory_kernels(reduction, trajectory)
    elif route in ("gated", "residual"):
        problem = _from_file(tmp_path, route, GATED if route == "gated" else RESIDUAL)
        reduction = gdln.reduce(problem, b0=0.3, route="contexts")
        trajectory, weights_at = _simulated(problem, reduction)
        kernels = gdln.trajectory_kernels(reduction, trajectory)
    elif route == "matrix":
        problem = _from_file(tmp_path, "gated", GATED)
        trajectory = gdln.solve(problem, route="matrix", t_max=8.0, points=3, b0=0.3)
        weights_at = [{e: trajectory.weights(e)[k] for e in problem.graph.edges} for k in range(3)]
        kernels = gdln.trajectory_kernels(problem, trajectory)
    else:
        problem = dense_problem(tmp_path, 3, 3, 5)  # five output units
        start = gdln.balanced_weights(problem, lam=1.0, scale=0.1, seed=2)
        trajectory = gdln.solve_balanced(problem, start, t_max=10.0, points=3)
        flow = full_flow(problem, start, trajectory.t)
        weights_at = [
            {e: flow[e][k] if e in flow else start[e] for e in problem.graph.edges}
            for k in range(3)
        ]
        kernels = gdln.trajectory_kernels(problem, trajectory)
    examples = problem.examples()
    reference = []
    for k, weights in enumerate(weights_at):
        ntk, acts = torch_ntk(problem.graph, examples, weights)
        reference.append(ntk)
        assert _relative(kernels.ntk[k], ntk) <= 1e-10
        for node, rep in kernels.representations.items():
            assert _relative(rep[k], acts[node] @ acts[node].T) <= 1e-10
    flat = np.array([K.ravel() for K in reference])
    S = 1 - flat @ flat[0] / (np.linalg.norm(flat, axis=1) * np.linalg.norm(flat[0]))
    assert S[-1] > 1e-3  # the kernel moved
    np.testing.assert_allclose(kernels.distance, np.clip(S, 0, 1), rtol=1e-10, atol=1e-13)


def test_routing_rows_are_the_outputs_each_example_reaches() -> None:
    """An example of routing reaches one output domain: 7 of the M*7 output units."""
    problem = load("routing", M=4, K=2, hidden=8)
    reduction = gdln.solution.dynamics_by_route(problem, problem.settings.given(b0=0.1))
    kernels = gdln.trajectory_kernels(reduction, gdln.solve(reduction, t_max=1.0, points=2))
    n = len(problem.examples().weights)
    assert kernels.ntk.shape == (2, n * 28, n * 28) and len(kernels.ntk.rows) == n * 7
    whole = kernels.ntk[1]
    rest = np.setdiff1d(np.arange(n * 28), kernels.ntk.rows)
    assert np.all(whole[rest] == 0) and np.all(whole[:, rest] == 0)
    np.testing.assert_array_equal(
        whole[np.ix_(kernels.ntk.rows, kernels.ntk.rows)], kernels.ntk.live(1)
    )
