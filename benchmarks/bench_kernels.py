"""Timing of the NPK and NTK against explicit path enumeration (see KERNELS.md).

Run from the repository root: ``python -m benchmarks.bench_kernels`` (``--quick`` for a
smoke run). Prints one
table per comparison; every fast result is also checked against the slow one where both
run, so the table is of equal answers.
"""

from __future__ import annotations

import argparse
import platform
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from gdln._dgn import Gate, make_dataset, make_dgn
from gdln._npk import neural_path_features, neural_path_kernel, num_paths
from gdln._ntk import neural_tangent_kernel, value_ntk_layerwise, value_tangent_kernel


def _time(fn: Callable[[], Any], repeat: int = 1) -> tuple[float, Any]:
    best = float("inf")
    out = None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def _rel(a: np.ndarray, b: np.ndarray) -> str:
    scale = float(np.abs(b).max())
    if scale == 0.0:
        return "0 (both zero)" if not np.any(a) else "inf"
    return f"{float(np.abs(a - b).max()) / scale:.1e}"


def _row(*cells: object) -> str:
    return " | ".join(str(c) for c in cells)


def bench_npk(n: int, depth: int, widths: list[int], big_width: int) -> None:
    x, _ = make_dataset("digits", n=n, seed=0)
    print(f"\n## NPK, n={n} digits, d={depth}")
    print(_row("w", "paths P", "explicit Phi^T Phi [s]", "gate Grams [s]", "max rel diff"))
    for w in widths:
        # soft gates so that no narrow layer is entirely off (same cost as hard gates)
        net = make_dgn(64, w, depth, mode="frnpf_ii", gate=Gate("soft"), seed=0)
        p = num_paths(net)

        def explicit(net=net):
            phi = neural_path_features(net, x)
            return phi.T @ phi

        t_slow, h_slow = _time(explicit)
        t_fast, h_fast = _time(lambda net=net: neural_path_kernel(net, x).kernel, repeat=3)
        print(_row(w, p, f"{t_slow:.3f}", f"{t_fast:.4f}", _rel(h_fast, h_slow)))
    net = make_dgn(64, big_width, depth, seed=0)
    t_fast, _ = _time(lambda: neural_path_kernel(net, x).kernel, repeat=3)
    print(_row(big_width, f"{num_paths(net):.3g}", "infeasible", f"{t_fast:.4f}", "-"))


def bench_ntk(n: int, depth: int, width: int, chunk: int, small_width: int) -> None:
    x, _ = make_dataset("digits", n=n, seed=0)
    net = make_dgn(64, width, depth, seed=0)
    d_net = sum(v.numel() for v in net.value)
    print(f"\n## NTK, n={n} digits, d={depth}, w={width}, d_net={d_net}")
    print(_row("method", "seconds", "max rel diff vs torch.func unbatched"))
    neural_tangent_kernel(make_dgn(64, 4, depth, seed=1), x[:4])  # warm-up, not timed
    t_full, k_full = _time(lambda: neural_tangent_kernel(net, x).total)
    print(_row("torch.func, all examples in one vmap", f"{t_full:.2f}", "0"))
    t_chunk, k_chunk = _time(lambda: neural_tangent_kernel(net, x, chunk_size=chunk).total)
    print(_row(f"torch.func, vmap chunk_size={chunk}", f"{t_chunk:.2f}", _rel(k_chunk, k_full)))
    t_lw, k_lw = _time(lambda: value_ntk_layerwise(net, x), repeat=3)
    print(_row("layer-wise Gram products (no Jacobian)", f"{t_lw:.3f}", _rel(k_lw, k_full)))
    # explicit-enumeration baseline K = Phi^T V Phi on the largest net it handles
    small = make_dgn(64, small_width, depth, mode="frnpf_ii", gate=Gate("soft"), seed=0)
    xs = x[: min(n, 200)]
    p = num_paths(small)

    def explicit():
        phi = neural_path_features(small, xs)
        return phi.T @ value_tangent_kernel(small) @ phi

    t_exp, k_exp = _time(explicit)
    t_ref, k_ref = _time(lambda: neural_tangent_kernel(small, xs).total)
    rel = _rel(k_exp, k_ref)
    print(
        f"\nexplicit Phi^T V Phi (P={p} paths, n={len(xs)}, w={small_width}): {t_exp:.2f} s; "
        f"torch.func on the same: {t_ref:.3f} s; max rel diff {rel}"
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="tiny sizes, for a smoke test")
    args = ap.parse_args(argv)
    torch.set_num_threads(torch.get_num_threads())
    print(
        f"# bench_kernels on {platform.processor() or platform.machine()}, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, float64"
    )
    if args.quick:
        bench_npk(50, 4, [2, 3], 16)
        bench_ntk(50, 4, 16, 10, 2)
    else:
        bench_npk(1000, 6, [2, 3], 128)
        bench_ntk(1000, 6, 128, 100, 2)


if __name__ == "__main__":
    main()
