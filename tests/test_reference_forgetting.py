"""The forgetting reference: its recorded cases, the Riccati chain against the full-matrix
schedule, and the fully-trained limit."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from reference import closed_forms as cf
from reference import forgetting as fg
from reference import gated_flow as gf

CASES = json.loads(
    (Path(__file__).parent / "reference" / "data" / "forgetting_cases.json").read_text()
)
NET = gf.Network({"x": fg.D_IN, "h": fg.HIDDEN, "y": fg.D_OUT}, [("x", "h"), ("h", "y")])


def case(seed, duration):
    return next(c for c in CASES if c["seed"] == seed and c["duration"] == duration)


def tasks_of(c):
    return [(np.array(X), np.array(Y)) for X, Y in zip(c["X"], c["Y"], strict=True)]


def contexts_of(c):
    return [gf.Context(f"T{m}", X={"x": X}, Y={"y": Y}) for m, (X, Y) in enumerate(tasks_of(c))]


def test_recorded_cases_are_reproduced():
    assert [(c["seed"], c["duration"], c["lr"]) for c in CASES] == fg.CASES
    for c in CASES:
        again = fg.forgetting_case(c["seed"], c["duration"], c["lr"])
        assert again["X"] == c["X"] and again["W1"] == c["W1"]
        for name in ("flow", "gd"):
            np.testing.assert_allclose(again[name]["loss"], c[name]["loss"], rtol=1e-10)
            assert again[name]["F_i(T_j,T_k)"] == pytest.approx(
                c[name]["F_i(T_j,T_k)"], rel=1e-9, abs=1e-12
            )


def test_tasks_are_whitened_and_the_start_is_zero_balanced():
    c = case(0, 5.0)
    for X, _ in tasks_of(c):
        np.testing.assert_allclose(X.T @ X / len(X), np.eye(fg.D_IN), atol=1e-12)
        np.testing.assert_allclose(X.mean(axis=0), 0, atol=1e-12)
    W1, W2 = np.array(c["W1"]), np.array(c["W2"])
    np.testing.assert_allclose(cf.balance(W1, W2), 0, atol=1e-12)


@pytest.mark.parametrize("seed", [0, 2])
def test_riccati_chain_is_the_full_matrix_schedule(seed):
    c = case(seed, 5.0)
    w0 = {("x", "h"): np.array(c["W1"]), ("h", "y"): np.array(c["W2"])}
    T = c["duration"]
    run = gf.run_schedule(
        NET, w0, contexts_of(c), gf.blocked(["T0", "T1", "T2"], T), [T, 2 * T, 3 * T]
    )
    for m, label in enumerate(["T0", "T1", "T2"]):
        np.testing.assert_allclose(run.context_loss[label], c["flow"]["loss"][m], rtol=1e-8)
    F = run.context_loss["T0"][2] - run.context_loss["T0"][1]
    np.testing.assert_allclose(F, c["flow"]["F_i(T_j,T_k)"], rtol=1e-7)


def test_their_gd_update_is_the_gd_map_of_the_schedule():
    c = case(1, 0.4)
    W1, W2 = np.array(c["W1"]), np.array(c["W2"])
    ends = fg.sequential_functions_gd(W1, W2, tasks_of(c), steps=40, lr=0.01)
    w0 = {("x", "h"): W1, ("h", "y"): W2}
    run = gf.run_schedule(
        NET,
        w0,
        contexts_of(c),
        gf.blocked(["T0", "T1", "T2"], 0.4),
        [0.4, 0.8, 1.2],
        method="gd",
        lr=0.01,
    )
    for W, w in zip(ends, run.weights, strict=True):
        np.testing.assert_allclose(w[("h", "y")] @ w[("x", "h")], W, rtol=1e-12, atol=1e-14)


def test_fully_trained_forgetting_depends_on_the_task_maps_only():
    """At convergence W = Sigma_yx of the last task, so F_i = 1/2(|S_k - S_i|^2 - |S_j - S_i|^2)."""
    for seed in (0, 1, 2):
        c = case(seed, 40.0)
        S = [Y.T @ X / len(X) for X, Y in tasks_of(c)]
        want = 0.5 * (np.sum((S[2] - S[0]) ** 2) - np.sum((S[1] - S[0]) ** 2))
        # T = 40 leaves the weakest mode (s ~ 0.1, rate 2s) within ~1e-5 of its target
        assert c["flow"]["F_i(T_j,T_k)"] == pytest.approx(want, rel=1e-4)
        assert c["gd"]["F_i(T_j,T_k)"] == pytest.approx(want, rel=1e-4)
