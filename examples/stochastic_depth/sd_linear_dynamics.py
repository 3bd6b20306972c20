"""Linear SD ResNet: exact expected learning dynamics vs the mean of many SD simulations.

A linear residual network y = prod_l (I + kappa delta_l W_l) x aligned with the task
decouples into scalar chains f_a = prod_l (1 + kappa delta_l b_la), one per singular value
s_a of the task (white inputs, d = 1). Its expected loss and gradient are exact in O(L)
(gdln.sd.expected_chain), so the expected gradient-flow ODE and the expected
GD map can be compared with the mean of `runs` SD training runs that redraw the mask every
step. At long times the regulariser shrinks the learned singular values: the average
(test-time) network's transfer E f_a is below s_a, unlike training without SD.

Writes sd_linear_dynamics.{md,json} and sd_linear_dynamics.{png,svg}.

    python examples/stochastic_depth/sd_linear_dynamics.py -o out/          # full (under a minute)
    python examples/stochastic_depth/sd_linear_dynamics.py --quick -o out/
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import sympy as sp

from gdln.sd import (
    expected_chain,
    expected_chain_symbolic,
    expected_sd_flow,
    expected_sd_gd,
    simulate_sd_gd,
    survival_probabilities,
)

# %%
# The exact expected gradient flow and gradient-descent map of the linear chain
# (:mod:`gdln.sd`), beside the mean of many training runs that redraw the mask every step.


def run(L: int, runs: int, steps: int, lr: float, p_L: float, mode: str, seed: int) -> dict:
    s = np.array([3.0, 2.0, 1.0, 0.5])
    chain = {"s": s, "d": 1.0, "scaling": "stable", "mask": "unscaled"}
    p = survival_probabilities(mode, L, p_L=p_L)
    b0 = np.full((L, s.size), 0.01)
    every = max(1, steps // 40)
    gd = expected_sd_gd(b0, p, lr=lr, steps=steps, record_every=every, **chain)
    flow = expected_sd_flow(b0, p, gd.t, **chain)
    sim = simulate_sd_gd(
        b0, p, lr=lr, steps=steps, runs=runs, seed=seed, record_every=every, **chain
    )
    bs = sim.series["b"]  # (T, runs, L, M)
    mean_b = bs.mean(axis=1)
    se_b = bs.std(axis=1, ddof=1) / np.sqrt(runs)
    dev = np.abs(mean_b - gd.series["b"])
    z = dev / np.maximum(se_b, 1e-300)
    # transfer of the average network, per run, then averaged
    f_sim = np.array([[expected_chain(bk, p, **chain).mean for bk in row] for row in bs])
    # learned singular values at equilibrium: long expected flow, with and without SD
    t_long = np.array([0.0, 400.0])
    eq_sd = expected_sd_flow(b0, p, t_long, **chain).series["b"][-1]
    eq_full = expected_sd_flow(b0, np.ones(L), t_long, **chain).series["b"][-1]
    ex_sd = expected_chain(eq_sd, p, **chain)
    ex_full = expected_chain(eq_full, np.ones(L), **chain)
    return {
        "s": s.tolist(),
        "p": p.tolist(),
        "t": gd.t.tolist(),
        "loss_gd": gd.loss.tolist(),
        "loss_flow": flow.loss.tolist(),
        "loss_sim_mean": sim.loss.mean(axis=1).tolist(),
        "loss_sim_se": (sim.loss.std(axis=1, ddof=1) / np.sqrt(runs)).tolist(),
        "transfer_gd": gd.series["mean_transfer"].tolist(),
        "transfer_flow": flow.series["mean_transfer"].tolist(),
        "transfer_sim_mean": f_sim.mean(axis=1).tolist(),
        "transfer_sim_se": (f_sim.std(axis=1, ddof=1) / np.sqrt(runs)).tolist(),
        "max_abs_dev_b_sim_vs_gd": float(dev.max()),
        "max_z_b_sim_vs_gd": float(z[1:].max()),
        "median_z_b_sim_vs_gd": float(np.median(z[1:])),
        "max_abs_dev_gd_vs_flow": float(np.abs(gd.series["b"] - flow.series["b"]).max()),
        "equilibrium_sd_mean_transfer": ex_sd.mean.tolist(),
        "equilibrium_sd_rms_transfer": np.sqrt(ex_sd.second).tolist(),
        "equilibrium_sd_loss_modes": ex_sd.loss_modes.tolist(),
        "equilibrium_nosd_transfer": ex_full.mean.tolist(),
    }


# %%
# The expected loss in closed form for $L = 2$, and the table.


def symbolic_text(L: int = 2) -> str:
    ch = expected_chain_symbolic(L, scaling="plain", mask="unscaled")
    lines = [f"Exact expected per-mode loss, L = {L}, unscaled mask, plain scaling:"]
    lines.append(f"  E[f]   = {sp.factor(ch.mean)}")
    lines.append(f"  E[f^2] = {sp.factor(ch.second)}")
    lines.append(f"  E[L]   = {ch.loss}")
    for bl, rhs in zip(ch.b, ch.flow(), strict=True):
        lines.append(f"  d{bl}/dt = {sp.factor(rhs)}")
    return "\n".join(lines)


def report(r: dict) -> str:
    lines = [
        "| mode s_a | E f (SD, equilibrium) | ratio to s_a | sqrt E f^2 | no SD |",
        "|---|---|---|---|---|",
    ]
    for s, m, rms, full in zip(
        r["s"],
        r["equilibrium_sd_mean_transfer"],
        r["equilibrium_sd_rms_transfer"],
        r["equilibrium_nosd_transfer"],
        strict=True,
    ):
        lines.append(f"| {s:g} | {m:.4f} | {m / s:.4f} | {rms:.4f} | {full:.4f} |")
    lines.append("")
    lines.append(
        "mean of simulations vs expected GD map: "
        f"max |dev b| = {r['max_abs_dev_b_sim_vs_gd']:.3g}, "
        f"median |dev|/SE = {r['median_z_b_sim_vs_gd']:.2f}, "
        f"max |dev|/SE = {r['max_z_b_sim_vs_gd']:.2f}"
    )
    lines.append(
        f"expected GD map vs expected flow: max |dev b| = {r['max_abs_dev_gd_vs_flow']:.3g}"
    )
    lines.append(
        f"final expected loss: GD map {r['loss_gd'][-1]:.5g}, simulations "
        f"{r['loss_sim_mean'][-1]:.5g} +- {r['loss_sim_se'][-1]:.2g} (the runs' weights fluctuate "
        "around the mean path, which raises the mean of a convex loss at O(lr))"
    )
    return "\n".join(lines)


# %%
# The figure: the learned transfer per mode over training, expected and simulated; with
# stochastic depth it ends below $s_a$.


def plot(r: dict, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    import gdln

    t = np.array(r["t"])
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    gd, sim, se = (np.array(r[k]) for k in ("transfer_gd", "transfer_sim_mean", "transfer_sim_se"))
    for a in range(gd.shape[1]):
        color = f"C{a}"
        axes[0].plot(
            t, gd[:, a], "-", color=color, lw=1.2, label=f"exact expected, s={r['s'][a]:g}"
        )
        axes[0].errorbar(
            t,
            sim[:, a],
            yerr=2 * se[:, a],
            fmt=".",
            color=color,
            ms=3,
            label="SD runs, mean +- 2 SE" if a == 0 else None,
        )
    axes[0].set_xlabel("t = lr x step (gradient-flow time)")
    axes[0].set_ylabel("E f (average network)")
    axes[0].legend(fontsize=7, loc="lower right", bbox_to_anchor=(1.0, 0.28))
    axes[1].plot(t, r["loss_gd"], "k-", label="exact expected loss (GD map)")
    axes[1].plot(t, r["loss_flow"], "r--", label="expected gradient flow")
    axes[1].errorbar(
        t, r["loss_sim_mean"], yerr=2 * np.array(r["loss_sim_se"]), fmt="b.", label="SD runs"
    )
    axes[1].set_xlabel("t = lr x step (gradient-flow time)")
    axes[1].set_ylabel("E_delta loss")
    axes[1].legend(fontsize=7)
    return gdln.save_figure(fig, out, "sd_linear_dynamics", dpi=110, tight=True)


# %%
# Run and write the table, JSON and figure.


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("-o", "--out", default="out")
    ap.add_argument("--L", type=int, default=10)
    ap.add_argument("--runs", type=int, default=500)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--p-L", type=float, default=0.5)
    ap.add_argument("--mode", default="uniform", choices=["uniform", "linear"])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.quick:
        args.L, args.runs, args.steps = 4, 20, 40
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    r = run(args.L, args.runs, args.steps, args.lr, args.p_L, args.mode, args.seed)
    r["meta"] = {k: v for k, v in vars(args).items() if k != "out"}
    (out / "sd_linear_dynamics.json").write_text(json.dumps(r))
    text = symbolic_text() + "\n\n" + report(r)
    (out / "sd_linear_dynamics.md").write_text(text + "\n")
    plot(r, out)
    print(text)
    return r


# %%
# Run the example. The documentation runs ``main`` in its ``--quick`` mode (the command line
# gives ``--quick -o DIR``); the figures it writes are shown below.

if __name__ == "__main__":
    main()
