"""The gated-flow reference against autograd and closed forms (it must be right before gdln is
compared with it)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from reference import closed_forms as cf
from reference import gated_flow as gf

EDGES = [
    ("x", "a"),
    ("z", "a"),
    ("x", "b"),
    ("a", "b"),
    ("b", "y"),
    ("a", "y"),
    ("z", "w"),
    ("b", "w"),
    ("x", "y"),
]
SIZES = {"x": 3, "z": 2, "a": 4, "b": 3, "y": 2, "w": 1}


def random_problem(seed: int = 0):
    """Two inputs, two outputs, a skip edge, node and edge gates that differ per context."""
    rng = np.random.default_rng(seed)
    net = gf.Network(SIZES, EDGES)
    weights = {e: 0.5 * rng.normal(size=net.shape(e)) for e in net.edges}
    contexts = []
    for c, (p, ga, gy, gxb) in enumerate([(0.2, 1, 1, 0), (0.3, 0, 1, 1), (0.5, 1, 0, 1)]):
        X = {"x": rng.normal(size=(5, 3)), "z": rng.normal(size=(5, 2))}
        Y = {"y": rng.normal(size=(5, 2)), "w": rng.normal(size=(5, 1))}
        contexts.append(
            gf.Context(
                f"c{c}",
                p,
                node_gates={"a": ga, "y": gy},
                edge_gates={("x", "b"): gxb, ("a", "y"): 1 - gxb},
                X=X,
                Y=Y,
            )
        )
    return net, weights, contexts


def torch_loss(net, weights, contexts):
    """Eq. (1) on the examples, forward pass written again in torch; autograd for the gradient."""
    wt = {e: torch.tensor(a, requires_grad=True) for e, a in weights.items()}
    total = 0.0
    for c in contexts:
        h = {}
        for v in net.order:
            if v in net.inputs:
                h[v] = torch.tensor(c.X[v])
                continue
            h[v] = c.node_gate(v) * sum(c.edge_gate(q) * h[q[0]] @ wt[q].T for q in net.incoming(v))
        per_example = sum(((torch.tensor(c.Y[o]) - h[o]) ** 2).sum(1) for o in net.outputs)
        total = total + c.probability * 0.5 * per_example.mean()
    total.backward()
    return float(total.detach()), {e: t.grad.numpy() for e, t in wt.items()}


def test_loss_and_gradient_match_autograd():
    net, weights, contexts = random_problem()
    want_loss, want_grad = torch_loss(net, weights, contexts)
    assert gf.loss(net, weights, contexts) == pytest.approx(want_loss, rel=1e-13)
    got = gf.gradient(net, weights, contexts)
    for e in net.edges:
        np.testing.assert_allclose(got[e], want_grad[e], rtol=1e-12, atol=1e-13)


def test_examples_and_their_moments_give_the_same_loss_gradient_and_outputs():
    net, weights, contexts = random_problem(1)
    as_moments = []
    for c in contexts:
        m = gf.moments(net, c)
        as_moments.append(
            gf.Context(
                c.label,
                c.probability,
                c.node_gates,
                c.edge_gates,
                Sigma_x=m.xx,
                Sigma_yx=m.yx,
                Sigma_y=m.yy,
            )
        )
    assert gf.loss(net, weights, as_moments) == pytest.approx(
        gf.loss(net, weights, contexts), rel=1e-13
    )
    g1, g2 = gf.gradient(net, weights, contexts), gf.gradient(net, weights, as_moments)
    for e in net.edges:
        np.testing.assert_allclose(g1[e], g2[e], rtol=1e-12, atol=1e-13)
    c = contexts[0]
    T = gf.transfer(net, weights, c)
    for o, h in gf.outputs(net, weights, c).items():
        np.testing.assert_allclose(h, sum(c.X[i] @ T[(o, i)].T for i in net.inputs), atol=1e-13)


def test_gates_on_input_nodes_and_bad_probabilities_are_refused():
    net, weights, contexts = random_problem()
    bad = gf.Context("bad", node_gates={"x": 0}, X=contexts[0].X, Y=contexts[0].Y)
    with pytest.raises(ValueError, match="input node 'x' cannot carry a gate"):
        gf.loss(net, weights, [bad])
    with pytest.raises(ValueError, match="sum to 1"):
        gf.loss(net, weights, contexts, {"c0": 0.5})
    with pytest.raises(ValueError, match="unknown contexts"):
        gf.loss(net, weights, contexts, {"zz": 1.0})


ONE_LAYER = gf.Network({"x": 2, "y": 1}, [("x", "y")])
# x ~ U[-1, 1]^2, y = x_c in context c (App. A.2 of Saxe et al. 2022, graphs/context.yaml)
SX = np.eye(2) / 3
FIRST = gf.Context(
    "first", Sigma_x={("x", "x"): SX}, Sigma_yx={("y", "x"): [[1 / 3, 0]]}, Sigma_y={"y": 1 / 3}
)
SECOND = gf.Context(
    "second", Sigma_x={("x", "x"): SX}, Sigma_yx={("y", "x"): [[0, 1 / 3]]}, Sigma_y={"y": 1 / 3}
)


@pytest.mark.parametrize(("tau", "gamma"), [(1.0, 0.0), (2.5, 0.1)])
def test_one_layer_flow_is_the_exponential_closed_form(tau, gamma):
    rng = np.random.default_rng(2)
    Sx = rng.normal(size=(3, 3))
    Sx = Sx @ Sx.T / 3
    Syx = rng.normal(size=(2, 3))
    net = gf.Network({"x": 3, "y": 2}, [("x", "y")])
    ctx = gf.Context("c", Sigma_x={("x", "x"): Sx}, Sigma_yx={("y", "x"): Syx})
    W0 = rng.normal(size=(2, 3))
    times = [0.0, 0.3, 2.0, 7.0]
    for t, w in zip(
        times, gf.flow(net, {("x", "y"): W0}, [ctx], times, tau=tau, gamma=gamma), strict=True
    ):
        want = cf.linear_flow(Sx, Syx, W0, t, tau=tau, gamma=gamma)
        np.testing.assert_allclose(w[("x", "y")], want, rtol=1e-9, atol=1e-11)


def test_gradient_descent_map_is_the_closed_form_map():
    W0 = np.array([[0.3, -0.2]])
    got = gf.gd_map(
        ONE_LAYER,
        {("x", "y"): W0},
        [FIRST, SECOND],
        50,
        0.4,
        gamma=0.05,
        probabilities={"first": 0.25, "second": 0.75},
        record=[0, 7, 50],
    )
    Syx = np.array([[0.25 / 3, 0.75 / 3]])
    for k, w in zip([0, 7, 50], got, strict=True):
        np.testing.assert_allclose(
            w[("x", "y")], cf.linear_gd(SX, Syx, W0, k, 0.4, gamma=0.05), rtol=1e-13, atol=1e-15
        )


def test_two_layer_modes_follow_eq21_and_the_loss_eq22():
    # Sigma_yx = U S V^T, Sigma_x = V D V^T; decoupled balanced start (Eq. 9)
    rng = np.random.default_rng(3)
    U = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    V = np.linalg.qr(rng.normal(size=(4, 4)))[0]
    s, d, a0 = (
        np.array([2.0, 1.0, 0.5]),
        np.array([1.5, 1.0, 0.8, 0.6]),
        np.array([1e-3, 2e-3, 0.1]),
    )
    Syx = U @ np.diag(s) @ V[:, :3].T
    Sx = V @ np.diag(d) @ V.T
    W1, W2 = cf.aligned_two_layer(U, V, a0, hidden=5)
    net = gf.Network({"x": 4, "h": 5, "y": 3}, [("x", "h"), ("h", "y")])
    ctx = gf.Context("c", Sigma_x={("x", "x"): Sx}, Sigma_yx={("y", "x"): Syx}, Sigma_y={"y": 3.0})
    tau, times = 2.0, [0.0, 1.0, 4.0, 12.0]
    for t, w in zip(
        times, gf.flow(net, {("x", "h"): W1, ("h", "y"): W2}, [ctx], times, tau=tau), strict=True
    ):
        a = cf.logistic_mode(s, d[:3], a0, t, tau=tau)
        np.testing.assert_allclose(
            w[("h", "y")] @ w[("x", "h")], U @ np.diag(a) @ V[:, :3].T, rtol=1e-8, atol=1e-11
        )
        want = 1.5 + cf.mode_loss(s, d[:3], a).sum()  # 1/2 tr Sigma_y + Eq. (22) per mode
        assert gf.context_loss(net, w, ctx) == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("lam", [0.0, 0.7])
def test_lambda_balanced_flow_is_the_riccati_closed_form(lam):
    rng = np.random.default_rng(4)
    d_in, h, d_out = (3, 5, 2) if lam == 0 else (3, 3, 3)
    R = np.linalg.qr(rng.normal(size=(h, h)))[0]
    U = np.linalg.qr(rng.normal(size=(d_out, d_out)))[0]
    V = np.linalg.qr(rng.normal(size=(d_in, d_in)))[0]
    r = min(d_in, d_out)
    a = np.abs(rng.normal(size=r)) * 0.5
    b = np.sqrt(a**2 + lam)
    W1 = R[:, :r] @ np.diag(a) @ V[:, :r].T
    W2 = U[:, :r] @ np.diag(b) @ R[:, :r].T
    np.testing.assert_allclose(
        cf.balance(W1, W2), lam * np.eye(h) if lam else np.zeros((h, h)), atol=1e-14
    )
    S = rng.normal(size=(d_out, d_in))
    net = gf.Network({"x": d_in, "h": h, "y": d_out}, [("x", "h"), ("h", "y")])
    ctx = gf.Context("c", Sigma_x={("x", "x"): np.eye(d_in)}, Sigma_yx={("y", "x"): S})
    times = [0.0, 0.5, 3.0]
    for t, w in zip(
        times, gf.flow(net, {("x", "h"): W1, ("h", "y"): W2}, [ctx], times, tau=1.5), strict=True
    ):
        P = cf.riccati_qqt(cf.qqt(W1, W2), S, lam, t, tau=1.5)
        np.testing.assert_allclose(cf.qqt(w[("x", "h")], w[("h", "y")]), P, atol=1e-9)


def test_weight_decay_shrinks_the_balance_exponentially():
    rng = np.random.default_rng(5)
    net = gf.Network({"x": 2, "h": 3, "y": 2}, [("x", "h"), ("h", "y")])
    ctx = gf.Context("c", X={"x": rng.normal(size=(4, 2))}, Y={"y": rng.normal(size=(4, 2))})
    w0 = {e: rng.normal(size=net.shape(e)) for e in net.edges}
    lam0 = cf.balance(w0[("x", "h")], w0[("h", "y")])
    for t, w in zip(
        [0.0, 1.0, 3.0], gf.flow(net, w0, [ctx], [0.0, 1.0, 3.0], gamma=0.2), strict=True
    ):
        np.testing.assert_allclose(
            cf.balance(w[("x", "h")], w[("h", "y")]), lam0 * np.exp(-0.4 * t), atol=1e-9
        )


# ---- schedules ------------------------------------------------------------------------


def test_schedule_on_one_layer_chains_the_closed_form_and_records_every_context():
    W0 = np.array([[0.2, -0.4]])
    phases = [
        gf.Phase(5.0, {"first": 1.0}),
        gf.Phase(3.0, {"second": 1.0}),
        gf.Phase(4.0, {"first": 0.5, "second": 0.5}),
    ]
    times = [0.0, 2.0, 5.0, 6.5, 8.0, 12.0]
    run = gf.run_schedule(ONE_LAYER, {("x", "y"): W0}, [FIRST, SECOND], phases, times)
    np.testing.assert_allclose(run.boundaries, [0, 5, 8, 12])
    Syx = {"first": [[1 / 3, 0]], "second": [[0, 1 / 3]], "mix": [[1 / 6, 1 / 6]]}
    W5 = cf.linear_flow(SX, Syx["first"], W0, 5.0)
    W8 = cf.linear_flow(SX, Syx["second"], W5, 3.0)
    want = [
        W0,
        cf.linear_flow(SX, Syx["first"], W0, 2.0),
        W5,
        cf.linear_flow(SX, Syx["second"], W5, 1.5),
        W8,
        cf.linear_flow(SX, Syx["mix"], W8, 4.0),
    ]
    for got, w in zip(run.weights, want, strict=True):
        np.testing.assert_allclose(got[("x", "y")], w, rtol=1e-9, atol=1e-11)
    # L_first = 1/2 E[(x_1 - W x)^2] with E[x x^T] = I/3, also while "first" is off
    first = [0.5 * (((np.array([[1.0, 0.0]]) - w) ** 2).sum() / 3) for w in want]
    np.testing.assert_allclose(run.context_loss["first"], first, rtol=1e-9)
    assert run.loss[3] == pytest.approx(run.context_loss["second"][3])


def test_a_phase_split_in_two_is_the_same_flow():
    net, weights, contexts = random_problem(6)
    p = {"c0": 0.5, "c1": 0.5}
    whole = gf.run_schedule(net, weights, contexts, [gf.Phase(0.5, p)], [0.5])
    split = gf.run_schedule(net, weights, contexts, [gf.Phase(0.2, p), gf.Phase(0.3, p)], [0.5])
    for e in net.edges:
        np.testing.assert_allclose(split.final[e], whole.final[e], rtol=1e-8, atol=1e-10)


def test_schedule_by_gradient_descent_and_whole_steps():
    net, weights, contexts = random_problem(7)
    phases = [gf.Phase(0.05, {"c0": 1.0}), gf.Phase(0.03, {"c2": 1.0})]
    run = gf.run_schedule(net, weights, contexts, phases, [0.02, 0.08], method="gd", lr=0.01)
    w = gf.gd_map(net, weights, contexts, 5, 0.01, probabilities={"c0": 1.0}, record=[2, 5])
    end = gf.gd_map(net, w[1], contexts, 3, 0.01, probabilities={"c2": 1.0}, record=[3])[0]
    for e in net.edges:
        np.testing.assert_allclose(run.weights[0][e], w[0][e], rtol=1e-14)
        np.testing.assert_allclose(run.weights[1][e], end[e], rtol=1e-14)
    with pytest.raises(ValueError, match="not a whole number of steps"):
        gf.run_schedule(net, weights, contexts, phases, [0.08], method="gd", lr=0.007)


DEEP = gf.Network({"x": 2, "h": 2, "y": 1}, [("x", "h"), ("h", "y")])


def test_blocked_schedule_on_one_deep_pathway_follows_the_riccati_closed_form():
    """x -> h -> y on "first" then "second" (y = x1, then y = x2; graphs/context.yaml, pathways=1).

    With a scalar output the two phases have different input bases, so no decoupled
    reduction holds; a zero-balanced start (W2^T W2 = W1 W1^T) stays zero-balanced, and with
    Sigma_x = I/3 the scaled P = QQ^T/3 follows the whitened Riccati closed form, restarted at
    the switch from the first phase's end. The loss on "first" tends to 1/2 E[(x1 - x2)^2] = 1/3.
    """
    a0, T, c = 0.01, 40.0, 1 / 3
    v = np.array([[1.0, 1.0]]) / np.sqrt(2)
    w0 = {
        ("x", "h"): np.sqrt(a0) * np.array([[1.0], [0.0]]) @ v,
        ("h", "y"): np.sqrt(a0) * np.array([[1.0, 0.0]]),
    }
    run = gf.run_schedule(DEEP, w0, [FIRST, SECOND], gf.blocked(["first", "second"], T), [T, 2 * T])
    P = c * cf.qqt(w0[("x", "h")], w0[("h", "y")])
    for w, Syx in zip(run.weights, ([[1 / 3, 0]], [[0, 1 / 3]]), strict=True):
        P = cf.riccati_qqt(P, Syx, 0.0, T)
        np.testing.assert_allclose(
            w[("h", "y")] @ w[("x", "h")], P[2:, :2] / c, rtol=1e-8, atol=1e-10
        )
    W = run.weights[1][("h", "y")] @ run.weights[1][("x", "h")]
    assert run.context_loss["first"][1] == pytest.approx(
        ((1 - W[0, 0]) ** 2 + W[0, 1] ** 2) / 6, rel=1e-9
    )
    assert run.context_loss["first"][0] < 1e-9
    assert abs(run.context_loss["first"][1] - 1 / 3) < 1e-5  # forgotten: W -> [0, 1]


def test_two_gated_pathways_forget_nothing():
    net = gf.Network(
        {"x": 2, "h0": 3, "h1": 3, "y": 1}, [("x", "h0"), ("x", "h1"), ("h0", "y"), ("h1", "y")]
    )
    gates = {"first": {("x", "h1"): 0}, "second": {("x", "h0"): 0}}
    ctxs = [
        gf.Context(
            c.label,
            edge_gates=gates[c.label],
            Sigma_x=c.Sigma_x,
            Sigma_yx=c.Sigma_yx,
            Sigma_y=c.Sigma_y,
        )
        for c in (FIRST, SECOND)
    ]
    rng = np.random.default_rng(8)
    w0 = {e: 0.1 * rng.normal(size=net.shape(e)) for e in net.edges}
    run = gf.run_schedule(net, w0, ctxs, gf.blocked(["first", "second"], 30.0), [30.0, 45.0, 60.0])
    first = run.context_loss["first"]
    assert first[0] < 1e-6
    np.testing.assert_allclose(first[1:], first[0], rtol=1e-9, atol=1e-15)
