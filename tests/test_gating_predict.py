"""Predicting the gating (issue 37, item 3): ``gdln.predict_gating`` and the agreement.

The candidate network's flow is checked against ``tests/reference/gated_flow.py`` (the
full-matrix GDLN flow, no gdln); the ReLU run's shares by class against the reference's
``unit_contributions`` and ``context_sets``; Make Haste Slowly's numbers against FACTS.md
(their race: the 2-of-3 pathways reach about 2.1; the ReLU network's half loss at epochs
841, 835, 839 for seeds 0-2 in their index).
"""

from __future__ import annotations

import numpy as np
import pytest
from reference import gated_flow as gf
from reference import haste
from reference import relu_net as rn

import gdln
from gdln.gating import candidate_subsets, gating_agreement

X = np.array([[1.0, 1.0], [1.0, -1.0], [-1.0, 1.0], [-1.0, -1.0]])
Y = np.array([[1.0], [-1.0], [-1.0], [1.0]])


def xor_relu(tmp_path, hidden: int = 128) -> gdln.Problem:
    rows = "\n".join(
        f"    - {{inputs: {{x: {a.tolist()}}}, targets: {{y: {b.tolist()}}}}}"
        for a, b in zip(X, Y, strict=True)
    )
    text = (
        f"nodes: [{{id: x, size: 2}}, {{id: h, size: {hidden}, activation: relu}}, {{id: y, size: 1}}]\n"
        "edges: [{source: x, target: h}, {source: h, target: y}]\n"
        f"task:\n  examples:\n{rows}\n"
    )
    path = tmp_path / "xor_relu.yaml"
    path.write_text(text)
    return gdln.load(path)


def haste_relu(tmp_path) -> gdln.Problem:
    """Their 3-context task (reference.haste) as a ReLU graph file: 11 -> 700 -> 60."""
    x, y, context = haste.task()
    lines = [
        "nodes: [{id: x, size: 11}, {id: h, size: 700, activation: relu}, {id: y, size: 60}]",
        "edges: [{source: x, target: h}, {source: h, target: y}]",
        "datasets:",
    ]
    for c in range(3):
        xs = [list(map(float, r)) for r in x[context == c]]
        ys = [list(map(float, r)) for r in y[context == c]]
        lines.append(f"  c{c}: {{examples: {{x: {xs}, y: {ys}}}}}")
    lines += ["task:", "  contexts:"]
    lines += [
        f"    - {{probability: 1/3, dataset: c{c}, inputs: {{x: x}}, targets: {{y: y}}, label: context{c + 1}}}"
        for c in range(3)
    ]
    path = tmp_path / "haste.yaml"
    path.write_text("\n".join(lines) + "\n")
    return gdln.load(path)


def test_candidates_are_every_subset_the_most_and_least_selective_first() -> None:
    found, note = candidate_subsets(4)
    assert len(found) == len(set(found)) == 15 and note == ""
    assert [len(s) for s in found] == [4, 3, 3, 3, 3, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2]
    capped, note = candidate_subsets(7)
    assert len(capped) == 63 and "127 candidate gatings" in note
    assert [len(s) for s in capped[:15]] == [7] + [6] * 7 + [1] * 7


def test_the_candidate_network_flows_as_the_reference_gdln(tmp_path) -> None:
    """XoR's four one-example contexts: each pathway's strength against gated_flow.flow."""
    problem = gdln.load("xor")
    prediction = gdln.predict_gating(
        problem, subsets=[[0, 1], [0, 2], [1, 2], [3]], t_max=20, points=5
    )
    net = gf.Network(
        {"x": 2, **{f"p{k}": 1 for k in range(4)}, "y": 1},
        [("x", f"p{k}") for k in range(4)] + [(f"p{k}", "y") for k in range(4)],
    )
    on = [{0, 1}, {0, 2}, {1, 2}, {3}]
    contexts = [
        gf.Context(
            f"c{n}",
            1 / 4,
            node_gates={f"p{k}": float(n in s) for k, s in enumerate(on)},
            X={"x": X[n : n + 1]},
            Y={"y": Y[n : n + 1]},
        )
        for n in range(4)
    ]
    w0 = {e: prediction.trajectory.weights(e)[0] for e in net.edges}
    states = gf.flow(net, w0, contexts, prediction.t)
    for k in range(4):
        want = [np.linalg.norm(w[(f"p{k}", "y")] @ w[("x", f"p{k}")]) for w in states]
        np.testing.assert_allclose(prediction.strengths[:, k], want, rtol=1e-6)
    assert prediction.contexts == tuple(c.label for c in problem.require_task().contexts)


def test_xor_prediction_and_the_relu_runs_agreement(tmp_path) -> None:
    """XoR as four one-example contexts: the winners are on for 2 of 4 examples, never for
    both x and -x (which a linear pathway cannot fit with equal targets); the ReLU run's
    shares by class are the reference's."""
    problem = xor_relu(tmp_path)
    prediction = gdln.predict_gating(problem, t_max=80, b0=1e-3)
    assert prediction.selectivity().startswith("on in 2 of 4 contexts")
    for k in prediction.winners:
        assert len(prediction.subsets[k]) == 2
        assert prediction.subsets[k] not in ({0, 3}, {1, 2})
    top = prediction.ranking()[0]
    assert prediction.final[top] == pytest.approx(max(prediction.final))
    w = np.random.default_rng(0).normal(0.0, 2e-4, (128, 3))
    run = gdln.simulate(
        problem,
        weights={("x", "h"): w[:, :2], ("h", "y"): w[:, 2:].T},
        steps=200,
        lr=0.4,
        seeds=1,
        record_every=50,
        record_patterns=True,
    )
    found = gating_agreement(prediction, run)
    assert found.steps == (0, 50, 100, 150, 200)
    row = 3
    W = [run.weights(("x", "h"))[row, 0], run.weights(("h", "y"))[row, 0]]
    P = rn.patterns(W, None, X)[0]
    size = rn.unit_contributions(W[1], np.maximum(X @ W[0].T, 0))
    sets = rn.context_sets(P, np.arange(4))
    for k, s in enumerate(prediction.subsets):
        want = sum(size[u] for u in range(128) if sets[u] == s) / size.sum()
        assert found.shares[row, k] == pytest.approx(want, abs=1e-12)
    assert found.agreement[row] == pytest.approx(found.shares[row, list(prediction.winners)].sum())
    assert found.selectivity[row] == pytest.approx(1.0)  # every unit is on for 2 of 4
    np.testing.assert_allclose(found.shares.sum(axis=1), 1.0)


def test_prediction_errors(tmp_path) -> None:
    problem = gdln.load("xor")
    with pytest.raises(gdln.GdlnError, match="subsets: 'nowhere' is no context"):
        gdln.predict_gating(problem, subsets=[["nowhere"]])
    with pytest.raises(gdln.GdlnError, match="an empty gating"):
        gdln.predict_gating(problem, subsets=[[]])
    one = tmp_path / "one.yaml"
    one.write_text(
        "nodes: [{id: x, size: 1}, {id: y, size: 1}]\nedges: [{source: x, target: y}]\n"
        "task: {examples: [{inputs: {x: [1]}, targets: {y: [1]}}]}\n"
    )
    with pytest.raises(gdln.GdlnError, match="nothing to gate"):
        gdln.predict_gating(gdln.load(one))
    prediction = gdln.predict_gating(problem, subsets=[[0], [1]], t_max=1, points=3)
    run = gdln.simulate(
        xor_relu(tmp_path, 4),
        steps=2,
        seeds=1,
        record_patterns=True,
    )
    with pytest.raises(gdln.GdlnError, match="are not the prediction's"):
        gating_agreement(prediction, run)


@pytest.mark.slow
def test_make_haste_slowly_prediction_ranks_the_two_of_three_pathways_first(tmp_path) -> None:
    """Their race: 2-of-3 pathways at about 2.1, the one-context ones far below (FACTS.md)."""
    prediction = gdln.predict_gating(haste_relu(tmp_path), t_max=8001 * 24 * haste.LR, b0=1e-3)
    ranked = prediction.ranking()
    sizes = [len(prediction.subsets[k]) for k in ranked]
    assert sizes == [3, 2, 2, 2, 1, 1, 1]
    two = [prediction.final[k] for k in ranked[1:4]]
    one = [prediction.final[k] for k in ranked[4:]]
    assert min(two) > 1.9 and max(two) < 2.2
    assert max(one) < 0.5 * min(two)
    assert prediction.selectivity().startswith("on in 2 of 3 contexts")


@pytest.mark.slow
def test_make_haste_slowly_relu_half_loss_epochs(tmp_path) -> None:
    """gdln simulate on their data and init: half loss at their epochs 841, 835, 839."""
    problem = haste_relu(tmp_path)
    inits = [haste.relu_init(s) for s in range(3)]
    weights = {
        ("x", "h"): np.stack([w[0] for w in inits]),
        ("h", "y"): np.stack([w[1] for w in inits]),
    }
    every = dict(record_every=1)
    run = gdln.simulate(problem, weights=weights, steps=900, lr=24 * haste.LR, seeds=3, **every)
    loss = run.loss  # the mean of Eq. (1): their sum's dynamics at lr 24 x 0.001
    epochs = [haste.half_loss_epoch(loss[1:, s], loss[0, s]) for s in range(3)]
    assert epochs == [841, 835, 839]
