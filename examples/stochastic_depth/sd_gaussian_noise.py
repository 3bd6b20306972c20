"""Fig. 5 of Hayou & Ayed (Thm. 2): the SD noise on a neuron becomes Gaussian with depth.

Vanilla Stable ResNet100 (FC + ReLU, 1/sqrt(L)), width 128, uniform mode p = 0.7. For each
of `inputs` inputs x we draw `masks` masks (200 in the paper), record one neuron y^1_l(x;
delta) and take the Shapiro-Wilk p-value of these draws (scipy). We report the
distribution of p-values over inputs (median, quartiles, share above 0.05) against the
layer l (right panel of Fig. 5) and, for the last layer, against training steps on the
toy regression y = sin(beta^T x) (left panel). Under normality p-values are uniform on
[0, 1] (median 0.5, 95% above 0.05). Writes sd_gaussian_noise.{md,json} and
sd_gaussian_noise.{png,svg} (p-values against depth and against training step).

    python examples/stochastic_depth/sd_gaussian_noise.py -o out/          # full (a few minutes)
    python examples/stochastic_depth/sd_gaussian_noise.py --quick -o out/
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from gdln.sd import SDResNet, shapiro_pvalues, survival_probabilities, train_sd

# %%
# The values of one neuron of layer $l$ under random masks, and a summary of their
# Shapiro-Wilk p-values (uniform on $[0, 1]$ under normality).


def neuron_draws(
    net: SDResNet, x: torch.Tensor, masks: int, layers: list[int], gen: torch.Generator
) -> np.ndarray:
    """(len(layers), inputs, masks) values of neuron 0 of y_l under random masks."""
    out = np.empty((len(layers), x.shape[0], masks))
    with torch.no_grad():
        for i in range(x.shape[0]):
            gates = net.sample_gates(masks, generator=gen)
            _, hidden = net(x[i : i + 1].expand(masks, -1), gates, return_hidden=True)
            for j, ell in enumerate(layers):
                out[j, i] = hidden[ell][:, 0].double().numpy()
    return out


def summary(pv: np.ndarray) -> dict:
    q1, med, q3 = np.quantile(pv, [0.25, 0.5, 0.75])
    return {
        "q1": float(q1),
        "median": float(med),
        "q3": float(q3),
        "above_0.05": float(np.mean(pv > 0.05)),
    }


# %%
# Fig. 5: the p-values against the layer (right) and against training steps (left).


def plot(by_depth: dict, by_step: dict, args: argparse.Namespace, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    import gdln

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, data, xlabel, title in (
        (axes[0], by_depth, "layer l", "at initialisation, against depth"),
        (axes[1], by_step, "training step (full-batch GD)", f"layer l = L = {args.L}, in training"),
    ):
        x = np.array([float(k) for k in data])
        med = np.array([s["median"] for s in data.values()])
        q1 = np.array([s["q1"] for s in data.values()])
        q3 = np.array([s["q3"] for s in data.values()])
        ax.fill_between(x, q1, q3, color="C0", alpha=0.25, label="quartiles over inputs")
        ax.plot(x, med, "o-", color="C0", ms=4, label="median over inputs")
        ax.axhline(0.5, color="k", ls=":", lw=1, label="median under normality (0.5)")
        ax.axhline(0.05, color="r", ls="--", lw=1, label="0.05")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("Shapiro-Wilk p-value")
        ax.set_ylim(0, 1)
        ax.set_title(title, fontsize=9)
    axes[0].set_xscale("log")
    axes[0].legend(fontsize=7)
    fig.suptitle(
        f"SD noise of neuron 1 of y_l over {args.masks} masks, {args.inputs} inputs "
        f"(Stable ResNet, L = {args.L}, width {args.width}, uniform p = 0.7)",
        fontsize=9,
    )
    return gdln.save_figure(fig, out, "sd_gaussian_noise", dpi=110, tight=True)


# %%
# Measure at initialisation per layer, then along training, and the table.


def run(args: argparse.Namespace) -> dict:
    gen = torch.Generator().manual_seed(args.seed)
    d = 256
    beta = torch.randn(d, generator=gen) / np.sqrt(d)
    x = torch.randn(256, d, generator=gen)
    y = torch.sin(x @ beta)[:, None]
    probe = x[: args.inputs]
    p = survival_probabilities("uniform", args.L, p_L=0.7)
    net = SDResNet(d, args.width, 1, args.L, p, scaling="stable", generator=gen, device="cpu")
    layers = sorted({max(1, round(f * args.L)) for f in (0.02, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0)})
    by_depth = {}
    draws = neuron_draws(net, probe, args.masks, layers, gen)
    for j, ell in enumerate(layers):
        by_depth[ell] = summary(shapiro_pvalues(draws[j]))
    by_step = {}
    done = 0
    for k in range(args.checkpoints + 1):
        target = round(k * args.steps / args.checkpoints)
        if target > done:
            train_sd(net, x, y, steps=target - done, lr=args.lr, generator=gen)
            done = target
        last = neuron_draws(net, probe, args.masks, [args.L], gen)[0]
        by_step[done] = summary(shapiro_pvalues(last))
    return {"by_depth": by_depth, "by_step": by_step}


def report(result: dict, args: argparse.Namespace) -> str:
    lines = [
        f"Shapiro-Wilk p-values of neuron 1 of y_l over {args.masks} masks, "
        f"{args.inputs} inputs (L = {args.L}, width {args.width}, uniform p = 0.7)",
        "",
        "| layer l | median | quartiles | share > 0.05 |",
        "|---|---|---|---|",
    ]
    for ell, s in result["by_depth"].items():
        lines.append(
            f"| {ell} | {s['median']:.3f} | {s['q1']:.3f}-{s['q3']:.3f} | {s['above_0.05']:.2f} |"
        )
    lines += [
        "",
        "| training step (layer L) | median | quartiles | share > 0.05 |",
        "|---|---|---|---|",
    ]
    for step, s in result["by_step"].items():
        lines.append(
            f"| {step} | {s['median']:.3f} | {s['q1']:.3f}-{s['q3']:.3f} | {s['above_0.05']:.2f} |"
        )
    return "\n".join(lines)


# %%
# Run and write the table, JSON and figure.


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("-o", "--out", default="out")
    ap.add_argument("--L", type=int, default=100)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--inputs", type=int, default=100)
    ap.add_argument("--masks", type=int, default=200)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--checkpoints", type=int, default=4)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.quick:
        args.L, args.width, args.inputs, args.masks, args.steps = 10, 16, 8, 30, 10
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small products: threads only add overhead on a shared CPU
    try:
        result = run(args)
    finally:
        torch.set_num_threads(threads)
    text = report(result, args)
    result["meta"] = {k: v for k, v in vars(args).items() if k != "out"}
    (out / "sd_gaussian_noise.json").write_text(json.dumps(result))
    (out / "sd_gaussian_noise.md").write_text(text + "\n")
    plot(result["by_depth"], result["by_step"], args, out)
    print(text)
    return result


# %%
# Run the example. The documentation runs ``main`` in its ``--quick`` mode (the command line
# gives ``--quick -o DIR``); the figures it writes are shown below.

if __name__ == "__main__":
    main()
