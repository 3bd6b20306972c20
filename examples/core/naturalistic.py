"""Zero-shot transfer on transformed digits: a naturalistic neural race (Fig. 7, App. D).

Reproduces, at small scale, Fig. 7b-d of Saxe, Sodhani & Lewallen (2022) with
scikit-learn's bundled 8x8 digits (1797 images) in place of MNIST (App. D):

* M input domains: domain i sees each image through its own fixed random pixel
  permutation (``--transform permute``) or rotated by 180 i / M degrees (``rotate``).
* M output domains: domain j reports the class through its own random label
  permutation pi_j (a 10-way one-hot target, squared error as in Eq. 1).
* Network (App. D.1): gated linear encoders x_i -> h1 (64 -> N_h), one shared hidden
  layer h1 -> h2 and gated linear decoders h2 -> y_j (N_h -> 10); route (i, j) is
  psi_j(theta(phi_i(x))). Built as a networkx graph and trained with
  :func:`gdln.simulate` (full-batch gradient descent on the average loss).
* Each input domain is trained with K seeded random output domains; accuracy is measured
  on held-out images on all M^2 routes, split into trained and untrained routes.

Fig. 7b/c: accuracy against K/M at a small init scale, with the onset (smallest K/M
from which on the untrained accuracy is within ``--tol`` = 0.05 of the trained one); Fig. 7d: accuracy against the
init scale sigma_0 (x Xavier normal) at one K. Grids run with
:func:`gdln.run_sweep` (resumable CSV tables, local processes or Dask).

Differences from App. D (stated, not tuned): digits 8x8 instead of MNIST/CIFAR, M = 8
instead of 40/100, full-batch GD instead of SGD with momentum, squared error on one-hot
targets instead of cross-entropy, 100 training and 100 test images per route, a
fixed training time t = 400 tau (150 tau in --quick) with
lr = min(1, 0.5 / sigma_0^4) instead of 1000 epochs (small-init runs are not converged; see the trained accuracy).

Run: ``PYTHONPATH=. python examples/core/naturalistic.py [--quick] [-o out/naturalistic]
[--transform permute|rotate] [--workers N] [--scheduler ADDRESS]``. Writes
``naturalistic_k.{png,svg}``, ``naturalistic_scale.{png,svg}``, two sweep tables and
``results.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

import gdln
from gdln import run_sweep

# %%
# The data of App. D: digits under $M$ transformations (one input domain each), and the gated
# network of App. D.1, gated encoders, a shared hidden layer and gated decoders.

N_CLASSES = 10


def digits_domains(
    *, M: int, transform: str, seed: int, n_train: int, n_test: int
) -> dict[str, Any]:
    """The transformed datasets: per input domain the train/test images, labels, perms."""
    from scipy.ndimage import rotate
    from sklearn.datasets import load_digits

    data = load_digits()
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(data.target))
    train, test = order[:n_train], order[n_train : n_train + n_test]
    images = data.images / 16.0  # (1797, 8, 8)
    mean = images[train].mean(axis=0)
    inputs = []
    for i in range(M):
        if transform == "permute":
            perm = rng.permutation(64) if i > 0 else np.arange(64)
            flat = (images - mean).reshape(len(images), 64)[:, perm]
        elif transform == "rotate":
            angle = 180.0 * i / M
            rotated = rotate(images - mean, angle, axes=(1, 2), reshape=False, order=1)
            flat = rotated.reshape(len(images), 64)
        else:
            raise ValueError(f"transform: expected 'permute' or 'rotate', got {transform!r}")
        inputs.append(flat)
    label_perms = [np.arange(N_CLASSES)] + [rng.permutation(N_CLASSES) for _ in range(M - 1)]
    return {
        "inputs": inputs,
        "labels": data.target,
        "train": train,
        "test": test,
        "label_perms": label_perms,
    }


def graph(M: int, hidden: int) -> nx.DiGraph:
    """Gated encoders, a shared hidden layer and gated decoders (App. D.1)."""
    g = nx.DiGraph()
    for i in range(M):
        g.add_node(f"x{i}", size=64)
        g.add_node(f"y{i}", size=N_CLASSES)
    g.add_node("h1", size=hidden)
    g.add_node("h2", size=hidden)
    for i in range(M):
        g.add_edge(f"x{i}", "h1", gated=True)
        g.add_edge("h2", f"y{i}", gated=True)
    g.add_edge("h1", "h2")
    return g


# %%
# The training set of one run, and its accuracy on trained and untrained routes after training
# on $K$ random outputs per input (Fig. 7b-c).


def route_examples(
    data: dict[str, Any], routes: list[tuple[int, int]], rows: np.ndarray, M: int
) -> gdln.ExampleSet:
    """ExampleSet of the given routes on the given image rows, equal weights."""
    n = len(rows)
    total = n * len(routes)
    inputs = {f"x{i}": np.zeros((total, 64)) for i in range(M)}
    targets = {f"y{j}": np.zeros((total, N_CLASSES)) for j in range(M)}
    gates = {(f"x{i}", "h1"): np.zeros(total) for i in range(M)}
    gates.update({("h2", f"y{j}"): np.zeros(total) for j in range(M)})
    context = np.repeat(np.arange(len(routes)), n)
    labels = data["labels"][rows]
    for c, (i, j) in enumerate(routes):
        part = slice(c * n, (c + 1) * n)
        inputs[f"x{i}"][part] = data["inputs"][i][rows]
        targets[f"y{j}"][part, :] = np.eye(N_CLASSES)[data["label_perms"][j][labels]]
        gates[(f"x{i}", "h1")][part] = 1.0
        gates[("h2", f"y{j}")][part] = 1.0
    return gdln.ExampleSet(
        inputs=inputs,
        targets=targets,
        gates=gates,
        weights=np.full(total, 1.0 / total),
        context=context,
        context_labels=tuple(f"x{i}->y{j}" for i, j in routes),
    )


def accuracy(
    *,
    M: int,
    K: int,
    scale: float,
    seed: int,
    hidden: int,
    lr: float,
    t_max: float,
    n_train: int,
    n_test: int,
    transform: str,
) -> dict[str, float]:
    """Train on K random outputs per input; accuracy on trained and untrained routes.

    A run whose loss diverges returns NaN accuracies and ``diverged = 1``."""
    data = digits_domains(M=M, transform=transform, seed=seed, n_train=n_train, n_test=n_test)
    rng = np.random.default_rng(10_000 + seed)
    trained = [(i, int(j)) for i in range(M) for j in sorted(rng.choice(M, K, replace=False))]
    every_route = [(i, j) for i in range(M) for j in range(M)]
    train_set = route_examples(data, trained, data["train"], M)
    test_set = route_examples(data, every_route, data["test"], M)
    steps = round(t_max / lr)
    try:
        trajectory = gdln.simulate(
            graph(M, hidden),
            train_set,
            steps=steps,
            lr=lr,
            init_scheme="xavier",
            init_scale=scale,
            seeds=[seed],
            eval_examples=test_set,
            record_every=steps,
            threads=1,
        )
    except (gdln.SimulationDivergedError, RuntimeError):  # non-finite weights stop torch too
        nan = float("nan")
        return {
            "trained_accuracy": nan,
            "untrained_accuracy": nan,
            "final_loss": nan,
            "diverged": 1,
        }
    n = len(data["test"])
    labels = data["labels"][data["test"]]
    correct = {True: [], False: []}
    seen = set(trained)
    for c, (i, j) in enumerate(every_route):
        out = trajectory.outputs(f"y{j}")[-1, 0, c * n : (c + 1) * n]
        hit = np.mean(np.argmax(out, axis=1) == data["label_perms"][j][labels])
        correct[(i, j) in seen].append(float(hit))
    return {
        "trained_accuracy": float(np.mean(correct[True])),
        "untrained_accuracy": float(np.mean(correct[False])) if correct[False] else float("nan"),
        "final_loss": float(np.asarray(trajectory.loss)[-1, 0]),
        "diverged": 0,
    }


# %%
# The learning rate per initial scale, and helpers that keep ``results.json`` standard JSON
# and average the sweep's rows.


def lr_for(scale: float) -> float:
    """Learning rate for init scale sigma_0: 1 for small weights, 0.5 / sigma_0^4 above.

    The curvature of a three-layer linear network grows like sigma_0^4 (GD diverges
    at lr = 0.2 for sigma_0 = 3 here), so the step shrinks with it; time t/tau = lr * step
    is kept fixed, so every scale gets the same training time.
    """
    return min(1.0, 0.5 / scale**4)


def _finite(value: Any) -> Any:
    """NaN -> None, recursively, so that results.json is standard JSON."""
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _mean(rows: list[dict[str, Any]], name: str, **where: Any) -> float:
    values = [r[name] for r in rows if all(r[k] == v for k, v in where.items())]
    values = [v for v in values if np.isfinite(v)]
    return float(np.mean(values)) if values else float("nan")


# %%
# Fig. 7b-c: accuracy on trained and untrained routes against the fraction $K/M$ of output
# domains trained per input, from small initial weights.


def plot_fraction(
    fractions: list[float],
    k_trained: list[float],
    k_untrained: list[float],
    *,
    transform: str,
    M: int,
    small: float,
    out: Path,
) -> list[Path]:
    """Fig. 7b/c."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.6))
    ax.plot(fractions, k_trained, "o-", color="tab:blue", label="trained routes")
    ax.plot(fractions, k_untrained, "o-", color="tab:orange", label="untrained routes")
    ax.axhline(1 / N_CLASSES, color="grey", ls=":", label="chance")
    ax.set_xlabel("fraction of output domains trained per input, K / M")
    ax.set_ylabel("test accuracy")
    ax.set_title(f"Fig. 7b/c: digits, {transform} inputs, M = {M}, σ0 = {small:g}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    figures = gdln.save_figure(fig, out, "naturalistic_k", dpi=90)
    plt.close(fig)
    return figures


# %%
# Fig. 7d: the same accuracies against the initial scale $\sigma_0$ at fixed $K$: large
# initial weights lose the zero-shot transfer.


def plot_scale(
    scales: tuple[float, ...],
    s_trained: list[float],
    s_untrained: list[float],
    *,
    M: int,
    K_scale: int,
    out: Path,
) -> list[Path]:
    """Fig. 7d."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.6))
    ax.plot(scales, s_trained, "o-", color="tab:blue", label="trained routes")
    ax.plot(scales, s_untrained, "o-", color="tab:orange", label="untrained routes")
    ax.axhline(1 / N_CLASSES, color="grey", ls=":", label="chance")
    ax.set_xscale("log")
    ax.set_xlabel("initialisation scale σ0 (× Xavier normal)")
    ax.set_ylabel("test accuracy")
    ax.set_title(f"Fig. 7d: digits, M = {M}, K = {K_scale}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    figures = gdln.save_figure(fig, out, "naturalistic_scale", dpi=90)
    plt.close(fig)
    return figures


# %%
# The experiment: two sweeps (:func:`gdln.run_sweep`), over $K/M$ at small $\sigma_0$ and over
# $\sigma_0$ at fixed $K$; the figures, the onset of generalisation and ``results.json``.


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the example; returns (and writes to results.json) the measured numbers."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for tests")
    parser.add_argument("-o", "--out", default="out/naturalistic", help="output directory")
    parser.add_argument("--scheduler", default=None, help="Dask scheduler address")
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="local processes (default: one per core; 1 with --quick, whose few short "
        "points finish before a process pool has started)",
    )
    parser.add_argument("--transform", choices=("permute", "rotate"), default="permute")
    parser.add_argument("--tol", type=float, default=0.05, help="onset tolerance")
    args = parser.parse_args(argv)
    if args.workers is None and args.quick:
        args.workers = 1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()

    import matplotlib

    matplotlib.use("Agg")

    if args.quick:
        M, hidden, t_max, n_train, n_test, seeds = 4, 16, 150.0, 100, 100, (0,)
        Ks, small, K_scale, scales = (1, 3), 0.3, 3, (0.3, 1.0)
    else:
        M, hidden, t_max, n_train, n_test, seeds = 8, 32, 400.0, 100, 100, (0, 1)
        Ks, small, K_scale = (1, 2, 3, 4, 5, 6, 8), 0.3, 4
        scales = (0.2, 0.3, 0.6, 1.0)
    config = {
        "M": M,
        "hidden": hidden,
        "t_max": t_max,
        "n_train": n_train,
        "n_test": n_test,
        "transform": args.transform,
    }
    k_rows = run_sweep(
        accuracy,
        [
            {**config, "K": K, "scale": small, "lr": lr_for(small), "seed": s}
            for K in Ks
            for s in seeds
        ],
        table=out / "sweep_k.csv",
        workers=args.workers,
        scheduler=args.scheduler,
    )
    s_rows = run_sweep(
        accuracy,
        [
            {**config, "K": K_scale, "scale": sc, "lr": lr_for(sc), "seed": s}
            for sc in scales
            for s in seeds
        ],
        table=out / "sweep_scale.csv",
        workers=args.workers,
        scheduler=args.scheduler,
    )
    fractions = [K / M for K in Ks]
    k_trained = [_mean(k_rows, "trained_accuracy", K=K) for K in Ks]
    k_untrained = [_mean(k_rows, "untrained_accuracy", K=K) for K in Ks]
    s_trained = [_mean(s_rows, "trained_accuracy", scale=sc) for sc in scales]
    s_untrained = [_mean(s_rows, "untrained_accuracy", scale=sc) for sc in scales]

    figures = plot_fraction(
        fractions, k_trained, k_untrained, transform=args.transform, M=M, small=small, out=out
    )
    figures += plot_scale(scales, s_trained, s_untrained, M=M, K_scale=K_scale, out=out)

    onset = float("nan")  # smallest K/M (K < M) from which untrained >= trained - tol
    for f, t, u in reversed(list(zip(fractions, k_trained, k_untrained, strict=True))):
        if not np.isfinite(u):
            continue
        if u < t - args.tol:
            break
        onset = f
    results: dict[str, Any] = {
        "quick": args.quick,
        **config,
        "seeds": list(seeds),
        "small_scale": small,
        "K_over_M": fractions,
        "k_trained_accuracy": k_trained,
        "k_untrained_accuracy": k_untrained,
        "tol": args.tol,
        "onset_K_over_M": onset,
        "paper_onset_K_over_M": 0.4,
        "K_for_scale_sweep": K_scale,
        "scales": list(scales),
        "scale_trained_accuracy": s_trained,
        "scale_untrained_accuracy": s_untrained,
        "figures": [str(f) for f in figures],
        "seconds": time.perf_counter() - start,
    }
    results = _finite(results)
    (out / "results.json").write_text(json.dumps(results, indent=2))
    return results


# %%
# Run the example. The documentation runs ``main`` in its ``--quick`` mode (the command line
# gives ``--quick -o DIR``); the figures it writes are shown below, and the numbers it returns
# are printed as JSON.

if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
