r"""Routing network: neural race dynamics, sqrt(M) scaling, shared representation (Fig. 4e-h).

Saxe, Sodhani & Lewallen (2022), Sec. 4, Fig. 4 and App. C. M input domains and M
output domains share two hidden layers (``graphs/routing.yaml``); each input domain is
trained with K output domains (route $i \to (i+k) \bmod M$, $k < K$), so $M(M-K)$ routes
are never trained. Parameters of Fig. 4: $M = 7$, $K = 4$, $\lambda = 0.02$,
$\sigma_0 = 0.2$ (times Xavier normal), $N_h = 64$, 10 repetitions.

What is computed (time in units of $\tau$, $t/\tau = \lambda\cdot\mathrm{step}$):

* **Fig. 4e** training loss from the reduced ODE (Eqs. 44-46, found by :func:`gdln.reduce`
  with ``lump="symmetry"``; Eq. 15 is its lumped form), from the decoupled initial
  weights of Eq. (9) and from $0.2\times$ Xavier weights (10 seeds). The theory's initial
  value $b_e = 0.1$ is the graph file's ``solve.b0``, not fitted.
* **Fig. 4f / App. C** singular values $B_1$ (input weights $x_i\to h_1$) and $B_2$
  (hidden weights $h_1 \to h_2$) per mode, the ratio $B_2/B_1$ against $\sqrt M$
  (Eq. 51), and the conserved quantity $M B_1^2 - B_2^2$ over time.
* **Fig. 4g** the representational similarity $H^T H$ at $h_1$ for the $4M$ inputs
  (4 items in each of the M domains) after training.
* **Fig. 4h** the outputs and losses on all $M^2$ routes (``K = M`` gives the evaluation
  set) after training: zero-shot generalisation to the untrained routes.

Run ``python examples/core/routing.py [--quick] [-o DIR]``; writes ``routing_loss``,
``routing_singular_values``, ``routing_rsm``, ``routing_outputs`` (PNG and SVG) and
``results.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

import gdln

# %%
# The routing network of Fig. 4 (``graphs/routing.yaml``): $M$ input domains and $M$ output
# domains share two hidden layers $h_1$, $h_2$; gates open one route $x_i \to y_j$ at a time.

# sphinx-gallery runs the script without __file__, from its folder (docs/_ext/gdln_gallery.py)
ROOT = Path(globals().get("__file__", Path.cwd() / "x.py")).resolve().parents[2]
GRAPH = ROOT / "graphs" / "routing.yaml"


# %%
# What the figures read from a simulated trajectory: the representational similarity $H^T H$
# of the hidden layer (Fig. 4g), the conserved quantity $M B_1^2 - B_2^2$ of Eq. (15) on the
# top hidden modes, and the loss of every route, trained or not (Fig. 4h).


def hidden_rsm(traj: gdln.Trajectory, m: int, *, index: int = -1, seed: int = 0) -> np.ndarray:
    """$H^T H$ at $h_1$ for one-hot items in every domain: ``(4M, 4M)`` (Fig. 4g)."""
    h = np.concatenate([traj.weights(f"x{i}->h1")[index, seed] for i in range(m)], axis=1)
    return h.T @ h


def balance(traj: gdln.Trajectory, m: int, n_modes: int) -> tuple[np.ndarray, np.ndarray]:
    r"""The matrix conserved quantity at $h_1$ and its value on the top hidden modes.

    $Q = \sum_i W_{x_i\to h_1} W_{x_i\to h_1}^T - W_{h_1\to h_2}^T W_{h_1\to h_2}$ is
    conserved by the gradient flow of the full network (each example's gradient adds the
    same term $\delta_{h_1} h_1^T + h_1\delta_{h_1}^T$ to both sums). On the $a$-th right
    singular vector $u_a$ of $W_{h_1\to h_2}$, $u_a^T Q u_a$ is $M B_1^2 - B_2^2$ in the
    decoupled regime (App. C). Returns the relative drift
    $\lVert Q(t)-Q(0)\rVert_F / \lVert W_{h_1\to h_2}^T W_{h_1\to h_2}(t)\rVert_F$ ``(T, S)``
    and $u_a^T Q u_a$ ``(T, S, n_modes)``.
    """
    w_in = sum(
        traj.weights(f"x{i}->h1") @ np.swapaxes(traj.weights(f"x{i}->h1"), -1, -2) for i in range(m)
    )
    w_h = traj.weights("h1->h2")
    gram = np.swapaxes(w_h, -1, -2) @ w_h
    q = w_in - gram
    drift = np.linalg.norm(q - q[:1], axis=(-2, -1)) / np.linalg.norm(gram, axis=(-2, -1))
    _, _, vt = np.linalg.svd(w_h)
    u = vt[..., :n_modes, :]  # (T, S, n_modes, hidden)
    return drift, np.einsum("tsah,tshk,tsak->tsa", u, q, u)


def route_losses(traj: gdln.Trajectory, m: int) -> np.ndarray:
    """Loss per route from the evaluation set: ``(T, S, M, M)``, [input i, output j]."""
    per_route = traj.context_losses(evaluation=True)
    return np.stack(
        [np.stack([per_route[f"x{i}->y{j}"] for j in range(m)], axis=-1) for i in range(m)],
        axis=-2,
    )


# %%
# The experiment: derive and solve the reduced dynamics (Eqs. 44-51), simulate the full
# network from decoupled and from random weights, compare the singular values per mode and the
# ratio $B_2/B_1$ with $\sqrt M$ (Eq. 51), and plot Fig. 4e-h.


@dataclass(frozen=True)
class Runs:
    """The settings of one run of Fig. 4 and its four trajectories."""

    m: int
    k: int
    hidden: int
    sigma0: float
    init_b: float
    lr: float
    t_max: float
    reps: int
    steps: int
    trained: np.ndarray  # (M, M): route i -> j trained
    eval_examples: gdln.ExampleSet  # every route (K = M)
    theory: gdln.Trajectory  # reduced ODE
    gd_map: gdln.Trajectory  # reduced gradient-descent map
    decoupled: gdln.Trajectory  # full network from the decoupled weights of Eq. (9)
    random: gdln.Trajectory  # full network from random weights, one column per seed


def run(*, quick: bool, seed: int) -> Runs:
    """Solve the reduction and simulate the full network (Fig. 4e)."""
    m, k, hidden, sigma0, init_b = 7, 4, 64, 0.2, 0.1
    if quick:
        lr, t_max, reps, n_records = 0.2, 50.0, 2, 60
    else:
        lr, t_max, reps, n_records = 0.02, 60.0, 10, 150
    steps = round(t_max / lr)
    record_every = max(1, steps // n_records)
    problem = gdln.load(GRAPH, params={"M": str(m), "K": str(k), "hidden": str(hidden)})
    all_routes = gdln.load(GRAPH, params={"M": str(m), "K": str(m), "hidden": str(hidden)})
    examples, eval_examples = problem.examples(), all_routes.examples()
    trained = np.zeros((m, m), dtype=bool)
    for label in examples.context_labels:
        i, j = (int(part[1:]) for part in label.split("->"))
        trained[i, j] = True

    reduction = gdln.reduce(problem, lump="symmetry", b0=init_b)
    theory = gdln.solve(reduction, t_max=t_max, points=401)
    gd_map = gdln.solve(reduction, t_max=t_max, dynamics="gd-map", lr=lr, points=steps + 1)
    settings = dict(record_every=record_every, record_weights=True, threads=1)
    common = {"steps": steps, "lr": lr, "eval_examples": eval_examples, **settings}
    decoupled = gdln.simulate(
        problem.graph,
        examples,
        init_scheme="given",
        weights=reduction.decoupled_weights(seed=seed),
        seeds=1,
        seed=seed,
        **common,
    )
    random = gdln.simulate(
        problem.graph,
        examples,
        init_scheme="xavier",
        init_scale=sigma0,
        seeds=reps,
        seed=seed,
        **common,
    )
    return Runs(
        m=m,
        k=k,
        hidden=hidden,
        sigma0=sigma0,
        init_b=init_b,
        lr=lr,
        t_max=t_max,
        reps=reps,
        steps=steps,
        trained=trained,
        eval_examples=eval_examples,
        theory=theory,
        gd_map=gd_map,
        decoupled=decoupled,
        random=random,
    )


# %%
# The measurements: singular values $B_1$, $B_2$ per mode (Fig. 4f), their ratio against
# $\sqrt M$ (Eq. 51), the conserved quantity $M B_1^2 - B_2^2$ (App. C), the loss on trained
# and untrained routes (Fig. 4h) and the similarity of the hidden representations across
# domains (Fig. 4g); ``results`` holds the numbers the gallery page quotes.


def measure(runs: Runs) -> tuple[dict[str, Any], dict[str, Any]]:
    """The key numbers (``results.json``) and the curves the figures draw."""
    m, k, hidden, sigma0, lr, t_max, reps = (
        runs.m,
        runs.k,
        runs.hidden,
        runs.sigma0,
        runs.lr,
        runs.t_max,
        runs.reps,
    )
    theory, gd_map, decoupled, random = runs.theory, runs.gd_map, runs.decoupled, runs.random
    init_b, steps, trained = runs.init_b, runs.steps, runs.trained
    # ---- singular values (Fig. 4f), ratio (Eq. 51), conserved quantity (App. C)
    n_modes = 4
    sv: dict[str, dict[str, np.ndarray]] = {}
    for name, traj in (("decoupled", decoupled), ("random", random)):
        b1 = np.mean([traj.singular_values(f"x{i}->h1")[..., :n_modes] for i in range(m)], axis=0)
        b1_sq = np.mean(
            [traj.singular_values(f"x{i}->h1")[..., :n_modes] ** 2 for i in range(m)], axis=0
        )
        b2 = traj.singular_values("h1->h2")[..., :n_modes]
        sv[name] = {"B1": b1, "B2": b2, "ratio": b2 / b1, "C": m * b1_sq - b2**2}
    th_b1, th_b2 = theory.variable("B1"), theory.variable("B2")
    th_c = m * th_b1**2 - th_b2**2
    drift_random, c_random = balance(random, m, n_modes)
    drift_decoupled, _ = balance(decoupled, m, n_modes)

    # ---- losses per route (Fig. 4h)
    per_route = route_losses(random, m)  # (T, S, M, M)
    untrained_loss = per_route[:, :, ~trained].mean(axis=-1)  # (T, S)
    trained_loss = per_route[:, :, trained].mean(axis=-1)
    dec_route = route_losses(decoupled, m)
    rsm = hidden_rsm(random, m, seed=0)
    rsm_cos = rsm / np.sqrt(np.outer(np.diag(rsm), np.diag(rsm)))
    same_item = np.equal.outer(np.arange(4 * m) % 4, np.arange(4 * m) % 4)
    other_domain = ~np.equal.outer(np.arange(4 * m) // 4, np.arange(4 * m) // 4)

    results: dict[str, Any] = {
        "paper": "Fig. 4e-h: theory matches decoupled sims exactly and random init well; "
        "B2/B1 -> sqrt(M) (Eq. 51); shared representation; zero-shot generalisation",
        "settings": {
            "M": m,
            "K": k,
            "hidden": hidden,
            "sigma0_xavier": sigma0,
            "lr": lr,
            "t_max_tau": t_max,
            "steps": steps,
            "repetitions": reps,
            "theory_init_b": init_b,
        },
        "sqrt_M": math.sqrt(m),
        "loss_initial_theory": float(theory.loss[0]),
        "loss_final_theory": float(theory.loss[-1]),
        "loss_final_decoupled": float(decoupled.loss[-1, 0]),
        "loss_final_random_max": float(random.loss[-1].max()),
        "decoupled_vs_theory_max_rel": float(
            np.max(np.abs(decoupled.loss[:, 0] - np.interp(decoupled.t, theory.t, theory.loss)))
            / theory.loss[0]
        ),
        "decoupled_vs_gd_map_max_rel": float(
            np.max(np.abs(decoupled.loss[:, 0] - np.interp(decoupled.t, gd_map.t, gd_map.loss)))
            / gd_map.loss[0]
        ),
        "random_vs_theory_max_rel_mean": float(
            np.mean(
                np.max(
                    np.abs(random.loss - np.interp(random.t, theory.t, theory.loss)[:, None]),
                    axis=0,
                )
            )
            / theory.loss[0]
        ),
        "time_to_half_theory": gdln.time_to_half_loss(theory.t, theory.loss),
        "time_to_half_gd_map": gdln.time_to_half_loss(gd_map.t, gd_map.loss),
        "time_to_half_decoupled": gdln.time_to_half_loss(decoupled.t, decoupled.loss[:, 0]),
        "time_to_half_random": [
            gdln.time_to_half_loss(random.t, random.loss[:, r]) for r in range(reps)
        ],
        "ratio_B2_B1_initial_decoupled": sv["decoupled"]["ratio"][0, 0].tolist(),
        "ratio_B2_B1_final_theory": (th_b2[-1] / th_b1[-1]).tolist(),
        "ratio_B2_B1_final_decoupled": sv["decoupled"]["ratio"][-1, 0].tolist(),
        "ratio_B2_B1_initial_random_mean": sv["random"]["ratio"][0].mean(axis=0).tolist(),
        "ratio_B2_B1_final_random_mean": sv["random"]["ratio"][-1].mean(axis=0).tolist(),
        "conserved_theory_drift": float(np.max(np.abs(th_c - th_c[0]))),
        "conserved_decoupled": [
            float(sv["decoupled"]["C"][:, 0].min()),
            float(sv["decoupled"]["C"][:, 0].max()),
        ],
        "conserved_random_uQu_initial_final_mean": [
            c_random[0].mean(axis=0).tolist(),
            c_random[-1].mean(axis=0).tolist(),
        ],
        "conserved_matrix_drift_random_max": float(drift_random.max()),
        "conserved_matrix_drift_decoupled_max": float(drift_decoupled.max()),
        "B2_final_random_mode0_squared": float((sv["random"]["B2"][-1, :, 0] ** 2).mean()),
        "untrained_loss_initial_mean": float(untrained_loss[0].mean()),
        "untrained_loss_final_mean": float(untrained_loss[-1].mean()),
        "untrained_loss_final_max": float(untrained_loss[-1].max()),
        "trained_loss_final_mean": float(trained_loss[-1].mean()),
        "untrained_loss_final_decoupled": float(dec_route[-1, 0][~trained].mean()),
        "rsm_cosine_same_item_other_domain_mean": float(rsm_cos[same_item & other_domain].mean()),
        "rsm_cosine_other_item_mean": float(rsm_cos[~same_item].mean()),
        "rsm_cosine_same_item_other_domain_initial_mean": float(
            (lambda r: (r / np.sqrt(np.outer(np.diag(r), np.diag(r))))[same_item & other_domain])(
                hidden_rsm(random, m, index=0, seed=0)
            ).mean()
        ),
        "n_trained_routes": int(trained.sum()),
        "n_untrained_routes": int((~trained).sum()),
    }
    curves = {
        "n_modes": n_modes,
        "sv": sv,
        "th_b1": th_b1,
        "th_b2": th_b2,
        "th_c": th_c,
        "c_random": c_random,
        "per_route": per_route,
        "untrained_loss": untrained_loss,
        "trained_loss": trained_loss,
    }
    return results, curves


# %%
# Fig. 4e: the training loss of the theory, of the decoupled start and of the random starts.


def plot_loss(runs: Runs, out: Path, *, tight: bool) -> list[Path]:
    """Fig. 4e."""
    m, k, hidden, sigma0, lr, reps = runs.m, runs.k, runs.hidden, runs.sigma0, runs.lr, runs.reps
    theory, gd_map, decoupled, random = runs.theory, runs.gd_map, runs.decoupled, runs.random
    files: list[Path] = []
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for r in range(reps):
        ax.plot(random.t, random.loss[:, r], color="C3", lw=0.7, alpha=0.6)
    ax.plot([], [], color="C3", lw=0.7, label=rf"random init, $\sigma_0$={sigma0} ({reps} seeds)")
    ax.plot(decoupled.t, decoupled.loss[:, 0], "o", color="C2", ms=3, label="decoupled init")
    ax.plot(theory.t, theory.loss, color="C0", lw=2, label="theory (Eqs. 44-46 / 15)")
    ax.plot(gd_map.t, gd_map.loss, "k--", lw=0.8, label=rf"reduced GD map ($\lambda$={lr})")
    ax.set_xlabel(r"time $t/\tau$ ($t/\tau = \lambda\cdot$step)")
    ax.set_ylabel(r"training loss $\mathcal{L}$")
    ax.set_title(rf"Routing network (Fig. 4e): M={m}, K={k}, $N_h$={hidden}, $\lambda$={lr}")
    ax.legend(fontsize=7)
    files += gdln.save_figure(fig, out, "routing_loss", dpi=100, tight=tight)
    return files


# %%
# Fig. 4f and App. C: singular values per mode, $B_2/B_1$ against $\sqrt M$ and the
# conserved quantity.


def plot_modes(runs: Runs, curves: dict[str, Any], out: Path, *, tight: bool) -> list[Path]:
    """Fig. 4f, Eq. (51) and the conserved quantity."""
    m, theory, decoupled, random = runs.m, runs.theory, runs.decoupled, runs.random
    n_modes, sv, c_random = curves["n_modes"], curves["sv"], curves["c_random"]
    th_b1, th_b2, th_c = curves["th_b1"], curves["th_b2"], curves["th_c"]
    files: list[Path] = []
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
    ax = axes[0]
    for a in range(n_modes):
        ax.plot(theory.t, th_b2[:, a], color="C0", lw=1.5)
        ax.plot(theory.t, th_b1[:, a], color="C1", lw=1.5)
        ax.plot(random.t, sv["random"]["B2"][:, :, a].mean(axis=1), "--", color="C0", lw=0.8)
        ax.plot(random.t, sv["random"]["B1"][:, :, a].mean(axis=1), "--", color="C1", lw=0.8)
    ax.plot([], [], color="C0", label=r"hidden $B_2$ (theory)")
    ax.plot([], [], color="C1", label=r"input $B_1$ (theory)")
    ax.plot([], [], "k--", lw=0.8, label="random init (mean, top 4 sv)")
    ax.set_xlabel(r"time $t/\tau$")
    ax.set_ylabel("singular value")
    ax.set_title("Fig. 4f: singular values per mode")
    ax.legend(fontsize=7)
    ax = axes[1]
    for a in range(n_modes):
        ax.plot(theory.t, th_b2[:, a] / th_b1[:, a], color="C0", lw=1.5)
        ax.plot(decoupled.t, sv["decoupled"]["ratio"][:, 0, a], ":", color="C2", lw=1.5)
        ax.plot(random.t, sv["random"]["ratio"][:, :, a].mean(axis=1), "--", color="C3", lw=0.8)
    ax.axhline(math.sqrt(m), color="k", lw=0.8, label=rf"$\sqrt{{M}}$ = {math.sqrt(m):.3f}")
    ax.plot([], [], color="C0", label="theory")
    ax.plot([], [], ":", color="C2", label="decoupled sim")
    ax.plot([], [], "--", color="C3", label="random init (mean)")
    ax.set_xlabel(r"time $t/\tau$")
    ax.set_ylabel(r"$B_2/B_1$ (dimensionless)")
    ax.set_title("App. C, Eq. (51): ratio per mode")
    ax.legend(fontsize=7)
    ax = axes[2]
    for a in range(n_modes):
        ax.plot(theory.t, th_c[:, a], color="C0", lw=1.5)
        ax.plot(decoupled.t, sv["decoupled"]["C"][:, 0, a], ":", color="C2", lw=1.5)
        ax.plot(random.t, c_random[:, :, a].mean(axis=1), "--", color="C3", lw=0.8)
    ax.set_xlabel(r"time $t/\tau$")
    ax.set_ylabel(r"$M B_1^2 - B_2^2$")
    ax.plot([], [], color="C0", label="theory")
    ax.plot([], [], ":", color="C2", label="decoupled sim")
    ax.plot([], [], "--", color="C3", label=r"random init: $u_a^T Q u_a$ (mean)")
    ax.set_title("conserved quantity per mode")
    ax.legend(fontsize=7)
    files += gdln.save_figure(fig, out, "routing_singular_values", dpi=100, tight=tight)
    return files


# %%
# Fig. 4g: the similarity of the hidden representations of the $4M$ inputs, before and after
# training: items that share a position share a representation across domains.


def plot_rsm(runs: Runs, out: Path, *, tight: bool, seed: int) -> list[Path]:
    """Fig. 4g."""
    random, m = runs.random, runs.m
    files: list[Path] = []
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    for ax, index, title in ((axes[0], 0, "initial"), (axes[1], -1, "after training")):
        im = ax.imshow(hidden_rsm(random, m, index=index, seed=0), cmap="RdBu_r")
        ax.set_title(f"Fig. 4g: RSM at $h_1$, {title} (seed {seed})", fontsize=9)
        ax.set_xticks(np.arange(2, 4 * m, 4), [f"x{i}" for i in range(m)])
        ax.set_yticks(np.arange(2, 4 * m, 4), [f"x{i}" for i in range(m)])
        ax.set_xlabel("input domain (4 items each)")
        ax.set_ylabel("input domain (4 items each)")
        fig.colorbar(im, ax=ax, shrink=0.8, label=r"$h_1^T h_1'$")
    files += gdln.save_figure(fig, out, "routing_rsm", dpi=100, tight=tight)
    return files


# %%
# Fig. 4h: the loss on every route after training, over training, and the output of one
# untrained route beside its target (zero-shot generalisation).


def plot_routes(runs: Runs, curves: dict[str, Any], out: Path, *, tight: bool) -> list[Path]:
    """Fig. 4h."""
    random, trained, eval_examples = runs.random, runs.trained, runs.eval_examples
    per_route = curves["per_route"]
    untrained_loss, trained_loss = curves["untrained_loss"], curves["trained_loss"]
    files: list[Path] = []
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    ax = axes[0]
    im = ax.imshow(per_route[-1, 0], cmap="viridis", vmin=0)
    for i, j in zip(*np.nonzero(trained), strict=True):
        ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, ec="w", lw=1.5))
    untrained_i, untrained_j = np.nonzero(~trained)
    ax.plot(untrained_j, untrained_i, "rx", ms=6, label="untrained route")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0.0, -0.12))
    ax.set_xlabel("output domain j")
    ax.set_ylabel("input domain i")
    ax.set_title(
        "Fig. 4h: loss per route after training\n(white boxes: trained, x: untrained)", fontsize=9
    )
    fig.colorbar(im, ax=ax, shrink=0.8, label="route loss")
    ax = axes[1]
    ax.semilogy(random.t, untrained_loss.mean(axis=1), color="C3", label="untrained routes")
    ax.semilogy(random.t, trained_loss.mean(axis=1), color="C0", label="trained routes")
    ax.set_xlabel(r"time $t/\tau$")
    ax.set_ylabel("mean loss per route (seed mean)")
    ax.set_title("zero-shot generalisation over training")
    ax.legend(fontsize=7)
    ax = axes[2]
    i, j = next(zip(*np.nonzero(~trained), strict=True))
    rows = eval_examples.context == eval_examples.context_labels.index(f"x{i}->y{j}")
    output = random.outputs(f"y{j}")[-1, 0][rows]
    target = eval_examples.targets[f"y{j}"][rows]
    limit = float(np.abs(np.concatenate([output, target])).max())
    im = ax.imshow(
        np.concatenate([output, np.full((1, output.shape[1]), np.nan), target]),
        cmap="RdBu_r",
        vmin=-limit,
        vmax=limit,
    )
    fig.colorbar(im, ax=ax, shrink=0.8, label="feature value (output and target)")
    ax.set_title(f"untrained route x{i}->y{j}: output (top) vs target (bottom)", fontsize=9)
    ax.set_xlabel("output feature")
    ax.set_yticks(
        [0, 1, 2, 3, 5, 6, 7, 8],
        ["out 1", "out 2", "out 3", "out 4", "target 1", "target 2", "target 3", "target 4"],
    )
    ax.set_ylabel("item")
    files += gdln.save_figure(fig, out, "routing_outputs", dpi=100, tight=tight)
    return files


# %%
# The experiment: run, measure, draw the four figures, write ``results.json``.


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the example; return (and write to ``results.json``) its key numbers."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small run (< 30 s)")
    parser.add_argument("-o", "--out", default="out/routing", help="output folder")
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()

    runs = run(quick=args.quick, seed=args.seed)
    results, curves = measure(runs)
    tight = not args.quick
    files = plot_loss(runs, out, tight=tight)
    files += plot_modes(runs, curves, out, tight=tight)
    files += plot_rsm(runs, out, tight=tight, seed=args.seed)
    files += plot_routes(runs, curves, out, tight=tight)

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
    print(json.dumps({k: v for k, v in res.items() if k != "files"}, indent=2))
