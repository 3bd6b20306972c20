"""Reduced ODE solve against simulation, side by side in one run (issue 16, ODE rows).

Fig. 4e of Saxe et al. 2022 (``graphs/routing.yaml``, M = 7, K = 4, hidden 64, t = 40 tau,
201 recorded times, initial value 0.1) for ``lump="symmetry"`` and ``lump="full"``:

1. ``gdln.solve``: the first solve of a system (LSODA from Fortran, ``odeint``), the
   second (numba compiles the system, with the ``fast`` extra), later ones (compiled
   DOP853, else LSODA); the stepping alone by ``odeint`` and by ``solve_ivp`` (LSODA
   from Python, what ``gdln.solve`` used before) on the same right-hand side;
2. a grid of 1000 initial scales in one ``gdln.solution.solve_batch`` call: DOP853
   compiled by numba, DOP853 in numpy across the batch (the path without numba), and LSODA
   (the fallback, and the path without numba before), beside 1000 separate ``gdln.solve``
   calls on their own reductions (20 of them, scaled up; the reductions are made outside
   the clock); with ``--before REF``, also ``solve_batch`` of git revision REF, each path
   in a fresh process;
3. ``gdln.simulate`` of the same horizon (lr = 0.05, 800 steps, 1 seed, float64, 1 torch
   thread, 200 records) divided by the ODE solve.

Run: ``PYTHONPATH=. python benchmarks/bench_solve.py [--quick] [--before REF]``
(``GDLN_NO_NUMBA=1`` for the path without numba). Median and range of repeats.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import gdln
from gdln.simulation import SimulationSettings, simulate
from gdln.solution import _batch, _fast, _ode, _solve, solve_batch

ROUTING = Path(__file__).resolve().parents[1] / "graphs" / "routing.yaml"
T_MAX, N_POINTS, INIT, LR = 40.0, 201, 0.1, 0.05


Timing = float | tuple[float, float, float]
"""Seconds: one figure, or the median, least and most of repeats."""


def timings(fn: Callable[[], object], repeats: int) -> tuple[float, float, float]:
    """Median, least and most seconds of ``repeats`` calls."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times)), min(times), max(times)


def median_seconds(fn: Callable[[], object], repeats: int) -> float:
    return timings(fn, repeats)[0]


def shown(value: Timing) -> str:
    if isinstance(value, tuple):
        return f"{value[0]:.4g} [{value[1]:.3g}-{value[2]:.3g}]"
    return f"{value:.4g}"


def solve_ivp_seconds(reduction: gdln.Reduction, repeats: int) -> float:
    """The stepping alone by ``solve_ivp``, as ``gdln.solve`` did before."""
    flow = _solve._reduction_flow(reduction)
    problem = _ode.OdeProblem(flow.y0, flow.rhs_ode)
    times = np.linspace(0.0, T_MAX, N_POINTS)
    return median_seconds(
        lambda: _ode.integrate_ivp(problem, times, rtol=1e-10, atol=1e-12), repeats
    )


def odeint_seconds(reduction: gdln.Reduction, repeats: int) -> float:
    """The stepping alone by ``odeint`` (the path without numba)."""
    flow = _solve._reduction_flow(reduction)
    problem = _ode.OdeProblem(flow.y0, flow.rhs_ode, flow.jacobian)
    times = np.linspace(0.0, T_MAX, N_POINTS)
    return median_seconds(lambda: _ode.integrate(problem, times, rtol=1e-10, atol=1e-12), repeats)


def separate_seconds(problem: gdln.Problem, lump: str, sample: np.ndarray) -> float:
    """One ``gdln.solve`` per scale of ``sample``, each on its own (untimed) reduction:
    the first solve of a system, LSODA, lambdify included."""
    reductions = [gdln.reduce(problem, lump=lump, b0=f"{scale:.3g}") for scale in sample]
    start = time.perf_counter()
    for reduction in reductions:
        gdln.solve(reduction, t_max=T_MAX)
    return time.perf_counter() - start


def simulate_seconds(problem: gdln.Problem, repeats: int) -> float:
    steps = round(T_MAX / LR)
    settings = SimulationSettings(dtype="float64", threads=1, record_every=steps // 200)
    simulate(problem.graph, problem.examples(), steps=2, lr=LR, settings=settings)  # warm-up
    return median_seconds(
        lambda: simulate(problem.graph, problem.examples(), steps=steps, lr=LR, settings=settings),
        repeats,
    )


def lump_rows(
    problem: gdln.Problem, lump: str, repeats: int
) -> tuple[list[tuple[str, Timing]], float]:
    """The rows for one lumping, and the time of ``gdln.solve``."""
    rows: list[tuple[str, Timing]] = []
    start = time.perf_counter()
    reduction = gdln.reduce(problem, lump=lump, b0=INIT)
    rows.append((f"{lump}: reduce (symbolic, once)", time.perf_counter() - start))
    start = time.perf_counter()
    gdln.solve(reduction, t_max=T_MAX)  # LSODA; compiles the right-hand side for it
    rows.append((f"{lump}: first solve (LSODA, lambdify once)", time.perf_counter() - start))
    if _fast.available():
        start = time.perf_counter()
        gdln.solve(reduction, t_max=T_MAX)
        rows.append((f"{lump}: second solve (numba compiles, once)", time.perf_counter() - start))
    ode_timing = timings(lambda: gdln.solve(reduction, t_max=T_MAX), repeats)
    ode = ode_timing[0]
    path = "compiled DOP853" if _fast.available() else "LSODA"
    rows.append((f"{lump}: gdln.solve ({path}), t=40, 201 points", ode_timing))
    rows.append(
        (f"{lump}:   stepping by odeint (Fortran LSODA)", odeint_seconds(reduction, repeats))
    )
    rows.append(
        (f"{lump}:   stepping by solve_ivp (before)", solve_ivp_seconds(reduction, repeats))
    )
    unit = gdln.reduce(problem, lump=lump, b0=1)
    scales = np.geomspace(0.01, 0.5, 1000)
    batch_repeats = 3 if repeats < 5 else 7
    solve_batch(unit, scales[:20], t_max=1.0)  # compiles for this system (with numba)
    for label, fast_batch, vector_steps in (
        ("DOP853, numba", _batch.FAST_BATCH, _batch.VECTOR_STEPS),
        ("DOP853, numpy", 10**9, _batch.VECTOR_STEPS),
        ("LSODA", 10**9, -(10**9)),
    ):
        if label.endswith("numba") and not _fast.available():
            continue
        saved = _batch.FAST_BATCH, _batch.VECTOR_STEPS
        _batch.FAST_BATCH, _batch.VECTOR_STEPS = fast_batch, vector_steps
        n = 1 if label == "LSODA" else batch_repeats
        batch = timings(lambda: solve_batch(unit, scales, t_max=T_MAX), n)
        _batch.FAST_BATCH, _batch.VECTOR_STEPS = saved
        rows.append((f"{lump}: solve_batch, 1000 scales 0.01..0.5 ({label})", batch))
    separate = separate_seconds(problem, lump, scales[:: 1000 // 20])
    rows.append((f"{lump}: 1000 x gdln.solve, new reductions, from 20", separate * 1000 / 20))
    return rows, ode


BEFORE = """
import sys, time, numpy as np, gdln
from gdln.solution import solve_batch
problem = gdln.load(sys.argv[1], params={"M": "7", "K": "4", "hidden": "64"})
scales = np.geomspace(0.01, 0.5, 1000)
for lump in ("symmetry", "full"):
    unit = gdln.reduce(problem, lump=lump, b0=1)
    solve_batch(unit, scales[:20], t_max=1.0)
    times = []
    for _ in range(int(sys.argv[2])):
        start = time.perf_counter()
        solve_batch(unit, scales, t_max=40.0)
        times.append(time.perf_counter() - start)
    print(lump, np.median(times), min(times), max(times))
"""


def before_rows(ref: str, repeats: int) -> list[tuple[str, Timing]]:
    """``solve_batch`` of 1000 scales at git revision ``ref`` (a temporary worktree), with
    and without numba, each in a fresh process."""
    root = Path(__file__).resolve().parents[1]
    rows: list[tuple[str, Timing]] = []
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "before"
        subprocess.run(["git", "-C", str(root), "worktree", "add", "-q", "--detach", str(tree), ref],
                       check=True)  # fmt: skip
        try:
            for numba in (True, False):
                env = {**os.environ, "PYTHONPATH": str(tree)}
                if not numba:
                    env["GDLN_NO_NUMBA"] = "1"
                elif not _fast.available():
                    continue
                command = [sys.executable, "-c", BEFORE, str(ROUTING), str(repeats)]
                # cwd: ``-c`` puts the working directory first on sys.path
                out = subprocess.run(command, env=env, cwd=tree, check=True,
                                     capture_output=True, text=True)  # fmt: skip
                for line in out.stdout.splitlines():
                    lump, *values = line.split()
                    label = f"{lump}: solve_batch at {ref} ({'numba' if numba else 'no numba'})"
                    rows.append((label, (float(values[0]), float(values[1]), float(values[2]))))
        finally:
            subprocess.run(["git", "-C", str(root), "worktree", "remove", "--force", str(tree)],
                           check=False)  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--before", metavar="REF", help="also time solve_batch at git REF")
    args = parser.parse_args()
    repeats = 3 if args.quick else 15
    print(f"# load average at the start: {os.getloadavg()[0]:.1f} (1 min)")
    print(f"# numba: {'used' if _fast.available() else 'not installed or GDLN_NO_NUMBA set'}")
    problem = gdln.load(ROUTING, params={"M": "7", "K": "4", "hidden": "64"})
    rows: list[tuple[str, Timing]] = []
    if _fast.available():
        start = time.perf_counter()
        _fast._stepper()
        rows.append(("numba: load (or compile) the DOP853 stepper", time.perf_counter() - start))
    ode = {}
    for lump in ("symmetry", "full"):
        more, ode[lump] = lump_rows(problem, lump, repeats)
        rows += more
    sim = simulate_seconds(problem, 1 if args.quick else 3)
    rows.append(("simulate to t=40: 800 steps, 1 seed, hidden 64", sim))
    if args.before:
        rows += before_rows(args.before, 1 if args.quick else 3)
    print(f"{'what':<60} seconds (median [min-max] where repeated)")
    for label, seconds in rows:
        print(f"{label:<60} {shown(seconds)}")
    for lump, seconds in ode.items():
        print(f"simulate 1 seed / gdln.solve ({lump}): {sim / seconds:.0f}x")
    print(f"# load average at the end: {os.getloadavg()[0]:.1f} (1 min)")


if __name__ == "__main__":
    main()
