"""Neural race vs lazy regime: the initialisation scale decides generalisation (Fig. 6).

Reproduces Fig. 6a-d of Saxe, Sodhani & Lewallen (2022), Sec. 4.3. The routing network
``graphs/routing.yaml`` (Fig. 4: M = 7 domains, K = 4 outputs per input with output
j = (i + k) mod M, N_h = 64, the hierarchical dataset of Fig. 4c) is trained by
full-batch gradient descent (:func:`gdln.simulate`, a fixed number of steps with
lr = 0.1 min(1, sigma_0^-4), see :func:`lr_for`) from random matrices whose singular
values all equal sigma_0 (``init="singular"``, as in Sec. 4.3), for a sweep of sigma_0
and seeds run by :func:`gdln.run_sweep` (resumable CSV table, local processes or
Dask).

* **Fig. 6a**: training loss against t/tau for each sigma_0: stage-like drops at small
  sigma_0, fast exponential decay at large sigma_0.
* **Fig. 6b**: error on trained and untrained routes (loss divided by the loss of a zero
  output) against sigma_0.
* **Fig. 6c**: representational similarity at the first hidden layer, cosine similarity
  of h1 for the 4 items presented to each of the M input domains, at small, medium and
  large sigma_0. ``cross_domain_similarity`` is the mean cosine between the
  representations of the same item in two different domains (1 = one shared
  representation; about 0 = independent random ones).

Run: ``PYTHONPATH=. python examples/core/init_scale.py [--quick] [-o out/init_scale]
[--workers N] [--scheduler ADDRESS]``. Writes ``init_scale_loss.{png,svg}``,
``init_scale_error.{png,svg}``, ``init_scale_rsm.{png,svg}``, ``sweep.csv`` and
``results.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

import gdln
from gdln import run_sweep

# %%
# The routing graph of Fig. 4 and how many points of each loss curve are kept.

# sphinx-gallery runs the script without __file__, from its folder (docs/_ext/gdln_gallery.py)
ROOT = Path(globals().get("__file__", Path.cwd() / "x.py")).resolve().parents[2]
GRAPHS = ROOT / "graphs"
N_RECORDS = 40


# %%
# One run of Fig. 6: train the routing network from initial scale $\sigma_0$ on part of its
# routes, and record the loss curve, the errors on trained and untrained routes and the
# similarity of the first hidden layer across domains (Fig. 6c-d).


def train(
    *, M: int, K: int, hidden: int, scale: float, seed: int, lr: float, steps: int
) -> dict[str, Any]:
    """One run: loss curve, trained/untrained errors and h1 similarity matrix."""
    params = {"M": str(M), "K": str(K), "hidden": str(hidden), "seed": "-1"}
    problem = gdln.load(GRAPHS / "routing.yaml", params=params)
    everything = gdln.load(GRAPHS / "routing.yaml", params={**params, "K": str(M)}).examples()
    every = max(1, steps // N_RECORDS)
    trajectory = gdln.simulate(
        problem.graph,
        problem.examples(),
        steps=steps,
        lr=lr,
        init_scheme="singular",
        init_scale=scale,
        seeds=[seed],
        eval_examples=everything,
        record_every=every,
        record_weights=True,
        threads=1,
    )
    trained = set(problem.examples().context_labels)
    base = everything.zero_output_loss()
    errors: dict[bool, list[float]] = {True: [], False: []}
    per_context = trajectory.context_losses(evaluation=True)
    for c, label in enumerate(everything.context_labels):
        final = float(per_context[label][-1, 0])
        errors[label in trained].append(final / base[c])
    # h1 for each (domain, item): the gated input edge of domain i applied to the items.
    reps = []
    for i in range(M):
        c = everything.context_labels.index(f"x{i}->y0")
        items = np.asarray(everything.inputs[f"x{i}"])[everything.context == c]
        weight = trajectory.weights(f"x{i}->h1")[-1, 0]
        reps.append(items @ weight.T)
    reps_all = np.concatenate(reps)  # (M * items, hidden), domain-major
    unit = reps_all / np.linalg.norm(reps_all, axis=1, keepdims=True)
    similarity = unit @ unit.T
    n_items = len(reps[0])
    same_item = np.equal.outer(np.tile(np.arange(n_items), M), np.tile(np.arange(n_items), M))
    other_domain = ~np.equal.outer(
        np.repeat(np.arange(M), n_items), np.repeat(np.arange(M), n_items)
    )
    return {
        "t": np.asarray(trajectory.t),
        "loss": np.asarray(trajectory.loss)[:, 0],
        "trained_error": float(np.mean(errors[True])),
        "untrained_error": float(np.mean(errors[False])),
        "similarity": similarity,
        "cross_domain_similarity": float(similarity[same_item & other_domain].mean()),
    }


def sweep_point(
    *, M: int, K: int, hidden: int, scale: float, seed: int, lr: float, steps: int
) -> dict[str, float]:
    """The numbers of one (sigma_0, seed) point.

    The loss curve comes as columns ``loss_000``, ... and the h1 similarity matrix,
    flattened, as ``sim_0000``, ...
    """
    run = train(M=M, K=K, hidden=hidden, scale=scale, seed=seed, lr=lr, steps=steps)
    row = {
        "trained_error": run["trained_error"],
        "untrained_error": run["untrained_error"],
        "cross_domain_similarity": run["cross_domain_similarity"],
    }
    for n, value in enumerate(run["loss"]):
        row[f"loss_{n:03d}"] = float(value)
    for n, value in enumerate(run["similarity"].ravel()):
        row[f"sim_{n:04d}"] = float(value)
    return row


# %%
# The learning rate: constant for small weights, smaller as $\sigma_0^{-4}$ above
# $\sigma_0 = 1$, where the large weights would make a fixed step unstable.


def lr_for(scale: float, base: float) -> float:
    """Learning rate at init scale sigma_0: ``base`` up to 1, ``base / sigma_0^4`` above.

    The curvature of the three-layer network grows like sigma_0^4, and so does the rate
    of the lazy (NTK) dynamics; with a fixed number of steps the training time
    t/tau = lr * steps then shrinks like the lazy time scale, and every run converges.
    """
    return base * min(1.0, scale**-4)


# %%
# Fig. 6a: the loss curves, mean over seeds, against time: stages at small $\sigma_0$, a
# smooth decay at large $\sigma_0$.


def plot_losses(
    curves: dict[float, np.ndarray],
    record_steps: np.ndarray,
    *,
    base_lr: float,
    M: int,
    K: int,
    hidden: int,
    out: Path,
) -> list[Path]:
    """Fig. 6a."""
    import matplotlib.pyplot as plt

    scales = tuple(curves)
    colors = plt.cm.viridis(np.linspace(0, 0.9, len(scales)))
    fig, ax = plt.subplots(figsize=(5, 3.6))
    for s, color in zip(scales, colors, strict=True):
        t = record_steps * lr_for(s, base_lr)
        ax.plot(t[1:], curves[s][1:] / curves[s][0], color=color, label=f"σ0 = {s:g}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("time t / τ (= lr · step; lr = 0.1 min(1, σ0⁻⁴))")
    ax.set_ylabel("training loss / initial loss")
    ax.set_title(f"Fig. 6a: routing M = {M}, K = {K}, N_h = {hidden}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    figures = gdln.save_figure(fig, out, "init_scale_loss", dpi=90)
    plt.close(fig)
    return figures


# %%
# Fig. 6b: the errors on trained and untrained routes and the cross-domain similarity at
# $h_1$ against $\sigma_0$: only small initial weights generalise to untrained routes.


def plot_errors(
    scales: tuple[float, ...],
    trained: list[float],
    untrained: list[float],
    similarity: list[float],
    *,
    seeds: tuple[int, ...],
    steps: int,
    out: Path,
) -> list[Path]:
    """Fig. 6b."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.6))
    ax.plot(scales, trained, "o-", color="tab:blue", label="trained routes")
    ax.plot(scales, untrained, "o-", color="tab:red", label="untrained routes")
    ax.plot(scales, similarity, "s--", color="grey", label="cross-domain similarity (h1)")
    ax.set_xscale("log")
    ax.set_xlabel("initialisation scale σ0 (singular value of every W)")
    ax.set_ylabel("error (loss / zero-output loss); cosine")
    ax.set_title(f"Fig. 6b: error vs σ0, {len(seeds)} seed(s), {steps} steps")
    ax.legend(fontsize=7)
    fig.tight_layout()
    figures = gdln.save_figure(fig, out, "init_scale_error", dpi=90)
    plt.close(fig)
    return figures


# %%
# Fig. 6c: the similarity of the first hidden layer's representations across input domains,
# for the smallest, a middle and the largest $\sigma_0$.


def plot_rsm(
    rows: list[dict[str, Any]], scales: tuple[float, ...], seeds: tuple[int, ...], out: Path
) -> list[Path]:
    """Fig. 6c."""
    import matplotlib.pyplot as plt

    picks = (scales[0], scales[len(scales) // 2], scales[-1])
    fig, axes = plt.subplots(1, 3, figsize=(9, 3.4))
    for ax, s in zip(axes, picks, strict=True):
        row = next(r for r in rows if r["scale"] == s and r["seed"] == seeds[0])
        flat = np.array([row[c] for c in sorted(k for k in row if k.startswith("sim_"))])
        side = round(np.sqrt(len(flat)))
        image = ax.imshow(flat.reshape(side, side), vmin=-1, vmax=1, cmap="RdBu_r")
        ax.set_title(f"σ0 = {s:g}")
        ax.set_xlabel("input domain × item")
    axes[0].set_ylabel("input domain × item")
    fig.colorbar(image, ax=axes, label="cosine similarity of h1")
    fig.suptitle("Fig. 6c: representational similarity at h1 across input domains")
    figures = gdln.save_figure(fig, out, "init_scale_rsm", dpi=90)
    plt.close(fig)
    return figures


# %%
# The experiment: the sweep over $\sigma_0$ and seeds (:func:`gdln.run_sweep`; small sizes
# with ``--quick``), the three figures and ``results.json``.


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the example; returns (and writes to results.json) the measured numbers."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for tests")
    parser.add_argument("-o", "--out", default="out/init_scale", help="output directory")
    parser.add_argument("--scheduler", default=None, help="Dask scheduler address")
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="local processes (default: one per core; 1 with --quick, whose few short "
        "points finish before a process pool has started)",
    )
    args = parser.parse_args(argv)
    if args.workers is None and args.quick:
        args.workers = 1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()

    import matplotlib

    matplotlib.use("Agg")

    if args.quick:
        M, K, hidden, base_lr, steps, seeds = 4, 2, 16, 0.1, 600, (0,)
        scales = (0.1, 0.5, 2.0)
    else:
        M, K, hidden, base_lr, steps, seeds = 7, 4, 64, 0.1, 2000, (0, 1)
        scales = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 3.0)
    config = {"M": M, "K": K, "hidden": hidden, "steps": steps}
    points = [
        {**config, "scale": s, "lr": lr_for(s, base_lr), "seed": seed}
        for s in scales
        for seed in seeds
    ]
    rows = run_sweep(
        sweep_point, points, table=out / "sweep.csv", workers=args.workers, scheduler=args.scheduler
    )

    def mean_of(name: str, scale: float) -> float:
        return float(np.mean([r[name] for r in rows if r["scale"] == scale]))

    loss_columns = sorted(k for k in rows[0] if k.startswith("loss_"))
    every = max(1, steps // N_RECORDS)
    record_steps = np.array([*range(0, steps, every), steps][: len(loss_columns)], dtype=float)
    curves = {
        s: np.mean([[r[c] for c in loss_columns] for r in rows if r["scale"] == s], axis=0)
        for s in scales
    }

    figures = plot_losses(curves, record_steps, base_lr=base_lr, M=M, K=K, hidden=hidden, out=out)

    trained = [mean_of("trained_error", s) for s in scales]
    untrained = [mean_of("untrained_error", s) for s in scales]
    similarity = [mean_of("cross_domain_similarity", s) for s in scales]
    figures += plot_errors(
        scales, trained, untrained, similarity, seeds=seeds, steps=steps, out=out
    )
    figures += plot_rsm(rows, scales, seeds, out)

    results: dict[str, Any] = {
        "quick": args.quick,
        **config,
        "seeds": list(seeds),
        "scales": list(scales),
        "trained_error": trained,
        "untrained_error": untrained,
        "cross_domain_similarity": similarity,
        "lr": [lr_for(s, base_lr) for s in scales],
        "t_max": [steps * lr_for(s, base_lr) for s in scales],
        "loss_at_10pct_time": [
            float(curves[s][len(record_steps) // 10] / curves[s][0]) for s in scales
        ],
        "figures": [str(f) for f in figures],
        "seconds": time.perf_counter() - start,
    }
    (out / "results.json").write_text(json.dumps(results, indent=2))
    return results


# %%
# Run the example. The documentation runs ``main`` in its ``--quick`` mode (the command line
# gives ``--quick -o DIR``); the figures it writes are shown below, and the numbers it returns
# are printed as JSON.

if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
