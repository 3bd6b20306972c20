"""Time and peak memory of `gdln derive graphs/routing.yaml --lump symmetry` as M grows.

Each size runs in a fresh process so that peak memory (max RSS) is that of one derivation.
K = 0.4 M, as in the issue. Run: python benchmarks/bench_derive.py [M ...]
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHILD = r"""
import json, resource, sys, time
import gdln
M = int(sys.argv[1]); K = max(1, int(round(0.4 * M)))
start = time.perf_counter()
problem = gdln.load(sys.argv[2], params={"M": str(M), "K": str(K)})
loaded = time.perf_counter()
reduction = gdln.reduce(problem, lump="symmetry")
text = gdln.format_derivation(reduction)
done = time.perf_counter()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"M": M, "K": K, "contexts": len(problem.task.contexts), "load_s": loaded - start,
                  "derive_s": done - loaded, "total_s": done - start, "peak_MiB": peak,
                  "variables": [str(v) for v in reduction.systems[0].variables]}))
"""


def main(sizes: list[int]) -> None:
    print(
        f"{'M':>4} {'K':>3} {'contexts':>8} {'load s':>7} {'derive s':>8} {'total s':>7} {'peak MiB':>8}"
    )
    for M in sizes:
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(M), str(ROOT / "graphs" / "routing.yaml")],
            capture_output=True,
            text=True,
            check=True,
        )
        r = json.loads(out.stdout)
        print(
            f"{r['M']:>4} {r['K']:>3} {r['contexts']:>8} {r['load_s']:>7.2f} {r['derive_s']:>8.2f} "
            f"{r['total_s']:>7.2f} {r['peak_MiB']:>8.0f}"
        )


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [10, 20, 50, 100])
