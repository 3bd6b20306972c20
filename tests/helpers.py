"""Shared tolerances and independent reference computations for the tests.

Tolerances: float64 exact reductions are compared at RTOL_EXACT; numeric ODE solutions
at RTOL_ODE (solve_ivp with rtol 1e-10 accumulates a little over long horizons).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pytest
import sympy as sp
import torch

import gdln

ROOT = Path(__file__).resolve().parent.parent
GRAPHS = ROOT / "graphs"
RTOL_EXACT = 1e-10
RTOL_ODE = 1e-6

# Sigma_x of the input does not commute with Sigma_yx^T Sigma_yx: no common bases exist.
NOT_DIAGONALIZABLE = (
    "nodes: [{id: x, size: 2}, {id: h, size: 2}, {id: y, size: 1}]\n"
    "edges: [{source: x, target: h}, {source: h, target: y}]\n"
    "task: {examples: [{inputs: {x: [1, 0]}, targets: {y: [1]}}, {inputs: {x: [1, 1]}, targets: {y: [0]}}]}\n"
)


def load(name: str, **params: object) -> gdln.Problem:
    return gdln.load(GRAPHS / f"{name}.yaml", params={k: str(v) for k, v in params.items()})


# --------------------------------------------------------------------------------------
# Problems with random gates and co-active paths (the moment route and stochastic depth)

# Co-active paths into one output, a random node gate (with deterministic parts 1, 2, 0)
# and a random edge gate with a symbolic survival probability.
COACTIVE = """\
symbols: [q]
params: {p_xy: q}
nodes:
  - {id: x, size: 3}
  - {id: a, size: 4, gated: true}
  - {id: b, size: 5, gated: true}
  - {id: y, size: 2}
edges:
  - {source: x, target: a}
  - {source: x, target: b}
  - {source: a, target: y}
  - {source: b, target: y}
  - {source: x, target: y, gated: true}
task:
  random_gates:
    - {item: a, p: 1/3}
    - {item: "x->y", p: p_xy}
  examples:
    - {inputs: {x: [1, 1, 0]},  targets: {y: [2, 0]}, gates: {a: 1, b: 1}}
    - {inputs: {x: [1, -1, 0]}, targets: {y: [0, 1]}, gates: {a: 2, b: 0, "x->y": 0}}
    - {inputs: {x: [0, 0, 1]},  targets: {y: [0, 0]}, gates: {a: 0, b: 1}}
"""


# Two inputs on together with correlated data: second moments E[h^i h^i'] with i != i'.
TWO_INPUTS = """\
nodes:
  - {id: x1, size: 2}
  - {id: x2, size: 2}
  - {id: h, size: 3, gated: true}
  - {id: y, size: 2}
edges:
  - {source: x1, target: h}
  - {source: x2, target: h}
  - {source: h, target: y}
  - {source: x2, target: y, gated: true}
datasets:
  data: {examples: {a: [[1, 0], [0, 1]], b: [[2, 0], [0, -1]], t: [[1, 0], [0, 3]]}}
task:
  random_gates:
    - {item: h, p: 1/2}
    - {item: "x2->y", p: 1/3}
  contexts:
    - {probability: 2/3, dataset: data, inputs: {x1: a, x2: b}, targets: {y: t}}
    - {probability: 1/3, dataset: data, inputs: {x2: b}, targets: {y: t}, gates: {h: 0}}
"""


def write(tmp_path: Path, text: str, name: str = "g.yaml") -> Path:
    """Write a graph file into ``tmp_path``."""
    path = tmp_path / name
    path.write_text(text)
    return path


def coactive(tmp_path: Path, p_xy: str = "q") -> gdln.Problem:
    """:data:`COACTIVE` with the survival probability of x->y set to ``p_xy``."""
    return gdln.load(write(tmp_path, COACTIVE), params={"p_xy": p_xy})


def resnet(L: int, **params: object) -> gdln.Problem:
    """The residual chain of ``graphs/resnet_sd.yaml`` with ``L`` blocks."""
    return load("resnet_sd", L=L, **params)


def per_mode(system: gdln.ReducedSystem, expr: sp.Expr, mode: int) -> sp.Expr:
    """An expression of a system with its data symbols at one of its modes."""
    index = system.modes.index(mode)
    return expr.subs({s: v[index] for s, v in system.symbols.items()})


def full_loss_and_gradient(
    problem: gdln.Problem, weights: dict, examples: gdln.ExampleSet | None = None
) -> tuple[float, dict]:
    """Eq. (1) on the raw examples and its gradient by torch autograd (float64).

    Written from the definition h_v = g_v sum_q g_q W_q h_s(q), independently of the
    reduction's formulas. ``examples`` replaces the problem's own (e.g. one mask of its
    random gates).
    """
    graph = problem.graph
    ex = problem.examples() if examples is None else examples
    W = {e: torch.tensor(w, dtype=torch.float64, requires_grad=True) for e, w in weights.items()}
    h = {}
    for v in nx.topological_sort(graph):
        if graph.in_degree(v) == 0:
            h[v] = torch.tensor(ex.inputs[v], dtype=torch.float64)
            continue
        total = 0
        for u in graph.predecessors(v):
            g = (
                torch.tensor(ex.gates[(u, v)], dtype=torch.float64)[:, None]
                if (u, v) in ex.gates
                else 1.0
            )
            total = total + g * (h[u] @ W[(u, v)].T)
        gv = torch.tensor(ex.gates[v], dtype=torch.float64)[:, None] if v in ex.gates else 1.0
        h[v] = gv * total
    w = torch.tensor(ex.weights, dtype=torch.float64)
    loss = 0
    for v in graph.nodes:
        if graph.out_degree(v) == 0:
            err = torch.tensor(ex.targets[v], dtype=torch.float64) - h[v]
            loss = loss + 0.5 * (w * (err**2).sum(1)).sum()
    loss.backward()
    return float(loss.detach()), {e: t.grad.numpy() for e, t in W.items()}


def rhs_values(system: gdln.ReducedSystem, values: dict) -> dict:
    """Evaluate every right-hand side of a system per mode, at given variable values."""
    data = list(system.symbols)
    args = list(system.variables) + data + list(system.constants)
    out = {}
    for v in system.variables:
        fn = sp.lambdify(args, system.rhs[v], "numpy")
        vals = [np.full(len(system.modes), float(values[x])) for x in system.variables]
        vals += [np.array([float(z) for z in system.symbols[s]]) for s in data]
        vals += [float(system.constants[c]) for c in system.constants]
        out[v] = np.broadcast_to(np.asarray(fn(*vals), dtype=float), (len(system.modes),))
    return out


def full_context_losses(problem: gdln.Problem, weights: dict) -> np.ndarray:
    """Eq. (1) within each context, on the raw examples of the full network (numpy).

    The forward pass h_v = g_v sum_q g_q W_q h_s(q) is written out here, independently of
    the reduction; returns one loss per context of the task.
    """
    graph = problem.graph
    ex = problem.examples()
    h = {}
    for v in nx.topological_sort(graph):
        if graph.in_degree(v) == 0:
            h[v] = ex.inputs[v]
            continue
        total = 0.0
        for u in graph.predecessors(v):
            g = ex.gates[(u, v)][:, None] if (u, v) in ex.gates else 1.0
            total = total + g * (h[u] @ np.asarray(weights[(u, v)]).T)
        h[v] = (ex.gates[v][:, None] if v in ex.gates else 1.0) * total
    per_example = sum(
        0.5 * ((ex.targets[v] - h[v]) ** 2).sum(1) for v in graph.nodes if graph.out_degree(v) == 0
    )
    n = len(problem.task.contexts)
    mass = np.bincount(ex.context, weights=ex.weights, minlength=n)
    return np.bincount(ex.context, weights=ex.weights * per_example, minlength=n) / mass


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run ``gdln ARGS`` in this process; return the exit status, stdout and stderr."""
    from gdln.cli import main

    try:
        main(args)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def autograd_rows(net: Any, x: torch.Tensor, tensors: list[torch.Tensor]) -> np.ndarray:
    """Per-example gradients by plain torch.autograd, one backward pass per example."""
    rows: list[torch.Tensor] = []
    for t in tensors:
        t.requires_grad_(True)
    for s in range(x.shape[0]):
        out = net(x)[s, 0] if net.mode == "frg" else net(x[s : s + 1])[0, 0]
        grads = torch.autograd.grad(out, tensors, allow_unused=True)
        rows.append(
            torch.cat(
                [
                    (g if g is not None else torch.zeros_like(t)).reshape(-1)
                    for g, t in zip(grads, tensors, strict=True)
                ]
            )
        )
    for t in tensors:
        t.requires_grad_(False)
    return torch.stack(rows).numpy()
