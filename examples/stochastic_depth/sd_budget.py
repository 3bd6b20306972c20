"""Budget hypothesis (Sec. 5-6, Table 2 of Hayou & Ayed): uniform vs linear vs SenseMode.

At a fixed budget L_bar / L (average share of surviving blocks) we train a Stable ReLU
ResNet (FC blocks, 1/sqrt(L), unscaled mask, average network at test time) with each
survival mode and report the test metric, mean +- std over seeds:

- toy regression y = sin(beta^T x), x, beta in R^256 (beta ~ N(0, I/256), see
  sd_regulariser.py): test MSE (x 100);
- sklearn digits (8x8, 10 classes, bundled): test classification error in % (trained with
  the squared loss on one-hot targets).

SenseMode uses the rule of Sec. 6 of the paper, p_l proportional to |S_l| at the budget
(clipped at 1), with S_l = dL/d delta_l at delta = 1 measured at initialisation on the
training set. The linear mode exists only for L_bar >= (L - 1)/2. The paper's setting
(ResNet110 on CIFAR) is far larger; this is a CPU-sized check of the same question.

Training: SGD, momentum 0.9, batch 64, lr 0.003, each step's gradient clipped to norm 1.
These were fixed by a stability check on digits at one budget (the full network, where
lr 0.01 without clipping gave NaN losses within 150 steps for both seeds tried, and lr
0.003 with clipping kept the training loss decreasing for 4 of 4 seeds) before any test
error was looked at. All modes of one seed share that seed's data split and initial
weights, so the table also gives the paired difference uniform - SenseMode over seeds.

Writes sd_budget.{md,json} and sd_budget.{png,svg} (test metric against the budget).

    python examples/stochastic_depth/sd_budget.py -o out/          # full (73 min on a busy shared 2-core CPU)
    python examples/stochastic_depth/sd_budget.py --quick -o out/
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
    StochasticDepthError,
    average_network_loss,
    layer_sensitivities,
    mode_for_budget,
    train_sd,
)

# %%
# The survival modes compared at a fixed budget.

MODES = ("uniform", "sensemode_proportional", "linear")
LABELS = {"uniform": "uniform", "sensemode_proportional": "SenseMode", "linear": "linear"}


# %%
# The tasks (toy regression, sklearn digits), their test metric, and one training run of a
# Stable ReLU ResNet under stochastic depth.


def load_task(name: str, gen: torch.Generator, n_toy: int = 1024):
    if name == "toy":
        d = 256
        beta = torch.randn(d, generator=gen) / np.sqrt(d)
        x = torch.randn(n_toy, d, generator=gen)
        y = torch.sin(x @ beta)[:, None]
        half = n_toy // 2
        return x[:half], y[:half], x[half:], y[half:]
    from sklearn.datasets import load_digits

    data = load_digits()
    x = torch.tensor(data.data, dtype=torch.float32)
    x = (x - x.mean(0)) / (x.std(0) + 1e-6)
    y = torch.nn.functional.one_hot(torch.tensor(data.target), 10).float()
    perm = torch.randperm(len(x), generator=gen)
    tr, te = perm[:1000], perm[1000:]
    return x[tr], y[tr], x[te], y[te]


def metric(task: str, net: SDResNet, x: torch.Tensor, y: torch.Tensor) -> float:
    if task == "toy":
        return 100.0 * 2.0 * average_network_loss(net, x, y)  # MSE x 100
    with torch.no_grad():
        pred = net(x, net.mean_gates()).argmax(1)
    return 100.0 * float((pred != y.argmax(1)).float().mean())


def run_one(task, mode, ratio, seed, L, width, steps, lr, batch, clip) -> float | None:
    gen = torch.Generator().manual_seed(1000 + seed)
    xtr, ytr, xte, yte = load_task(task, gen)
    net = SDResNet(
        xtr.shape[1],
        width,
        ytr.shape[1],
        L,
        np.ones(L),
        scaling="stable",
        generator=gen,
        device="cpu",
    )
    if ratio < 1.0:
        sens = layer_sensitivities(net, xtr, ytr) if mode.startswith("sense") else None
        try:
            p = mode_for_budget(mode, L, ratio * L, sensitivities=sens)
        except StochasticDepthError:
            return None  # e.g. the linear mode below budget (L - 1)/2
        net.p.copy_(torch.tensor(p, dtype=net.p.dtype))
    train_sd(
        net, xtr, ytr, steps=steps, lr=lr, batch_size=batch, momentum=0.9, clip=clip, generator=gen
    )
    return metric(task, net, xte, yte)


# %%
# Uniform minus SenseMode per seed, and the table of Table 2.


def paired_difference(row: dict) -> tuple[float, float, int, int] | None:
    """Uniform minus SenseMode per seed: mean, standard error, seeds where each is lower."""
    u, s = row.get("uniform"), row.get("sensemode_proportional")
    if u is None or s is None:
        return None
    diff = np.asarray(u) - np.asarray(s)
    se = float(np.std(diff, ddof=1) / np.sqrt(diff.size)) if diff.size > 1 else float("nan")
    return float(diff.mean()), se, int(np.sum(diff < 0)), int(np.sum(diff > 0))


def report(results: dict, args: argparse.Namespace) -> str:
    lines = []
    for task, rows in results.items():
        unit = "test MSE x 100" if task == "toy" else "test error %"
        lines += [
            f"{task} ({unit}, mean +- std over {args.seeds} seeds, L = {args.L}, "
            f"width {args.width}); * = lowest mean of the row; last column: uniform - "
            "SenseMode paired by seed, mean +- SE (seeds where uniform / SenseMode is lower)",
            "",
            "| L_bar/L | uniform | SenseMode | linear | uniform - SenseMode |",
            "|---|---|---|---|---|",
        ]
        for ratio, row in rows.items():
            means = {m: np.mean(v) for m, v in row.items() if v is not None}
            best = min(means, key=means.get)
            cells = []
            for m in MODES:
                v = row.get(m)
                if v is None:
                    cells.append("-")
                else:
                    star = "*" if m == best and len(means) > 1 else ""
                    cells.append(f"{np.mean(v):.2f} +- {np.std(v):.2f}{star}")
            pd = paired_difference(row)
            cells.append("-" if pd is None else f"{pd[0]:+.2f} +- {pd[1]:.2f} ({pd[2]}/{pd[3]})")
            lines.append(f"| {ratio} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


# %%
# The figure: the test metric against the budget per mode.


def plot(results: dict, args: argparse.Namespace, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    import gdln

    tasks = list(results)
    fig, axes = plt.subplots(
        2,
        len(tasks),
        figsize=(5.2 * len(tasks), 6.5),
        squeeze=False,
        sharex="col",
        gridspec_kw={"height_ratios": [2, 1]},
    )
    styles = {"uniform": ("k", "o"), "sensemode_proportional": ("r", "s"), "linear": ("b", "^")}
    for ax, task in zip(axes[1], tasks, strict=True):
        diffs = [
            (float(r), pd) for r, row in results[task].items() if (pd := paired_difference(row))
        ]
        x = np.array([r for r, _ in diffs])
        ax.errorbar(
            x, [d[0] for _, d in diffs], yerr=[d[1] for _, d in diffs], fmt="ko", ms=4, capsize=2
        )
        ax.axhline(0.0, color="0.5", lw=1)
        ax.set_xlabel("budget L_bar / L (mean share of surviving blocks)")
        ax.set_ylabel("uniform - SenseMode\n(paired by seed, +- SE)", fontsize=8)
    for ax, task in zip(axes[0], tasks, strict=True):
        rows = results[task]
        for k, m in enumerate(MODES):
            pts = [(float(r), v) for r, row in rows.items() if (v := row.get(m)) is not None]
            pts = [(r, np.asarray(v)) for r, v in pts if r < 1.0]
            if not pts:
                continue
            r = np.array([q for q, _ in pts]) + (k - 1) * 0.008  # dodge the error bars
            color, marker = styles[m]
            ax.errorbar(
                r,
                [v.mean() for _, v in pts],
                yerr=[v.std() for _, v in pts],
                color=color,
                marker=marker,
                ms=4,
                capsize=2,
                lw=1,
                label=LABELS[m],
            )
        full = rows.get("1.0", {}).get("uniform")
        if full is not None:
            ax.axhline(np.mean(full), color="0.5", ls="--", lw=1, label="no SD (budget 1)")
        ax.set_ylabel("test MSE x 100" if task == "toy" else "test error (%)")
        ax.set_title(f"{task}: mean +- std over {args.seeds} seeds, L = {args.L}", fontsize=9)
        ax.legend(fontsize=7)
    return gdln.save_figure(fig, out, "sd_budget", dpi=110, tight=True)


# %%
# Run every task, mode, budget and seed, then write the table, JSON and figure.


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("-o", "--out", default="out")
    ap.add_argument("--tasks", default="toy,digits")
    ap.add_argument("--L", type=int, default=20)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--lr", type=float, default=0.003)
    ap.add_argument("--clip", type=float, default=1.0, help="maximum gradient norm per step")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--budgets", default="0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9")
    args = ap.parse_args(argv)
    if args.quick:
        args.L, args.width, args.steps, args.seeds, args.budgets = 4, 8, 10, 2, "0.25,0.75"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    budgets = [float(b) for b in args.budgets.split(",")]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    results: dict = {}
    try:
        for task in args.tasks.split(","):
            results[task] = {}
            for ratio in [*budgets, 1.0]:
                row = {}
                for mode in MODES if ratio < 1.0 else ("uniform",):
                    vals = [
                        run_one(
                            task,
                            mode,
                            ratio,
                            s,
                            args.L,
                            args.width,
                            args.steps,
                            args.lr,
                            args.batch,
                            args.clip,
                        )
                        for s in range(args.seeds)
                    ]
                    row[mode] = None if vals[0] is None else vals
                results[task][str(ratio)] = row
                print(f"{task} {ratio}: {time.perf_counter() - t0:.0f} s", flush=True)
    finally:
        torch.set_num_threads(threads)
    text = report(results, args)
    meta = {k: v for k, v in vars(args).items() if k != "out"}
    meta["seconds"] = time.perf_counter() - t0
    (out / "sd_budget.json").write_text(json.dumps({"meta": meta, "results": results}))
    (out / "sd_budget.md").write_text(text)
    plot(results, args, out)
    print(text)
    return results


# %%
# Run the example. The documentation runs ``main`` in its ``--quick`` mode (the command line
# gives ``--quick -o DIR``); the figures it writes are shown below.

if __name__ == "__main__":
    main()
