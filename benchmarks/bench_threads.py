"""gdln's default thread count against 1 and 2 threads, with and without load (issue 25, item 1).

For each network, ``gdln.simulate`` per training step with ``threads=None`` (gdln
chooses, ``meta["threads"]`` says what), ``threads=1`` and ``threads=2``; first as the
machine is, then with a busy-loop process per core started by this script (the
concurrent load), alternating within each repeat. Per step: the time of the training
loop of a call of k steps (its set-up apart) over k + 1 evaluations, median [min-max]
over repeats.

    python benchmarks/bench_threads.py [--repeat 5] [--quick]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_compare import _busy  # noqa: E402
from bench_step import LOOP  # noqa: E402  (times simulate's training loop)

import gdln  # noqa: E402
from gdln import simulate  # noqa: E402

NETWORKS = {  # name -> (params, dtype, seeds, k)
    "Fig. 4e (M=7 K=4 hidden 64), 1 seed": ({"M": 7, "K": 4, "hidden": 64}, "float64", 1, 400),
    "Fig. 4e, 10 seeds (as in compare)": ({"M": 7, "K": 4, "hidden": 64}, "float64", 10, 200),
    "M=100 K=40 hidden 64, 1 seed": ({"M": 100, "K": 40, "hidden": 64}, "float32", 1, 100),
    "M=100 K=4 hidden 256, 1 seed": ({"M": 100, "K": 4, "hidden": 256}, "float32", 1, 100),
}
CHOICES = {"default": None, "1 thread": 1, "2 threads": 2}


def _call(problem, examples, steps: int, dtype: str, seeds: int, threads: int | None):  # type: ignore[no-untyped-def]
    """Seconds per evaluation of the training loop, and the threads it ran on."""
    settings = dict(dtype=dtype, device="cpu", threads=threads, record_every=10**6)
    run = simulate(problem.graph, examples, steps=steps, lr=0.02, seeds=seeds, **settings)
    return LOOP[-1] / (steps + 1), run.meta["threads"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="a quarter of the steps")
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"# {cores} cores, load average {os.getloadavg()[0]:.1f} at the start; ms per step, "
          f"median [min-max] of {args.repeat}; busy: {cores} busy-loop processes")  # fmt: skip
    print(f"{'network':<38} {'load':<6} " + " ".join(f"{c:>24}" for c in CHOICES) + "  chosen")
    for name, (params, dtype, seeds, k) in NETWORKS.items():
        k = max(4, k // (4 if args.quick else 1))
        problem = gdln.load(ROOT / "graphs" / "routing.yaml", params=params)
        examples = problem.examples()
        _call(problem, examples, 2, dtype, seeds, 1)  # warm-up
        got: dict[tuple[str, str], list[float]] = {}
        chosen: dict[str, set[int]] = {}
        for _ in range(args.repeat):
            for load in ("as is", "busy"):
                busy = _busy(cores or 1) if load == "busy" else []
                try:
                    if busy:
                        time.sleep(0.3)  # the loops are running
                    for label, threads in CHOICES.items():
                        seconds, used = _call(problem, examples, k, dtype, seeds, threads)
                        got.setdefault((load, label), []).append(seconds * 1e3)
                        if threads is None:
                            chosen.setdefault(load, set()).add(used)
                finally:
                    for p in busy:
                        p.kill()
                        p.wait()
        for load in ("as is", "busy"):
            cells = []
            for label in CHOICES:
                v = np.asarray(got[(load, label)])
                cells.append(f"{np.median(v):.3g} [{v.min():.3g}-{v.max():.3g}]")
            used = ",".join(str(t) for t in sorted(chosen[load]))
            print(f"{name:<38} {load:<6} " + " ".join(f"{c:>24}" for c in cells) + f"  {used}")
    print(f"# load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
