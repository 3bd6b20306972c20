"""Time and peak memory of `gdln derive graphs/routing.yaml --lump symmetry` as M grows.

Each size runs in a fresh process so that peak memory (max RSS) is that of one derivation.
K = 0.4 M, as in the issue. Routes (``--routes``, any of):

* ``auto``: what ``gdln derive`` does (the symmetry quotient of a ``repeat:`` family of
  contexts where the file's rules show it, else every context);
* ``quotient`` / ``general``: ``reduce(quotient=True / False)``, side by side;
* ``symbolic``: ``reduce(symbolic=("M", "K"))`` (the family with M and K as symbols);
* ``solve``: what ``gdln solve`` does: ``reduce`` with its defaults (the quotient only
  for a family too large to expand when read), then ``gdln.solve`` (t = 40, 201 points).

With ``--before REF`` each size also runs on the library as it was at git revision REF
(extracted to a temporary folder), so that a change's effect is measured in one run on one
machine. "CPU s" is the process's CPU time after ``import gdln``; "all CPU s" includes the
interpreter and the imports.

Run: python benchmarks/bench_derive.py [--routes auto,general] [--before REF] [--timeout S] [M ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHILD = r"""
import json, resource, sys, time
import gdln
M = int(sys.argv[1]); K = max(1, int(round(0.4 * M))); route = sys.argv[4]
start = time.perf_counter(); cpu0 = time.process_time()
problem = gdln.load(sys.argv[2], params={"M": str(M), "K": str(K)})
loaded = time.perf_counter()
options = {"auto": {"quotient": True}, "before": {}, "solve": {}, "quotient": {"quotient": True},
           "general": {"quotient": False}, "symbolic": {"symbolic": ("M", "K")}}[route]
try:
    reduction = gdln.reduce(problem, lump="symmetry", **options)
    text = gdln.format_derivation(reduction)
    if route == "solve":
        gdln.solve(reduction, t_max=40, points=201)
    variables = [str(v) for v in reduction.systems[0].variables]
except gdln.GdlnError as err:
    variables = ["refused: " + str(err)[:60]]
done = time.perf_counter(); cpu = time.process_time() - cpu0
usage = resource.getrusage(resource.RUSAGE_SELF)
peak = usage.ru_maxrss / 1024
assert gdln.__file__.startswith(sys.argv[3]), gdln.__file__
print(json.dumps({"M": M, "K": K, "contexts": len(problem.task.contexts), "load_s": loaded - start,
                  "derive_s": done - loaded, "total_s": done - start, "cpu_s": cpu,
                  "all_cpu_s": usage.ru_utime + usage.ru_stime,
                  "peak_MiB": peak, "variables": variables}))
"""
HEADER = (
    f"{'version':>8} {'route':>8} {'M':>6} {'K':>5} {'contexts':>10} {'load s':>7} "
    f"{'derive s':>8} {'total s':>7} {'CPU s':>6} {'all CPU s':>9} {'peak MiB':>8}  variables"
)


def extract(ref: str, into: Path) -> Path:
    """The package ``gdln`` as it was at git revision ``ref``, under ``into``."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref, "gdln"], capture_output=True, check=True
    ).stdout
    path = into / "archive.tar"
    path.write_bytes(archive)
    with tarfile.open(path) as tar:
        tar.extractall(into, filter="data")
    return into


def measure(M: int, pythonpath: Path, timeout: float, route: str = "auto") -> dict | None:
    """One derivation in a fresh process importing ``gdln`` from ``pythonpath`` (also its
    working directory, which ``python -c`` puts first on ``sys.path``); None on time-out."""
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    try:
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                CHILD,
                str(M),
                str(ROOT / "graphs" / "routing.yaml"),
                str(pythonpath.resolve()),
                route,
            ],
            capture_output=True,
            text=True,
            check=True,
            env=env,
            cwd=pythonpath,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return None
    return json.loads(out.stdout)


def row(version: str, route: str, M: int, r: dict | None, timeout: float) -> str:
    if r is None:
        return f"{version:>8} {route:>8} {M:>6} {'':>5} {'':>10} timed out after {timeout:.0f} s"
    return (
        f"{version:>8} {route:>8} {r['M']:>6} {r['K']:>5} {r['contexts']:>10} "
        f"{r['load_s']:>7.2f} {r['derive_s']:>8.2f} {r['total_s']:>7.2f} {r['cpu_s']:>6.2f} "
        f"{r.get('all_cpu_s', float('nan')):>9.2f} {r['peak_MiB']:>8.0f}  "
        + " ".join(r["variables"])
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="*", type=int, default=[10, 20, 50, 100])
    parser.add_argument("--before", help="git revision to compare against")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    parser.add_argument(
        "--routes", default="auto", help="comma-separated: auto, quotient, general, symbolic, solve"
    )
    parser.add_argument(
        "--general-up-to", type=int, default=10**9, help="skip the general route above this M"
    )
    args = parser.parse_args()
    routes = [r.strip() for r in args.routes.split(",") if r.strip()]
    print(HEADER)
    with tempfile.TemporaryDirectory() as tmp:
        before = extract(args.before, Path(tmp)) if args.before else None
        for size in args.sizes:
            if before is not None and size <= args.general_up_to:
                result = measure(size, before, args.timeout, "before")
                print(row(args.before, "before", size, result, args.timeout), flush=True)
            for route in routes:
                if route == "general" and size > args.general_up_to:
                    continue
                result = measure(size, ROOT, args.timeout, route)
                print(row("now", route, size, result, args.timeout), flush=True)


if __name__ == "__main__":
    main()
