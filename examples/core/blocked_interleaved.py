r"""Blocked against interleaved training: a shared network forgets, a gated one does not.

Flesch, Nagy, Saxe & Summerfield (2023) train one task after another (blocked) or both
at once (interleaved): a network that shares its weights between the tasks forgets the
first while it learns the second, a network whose context gates a pathway per task does
not. Here the tasks are the two contexts of App. A.2 of Saxe, Sodhani & Lewallen (2022)
(``graphs/context.yaml``: $x$ uniform on $[-1, 1]^2$, target $y = x_c$ in context $c$).

* **Shared** (one always-on pathway, ``pathways=1``), blocked: the total map goes to
  $[1\ 0]$, then to $[0\ 1]$; context 0's loss is back at
  $\tfrac12\langle(x_1 - x_2)^2\rangle = 1/3$, forgotten completely. Interleaved: the map
  goes to the least-squares $[\tfrac12\ \tfrac12]$ (Eqs. 24-25) and each context keeps
  $\tfrac12\langle(x_1 - x_2)^2\rangle/4 = 1/12$.
* **Gated** (``pathways=2``): each context trains its own pathway; blocked or
  interleaved, both losses reach 0 and nothing is forgotten.

Each schedule is solved phase by phase from the network's decoupled start (Eq. 9,
$b(0) = 0.1$) by :func:`gdln.compare` with ``schedule=``: the reduced gradient-descent
map where the phases share the start's bases, else the full matrices restarted at each
switch, against the full network trained through the same phases in torch from the same
weights (dots: equal to rounding) and from small random weights (thin line and band).
The values above are computed here from the exact moments, not from the run.

Run ``python examples/core/blocked_interleaved.py [--quick] [-o DIR]``; writes
``blocked_interleaved.{png,svg}`` and ``results.json``.
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
from gdln.task import blocked, interleaved

# sphinx-gallery runs the script without __file__, from its folder (docs/_ext/gdln_gallery.py)
ROOT = Path(globals().get("__file__", Path.cwd() / "x.py")).resolve().parents[2]
GRAPH = ROOT / "graphs" / "context.yaml"
CONTEXTS = ["context0", "context1"]
LR, SEEDS = 0.1, 3  # the simulations' learning rate and random starts

# %%
# The end losses worked out from the exact moments of $x \sim U[-1, 1]^2$:
# $\langle xx^\top\rangle = I/3$, target $x_c$ in context $c$.


def by_hand() -> dict[str, dict[str, list[float]]]:
    """Each network's and schedule's end loss per context, from the moments."""
    sigma_x = np.eye(2) / 3

    def loss(w: np.ndarray, c: int) -> float:
        # 1/2 <(x_c - w x)^2> = 1/2 (e_c - w) Sigma_x (e_c - w)^T
        r = np.eye(2)[c] - w
        return float(0.5 * r @ sigma_x @ r)

    after_second = np.array([0.0, 1.0])  # the shared map after blocked training
    least_squares = np.array([0.5, 0.5])  # Eqs. 24-25
    return {
        "shared": {
            "blocked": [loss(after_second, c) for c in (0, 1)],
            "interleaved": [loss(least_squares, c) for c in (0, 1)],
        },
        "gated": {"blocked": [0.0, 0.0], "interleaved": [0.0, 0.0]},
    }


# %%
# The two schedules of equal length: context 0 then context 1, or both throughout.


def schedules(duration: float) -> dict[str, gdln.task.Schedule]:
    """Blocked and interleaved schedules of ``2 * duration``."""
    return {
        "blocked": blocked(CONTEXTS, duration),
        "interleaved": interleaved(CONTEXTS, 2 * duration),
    }


def solve_all(duration: float, points: int, hidden: int) -> dict[str, dict[str, Any]]:
    """Every network under every schedule, theory against simulation:
    :class:`gdln.schedule.ScheduleComparison` by name."""
    runs: dict[str, dict[str, Any]] = {}
    for name, pathways in (("shared", 1), ("gated", 2)):
        problem = gdln.load(GRAPH, params={"pathways": str(pathways), "hidden": str(hidden)})
        runs[name] = {
            kind: gdln.compare(
                problem, schedule=schedule, lr=LR, b0=0.1, points=points, seeds=SEEDS
            )
            for kind, schedule in schedules(duration).items()
        }
    return runs


# %%
# Each context's loss over both schedules: blocked training of the shared network
# raises context 0's loss while context 1 trains (forgetting); the gated network keeps it.


def plot(runs: dict[str, dict[str, Any]], out: Path) -> list[Path]:
    """A 2 x 2 grid: network by schedule, one curve per context (theory: lines; the
    simulation from the decoupled start: dots; from random starts: thin lines), the switch
    marked."""
    fig, axes = plt.subplots(2, 2, figsize=(9, 5.6), sharex=True, sharey=True)
    for i, (network, row) in enumerate(runs.items()):
        for j, (kind, result) in enumerate(row.items()):
            ax = axes[i, j]
            run = result.theory
            decoupled = result.decoupled.context_losses()
            random = result.random.context_losses()
            every = max(1, len(run.trajectory.t) // 30)
            for k, (label, curve) in enumerate(run.context_loss.items()):
                color = f"C{k}"
                ax.plot(run.trajectory.t, curve, lw=1.5, color=color, label=f"loss in {label}")
                ax.plot(result.random.t, random[label].mean(axis=1), lw=0.8, color=color, ls="--")
                t = result.decoupled.t[::every]
                ax.plot(t, decoupled[label][::every, 0], "o", ms=2.5, color=color)
            for b in run.boundaries[1:-1]:
                ax.axvline(b, color="0.5", ls=":", lw=1)
            ax.set_title(f"{network} network, {kind}", fontsize=9)
            ax.set_ylim(bottom=0)
    for ax in axes[1]:
        ax.set_xlabel(r"time $t/\tau$")
    for ax in axes[:, 0]:
        ax.set_ylabel(r"loss $\mathcal{L}_c$")
    axes[0, 0].plot([], [], "o", ms=2.5, color="0.3", label="simulation, decoupled start")
    axes[0, 0].plot(
        [], [], lw=0.8, ls="--", color="0.3", label=f"simulation, {SEEDS} random starts"
    )
    axes[0, 0].legend(fontsize=7)
    return gdln.save_figure(fig, out, "blocked_interleaved", dpi=110, tight=True)


# %%
# The experiment: solve, compare the end losses with the values by hand, plot.


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the example; return (and write to ``results.json``) its key numbers."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small run (< 30 s)")
    parser.add_argument("-o", "--out", default="out/blocked_interleaved", help="output folder")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    duration, points, hidden = (60.0, 61, 4) if args.quick else (60.0, 241, 8)
    runs = solve_all(duration, points, hidden)
    results: dict[str, Any] = {
        "paper": "Flesch et al. 2023; App. A.2 of Saxe et al. 2022: a shared network forgets "
        "context 0 under blocked training (loss 1/3), interleaved reaches 1/12; gated: 0",
        "settings": {
            "duration_tau": duration,
            "points": points,
            "hidden": hidden,
            "b0": 0.1,
            "lr": LR,
            "seeds": SEEDS,
        },
        "by_hand": by_hand(),
    }
    for network, row in runs.items():
        results[network] = {
            kind: {
                "end_loss": [float(result.theory.context_loss[c][-1]) for c in CONTEXTS],
                "routes": [p.route for p in result.theory.phases],
                # context 0's rise while off (None: a phase that trains it)
                "forgetting": [
                    None if np.isnan(f) else float(f) for f in result.theory.measures.forgetting[0]
                ],
                # theory against simulation from the same decoupled weights: rounding
                "decoupled_vs_map": max(
                    result.metrics["contexts"][c]["decoupled_vs_map"] for c in CONTEXTS
                ),
            }
            for kind, result in row.items()
        }
    results["files"] = [str(f) for f in plot(runs, out)]
    results["wall_time_s"] = time.perf_counter() - start
    (out / "results.json").write_text(json.dumps(results, indent=2))
    return results


# %%
# Run the example. The documentation runs ``main`` in its ``--quick`` mode; the figure it
# writes is shown below, and the numbers it returns are printed as JSON.

if __name__ == "__main__":
    res = main()
    print(json.dumps({k: res[k] for k in ("shared", "gated", "wall_time_s")}, indent=2))
