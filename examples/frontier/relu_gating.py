r"""ReLU networks through their gated networks: XoR and Make Haste Slowly's 3-context task.

A ReLU unit computes $1[z > 0]\,z$: with its activation patterns held fixed a ReLU network
*is* a gated deep linear network (Sec. 2 of Saxe, Sodhani & Lewallen 2022).
:func:`gdln.extract` reads that network off a run recorded with ``record_patterns``;
:func:`gdln.gating.relu_theory` starts its full-matrix dynamics (Eqs. 3-4, here the run's
own gradient-descent map) from the network's weights at a recorded step and draws them
against the ReLU loss, with the fraction of patterns that flip between records; and
:func:`gdln.predict_gating` solves the GDLN with one pathway per subset of the contexts
(the "rectified linear network" that Jarvis, Klein, Rosman & Saxe, *Make Haste Slowly*,
ICLR 2025, wrote by hand) and ranks which gatings win; the bottom panels score the ReLU
network's units against that prediction over its run.

* **XoR** (hidden 128, $\sigma_0 = 2\cdot10^{-4}$, no biases, lr 0.4, as
  ``examples/core/xor.py``): the patterns freeze at step 98, after the loss has fallen;
  from there the extracted GDLN (3 gated nodes, each on for 2 of the 4 examples) is the
  ReLU network exactly. The gated network of the patterns at step 20 is drawn too: exact
  for the gated network, not for the ReLU network, whose patterns still flip.
* **Make Haste Slowly's task** (8 items in 3 contexts, 11 -> 700 -> 60, their init
  $N(0, (0.005/700)^2)$ and lr 0.001 on the summed loss, i.e. lr 0.024 on gdln's mean):
  the patterns never freeze (units on the kink flip every step), so the extracted
  GDLN, started near the half-loss epoch, is a coarse-graining whose gap is drawn.

Run ``python examples/frontier/relu_gating.py [--quick] [-o DIR]``; writes
``relu_gating_xor.png``, ``relu_gating_haste.png`` and ``results.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import numpy as np

import gdln

# %%
# The tasks as graph files: a ReLU hidden node is ``activation: relu``.


def relu_graph(
    folder: Path, name: str, hidden: int, x: np.ndarray, y: np.ndarray, context: np.ndarray
) -> gdln.Problem:
    """A ReLU network ``x -> h -> y`` on the examples, one task context per value of
    ``context`` (one context when all are equal)."""
    lines = [
        f"nodes: [{{id: x, size: {x.shape[1]}}}, {{id: h, size: {hidden}, activation: relu}}, "
        f"{{id: y, size: {y.shape[1]}}}]",
        "edges: [{source: x, target: h}, {source: h, target: y}]",
    ]
    labels = sorted(set(context.tolist()))
    if len(labels) == 1:
        lines += ["task:", "  examples:"]
        lines += [
            f"    - {{inputs: {{x: {a.tolist()}}}, targets: {{y: {b.tolist()}}}}}"
            for a, b in zip(x, y, strict=True)
        ]
    else:
        lines.append("datasets:")
        for c in labels:
            xs, ys = x[context == c].tolist(), y[context == c].tolist()
            lines.append(f"  c{c}: {{examples: {{x: {xs}, y: {ys}}}}}")
        lines += ["task:", "  contexts:"]
        lines += [
            f"    - {{probability: 1/{len(labels)}, dataset: c{c}, inputs: {{x: x}}, "
            f"targets: {{y: y}}, label: context{c + 1}}}"
            for c in labels
        ]
    path = folder / f"{name}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return gdln.load(path)


def haste_task() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Make Haste Slowly's 3-context task (their ``gen_data3(8, diff_struct=True)``): inputs
    item one-hot (8) and context one-hot (3); targets a hierarchy shared by every context
    (15 rows), then one 15-row block per context (the hierarchy, a ring, a crossed
    hierarchy), zero outside its own context. Examples in rows, context-major."""
    tree = np.vstack([np.kron(np.eye(2**k), np.ones(8 // 2**k)) for k in range(4)])
    bump = np.array([0.0, 0.33, 0.66, 1.0, 1.0, 0.66, 0.33, 0.0])
    shifted = [np.roll(bump, -k) for k in range(8)]
    ring = np.vstack([np.ones(8), *shifted, *shifted[:6]])
    cross = tree.copy()
    cross[3:7] = np.eye(8)[[0, 1, 4, 5]] + np.eye(8)[[2, 3, 6, 7]]
    blocks = [tree, ring, cross]
    x, y = [], []
    for c in range(3):
        for item in range(8):
            x.append(np.concatenate([np.eye(8)[item], np.eye(3)[c]]))
            rows = [tree[:, item]] + [blocks[k][:, item] * (k == c) for k in range(3)]
            y.append(np.concatenate(rows))
    return np.array(x), np.array(y), np.repeat(np.arange(3), 8)


# %%
# One run: simulate with patterns, predict the gating, and the theory from a step.


def study(
    problem: gdln.Problem,
    weights: dict,
    *,
    steps: int,
    lr: float,
    every: int,
    starts: list[int | None],
    predict_t: float,
    span: float | None = None,
) -> tuple[list[Any], dict[str, Any]]:
    """The run, the gating prediction and :func:`gdln.gating.relu_theory` from each start."""
    settings = dict(record_every=every, record_patterns=True)
    clock = time.perf_counter()
    run = gdln.simulate(problem, weights=weights, steps=steps, lr=lr, seeds=1, **settings)
    prediction = gdln.predict_gating(problem, t_max=predict_t, points=41, b0=1e-3)
    results = [
        gdln.gating.relu_theory(run, step=s, t_max=span, prediction=prediction if k == 0 else None)
        for k, s in enumerate(starts)
    ]
    last = gdln.extract(run)
    loss = np.asarray(run.loss[:, 0])
    below = int(np.argmax(loss <= 0.5 * loss[0]))
    summary = {
        "half_loss_between_steps": [(below - 1) * every + 1, below * every],
        "frozen_from": last.frozen_from,
        "final_share_by_contexts_on": {
            f"on in {size} of {len(last.contexts)}": round(
                sum(v for c, v in last.class_shares().items() if len(c) == size), 4
            )
            for size in range(1, len(last.contexts) + 1)
        },
        "prediction": prediction.summary().splitlines(),
        "theory": [
            {
                "start_step": r.extraction.step,
                "gap": r.gap(),
                "gated_nodes": len(r.extraction.groups),
            }
            for r in results
        ],
        "agreement_final": float(results[0].agreement.agreement[-1]),
        "selectivity_final": float(results[0].agreement.selectivity[-1]),
        "seconds": time.perf_counter() - clock,
    }
    return results, summary


# %%
# The figure: :func:`gdln.plotting.plot_result` of the first start (the loss against the
# theory, the flips between records, the share of the predicted gatings), with the other
# starts' theories added to its loss panel.


def draw(results: list[Any], path: Path) -> None:
    """The first result's figure (:func:`gdln.plotting.plot_result`), with the other
    starts' theories added to its loss panel."""
    fig = gdln.plotting.plot_result(results[0])
    ax = fig.axes[0]
    for k, r in enumerate(results[1:], start=1):
        ax.plot(
            r.theory.t + r.start,
            r.theory.loss,
            color=f"C{4 + k}",
            lw=1.0,
            ls="-.",
            label=f"gated network of step {r.extraction.step}",
        )
    ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.savefig(path, dpi=110)


# %%
# XoR, then Make Haste Slowly's task at their sizes (quick: 100 hidden units, 1000 epochs).


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run XoR and Make Haste Slowly's task; write the figures and ``results.json``."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a few seconds)")
    parser.add_argument("-o", "--out", default="out/relu_gating", help="output folder")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}

    xor_x = np.array([[1.0, 1.0], [1.0, -1.0], [-1.0, 1.0], [-1.0, -1.0]])
    xor_y = np.array([[1.0], [-1.0], [-1.0], [1.0]])
    xor = relu_graph(out, "xor_relu", 128, xor_x, xor_y, np.zeros(4, int))
    w = np.random.default_rng(0).normal(0.0, 2e-4, (128, 3))
    found, results["xor"] = study(
        xor,
        {("x", "h"): w[:, :2], ("h", "y"): w[:, 2:].T},
        steps=200,
        lr=0.4,
        every=1,
        starts=[None, 20],
        predict_t=30.0 if args.quick else 80.0,
    )
    draw(found, out / "relu_gating_xor.png")

    # Their sizes: 700 hidden units, 8000 epochs; quick: 100 units, 1000 epochs.
    hidden, epochs, every = (100, 1000, 50) if args.quick else (700, 8000, 100)
    start, span = (800, 50) if args.quick else (800, 400)
    x, y, context = haste_task()
    haste = relu_graph(out, "haste_relu", hidden, x, y, context)
    rs = np.random.RandomState(0)  # their draw: W1 then W2, N(0, (0.005/700)^2)
    sigma = 0.005 / 700
    weights = {
        ("x", "h"): rs.normal(0, sigma, (hidden, 11)),
        ("h", "y"): rs.normal(0, sigma, (60, hidden)),
    }
    found, results["haste"] = study(
        haste,
        weights,
        steps=epochs,
        lr=24 * 0.001,
        every=every,
        starts=[start],
        predict_t=epochs * 0.024,
        span=span * 0.024,
    )
    draw(found, out / "relu_gating_haste.png")
    (out / "results.json").write_text(json.dumps(results, indent=1, default=str))
    print(json.dumps(results, indent=1, default=str))
    return results


if __name__ == "__main__":
    main()
