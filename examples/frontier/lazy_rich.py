r"""Lazy and rich learning: the tangent kernel along exact λ-balanced trajectories.

A two-layer linear network learns the hierarchical dataset of Fig. 4c of Saxe, Sodhani &
Lewallen (2022): four one-hot items (whitened inputs, $\Sigma^x = I/4$), seven features,
a hidden layer of four units. It starts from λ-balanced weights,
$W_2^\top W_2 - W_1W_1^\top = \lambda I$, drawn by :func:`gdln.balanced_weights` with
random input and output frames (not aligned with the task) and every hidden direction at
scale $\sigma$. :func:`gdln.solve_balanced` gives the exact gradient flow (the matrix
Riccati solution of Braun, Dominé, Fitzgerald & Saxe 2022 and Dominé et al. 2025) and
:func:`gdln.balanced_kernels` the neural tangent kernel on the four items at each time,
from the theory alone; nothing is simulated. The kernel distance

$$S(t) = 1 - \frac{\langle K_0, K_t\rangle_F}{\lVert K_0\rVert_F\lVert K_t\rVert_F}$$

is 0 for a network that learns like its linearisation (lazy) and grows as the network
learns features (rich).

* **(a)** $S(t)$ for several $\lambda$ at $\sigma = 0.05$.
* **(b)** $S$ at the end of learning against $\lambda$, for several $\sigma$: rich near
  $\lambda = 0$; lazy for large negative $\lambda$, where $W_1^\top W_1 \approx |\lambda| I$
  on all four inputs hardly changes. Large *positive* $\lambda$ is not lazy here: it fixes
  the 4-dimensional range of $W_2$ among the 7 outputs at random, and learning must turn it
  onto the task's output directions. The lazy limit $|\lambda| \to \infty$ needs the hidden
  layer to span the side that $\lambda$ makes large.
* **(c)** the same against the initial scale $\sigma$, for several $\lambda$: what matters is
  $\lambda/\sigma^2$; at $\lambda = 0$ the scale does not change $S$ at all (the start is
  the same kernel up to a factor, and the end does not depend on $\sigma$).

Run ``python examples/frontier/lazy_rich.py [--quick] [-o DIR]``; writes ``lazy_rich.{png,svg}``
and ``results.json``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

import gdln

# %%
# The two-layer linear network on the hierarchical dataset of Fig. 4c, as a graph file written
# by the example.

NETWORK = """\
name: lazy_rich
nodes: [{id: x, size: 4}, {id: h, size: 4}, {id: y, size: 7}]
edges: [{source: x, target: h}, {source: h, target: y}]
datasets: {base: {builtin: hierarchy}}
task: {contexts: [{probability: 1, dataset: base, inputs: {x: x}, targets: {y: y}}]}
"""


# %%
# One exact λ-balanced run (:func:`gdln.solve_balanced`): its times, loss and the distance
# $S(t)$ of the tangent kernel from its start.


def kernel_path(
    problem: gdln.Problem, *, lam: float, scale: float, t_max: float, points: int, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Times, loss and kernel distance $S(t)$ of one exact λ-balanced run."""
    start = gdln.balanced_weights(problem, lam=lam, scale=scale, seed=seed)
    trajectory = gdln.solve_balanced(problem, start, t_max=t_max, points=points)
    kernels = gdln.balanced_kernels(problem, trajectory)
    return trajectory.t, trajectory.loss, kernels.distance


# %%
# Panel (a): the kernel distance $S(t)$ over time for several $\lambda$ at a small initial
# scale $\sigma = 0.05$.


def panel_time(
    ax: Any, problem: gdln.Problem, curves: list[float], *, points: int, seed: int
) -> None:
    r"""$S(t)$ per $\lambda$."""
    for lam in curves:
        t, _, distance = kernel_path(
            problem,
            lam=lam,
            scale=0.05,
            t_max=40.0,
            points=points,
            seed=seed,
        )
        ax.plot(t, distance, label=f"λ = {lam:g}")
    ax.set_xlabel(r"time $t/\tau$")
    ax.set_ylabel(r"kernel distance $S(t)$")
    ax.set_title(r"(a) $S(t)$, $\sigma = 0.05$")
    ax.legend(fontsize=7, loc="upper center", ncol=3)


# %%
# Panel (b): $S$ at the end of learning against $\lambda$, for several $\sigma$: rich near
# $\lambda = 0$, lazy for large negative $\lambda$.


def panel_lambda(
    ax: Any,
    problem: gdln.Problem,
    lambdas: list[float],
    scales: list[float],
    *,
    t_max: float,
    seed: int,
) -> tuple[dict[str, list[float]], float]:
    r"""Final $S$ per $(\sigma, \lambda)$, and the largest final loss."""
    final_loss = 0.0
    by_lambda: dict[str, list[float]] = {}
    for scale in scales:
        values = []
        for lam in lambdas:
            _, loss, distance = kernel_path(
                problem, lam=lam, scale=scale, t_max=t_max, points=2, seed=seed
            )
            final_loss = max(final_loss, float(loss[-1]))
            values.append(float(distance[-1]))
        by_lambda[f"{scale:g}"] = values
        ax.plot(lambdas, values, "o-", ms=3, label=f"σ = {scale:g}")
    ax.set_xscale("symlog", linthresh=0.1)
    ax.set_xlabel(r"$\lambda$ ($W_2^\top W_2 - W_1W_1^\top = \lambda I$)")
    ax.set_ylabel(rf"$S$ at $t = {t_max:g}\,\tau$")
    ax.set_title("(b) against λ")
    ax.legend(fontsize=7, loc="upper center", ncol=3)

    return by_lambda, final_loss


# %%
# Panel (c): the same against the initial scale $\sigma$, for several $\lambda$.


def panel_scale(
    ax: Any,
    problem: gdln.Problem,
    curves: list[float],
    sweep_scales: list[float],
    *,
    t_max: float,
    seed: int,
) -> tuple[dict[str, list[float]], float]:
    r"""Final $S$ per $(\lambda, \sigma)$, and the largest final loss."""
    final_loss = 0.0
    by_scale: dict[str, list[float]] = {}
    for lam in curves:
        values = []
        for scale in sweep_scales:
            _, loss, distance = kernel_path(
                problem, lam=lam, scale=float(scale), t_max=t_max, points=2, seed=seed
            )
            final_loss = max(final_loss, float(loss[-1]))
            values.append(float(distance[-1]))
        by_scale[f"{lam:g}"] = values
        ax.plot(sweep_scales, values, "o-", ms=3, label=f"λ = {lam:g}")
    ax.set_xscale("log")
    ax.set_xlabel(r"initial scale $\sigma$")
    ax.set_ylabel(rf"$S$ at $t = {t_max:g}\,\tau$")
    ax.set_title("(c) against σ")
    ax.legend(fontsize=7, loc="upper center", ncol=3)
    return by_scale, final_loss


# %%
# The experiment: the network, the values of $\lambda$ and $\sigma$ (fewer with ``--quick``),
# the three panels and ``results.json``.


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the example; return (and write to ``results.json``) its key numbers."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer values of λ and σ")
    parser.add_argument("-o", "--out", default="out/lazy_rich", help="output folder")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random frames")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    begin = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "lazy_rich.yaml"
        path.write_text(NETWORK)
        problem = gdln.load(path)

    t_max = 400.0
    curves = [-10.0, -1.0, 0.0, 1.0, 10.0]
    if args.quick:
        curves = [-10.0, 0.0, 10.0]
        lambdas = [-10.0, 0.0, 10.0]
        scales = [0.01, 3.0]
        sweep_scales = [0.01, 1.0]
    else:
        magnitudes = [0.1, 0.3, 1.0, 3.0, 10.0, 30.0]
        lambdas = sorted([-m for m in magnitudes] + [0.0] + magnitudes)
        scales = [0.01, 0.3, 3.0]
        sweep_scales = list(np.logspace(-2, 1, 13))

    fig, axes = plt.subplots(1, 3, figsize=(12.0, 3.6))
    panel_time(axes[0], problem, curves, points=41 if args.quick else 161, seed=args.seed)
    by_lambda, loss_b = panel_lambda(axes[1], problem, lambdas, scales, t_max=t_max, seed=args.seed)
    by_scale, loss_c = panel_scale(
        axes[2], problem, curves, sweep_scales, t_max=t_max, seed=args.seed
    )
    final_loss = max(0.0, loss_b, loss_c)
    for ax in axes:
        ax.set_ylim(0.0, 0.56)
    fig.suptitle("4 -> 4 -> 7 linear network on the hierarchy of Fig. 4c, exact λ-balanced flow")
    files = gdln.save_figure(fig, out, "lazy_rich", dpi=110, tight=True)

    results: dict[str, Any] = {
        "network": "x (4 one-hot items) -> h (4) -> y (7 hierarchical features), Fig. 4c data",
        "t_max_tau": t_max,
        "seed": args.seed,
        "lambdas": lambdas,
        "scales": scales,
        "distance_by_lambda": by_lambda,
        "sweep_scales": [float(s) for s in sweep_scales],
        "distance_by_scale": by_scale,
        "largest_final_loss": final_loss,
        "files": [str(f) for f in files],
        "wall_time_s": time.perf_counter() - begin,
    }
    (out / "results.json").write_text(json.dumps(results, indent=2))
    return results


# %%
# Run the example. The documentation runs ``main`` in its ``--quick`` mode (the command line
# gives ``--quick -o DIR``); the figures it writes are shown below, and the numbers it returns
# are printed as JSON.

if __name__ == "__main__":
    res = main()
    print(json.dumps({k: v for k, v in res.items() if k != "files"}, indent=2))
