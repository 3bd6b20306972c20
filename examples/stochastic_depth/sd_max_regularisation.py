"""Fig. 3, Lemma 2 and Thm. 1 of Hayou & Ayed: the mode that maximises the SD regulariser.

At initialisation (He init, ReLU, Vanilla ResNet50, width 512 in the paper) Thm. 1 says
E_W[g_l] is the same for every layer, so the budget-constrained maximiser p* of
sum_l p_l (1 - p_l) g_l (Lemma 2) is the uniform mode. We measure g_l (Eq. 5, Gauss-Newton
part, with sd_penalty) on `inits` independent initialisations, report its spread across
layers against the Monte Carlo standard error, and the distance of p* (from the averaged
g_l and from a single trained network) to the uniform mode at budget 0.7.

With plain scaling (the paper's Vanilla ResNet) the forward signal grows like 2^l and the
backward one like 2^(L-l), so g_l ~ 2^L for every l; --scaling stable is also available.

Writes sd_max_regularisation.{md,json} and sd_max_regularisation.{png,svg}: E_W[g_l] per
layer with its standard error, and p*_l per layer against the uniform mode.

    python examples/stochastic_depth/sd_max_regularisation.py -o out/
    python examples/stochastic_depth/sd_max_regularisation.py --quick -o out/
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from gdln.sd import SDResNet, max_regularisation_mode, sd_penalty, survival_probabilities, train_sd

# %%
# Fig. 3: $E_W[g_l]$ per layer with its standard error, and the maximiser $p^*$ of Lemma 2
# beside the uniform mode.


def plot(result: dict, args: argparse.Namespace, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    import gdln

    ell = np.arange(1, args.L + 1)
    g, se = np.array(result["g_init_mean"]), np.array(result["g_init_se"])
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    ax = axes[0]
    ax.errorbar(ell, g, yerr=se, fmt="ko", ms=3, capsize=2, label="E_W[g_l] (+- 1 SE)")
    ax.axhline(g.mean(), color="r", ls="--", lw=1, label="mean over layers")
    ax.set_yscale("log")
    ax.set_xlabel("layer l")
    ax.set_ylabel("g_l (Eq. 5, squared output change per gate)")
    ax.set_title(
        f"at init, {args.inits} inits, {args.scaling} ResNet, L = {args.L}, width {args.width}",
        fontsize=9,
    )
    ax.legend(fontsize=7)
    ax = axes[1]
    ax.plot(ell, result["p_star_init"], "ko-", ms=3, lw=1, label="p* from E_W[g_l] at init")
    ax.plot(
        ell,
        result["p_star_trained"],
        "bs-",
        ms=3,
        lw=1,
        label=f"p* after {args.steps} SD steps (Stable net)",
    )
    ax.axhline(args.budget, color="r", ls="--", lw=1, label=f"uniform {args.budget} (Thm. 1)")
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("layer l")
    ax.set_ylabel("survival probability p*_l (Lemma 2)")
    ax.set_title(f"maximiser of sum p(1-p) g at budget {args.budget}", fontsize=9)
    ax.legend(fontsize=7)
    return gdln.save_figure(fig, out, "sd_max_regularisation", dpi=110, tight=True)


# %%
# The command line and the report.


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("-o", "--out", default="out")
    ap.add_argument("--L", type=int, default=50)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--inits", type=int, default=10)
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--budget", type=float, default=0.7)
    ap.add_argument("--scaling", default="plain", choices=["plain", "stable"])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.quick:
        # enough initialisations for the test of Thm. 1 to have a standard error to go by
        args.L, args.width, args.inits, args.n, args.steps = 6, 16, 24, 16, 10
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small products: threads only add overhead on a shared CPU
    try:
        result = run(args)
    finally:
        torch.set_num_threads(threads)
    lines = [
        f"E_W[g_l] at init over {args.inits} inits (L = {args.L}, width {args.width}, "
        f"{args.scaling}):",
        f"  layers 1, L/2, L: {fmt_g(result, 0)}, {fmt_g(result, args.L // 2)}, "
        f"{fmt_g(result, -1)}",
        f"  (max - min)/mean over layers = {result['relative_spread_init']:.3f}; "
        f"std over layers / mean SE = {result['std_over_layers_in_se_units']:.2f}",
        f"  Lemma 2 p* from E_W[g]: max |p*_l - {args.budget}| = "
        f"{result['p_star_init_max_dev_from_uniform']:.3f}",
        f"  after {args.steps} SD steps: max |p*_l - {args.budget}| = "
        f"{result['p_star_trained_max_dev_from_uniform']:.3f}",
    ]
    report = "\n".join(lines)
    (out / "sd_max_regularisation.json").write_text(json.dumps(result))
    (out / "sd_max_regularisation.md").write_text(report + "\n")
    plot(result, args, out)
    print(report)
    return result


def fmt_g(result: dict, ell: int) -> str:
    return f"{result['g_init_mean'][ell]:.4g} +- {result['g_init_se'][ell]:.2g}"


# %%
# Measure $g_l$ (Eq. 5) on independent initialisations and on a trained network, and solve
# Lemma 2's budget-constrained maximisation (Thm. 1: uniform at initialisation).


def run(args: argparse.Namespace) -> dict:
    gen = torch.Generator().manual_seed(args.seed)
    d = 256
    beta = torch.randn(d, generator=gen) / np.sqrt(d)
    p = survival_probabilities("uniform", args.L, p_L=args.budget)
    gs = []
    for _ in range(args.inits):
        x = torch.randn(args.n, d, generator=gen)
        net = SDResNet(
            d, args.width, 1, args.L, p, scaling=args.scaling, generator=gen, device="cpu"
        )
        gs.append(sd_penalty(net, x)[1])
    gs = np.array(gs)
    g_mean = gs.mean(0)
    g_se = gs.std(0, ddof=1) / np.sqrt(args.inits)
    spread = float((g_mean.max() - g_mean.min()) / g_mean.mean())
    z = float(np.std(g_mean) / np.mean(g_se))  # ~1 when layers differ only by MC noise
    p_star, C = max_regularisation_mode(g_mean, args.budget * args.L)
    # after training a network with SD, g_l need not be flat and p* may move away
    x = torch.randn(256, d, generator=gen)
    y = torch.sin(x @ beta)[:, None]
    # (a Stable net, so that plain-scaling explosion does not dominate training)
    net = SDResNet(d, args.width, 1, args.L, p, scaling="stable", generator=gen, device="cpu")
    train_sd(net, x, y, steps=args.steps, lr=0.05, generator=gen)
    g_trained = sd_penalty(net, x)[1]
    p_trained, _ = max_regularisation_mode(g_trained, args.budget * args.L)
    result = {
        "g_init_runs": gs.tolist(),
        "g_init_mean": g_mean.tolist(),
        "g_init_se": g_se.tolist(),
        "relative_spread_init": spread,
        "std_over_layers_in_se_units": z,
        "p_star_init_max_dev_from_uniform": float(np.abs(p_star - args.budget).max()),
        "p_star_init": p_star.tolist(),
        "C_init": C,
        "g_trained": g_trained.tolist(),
        "p_star_trained": p_trained.tolist(),
        "p_star_trained_max_dev_from_uniform": float(np.abs(p_trained - args.budget).max()),
        "meta": {k: v for k, v in vars(args).items() if k != "out"},
    }
    return result


# %%
# Run the example. The documentation runs ``main`` in its ``--quick`` mode (the command line
# gives ``--quick -o DIR``); the figures it writes are shown below.

if __name__ == "__main__":
    main()
