"""Pathway race: sharing speeds learning, and generalisation sets in with K/M (Fig. 5).

Reproduces Fig. 5b-c of Saxe, Sodhani & Lewallen (2022), "The Neural Race Reduction".

* **Fig. 5b** (theory, Eqs. 16-17 and 52-56): ``graphs/race.yaml`` with M = 10 and
  P in {1, 4, M^2} routes per hidden pathway, reduced with :func:`gdln.reduce` (lumping
  by symmetry) and solved with :func:`gdln.solve` from small balanced weights. Plotted:
  the strength of the top mode, B1*B2*B3 (input, hidden, output edge), and B1 and B2
  themselves against time, and the ratio B2/B1 of hidden to input singular values
  against P^(1/4) (Eq. 56).
* **Eq. 56 in the full network**: the same ``graphs/race.yaml`` trained by
  :func:`gdln.simulate` from sigma_0 = 0.2 x Xavier weights (not the theory's decoupled
  ones), with B1 and B2 measured as the top singular values of the input and hidden
  weight matrices (mean over the equivalent edges).
* **Fig. 5c** (simulation): ``graphs/routing.yaml`` with M = 10 input and output
  domains, each input trained with K seeded random outputs, N_h = 64, sigma_0 = 0.2
  (x Xavier normal), trained by full-batch gradient descent with :func:`gdln.simulate`
  and evaluated on all M^2 routes. The error of a route is its loss divided by the loss
  of a zero output (1 = nothing learned). Grid: K = 1..M and seeds, run by
  :func:`gdln.run_sweep` (resumable CSV table, local processes or Dask).

Learning rate: gdln's loss is the *average* over the K*M trained routes (Eq. 1), so the
gradient of each edge does not grow with K; the paper's lambda = 0.05/K compensates the
K-fold growth of a summed loss. We use one lr (time t/tau = lr * step) for all K.

Onset of generalisation: the smallest K/M from which on the mean untrained error is
within ``--tol`` (default 0.05, fixed before any run) of the mean trained error.

Run: ``PYTHONPATH=. python examples/core/race.py [--quick] [-o out/race] [--workers N]
[--scheduler ADDRESS]``. Writes ``race_singular_values.{png,svg}``,
``race_ratio.{png,svg}``, ``race_generalisation.{png,svg}``, ``sweep.csv`` and
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
# The graph files: ``graphs/race.yaml`` (the race between a shared and a private pathway, Fig.
# 5a) and ``graphs/routing.yaml`` (Fig. 5c).

# sphinx-gallery runs the script without __file__, from its folder (docs/_ext/gdln_gallery.py)
ROOT = Path(globals().get("__file__", Path.cwd() / "x.py")).resolve().parents[2]
GRAPHS = ROOT / "graphs"


# %%
# Fig. 5b in theory: the reduced dynamics of ``graphs/race.yaml`` (Eqs. 16-17 and 52-56),
# where the pathway shared by $P$ routes wins the race with $B_2/B_1 = P^{1/4}$ (Eq. 56).


def race_theory(*, M: int, P: int, init: float, t_max: float) -> dict[str, np.ndarray]:
    """Reduced dynamics of ``graphs/race.yaml`` (Eqs. 16-17): t, B1, B2, B3, strength."""
    problem = gdln.load(GRAPHS / "race.yaml", params={"M": str(M), "P": str(P)})
    reduction = gdln.reduce(problem, lump="symmetry", b0=init)
    trajectory = gdln.solve(reduction, t_max=t_max, points=4001)
    series = {name: np.asarray(trajectory.variable(name)) for name in ("B1", "B2", "B3")}
    return {
        "t": np.asarray(trajectory.t),
        **series,
        "strength": series["B1"] * series["B2"] * series["B3"],
        "loss": np.asarray(trajectory.loss),
    }


# %%
# Eq. (56) measured in the full network: the same graph trained by gradient descent from small
# random weights.


def race_simulation(
    *, M: int, P: int, hidden: int, scale: float, lr: float, t_max: float, seed: int
) -> dict[str, np.ndarray]:
    """Full network of ``graphs/race.yaml`` from sigma_0 x Xavier weights (Eq. 56 measured).

    Returns t (60 log-spaced records), the loss and B1, B2, B3: the top singular value
    of the input (x -> a), hidden (a -> b) and output (b -> y) weight matrices, each the
    mean over the edges of its kind (they are equivalent by symmetry).
    """
    problem = gdln.load(
        GRAPHS / "race.yaml", params={"M": str(M), "P": str(P), "hidden": str(hidden)}
    )
    steps = round(t_max / lr)
    record = sorted({0, *np.rint(np.geomspace(1, steps, 60)).astype(int).tolist()})
    trajectory = gdln.simulate(
        problem.graph,
        problem.examples(),
        steps=steps,
        lr=lr,
        init_scheme="xavier",
        init_scale=scale,
        seeds=[seed],
        record_steps=tuple(record),
        threads=1,
    )
    out: dict[str, np.ndarray] = {"t": np.asarray(trajectory.t), "loss": trajectory.loss[:, 0]}
    for name, kind in (("B1", "x"), ("B2", "a"), ("B3", "b")):
        edges = [e for e in problem.graph.edges if str(e[0]).startswith(kind)]
        tops = [trajectory.singular_values(e)[:, 0, 0] for e in edges]
        out[name] = np.mean(tops, axis=0)
    return out


# %%
# Fig. 5c: train the routing network on $K$ of its $M$ outputs per input, then measure the
# error on trained and untrained routes, and the smallest $K/M$ from which on untrained routes
# are as good as trained ones.


def route_errors(
    *, M: int, K: int, seed: int, hidden: int, scale: float, lr: float, t_max: float
) -> dict[str, float]:
    """Train routing with K seeded random outputs per input; errors on all M^2 routes.

    Returns the mean normalised error on trained and untrained routes (NaN when K = M)
    and the final training loss. Top level, so that sweeps can send it to workers.
    """
    params = {"M": str(M), "K": str(K), "hidden": str(hidden), "seed": str(seed)}
    problem = gdln.load(GRAPHS / "routing.yaml", params=params)
    everything = gdln.load(
        GRAPHS / "routing.yaml", params={**params, "K": str(M), "seed": "-1"}
    ).examples()
    steps = round(t_max / lr)
    trajectory = gdln.simulate(
        problem.graph,
        problem.examples(),
        steps=steps,
        lr=lr,
        init_scheme="xavier",
        init_scale=scale,
        seeds=[seed],
        eval_examples=everything,
        record_every=steps,
        threads=1,
    )
    trained = set(problem.examples().context_labels)
    base = everything.zero_output_loss()
    errors = {True: [], False: []}
    for c, label in enumerate(everything.context_labels):
        final = float(trajectory.context_losses(evaluation=True)[label][-1, 0])
        errors[label in trained].append(final / base[c])
    return {
        "trained_error": float(np.mean(errors[True])),
        "untrained_error": float(np.mean(errors[False])) if errors[False] else float("nan"),
        "final_loss": float(np.asarray(trajectory.loss)[-1, 0]),
    }


def onset(fractions: np.ndarray, trained: np.ndarray, untrained: np.ndarray, tol: float) -> float:
    """Smallest K/M from which on (all larger K < M too) untrained <= trained + tol."""
    ok = [(f, u <= t + tol) for f, t, u in zip(fractions, trained, untrained, strict=True)]
    ok = [(f, good) for f, good in ok if np.isfinite(f)]
    result = float("nan")
    for f, good in reversed(ok):
        if not good:
            break
        result = float(f)
    return result


# %%
# Fig. 5b: the race in the reduced ODE (top-mode strength $B_1 B_2 B_3$ and the singular
# values $B_1$, $B_2$ per degree of sharing $P$) beside the full network from small random
# weights.


def plot_race(
    theory: dict[int, dict[str, np.ndarray]],
    simulated: dict[int, dict[str, np.ndarray]],
    *,
    M_theory: int,
    sim_hidden: int,
    out: Path,
) -> list[Path]:
    """Fig. 5b: the reduced dynamics per P, and the full network's top singular values."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
    for c, (P, th) in enumerate(theory.items()):
        colour = f"C{c}"
        axes[0].plot(th["t"][1:], th["strength"][1:, 0], color=colour, label=f"P = {P}")
        axes[1].plot(th["t"][1:], th["B1"][1:, 0], color=colour, label=f"B1, P = {P}")
        axes[1].plot(th["t"][1:], th["B2"][1:, 0], "--", color=colour, label=f"B2, P = {P}")
        sim = simulated[P]
        axes[2].plot(sim["t"][1:], sim["B1"][1:], color=colour, label=f"B1, P = {P}")
        axes[2].plot(sim["t"][1:], sim["B2"][1:], "--", color=colour, label=f"B2, P = {P}")
    titles = (
        f"Fig. 5b: pathway race, M = {M_theory} (theory)",
        "input B1 and hidden B2 (theory, top mode)",
        f"full network, σ0 = 0.2, N_h = {sim_hidden} (top singular values)",
    )
    labels = ("top-mode strength B1·B2·B3", "singular value", "singular value")
    for ax, title, label in zip(axes, titles, labels, strict=True):
        ax.set_xscale("log")
        ax.set_xlabel("time t / τ")
        ax.set_ylabel(label)
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    figures = gdln.save_figure(fig, out, "race_singular_values", dpi=90)
    plt.close(fig)
    return figures


# %%
# Eq. (56): at the end of learning the shared pathway's hidden singular value is $P^{1/4}$
# times its input one, $B_2 = P^{1/4} B_1$, in the reduced ODE and in the full network.


def eq56(
    theory: dict[int, dict[str, np.ndarray]],
    simulated: dict[int, dict[str, np.ndarray]],
    *,
    sim_hidden: int,
    out: Path,
) -> tuple[dict[int, float], dict[int, float], dict[int, float], list[Path]]:
    """$B_2/B_1$ of the theory and of the full network, half-learning times, and the figure."""
    import matplotlib.pyplot as plt

    Ps = tuple(theory)
    figures: list[Path] = []
    ratios = {P: float(th["B2"][-1, 0] / th["B1"][-1, 0]) for P, th in theory.items()}
    sim_ratios = {P: float(sim["B2"][-1] / sim["B1"][-1]) for P, sim in simulated.items()}
    half_times = {}
    for P, th in theory.items():
        s = th["strength"][:, 0]
        target = 0.5 * s[-1]
        half_times[P] = float(th["t"][np.argmax(s >= target)])
    fig, ax = plt.subplots(figsize=(5, 3.6))
    grid = np.array(Ps, dtype=float)
    ax.plot(grid, grid**0.25, "k--", label="P^(1/4) (Eq. 56)")
    ax.plot(grid, [ratios[P] for P in Ps], "o", label="reduced ODE, end of learning")
    ax.plot(
        list(sim_ratios),
        list(sim_ratios.values()),
        "x",
        ms=9,
        label=f"full network from σ0 = 0.2, N_h = {sim_hidden}",
    )
    ax.set_xscale("log")
    ax.set_xlabel("routes per hidden pathway P")
    ax.set_ylabel("B2 / B1 (hidden / input singular value)")
    ax.set_title("Eq. 56: B2 = P^(1/4) B1")
    ax.legend()
    fig.tight_layout()
    figures += gdln.save_figure(fig, out, "race_ratio", dpi=90)
    plt.close(fig)
    return ratios, sim_ratios, half_times, figures


# %%
# Fig. 5c: train the routing network with $K$ of $M$ outputs per input (a sweep over $K$ and
# seeds, :func:`gdln.run_sweep`), then compare the error on untrained routes with the error
# on trained ones; generalisation sets in from $K/M \approx 0.4$ in the paper.


def generalisation(
    *,
    M: int,
    hidden: int,
    seeds: tuple[int, ...],
    lr: float,
    t_max: float,
    Ks: tuple[int, ...],
    out: Path,
    workers: int | None,
    scheduler: str | None,
    tol: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, list[Path]]:
    """Errors on trained and untrained routes against K/M, the onset, and the figure."""
    import matplotlib.pyplot as plt

    figures: list[Path] = []
    points = [
        {"M": M, "K": K, "seed": s, "hidden": hidden, "scale": 0.2, "lr": lr, "t_max": t_max}
        for K in Ks
        for s in seeds
    ]
    rows = run_sweep(
        route_errors,
        points,
        table=out / "sweep.csv",
        workers=workers,
        scheduler=scheduler,
    )
    fractions = np.array([K / M for K in Ks])
    trained = np.array([np.mean([r["trained_error"] for r in rows if r["K"] == K]) for K in Ks])
    untrained = np.array(
        [
            np.nanmean([r["untrained_error"] for r in rows if r["K"] == K]) if K < M else np.nan
            for K in Ks
        ]
    )
    sem = np.array(
        [
            np.nanstd([r["untrained_error"] for r in rows if r["K"] == K]) / np.sqrt(len(seeds))
            if K < M
            else np.nan
            for K in Ks
        ]
    )
    start_onset = onset(fractions[:-1], trained[:-1], untrained[:-1], tol)
    fig, ax = plt.subplots(figsize=(5, 3.6))
    ax.plot(fractions, trained, "o-", color="tab:blue", label="trained routes")
    ax.errorbar(fractions, untrained, yerr=sem, fmt="o-", color="tab:red", label="untrained routes")
    if np.isfinite(start_onset):
        ax.axvline(start_onset, color="grey", ls=":", label=f"onset K/M = {start_onset:.2f}")
    ax.set_xlabel("fraction of output domains trained per input, K / M")
    ax.set_ylabel("error (loss / zero-output loss)")
    ax.set_title(f"Fig. 5c: M = {M}, N_h = {hidden}, σ0 = 0.2, {len(seeds)} seeds")
    ax.legend()
    fig.tight_layout()
    figures += gdln.save_figure(fig, out, "race_generalisation", dpi=90)
    plt.close(fig)
    return fractions, trained, untrained, start_onset, figures


# %%
# The experiment: the sizes (small ones with ``--quick``), the theory for $P = 1, 4, 100$
# and the full network (Fig. 5b, Eq. 56), the sweep over $K/M$ (Fig. 5c), and
# ``results.json``.


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the example; returns (and writes to results.json) the measured numbers."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for tests")
    parser.add_argument("-o", "--out", default="out/race", help="output directory")
    parser.add_argument("--scheduler", default=None, help="Dask scheduler address")
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="local processes (default: one per core; 1 with --quick, whose few short "
        "points finish before a process pool has started)",
    )
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
        M_theory, Ps, init, t_max_theory = 4, (1, 4, 16), 0.01, 2000.0
        M, hidden, seeds, lr, t_max = 4, 16, (0,), 0.1, 40.0
        Ks = (1, 2, 3, 4)
        # full network of race.yaml: lr and horizon per P (a route's share is P/M^2)
        sim_hidden, sim_runs = 8, {1: (0.2, 50.0), 4: (0.2, 50.0), 16: (0.2, 50.0)}
    else:
        M_theory, Ps, init, t_max_theory = 10, (1, 4, 100), 0.01, 20000.0
        M, hidden, seeds, lr, t_max = 10, 64, (0, 1, 2), 0.1, 80.0
        Ks = tuple(range(1, 11))
        sim_hidden, sim_runs = 32, {1: (1.0, 1500.0), 4: (0.5, 500.0), 100: (0.1, 100.0)}

    # Fig. 5b: reduced dynamics for several degrees of sharing P.
    theory = {P: race_theory(M=M_theory, P=P, init=init, t_max=t_max_theory) for P in Ps}
    simulated = {
        P: race_simulation(
            M=M_theory, P=P, hidden=sim_hidden, scale=0.2, lr=rate, t_max=horizon, seed=0
        )
        for P, (rate, horizon) in sim_runs.items()
    }
    figures = plot_race(theory, simulated, M_theory=M_theory, sim_hidden=sim_hidden, out=out)
    ratios, sim_ratios, half_times, more = eq56(theory, simulated, sim_hidden=sim_hidden, out=out)
    figures += more

    # Fig. 5c: trained and untrained error against K/M.
    fractions, trained, untrained, start_onset, more = generalisation(
        M=M,
        hidden=hidden,
        seeds=seeds,
        lr=lr,
        t_max=t_max,
        Ks=Ks,
        out=out,
        workers=args.workers,
        scheduler=args.scheduler,
        tol=args.tol,
    )
    figures += more

    results: dict[str, Any] = {
        "quick": args.quick,
        "theory": {
            "M": M_theory,
            "P": list(Ps),
            "init": init,
            "ratio_B2_B1": [ratios[P] for P in Ps],
            "P_quarter": [P**0.25 for P in Ps],
            "half_time_top_mode": [half_times[P] for P in Ps],
        },
        "simulation": {
            "M": M_theory,
            "hidden": sim_hidden,
            "scale": 0.2,
            "P": list(sim_ratios),
            "lr": [sim_runs[P][0] for P in sim_ratios],
            "t_max": [sim_runs[P][1] for P in sim_ratios],
            "B1_final": [float(simulated[P]["B1"][-1]) for P in sim_ratios],
            "B2_final": [float(simulated[P]["B2"][-1]) for P in sim_ratios],
            "ratio_B2_B1": list(sim_ratios.values()),
            "P_quarter": [P**0.25 for P in sim_ratios],
            "final_loss": [float(simulated[P]["loss"][-1]) for P in sim_ratios],
        },
        "generalisation": {
            "M": M,
            "hidden": hidden,
            "seeds": list(seeds),
            "lr": lr,
            "t_max": t_max,
            "K_over_M": fractions.tolist(),
            "trained_error": trained.tolist(),
            "untrained_error": [None if not np.isfinite(u) else float(u) for u in untrained],
            "tol": args.tol,
            "onset_K_over_M": start_onset if np.isfinite(start_onset) else None,
            "paper_onset_K_over_M": 0.4,
        },
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
