"""Tests of the full-network simulator against independent numpy computations."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import fields, replace
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
import torch

import gdln
from gdln import GdlnError, TaskSpecError
from gdln._edge import edge_name
from gdln.simulation import (
    DTYPES,
    INITS,
    OPTIMIZERS,
    SimulationDivergedError,
    SimulationSettings,
    SimulationSpecError,
    initial_weights,
    minibatch_indices,
    simulate,
)
from gdln.simulation._data import tensorise
from gdln.simulation._device import TORCH_DTYPES
from gdln.simulation._forward import forward
from gdln.simulation._init import DRAWS
from gdln.simulation._optimizers import OPTIMIZER_CLASSES
from gdln.simulation._plan import compile_plan
from gdln.simulation._settings import MINIBATCH
from gdln.solution._loss_curve import time_to_half_loss
from gdln.solution._trajectory import Trajectory
from gdln.task._examples import ExampleSet

ROOT = Path(__file__).resolve().parents[1]
GRAPHS = ROOT / "graphs"
SETTINGS_FIELDS = {f.name for f in fields(SimulationSettings)}

# ----------------------------------------------------------------------------- fixtures


def tiny_graph() -> nx.DiGraph:
    """Two inputs, two hidden nodes (one gated), two outputs, gated edges and a skip edge."""
    g = nx.DiGraph(name="tiny")
    for node, size, gated in [
        ("a", 2, False),
        ("b", 3, False),
        ("h", 4, True),
        ("k", 2, False),
        ("y", 2, False),
        ("z", 1, True),
    ]:
        g.add_node(node, size=size, gated=gated)
    for u, v, gated in [
        ("a", "h", True),
        ("b", "h", False),
        ("b", "k", False),
        ("h", "y", False),
        ("k", "y", True),
        ("h", "z", False),
        ("a", "y", False),
    ]:
        g.add_edge(u, v, gated=gated)
    return g


def tiny_examples(n: int = 6, seed: int = 1) -> ExampleSet:
    rng = np.random.default_rng(seed)
    w = rng.uniform(0.5, 1.5, n)
    return ExampleSet(
        inputs={"a": rng.normal(size=(n, 2)), "b": rng.normal(size=(n, 3))},
        targets={"y": rng.normal(size=(n, 2)), "z": rng.normal(size=(n, 1))},
        gates={
            "h": rng.integers(0, 2, n).astype(float),
            "z": rng.uniform(0, 1, n),
            ("a", "h"): rng.integers(0, 2, n).astype(float),
            ("k", "y"): rng.uniform(0, 2, n),
        },
        weights=w / w.sum(),
        context=np.arange(n) % 3,
        context_labels=("c0", "c1", "c2"),
    )


HIERARCHY = np.array(
    [(6, 4, 0, 3, 0, 0, 0), (6, 4, 0, 0, 3, 0, 0), (6, 0, 4, 0, 0, 3, 0), (6, 0, 4, 0, 0, 0, 3)],
    dtype=float,
)


def routing(m: int, k: int, hidden: int, *, gated_out_node: bool = False):
    """The routing network of Fig. 4a built by hand: route i -> (i + r) mod m, r < k."""
    g = nx.DiGraph(name="routing")
    for i in range(m):
        g.add_node(f"x{i}", size=4, gated=False)
        g.add_node(f"y{i}", size=7, gated=gated_out_node)
    g.add_node("h1", size=hidden, gated=False)
    g.add_node("h2", size=hidden, gated=False)
    g.add_edge("h1", "h2", gated=False)
    for i in range(m):
        g.add_edge(f"x{i}", "h1", gated=True)
        g.add_edge("h2", f"y{i}", gated=True)
    pairs = [(i, (i + r) % m) for i in range(m) for r in range(k)]
    n = 4 * len(pairs)
    x = {f"x{i}": np.zeros((n, 4)) for i in range(m)}
    y = {f"y{j}": np.zeros((n, 7)) for j in range(m)}
    gates = {(f"x{i}", "h1"): np.zeros(n) for i in range(m)}
    gates |= {("h2", f"y{j}"): np.zeros(n) for j in range(m)}
    for c, (i, j) in enumerate(pairs):
        rows = slice(4 * c, 4 * c + 4)
        x[f"x{i}"][rows] = np.eye(4)
        y[f"y{j}"][rows] = HIERARCHY
        gates[(f"x{i}", "h1")][rows] = 1.0
        gates[("h2", f"y{j}")][rows] = 1.0
    if gated_out_node:
        gates |= {f"y{j}": np.linspace(0.5, 1.5, n) for j in range(m)}
    return g, ExampleSet(
        inputs=x,
        targets=y,
        gates=gates,
        weights=np.full(n, 1.0 / n),
        context=np.repeat(np.arange(len(pairs)), 4),
        context_labels=tuple(f"x{i}->y{j}" for i, j in pairs),
    )


def fan_graph():
    """A hidden node fanning out to gated outputs and to a hidden node with two in-edges."""
    g = nx.DiGraph(name="fan")
    for node, size in [("a", 3), ("h", 4), ("k", 2), ("y1", 2), ("y2", 3), ("y3", 1)]:
        g.add_node(node, size=size, gated=node == "y2")
    for u, v in [("a", "h"), ("h", "y1"), ("h", "y2"), ("h", "k"), ("a", "k"), ("k", "y3")]:
        g.add_edge(u, v, gated=(u, v) in {("h", "y1"), ("a", "k")})
    rng = np.random.default_rng(5)
    n = 5
    ex = ExampleSet(
        inputs={"a": rng.normal(size=(n, 3))},
        targets={"y1": rng.normal(size=(n, 2)), "y2": rng.normal(size=(n, 3))},
        gates={
            "y2": rng.uniform(0, 1, n),
            ("h", "y1"): rng.integers(0, 2, n).astype(float),
            ("a", "k"): rng.uniform(0, 2, n),
        },
        weights=np.full(n, 1 / n),
        context=np.zeros(n, dtype=int),
    )
    return g, ex


def numpy_loss_and_grad(
    graph: nx.DiGraph, ex: ExampleSet, W: dict[tuple[str, str], np.ndarray]
) -> tuple[float, np.ndarray, dict[tuple[str, str], np.ndarray]]:
    """Eq. (1) and its gradient by a hand-written forward and backward pass in numpy."""
    n = len(ex)
    order = list(nx.topological_sort(graph))
    one = np.ones(n)
    gate = {k: np.asarray(v) for k, v in ex.gates.items()}
    h, pre = {}, {}
    for v in order:
        if graph.in_degree(v) == 0:
            pre[v] = ex.inputs.get(v, np.zeros((n, graph.nodes[v]["size"])))
        else:
            pre[v] = sum(
                gate.get((u, v), one)[:, None] * (h[u] @ W[(u, v)].T) for u in graph.predecessors(v)
            )
        h[v] = gate.get(v, one)[:, None] * pre[v]
    outs = [v for v in order if graph.out_degree(v) == 0]
    y = {v: ex.targets.get(v, np.zeros_like(h[v])) for v in outs}
    per_example = sum(0.5 * ((y[v] - h[v]) ** 2).sum(1) for v in outs)
    # backward: delta[v] = dL/dh_v, rows weighted by the example weights
    delta = {v: np.zeros_like(h[v]) for v in order}
    for v in outs:
        delta[v] = -(y[v] - h[v]) * ex.weights[:, None]
    grads = {}
    for v in reversed(order):
        dpre = gate.get(v, one)[:, None] * delta[v]
        for u in graph.predecessors(v):
            gq = gate.get((u, v), one)[:, None]
            grads[(u, v)] = (gq * dpre).T @ h[u]
            delta[u] = delta[u] + (gq * dpre) @ W[(u, v)]
    return float(per_example @ ex.weights), per_example, grads


# ----------------------------------------------------------------------------- exactness


def test_loss_and_gradient_match_numpy_backprop() -> None:
    graph, ex = tiny_graph(), tiny_examples()
    W0 = {
        e: w[0]
        for e, w in initial_weights(graph, init_scheme="xavier", init_scale=0.7, seed=3).items()
    }
    lr = 0.05
    traj = simulate(
        graph,
        ex,
        steps=1,
        lr=lr,
        init_scheme="given",
        weights=W0,
        record_weights=True,
        device="cpu",
    )
    loss, per_example, grads = numpy_loss_and_grad(graph, ex, W0)
    np.testing.assert_allclose(traj.loss[0, 0], loss, rtol=1e-12)
    for e in graph.edges:
        np.testing.assert_allclose(
            traj.series[f"W/{edge_name(e)}"][1, 0], W0[e] - lr * grads[e], rtol=1e-12, atol=1e-15
        )
    # per-context loss is the weighted average of per-example losses within the context
    for c in range(3):
        rows = ex.context == c
        expected = per_example[rows] @ ex.weights[rows] / ex.weights[rows].sum()
        np.testing.assert_allclose(traj.series[f"loss/c{c}"][0, 0], expected, rtol=1e-12)
    w1 = {e: W0[e] - lr * grads[e] for e in graph.edges}
    np.testing.assert_allclose(traj.loss[1, 0], numpy_loss_and_grad(graph, ex, w1)[0], rtol=1e-12)


@pytest.mark.parametrize(
    "case", ["fan", "routing", "routing-gated-outputs", "routing-sparse", "routing-sparse-gates"]
)
def test_grouped_matmuls_match_numpy_backprop(case: str) -> None:
    """Fan-out/fan-in grouping and the all-outputs shortcut compute the same Eq. (1)."""
    if case == "fan":
        graph, ex = fan_graph()
    elif case.startswith("routing-sparse"):  # each gate on for 1/20 of the rows: row-sparse
        graph, ex = routing(20, 1, 5)
        if case.endswith("gates"):  # gate values other than 1, and edges with fewer rows
            ex.gates[("x0", "h1")][:4] = [0.5, 2.0, 1.0, -1.5]
            ex.gates[("x1", "h1")][4] = 0.0
            ex.gates[("h2", "y3")][12:14] = [0.0, 0.25]
        data = tensorise(compile_plan(graph), ex, "examples", torch.float64, torch.device("cpu"))
        assert len(data.rows) == 40 and not data.plan.fan_out
        ones = [g.gate is None for g in data.groups]  # skipped product with 1 only if all 1
        assert ones == ([False, False] if case.endswith("gates") else [True, True])
    else:
        graph, ex = routing(3, 2, 5, gated_out_node=case.endswith("outputs"))
        plan = compile_plan(graph)  # the cases do exercise the grouped code paths
        assert plan.fan_out and (case == "fan") == (plan.output_group is None)
    W0 = {e: w[0] for e, w in initial_weights(graph, init_scale=0.8, seed=3).items()}
    lr = 0.05
    settings = dict(record_weights=True)
    traj = simulate(graph, ex, steps=1, lr=lr, init_scheme="given", weights=W0, **settings)
    loss, _, grads = numpy_loss_and_grad(graph, ex, W0)
    np.testing.assert_allclose(traj.loss[0, 0], loss, rtol=1e-12)
    for e in graph.edges:
        np.testing.assert_allclose(
            traj.series[f"W/{edge_name(e)}"][1, 0], W0[e] - lr * grads[e], rtol=1e-12, atol=1e-15
        )


def test_sparse_plan_equals_dense_plan() -> None:
    """Full-batch (row-sparse gated edges) and all-rows minibatch (dense) passes agree."""
    graph, ex = routing(20, 2, 5)
    net = compile_plan(graph)
    data = tensorise(net, ex, "examples", torch.float64, torch.device("cpu"))
    assert data.rows
    drawn = initial_weights(graph, init_scale=0.9, seeds=2)
    W = [torch.as_tensor(drawn[e]) for e in net.edges]
    assert data.sparse_outputs == net.outputs
    h_sparse, sparse = forward(net, W, data, outputs=True)
    h_dense, dense = forward(net, W, data, torch.arange(data.n).expand(2, data.n))
    np.testing.assert_allclose(sparse.numpy(), dense.numpy(), rtol=1e-12)
    for v in net.outputs:
        np.testing.assert_allclose(h_sparse[v].numpy(), h_dense[v].numpy(), rtol=1e-13, atol=0)
    assert "y0" not in forward(net, W, data)[0]  # built only when asked for


def test_zero_output_loss_is_the_per_context_loss_of_zero_weights() -> None:
    graph, ex = tiny_graph(), tiny_examples(seed=2)
    zeros = {e: 0.0 * w[0] for e, w in initial_weights(graph, init_scheme="xavier", seed=0).items()}
    traj = simulate(graph, ex, steps=1, lr=0.1, init_scheme="given", weights=zeros)
    measured = [traj.series[f"loss/{label}"][0, 0] for label in ex.context_labels]
    np.testing.assert_allclose(ex.zero_output_loss(), measured, rtol=1e-13)
    # and the contexts' probabilities average it to the whole loss of Eq. (1)
    mass = np.bincount(ex.context, weights=ex.weights)
    assert mass @ ex.zero_output_loss() == pytest.approx(traj.loss[0, 0], rel=1e-13)


def test_gradient_descent_is_euler_map_over_many_steps() -> None:
    """Ten GD steps equal ten numpy steps W <- W - lr dL/dW; t = lr * step."""
    graph, ex = tiny_graph(), tiny_examples(seed=4)
    W = {
        e: w[0]
        for e, w in initial_weights(graph, init_scheme="singular", init_scale=0.5, seed=1).items()
    }
    lr = 0.1
    settings = dict(record_every=5)
    traj = simulate(graph, ex, steps=10, lr=lr, init_scheme="given", weights=W, **settings)
    np.testing.assert_allclose(traj.t, [0.0, 0.5, 1.0], rtol=1e-15)
    losses = []
    for _ in range(11):
        loss, _, grads = numpy_loss_and_grad(graph, ex, W)
        losses.append(loss)
        W = {e: W[e] - lr * grads[e] for e in W}
    np.testing.assert_allclose(traj.loss[:, 0], np.array(losses)[[0, 5, 10]], rtol=1e-11)


def test_seed_batching_equals_per_seed_runs() -> None:
    graph, ex = tiny_graph(), tiny_examples()
    settings = dict(record_every=4, device="cpu")
    kw = dict(steps=20, lr=0.05, init_scheme="xavier", init_scale=0.5, **settings)
    batched = simulate(graph, ex, seeds=4, seed=10, **kw)
    for r in range(4):
        single = simulate(graph, ex, seeds=[10 + r], **kw)
        np.testing.assert_allclose(batched.loss[:, r], single.loss[:, 0], rtol=1e-13, atol=0)
        for name, arr in single.series.items():
            np.testing.assert_allclose(batched.series[name][:, r], arr[:, 0], rtol=1e-12)


def test_sgd_seed_batching_equals_per_seed_runs() -> None:
    graph, ex = tiny_graph(), tiny_examples()
    settings = dict(optimizer="sgd", batch_size=2, momentum=0.9, device="cpu")
    kw = dict(steps=15, lr=0.05, **settings)
    batched = simulate(graph, ex, seeds=[3, 5], **kw)
    for r, s in enumerate([3, 5]):
        single = simulate(graph, ex, seeds=[s], **kw)
        np.testing.assert_allclose(batched.loss[:, r], single.loss[:, 0], rtol=1e-13)


def test_gd_momentum_matches_numpy_heavy_ball() -> None:
    """Full-batch 'gd' with momentum: b <- mu b + grad, W <- W - lr b, against numpy."""
    graph, ex = tiny_graph(), tiny_examples()
    W = {e: w[0] for e, w in initial_weights(graph, init_scale=0.5, seed=2).items()}
    lr, mu = 0.05, 0.9
    settings = dict(momentum=mu)
    traj = simulate(graph, ex, steps=6, lr=lr, init_scheme="given", weights=W, **settings)
    buf = {e: np.zeros_like(W[e]) for e in W}
    losses = []
    for _ in range(7):
        loss, _, grads = numpy_loss_and_grad(graph, ex, W)
        losses.append(loss)
        buf = {e: mu * buf[e] + grads[e] for e in W}
        W = {e: W[e] - lr * buf[e] for e in W}
    np.testing.assert_allclose(traj.loss[:, 0], losses, rtol=1e-11)
    assert traj.meta["effective_lr"] == pytest.approx(lr / (1 - mu))


def subset(ex: ExampleSet, rows: np.ndarray) -> ExampleSet:
    """The minibatch ``rows`` (repeats allowed) as its own ExampleSet, each row weight 1/b."""
    return ExampleSet(
        inputs={k: v[rows] for k, v in ex.inputs.items()},
        targets={k: v[rows] for k, v in ex.targets.items()},
        gates={k: np.asarray(v)[rows] for k, v in ex.gates.items()},
        weights=np.full(len(rows), 1.0 / len(rows)),
        context=ex.context[rows],
        context_labels=ex.context_labels,
    )


def test_minibatch_sgd_momentum_matches_numpy_heavy_ball() -> None:
    """optimizer='sgd', batch 3 < n = 6, momentum 0.9, two seeds, against numpy.

    numpy takes each step's minibatch from ``minibatch_indices`` (the sampler's own
    draws) and does its own forward/backward pass on those rows (Eq. 1 averaged over
    the batch) and its own heavy-ball update; every weight matrix must agree at every
    step to rtol 1e-10 (float64).
    """
    graph, ex = tiny_graph(), tiny_examples()
    lr, mu, batch, steps, seeds = 0.05, 0.9, 3, 12, [4, 9]
    traj = simulate(
        graph,
        ex,
        steps=steps,
        lr=lr,
        seeds=seeds,
        init_scheme="singular",
        init_scale=0.5,
        optimizer="sgd",
        batch_size=batch,
        momentum=mu,
        record_weights=True,
    )
    rows = minibatch_indices(ex, steps=steps, batch_size=batch, seeds=seeds)
    assert rows.shape == (steps, 2, batch)
    assert len(np.unique(rows)) > batch  # the batches really differ between steps
    start = initial_weights(graph, init_scheme="singular", init_scale=0.5, seeds=seeds)
    for r in range(len(seeds)):
        W = {e: w[r] for e, w in start.items()}
        buf = {e: np.zeros_like(w) for e, w in W.items()}
        for k in range(steps + 1):
            full_loss, _, _ = numpy_loss_and_grad(graph, ex, W)
            assert traj.loss[k, r] == pytest.approx(full_loss, rel=1e-10)
            for e, w in W.items():
                np.testing.assert_allclose(traj.series[f"W/{edge_name(e)}"][k, r], w, rtol=1e-10)
            if k == steps:
                break
            _, _, grads = numpy_loss_and_grad(graph, subset(ex, rows[k, r]), W)
            buf = {e: mu * buf[e] + grads[e] for e in W}
            W = {e: W[e] - lr * buf[e] for e in W}
    # the time axis is flow time: lr / (1 - mu) per step
    np.testing.assert_allclose(traj.t, np.arange(steps + 1) * lr / (1 - mu), rtol=1e-13)


def test_momentum_tracks_the_flow_in_tau() -> None:
    """Heavy ball at small lr follows the reduced ODE on the clock t = step lr / (1 - mu).

    Routing from decoupled weights (Eq. 9), mu = 0.9, flow step dt = lr / (1 - mu): the
    time at which the loss halves approaches the ODE's at first order in dt (the shift
    halves when dt halves), so t is gradient-flow time. On the clock lr * step the same
    runs would halve their loss 1 / (1 - mu) = 10 times too early.
    """
    problem = gdln.load(GRAPHS / "routing.yaml", params={"M": 3, "K": 2, "hidden": 8})
    init, t_max, mu = 0.1, 8.0, 0.9
    reduction = gdln.reduce(problem, lump="none", b0=init)
    ode = gdln.solve(reduction, t_max=t_max, points=3201, rtol=1e-12, atol=1e-14)
    half = time_to_half_loss(ode.t, ode.loss)
    assert half is not None
    weights = reduction.decoupled_weights(init, seed=0)
    shifts = []
    for dt in (0.02, 0.01):
        steps = round(t_max / dt)
        sim = simulate(
            problem.graph,
            problem.examples(),
            steps=steps,
            lr=dt * (1 - mu),
            init_scheme="given",
            weights=weights,
            momentum=mu,
            record_every=round(0.02 / dt),  # every 0.02 tau
            threads=1,
        )
        np.testing.assert_allclose(sim.t[-1], t_max, rtol=1e-12)
        sim_half = time_to_half_loss(sim.t, sim.loss[:, 0])
        assert sim_half is not None
        shifts.append(sim_half - half)
    assert shifts[1] > 0
    # first order: the ratio tends to 2 as dt -> 0 (measured 1.84 here, 1.90 one halving on)
    assert shifts[0] / shifts[1] == pytest.approx(2.0, rel=0.15)


def test_sgd_gradient_is_unbiased_on_average() -> None:
    """A minibatch of one example drawn with probability w_i: E[step] = full-batch step."""
    graph, ex = tiny_graph(), tiny_examples()
    W = {e: w[0] for e, w in initial_weights(graph, init_scale=0.5, seed=2).items()}
    lr = 1e-3
    seeds = list(range(400))
    traj = simulate(
        graph,
        ex,
        steps=1,
        lr=lr,
        init_scheme="given",
        weights=W,
        seeds=seeds,
        optimizer="sgd",
        batch_size=1,
        record_weights=True,
    )
    _, _, grads = numpy_loss_and_grad(graph, ex, W)
    e = ("h", "y")
    mean_step = (W[e] - traj.series[f"W/{edge_name(e)}"][1].mean(0)) / lr
    # Monte Carlo over 400 draws: standard error ~ 5% of the gradient's scale
    assert np.abs(mean_step - grads[e]).max() < 0.25 * np.abs(grads[e]).max()


def test_float32_close_to_float64() -> None:
    graph, ex = tiny_graph(), tiny_examples()
    kw = dict(steps=30, lr=0.05, init_scale=0.5, seeds=2)
    t64 = simulate(graph, ex, dtype="float64", record_every=10, **kw)
    t32 = simulate(graph, ex, dtype="float32", record_every=10, **kw)
    assert t32.meta["dtype"] == "float32"
    np.testing.assert_allclose(t32.loss, t64.loss, rtol=1e-4)


def test_reproducible_under_seed_and_different_across_seeds() -> None:
    graph, ex = tiny_graph(), tiny_examples()
    a = simulate(graph, ex, steps=5, lr=0.05, seeds=2, seed=7)
    b = simulate(graph, ex, steps=5, lr=0.05, seeds=2, seed=7)
    c = simulate(graph, ex, steps=5, lr=0.05, seeds=2, seed=8)
    np.testing.assert_array_equal(a.loss, b.loss)
    assert not np.allclose(a.loss[0], c.loss[0])
    np.testing.assert_array_equal(a.loss[:, 1], c.loss[:, 0])  # seed 8 is shared


# ----------------------------------------------------------------------------- initialisations


def test_singular_init_has_all_singular_values_sigma0() -> None:
    graph = tiny_graph()
    for name in ("singular", "orthogonal"):
        for w in initial_weights(graph, init_scheme=name, init_scale=0.3, seeds=3).values():
            np.testing.assert_allclose(np.linalg.svd(w, compute_uv=False), 0.3, rtol=1e-12)


@pytest.mark.parametrize(("rows", "cols"), [(7, 3), (3, 7), (5, 5)])
def test_orthogonal_init_is_gain_times_orthogonal(rows: int, cols: int) -> None:
    """W^T W = gain^2 I (tall or square) or W W^T = gain^2 I (wide), the same draw per seed."""
    g = nx.DiGraph()
    g.add_node("x", size=cols)
    g.add_node("y", size=rows)
    g.add_edge("x", "y")
    gain = 0.7
    w = initial_weights(g, init_scheme="orthogonal", init_scale=gain, seeds=3, seed=4)[("x", "y")]
    assert w.shape == (3, rows, cols)
    k = min(rows, cols)
    for m in w:
        gram = m.T @ m if rows >= cols else m @ m.T
        np.testing.assert_allclose(gram, gain**2 * np.eye(k), rtol=0, atol=1e-12)
    again = initial_weights(g, init_scheme="orthogonal", init_scale=gain, seeds=[5], seed=0)
    np.testing.assert_array_equal(again[("x", "y")][0], w[1])  # seed 5 is repetition 1
    assert not np.allclose(w[0], w[1])
    assert not np.allclose(
        w[0], initial_weights(g, init_scheme="singular", init_scale=gain, seed=4)[("x", "y")][0]
    )


def test_xavier_init_variance() -> None:
    g = nx.DiGraph()
    g.add_node("x", size=300)
    g.add_node("y", size=200)
    g.add_edge("x", "y")
    w = initial_weights(g, init_scheme="xavier", init_scale=0.2, seeds=2)[("x", "y")]
    assert w.shape == (2, 200, 300)
    # sample std of 120000 normals: relative error ~ 0.2%
    assert w.std() == pytest.approx(0.2 * np.sqrt(2 / 500), rel=0.01)


def test_inits_table_has_descriptions() -> None:
    assert {"xavier", "singular", "orthogonal", "given"} <= set(INITS)
    assert all(isinstance(text, str) and text for text in [*INITS.values(), *OPTIMIZERS.values()])


def test_name_tables_match_the_machinery() -> None:
    """The light tables the CLI reads name exactly what the simulator implements."""
    assert set(INITS) - {"decoupled"} == set(DRAWS)  # decoupled: the reduction's weights
    assert set(OPTIMIZERS) == set(OPTIMIZER_CLASSES)
    assert set(DTYPES) == set(TORCH_DTYPES)
    assert {k for k, cls in OPTIMIZER_CLASSES.items() if cls.minibatch} == MINIBATCH
    for name, dtype in TORCH_DTYPES.items():
        assert str(dtype) == f"torch.{name}"


def test_name_tables_and_settings_load_without_torch_or_numpy() -> None:
    """The CLI's --help reads INITS, OPTIMIZERS and DTYPES; they must not load torch or numpy."""
    code = (
        "import sys, gdln, gdln.simulation as s; "
        "s.INITS, s.OPTIMIZERS, s.DTYPES, gdln.INITS; "
        "gdln.SimulationSettings(optimizer='sgd', batch_size=2, record_steps=[0, 5]); "
        "print(sorted(m for m in ('torch', 'numpy', 'sympy', 'scipy', 'networkx') "
        "if m in sys.modules))"
    )
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert done.stdout.strip() == "[]"


# ----------------------------------------------------------------------------- settings


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"optimizer": "adam"}, r"optimizer \(--optimizer\): expected one of gd, sgd; got 'adam'"),
        ({"optimizer": 3}, r"optimizer \(--optimizer\): expected one of gd, sgd; got 3"),
        (
            {"optimizer": "sgd", "batch_size": 0},
            r"batch_size \(--batch-size\): expected an integer >= 1, got 0",
        ),
        (
            {"optimizer": "sgd", "batch_size": 2.0},
            r"batch_size \(--batch-size\): expected an integer >= 1, got 2.0",
        ),
        (
            {"optimizer": "gd", "batch_size": 4},
            r"batch_size: only used with optimizer='sgd', got 4 with 'gd'",
        ),
        ({"momentum": 1.0}, r"momentum \(--momentum\): expected a number in \[0, 1\), got 1.0"),
        ({"momentum": -0.1}, r"momentum \(--momentum\): expected a number in \[0, 1\), got -0.1"),
        ({"momentum": True}, r"momentum \(--momentum\): expected a number in \[0, 1\), got True"),
        (
            {"dtype": "float16"},
            r"dtype \(--dtype\): expected one of float64, float32; got 'float16'",
        ),
        (
            {"device": "tpu"},
            r"device: expected 'auto', 'cpu' or 'cuda\[:k\]', got 'tpu'",
        ),
        (
            {"device": "cuda:x"},
            r"device: expected 'auto', 'cpu' or 'cuda\[:k\]', got 'cuda:x'",
        ),
        ({"threads": 0}, r"threads \(--threads\): expected an integer >= 1, got 0"),
        ({"threads": 1.5}, r"threads \(--threads\): expected an integer >= 1, got 1.5"),
        ({"record_every": 0}, r"record_every: expected an int > 0, got 0"),
        ({"record_steps": []}, r"record_steps: expected a non-empty list of ints >= 0, got \[\]"),
        ({"record_steps": [3, -1]}, r"record_steps: expected a non-empty list of ints >= 0"),
        ({"record_steps": [0.5]}, r"record_steps: expected a non-empty list of ints >= 0"),
        ({"record_steps": "x,3"}, r"record_steps: expected 'log:N' or a comma list"),
        ({"record_steps": "log:0"}, r"record_steps: expected 'log:N' with an int N >= 1"),
        (
            {"record_steps": [1], "record_every": 2},
            r"record_steps: give either record_steps or record_every, got both \(record_every=2\)",
        ),
        ({"rsm": 1}, r"rsm: expected True or False, got 1"),
        ({"record_weights": "yes"}, r"record_weights: expected True or False, got 'yes'"),
        ({"progress": "maybe"}, r"progress \(--progress\): expected true or false, got 'maybe'"),
        ({"diverge_above": float("inf")}, r"diverge_above: expected a finite number > 0, got inf"),
        ({"diverge_above": 0}, r"diverge_above: expected a finite number > 0, got 0"),
    ],
)
def test_settings_refuse_bad_values(kwargs: dict, match: str) -> None:
    with pytest.raises(SimulationSpecError, match=match):
        SimulationSettings(**kwargs)


def test_settings_store_record_steps_as_a_tuple_and_check_again_on_replace() -> None:
    settings = SimulationSettings(record_steps=np.array([5, 0, 2]))
    assert settings.record_steps == (5, 0, 2)
    assert all(type(k) is int for k in settings.record_steps)
    assert settings == SimulationSettings(record_steps=[5, 0, 2])
    assert hash(settings) == hash(SimulationSettings(record_steps=(5, 0, 2)))
    assert repr(SimulationSettings(momentum=0.5)).startswith(
        "SimulationSettings(optimizer=None, batch_size=None, momentum=0.5,"
    )
    with pytest.raises(SimulationSpecError, match=r"momentum \(--momentum\): expected a number in"):
        replace(settings, momentum=2.0)
    for device in (None, "auto", "cpu", "cuda", "cuda:1"):
        assert SimulationSettings(device=device).device == device


# ----------------------------------------------------------------------------- recording


def test_recorded_singular_values_projections_rsm_and_eval() -> None:
    graph, ex = tiny_graph(), tiny_examples()
    ev = tiny_examples(n=4, seed=9)
    rng = np.random.default_rng(0)
    left, _ = np.linalg.qr(rng.normal(size=(2, 2)))
    right, _ = np.linalg.qr(rng.normal(size=(4, 2)))
    traj = simulate(
        graph,
        ex,
        steps=4,
        lr=0.05,
        seeds=2,
        eval_examples=ev,
        bases={("h", "y"): (left, right)},
        record_every=2,
        rsm=True,
        record_weights=True,
    )
    assert traj.loss.shape == (3, 2)
    W = traj.series["W/h->y"]
    np.testing.assert_allclose(
        traj.series["sv/h->y"], np.linalg.svd(W, compute_uv=False), rtol=1e-12
    )
    np.testing.assert_allclose(
        traj.series["proj/h->y"], np.einsum("ta,TSts,sa->TSa", left, W, right), rtol=1e-12
    )
    # eval quantities, recomputed in numpy from the recorded weights at the last record
    Wend = {e: traj.series[f"W/{edge_name(e)}"][-1, 1] for e in graph.edges}
    loss, per_example, _ = numpy_loss_and_grad(graph, ev, Wend)
    np.testing.assert_allclose(traj.series["eval/loss"][-1, 1], loss, rtol=1e-12)
    np.testing.assert_allclose(traj.series["eval/example_loss"][-1, 1], per_example, rtol=1e-12)
    # output y and the RSM at h, by hand
    hk = ev.gates["h"][:, None] * (
        ev.gates[("a", "h")][:, None] * (ev.inputs["a"] @ Wend[("a", "h")].T)
        + ev.inputs["b"] @ Wend[("b", "h")].T
    )
    np.testing.assert_allclose(traj.series["rsm/h"][-1, 1], hk @ hk.T, rtol=1e-12)
    assert traj.series["rsm/k"].shape == (3, 2, 4, 4)
    assert traj.series["eval/output/y"].shape == (3, 2, 4, 2)
    # the total loss is the context-probability-weighted sum of per-context losses
    p = np.array([ex.weights[ex.context == c].sum() for c in range(3)])
    total = sum(p[c] * traj.series[f"loss/c{c}"] for c in range(3))
    np.testing.assert_allclose(total, traj.loss, rtol=1e-12)


@pytest.mark.parametrize("optimizer", ["gd", "sgd"])
def test_record_steps_records_exactly_the_chosen_steps(optimizer: str) -> None:
    """Log-spaced chosen steps, given unsorted: the same records as recording every step."""
    graph, ex = tiny_graph(), tiny_examples()
    kw: dict = dict(steps=30, lr=0.05, init_scale=0.5, seeds=2)
    base = dict(optimizer=optimizer, batch_size=2 if optimizer == "sgd" else None, momentum=0.5)
    chosen = [20, 0, 3, 1, 7]  # the last step, 30, is not among them
    some = simulate(graph, ex, **{**base, "record_steps": chosen}, **kw)
    every = simulate(graph, ex, **{**base, "record_every": 1}, **kw)
    rows = sorted(chosen)
    assert some.meta["step_at"] == rows
    np.testing.assert_allclose(some.t, every.t[rows], rtol=1e-15)
    np.testing.assert_array_equal(some.loss, every.loss[rows])
    for name, values in some.series.items():
        np.testing.assert_array_equal(values, every.series[name][rows])


def test_trajectory_roundtrip_and_refuses_overwrite(tmp_path) -> None:
    graph, ex = tiny_graph(), tiny_examples()
    traj = simulate(graph, ex, steps=3, lr=0.05, seeds=2, rsm=True)
    for suffix in (".npz", ".json"):
        path = traj.save(tmp_path / f"run{suffix}")
        back = Trajectory.load(path)
        np.testing.assert_allclose(back.loss, traj.loss, rtol=1e-15)
        np.testing.assert_allclose(back.series["sv/h->y"], traj.series["sv/h->y"], rtol=1e-15)
        assert back.meta["seeds"] == [0, 1]
        with pytest.raises(FileExistsError, match="exists"):
            traj.save(path)


# ----------------------------------------------------------------------------- failures


def test_divergence_raises_with_step_and_value() -> None:
    graph, ex = tiny_graph(), tiny_examples()
    with pytest.raises(SimulationDivergedError, match=r"diverged at step \d+ .*loss = ") as info:
        simulate(graph, ex, steps=2000, lr=50.0, init_scale=1.0)
    err = info.value
    assert isinstance(err, GdlnError)
    assert err.step > 0
    assert not np.isfinite(err.value) or err.value > 1e8
    assert err.seed == 0


@pytest.mark.parametrize("optimizer", ["gd", "sgd"])
def test_non_finite_weights_at_a_recorded_step_raise_divergence(optimizer: str) -> None:
    # Recording takes SVDs of the weights; between two checks the weights reach inf/NaN
    # at a recorded step, which must stop the run as a divergence, not a linear-algebra error.
    graph, ex = tiny_graph(), tiny_examples()
    settings = dict(
        optimizer=optimizer,
        batch_size=2 if optimizer == "sgd" else None,
        record_every=50,
        diverge_above=1e300,
    )
    with pytest.raises(SimulationDivergedError, match=r"diverged at step \d+ ") as info:
        simulate(graph, ex, steps=400, lr=50.0, init_scale=1.0, **settings)
    assert not np.isfinite(info.value.value)


def test_divergence_threshold_reports_first_bad_step() -> None:
    graph, ex = tiny_graph(), tiny_examples()
    ok = simulate(graph, ex, steps=10, lr=0.05, init_scale=0.5)
    limit = float(ok.loss[0, 0]) * 0.999  # the loss decreases, so step 0 is the first bad
    settings = dict(diverge_above=limit)
    with pytest.raises(SimulationDivergedError, match=r"step 0 ") as info:
        simulate(graph, ex, steps=10, lr=0.05, init_scale=0.5, **settings)
    assert info.value.value == pytest.approx(float(ok.loss[0, 0]), rel=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"steps": -1}, r"steps: expected an int >= 0, got -1"),
        ({"lr": 0.0}, r"lr \(--lr\): expected a finite number > 0, got 0.0"),
        ({"lr": float("nan")}, r"lr \(--lr\): expected a finite number > 0, got nan"),
        ({"record_every": 0}, r"record_every: expected an int > 0, got 0"),
        ({"dtype": "float16"}, r"dtype \(--dtype\): expected one of float64, float32"),
        (
            {"init_scheme": "he"},
            r"init_scheme \(--init-scheme\): expected one of xavier, .*got 'he'",
        ),
        ({"init_scale": -1.0}, r"init_scale \(--init-scale\): expected a finite number >= 0"),
        ({"optimizer": "adam"}, r"optimizer \(--optimizer\): expected one of gd, sgd; got 'adam'"),
        ({"optimizer": "sgd"}, r"batch_size: expected an int > 0, got None"),
        ({"batch_size": 4}, r"batch_size: only used with optimizer='sgd', got 4"),
        ({"momentum": 1.0}, r"momentum \(--momentum\): expected a number in \[0, 1\), got 1.0"),
        ({"seeds": 0}, r"seeds \(--seeds\): expected an integer >= 1, got 0"),
        ({"seeds": [1, -2]}, r"seeds: expected a non-empty list of non-negative ints"),
        (
            {"device": "tpu"},
            r"device: expected 'auto', 'cpu' or 'cuda\[:k\]', got 'tpu'",
        ),
        (
            {"init_scheme": "given"},
            r"weights: init_scheme='given' needs weights \{edge: array\}, got None",
        ),
        (
            {"init_scheme": "xavier", "weights": {}},
            r"weights: only used with init_scheme='given', got init_scheme='xavier'",
        ),
        (
            {"init_scheme": "given", "weights": {("a", "z"): 0}},
            r"weights: \('a', 'z'\) is not an edge",
        ),
        ({"init_scheme": "given", "weights": {}}, r"weights: missing edge \('a', 'h'\)"),
        ({"bases": {("h", "y"): (np.eye(2), np.eye(3))}}, r"bases\[\('h', 'y'\)\]: expected left"),
        ({"bases": {("y", "h"): (np.eye(2), np.eye(2))}}, r"bases: \('y', 'h'\) is not an edge"),
        ({"diverge_above": -1.0}, r"diverge_above: expected a finite number > 0"),
        (
            {"record_steps": [0, 3]},
            r"record_steps: expected a non-empty list of ints in \[0, steps=2\], got \[0, 3\]",
        ),
        ({"record_steps": []}, r"record_steps: expected a non-empty list of ints"),
        ({"record_steps": [0.5]}, r"record_steps: expected a non-empty list of ints"),
        ({"record_steps": [1], "record_every": 2}, r"record_steps: give either record_steps or"),
    ],
)
def test_bad_options_raise_named_errors(kwargs: dict, match: str) -> None:
    """Bad arguments of simulate, and bad settings, each with its own message."""
    graph, ex = tiny_graph(), tiny_examples()
    options = {"steps": 2, "lr": 0.1} | kwargs
    chosen = {k: options.pop(k) for k in list(options) if k in SETTINGS_FIELDS}
    with pytest.raises(SimulationSpecError, match=match):
        simulate(graph, ex, **chosen, **options)


def test_settings_must_be_simulation_settings() -> None:
    with pytest.raises(SimulationSpecError, match=r"settings: expected a SimulationSettings, got"):
        simulate(tiny_graph(), tiny_examples(), steps=1, lr=0.1, settings={})  # type: ignore[arg-type]


def test_given_weights_wrong_shape() -> None:
    graph, ex = tiny_graph(), tiny_examples()
    W = {e: w[0] for e, w in initial_weights(graph).items()}
    W[("h", "y")] = np.zeros((4, 2))
    with pytest.raises(
        SimulationSpecError, match=r"weights\[\('h', 'y'\)\]: expected shape \(2, 4\)"
    ):
        simulate(graph, ex, steps=1, lr=0.1, init_scheme="given", weights=W)


def test_cuda_unavailable_is_a_named_error() -> None:
    if torch.cuda.is_available():
        pytest.skip("CUDA present")
    with pytest.raises(SimulationSpecError, match=r"device: 'cuda' requested but CUDA"):
        settings = dict(device="cuda")
        simulate(tiny_graph(), tiny_examples(), steps=1, lr=0.1, **settings)


def test_examples_that_do_not_fit_the_graph() -> None:
    graph, ex = tiny_graph(), tiny_examples()
    bad_width = ExampleSet(
        inputs={"a": np.zeros((6, 5))},
        targets=ex.targets,
        gates={},
        weights=ex.weights,
        context=ex.context,
    )
    with pytest.raises(TaskSpecError, match=r"examples: inputs\['a'\]: expected width \|a\| = 2"):
        simulate(graph, bad_width, steps=1, lr=0.1)
    bad_node = ExampleSet(
        inputs={"q": np.zeros((6, 2))},
        targets=ex.targets,
        gates={},
        weights=ex.weights,
        context=ex.context,
    )
    with pytest.raises(TaskSpecError, match=r"'q' is not an input node of the graph"):
        simulate(graph, bad_node, steps=1, lr=0.1)
    bad_gate = ExampleSet(
        inputs=ex.inputs,
        targets=ex.targets,
        gates={("a", "z"): np.ones(6)},
        weights=ex.weights,
        context=ex.context,
    )
    with pytest.raises(
        TaskSpecError, match=r"gates\[\('a', 'z'\)\]: .* neither a node nor an edge"
    ):
        simulate(graph, bad_gate, steps=1, lr=0.1)
    bad_weights = ExampleSet(
        inputs=ex.inputs, targets=ex.targets, gates={}, weights=np.full(6, 0.5), context=ex.context
    )
    with pytest.raises(TaskSpecError, match=r"examples: weights: expected non-negative weights"):
        simulate(graph, bad_weights, steps=1, lr=0.1)
    with pytest.raises(
        SimulationSpecError, match=r"eval_examples: expected an ExampleSet, got dict"
    ):
        simulate(graph, ex, steps=1, lr=0.1, eval_examples={})


def test_bad_graphs() -> None:
    ex = tiny_examples()
    g = tiny_graph()
    g.nodes["h"]["size"] = 0
    with pytest.raises(
        SimulationSpecError, match=r"node 'h' attribute 'size': expected an int >= 1"
    ):
        simulate(g, ex, steps=1, lr=0.1)
    g = tiny_graph()
    g.add_edge("y", "h")
    with pytest.raises(SimulationSpecError, match=r"graph: expected a DAG"):
        simulate(g, ex, steps=1, lr=0.1)
    with pytest.raises(SimulationSpecError, match=r"graph: expected a networkx.DiGraph, got dict"):
        simulate({}, ex, steps=1, lr=0.1)  # type: ignore[arg-type]


def test_threads_option_is_restored() -> None:
    before = torch.get_num_threads()
    two = dict(threads=2)
    a = simulate(tiny_graph(), tiny_examples(), steps=3, lr=0.05, **two)
    b = simulate(tiny_graph(), tiny_examples(), steps=3, lr=0.05)
    assert torch.get_num_threads() == before
    np.testing.assert_allclose(a.loss, b.loss, rtol=1e-13)
    with pytest.raises(
        SimulationSpecError, match=r"threads \(--threads\): expected an integer >= 1, got 0"
    ):
        SimulationSettings(threads=0)


def test_progress_bar_runs(capsys) -> None:
    settings = dict(progress=True)
    simulate(tiny_graph(), tiny_examples(), steps=250, lr=0.01, **settings)
    assert "simulate" in capsys.readouterr().err


# ----------------------------------------------------------------------------- first order in lr


def test_gd_converges_to_the_flow_at_first_order_in_lr() -> None:
    """Richardson check without theory: |L_lr - L_lr/2| / |L_lr/2 - L_lr/4| -> 2 at fixed t."""
    graph, ex = tiny_graph(), tiny_examples()
    W = {
        e: w[0]
        for e, w in initial_weights(graph, init_scheme="singular", init_scale=0.5, seed=2).items()
    }
    t_end, losses = 1.0, []
    for lr in (0.01, 0.005, 0.0025):
        steps = round(t_end / lr)
        settings = dict(record_every=steps)
        traj = simulate(graph, ex, steps=steps, lr=lr, init_scheme="given", weights=W, **settings)
        losses.append(traj.loss[-1, 0])
    ratio = (losses[0] - losses[1]) / (losses[1] - losses[2])
    assert ratio == pytest.approx(2.0, rel=0.05)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "extra",
    [{}, {"optimizer": "sgd", "batch_size": 2, "momentum": 0.9, "record_steps": [0, 3, 17]}],
)
def test_cuda_matches_cpu(extra: dict) -> None:
    """Full batch, and minibatch SGD with momentum (the batches come from CPU rngs)."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    graph, ex = tiny_graph(), tiny_examples()
    options = {"record_every": 5} if "record_steps" not in extra else {}
    settings = dict(**(options | extra))
    kw = dict(steps=20, lr=0.05, seeds=3)
    cpu = simulate(graph, ex, **dict(settings, device="cpu"), **kw)
    gpu = simulate(graph, ex, **dict(settings, device="cuda"), **kw)
    assert gpu.meta["device"].startswith("cuda")
    np.testing.assert_allclose(gpu.loss, cpu.loss, rtol=1e-10)
