"""Experiments 1-2 and Figs. 1-4 of the Deep Gated Networks paper, plus Var[K0] vs depth.

1. Fig. 1-2: DGN-FRG (p=1/2, sigma=sqrt(2/w)) on n=200 identical inputs; e.c.d.f. of the
   eigenvalues of K0/d against the ideal Eq. (3) for depths 2..20 at w=500 and w=25, and one
   diagonal / off-diagonal entry averaged over runs against 1 and p^(d-1).
2. Fig. 3: convergence of ||e_t||^2/||e_0||^2 with step 0.1/rho_max at w=100, per depth.
3. Fig. 4 (Experiment 2): GaLU vs ReLU on x ~ U([-1,1]^2), n=100, w=100: spectrum and
   convergence per depth.
4. Var[K0(s,s')]/E[K0]^2 grows with depth at fixed width (Thm. 2.2, variance part).

    python examples/dgn_experiments.py -o out/dgn
    python examples/dgn_experiments.py --quick -o /tmp/dgn
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

from gdln._dgn import Gate, make_dataset, make_dgn, train_dgn
from gdln._dgn_theory import eq3_eigenvalues, gram_variance_by_depth
from gdln._ntk import value_ntk_layerwise


def _ecdf(eig: np.ndarray) -> np.ndarray:
    return np.cumsum(np.sort(eig))


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
                }
            )
    return rows


def convergence(
    mode: str, dataset: str, n: int, w: int, depths: list[int], steps: int, seeds: int
) -> list[dict]:
    x, y = make_dataset(dataset, n=n, seed=0)
    rows = []
    for d in depths:
        ratios, conds = [], []
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
            lr = 0.1 * n / eig[-1]  # train_dgn's loss is a mean: step 0.1/rho_max on K
            res = train_dgn(net, x, y, epochs=steps, lr=lr, optimizer="sgd", batch_size=n, seed=s)
            e0 = net(x)[:, 0] - y  # ||e_T||^2 / ||e_0||^2 with the loss 0.5 mean e^2
            ratios.append(2 * res.losses[-1] / float((e0**2).mean()))
        rows.append(
            {
                "depth": d,
                "loss_ratio": float(np.mean(ratios)),
                "rho_min_over_rho_max": float(np.mean(conds)),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("-o", "--out", type=Path, default=Path("out/dgn_experiments"))
    args = ap.parse_args(argv)
    q = args.quick
    res = {
        "fig1_2": frg_spectra(
            20 if q else 200,
            [5, 40] if q else [25, 500],
            [2, 4] if q else [2, 4, 6, 8, 12, 16, 20],
            2 if q else 10,
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
                1 if q else 2,
            )
            for w in ([8] if q else [25, 500])
        },
        "fig4": {
            mode: convergence(
                mode,
                "uniform2d",
                20 if q else 100,
                8 if q else 100,
                [2, 3] if q else [2, 4, 6, 8, 10],
                5 if q else 100,
                1 if q else 3,
            )
            for mode in ("galu", "relu")
        },
    }
    var = gram_variance_by_depth(
        8 if q else 25, [2, 3] if q else [2, 4, 6, 8, 10], n_samples=30 if q else 1000, seed=0
    )
    res["variance"] = {
        "width": var.width,
        "depths": list(var.depths),
        "rel_var_diag": var.rel_var_diag.tolist(),
        "rel_var_diag_se": var.rel_var_diag_se.tolist(),
        "rel_var_off": var.rel_var_off.tolist(),
        "rel_var_off_se": var.rel_var_off_se.tolist(),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "dgn_experiments.json").write_text(json.dumps(res, indent=1))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    widths = sorted({r["width"] for r in res["fig1_2"]})
    fig, axes = plt.subplots(1, len(widths), figsize=(4 * len(widths), 3.2))
    for ax, w in zip(np.atleast_1d(axes), widths, strict=True):
        for r in res["fig1_2"]:
            if r["width"] == w:
                ax.plot(r["ecdf"], label=f"d={r['depth']}")
        ax.set_title(f"DGN-FRG, w={w}: e.c.d.f. of eig(K0/d)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(args.out / "fig1_ecdf.png", dpi=120)
    plt.close(fig)
    print("Fig 1-2 (FRG, identical inputs): w, d, rho_min (ideal), diag (1), off (ideal)")
    for r in res["fig1_2"]:
        print(
            f"  w={r['width']:4d} d={r['depth']:2d} rho_min={r['rho_min']:.3f} "
            f"({r['ideal_rho_min']:.3f}) diag={r['diag_mean']:.3f} "
            f"off={r['off_mean']:.4f} ({r['ideal_off']:.4f})"
        )
    for key, rows in [*res["fig3_frg"].items(), *res["fig4"].items()]:
        print(
            f"convergence {key}: "
            + ", ".join(
                f"d={r['depth']}: ratio {r['loss_ratio']:.3g}, rho_min/rho_max "
                f"{r['rho_min_over_rho_max']:.3g}"
                for r in rows
            )
        )
    print(
        f"Var[K0]/E[K0]^2 by depth (w={var.width}):",
        ", ".join(
            f"d={d}: {a:.3g}/{b:.3g}"
            for d, a, b in zip(var.depths, var.rel_var_diag, var.rel_var_off, strict=True)
        ),
    )
    return res


if __name__ == "__main__":
    main()
