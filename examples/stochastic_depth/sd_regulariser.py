"""Table 3 of Hayou & Ayed: SD loss vs average-network loss plus the regulariser of Eq. (6).

Part A (ReLU, as in the paper): Vanilla Stable ResNet (FC blocks + ReLU, 1/sqrt(L)),
uniform mode p = 0.8, toy regression y = sin(beta^T x), x ~ N(0, I_256). The SD loss L is a
Monte Carlo average over masks (standard error reported), L_bar is the average network's
loss and pen = 1/2 sum_l p_l (1 - p_l) g_l (Gauss-Newton part, Eq. 5), both exact.
Deviation from the paper: beta ~ N(0, I/256) instead of N(0, I) so that beta^T x has unit
variance (with N(0, I) the target is a near-random function of x); width 128 instead of 256
and full-batch GD, to fit a CPU.

Part B (linear, exact): the same columns for a linear SD chain network with 4 modes, where
every term is exact (gdln.sd.chain_regulariser): the expected loss, the exact
average-network loss, the paper's Taylor form of it, the paper's penalty (derivative at
delta = 1) and the exact variance term.

Writes sd_regulariser.{md,json} and sd_regulariser.{png,svg}: the SD loss against the
average-network loss with and without the penalty over training, for both parts.

    python examples/stochastic_depth/sd_regulariser.py -o out/          # full (a few minutes on 2 cores)
    python examples/stochastic_depth/sd_regulariser.py --quick -o out/
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from gdln.sd import (
    SDResNet,
    average_network_loss,
    chain_regulariser,
    sd_loss_monte_carlo,
    sd_penalty,
    simulate_sd_gd,
    survival_probabilities,
    train_sd,
)

PAPER_TABLE_3 = [  # epoch, |L - L_bar|/L, |L - L_bar - pen|/L, ratio
    (0, 0.015, 0.003, 5.7),
    (40, 0.389, 0.084, 4.6),
    (80, 0.651, 0.183, 3.5),
    (120, 0.856, 0.231, 3.7),
    (160, 0.884, 0.245, 3.6),
]


# %%
# Part A (ReLU, Monte Carlo over masks): the toy regression $y = \sin(\beta^\top x)$ and the
# SD loss against the average network's loss plus the penalty of Eq. (6).


def toy_regression(n: int, d: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    beta = torch.randn(d, generator=gen) / np.sqrt(d)
    x = torch.randn(n, d, generator=gen)
    return x, torch.sin(x @ beta)[:, None]


def part_a(
    L: int, width: int, n: int, steps: int, checkpoints: int, masks: int, lr: float, seed: int
) -> list[dict]:
    gen = torch.Generator().manual_seed(seed)
    x, y = toy_regression(n, 256, gen)
    p = survival_probabilities("uniform", L, p_L=0.8)
    net = SDResNet(256, width, 1, L, p, scaling="stable", generator=gen, device="cpu")
    rows = []
    done = 0
    for k in range(checkpoints + 1):
        target = round(k * steps / checkpoints)
        if target > done:
            train_sd(net, x, y, steps=target - done, lr=lr, generator=gen)
            done = target
        sd, se = sd_loss_monte_carlo(net, x, y, masks=masks, generator=gen)
        avg = average_network_loss(net, x, y)
        pen, g = sd_penalty(net, x)
        rows.append(
            {
                "step": done,
                "sd_loss": sd,
                "sd_loss_se": se,
                "average_loss": avg,
                "penalty": pen,
                "gap": abs(sd - avg) / sd,
                "gap_with_penalty": abs(sd - avg - pen) / sd,
                "g_first_last": [float(g[0]), float(g[-1])],
            }
        )
    return rows


# %%
# Part B (linear chains, every term exact): the same columns from
# :func:`gdln.sd.chain_regulariser`.

LINEAR = {"s": [3.0, 2.0, 1.0, 0.5], "d": 1.0, "scaling": "stable", "mask": "unscaled"}


def part_b(L: int, steps: int, checkpoints: int, lr: float, seed: int) -> list[dict]:
    s = np.array(LINEAR["s"])
    chain = {**LINEAR, "s": s}
    p = survival_probabilities("uniform", L, p_L=0.8)
    b0 = np.full((L, s.size), 0.01)
    every = max(1, steps // checkpoints)
    sim = simulate_sd_gd(b0, p, lr=lr, steps=steps, runs=1, seed=seed, record_every=every, **chain)
    rows = []
    for t, bk in zip(sim.t, sim.series["b"][:, 0], strict=True):
        r = chain_regulariser(bk, p, const=0.5 * float(np.sum(s**2)), **chain)
        e = r.expected_loss
        rows.append(
            {
                "t": float(t),
                "expected_loss": e,
                "average_loss": r.average_loss,
                "average_loss_taylor": r.average_loss_taylor,
                "penalty_paper": r.penalty_paper,
                "penalty_exact": r.penalty_exact,
                "penalty_first_order": r.penalty_first_order,
                "gap": abs(e - r.average_loss) / e,
                "gap_with_penalty": abs(e - r.average_loss - r.penalty_paper) / e,
                "gap_paper_form": abs(e - r.paper_approximation) / e,
                "gap_first_order": abs(e - r.average_loss - r.penalty_first_order) / e,
                "b": bk.tolist(),
            }
        )
    return rows


# %%
# Table 3, and the figure.


def text(a: list[dict], b: list[dict]) -> str:
    lines = [
        "Part A (ReLU Stable ResNet, MC over masks):",
        "",
        "| step | L (MC +- SE) | L_bar | pen | abs(L-L_bar)/L | abs(L-L_bar-pen)/L | ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in a:
        ratio = r["gap"] / r["gap_with_penalty"] if r["gap_with_penalty"] > 0 else float("inf")
        lines.append(
            f"| {r['step']} | {r['sd_loss']:.4g} +- {r['sd_loss_se']:.1g} | "
            f"{r['average_loss']:.4g} | {r['penalty']:.3g} | {r['gap']:.3f} | "
            f"{r['gap_with_penalty']:.3f} | x{ratio:.1f} |"
        )
    lines += [
        "",
        "Paper (Table 3, ResNet50 width 256, epochs):",
        "",
        "| epoch | abs(L-L_bar)/L | abs(L-L_bar-pen)/L | ratio |",
        "|---|---|---|---|",
    ]
    lines += [f"| {e} | {g:.3f} | {gp:.3f} | x{r:.1f} |" for e, g, gp, r in PAPER_TABLE_3]
    lines += [
        "",
        "Part B (linear chains, every term exact):",
        "",
        "| t | E L | abs(EL-L_bar)/EL | with pen (Eq. 6) | Taylor L_bar + pen | "
        "first order at mean |",
        "|---|---|---|---|---|---|",
    ]
    for r in b:
        lines.append(
            f"| {r['t']:.3g} | {r['expected_loss']:.4g} | {r['gap']:.4f} | "
            f"{r['gap_with_penalty']:.4f} | {r['gap_paper_form']:.4f} | "
            f"{r['gap_first_order']:.2e} |"
        )
    return "\n".join(lines)


def plot(a: list[dict], b: list[dict], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    import gdln

    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    step = np.array([r["step"] for r in a])
    sd = np.array([r["sd_loss"] for r in a])
    se = np.array([r["sd_loss_se"] for r in a])
    avg = np.array([r["average_loss"] for r in a])
    pen = np.array([r["penalty"] for r in a])
    ax = axes[0]
    ax.errorbar(step, sd, yerr=2 * se, fmt="ko", ms=4, capsize=2, label="SD loss (MC +- 2 SE)")
    ax.plot(step, avg, "b^--", ms=4, lw=1, label="average network L_bar")
    ax.plot(step, avg + pen, "rs-", ms=4, lw=1, label="L_bar + penalty (Eq. 6)")
    ax.set_yscale("log")
    ax.set_xlabel("training step (full-batch GD)")
    ax.set_ylabel("training loss")
    ax.set_title("ReLU Stable ResNet: losses", fontsize=9)
    ax.legend(fontsize=7)
    ax = axes[1]
    ax.errorbar(
        step,
        np.abs(sd - avg) / sd,
        yerr=2 * se / sd,
        fmt="b^--",
        ms=4,
        capsize=2,
        lw=1,
        label="|L - L_bar| / L",
    )
    ax.errorbar(
        step,
        np.abs(sd - avg - pen) / sd,
        yerr=2 * se / sd,
        fmt="rs-",
        ms=4,
        capsize=2,
        lw=1,
        label="|L - L_bar - pen| / L",
    )
    ax.set_xlabel("training step (full-batch GD)")
    ax.set_ylabel("relative gap (MC +- 2 SE)")
    ax.set_title("ReLU Stable ResNet: Table 3 columns", fontsize=9)
    ax.legend(fontsize=7)
    ax = axes[2]
    t = np.array([r["t"] for r in b])
    for key, fmt, label in (
        ("gap", "b^--", "|EL - L_bar| / EL"),
        ("gap_with_penalty", "rs-", "|EL - L_bar - pen| / EL (Eq. 6, derivative at 1)"),
        ("gap_first_order", "g.:", "same, first Hoeffding order at the mean"),
    ):
        ax.plot(t[1:], [r[key] for r in b[1:]], fmt, ms=4, lw=1, label=label)
    ax.set_yscale("log")
    ax.set_xlabel("t = lr x step")
    ax.set_ylabel("relative gap")
    ax.set_title("linear SD chains: every term exact (t > 0)", fontsize=9)
    ax.legend(fontsize=7)
    return gdln.save_figure(fig, out, "sd_regulariser", dpi=110, tight=True)


# %%
# Run both parts and write the table, JSON and figure.


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("-o", "--out", default="out")
    ap.add_argument("--L", type=int, default=50)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--checkpoints", type=int, default=4)
    ap.add_argument("--masks", type=int, default=200)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.quick:
        args.L, args.width, args.n, args.steps, args.masks = 6, 32, 64, 20, 400
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small products: threads only add overhead on a shared CPU
    try:
        a = part_a(
            args.L, args.width, args.n, args.steps, args.checkpoints, args.masks, args.lr, args.seed
        )
    finally:
        torch.set_num_threads(threads)
    b = part_b(args.L, 20 * args.steps, args.checkpoints, args.lr, args.seed)
    meta = {k: v for k, v in vars(args).items() if k != "out"}
    meta["seconds"] = time.perf_counter() - t0
    p = survival_probabilities("uniform", args.L, p_L=0.8)
    result = {"meta": meta, "relu": a, "linear": b, "linear_setup": {"p": p.tolist(), **LINEAR}}
    (out / "sd_regulariser.json").write_text(json.dumps(result))
    report = text(a, b)
    (out / "sd_regulariser.md").write_text(report + "\n")
    plot(a, b, out)
    print(report)
    return result


# %%
# Run the example. The documentation runs ``main`` in its ``--quick`` mode (the command line
# gives ``--quick -o DIR``); the figures it writes are shown below.

if __name__ == "__main__":
    main()
