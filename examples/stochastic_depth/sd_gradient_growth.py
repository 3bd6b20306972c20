"""Table 1 / Fig. 2 of Hayou & Ayed: gradient growth q_l at initialisation, measured vs Prop. 1.

Vanilla ReLU ResNet (FC blocks), He init, width 512, L = 50, budget 0.7, 500 Monte Carlo
samples (fresh weights, mask, input and target each; one set of weights is shared by the
modes of a sample, which keeps each mode's estimate unbiased). Reported as the paper does:
the per-layer growth rate q_l^(1/(L-l)) at l = 0, 10, 20, 30, 40, theory in parentheses.
Also the Stable ResNet (1/sqrt(L)), where Prop. 1's argument gives factors 1 + p/L.

Writes sd_gradient_growth.{md,json} and sd_gradient_growth.{png,svg}.

    python examples/stochastic_depth/sd_gradient_growth.py -o out/          # full (11 min on a busy 2-core CPU)
    python examples/stochastic_depth/sd_gradient_growth.py --quick -o out/  # seconds
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from gdln.sd import SDResNet, gradient_growth, growth_rate, mode_for_budget

PAPER_TABLE_1 = {  # Table 1 / Table 5 of Hayou & Ayed (budget 0.7, L = 50, width 512)
    "standard": {0: 2.001, 10: 2.001, 20: 2.001, 30: 2.001, 40: 1.999},
    "uniform": {0: 1.705, 10: 1.708, 20: 1.707, 30: 1.716, 40: 1.739},
    "linear": {0: 1.694, 10: 1.633, 20: 1.569, 30: 1.555, 40: 1.530},
}


# %%
# Monte Carlo estimate of the gradient growth $q_l$ at initialisation per mode, beside Prop.
# 1.


def measure(L: int, width: int, samples: int, budget: float, seed: int) -> dict:
    modes = {
        "standard": np.ones(L),
        "uniform": mode_for_budget("uniform", L, budget * L),
        "linear": mode_for_budget("linear", L, budget * L),
    }
    gen = torch.Generator().manual_seed(seed)
    ratios = {(m, sc): [] for m in modes for sc in ("plain", "stable")}
    for _ in range(samples):
        net = SDResNet(width, width, 1, L, np.ones(L), generator=gen, device="cpu")
        x = torch.randn(1, width, generator=gen)
        z = torch.randn(1, 1, generator=gen)
        for name, p in modes.items():
            delta = (torch.rand(L, generator=gen) < torch.tensor(p, dtype=torch.float32)).float()
            for sc in ("plain", "stable"):
                net.kappa = 1.0 if sc == "plain" else 1.0 / np.sqrt(L)
                out, hidden = net(x, delta, return_hidden=True)
                grads = torch.autograd.grad(0.5 * ((out - z) ** 2).sum(), hidden)
                norms = np.array([float((g.double() ** 2).sum()) for g in grads])
                ratios[(name, sc)].append(norms / norms[-1])
    result = {}
    for (name, sc), r in ratios.items():
        r = np.array(r)
        q = r.mean(0)
        theory = gradient_growth(modes[name], scaling=sc)
        result[f"{name}/{sc}"] = {
            "p": modes[name].tolist(),
            "q": q.tolist(),
            "stderr": (r.std(0, ddof=1) / np.sqrt(len(r))).tolist(),
            "theory": theory.tolist(),
            "rate": growth_rate(q).tolist(),
            "rate_theory": growth_rate(theory).tolist(),
        }
    return result


# %%
# Table 1 (the per-layer growth rate $q_l^{1/(L-l)}$, theory in parentheses) and Fig. 2.


def table(result: dict, L: int) -> str:
    rows = list(range(0, L, max(1, L // 5)))[:5]
    head = "| l | standard | uniform | linear | paper standard | paper uniform | paper linear |"
    lines = [head, "|" + "---|" * 7]
    for ell in rows:
        cells = []
        for m in ("standard", "uniform", "linear"):
            r = result[f"{m}/plain"]
            cells.append(f"{r['rate'][ell]:.3f} ({r['rate_theory'][ell]:.3f})")
        paper = [
            f"{PAPER_TABLE_1[m][ell]:.3f}" if ell in PAPER_TABLE_1[m] else "-"
            for m in ("standard", "uniform", "linear")
        ]
        lines.append(f"| {ell} | " + " | ".join(cells + paper) + " |")
    lines.append("")
    lines.append("Stable ResNet (1/sqrt L): q_0 measured (theory prod(1 + p_k/L))")
    for m in ("standard", "uniform", "linear"):
        r = result[f"{m}/stable"]
        lines.append(f"- {m}: {r['q'][0]:.4g} +- {r['stderr'][0]:.2g} ({r['theory'][0]:.4g})")
    return "\n".join(lines)


def plot(result: dict, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    import gdln

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, sc in zip(axes, ("plain", "stable"), strict=True):
        for m, color in zip(("standard", "uniform", "linear"), "krb", strict=True):
            r = result[f"{m}/{sc}"]
            ell = np.arange(len(r["q"]))
            ax.errorbar(
                ell,
                r["q"],
                yerr=2 * np.array(r["stderr"]),
                fmt=color + "o",
                ms=3,
                capsize=1.5,
                label=f"{m} (MC +- 2 SE)",
            )
            ax.plot(ell, r["theory"], color + "-", lw=1, label=f"{m} (Prop. 1)")
        ax.set_yscale("log" if sc == "plain" else "linear")
        ax.set_xlabel("layer l")
        ax.set_ylabel("q_l = E |grad_{y_l} L|^2 / |grad_{y_L} L|^2")
        ax.set_title(f"{sc} ResNet" + (" (1/sqrt L)" if sc == "stable" else ""))
        ax.legend(fontsize=7)
    return gdln.save_figure(fig, out, "sd_gradient_growth", dpi=110, tight=True)


# %%
# Run and write the table, JSON and figure.


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny sizes for tests")
    ap.add_argument("-o", "--out", default="out", help="output folder")
    ap.add_argument("--L", type=int, default=50)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--samples", type=int, default=500)
    ap.add_argument("--budget", type=float, default=0.7, help="average survival L_bar / L")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.quick:
        args.L, args.width, args.samples = 4, 256, 60
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # batch-1 products: threads only add overhead
    t0 = time.perf_counter()
    try:
        result = measure(args.L, args.width, args.samples, args.budget, args.seed)
    finally:
        torch.set_num_threads(threads)
    meta = {k: v for k, v in vars(args).items() if k != "out"}
    meta["seconds"] = time.perf_counter() - t0
    (out / "sd_gradient_growth.json").write_text(json.dumps({"meta": meta, "result": result}))
    text = table(result, args.L)
    (out / "sd_gradient_growth.md").write_text(text + "\n")
    plot(result, out)
    print(text)
    return result


# %%
# Run the example. The documentation runs ``main`` in its ``--quick`` mode (the command line
# gives ``--quick -o DIR``); the figures it writes are shown below.

if __name__ == "__main__":
    main()
