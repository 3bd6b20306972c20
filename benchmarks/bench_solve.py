"""Reduced ODE solves, side by side in one run (issue 16 rows; issue 25 item 5).

Fig. 4e of Saxe et al. 2022 (``graphs/routing.yaml``, M = 7, K = 4, hidden 64, t = 40 tau,
201 recorded times, initial value 0.1, ``lump="symmetry"``):

1. **Scripts** (issue 25 item 5): a fresh Python process imports gdln, reduces Fig. 4e
   and calls ``gdln.solve`` 20 times; the rows give the seconds spent solving after 1, 2,
   5 and 20 calls, the first call, the second and the median of the later ones, with
   numba enabled (where installed) and with ``GDLN_NO_NUMBA=1``, for this tree and, with
   ``--before REF``, for git revision REF (extracted by ``git archive``). The processes
   of the configurations take turns; a first process per configuration warms numba's
   disk cache and is reported apart ("cold").
2. **Batches**: ``gdln.solution.solve_batch`` of N initial scales 0.01..0.5
   (``lump="symmetry"`` and ``"full"``) in a fresh process per row: the first call
   (numba's import and compile included where it compiles) and two later calls, by
   DOP853 in numpy, by DOP853 with numba compiling the right-hand side (forced, to show
   where it pays: ``MIN_BATCH``), and by LSODA.
3. **In one process**: one ``gdln.solve`` by each method (``gdln.settings.METHODS``), and
   ``gdln.simulate`` of the same horizon (lr = 0.05, 800 steps, 1 seed, float64, 1 torch
   thread, 200 records) divided by the solve.

Run: ``PYTHONPATH=. python benchmarks/bench_solve.py [--quick] [--before REF]``.
Median [least-most] of the repeats.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
ROUTING = ROOT / "graphs" / "routing.yaml"
T_MAX, INIT, LR = 40.0, 0.1, 0.05
COUNTS = (1, 2, 5, 20)

SCRIPT = """
import inspect, sys, time
start = time.perf_counter()
import gdln
problem = gdln.load(sys.argv[1], params={"M": "7", "K": "4", "hidden": "64"})
# b0 since the settings redesign (issue 24), init at revisions before it (--before REF)
start_kw = "b0" if "b0" in inspect.signature(gdln.reduce).parameters else "init"
reduction = gdln.reduce(problem, lump="symmetry", **{start_kw: 0.1})
setup = time.perf_counter() - start
times = []
for _ in range(int(sys.argv[2])):
    start = time.perf_counter()
    gdln.solve(reduction, t_max=40.0)
    times.append(time.perf_counter() - start)
print(setup, "numba" in sys.modules, *times)
"""

BATCH = """
import sys, time
import numpy as np
import gdln
from gdln.solution import _numba, solve_batch
problem = gdln.load(sys.argv[1], params={"M": "7", "K": "4", "hidden": "64"})
unit = gdln.reduce(problem, lump=sys.argv[4], b0=1)
scales = np.geomspace(0.01, 0.5, int(sys.argv[2]))
method = "lsoda" if sys.argv[3] == "lsoda" else "auto"
if sys.argv[3] == "numba":
    _numba.MIN_BATCH = 1  # compiled whatever the size
seconds = []
for _ in range(3):
    start = time.perf_counter()
    out = solve_batch(unit, scales, t_max=40.0, method=method)
    seconds.append(time.perf_counter() - start)
print(*seconds, out[0].meta["integrator"])
"""


def spread(values: Sequence[float]) -> str:
    """``median [least-most]`` of several values, or the one value."""
    if len(values) == 1:
        return f"{values[0]:.4g}"
    return f"{np.median(values):.4g} [{min(values):.3g}-{max(values):.3g}]"


def run(tree: Path, code: str, args: Sequence[str], *, numba: bool) -> str:
    """The output of ``code`` in a fresh process on the gdln of ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("GDLN_NO_NUMBA", None)
    if not numba:
        env["GDLN_NO_NUMBA"] = "1"
    command = [sys.executable, "-c", code, str(ROUTING), *args]
    # cwd: ``-c`` puts the working directory first on sys.path
    done = subprocess.run(command, env=env, cwd=tree, check=True, capture_output=True, text=True)
    return done.stdout.strip().splitlines()[-1]


def script_rows(
    configurations: Sequence[tuple[str, Path, bool]], repeats: int
) -> list[tuple[str, str]]:
    """The script rows of each ``(label, tree, numba)``; the processes of the
    configurations take turns, so that a change of load falls on all of them alike."""
    runs: dict[int, list[tuple[float, bool, list[float]]]] = {
        i: [] for i in range(len(configurations))
    }
    cold: dict[int, list[float]] = {}
    for k in range(repeats + 1):
        for i, (_, tree, numba) in enumerate(configurations):
            setup, imported, *times = run(tree, SCRIPT, [str(max(COUNTS))], numba=numba).split()
            values = [float(x) for x in times]
            if k == 0:  # the first process of each: numba's disk cache is cold
                cold[i] = values
            else:
                runs[i].append((float(setup), imported == "True", values))
    rows = []
    for i, (label, _, numba) in enumerate(configurations):
        name = f"{label}, {'numba' if numba else 'GDLN_NO_NUMBA=1'}"
        got = runs[i]
        for n in COUNTS:
            rows.append((f"{name}: {n} solve(s)", spread([sum(v[:n]) for _, _, v in got])))
        rows.append((f"{name}: first solve", spread([v[0] for _, _, v in got])))
        rows.append((f"{name}: second solve", spread([v[1] for _, _, v in got])))
        later = [float(np.median(v[2:])) for _, _, v in got]
        rows.append((f"{name}: median of solves 3-20", spread(later)))
        rows.append((f"{name}: 20 solves, first process (cold cache)", f"{sum(cold[i]):.4g}"))
        rows.append((f"{name}: import gdln, load, reduce", spread([s for s, _, _ in got])))
        rows.append((f"{name}: numba imported", str(any(i for _, i, _ in got))))
    return rows


def batch_rows(sizes: Sequence[int], numba_installed: bool) -> list[tuple[str, str]]:
    """``solve_batch`` of each size in fresh processes: numpy's DOP853, DOP853 with the
    right-hand side compiled by numba (forced, whatever ``MIN_BATCH`` says), LSODA."""
    rows = []
    for lump in ("symmetry", "full"):
        for n in sizes:
            for what in ("numpy", "numba", "lsoda") if numba_installed else ("numpy", "lsoda"):
                out = run(ROOT, BATCH, [str(n), what, lump], numba=what == "numba").split()
                first, *later = (float(x) for x in out[:-1])
                label = f"{lump}: solve_batch, {n} scales, {out[-1]}"
                rows.append((f"{label}: first call", f"{first:.4g}"))
                rows.append((f"{label}: later calls", spread(later)))
    return rows


def timings(fn: Callable[[], object], repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def in_process_rows(repeats: int) -> list[tuple[str, str]]:
    import gdln
    from gdln.settings import METHODS
    from gdln.simulation import simulate

    problem = gdln.load(ROUTING, params={"M": "7", "K": "4", "hidden": "64"})
    reduction = gdln.reduce(problem, lump="symmetry", b0=INIT)
    rows = []
    solve = {}
    for method in METHODS:
        gdln.solve(reduction, t_max=T_MAX, method=method)
        solve[method] = timings(
            lambda m=method: gdln.solve(reduction, t_max=T_MAX, method=m), repeats
        )
        rows.append((f"gdln.solve, method={method}, t=40, 201 points", spread(solve[method])))
    steps = round(T_MAX / LR)
    settings = dict(dtype="float64", threads=1, record_every=steps // 200)
    simulate(problem.graph, problem.examples(), steps=2, lr=LR, **settings)  # warm-up
    sim = timings(
        lambda: simulate(problem.graph, problem.examples(), steps=steps, lr=LR, **settings),
        3 if repeats > 3 else 1,
    )
    rows.append(("simulate to t=40: 800 steps, 1 seed, hidden 64", spread(sim)))
    ratio = float(np.median(sim)) / float(np.median(solve["auto"]))
    rows.append(("simulate 1 seed / gdln.solve (auto)", f"{ratio:.0f}x"))
    return rows


def extracted(ref: str, folder: Path) -> Path:
    """Revision ``ref`` of this repository, extracted into ``folder`` (no worktree)."""
    tree = folder / ref.replace("/", "_")
    tree.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True
    )
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    return tree


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats and sizes")
    parser.add_argument("--before", metavar="REF", help="also time the scripts at git REF")
    args = parser.parse_args()
    repeats = 3 if args.quick else 5
    numba = importlib.util.find_spec("numba") is not None
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}; numba {'installed' if numba else 'not installed'}")  # fmt: skip
    print(f"# load average at the start: {os.getloadavg()[0]:.1f} (1 min)")
    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        trees = [("this tree", ROOT)]
        if args.before:
            trees.append((f"at {args.before}", extracted(args.before, Path(tmp))))
        configurations = [
            (label, tree, enabled)
            for label, tree in trees
            for enabled in ((True, False) if numba else (False,))
        ]
        rows += script_rows(configurations, repeats)
    sizes = (1000, 4000) if args.quick else (1000, 4000, 10000)
    rows += batch_rows(sizes, numba)
    rows += in_process_rows(7 if args.quick else 15)
    width = max(len(label) for label, _ in rows)
    print(f"{'what':<{width}}  seconds (median [least-most] where repeated)")
    for label, value in rows:
        print(f"{label:<{width}}  {value}")
    print(f"# load average at the end: {os.getloadavg()[0]:.1f} (1 min)")


if __name__ == "__main__":
    main()
