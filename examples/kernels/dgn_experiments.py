"""Experiments 1-2 and Figs. 1-4 of the Deep Gated Networks paper, plus Var[K0] vs depth.

1. Figs. 1-2: DGN-FRG (p=1/2, sigma=sqrt(2/w)) on n=200 identical inputs; e.c.d.f. (the
   cumulative sum of the ascending eigenvalues) of K0/d against the ideal e.c.d.f. of
   Eq. (3), whose eigenvalues are 1 - p^(d-1) (n-1 times) and 1 + (n-1) p^(d-1) (once), for
   depths 2..20 at w=500 and w=25; one diagonal / off-diagonal entry averaged over runs
   against 1 and p^(d-1).
2. Fig. 3: convergence of ||e_t||^2/||e_0||^2 with step 0.1/rho_max at w=25 and w=500, per
   depth, and the e.c.d.f. of K0/rho_max.
3. Fig. 4 (Experiment 2): GaLU vs ReLU on x ~ U([-1,1]^2), n=100, w=100: e.c.d.f. of
   K0/rho_max and convergence per depth.
4. Var[K0(s,s')]/E[K0]^2 grows with depth at fixed width (Thm. 2.2, variance part).

Writes ``dgn_experiments.json``, ``fig1_ecdf.png`` (Figs. 1-2) and ``fig3_4.png``
(Figs. 3-4 and the variance), PNG and SVG.

    python examples/kernels/dgn_experiments.py -o out/dgn
    python examples/kernels/dgn_experiments.py --quick -o /tmp/dgn
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
from gdln.kernels import (
    Gate,
    eq3_eigenvalues,
    gram_variance_by_depth,
    make_dataset,
    make_dgn,
    train_dgn,
    value_ntk_layerwise,
)

# %%
# The ideal spectrum of Eq. (3) of the DGN paper: the Gram matrix $K_0/d$ of $n$ identical
# inputs has $n-1$ eigenvalues $1 - p^{d-1}$ and one $1 + (n-1)p^{d-1}$; its e.c.d.f. is the
# cumulative sum of the sorted eigenvalues.


def _ecdf(eig: np.ndarray) -> np.ndarray:
    return np.cumsum(np.sort(eig))


def ideal_ecdf(n: int, p: float, d: int) -> np.ndarray:
    """e.c.d.f. of Eq. (3): n-1 eigenvalues 1 - p^(d-1), then one 1 + (n-1) p^(d-1)."""
    rho_max, rho_min = eq3_eigenvalues(n, p, d)
    return _ecdf(np.array([rho_min] * (n - 1) + [rho_max]))


# %%
# Experiment 1 (Figs. 1-2): the measured spectra of $K_0$ of DGN-FRG networks per depth and
# width, and their averaged diagonal and off-diagonal entries.


def frg_spectra(n: int, widths: list[int], depths: list[int], runs: int, p: float) -> list[dict]:
    x, _ = make_dataset("identical", n=n)
    rows = []
    for w in widths:
        for d in depths:
            eigs, diag, off = [], [], []
            for r in range(runs):
                net = make_dgn(
                    1,
                    w,
                    d,
                    mode="frg",
                    gate=Gate("bernoulli", p=p),
                    n_examples=n,
                    init="bernoulli",
                    sigma=1 / math.sqrt(p * w),
                    seed=r,
                )
                k = value_ntk_layerwise(net, x) / d
                eigs.append(np.linalg.eigvalsh(k))
                diag.append(k[0, 0])
                off.append(k[0, 1])
            eig = np.mean(eigs, axis=0)
            rho_max, rho_min = eq3_eigenvalues(n, p, d)
            ideal = np.array([rho_min] * (n - 1) + [rho_max])
            rows.append(
                {
                    "width": w,
                    "depth": d,
                    "rho_min": float(eig[0]),
                    "ideal_rho_min": rho_min,
                    "rho_max": float(eig[-1]),
                    "ideal_rho_max": rho_max,
                    "ecdf_max_gap_over_n": float(np.abs(_ecdf(eig) - _ecdf(ideal)).max() / n),
                    "diag_mean": float(np.mean(diag)),
                    "off_mean": float(np.mean(off)),
                    "ideal_off": p ** (d - 1),
                    "ecdf": _ecdf(eig).tolist(),
                    "ideal_ecdf": _ecdf(ideal).tolist(),
                }
            )
    return rows


# %%
# Figs. 3-4: how fast gradient descent shrinks the error
# $\lVert e_t\rVert^2/\lVert e_0\rVert^2$ per depth, for FRG, GaLU and ReLU gates.


def convergence(
    mode: str, dataset: str, n: int, w: int, depths: list[int], steps: int, seeds: int
) -> list[dict]:
    x, y = make_dataset(dataset, n=n, seed=0)
    rows = []
    for d in depths:
        ratios, conds, curves, ecdfs = [], [], [], []
        for s in range(seeds):
            if mode == "frg":
                net = make_dgn(
                    x.shape[1],
                    w,
                    d,
                    mode="frg",
                    gate=Gate("bernoulli"),
                    n_examples=n,
                    init="bernoulli",
                    seed=s,
                )
            else:
                net = make_dgn(x.shape[1], w, d, mode=mode, seed=s)
            k = value_ntk_layerwise(net, x)
            eig = np.linalg.eigvalsh(k)
            conds.append(float(eig[0] / eig[-1]))
            ecdfs.append(_ecdf(eig / eig[-1]))
            lr = 0.1 * n / eig[-1]  # train_dgn's loss is a mean: step 0.1/rho_max on K
            res = train_dgn(net, x, y, epochs=steps, lr=lr, optimizer="sgd", batch_size=n, seed=s)
            # full batch: losses[t] is 0.5 mean e_t^2 before step t+1, so the ratio of
            # losses is ||e_t||^2 / ||e_0||^2 for t = 0..steps-1
            curve = np.asarray(res.losses) / res.losses[0]
            curves.append(curve)
            ratios.append(float(curve[-1]))
        rows.append(
            {
                "depth": d,
                "loss_ratio": float(np.mean(ratios)),
                "loss_ratio_std": float(np.std(ratios, ddof=1)) if len(ratios) > 1 else 0.0,
                "loss_ratio_runs": ratios,
                "rho_min_over_rho_max": float(np.mean(conds)),
                "ratio_curve": np.mean(curves, axis=0).tolist(),
                "ecdf_over_rho_max": np.mean(ecdfs, axis=0).tolist(),
            }
        )
    return rows


# %%
# The figures: Figs. 1-2, then Figs. 3-4 with $\mathrm{Var}[K_0]$ against depth (Thm. 2.2).


def plot_fig1_2(res: dict, out: Path, p: float, formats: tuple[str, ...] = ("png", "svg")) -> None:
    """Fig. 1 (ideal and measured e.c.d.f. per width) and Fig. 2 (averaged entries)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = res["fig1_2"]
    widths = sorted({r["width"] for r in rows}, reverse=True)
    depths = sorted({r["depth"] for r in rows})
    colours = {d: plt.cm.viridis(k / max(1, len(depths) - 1)) for k, d in enumerate(depths)}
    cols = math.ceil((2 + len(widths)) / 2)
    fig, grid = plt.subplots(2, cols, figsize=(4.2 * cols, 6.6))
    axes = grid.reshape(-1)
    n = len(rows[0]["ecdf"])
    k = np.arange(1, n + 1)
    for d in depths:
        axes[0].plot(k, ideal_ecdf(n, p, d), color=colours[d], label=f"d={d}")
    axes[0].set_title("ideal e.c.d.f. of Eq. (3)", fontsize=9)
    for ax, w in zip(axes[1:], widths, strict=False):
        for r in rows:
            if r["width"] == w:
                d = r["depth"]
                ax.plot(k, r["ecdf"], color=colours[d], label=f"d={d}")
                ax.plot(k, r["ideal_ecdf"], color=colours[d], ls=":", lw=0.8)
        ax.set_title(f"DGN-FRG w={w}: eig(K0/d), dotted: ideal", fontsize=9)
    for ax in axes[: 1 + len(widths)]:
        ax.set_xlabel("index k (eigenvalues ascending)")
        ax.set_ylabel("cumulative sum of the first k eigenvalues")
    axes[0].legend(fontsize=7)
    ax = axes[-1]
    w = widths[0]
    sel = [r for r in rows if r["width"] == w]
    ds = [r["depth"] for r in sel]
    ax.plot(ds, [r["diag_mean"] for r in sel], "o-", label="diagonal K0(s,s)/d")
    ax.plot(ds, [1.0] * len(ds), "k:", lw=0.8)
    ax.plot(ds, [r["off_mean"] for r in sel], "s-", label="off-diagonal K0(s,s')/d")
    ax.plot(ds, [r["ideal_off"] for r in sel], "k--", lw=0.8, label="ideal 1 and p^(d-1)")
    ax.set_xlabel("depth d")
    ax.set_ylabel("entry, mean over runs")
    ax.set_title(f"Fig. 2: w={w}", fontsize=9)
    ax.legend(fontsize=7)
    runs = "" if "wall_s" not in res else f"; whole example: wall {res['wall_s']:.0f} s"
    fig.suptitle(f"DGN Figs. 1-2: DGN-FRG, p={p}, n={n} identical inputs{runs}", fontsize=9)
    save_figure(fig, out, "fig1_ecdf", tight=True, formats=formats)


def plot_fig3_4(res: dict, out: Path, formats: tuple[str, ...] = ("png", "svg")) -> None:
    """Fig. 3 (FRG convergence per width), Fig. 4 (GaLU vs ReLU) and Var[K0] by depth."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(f"DGN-FRG {k}, identical inputs", v) for k, v in res["fig3_frg"].items()]
    panels += [(f"{m} w={res['fig4_width']}, x ~ U([-1,1]^2)", v) for m, v in res["fig4"].items()]
    fig, axes = plt.subplots(2, len(panels) + 1, figsize=(3.4 * (len(panels) + 1), 6.2))
    for col, (title, rows) in enumerate(panels):
        for k, r in enumerate(rows):
            c = plt.cm.viridis(k / max(1, len(rows) - 1))
            axes[0, col].semilogy(r["ratio_curve"], color=c, label=f"d={r['depth']}")
            e = r["ecdf_over_rho_max"]
            axes[1, col].plot(np.arange(1, len(e) + 1), e, color=c, label=f"d={r['depth']}")
        axes[0, col].set_title(title, fontsize=8)
        axes[0, col].set_xlabel("GD step t (step size 0.1/rho_max)")
        axes[0, col].set_ylabel("||e_t||^2 / ||e_0||^2")
        axes[1, col].set_xlabel("index k (eigenvalues ascending)")
        axes[1, col].set_ylabel("cumulative sum of eig(K0)/rho_max")
        axes[0, col].legend(fontsize=6)
    v = res["variance"]
    ax = axes[0, -1]
    ax.errorbar(
        v["depths"],
        v["rel_var_diag"],
        [2 * s for s in v["rel_var_diag_se"]],
        marker="o",
        capsize=3,
        label="diagonal K0(s,s)",
    )
    ax.errorbar(
        v["depths"],
        v["rel_var_off"],
        [2 * s for s in v["rel_var_off_se"]],
        marker="s",
        capsize=3,
        label="off-diagonal K0(s,s')",
    )
    ax.set_yscale("log")
    ax.set_xlabel("depth d")
    ax.set_ylabel("Var[K0] / E[K0]^2 (± 2 s.e.)")
    ax.set_title(f"DGN-FRG w={v['width']}: relative variance", fontsize=8)
    ax.legend(fontsize=7)
    axes[1, -1].axis("off")
    runs = "" if "wall_s" not in res else f"; whole example: wall {res['wall_s']:.0f} s"
    fig.suptitle(f"DGN Figs. 3-4 and Var[K0] by depth{runs}", fontsize=9)
    save_figure(fig, out, "fig3_4", tight=True, formats=formats)


# %%
# Run the four experiments and write the figures and ``dgn_experiments.json``.


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("-o", "--out", type=Path, default=Path("out/dgn_experiments"))
    args = ap.parse_args(argv)
    q = args.quick
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # many small products: a second thread only adds overhead
    t0 = time.perf_counter()
    fig4_width = 8 if q else 100
    try:
        res = {
            "fig1_2": frg_spectra(
                20 if q else 200,
                [5, 40] if q else [25, 500],
                [2, 4] if q else [2, 4, 6, 8, 12, 16, 20],
                2 if q else 20,
                0.5,
            ),
            "fig3_frg": {
                f"w={w}": convergence(
                    "frg",
                    "identical",
                    20 if q else 200,
                    w,
                    [2, 4] if q else [2, 4, 6, 8, 12],
                    5 if q else 100,
                    1 if q else 5,
                )
                for w in ([8] if q else [25, 500])
            },
            "fig4_width": fig4_width,
            "fig4": {
                mode: convergence(
                    mode,
                    "uniform2d",
                    20 if q else 100,
                    fig4_width,
                    [2, 3] if q else [2, 4, 6, 8, 10],
                    5 if q else 100,
                    1 if q else 5,
                )
                for mode in ("galu", "relu")
            },
        }
        var = gram_variance_by_depth(
            8 if q else 25, [2, 3] if q else [2, 4, 6, 8, 10], n_samples=30 if q else 1000, seed=0
        )
    finally:
        torch.set_num_threads(threads)
    res["variance"] = {
        "width": var.width,
        "depths": list(var.depths),
        "rel_var_diag": var.rel_var_diag.tolist(),
        "rel_var_diag_se": var.rel_var_diag_se.tolist(),
        "rel_var_off": var.rel_var_off.tolist(),
        "rel_var_off_se": var.rel_var_off_se.tolist(),
    }
    res["wall_s"] = time.perf_counter() - t0
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "dgn_experiments.json").write_text(json.dumps(res, indent=1))
    formats = ("png",) if q else ("png", "svg")  # quick runs: no SVG
    plot_fig1_2(res, args.out, 0.5, formats)
    plot_fig3_4(res, args.out, formats)
    print("Fig 1-2 (FRG, identical inputs): w, d, rho_min (ideal), diag (1), off (ideal)")
    for r in res["fig1_2"]:
        print(
            f"  w={r['width']:4d} d={r['depth']:2d} rho_min={r['rho_min']:.3f} "
            f"({r['ideal_rho_min']:.3f}) diag={r['diag_mean']:.3f} "
            f"off={r['off_mean']:.4f} ({r['ideal_off']:.4f}) "
            f"max|ecdf - ideal|/n={r['ecdf_max_gap_over_n']:.3f}"
        )
    for key, rows in [*res["fig3_frg"].items(), *res["fig4"].items()]:
        print(
            f"convergence {key}: "
            + ", ".join(
                f"d={r['depth']}: ratio {r['loss_ratio']:.3g} +- {r['loss_ratio_std']:.2g}, "
                f"rho_min/rho_max "
                f"{r['rho_min_over_rho_max']:.3g}"
                for r in rows
            )
        )
    print(
        f"Var[K0]/E[K0]^2 by depth (w={var.width}), diagonal/off-diagonal:",
        ", ".join(
            f"d={d}: {a:.3g}±{sa:.2g}/{b:.3g}±{sb:.2g}"
            for d, a, sa, b, sb in zip(
                var.depths,
                var.rel_var_diag,
                var.rel_var_diag_se,
                var.rel_var_off,
                var.rel_var_off_se,
                strict=True,
            )
        ),
    )
    print(f"wall {res['wall_s']:.0f} s")
    return res


# %%
# Run the example. The documentation runs ``main`` in its ``--quick`` mode (the command line
# gives ``--quick -o DIR``); the figures it writes are shown below.

if __name__ == "__main__":
    main()
