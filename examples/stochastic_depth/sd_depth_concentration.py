"""Lemma 1 / Fig. 1a of Hayou & Ayed: the depth of the SD subnetwork concentrates.

The depth L_delta = sum_l delta_l of a ResNet100 under SD at average survival L_bar/L = 0.5,
uniform and linear modes. Its exact distribution (a Poisson-binomial, by convolving the L
Bernoulli laws) against the Bennett bound of Lemma 1, |L_delta - L_p| <= v_p u^{-1}(log(2 /
beta) / v_p) with probability >= 1 - beta, and a Monte Carlo check of the tail frequency.

Writes sd_depth_concentration.{md,json} and sd_depth_concentration.{png,svg}.

    python examples/stochastic_depth/sd_depth_concentration.py -o out/          # full (seconds)
    python examples/stochastic_depth/sd_depth_concentration.py --quick -o out/
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from gdln.sd import depth_concentration, mode_for_budget

# %%
# The exact law of the depth $L_\delta = \sum_l \delta_l$: the Poisson-binomial, by convolving
# the $L$ Bernoulli laws.


def depth_distribution(p: np.ndarray) -> np.ndarray:
    """P(L_delta = k), k = 0..L, by convolving the Bernoulli(p_l) laws."""
    pmf = np.array([1.0])
    for pl in p:
        pmf = np.convolve(pmf, [1.0 - pl, pl])
    return pmf


# %%
# For the uniform and the linear mode: the Bennett bound of Lemma 1, the exact probability
# outside it and a Monte Carlo check.


def run(L: int, budget: float, beta: float, samples: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    out = {}
    for mode in ("uniform", "linear"):
        p = mode_for_budget(mode, L, budget * L)
        c = depth_concentration(p, beta=beta)
        pmf = depth_distribution(p)
        k = np.arange(L + 1)
        outside = np.abs(k - c.mean) > c.bound
        depth = (rng.random((samples, L)) < p).sum(axis=1)
        out[mode] = {
            "p": p.tolist(),
            "mean": c.mean,
            "variance": c.variance,
            "bound": c.bound,
            "pmf": pmf.tolist(),
            "pmf_mean": float(np.sum(k * pmf)),
            "pmf_variance": float(np.sum((k - np.sum(k * pmf)) ** 2 * pmf)),
            "tail_exact": float(pmf[outside].sum()),
            "tail_mc": float(np.mean(np.abs(depth - c.mean) > c.bound)),
            "samples": samples,
        }
    return out


# %%
# The table and Fig. 1a: the law of the depth with the bound.


def report(r: dict, args: argparse.Namespace) -> str:
    lines = [
        f"Depth L_delta of a ResNet{args.L}, budget {args.budget}, beta = {args.beta}",
        "",
        "| mode | L_p | v_p | Bennett bound | P(outside), exact | MC tail (n) |",
        "|---|---|---|---|---|---|",
    ]
    for mode, s in r.items():
        lines.append(
            f"| {mode} | {s['mean']:.2f} | {s['variance']:.2f} | +-{s['bound']:.2f} | "
            f"{100 * s['tail_exact']:.3f}% | {100 * s['tail_mc']:.3f}% ({s['samples']}) |"
        )
    return "\n".join(lines)


def plot(r: dict, args: argparse.Namespace, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    import gdln

    fig, ax = plt.subplots(figsize=(6, 4))
    for (mode, s), color in zip(r.items(), ("k", "b"), strict=True):
        k = np.arange(len(s["pmf"]))
        ax.step(k, s["pmf"], where="mid", color=color, label=f"{mode}: v_p = {s['variance']:.1f}")
        for sign in (-1, 1):
            ax.axvline(s["mean"] + sign * s["bound"], color=color, ls="--", lw=1)
    ax.set_xlabel("depth of the sampled subnetwork L_delta (blocks)")
    ax.set_ylabel("probability")
    ax.set_title(
        f"ResNet{args.L}, L_bar/L = {args.budget}; dashed: Lemma 1 bound, beta = {args.beta}",
        fontsize=9,
    )
    ax.legend(fontsize=8)
    return gdln.save_figure(fig, out, "sd_depth_concentration", dpi=110, tight=True)


# %%
# Run both modes and write the table, JSON and figure.


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("-o", "--out", default="out")
    ap.add_argument("--L", type=int, default=100)
    ap.add_argument("--budget", type=float, default=0.5, help="average survival L_bar / L")
    ap.add_argument("--beta", type=float, default=0.05)
    ap.add_argument("--samples", type=int, default=200000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.quick:
        args.L, args.samples = 20, 20000
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    r = run(args.L, args.budget, args.beta, args.samples, args.seed)
    text = report(r, args)
    (out / "sd_depth_concentration.json").write_text(
        json.dumps({"meta": {k: v for k, v in vars(args).items() if k != "out"}, "modes": r})
    )
    (out / "sd_depth_concentration.md").write_text(text + "\n")
    plot(r, args, out)
    print(text)
    return r


# %%
# Run the example. The documentation runs ``main`` in its ``--quick`` mode (the command line
# gives ``--quick -o DIR``); the figures it writes are shown below.

if __name__ == "__main__":
    main()
