"""Path formula for the GD Gram matrix H (Thm. 5.1 of the path-formula paper)."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest
import torch

from gdln import GraphSpecError
from gdln.kernels import make_dgn
from gdln.kernels._gram_paths import (
    dag_ntk,
    example_5_2_graph,
    example_5_3_graph,
    mlp_graph,
    mlp_term_counts,
    path_gram,
    pre_subnetwork,
    term_counts,
)
from gdln.kernels._momentum import momentum_cosines, scalar_layer_gram
from gdln.kernels._ntk import neural_tangent_kernel

RTOL = 1e-10


def _x(n, d, seed=0):
    return np.random.default_rng(seed).normal(size=(n, d))


def _random_dag(seed: int) -> nx.DiGraph:
    """A random DAG with skip edges, mixed activations and 3 inputs."""
    rng = np.random.default_rng(seed)
    g = nx.DiGraph()
    for i in range(3):
        g.add_node(("x", i), input=i)
    hidden = [("h", k) for k in range(6)]
    acts = ["relu", "sigmoid", "tanh", "identity"]
    for k, v in enumerate(hidden):
        g.add_node(v, activation=acts[k % 4])
        earlier = [("x", i) for i in range(3)] + hidden[:k]
        for u in earlier:
            if rng.random() < 0.5:
                g.add_edge(u, v, weight=float(rng.normal()))
        if g.in_degree(v) == 0:
            g.add_edge(("x", k % 3), v, weight=float(rng.normal()))
    g.add_node("y", activation="sigmoid")
    for v in hidden:
        g.add_edge(v, "y", weight=float(rng.normal()))
    return g


@pytest.mark.parametrize("seed", range(4))
def test_path_formula_equals_autodiff_on_random_dags(seed):
    g = _random_dag(seed)
    x = _x(7, 3, seed)
    pg = path_gram(g, x)
    np.testing.assert_allclose(pg.H, dag_ntk(g, x), rtol=RTOL, atol=1e-13)
    np.testing.assert_allclose(pg.strong + pg.weak, pg.H, rtol=RTOL, atol=1e-13)
    assert (pg.n_strong, pg.n_weak) == term_counts(g)


@pytest.mark.parametrize("activation", ["relu", "sigmoid", "tanh", "identity"])
def test_mlp_graph_matches_mlp_autodiff(activation):
    widths = [3, 4, 3, 1]
    ws = [
        np.random.default_rng(k).normal(size=(a, b)) / 2
        for k, (a, b) in enumerate(itertools.pairwise(widths))
    ]
    g = mlp_graph(widths, activation=activation, weights=ws)
    x = _x(5, 3, 1)
    xt = torch.as_tensor(x)
    acts = {
        "relu": torch.relu,
        "sigmoid": torch.sigmoid,
        "tanh": torch.tanh,
        "identity": lambda a: a,
    }

    def f(*params):
        z = xt
        for w in params[:-1]:
            z = acts[activation](z @ w)
        return (z @ params[-1])[:, 0]

    jac = torch.func.jacrev(f, argnums=tuple(range(3)))(*[torch.as_tensor(w) for w in ws])
    j = torch.cat([t.reshape(5, -1) for t in jac], dim=1).numpy()
    np.testing.assert_allclose(path_gram(g, x).H, j @ j.T, rtol=RTOL, atol=1e-13)


def test_relu_mlp_path_formula_equals_dgn_ntk():
    net = make_dgn(3, 4, 3, seed=9)
    g = mlp_graph(net.widths, weights=[w.numpy() for w in net.value])
    x = _x(6, 3, 2)
    np.testing.assert_allclose(
        path_gram(g, x).H,
        neural_tangent_kernel(net, torch.as_tensor(x)).total,
        rtol=RTOL,
        atol=1e-13,
    )


def test_weak_part_by_explicit_double_loop():
    g = example_5_3_graph()
    x = _x(4, 1, 3)
    pg = path_gram(g, x)
    # rebuild every g_{w,p} vector by hand and sum p1 != p2 pairs explicitly
    h = {"x": x[:, 0]}
    tau = {}
    for v, inputs in (("b", ["x"]), ("a1", ["b"]), ("a2", ["b"]), ("y", ["a1", "a2", "b"])):
        a = sum(g.edges[u, v]["weight"] * h[u] for u in inputs)
        act = g.nodes[v]["activation"]
        h[v] = np.tanh(a) if act == "tanh" else a
        tau[v] = 1 - np.tanh(a) ** 2 if act == "tanh" else np.ones_like(a)
    weak = np.zeros((4, 4))
    strong = np.zeros((4, 4))
    for a, b in g.edges:
        vecs = []
        for path in pre_subnetwork(g, (a, b)):
            pgv = np.prod([tau[v] for v in path], axis=0)
            for u, v in itertools.pairwise(path):
                pgv = pgv * g.edges[u, v]["weight"]
            vecs.append(h[a] * pgv)
        for (i, p1), (k, p2) in itertools.product(enumerate(vecs), repeat=2):
            if i == k:
                strong += np.outer(p1, p2)
            else:
                weak += np.outer(p1, p2)
    np.testing.assert_allclose(pg.weak, weak, rtol=RTOL, atol=1e-14)
    np.testing.assert_allclose(pg.strong, strong, rtol=RTOL, atol=1e-14)
    # H^S is a Gram matrix (Remark 6.8): positive semi-definite
    assert np.linalg.eigvalsh(pg.strong)[0] > -1e-12


def test_examples_5_2_and_5_3_term_counts():
    assert term_counts(example_5_2_graph()) == (3, 0)
    s, w = term_counts(example_5_3_graph())
    assert (s, w, s + w) == (8, 6, 14)
    pg = path_gram(example_5_3_graph(), _x(3, 1))
    assert pg.n_terms == 14
    assert sorted(
        len(list(pre_subnetwork(example_5_3_graph(), e))) for e in example_5_3_graph().edges
    ) == [1, 1, 1, 1, 1, 3]


@pytest.mark.parametrize("widths", [[2, 1], [3, 4, 1], [2, 3, 3, 1], [3, 2, 4, 2, 1]])
def test_mlp_term_counts_closed_form_vs_enumeration(widths):
    g = mlp_graph(widths)
    enumerated = [0, 0]
    for e in g.edges:
        c = sum(1 for _ in pre_subnetwork(g, e))
        enumerated[0] += c
        enumerated[1] += c * (c - 1)
    assert mlp_term_counts(widths) == term_counts(g) == tuple(enumerated)


def test_two_layer_has_no_weak_terms_and_count_is_linear_in_width():
    """Sec. 6.1: a 2-layer network's H is a sum of m i.i.d. terms, no cross terms."""
    for m in (1, 5, 50):
        s, w = mlp_term_counts([7, m, 1])
        assert (s, w) == (8 * m, 0)
    assert mlp_term_counts([2, 3, 3, 1])[1] > 0  # 3 layers: cross terms appear


def test_eq34_gram_of_mu_f_equals_the_path_formula():
    """App. F, Eq. (34): H(mu f) = mu^2 H(f) + u_f u_f^T, against Thm. 5.1 and autodiff."""
    w1 = np.random.default_rng(1).normal(size=(3, 4))
    w2 = np.random.default_rng(2).normal(size=(4, 1))
    f = mlp_graph([3, 4, 1], activation="tanh", weights=[w1, w2])
    x = _x(6, 3, seed=4)
    u_f = (np.tanh(x @ w1) @ w2)[:, 0]
    for mu in (1.0, 0.6, -1.7):
        g = nx.relabel_nodes(f, {"y": "f"})
        g.add_node("y", activation="identity")
        g.add_edge("f", "y", weight=mu)
        expected = scalar_layer_gram(path_gram(f, x).H, u_f, mu)
        np.testing.assert_allclose(path_gram(g, x).H, expected, rtol=RTOL, atol=1e-13)
        np.testing.assert_allclose(dag_ntk(g, x), expected, rtol=RTOL, atol=1e-13)


def test_prop62_proved_form_holds_for_every_psd_gram():
    """App. F proves cos(H(g) u_g, u_g) >= cos(H(f) u_f, u_f) for PSD H(f), any mu != 0."""
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(2, 7))
        a = rng.normal(size=(n, int(rng.integers(1, n + 2))))  # rank-deficient too
        u = rng.normal(size=n) * rng.uniform(0.01, 10)
        mu = float(rng.choice([-1, 1]) * rng.uniform(0.1, 3))
        c = momentum_cosines(a @ a.T, u, mu, rng.normal(size=n))
        assert c.proved_holds, (c, mu)
        # Eqs. (45)-(47): the bound (mu^2 a + |u|^4) / (mu^2 b + |u|^4) lies between the two
        h = a @ a.T
        ip, nb = float(u @ h @ u), float(np.linalg.norm(h @ u) * np.linalg.norm(u))
        u4 = float(u @ u) ** 2
        bound = (mu**2 * ip + u4) / (mu**2 * nb + u4)
        assert c.proved_f - 1e-12 <= bound <= c.proved_g + 1e-12


def test_prop62_flow_form_fails_when_u_points_against_the_residual():
    """Read with du/dt = H (y - u), Eq. (17) needs u^T (y - u) > 0 at mu = 1."""
    h, u = np.eye(2), np.array([1.0, 0.0])
    bad = momentum_cosines(h, u, 1.0, np.array([0.0, 1.0]))  # u^T (y - u) = -1
    assert bad.flow_f == pytest.approx(-1 / np.sqrt(2), rel=1e-12)
    assert bad.flow_g == pytest.approx(-2 / np.sqrt(5), rel=1e-12)
    assert not bad.flow_holds and bad.proved_holds
    good = momentum_cosines(h, u, 1.0, np.array([2.0, 1.0]))  # u^T (y - u) = +1
    assert good.flow_g == pytest.approx(2 / np.sqrt(5), rel=1e-12) and good.flow_holds
    assert np.isnan(momentum_cosines(h, u, 1.0).flow_f)


def test_graph_errors():
    g = nx.DiGraph()
    with pytest.raises(GraphSpecError, match=r"got an empty graph"):
        term_counts(g)
    with pytest.raises(GraphSpecError, match=r"expected a networkx.DiGraph"):
        term_counts(nx.Graph())  # type: ignore[arg-type]
    g = nx.DiGraph([("a", "b"), ("b", "a")])
    with pytest.raises(GraphSpecError, match=r"has a cycle"):
        term_counts(g)
    g = nx.DiGraph()
    g.add_edge("x", "y", weight=1.0)
    g.add_edge("x", "z", weight=1.0)
    g.nodes["x"]["input"] = 0
    with pytest.raises(GraphSpecError, match=r"got 2 nodes without successors"):
        term_counts(g)
    g = nx.DiGraph()
    g.add_edge("x", "y", weight=1.0)
    with pytest.raises(GraphSpecError, match=r"nodes\['x'\].input: got input=None"):
        term_counts(g)
    g.nodes["x"]["input"] = 0
    g.nodes["y"]["activation"] = "gelu"
    with pytest.raises(GraphSpecError, match=r"nodes\['y'\].activation: got activation='gelu'"):
        term_counts(g)
    g.nodes["y"]["activation"] = "relu"
    g.edges["x", "y"]["weight"] = float("nan")
    with pytest.raises(GraphSpecError, match=r"edges\['x'->'y'\].weight: got weight=nan"):
        term_counts(g)
    with pytest.raises(GraphSpecError, match=r"X: got shape \(3,\), expected \(N, >= 2\)"):
        path_gram(example_5_2_graph(), np.zeros(3))
    with pytest.raises(GraphSpecError, match=r"got edge \('y', 'x1'\), which is not in"):
        list(pre_subnetwork(example_5_2_graph(), ("y", "x1")))
    with pytest.raises(GraphSpecError, match=r"widths: got widths=\[3, 2\]"):
        mlp_term_counts([3, 2])
    with pytest.raises(GraphSpecError, match=r"activation: got 'elu'"):
        mlp_graph([2, 1], activation="elu")
    with pytest.raises(GraphSpecError, match=r"h_f, u_f: got shapes \(2, 2\) and \(3,\)"):
        scalar_layer_gram(np.eye(2), np.ones(3), 1.0)
    with pytest.raises(GraphSpecError, match=r"y: got shape \(3,\), expected \(2,\)"):
        momentum_cosines(np.eye(2), np.ones(2), 1.0, np.ones(3))
