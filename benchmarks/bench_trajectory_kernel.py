"""The tangent kernel along a trajectory: its cost against examples and width (issue 39).

The routing network of Fig. 4 (``graphs/routing.yaml``, K = 4, 4 items per input domain,
so 16 M examples and 7 M outputs), solved on its symmetry quotient (201 times to t = 40,
b0 = 0.1), then, side by side in one process, per recorded time:

* **bases**: deriving the whole network's reduction for its bases of Eq. (9)
  (:attr:`gdln.Reduction.whole`, once per reduction, sympy);
* **now**: ``gdln.trajectory_kernels`` as ``gdln solve --kernel`` calls it: S(t) over
  the 201 times (after the bases; the quotient's solve not counted), with the
  way it chose (``factored``: Frobenius products from the terms' factors; ``dense``: the
  kernel assembled on the rows that can be nonzero), in the hidden nodes' span of modes;
* **dense**: the same, forced to assemble the kernel of every time;
* **full width**: the kernel of the same weights at their full width (Eq. 9 rebuilt,
  as for the full-matrix route, whose hidden nodes have no mode coordinates);
* **before**: the method this replaced, written out here (Jacobians of every node over
  every example and output, ``(n, O, width)``, and the kernel over all ``n*O`` rows,
  ``einsum("aik,bjk->aibj")``), on 3 times, one call traced for its memory, where
  ``(n*O)^2`` times the width is at most 2e9; it was refused by its limit of 5e7
  numbers for all times together at any size here.

ms/time is the wall time over the times done; MiB the peak of the allocations
(tracemalloc, numpy's included) of the same call made again. Run: ``PYTHONPATH=. python
benchmarks/bench_trajectory_kernel.py [--quick] [M:WIDTH ...]``.
"""

from __future__ import annotations

import argparse
import os
import time
import tracemalloc
from collections.abc import Callable, Hashable, Mapping
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

import gdln
from gdln.balanced._kernel_blocks import BlockKernel
from gdln.balanced._trajectory_kernel import kernels_of_weights

ROUTING = Path(__file__).resolve().parents[1] / "graphs" / "routing.yaml"
BEFORE_WORK = 2_000_000_000
"""The before column runs where (n*O)^2 x width is at most this (M = 7 at width 64 took
27 s per time; width 256 would take minutes)."""


def measured(call: Callable[[], Any], *, once: bool = False) -> tuple[Any, float, float]:
    """``call()``, its wall seconds, and the peak MiB of what a second call allocates
    (traced apart: tracing slows Python code several times); ``once``: one traced call."""
    start = time.perf_counter()
    if not once:
        value = call()
        seconds = time.perf_counter() - start
    tracemalloc.start()
    again = call()
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    if once:
        value, seconds = again, time.perf_counter() - start
    return value, seconds, peak


def before(
    graph: nx.DiGraph, examples: gdln.ExampleSet, weights: Mapping[Any, np.ndarray]
) -> np.ndarray:
    """The kernel over every example and output by the method issue 39 replaced."""
    n = len(examples.weights)
    order = list(nx.topological_sort(graph))
    size = {v: int(graph.nodes[v]["size"]) for v in graph.nodes}
    ones = np.ones(n)

    def gate(item: Hashable) -> np.ndarray:
        return np.asarray(examples.gates.get(item, ones), dtype=float)

    acts: dict[Hashable, np.ndarray] = {}
    for v in order:
        if graph.in_degree(v) == 0:
            value = examples.inputs.get(str(v))
            acts[v] = np.zeros((n, size[v])) if value is None else np.asarray(value, float)
            continue
        u = np.zeros((n, size[v]))
        for s in graph.predecessors(v):
            u += gate((s, v))[:, None] * (acts[s] @ weights[(s, v)].T)
        acts[v] = gate(v)[:, None] * u
    outputs = [(v, size[v]) for v in graph.nodes if graph.out_degree(v) == 0]
    width = sum(k for _, k in outputs)
    jac: dict[Hashable, np.ndarray] = {}
    offset = 0
    for v, k in outputs:
        J = np.zeros((n, width, k))
        J[:, offset : offset + k, :] = gate(v)[:, None, None] * np.eye(k)
        jac[v] = J
        offset += k
    for v in reversed(order):
        if v in jac or graph.out_degree(v) == 0 or graph.in_degree(v) == 0:
            continue
        back = np.zeros((n, width, size[v]))
        for t in graph.successors(v):
            back += gate((v, t))[:, None, None] * (jac[t] @ weights[(v, t)])
        jac[v] = gate(v)[:, None, None] * back
    kernel = np.zeros((n, width, n, width))
    for v in order:
        trained = [s for s in graph.predecessors(v) if "fixed" not in graph.edges[s, v]]
        if not trained:
            continue
        gram = np.zeros((n, n))
        for s in trained:
            h = gate((s, v))[:, None] * acts[s]
            gram += h @ h.T
        kernel += np.einsum("aik,bjk->aibj", jac[v], jac[v]) * gram[:, None, :, None]
    return kernel.reshape(n * width, n * width)


def row(M: int, hidden: int) -> list[str]:
    problem = gdln.load(ROUTING, params={"M": str(M), "K": "4", "hidden": str(hidden)})
    quotient = gdln.solution.dynamics_by_route(problem, problem.settings.given(b0=0.1))
    trajectory = gdln.solve(quotient, t_max=40.0)
    T = len(trajectory.t)
    start = time.perf_counter()
    quotient.whole  # derived once, on first use  # noqa: B018
    bases_s = time.perf_counter() - start
    kernels, seconds, peak = measured(lambda: gdln.trajectory_kernels(quotient, trajectory))
    way = "factored" if kernels.ntk._terms.factored() else "dense"
    rows = len(kernels.ntk.rows)
    cells = [f"{M:3d}", f"{hidden:4d}", f"{len(problem.examples().weights):4d}", f"{7 * M:4d}"]
    cells += [f"{rows:5d}", f"{bases_s:7.2f}", f"{seconds:6.2f}", f"{1e3 * seconds / T:7.1f}"]
    cells += [f"{peak:6.0f}", way]
    original = BlockKernel.factored
    BlockKernel.factored = lambda self: False  # type: ignore[method-assign]
    try:
        _, dense_s, dense_peak = measured(lambda: gdln.trajectory_kernels(quotient, trajectory))
    finally:
        BlockKernel.factored = original  # type: ignore[method-assign]
    cells += [f"{1e3 * dense_s / T:7.1f}", f"{dense_peak:6.0f}"]
    whole = quotient.whole
    again = gdln.solve(whole, t_max=40.0, points=3)
    weights = gdln.balanced.weights_along(whole, again)
    full, full_s, full_peak = measured(
        lambda: kernels_of_weights(problem, again.t, weights, origin="full width")
    )
    cells += [f"{1e3 * full_s / 3:8.1f}", f"{full_peak:6.0f}"]
    side = len(problem.examples().weights) * 7 * M
    if side * side * hidden <= BEFORE_WORK:
        examples = problem.examples()

        def three() -> list[np.ndarray]:
            return [
                before(problem.graph, examples, {e: w[k] for e, w in weights.items()})
                for k in range(3)
            ]

        old, old_s, old_peak = measured(three, once=True)
        assert np.abs(old[-1] - full.ntk[-1]).max() <= 1e-10 * np.abs(old[-1]).max()
        cells += [
            f"{1e3 * old_s / 3:8.0f}",
            f"{old_peak:6.0f}",
            f"{old_s / 3 / (seconds / T):6.0f}",
        ]
    else:
        cells += ["       —", "     —", "     —"]
    return cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two small sizes only")
    parser.add_argument("sizes", nargs="*", help="M:width pairs instead of the default rows")
    args = parser.parse_args()
    chosen = [tuple(int(x) for x in item.split(":")) for item in args.sizes]
    sizes = chosen or (
        [(4, 64), (5, 16)]
        if args.quick
        else [(4, 64), (7, 64), (10, 64), (20, 64), (7, 16), (7, 256)]
    )
    print(f"# {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start")
    print(
        "  M    w    n    O  rows | bases s  now s  ms/time    MiB way      | dense ms    MiB "
        "| full-w ms    MiB | before ms    MiB  x now"
    )
    for M, hidden in sizes:
        cells = row(M, hidden)
        groups = [cells[:5], cells[5:10], cells[10:12], cells[12:14], cells[14:]]
        print(" | ".join(" ".join(group) for group in groups), flush=True)
    print(f"# load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
