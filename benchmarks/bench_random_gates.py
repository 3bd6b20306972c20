"""The engine's moment route on graphs/resnet_sd.yaml vs the hand-written chain form vs 2^L masks.

For the stochastic-depth ResNet read from its graph file (Stable scaling, linear survival
mode with p_L = 1/2, width 8, so 8 modes) at L = 10, 20, 1000, this prints side by side:

* engine, build: ``gdln.expected_dynamics(problem)``: finding the modes from the data and
  the fixed-edge classes, and recording the moment tape (no path is listed);
* engine, loss + gradient: one evaluation of the expected loss and its exact gradient in
  every b_{e, alpha} (a triangular solve and its transpose);
* chain form: ``expected_chain`` (prefix/suffix products; written by hand for this chain);
* 2^L masks: ``brute_force_chain`` (L <= 20 only);

with the largest relative differences of the engine's loss and gradient from the other two.
Times are process CPU times (a shared machine's load inflates them less than wall time),
given as the median and the range over repeats, with the load average before each table.

    python benchmarks/bench_random_gates.py
    python benchmarks/bench_random_gates.py --quick    # L = 10 and 1000, no 2^20 masks
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import gdln
from gdln.sd import brute_force_chain, expected_chain

GRAPH = Path(__file__).resolve().parent.parent / "graphs" / "resnet_sd.yaml"


def cpu_times(fn: Callable[[], Any], repeat: int) -> np.ndarray:
    """Process CPU time of each of ``repeat`` calls of ``fn``."""
    times = []
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return np.array(times)


def spread(times: np.ndarray, unit: float = 1e-3, name: str = "ms") -> str:
    """``median [min-max] unit`` of ``times`` (seconds), or ``value unit (1 run)``."""
    lo, mid, hi = float(np.min(times)), float(np.median(times)), float(np.max(times))
    if len(times) == 1:
        return f"{mid / unit:.3g} {name} (1 run)"
    return f"{mid / unit:.3g} [{lo / unit:.3g}-{hi / unit:.3g}] {name}"


def relative(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    depths = (10, 1000) if args.quick else (10, 20, 1000)
    print(
        f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, numpy "
        f"{np.__version__}, load average {os.getloadavg()[0]:.1f}; CPU times, median [range]: "
        "build 3 runs, loss+grad and chain form 7, masks 3 (L = 20: 1)"
    )
    print(
        "| L | paths | tape terms | engine build | engine loss+grad | chain form | 2^L masks "
        "| engine vs chain (loss, grad) | engine vs masks (loss, grad) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    n = 8
    s = np.array([(n - a) / n**2 for a in range(n)])  # whitened data: Sigma_yx = A / n
    d = 1.0 / n
    for L in depths:
        params = {"L": str(L), "scaling": "stable", "survival": "linear", "p_L": "1/2"}
        problem = gdln.load(GRAPH, params=params)
        p = np.array([float(x) for x in problem.task.random_gates.values()])
        build = cpu_times(lambda problem=problem: gdln.expected_dynamics(problem), 3)
        dynamics = gdln.expected_dynamics(problem)
        b = np.random.default_rng(L).normal(scale=1.0, size=dynamics.alive.shape)

        def engine(dynamics: Any = dynamics, b: np.ndarray = b) -> tuple[float, np.ndarray]:
            return dynamics._loss_and_gradient(b)

        t_engine = cpu_times(engine, 7)
        loss, grad = engine()
        loss -= dynamics.constant
        t_chain = cpu_times(lambda b=b, p=p: expected_chain(b, p, s=s, d=d, scaling="stable"), 7)
        chain = expected_chain(b, p, s=s, d=d, scaling="stable")
        vs_chain = f"{relative(np.array(loss), np.array(chain.loss)):.1e}, {relative(grad, chain.grad):.1e}"
        if (10 if args.quick else 20) >= L:
            t_brute = cpu_times(
                lambda b=b, p=p: brute_force_chain(b, p, s=s, d=d, scaling="stable"),
                1 if L > 12 else 3,
            )
            brute_loss, brute_grad = brute_force_chain(b, p, s=s, d=d, scaling="stable")
            masks = spread(t_brute)
            vs_masks = (
                f"{relative(np.array(loss), np.array(brute_loss)):.1e}, "
                f"{relative(grad, brute_grad):.1e}"
            )
        else:
            masks, vs_masks = "not enumerable", "-"
        print(
            f"| {L} | 2^{L} | {dynamics.tape_size} | {spread(build)} | "
            f"{spread(t_engine)} | {spread(t_chain)} | {masks} | {vs_chain} | {vs_masks} |"
        )
    problem = gdln.load(GRAPH, params={"L": "1000"})
    runs = []

    def solve() -> None:
        runs.append(gdln.solve(gdln.expected_dynamics(problem), t_max=100))

    t_solve = cpu_times(solve, 3)
    trajectory = runs[0]
    print(
        f"\n`gdln.solve` of the expected gradient flow, L = 1000 (file defaults, t = 0..100 tau, "
        f"201 points; tape built each time), load average {os.getloadavg()[0]:.1f}: "
        f"{spread(t_solve, 1.0, 's')} CPU over 3 runs; loss "
        f"{trajectory.loss[0]:.4f} -> {trajectory.loss[-1]:.4f}"
    )


if __name__ == "__main__":
    main()
