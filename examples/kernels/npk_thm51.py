"""Thm. 5.1 of the NPF/NPK paper: at init, K -> d sigma^(2(d-1)) H_FNPF as the width grows.

FRNPF (II) network: frozen random ReLU feature network, value weights $\\pm\\sigma$ drawn
independently (Assumption 5.1), $\\sigma=\\sqrt{2/w}$. For each width we report the relative
Frobenius distance $\\lVert K_0 - d\\sigma^{2(d-1)}H\\rVert_F/\\lVert d\\sigma^{2(d-1)}H\\rVert_F$,
averaged over seeds (mean and standard deviation over seeds), on digits. It should shrink
like $w^{-1/2}$ once the width is large (Var of the entries is $O(d^2/w)$, Thm. 2.2 of the
DGN paper); the log-log slope is fitted on the widths $w \\geq$ ``--fit-from`` (default 128)
and, for comparison, on all widths. Writes ``thm51.json`` and ``thm51.png``/``.svg``.

    python examples/kernels/npk_thm51.py -o out/thm51
    python examples/kernels/npk_thm51.py --quick -o /tmp/thm51
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
import torch

from gdln import save_figure
from gdln.kernels import make_dataset, make_dgn, neural_path_kernel, value_ntk_layerwise

# %%
# The decay rate: the slope of the relative distance against the width on log-log axes ($-1/2$
# expected, Thm. 2.2 of the DGN paper).


def loglog_slope(widths: list[int], values: list[float]) -> float:
    """Least-squares slope of log(value) against log(width)."""
    return float(np.polyfit(np.log(widths), np.log(values), 1)[0])


# %%
# For each width, the relative Frobenius distance of the NTK at initialisation from
# $d\,\sigma^{2(d-1)} H_{\mathrm{FNPF}}$ (Thm. 5.1), averaged over seeds.


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--fit-from", type=int, default=None, help="smallest width in the fit")
    ap.add_argument("-o", "--out", type=Path, default=Path("out/npk_thm51"))
    args = ap.parse_args(argv)
    if args.quick:
        widths, depth, n, seeds, fit_from = [8, 16, 32], 3, 20, 2, 16
    else:
        widths, depth, n, seeds, fit_from = [16, 32, 64, 128, 256, 512, 1024], 4, 100, 5, 128
    if args.fit_from is not None:
        fit_from = args.fit_from
    if sum(w >= fit_from for w in widths) < 2:
        raise SystemExit(f"--fit-from {fit_from}: fewer than two widths to fit")
    x, _ = make_dataset("digits", n=n, seed=0)
    t0 = time.perf_counter()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    rows = []
    try:
        for w in widths:
            errs = []
            for seed in range(seeds):
                net = make_dgn(64, w, depth, mode="frnpf_ii", init="bernoulli", seed=seed)
                h = neural_path_kernel(net, x).kernel
                target = depth * net.sigma ** (2 * (depth - 1)) * h
                k = value_ntk_layerwise(net, x)
                errs.append(float(np.linalg.norm(k - target) / np.linalg.norm(target)))
            rows.append(
                {
                    "width": w,
                    "rel_frobenius": float(np.mean(errs)),
                    "std": float(np.std(errs, ddof=1)) if seeds > 1 else 0.0,
                    "min": float(np.min(errs)),
                    "max": float(np.max(errs)),
                    "runs": errs,
                }
            )
    finally:
        torch.set_num_threads(threads)
    big = [r for r in rows if r["width"] >= fit_from]
    slope = loglog_slope([r["width"] for r in big], [r["rel_frobenius"] for r in big])
    slope_all = loglog_slope([r["width"] for r in rows], [r["rel_frobenius"] for r in rows])
    res = {
        "depth": depth,
        "n": n,
        "seeds": seeds,
        "rows": rows,
        "fit_from": fit_from,
        "loglog_slope": slope,
        "loglog_slope_all_widths": slope_all,
        "wall_s": time.perf_counter() - t0,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "thm51.json").write_text(json.dumps(res, indent=1))
    plot(res, args.out, ("png",) if args.quick else ("png", "svg"))
    for r in rows:
        print(
            f"w={r['width']:5d}  ||K - d s^(2(d-1)) H|| / ||.|| = {r['rel_frobenius']:.4f}"
            f" +- {r['std']:.4f} (seeds: {r['min']:.3f}..{r['max']:.3f})"
        )
    print(
        f"log-log slope {slope:.3f} on w >= {fit_from}, {slope_all:.3f} on all widths "
        f"(w^-1/2 would be -0.5); d={depth}, n={n}, {seeds} seeds; wall {res['wall_s']:.0f} s"
    )
    assert math.isfinite(slope)
    return res


# %%
# The figure: the distance against the width, with the fitted slopes.


def plot(res: dict, out: Path, formats: tuple[str, ...] = ("png", "svg")) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = res["rows"]
    ws = np.array([r["width"] for r in rows], dtype=float)
    fig, ax = plt.subplots(figsize=(4.8, 3.6))
    for r in rows:
        ax.plot([r["width"]] * len(r["runs"]), r["runs"], ".", color="0.6", ms=4)
    ax.errorbar(
        ws,
        [r["rel_frobenius"] for r in rows],
        [r["std"] for r in rows],
        marker="o",
        capsize=3,
        label="mean ± std over seeds (dots: seeds)",
    )
    big = ws >= res["fit_from"]
    ref = rows[int(np.argmax(big))]["rel_frobenius"] * (ws[big] / ws[big][0]) ** -0.5
    ax.plot(ws[big], ref, "k--", lw=1, label="w^(-1/2) through the first fitted width")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("hidden width w")
    ax.set_ylabel("||K0 - d σ^(2(d-1)) H||_F / ||d σ^(2(d-1)) H||_F")
    ax.set_title(
        f"NPF/NPK Thm. 5.1, FRNPF d={res['depth']}, n={res['n']} digits; "
        f"slope {res['loglog_slope']:.2f} (w ≥ {res['fit_from']})",
        fontsize=8,
    )
    ax.legend(fontsize=7)
    save_figure(fig, out, "thm51", tight=True, formats=formats)


# %%
# Run the example. The documentation runs ``main`` in its ``--quick`` mode (the command line
# gives ``--quick -o DIR``); the figures it writes are shown below.

if __name__ == "__main__":
    main()
