"""Benchmarks of the full-network simulator (issue 3), printed side by side.

0. Routing M = 100 (K = 4, hidden 128, float32, one seed): gdln's steps per second over
   those of a minimal hand-written torch loop of the same network (three dense gated
   matmuls and autograd; the baseline, target ratio >= 1), with their float64 losses
   compared.
1. Steps per second of full-batch gradient descent on the routing network of Fig. 4
   (``graphs/routing.yaml``, K = 4, hidden 128) for M = 7 and M = 100, 10 seeds batched.
2. The batched-seed speedup: one run with 10 seeds on a leading tensor axis against a
   Python loop of 10 single-seed runs (target >= 5x).
2b. The batched-seed speedup across M = 7, 20, 50, 100 (float32, 8 seeds): steps per
   second of 1 seed, of 8 seeds batched and of 8 sequential runs, with the matrix-product
   FLOPs of a step (counted by the torch profiler) and the rate they achieve, beside the
   GEMM rate of this CPU measured in the same run (median and range of repeats); and
   the same ratio for the hand-written loop of section 0 with its weights on a leading
   seed axis, the baseline of what batching can gain on this device.
2c. Where the row-sparse plan starts: routing M = 3, 4, 5, 7, 10 (K = min(M, 4), hidden
   64 and 128), each
   gate on for 1/M of the examples, per step with the row-sparse and the grouped dense
   products forced, for 1 and 8 seeds (``--only sparse``).
3. Theory against simulation for the horizon of Fig. 4e (M = 7, K = 4, hidden 64,
   t = 40 tau, lr = 0.05): time to solve the reduced ODE (Eq. 15, ``lump="full"``)
   against time to simulate the same horizon (target ratio >= 1000x).
4. Per training step against a hand-written torch loop, the same loop
   ``torch.compile``-d and JAX (``jit`` + ``lax.scan``): the rows of issue 25, Fig. 4e
   (float64) and routing M = 100, K = 40 (float32), first call and later calls
   (``benchmarks/bench_step.py``; ``--only step``).

Runs on CPU now and on CUDA when present (``--device cuda``; default: CUDA if available).

    python benchmarks/bench_simulate.py               # everything, default device
    python benchmarks/bench_simulate.py --quick       # fewer steps
    python benchmarks/bench_simulate.py --device cpu --threads 1
    python benchmarks/bench_simulate.py --device cpu --threads 1 --only seeds   # 2b alone
    python benchmarks/bench_simulate.py --device cpu --threads 1 --only sparse  # 2c alone
    python benchmarks/bench_simulate.py --device cuda --only step   # section 4 on a GPU
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import gdln  # noqa: E402
from gdln import simulate  # noqa: E402

ROUTING = ROOT / "graphs" / "routing.yaml"


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def steps_per_second(problem, *, steps, seeds, device, dtype, threads) -> float:
    """Full-batch GD steps per second, recording only at the start and the end."""
    run = dict(dtype=dtype, device=device, threads=threads)
    kw = dict(lr=0.02, init_scale=0.2, seeds=seeds)
    warm, timed = dict(run, record_every=2), dict(run, record_every=steps)
    simulate(problem.graph, problem.examples(), steps=2, **warm, **kw)
    _sync(device)
    start = time.perf_counter()
    simulate(problem.graph, problem.examples(), steps=steps, **timed, **kw)
    _sync(device)
    return steps / (time.perf_counter() - start)


def per_seed_loop(problem, *, steps, seeds, device, dtype, threads) -> float:
    """The same work as a Python loop over single-seed runs: steps per second."""
    run = dict(dtype=dtype, device=device, threads=threads)
    kw = dict(lr=0.02, init_scale=0.2)
    warm, timed = dict(run, record_every=2), dict(run, record_every=steps)
    examples = problem.examples()
    simulate(problem.graph, examples, steps=2, seeds=[0], **warm, **kw)
    _sync(device)
    start = time.perf_counter()
    for s in range(seeds):
        simulate(problem.graph, examples, steps=steps, seeds=[s], **timed, **kw)
    _sync(device)
    return steps / (time.perf_counter() - start)


def _dense_routing(problem, dtype, device, seeds=None):
    """Routing as three dense gated matrices: inputs side by side, gates folded in.

    ``seeds``: a count gives the weights a leading seed axis (seeds 0, 1, ...); ``None``
    gives seed 0 without one.
    """
    ex, graph = problem.examples(), problem.graph
    ins = [v for v in graph if graph.in_degree(v) == 0]
    outs = [v for v in graph if graph.out_degree(v) == 0]
    n = len(ex)

    def side_by_side(table, nodes, gate_edge):
        cols = []
        for v in nodes:
            a = table.get(v, np.zeros((n, graph.nodes[v]["size"])))
            cols.append(a * np.asarray(ex.gates.get(gate_edge(v), np.ones(n)))[:, None])
        return torch.as_tensor(np.concatenate(cols, 1), dtype=dtype, device=device)

    x = side_by_side(ex.inputs, ins, lambda v: (v, "h1"))
    gate = side_by_side(
        {v: np.ones((n, graph.nodes[v]["size"])) for v in outs}, outs, lambda v: ("h2", v)
    )
    y = side_by_side(ex.targets, outs, lambda v: ("h2", v))
    w = torch.as_tensor(ex.weights, dtype=dtype, device=device)
    init = gdln.initial_weights(graph, init_scale=0.2, seeds=list(range(seeds or 1)))
    W = [
        torch.cat([torch.as_tensor(init[(v, "h1")]) for v in ins], -1),
        torch.as_tensor(init[("h1", "h2")]),
        torch.cat([torch.as_tensor(init[("h2", v)]) for v in outs], -2),
    ]
    if seeds is None:
        W = [a[0] for a in W]
    return x, gate, y, w, [a.to(dtype=dtype, device=device).requires_grad_() for a in W]


def handwritten_loop(problem, *, steps, device, dtype, lr=0.02, seeds=None):
    """The baseline: a minimal torch loop of the same network, 3 dense gated matmuls.

    ``seeds``: a count trains that many seeds at once on a leading tensor axis (their
    losses summed, so each seed gets its own gradient). Returns steps per second and the
    losses of its steps (summed over seeds).
    """
    x, gate, y, w, W = _dense_routing(problem, getattr(torch, dtype), device, seeds)
    losses = []
    _sync(device)
    start = time.perf_counter()
    for _ in range(steps):
        out = ((x @ W[0].mT) @ W[1].mT @ W[2].mT) * gate
        loss = ((0.5 * (y - out).square().sum(-1)) @ w).sum()
        grads = torch.autograd.grad(loss, W)
        with torch.no_grad():
            for a, g in zip(W, grads, strict=True):
                a.sub_(lr * g)
        losses.append(loss.detach())
    _sync(device)
    return steps / (time.perf_counter() - start), torch.stack(losses).cpu().numpy()


def gdln_one_seed(problem, *, steps, device, dtype, threads, lr=0.02):
    """gdln's steps per second for one seed, and its losses at every step."""
    settings = dict(dtype=dtype, device=device, threads=threads, record_every=steps)
    kw = dict(lr=lr, init_scale=0.2, seeds=[0])
    simulate(problem.graph, problem.examples(), steps=2, **settings, **kw)
    _sync(device)
    start = time.perf_counter()
    simulate(problem.graph, problem.examples(), steps=steps, **settings, **kw)
    _sync(device)
    rate = steps / (time.perf_counter() - start)
    every = dict(settings, record_every=1, dtype="float64")
    run = simulate(problem.graph, problem.examples(), steps=3, **every, **kw)
    return rate, run.loss[:3, 0]


def _median_seconds(fn: Callable[[], object], repeats: int) -> float:
    """Median wall time of ``repeats`` calls: robust to other jobs on a shared machine."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def _matmul_flops(problem, *, seeds, device, dtype, threads, steps=3) -> float:
    """Matrix-product FLOPs of one training step with ``seeds`` seeds (torch profiler)."""
    from torch.profiler import ProfilerActivity, profile

    settings = dict(dtype=dtype, device=device, threads=threads)
    kw = dict(lr=0.02, init_scale=0.2, seeds=seeds, **dict(settings, record_every=10**6))
    examples = problem.examples()
    counts = []
    for n in (steps, 2 * steps):  # the difference removes the final (forward-only) pass
        with profile(activities=[ProfilerActivity.CPU], with_flops=True) as prof:
            simulate(problem.graph, examples, steps=n, **kw)
        counts.append(sum(e.flops for e in prof.key_averages() if "mm" in e.key))
    return (counts[1] - counts[0]) / steps


def _gemm_rate(m: int, dtype: str, device: str, repeats: int = 30) -> float:
    """GFLOP/s of one ``(m, 128) @ (128, 128)`` product (the network's largest shape)."""
    a = torch.randn(m, 128, dtype=getattr(torch, dtype), device=device)
    b = torch.randn(128, 128, dtype=a.dtype, device=device)
    for _ in range(3):
        a @ b
    _sync(device)
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    _sync(device)
    return 2 * m * 128 * 128 * repeats / (time.perf_counter() - start) / 1e9


def _call_seconds(problem, *, steps, seeds, device, dtype, threads) -> float:
    """Wall time of one ``simulate`` call (set-up included), recording nothing between."""
    run = dict(dtype=dtype, device=device, threads=threads, record_every=10**6)
    _sync(device)
    start = time.perf_counter()
    simulate(problem.graph, problem.examples(), steps=steps, lr=0.02, init_scale=0.2, seeds=seeds,
             **run)  # fmt: skip
    _sync(device)
    return time.perf_counter() - start


def seed_scaling(*, device, dtype, threads, seeds=8, repeats=5) -> None:
    """Section 2b: per-step time of 1 seed and of ``seeds`` batched, across M.

    A call of ``1 + k`` steps minus a call of 1 step gives the time of ``k`` steps; the
    1-step call is the set-up (data, plan, initial weights) plus one step. ``seeds``
    sequential runs take ``seeds`` times the 1-seed figures.
    """
    print(f"\n## 2b. routing K=4 hidden 128 {dtype}: {seeds} seeds batched vs sequential")
    print("# median [min-max] over repeats; ms per step; GF/s = matrix-product FLOPs / step time")
    head = ["M", "n", "MFLOP/seed-step", "1 seed ms", f"{seeds} batched ms", "ratio/step"]
    head += [
        "set-up 1",
        f"set-up {seeds}",
        "ratio 800 steps",
        "GF/s 1",
        f"GF/s {seeds}",
        "GEMM GF/s",
        "hand 1 ms",
        f"hand {seeds} ms",
        "hand ratio",
    ]
    print(" | ".join(head))
    if threads:
        torch.set_num_threads(threads)
    for m, k in ((7, 100), (20, 40), (50, 16), (100, 8)):
        problem = gdln.load(ROUTING, params={"M": m, "K": 4, "hidden": 128})
        opts = dict(device=device, dtype=dtype, threads=threads)
        flops = _matmul_flops(problem, seeds=1, **opts)
        got: dict[str, list[float]] = {}
        for _ in range(repeats):  # alternate, so that all see the same load
            for s in (1, seeds):
                one = _call_seconds(problem, steps=1, seeds=s, **opts)
                more = _call_seconds(problem, steps=1 + k, seeds=s, **opts)
                got.setdefault(f"step{s}", []).append((more - one) / k)
                got.setdefault(f"setup{s}", []).append(one - (more - one) / k)
            got.setdefault("gemm", []).append(_gemm_rate(len(problem.examples()), dtype, device))
            for s, count in ((1, None), (seeds, seeds)):  # the baseline, seeds on an axis
                hand = dict(device=device, dtype=dtype, seeds=count)
                handwritten_loop(problem, steps=2, **hand)
                rate = handwritten_loop(problem, steps=k, **hand)[0]
                got.setdefault(f"hand{s}", []).append(1 / rate)
        step1, stepn = np.array(got["step1"]), np.array(got[f"step{seeds}"])
        setup1, setupn = np.array(got["setup1"]), np.array(got[f"setup{seeds}"])
        ratio = seeds * step1 / stepn
        long = seeds * (setup1 + 800 * step1) / (setupn + 800 * stepn)

        def cell(v, scale: float = 1.0, fmt: str = ".3g") -> str:
            v = np.asarray(v) * scale
            return f"{np.median(v):{fmt}} [{v.min():{fmt}}-{v.max():{fmt}}]"

        row = [f"{m}", f"{len(problem.examples())}", f"{flops / 1e6:.1f}"]
        row += [cell(step1, 1e3), cell(stepn, 1e3), cell(ratio, fmt=".2f")]
        row += [cell(setup1, 1e3), cell(setupn, 1e3), cell(long, fmt=".2f")]
        row += [f"{flops / np.median(step1) / 1e9:.1f}"]
        row += [f"{seeds * flops / np.median(stepn) / 1e9:.1f}", cell(got["gemm"], fmt=".0f")]
        hand1, handn = np.array(got["hand1"]), np.array(got[f"hand{seeds}"])
        row += [cell(hand1, 1e3), cell(handn, 1e3), cell(seeds * hand1 / handn, fmt=".2f")]
        print(" | ".join(row))


def sparse_threshold(*, device, dtype, threads, seeds=8, repeats=4) -> None:
    """Section 2c: the row-sparse plan against the grouped dense products, across M.

    Each routing gate is on for 1/M of the examples; the plan computes a gated edge on
    its active rows when that fraction is at most ``SPARSE_FRACTION``. Both plans are
    forced here (the fraction set to 0 and to 1) and timed per step as in 2b.
    """
    import gdln.simulation._data as data_module

    print(
        f"\n## 2c. routing K=min(M,4) {dtype}: dense against row-sparse gated products, ms per step"
    )
    print(f"# the plan picks row-sparse at a gate fraction <= {data_module.SPARSE_FRACTION:.3g}")
    print("M | hidden | dense 1 | sparse 1 | dense 8 | sparse 8 | sparse/dense 1 | sparse/dense 8")
    if threads:
        torch.set_num_threads(threads)
    chosen = data_module.SPARSE_FRACTION
    try:
        for m in (3, 4, 5, 7, 10):
            for hidden in (64, 128):
                params = {"M": m, "K": min(m, 4), "hidden": hidden}
                problem = gdln.load(ROUTING, params=params)
                opts = dict(device=device, dtype=dtype, threads=threads)
                got: dict[tuple[str, int], list[float]] = {}
                for _ in range(repeats):
                    for plan, fraction in (("dense", 0.0), ("sparse", 1.0)):
                        data_module.SPARSE_FRACTION = fraction
                        for s in (1, seeds):
                            one = _call_seconds(problem, steps=1, seeds=s, **opts)
                            more = _call_seconds(problem, steps=41, seeds=s, **opts)
                            got.setdefault((plan, s), []).append((more - one) / 40 * 1e3)
                med = {key: float(np.median(v)) for key, v in got.items()}
                cells = [f"{med[(p, s)]:.2f}" for s in (1, seeds) for p in ("dense", "sparse")]
                cells += [f"{med[('sparse', s)] / med[('dense', s)]:.2f}" for s in (1, seeds)]
                print(" | ".join([str(m), str(hidden), *cells]))
    finally:
        data_module.SPARSE_FRACTION = chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="fewer steps")
    parser.add_argument(
        "--only", choices=["seeds", "sparse", "step"], help="run section 2b, 2c or 4 alone"
    )
    args = parser.parse_args()
    dev, dt, th, n = args.device, args.dtype, args.threads, args.seeds

    print(
        f"# gdln simulate benchmark: {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, torch {torch.__version__}, "
        f"threads {th or torch.get_num_threads()}, device {dev}, {dt}"
    )
    if dev.startswith("cuda"):
        print(f"# GPU: {torch.cuda.get_device_name(0)}")
    if args.only == "step":
        step_rows(device=dev, threads=th, quick=args.quick)
        print(f"# load average at the end: {os.getloadavg()[0]:.1f} (1 min)")
        return
    if args.only:
        section = seed_scaling if args.only == "seeds" else sparse_threshold
        section(device=dev, dtype=dt, threads=th, seeds=n)
        print(f"# load average at the end: {os.getloadavg()[0]:.1f} (1 min)")
        return

    print("\n## 1-2. routing, K=4, hidden 128: GD steps/s, batched seeds vs per-seed loop")
    print(f"{'M':>4} {'seeds':>5} {'batched steps/s':>16} {'loop steps/s':>13} {'speedup':>8}")
    for m, steps in ((7, 50 if args.quick else 200), (100, 3 if args.quick else 10)):
        problem = gdln.load(ROUTING, params={"M": m, "K": 4, "hidden": 128})
        opts = dict(steps=steps, seeds=n, device=dev, dtype=dt, threads=th)
        batched = steps_per_second(problem, **opts)
        loop = per_seed_loop(problem, **opts)
        print(f"{m:>4} {n:>5} {batched:>16.3g} {loop:>13.3g} {batched / loop:>7.2f}x")

    print("\n## 0. routing M=100, K=4, hidden 128, float32, 1 seed: gdln vs a hand-written loop")
    problem = gdln.load(ROUTING, params={"M": 100, "K": 4, "hidden": 128})
    steps = 5 if args.quick else 20
    old = torch.get_num_threads()
    if th:
        torch.set_num_threads(th)
    _, exact = handwritten_loop(problem, steps=3, device=dev, dtype="float64")
    handwritten_loop(problem, steps=2, device=dev, dtype="float32")
    rates = {"hand": [], "gdln": []}
    for _ in range(3):  # alternate, so that both see the same load
        rates["hand"].append(handwritten_loop(problem, steps=steps, device=dev, dtype="float32")[0])
        rate, losses = gdln_one_seed(problem, steps=steps, device=dev, dtype="float32", threads=th)
        rates["gdln"].append(rate)
    torch.set_num_threads(old)
    hand, ours = float(np.median(rates["hand"])), float(np.median(rates["gdln"]))
    agree = float(np.max(np.abs(losses - exact)))
    print(f"hand-written steps/s {hand:.3g}, gdln steps/s {ours:.3g}, ratio {ours / hand:.2f}")
    print(f"float64 losses of the first 3 steps agree to {agree:.1e}")

    print("\n## 3. Fig. 4e horizon (M=7, K=4, hidden 64, t=40 tau): reduced ODE vs simulation")
    problem = gdln.load(ROUTING, params={"M": 7, "K": 4, "hidden": 64})
    start = time.perf_counter()
    reduction = gdln.reduce(problem, lump="full", b0=0.1)
    t_reduce = time.perf_counter() - start
    gdln.solve(reduction, t_max=1.0, points=11)  # warm-up (lambdify caches)
    t_ode = _median_seconds(lambda: gdln.solve(reduction, t_max=40.0, points=201), 7)
    lr = 0.05
    steps = round(40 / lr)
    timings = {}
    for seeds in (1, n):
        simulate(
            problem.graph,
            problem.examples(),
            steps=2,
            lr=lr,
            seeds=seeds,
            device=dev,
            dtype=dt,
            threads=th,
            record_every=2,
        )
        _sync(dev)

        def run(seeds: int = seeds) -> None:
            simulate(
                problem.graph,
                problem.examples(),
                steps=steps,
                lr=lr,
                seeds=seeds,
                device=dev,
                dtype=dt,
                threads=th,
                record_every=steps // 200,
            )
            _sync(dev)

        timings[seeds] = _median_seconds(run, 3)
    print(f"{'what':<52} {'seconds':>9} {'sim / ODE':>10}")
    print(f"{'reduce (symbolic, once)':<52} {t_reduce:>9.3g}")
    print(f"{'solve reduced ODE to t=40 (gdln.solve, 201 points)':<52} {t_ode:>9.3g} {1:>10}")
    for seeds, t in timings.items():
        label = f"simulate to t=40: {steps} steps, {seeds} seed(s), {dev}"
        print(f"{label:<52} {t:>9.3g} {t / t_ode:>9.0f}x")
    step_rows(device=dev, threads=th, quick=args.quick)
    print(
        f"# load average at the end: {os.getloadavg()[0]:.1f} (1 min), {os.getloadavg()[1]:.1f} (5 min)"
    )


def step_rows(*, device: str, threads: int | None, quick: bool, repeat: int = 5) -> None:
    """Section 4: the rows of ``bench_step.py`` (issue 25) on this device."""
    import bench_step  # beside this script; sets XLA_FLAGS before jax is imported

    print("\n## 4. per training step: gdln, hand-written loop, torch.compile, JAX")
    torch.set_num_threads(threads or 1)
    for name in bench_step.ROWS:
        bench_step.row(name, device=device, repeat=repeat, quick=quick, skip=set())


if __name__ == "__main__":
    main()
