r"""Nonlinear contextual classification: linear vs gated network (App. A.2).

Saxe, Sodhani & Lewallen (2022), App. A.2. Inputs $x$ are uniform on $[-1, 1]^2$ and the
target is $y = x_c$ in context $c \in \{1, 2\}$ (probability 1/2 each).

* One always-on pathway (``graphs/context.yaml`` with ``pathways=1``) is a deep linear
  network. Its statistics are Eqs. (24)-(25), and its total map converges to the
  least-squares solution $W^{tot} = \Sigma^{yx}(\Sigma^x)^{-1} = [1/2\ 1/2]$. The loss
  stays at $\tfrac12\langle(x_c - (x_1+x_2)/2)^2\rangle = 1/12$.
* Two pathways, one switched on per context (``pathways=2``), have statistics
  Eqs. (26)-(29) and converge to $W^{tot}(1) = [1\ 0]$ and $W^{tot}(2) = [0\ 1]$. With
  the gating this solves the task (loss 0).

The example solves the reduced ODEs (Eq. 10) with :func:`gdln.solve` and trains the
full networks from small random weights with :func:`gdln.simulate` (autograd, full-batch
gradient descent). Time is in units of $\tau$, $t/\tau = \mathrm{lr}\cdot\mathrm{step}$.
The reference values ($[1/2\ 1/2]$, $1/12$, $e_c$, 0) are computed here from the
exact second moments of the data, not from the simulation.

Run ``python examples/core/context.py [--quick] [-o DIR]``; writes ``context_loss.{png,svg}``,
``context_weights.{png,svg}`` and ``results.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

import gdln

# %%
# The graph file and the input covariance of App. A.2 (inputs uniform on $[-1, 1]^2$, so
# $\Sigma_x = I/3$).

# sphinx-gallery runs the script without __file__, from its folder (docs/_ext/gdln_gallery.py)
ROOT = Path(globals().get("__file__", Path.cwd() / "x.py")).resolve().parents[2]
GRAPH = ROOT / "graphs" / "context.yaml"

# exact moments of x ~ U[-1, 1]^2: <x x^T> = I/3, <x_c x^T> = e_c^T/3, <x_c^2> = 1/3
SIGMA_X = np.eye(2) / 3.0


# %%
# The closed forms of App. A.2 (Eqs. 24-29): the best linear map $[\tfrac12\ \tfrac12]$ and
# the best gated maps $[1\ 0]$ and $[0\ 1]$, computed from the exact moments.


def least_squares_reference() -> dict[str, Any]:
    """Closed forms of App. A.2 from the exact moments (Eqs. 24-29)."""
    sigma_yx_linear = 0.5 * (np.array([1.0, 0.0]) + np.array([0.0, 1.0])) / 3.0  # Eq. (24)
    w_linear = sigma_yx_linear @ np.linalg.inv(SIGMA_X)
    # loss of the linear optimum: 1/2 <y^2> - 1/2 W Sigma^x W^T, <y^2> = 1/3
    loss_linear = 0.5 * (1.0 / 3.0) - 0.5 * w_linear @ SIGMA_X @ w_linear
    w_gated = [np.eye(2)[c] / 3.0 @ np.linalg.inv(SIGMA_X) for c in range(2)]  # Eqs. (26)-(28)
    return {
        "w_linear": w_linear.tolist(),
        "loss_linear": float(loss_linear),
        "w_gated": [w.tolist() for w in w_gated],
        "loss_gated": 0.0,
    }


# %%
# The total map $W^{tot}(c)$ of each context, read from a simulated trajectory: the sum over
# the pathways active in context $c$.


def total_maps(traj: gdln.Trajectory, pathways: int) -> np.ndarray:
    """$W^{tot}(c)$ per context: ``(T, S, 2 contexts, 2 inputs)``."""
    maps = []
    for c in range(2):
        k = c if pathways == 2 else 0
        w1 = traj.weights(f"x->h{k}")  # (T, S, hidden, 2)
        w2 = traj.weights(f"h{k}->y")  # (T, S, 1, hidden)
        maps.append((w2 @ w1)[:, :, 0, :])
    return np.stack(maps, axis=2)


# %%
# One network of App. A.2: ``graphs/context.yaml`` with one always-on pathway (a deep linear
# network) or two gated pathways, one per context. The reduced ODE gives the theory; the
# full network is trained by gradient descent from small random weights.


def train(
    pathways: int, *, hidden: int, t_max: float, lr: float, seeds: int, sigma0: float, seed: int
) -> dict[str, Any]:
    """Theory, simulation and total maps $W^{tot}(c)$ of the network with ``pathways``."""
    problem = gdln.load(GRAPH, params={"pathways": str(pathways), "hidden": str(hidden)})
    reduction = gdln.reduce(problem, lump="none", b0=0.1)
    theory = gdln.solve(reduction, t_max=t_max, points=201)
    sim = gdln.simulate(
        problem.graph,
        problem.examples(),
        steps=round(t_max / lr),
        lr=lr,
        init_scheme="xavier",
        init_scale=sigma0,
        seeds=seeds,
        seed=seed,
        record_every=max(1, round(t_max / lr) // 100),
        record_weights=True,
        threads=1,
    )
    return {"theory": theory, "sim": sim, "maps": total_maps(sim, pathways)}


# %%
# The loss of both networks: the linear network stops at the best linear map's loss 1/12,
# the gated one learns both contexts.


def plot_loss(
    runs: dict[int, dict[str, Any]], ref: dict[str, Any], seeds: int, out: Path
) -> list[Path]:
    """Training loss, theory and simulation, of the linear and the gated network."""
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for pathways, name, colour in (
        (1, "linear (1 pathway)", "C0"),
        (2, "gated (2 pathways)", "C3"),
    ):
        run = runs[pathways]
        ax.plot(run["theory"].t, run["theory"].loss, color=colour, lw=2, label=f"{name}: theory")
        ax.plot(run["sim"].t, run["sim"].loss, color=colour, lw=0.8, ls="--", alpha=0.7)
        ax.plot([], [], color=colour, lw=0.8, ls="--", label=f"{name}: simulation ({seeds} seeds)")
    ax.axhline(ref["loss_linear"], color="gray", ls=":", label="linear optimum 1/12")
    ax.set_xlabel(r"time $t/\tau$")
    ax.set_ylabel(r"training loss $\mathcal{L}$ (Eq. 1)")
    ax.set_title("Contextual classification (App. A.2)")
    ax.legend(fontsize=7)
    files = gdln.save_figure(fig, out, "context_loss", dpi=110, tight=True)
    return files


# %%
# The total maps over training: the linear network ends at $[\tfrac12\ \tfrac12]$ in both
# contexts, the gated one at $[1\ 0]$ and $[0\ 1]$ (App. A.2).


def plot_maps(runs: dict[int, dict[str, Any]], out: Path) -> list[Path]:
    """The entries of $W^{tot}(c)$ over training, mean over seeds."""
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4), sharey=True)
    for ax, pathways, title in zip(
        axes,
        (1, 2),
        ("linear network (all four entries overlap)", "gated network"),
        strict=True,
    ):
        run = runs[pathways]
        for c in range(2):
            for i in range(2):
                series = run["maps"][:, :, c, i]
                ax.plot(
                    run["sim"].t,
                    series.mean(axis=1),
                    color=f"C{2 * c + i}",
                    label=rf"$W^{{tot}}({c + 1})_{{{i + 1}}}$",
                )
        ax.set_xlabel(r"time $t/\tau$")
        ax.set_title(title)
        ax.axhline(0.5, color="gray", ls=":", lw=0.8)
        ax.axhline(1.0, color="gray", ls=":", lw=0.8)
    axes[0].set_ylabel("total map entry (mean over seeds)")
    axes[1].legend(fontsize=7)
    files = gdln.save_figure(fig, out, "context_weights", dpi=110, tight=True)
    return files


# %%
# The experiment: train both networks, compare their final maps with the closed forms, plot.


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the example; return (and write to ``results.json``) its key numbers."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small run (< 30 s)")
    parser.add_argument("-o", "--out", default="out/context", help="output folder")
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()

    t_max, lr = (60.0, 0.5) if args.quick else (80.0, 0.05)
    seeds = 3 if args.quick else 10
    hidden = 8 if args.quick else 32
    sigma0 = 0.1
    ref = least_squares_reference()
    runs: dict[int, dict[str, Any]] = {}
    for pathways in (1, 2):
        runs[pathways] = train(
            pathways, hidden=hidden, t_max=t_max, lr=lr, seeds=seeds, sigma0=sigma0, seed=args.seed
        )

    results: dict[str, Any] = {
        "paper": "App. A.2: linear W_tot -> [1/2 1/2]; gated W_tot(1) -> [1 0], W_tot(2) -> [0 1]",
        "settings": {
            "t_max_tau": t_max,
            "lr": lr,
            "seeds": seeds,
            "hidden": hidden,
            "sigma0_xavier": sigma0,
            "theory_init_b": 0.1,
        },
        "reference": ref,
    }
    for pathways, name in ((1, "linear"), (2, "gated")):
        run = runs[pathways]
        final = run["maps"][-1]  # (S, 2 contexts, 2)
        results[name] = {
            "theory_final_loss": float(run["theory"].loss[-1]),
            "sim_final_loss_mean": float(run["sim"].loss[-1].mean()),
            "sim_final_loss_max": float(run["sim"].loss[-1].max()),
            "sim_final_w_tot_mean": final.mean(axis=0).tolist(),
            "sim_final_w_tot_max_dev": float(
                np.abs(
                    final - (np.array([ref["w_linear"]] * 2) if pathways == 1 else np.eye(2))
                ).max()
            ),
        }

    files = plot_loss(runs, ref, seeds, out)
    files += plot_maps(runs, out)

    results["files"] = [str(f) for f in files]
    results["wall_time_s"] = time.perf_counter() - start
    (out / "results.json").write_text(json.dumps(results, indent=2))
    return results


# %%
# Run the example. The documentation runs ``main`` in its ``--quick`` mode (the command line
# gives ``--quick -o DIR``); the figures it writes are shown below, and the numbers it returns
# are printed as JSON.

if __name__ == "__main__":
    res = main()
    print(json.dumps({k: res[k] for k in ("linear", "gated", "wall_time_s")}, indent=2))
