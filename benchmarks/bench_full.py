"""Full-matrix flow (``gdln.solve`` from given weights) against gradient descent, side by side (issue 23).

The network: nine parallel two-layer modules on compositional data (the lab network of
issue 23), 2**BITS items; inputs: BITS systematic +-1 bits and 2 * one-hot item identity;
outputs: the same slices; one module (hidden width HIDDEN) per pair (input slice, output
slice) of {systematic, identity, both}, all gates on. With 64 items and hidden 60 every
module is narrower than the 64 modes that reach it, so gdln refuses the reduction and
points here: the full-matrix flow (Eqs. 3-4 of Saxe et al. 2022) is the route.

Timed in one run, from the same initial weights (every singular value INIT, seed 0):

1. ``gdln.solve(problem, weights=...)`` to T_MAX (DOP853, rtol 1e-10), 201 recorded times;
2. the same with ``dynamics="gd-map"`` and ``lr`` (the same network's gradient descent, numpy);
3. ``gdln.simulate``: T_MAX / LR steps of gradient descent (torch, float64, 1 thread,
   201 records), the baseline;
4. one evaluation of the flow (Eqs. 3-4); with ``--before REF``, also one evaluation of
   ``gdln.full_flow`` at git revision REF (in a fresh process), which converted the exact
   statistics to floats at every call.

Printed: seconds (median [min-max] of repeats), the ratio solve / simulate, how far
the three trajectories are apart (in units of L(0)), and the load average.

Run: ``PYTHONPATH=. python benchmarks/bench_full.py [--quick] [--bits 6 --hidden 60]
[--before REF]``.
"""

from __future__ import annotations

import argparse
import itertools
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import gdln
from gdln.simulation import simulate
from gdln.solution import _full

T_MAX, N_POINTS, INIT, LR = 200.0, 201, 0.01, 0.05


def modules_file(folder: Path, bits: int, hidden: int) -> Path:
    """The nine-module graph file for ``2**bits`` items and hidden width ``hidden``."""
    n = 2**bits
    sys_rows = [[1 if (i >> b) & 1 else -1 for b in range(bits)] for i in range(n)]
    id_rows = [[2 if j == i else 0 for j in range(n)] for i in range(n)]
    slices = {"sys": ["sys"], "id": ["id"], "both": ["sys", "id"]}
    nodes = [f"{{id: x_sys, size: {bits}}}", f"{{id: x_id, size: {n}}}"]
    nodes += [f"{{id: y_sys, size: {bits}}}", f"{{id: y_id, size: {n}}}"]
    edges = []
    for a, b in itertools.product(slices, repeat=2):
        nodes.append(f"{{id: h_{a}_{b}, size: {hidden}}}")
        edges += [f"{{source: x_{s}, target: h_{a}_{b}}}" for s in slices[a]]
        edges += [f"{{source: h_{a}_{b}, target: y_{s}}}" for s in slices[b]]
    path = folder / "modules.yaml"
    path.write_text(
        f"nodes: [{', '.join(nodes)}]\n"
        f"edges: [{', '.join(edges)}]\n"
        f"datasets: {{data: {{examples: {{sys: {sys_rows}, id: {id_rows}}}}}}}\n"
        "task: {contexts: [{probability: 1, dataset: data, inputs: {x_sys: sys, x_id: id}, "
        "targets: {y_sys: sys, y_id: id}}]}\n"
    )
    return path


def timings(fn: Callable[[], object], repeats: int) -> tuple[tuple[float, float, float], object]:
    """Median, least and most seconds of ``repeats`` calls, and the last result."""
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return (float(np.median(times)), min(times), max(times)), result


def shown(value: tuple[float, float, float]) -> str:
    return f"{value[0]:.4g} [{value[1]:.3g}-{value[2]:.3g}]"


BEFORE = """
import sys, time, numpy as np, gdln
from gdln.paths import path_statistics
problem = gdln.load(sys.argv[1])
data = np.load(sys.argv[2])
weights = {tuple(k.split("->")): data[k] for k in data.files}
stats = path_statistics(problem.graph, problem.require_task())
gdln.full_flow(problem, weights, stats=stats)
times = []
for _ in range(int(sys.argv[3])):
    start = time.perf_counter()
    gdln.full_flow(problem, weights, stats=stats)
    times.append(time.perf_counter() - start)
print(np.median(times), min(times), max(times))
"""


def before_flow(ref: str, graph: Path, weights: dict, repeats: int) -> tuple[float, float, float]:
    """One evaluation of ``gdln.full_flow`` at git revision ``ref``, in a fresh process."""
    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "before"
        saved = Path(tmp) / "weights.npz"
        np.savez(saved, **{f"{u}->{v}": w for (u, v), w in weights.items()})
        subprocess.run(["git", "-C", str(root), "worktree", "add", "-q", "--detach", str(tree), ref],
                       check=True)  # fmt: skip
        try:
            command = [sys.executable, "-c", BEFORE, str(graph), str(saved), str(repeats)]
            out = subprocess.run(command, env={**os.environ, "PYTHONPATH": str(tree)}, cwd=tree,
                                 check=True, capture_output=True, text=True)  # fmt: skip
        finally:
            subprocess.run(["git", "-C", str(root), "worktree", "remove", "--force", str(tree)],
                           check=False)  # fmt: skip
    median, least, most = (float(x) for x in out.stdout.split())
    return median, least, most


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--bits", type=int, default=6, help="2**bits items (default 6: 64)")
    parser.add_argument("--hidden", type=int, default=60, help="module width (default 60)")
    parser.add_argument("--before", metavar="REF", help="also time full_flow at git REF")
    args = parser.parse_args()
    repeats = 3 if args.quick else 7
    print(f"# load average at the start: {os.getloadavg()[0]:.1f} (1 min)")
    with tempfile.TemporaryDirectory() as tmp:
        graph = modules_file(Path(tmp), args.bits, args.hidden)
        problem = gdln.load(graph)
        weights = _full.initial_full_weights(problem, problem.settings.given(b0=INIT), seed=0)
        edges = list(weights)
        n_weights = sum(w.size for w in weights.values())
        print(f"# {2**args.bits} items, hidden {args.hidden}: {len(edges)} edges, "
              f"{n_weights} weights; t = {T_MAX:g} tau, {N_POINTS} points, init {INIT}")  # fmt: skip
        rows = []
        ode_time, ode = timings(
            lambda: gdln.solve(problem, weights=weights, t_max=T_MAX, points=N_POINTS), repeats
        )
        rows.append(("matrix route, DOP853 (rtol 1e-10)", ode_time))
        map_time, gd_map = timings(
            lambda: gdln.solve(
                problem, weights=weights, t_max=T_MAX, points=N_POINTS, dynamics="gd-map", lr=LR
            ),
            repeats,
        )
        steps = round(T_MAX / LR)
        rows.append((f"matrix route, lr {LR} ({steps} steps, numpy)", map_time))
        settings = dict(dtype="float64", threads=1, record_every=steps // 200)
        examples = problem.examples()

        def run_simulation() -> gdln.Trajectory:
            return simulate(problem.graph, examples, steps=steps, lr=LR, init_scheme="given",
                            weights=weights, **settings)  # fmt: skip

        simulate(problem.graph, examples, steps=2, lr=LR, init_scheme="given", weights=weights,
                 **settings)  # fmt: skip  # warm-up
        sim_time, sim = timings(run_simulation, repeats)
        rows.append((f"simulate, lr {LR} ({steps} steps, torch, 1 thread)", sim_time))
        plan = _full.FlowPlan.of(problem, edges)
        values = [weights[e] for e in edges]
        with _full._blas_threads(plan, values):
            flow_time, _ = timings(lambda: plan.flow(values), 20 * repeats)
        rows.append(("one evaluation of Eqs. 3-4 (now)", flow_time))
        if args.before:
            rows.append((f"one evaluation of Eqs. 3-4 at {args.before}",
                         before_flow(args.before, graph, weights, repeats)))  # fmt: skip
    width = max(len(label) for label, _ in rows) + 2
    print(f"{'what':<{width}} seconds (median [min-max] of repeats)")
    for label, seconds in rows:
        print(f"{label:<{width}} {shown(seconds)}")
    print(f"matrix route (ODE) / simulate: {ode_time[0] / sim_time[0]:.2f}x")
    print(f"matrix route (lr) / simulate: {map_time[0] / sim_time[0]:.2f}x")
    start = float(ode.loss[0])  # type: ignore[attr-defined]
    sim_loss = np.asarray(sim.loss).reshape(len(sim.t), -1)[:, 0]  # type: ignore[attr-defined]
    common = np.isin(np.round(sim.t, 9), np.round(gd_map.t, 9))  # type: ignore[attr-defined]
    gap_map = np.abs(gd_map.loss - sim_loss[common]).max() / start  # type: ignore[attr-defined]
    gap_ode = np.abs(ode.loss - gd_map.loss).max() / start  # type: ignore[attr-defined]
    print(f"loss at t = {T_MAX:g}: {float(ode.loss[-1]):.3g} (L(0) = {start:.4g})")  # type: ignore[attr-defined]
    print(f"max |matrix route (lr) - simulate| / L(0): {gap_map:.2g} (the same map)")
    print(f"max |ODE - GD at lr {LR}| / L(0): {gap_ode:.2g} (discretisation of the flow)")
    print(f"# load average at the end: {os.getloadavg()[0]:.1f} (1 min)")


if __name__ == "__main__":
    main()
