"""The gradient-descent map is exact under every lumping (issue 12, item 1).

Reference: plain full-batch gradient descent on the full network's weight matrices,
started from the decoupled weights of Eq. (9), with gradients by torch autograd (float64,
:func:`helpers.full_loss_and_gradient`), independent of the reduction. Tolerance: 1e-12
of the initial loss (and of the largest variable), over the whole run.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import sympy as sp
from helpers import full_loss_and_gradient, load, write

import gdln

RTOL_MAP = 1e-12
LUMPS = ("none", "symmetry", "balanced", "full")

# Two paths of different length through one shared edge (x->h), on together:
# Sigma_x(j, p) != 0, and lump="full" eliminates a variable (Eq. 15).
CROSS = """\
name: cross
nodes:
  - {id: x, size: 3}
  - {id: h, size: 4}
  - {id: g, size: 5}
  - {id: y, size: 2}
edges:
  - {source: x, target: h}
  - {source: h, target: y}
  - {source: h, target: g}
  - {source: g, target: y}
task:
  examples:
    - {inputs: {x: [1, 0, 0]}, targets: {y: [2, 0]}}
    - {inputs: {x: [0, 1, 0]}, targets: {y: [0, 1]}}
    - {inputs: {x: [0, 0, 1]}, targets: {y: [0, 0]}}
"""

# Two inputs of different sizes into one hidden layer, each gated on in its own examples.
MULTI_INPUT = """\
name: multi
nodes:
  - {id: x1, size: 2}
  - {id: x2, size: 3}
  - {id: h, size: 4}
  - {id: y, size: 2}
edges:
  - {source: x1, target: h, gated: true}
  - {source: x2, target: h, gated: true}
  - {source: h, target: y}
task:
  examples:
    - {inputs: {x1: [1, 0], x2: [0, 0, 0]}, targets: {y: [2, 0]}, active: ["x1->h"]}
    - {inputs: {x1: [0, 1], x2: [0, 0, 0]}, targets: {y: [0, 1]}, active: ["x1->h"]}
    - {inputs: {x1: [0, 0], x2: [1, 0, 0]}, targets: {y: [1, 0]}, active: ["x2->h"]}
    - {inputs: {x1: [0, 0], x2: [0, 1, 0]}, targets: {y: [0, 3]}, active: ["x2->h"]}
"""

# name -> (problem factory, init, lr, t_max): each run passes its learning transition
CASES = {
    "routing": (lambda _: load("routing", M=3, K=2, hidden=6), 0.3, 0.05, 15),
    "xor": (lambda _: load("xor", hidden=3), 0.2, 0.1, 12),
    "context": (lambda _: load("context", hidden=4), 0.3, 0.2, 30),
    "race": (lambda _: load("race", M=4, P=4, hidden=4), 0.4, 0.1, 15),
    "crosspath": (lambda _: load("crosspath"), 0.1, 0.1, 20),
    "cross": (lambda tmp: gdln.load(write(tmp, CROSS, "cross.yaml")), 0.2, 0.1, 15),
    "multi_input": (lambda tmp: gdln.load(write(tmp, MULTI_INPUT, "multi.yaml")), 0.2, 0.1, 10),
}


def edge_values(reduction: gdln.Reduction, trajectory: gdln.Trajectory) -> dict:
    """Edge -> ``(T, modes of the edge)`` from a solve, whatever the lumping."""
    out = {}
    for k, system in enumerate(reduction.systems):
        suffix = "" if len(reduction.systems) == 1 else f"@{k}"
        for v in [*system.variables, *system.eliminated]:
            for edge in system.edges[v]:
                _, _, slots = reduction.edge_bases(edge)
                columns = [system.modes.index(a) for a in slots if a in system.modes]
                out[edge] = trajectory.series[f"{v}{suffix}"][:, columns]
    return out


def full_network_gd(reduction: gdln.Reduction, *, lr: float, steps: int, record: np.ndarray):
    """Plain GD on the full weight matrices: losses and projected variables at ``record``."""
    problem = reduction.problem
    weights = reduction.decoupled_weights(seed=0)
    bases = reduction.decoupled_bases(seed=0)
    trained = [e for e in weights if "fixed" not in problem.graph.edges[e]]
    losses, values = [], {e: [] for e in bases}
    for step in range(steps + 1):
        loss, grad = full_loss_and_gradient(problem, weights)
        if step in record:
            losses.append(loss)
            for e, (left, right) in bases.items():
                values[e].append(np.einsum("ik,ij,jk->k", left, weights[e], right))
        for e in trained:
            weights[e] = weights[e] - lr * grad[e]
    return np.array(losses), {e: np.array(v) for e, v in values.items()}


@pytest.mark.parametrize("name", sorted(CASES))
def test_gd_map_is_exact_under_every_lumping(name: str, tmp_path: Path) -> None:
    make, init, lr, t_max = CASES[name]
    problem = make(tmp_path)
    runs = {}
    for lump in LUMPS:
        reduction = gdln.reduce(problem, lump=lump, b0=init)
        runs[lump] = (
            reduction,
            gdln.solve(reduction, t_max=t_max, dynamics="gd-map", lr=lr, points=21),
        )
    reference, free = runs["none"][1], edge_values(*runs["none"])
    scale = reference.loss[0]
    assert reference.loss[-1] < 0.5 * scale  # the run passes a learning transition
    steps = round(t_max / lr)
    full_loss, full_values = full_network_gd(
        runs["none"][0], lr=lr, steps=steps, record=set(np.rint(reference.t / lr).astype(int))
    )
    assert np.abs(full_loss - reference.loss).max() <= RTOL_MAP * scale
    for edge, values in free.items():
        size = np.abs(values).max()
        assert np.abs(full_values[edge] - values).max() <= RTOL_MAP * size, edge
    for lump in LUMPS[1:]:
        reduction, trajectory = runs[lump]
        np.testing.assert_array_equal(trajectory.t, reference.t)
        assert np.abs(trajectory.loss - reference.loss).max() <= RTOL_MAP * scale, lump
        for edge, values in edge_values(reduction, trajectory).items():
            size = np.abs(free[edge]).max()
            assert np.abs(values - free[edge]).max() <= RTOL_MAP * size, (lump, edge)
    for reduction, trajectory in runs.values():  # which system the map iterated
        eliminates = any(s.eliminated for s in reduction.systems)
        assert trajectory.meta["system"] == ("tied" if eliminates else "reduced")


def test_balanced_lumping_only_ties() -> None:
    # balanced ties edges (exact for GD); only full eliminates through Eq. (15)
    for name, params in [("routing", {"M": 3, "K": 2}), ("race", {"M": 4, "P": 4})]:
        problem = load(name, **params)
        assert all(not s.eliminated for s in gdln.reduce(problem, lump="balanced").systems)
        assert any(s.eliminated for s in gdln.reduce(problem, lump="full").systems)


def test_full_lumping_records_its_eliminated_variable_under_the_map() -> None:
    # the eliminated variable is iterated by the map, not taken from the conserved Q:
    # Q = M B1^2 - B2^2 drifts at O(lr^2) per step under GD, while the flow keeps it
    reduction = gdln.reduce(load("routing", M=3, K=2), lump="full", b0=0.3)
    (system,) = reduction.systems
    assert set(system.eliminated) and system.conserved
    q = system.conserved[0]
    for lr, drifts in [(None, False), (0.05, True)]:
        dynamics = "flow" if lr is None else "gd-map"
        trajectory = gdln.solve(reduction, t_max=15, dynamics=dynamics, lr=lr, points=16)
        values = {v: trajectory.series[str(v)][:, 0] for v in system.edges}
        fn = sp.lambdify(list(values), q, "numpy")
        drift = np.abs(fn(*values.values()) - fn(*[v[0] for v in values.values()])).max()
        assert (drift > 1e-6) == drifts, (lr, drift)
