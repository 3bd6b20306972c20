"""Timing of the NPK and NTK against explicit path enumeration (see KERNELS.md).

Run from the repository root: ``python -m benchmarks.bench_kernels`` (``--quick`` for a
smoke run). Prints, each table with the load average before and after it:

1. the NPK H = Σ ⊙ Λ from per-layer gate Grams against H = ΦᵀΦ with Φ listed path by
   path, at n digits and depth d, for every width the enumeration can hold in memory
   (``--npk-widths``; the library's cap on listed entries is lifted here), then by
   enumeration in blocks of paths (Φ never whole; ``--stream-widths``), then the target
   width (enumeration not run: its Φ size is printed);
2. the NTK at the target size by torch.func with and without vmap chunks, and by the
   layer-wise Gram products;
3. the explicit K = ΦᵀVΦ (Prop. 3.1) at n examples for the widths whose P × P matrix V
   fits (``--vtk-widths``), beside torch.func on the same network;
4. growth: each of n, w and d varied around a base point, for the NPK (gate Grams) and
   the NTK (torch.func and layer-wise), with the log-log slope of time against each;
5. deep NPKs (ReLU DGN width 64, depth 100 .. 10 000): ``neural_path_kernel`` with its
   stored scale beside the plain product of Gram factors, checked against the
   log-domain sum of per-layer log Grams.

Every fast result is checked against the slow one wherever both run, so the tables are
of equal answers.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

import gdln.kernels._npk as npk_module
from gdln.kernels import (
    Gate,
    make_dataset,
    make_dgn,
    neural_path_features,
    neural_path_kernel,
    neural_tangent_kernel,
    npk_from_gates,
    num_paths,
    value_ntk_layerwise,
    value_tangent_kernel,
)

#: CPU seconds (``time.process_time``, all threads of this process) of the last ``_time``
#: call's best repetition. On a shared machine the wall time includes waiting for a core;
#: the CPU time does not, so the growth tables and slopes use it.
_LAST_CPU = [0.0]


def _time(fn: Callable[[], Any], repeat: int = 1) -> tuple[float, Any]:
    """Best wall time of ``repeat`` calls (and, in ``_LAST_CPU``, the best CPU time)."""
    best = best_cpu = float("inf")
    out = None
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        best = min(best, time.perf_counter() - t)
        best_cpu = min(best_cpu, time.process_time() - c)
    _LAST_CPU[0] = best_cpu
    return best, out


def _cpu() -> float:
    return _LAST_CPU[0]


def _rel(a: np.ndarray, b: np.ndarray) -> str:
    scale = float(np.abs(b).max())
    if scale == 0.0:
        return "0 (both zero)" if not np.any(a) else "inf"
    return f"{float(np.abs(a - b).max()) / scale:.1e}"


def _row(*cells: object) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _load() -> str:
    return "load average " + ", ".join(f"{v:.1f}" for v in os.getloadavg())


def _bytes(count: float) -> str:
    b = 8 * count
    for unit in ("B", "KB", "MB", "GB", "TB", "PB", "EB"):
        if b < 1000 or unit == "EB":
            return f"{b:.3g} {unit}"
        b /= 1000
    return ""


def _explicit_npk(net, x) -> np.ndarray:
    """H = ΦᵀΦ with Φ (P × n) materialised by ``neural_path_features``, cap lifted."""
    cap = npk_module.MAX_PATH_ENTRIES
    npk_module.MAX_PATH_ENTRIES = 10**12
    try:
        phi = neural_path_features(net, x)
    finally:
        npk_module.MAX_PATH_ENTRIES = cap
    return phi.T @ phi


def _streamed_npk(net, x) -> np.ndarray:
    """H = Σ_blocks Φ_bᵀΦ_b, each block of paths listed explicitly (all paths with one input
    node and one first-layer unit), so memory is n·P/(d_in·w_1) entries, time O(n²P)."""
    gates = [g.numpy() for g in net.gates(x)]
    xs = x.numpy()
    n = len(xs)
    h = np.zeros((n, n))
    for i0 in range(xs.shape[1]):
        for u1 in range(gates[0].shape[1]):
            block = (xs[:, i0] * gates[0][:, u1])[:, None]
            for g in gates[1:]:
                block = (block[:, :, None] * g[:, None, :]).reshape(n, -1)
            h += block @ block.T
    return h


def bench_npk(n: int, depth: int, widths: list[int], stream: list[int], big_width: int) -> None:
    x, _ = make_dataset("digits", n=n, seed=0)
    print(f"\n## NPK, n={n} digits, d={depth} ({_load()})")
    print(
        _row(
            "w",
            "paths P",
            "Φ size",
            "explicit ΦᵀΦ, wall (CPU) [s]",
            "gate Grams, wall (CPU) [s]",
            "max rel diff",
        )
    )
    print("|---|---|---|---|---|---|")
    for w in [*widths, *stream]:
        # soft gates so that no narrow layer is entirely off (same cost as hard gates)
        net = make_dgn(64, w, depth, mode="frnpf_ii", gate=Gate("soft"), seed=0)
        p = num_paths(net)
        streamed = w in stream
        fn = (
            (lambda net=net: _streamed_npk(net, x))
            if streamed
            else (lambda net=net: _explicit_npk(net, x))
        )
        t_slow, h_slow = _time(fn)
        c_slow = _cpu()
        t_fast, h_fast = _time(lambda net=net: neural_path_kernel(net, x).kernel, repeat=5)
        c_fast = _cpu()
        size = f"{_bytes(n * p)}" + (" (streamed in blocks)" if streamed else "")
        print(
            _row(
                w,
                p,
                size,
                f"{t_slow:.3f} ({c_slow:.3f})",
                f"{t_fast:.4f} ({c_fast:.4f})",
                _rel(h_fast, h_slow),
            )
        )
    net = make_dgn(64, big_width, depth, seed=0)
    p = num_paths(net)
    t_fast, _ = _time(lambda: neural_path_kernel(net, x).kernel, repeat=5)
    cell = f"{t_fast:.4f} ({_cpu():.4f})"
    print(_row(big_width, f"{p:.3g}", _bytes(n * p), "not run", cell, "-"))
    print(f"({_load()})")


def bench_ntk(n: int, depth: int, width: int, chunk: int) -> None:
    x, _ = make_dataset("digits", n=n, seed=0)
    net = make_dgn(64, width, depth, seed=0)
    d_net = sum(v.numel() for v in net.value)
    print(f"\n## NTK, n={n} digits, d={depth}, w={width}, d_net={d_net} ({_load()})")
    print(_row("method", "wall (CPU) [s]", "max rel diff vs torch.func unbatched"))
    print("|---|---|---|")
    neural_tangent_kernel(make_dgn(64, 4, depth, seed=1), x[:4])  # warm-up, not timed
    t_full, k_full = _time(lambda: neural_tangent_kernel(net, x).total, repeat=2)
    print(_row("torch.func, all examples in one vmap", f"{t_full:.2f} ({_cpu():.2f})", "0"))
    t_chunk, k_chunk = _time(
        lambda: neural_tangent_kernel(net, x, chunk_size=chunk).total, repeat=2
    )
    print(
        _row(
            f"torch.func, vmap chunk_size={chunk}",
            f"{t_chunk:.2f} ({_cpu():.2f})",
            _rel(k_chunk, k_full),
        )
    )
    t_lw, k_lw = _time(lambda: value_ntk_layerwise(net, x), repeat=5)
    print(
        _row(
            "layer-wise Gram products (no Jacobian)",
            f"{t_lw:.3f} ({_cpu():.3f})",
            _rel(k_lw, k_full),
        )
    )
    print(f"({_load()})")


def bench_vtk(n: int, depth: int, widths: list[int]) -> None:
    x, _ = make_dataset("digits", n=n, seed=0)
    print(f"\n## Explicit K = ΦᵀVΦ (Prop. 3.1), n={n} digits, d={depth} ({_load()})")
    print(
        _row(
            "w",
            "paths P",
            "V size",
            "explicit ΦᵀVΦ, wall (CPU) [s]",
            "torch.func, wall (CPU) [s]",
            "max rel diff",
        )
    )
    print("|---|---|---|---|---|---|")
    for w in widths:
        small = make_dgn(64, w, depth, mode="frnpf_ii", gate=Gate("soft"), seed=0)
        p = num_paths(small)

        def explicit(small=small):
            cap = npk_module.MAX_PATH_ENTRIES
            npk_module.MAX_PATH_ENTRIES = 10**12
            try:
                phi = neural_path_features(small, x)
                vtk = value_tangent_kernel(small)
            finally:
                npk_module.MAX_PATH_ENTRIES = cap
            return phi.T @ (vtk @ phi)

        t_exp, k_exp = _time(explicit)
        c_exp = _cpu()
        t_ref, k_ref = _time(lambda small=small: neural_tangent_kernel(small, x).total, repeat=3)
        cells = (f"{t_exp:.2f} ({c_exp:.2f})", f"{t_ref:.3f} ({_cpu():.3f})")
        print(_row(w, p, _bytes(p * p), *cells, _rel(k_exp, k_ref)))
    print(f"({_load()})")


#: The growth table skips the torch.func NTK where its Jacobian (n x d_net) would exceed
#: this many entries (8 bytes each; the machine is shared).
MAX_JACOBIAN_ENTRIES = 200_000_000


def _slope(xs: list[float], ts: list[float]) -> float:
    ok = np.isfinite(ts)
    if ok.sum() < 2:
        return float("nan")
    return float(np.polyfit(np.log(np.asarray(xs)[ok]), np.log(np.asarray(ts)[ok]), 1)[0])


def bench_growth(
    base: dict[str, int], axes: dict[str, list[int]], ntk_base: dict[str, int]
) -> None:
    """Time against each of n, w, d with the other two at the base point."""
    x_all, _ = make_dataset("digits", n=max(max(axes["n"]), base["n"], ntk_base["n"]), seed=0)
    neural_tangent_kernel(make_dgn(64, 4, 3, seed=1), x_all[:4])  # warm-up

    def timings(n: int, w: int, d: int, with_ntk: bool) -> tuple[float, float, float]:
        """CPU seconds of the NPK, the layer-wise K^V and (optionally) the torch.func NTK."""
        x = x_all[:n]
        net = make_dgn(64, w, d, seed=0)
        _time(lambda: neural_path_kernel(net, x).kernel, repeat=5)
        t_npk = _cpu()
        _time(lambda: value_ntk_layerwise(net, x), repeat=5)
        t_lw = _cpu()
        t_ntk = np.nan
        d_net = sum(v.numel() for v in net.value)
        if with_ntk and n * d_net <= MAX_JACOBIAN_ENTRIES:
            _time(lambda: neural_tangent_kernel(net, x).total, repeat=2)
            t_ntk = _cpu()
        return t_npk, t_lw, t_ntk

    print(f"\n## Growth ({_load()})")
    print(
        f"NPK and layer-wise K^V around n={base['n']}, w={base['w']}, d={base['d']}; "
        f"torch.func NTK around n={ntk_base['n']}, w={ntk_base['w']}, d={ntk_base['d']}."
    )
    print("CPU seconds (best of 5, torch.func of 2); slope = d log(CPU time) / d log(value).")
    print(
        _row(
            "varied",
            "value",
            "NPK gate Grams [CPU s]",
            "layer-wise K^V [CPU s]",
            "torch.func NTK [CPU s]",
        )
    )
    print("|---|---|---|---|---|")
    for axis, values in axes.items():
        rows = []
        for v in values:
            point = {**base, axis: v}
            t_npk, t_lw, _ = timings(point["n"], point["w"], point["d"], False)
            q = {**ntk_base, axis: v}
            t_ntk = timings(q["n"], q["w"], q["d"], True)[2]
            rows.append((v, t_npk, t_lw, t_ntk))
            ntk_cell = f"{t_ntk:.3f}" if np.isfinite(t_ntk) else "skipped: J > 1.6 GB"
            print(_row(axis, v, f"{t_npk:.4f}", f"{t_lw:.4f}", ntk_cell))
        vs = [r[0] for r in rows]
        print(
            _row(
                axis,
                "log-log slope",
                f"{_slope(vs, [r[1] for r in rows]):.2f}",
                f"{_slope(vs, [r[2] for r in rows]):.2f}",
                f"{_slope(vs, [r[3] for r in rows]):.2f}",
            )
        )
    print(f"({_load()})")


def bench_deep(n: int, depths: list[int]) -> None:
    """Deep NPK from the same gates: scaled product (library) vs plain product vs logs."""
    x = torch.as_tensor(make_dataset("digits47", n=n, seed=0)[0], dtype=torch.float64)
    print(f"\n## Deep NPK, ReLU DGN width 64, n={n} digits ({_load()})")
    print(
        _row(
            "d",
            "gates (once)",
            "npk_from_gates",
            "plain product",
            "plain finite",
            "log_scale",
            "finite",
            "max rel. err. of log H vs log domain",
            "eigenvalues finite",
        )
    )
    print(_row(*["---"] * 9))
    for depth in depths:
        net = make_dgn(64, 64, depth, seed=0)
        t_gates, gates = _time(lambda net=net: [g.detach() for g in net.gates(x)])
        repeat = 3 if depth <= 1000 else 1
        t_lib, k = _time(lambda gates=gates: npk_from_gates(x, gates), repeat=repeat)

        def plain(gates=gates) -> np.ndarray:
            xn = x.numpy()
            lam = np.ones((n, n))
            for g in gates:
                lam = lam * (g.numpy() @ g.numpy().T)
            return xn @ xn.T * lam

        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            t_plain, h_plain = _time(plain, repeat=repeat)
            log_ref = np.zeros((n, n))  # log Lambda, entrywise, summed layer by layer
            for g in gates:
                log_ref += np.log(g.numpy() @ g.numpy().T)
            got = np.log(k.overlap) + k.log_scale
        ok = (k.overlap > 1e-300) & np.isfinite(log_ref)
        err = float(np.max(np.abs(got[ok] - log_ref[ok]) / np.abs(log_ref[ok])))
        print(
            _row(
                depth,
                f"{t_gates * 1e3:.3g} ms",
                f"{t_lib * 1e3:.3g} ms",
                f"{t_plain * 1e3:.3g} ms",
                bool(np.all(np.isfinite(h_plain))),
                f"{k.log_scale:.6g}",
                bool(np.all(np.isfinite(k.kernel))),
                f"{err:.1e}",
                bool(np.all(np.isfinite(k.eigenvalues()))),
            )
        )
    print(f"({_load()})")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes, for a smoke test")
    ap.add_argument(
        "--skip", default="", help="comma-separated parts to skip: npk,ntk,vtk,growth,deep"
    )
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (default 1: on a shared machine a second thread mostly waits)",
    )
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    skip = set(filter(None, args.skip.split(",")))
    print(
        f"# bench_kernels on {platform.processor() or platform.machine()}, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, float64 ({_load()})"
    )
    if args.quick:
        parts = {
            "npk": lambda: bench_npk(50, 4, [2, 3], [4], 16),
            "ntk": lambda: bench_ntk(50, 4, 16, 10),
            "vtk": lambda: bench_vtk(20, 4, [2]),
            "growth": lambda: bench_growth(
                {"n": 40, "w": 16, "d": 3},
                {"n": [20, 40], "w": [8, 16], "d": [2, 3]},
                {"n": 20, "w": 8, "d": 3},
            ),
            "deep": lambda: bench_deep(20, [100, 1000]),
        }
    else:
        parts = {
            "npk": lambda: bench_npk(1000, 6, [2, 3, 4, 5], [6], 128),
            "ntk": lambda: bench_ntk(1000, 6, 128, 100),
            "vtk": lambda: bench_vtk(1000, 6, [2, 3]),
            "growth": lambda: bench_growth(
                {"n": 1000, "w": 128, "d": 6},
                {
                    "n": [250, 500, 1000, 1797],
                    "w": [32, 64, 128, 256, 512],
                    "d": [3, 4, 6, 8, 10],
                },
                {"n": 500, "w": 128, "d": 6},
            ),
            "deep": lambda: bench_deep(200, [100, 200, 1000, 10_000]),
        }
    for name, fn in parts.items():
        if name not in skip:
            fn()


if __name__ == "__main__":
    main()
