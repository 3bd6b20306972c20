"""Reduced ODE solve against simulation, side by side in one run (issue 16, ODE rows).

Fig. 4e of Saxe et al. 2022 (``graphs/routing.yaml``, M = 7, K = 4, hidden 64, t = 40 tau,
201 recorded times, initial value 0.1) for ``lump="symmetry"`` and ``lump="full"``:

1. ``gdln.solve``: the first solve of a system (LSODA from Fortran, ``odeint``), the
   second (numba compiles the system, with the ``fast`` extra), later ones (compiled
   DOP853, else LSODA); the stepping alone by ``odeint`` and by ``solve_ivp`` (LSODA
   from Python, what ``gdln.solve`` used before) on the same right-hand side;
2. a grid of 1000 initial scales in one ``gdln.solution.solve_batch`` call (compiled,
   and by LSODA), beside 1000 separate ``gdln.solve`` calls on their own reductions (20 of
   them, scaled up; the reductions are made outside the clock);
3. ``gdln.simulate`` of the same horizon (lr = 0.05, 800 steps, 1 seed, float64, 1 torch
   thread, 200 records) divided by the ODE solve.

Run: ``PYTHONPATH=. python benchmarks/bench_solve.py [--quick]`` (``GDLN_NO_NUMBA=1``
for the path without numba). Medians of repeats.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import gdln
from gdln.simulation import SimulationSettings, simulate
from gdln.solution import _batch, _fast, _ode, _solve, solve_batch

ROUTING = Path(__file__).resolve().parents[1] / "graphs" / "routing.yaml"
T_MAX, N_POINTS, INIT, LR = 40.0, 201, 0.1, 0.05


def median_seconds(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


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
    reductions = [gdln.reduce(problem, lump=lump, init=f"{scale:.3g}") for scale in sample]
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


def lump_rows(problem: gdln.Problem, lump: str, repeats: int) -> tuple[list, float]:
    """The rows for one lumping, and the time of ``gdln.solve``."""
    rows: list[tuple[str, float]] = []
    start = time.perf_counter()
    reduction = gdln.reduce(problem, lump=lump, init=INIT)
    rows.append((f"{lump}: reduce (symbolic, once)", time.perf_counter() - start))
    start = time.perf_counter()
    gdln.solve(reduction, t_max=T_MAX)  # LSODA; compiles the right-hand side for it
    rows.append((f"{lump}: first solve (LSODA, lambdify once)", time.perf_counter() - start))
    if _fast.available():
        start = time.perf_counter()
        gdln.solve(reduction, t_max=T_MAX)
        rows.append((f"{lump}: second solve (numba compiles, once)", time.perf_counter() - start))
    ode = median_seconds(lambda: gdln.solve(reduction, t_max=T_MAX), repeats)
    path = "compiled DOP853" if _fast.available() else "LSODA"
    rows.append((f"{lump}: gdln.solve ({path}), t=40, 201 points", ode))
    rows.append(
        (f"{lump}:   stepping by odeint (Fortran LSODA)", odeint_seconds(reduction, repeats))
    )
    rows.append(
        (f"{lump}:   stepping by solve_ivp (before)", solve_ivp_seconds(reduction, repeats))
    )
    unit = gdln.reduce(problem, lump=lump, init=1)
    scales = np.geomspace(0.01, 0.5, 1000)
    batch_repeats = 1 if repeats < 5 else 3
    if _fast.available():
        solve_batch(unit, scales[:20], t_max=1.0)  # compiles for this system
        batch = median_seconds(lambda: solve_batch(unit, scales, t_max=T_MAX), batch_repeats)
        rows.append((f"{lump}: solve_batch, 1000 scales 0.01..0.5 (numba)", batch))
    _batch.FAST_BATCH, fast_batch = 10**9, _batch.FAST_BATCH
    batch = median_seconds(lambda: solve_batch(unit, scales, t_max=T_MAX), 1)
    _batch.FAST_BATCH = fast_batch
    rows.append((f"{lump}: solve_batch, 1000 scales 0.01..0.5 (LSODA)", batch))
    separate = separate_seconds(problem, lump, scales[:: 1000 // 20])
    rows.append((f"{lump}: 1000 x gdln.solve, new reductions, from 20", separate * 1000 / 20))
    return rows, ode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    args = parser.parse_args()
    repeats = 3 if args.quick else 15
    print(f"# load average at the start: {os.getloadavg()[0]:.1f} (1 min)")
    print(f"# numba: {'used' if _fast.available() else 'not installed or GDLN_NO_NUMBA set'}")
    problem = gdln.load(ROUTING, params={"M": "7", "K": "4", "hidden": "64"})
    rows: list[tuple[str, float]] = []
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
    print(f"{'what':<56} {'seconds':>10}")
    for label, seconds in rows:
        print(f"{label:<56} {seconds:>10.4g}")
    for lump, seconds in ode.items():
        print(f"simulate 1 seed / gdln.solve ({lump}): {sim / seconds:.0f}x")
    print(f"# load average at the end: {os.getloadavg()[0]:.1f} (1 min)")


if __name__ == "__main__":
    main()
