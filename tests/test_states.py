"""Full-batch steps on the examples' states (``_states.py``) with the backward pass by hand
(``_backprop.py``), against independent computations.

References: the numpy forward and backward pass of ``test_simulate.numpy_loss_and_grad``
(every example, every edge, no states), numpy heavy ball, and closed forms for the number
of states of the routing network. Tolerance: float64 rtol 1e-11 over several steps.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import torch
from test_simulate import numpy_loss_and_grad

import gdln
from gdln._edge import edge_name
from gdln.simulation import initial_weights, simulate
from gdln.simulation._plan import compile_plan
from gdln.simulation._seeds import GATE_STREAM
from gdln.simulation._states import state_plan
from gdln.task import ExampleSet

SIZES = {"a": 3, "b": 2, "h": 4, "k": 4, "m": 4, "p": 3, "y": 2, "z": 3, "u": 2, "w": 4, "v": 1}
EDGES = [
    ("a", "h"),  # gated; with b->h: a fan-in of two source widths (two scattered products)
    ("b", "h"),  # gated
    ("h", "k"),  # k and m: single in-edges of one width from h, one stacked product
    ("h", "m"),
    ("k", "p"),  # p: k and m (two sources stacked), a (another width)
    ("m", "p"),
    ("a", "p"),
    ("p", "y"),  # gated; y also fed by h: an output summed from products
    ("h", "y"),
    ("p", "z"),
    ("p", "u"),
    ("m", "w"),  # fixed W = 0.5 I
    ("b", "v"),  # gated, never on: an idle edge and an output that is always 0
]


def rich_problem(n: int = 30, seed: int = 3) -> tuple[nx.DiGraph, ExampleSet]:
    """Every kind of product, gate values other than 0/1, repeated inputs (shared states),
    unequal rows per edge (padding), a fixed edge, an idle edge, non-uniform weights."""
    g = nx.DiGraph(name="rich")
    for node, size in SIZES.items():
        g.add_node(node, size=size)
    for u, v in EDGES:
        g.add_edge(u, v)
    g.edges["m", "w"]["fixed"] = 0.5
    rng = np.random.default_rng(seed)
    a_rows, b_rows = rng.normal(size=(3, 3)), rng.normal(size=(2, 2))
    gates = {
        "h": rng.choice([0.0, 0.5, 1.0, 2.0], n),
        ("a", "h"): rng.choice([0.0, 1.0, 1.5], n),
        ("b", "h"): rng.choice([0.0, 1.0], n, p=[0.7, 0.3]),
        ("p", "y"): np.where(rng.random(n) < 0.3, 0.0, rng.choice([1.0, 0.25], n)),
        ("b", "v"): np.zeros(n),
    }
    w = rng.uniform(0.2, 1.0, n)
    return g, ExampleSet(
        inputs={"a": a_rows[rng.integers(0, 3, n)], "b": b_rows[rng.integers(0, 2, n)]},
        targets={v: rng.normal(size=(n, SIZES[v])) for v in ("y", "z", "u", "w", "v")},
        gates=gates,
        weights=w / w.sum(),
        context=np.arange(n) % 4,
        context_labels=("c0", "c1", "c2", "c3"),
    )


def test_states_are_shared_and_the_products_cover_every_kind() -> None:
    graph, ex = rich_problem()
    net = compile_plan(graph)
    plan = state_plan(net, ex, ex.weights, torch.float64, torch.device("cpu"))
    assert plan.state["h"].max() + 1 < len(ex.weights)  # examples do share states
    assert ("b", "v") in [net.edges[i] for i in plan.idle]
    kinds = {(p.into is None, p.stacked, len(p.sources)) for p in plan.products}
    assert (True, True, 1) in kinds  # h -> k, m: stacked single in-edges
    assert (False, True, 2) in kinds  # k, m -> p: two sources stacked
    assert any(p.gate is not None and p.into is not None for p in plan.products)
    assert "y" in plan.node_loss  # an output summed from two products


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_steps_equal_numpy_backprop_with_momentum(dtype: str) -> None:
    """Six heavy-ball steps, two seeds: weights, losses and per-context losses."""
    graph, ex = rich_problem()
    lr, mu, steps, seeds = 0.05, 0.5, 6, [2, 7]
    settings = dict(momentum=mu, record_weights=True, dtype=dtype)
    traj = simulate(graph, ex, steps=steps, lr=lr, seeds=seeds, init_scale=0.7, **settings)
    start = initial_weights(graph, init_scale=0.7, seeds=seeds)
    rtol = 1e-11 if dtype == "float64" else 2e-4
    for r in range(len(seeds)):
        W = {e: start[e][r] for e in graph.edges}
        W[("m", "w")] = 0.5 * np.eye(4)
        buf = {e: np.zeros_like(v) for e, v in W.items()}
        for k in range(steps + 1):
            loss, per_example, grads = numpy_loss_and_grad(graph, ex, W)
            assert traj.loss[k, r] == pytest.approx(loss, rel=rtol)
            for c in range(4):
                rows = ex.context == c
                mean = per_example[rows] @ ex.weights[rows] / ex.weights[rows].sum()
                assert traj.series[f"loss/c{c}"][k, r] == pytest.approx(mean, rel=rtol)
            for e in graph.edges:
                got = traj.series[f"W/{edge_name(e)}"][k, r]
                np.testing.assert_allclose(
                    got, W[e], rtol=rtol, atol=1e-14 if rtol < 1e-6 else 1e-6
                )
            grads[("m", "w")] = 0.0 * grads[("m", "w")]  # fixed
            buf = {e: mu * buf[e] + grads[e] for e in W}
            W = {e: W[e] - lr * buf[e] for e in W}


def test_recorded_activations_are_each_examples() -> None:
    """The hidden activations of a record (from the states) are each example's own."""
    graph, ex = rich_problem()
    W = {e: w[0] for e, w in initial_weights(graph, init_scale=0.9, seed=4).items()}
    W[("m", "w")] = 0.5 * np.eye(4)
    settings = dict(rsm=True)
    traj = simulate(graph, ex, steps=0, lr=0.1, init_scheme="given", weights=W, **settings)
    one, gate = np.ones(len(ex.weights)), ex.gates
    h = gate["h"][:, None] * (
        gate[("a", "h")][:, None] * (ex.inputs["a"] @ W[("a", "h")].T)
        + gate[("b", "h")][:, None] * (ex.inputs["b"] @ W[("b", "h")].T)
    )
    k, m = h @ W[("h", "k")].T, h @ W[("h", "m")].T
    p = k @ W[("k", "p")].T + m @ W[("m", "p")].T + ex.inputs["a"] @ W[("a", "p")].T
    for name, act in (("h", h), ("k", k), ("m", m), ("p", p)):
        np.testing.assert_allclose(traj.series[f"rsm/{name}"][0, 0], act @ act.T, rtol=1e-12)
    assert one.sum() == len(ex.weights)


def test_random_gates_scale_the_gradient_of_the_gated_weights() -> None:
    """Stochastic-depth gates on an edge and a node: each step's draw, by numpy."""
    graph, ex = rich_problem()
    items = {("h", "k"): 0.5, "p": 0.7}
    ex = ExampleSet(**{**ex.__dict__, "random_gates": items})
    lr, steps, seed = 0.05, 5, 11
    settings = dict(record_weights=True)
    traj = simulate(graph, ex, steps=steps, lr=lr, seeds=[seed], init_scale=0.7, **settings)
    W = {e: w[0] for e, w in initial_weights(graph, init_scale=0.7, seeds=[seed]).items()}
    W[("m", "w")] = 0.5 * np.eye(4)
    rng = np.random.default_rng((seed, GATE_STREAM))
    p = np.array(list(items.values()))
    for k in range(steps):
        keep = rng.random(len(p)) < p
        gates = dict(ex.gates)
        gates[("h", "k")] = keep[0] * np.ones(len(ex.weights))
        gates["p"] = keep[1] * np.ones(len(ex.weights))
        drawn = ExampleSet(**{**ex.__dict__, "gates": gates, "random_gates": {}})
        loss, _, grads = numpy_loss_and_grad(graph, drawn, W)
        assert traj.loss[k, 0] == pytest.approx(loss, rel=1e-11)
        grads[("m", "w")] = 0.0 * grads[("m", "w")]
        W = {e: W[e] - lr * grads[e] for e in W}
        for e in graph.edges:
            got = traj.series[f"W/{edge_name(e)}"][k + 1, 0]
            np.testing.assert_allclose(got, W[e], rtol=1e-11, atol=1e-14)


@pytest.mark.parametrize(("m", "k", "seed"), [(7, 4, -1), (12, 5, -1), (9, 3, 4)])
def test_routing_has_4m_states_per_hidden_layer(m: int, k: int, seed: int) -> None:
    """Routing: x_i -> h1 -> h2 -> y_j; the hidden states are (input domain, item), 4 M
    of them, and output j's are (domain routed to j, item): 4 K with the cyclic routes
    (``seed`` -1), 4 times the domains routed to j with random ones; n = 4 K M."""
    problem = gdln.load("graphs/routing.yaml", params={"M": m, "K": k, "hidden": 5, "seed": seed})
    ex = problem.examples()
    net = compile_plan(problem.graph)
    plan = state_plan(net, ex, np.asarray(ex.weights), torch.float64, torch.device("cpu"))
    assert len(ex.weights) == 4 * k * m
    for v in ("h1", "h2"):
        assert plan.state[v].max() + 1 == 4 * m
    routes = [label.split("->") for label in ex.context_labels]
    for j in range(m):
        feeding = {i for i, out in routes if out == f"y{j}"}
        assert len(feeding) == k or seed >= 0
        assert plan.state[f"y{j}"].max() + 1 == 4 * len(feeding)
    assert len(plan.products) == 3  # inputs into h1, h1 -> h2, h2 into the outputs


def test_the_watched_loss_is_the_loss_of_eq1() -> None:
    """The loss watched for divergence (from the output states' weighted means) is the
    recorded loss (example by example): a limit just below step 0's stops at step 0."""
    graph, ex = rich_problem()
    ok = simulate(graph, ex, steps=3, lr=0.05, init_scale=0.7, seeds=1)
    first = float(ok.loss[0, 0])
    loss, _, _ = numpy_loss_and_grad(
        graph,
        ex,
        {e: w[0] for e, w in initial_weights(graph, init_scale=0.7).items()}
        | {("m", "w"): 0.5 * np.eye(4)},
    )
    assert first == pytest.approx(loss, rel=1e-12)
    settings = dict(diverge_above=first * (1 - 1e-9))
    with pytest.raises(gdln.simulation.SimulationDivergedError, match=r"step 0 ") as info:
        simulate(graph, ex, steps=3, lr=0.05, init_scale=0.7, seeds=1, **settings)
    assert info.value.value == pytest.approx(first, rel=1e-12)
