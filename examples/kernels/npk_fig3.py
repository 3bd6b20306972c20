"""Fig. 3 of the NPF/NPK paper: NPFs are learnt during training.

Left: FLNPF test accuracy when the gates are copied from a ReLU network at successive
training stages (FLNPF-1..6; the value network is trained afresh each time). Middle
(task ``digits47`` only): $\\nu_t = y^\\top\\hat H_t^{-1}y$ of the normalised NPK
$\\hat H_t = H_t/\\mathrm{tr}\\,H_t$ on the 200 training examples falls as training proceeds.

Tasks (``--task``), each fixed by a rule taken from the paper, not tuned here:

``digits47`` (default)
    Sec. 6 item 3 of NPF/NPK: binary digits 4 vs 7, labels +-1, squared loss, FC w=100,
    d=5, 200 training examples, Adam lr 1e-3, batch 20, 60 epochs; stages at epochs
    0, 12, ..., 60 of the ReLU run.
``digits10``
    Fig. 3 left's protocol on the 10-class digits: the paper's FC network for MNIST
    (App.: w=128, d=6, cross-entropy, Adam lr 3e-4, batch 32), the Table 2 split (the first
    ``--n-train`` of a fixed permutation for training, default 1297, and the last 500 for
    testing), the ReLU network trained 60 epochs with stages FLNPF-1..6 at epochs 10, 20,
    ..., 60 (the paper's schedule); every FLNPF is trained 60 epochs. Gates at epoch 0
    (FLNPF-0) and FRNPF (II) are reported as references outside the rise test.

With several ``--seeds`` the rise is tested by a one-sided paired t-test of the last stage
against the first (pairs share a seed, hence a ReLU run) and the one-sided Spearman
correlation of accuracy with stage over all runs; it "holds" when both p < 0.05.

    python examples/kernels/npk_fig3.py -o out/fig3
    python examples/kernels/npk_fig3.py --task digits10 --seeds 5 -o out/fig3_digits10
    python examples/kernels/npk_fig3.py --quick -o /tmp/fig3
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from gdln import save_figure
from gdln.kernels import DGN, make_dataset, make_dgn, neural_path_kernel, normalised_nu, train_dgn

# %%
# The settings: seeds of the runs, the significance level of the rise test, and the tasks
# (each fixed by a rule taken from the paper).

#: Seed offset between runs (seed s uses the draws of seed 0 shifted by s * SEED_STRIDE).
SEED_STRIDE = 1000
#: Significance level of the rise test.
ALPHA = 0.05


@dataclass(frozen=True)
class Task:
    """One Fig. 3 setting: data, network, optimiser and the stages gates are copied at."""

    dataset: str
    width: int
    depth: int
    n_train: int
    n_test: int
    epochs: int
    stage_epochs: tuple[int, ...]
    reference_epochs: tuple[int, ...]
    flnpf_epochs: int
    lr: float
    batch_size: int
    loss: str
    d_out: int
    track_nu: bool


TASKS: dict[str, Task] = {
    "digits47": Task(
        dataset="digits47",
        width=100,
        depth=5,
        n_train=200,
        n_test=158,
        epochs=60,
        stage_epochs=(0, 12, 24, 36, 48, 60),
        reference_epochs=(),
        flnpf_epochs=60,
        lr=1e-3,
        batch_size=20,
        loss="squared",
        d_out=1,
        track_nu=True,
    ),
    "digits10": Task(
        dataset="digits",
        width=128,
        depth=6,
        n_train=1297,
        n_test=500,
        epochs=60,
        stage_epochs=(10, 20, 30, 40, 50, 60),
        reference_epochs=(0,),
        flnpf_epochs=60,
        lr=3e-4,
        batch_size=32,
        loss="cross_entropy",
        d_out=10,
        track_nu=False,
    ),
}

QUICK: dict[str, Task] = {
    "digits47": dataclasses.replace(
        TASKS["digits47"],
        width=16,
        depth=3,
        n_train=40,
        n_test=40,
        epochs=6,
        stage_epochs=(0, 3, 6),
        flnpf_epochs=3,
    ),
    "digits10": dataclasses.replace(
        TASKS["digits10"],
        width=16,
        depth=3,
        n_train=60,
        n_test=40,
        epochs=4,
        stage_epochs=(2, 4),
        flnpf_epochs=2,
        lr=1e-2,
    ),
}


# %%
# The data split, the test accuracy, and one seed: train a ReLU network, copy its gates at
# successive stages into fresh value networks (FLNPF-1..6) and train those, beside one frozen
# random gating (FRNPF); on ``digits47`` also track $\nu_t = y^\top\hat H_t^{-1}y$ of the
# normalised neural path kernel.


def load_split(task: Task) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Training and test examples: first ``n_train`` and last ``n_test`` of one permutation."""
    if task.dataset == "digits47":
        x, y = make_dataset("digits47", n=task.n_train + task.n_test, seed=0)
    else:
        x, y = make_dataset("digits", n=1797, seed=0)
        if task.n_train + task.n_test > len(x):
            raise SystemExit(f"--n-train {task.n_train}: at most {len(x) - task.n_test}")
    return x[: task.n_train], y[: task.n_train], x[-task.n_test :], y[-task.n_test :]


def test_accuracy(net: DGN, x: torch.Tensor, y: torch.Tensor) -> float:
    """Test accuracy in %: sign of the output for +-1 labels, argmax for class labels."""
    with torch.no_grad():
        out = net(x)
        pred = torch.sign(out[:, 0]) if out.shape[1] == 1 else out.argmax(dim=1)
        return float((pred == y).double().mean()) * 100


def run_seed(task: Task, data, seed: int, *, track_nu: bool) -> dict:
    """One ReLU run, the FLNPFs built from its stages and one FRNPF, all under ``seed``."""
    xtr, ytr, xte, yte = data
    off = SEED_STRIDE * seed
    epochs = sorted({*task.stage_epochs, *task.reference_epochs})
    snapshots: dict[int, DGN] = {}
    nus: list[tuple[int, float]] = []

    def record(epoch: int, net: DGN) -> None:
        if track_nu:
            nus.append((epoch, normalised_nu(neural_path_kernel(net, xtr).kernel, ytr.numpy())))
        if epoch in epochs:
            snapshots[epoch] = net.clone()

    kw = dict(lr=task.lr, optimizer="adam", batch_size=task.batch_size, loss=task.loss)
    relu = make_dgn(xtr.shape[1], task.width, task.depth, d_out=task.d_out, seed=1 + off)
    relu_losses = train_dgn(
        relu, xtr, ytr, epochs=task.epochs, seed=off, callback=record, **kw
    ).losses
    acc: dict[int, float] = {}
    for k, epoch in enumerate(epochs):
        # seed 10 + k for the k-th copied stage (in digits47 the stages are all epochs)
        net = make_dgn(
            xtr.shape[1],
            task.width,
            task.depth,
            d_out=task.d_out,
            mode="flnpf",
            source=snapshots[epoch],
            seed=10 + k + off,
        )
        trained = train_dgn(net, xtr, ytr, epochs=task.flnpf_epochs, seed=k + off, **kw).net
        acc[epoch] = test_accuracy(trained, xte, yte)
        print(f"seed {seed}: FLNPF, gates of epoch {epoch}: {acc[epoch]:.2f}%", flush=True)
    frnpf = make_dgn(
        xtr.shape[1], task.width, task.depth, d_out=task.d_out, mode="frnpf_ii", seed=99 + off
    )
    fr = train_dgn(frnpf, xtr, ytr, epochs=task.flnpf_epochs, seed=off, **kw).net
    return {
        "flnpf_acc": acc,
        "relu_acc": {e: test_accuracy(snapshots[e], xte, yte) for e in epochs},
        "frnpf_acc": test_accuracy(fr, xte, yte),
        "relu_losses": list(relu_losses),
        "nu": nus,
    }


# %%
# Does test accuracy rise with the stage the gates were copied at? A one-sided test over
# seeds, and the mean and spread of each stage.


def rise_test(stage_acc: np.ndarray) -> dict | None:
    """Does accuracy rise with stage? ``stage_acc[s, k]``: seed ``s``, stage ``k``.

    One-sided paired t-test of the last stage against the first, and one-sided Spearman
    correlation of accuracy with the stage index over all ``seeds * stages`` runs.
    """
    from scipy import stats

    seeds, stages = stage_acc.shape
    if seeds < 2 or stages < 2:
        return None
    first, last = stage_acc[:, 0], stage_acc[:, -1]
    diff = last - first
    if np.all(diff == diff[0]):  # no spread: the t statistic is undefined
        t_p = 0.0 if diff[0] > 0 else 1.0
    else:
        t_p = float(stats.ttest_rel(last, first, alternative="greater").pvalue)
    index = np.tile(np.arange(stages), seeds)
    if np.ptp(stage_acc) == 0:  # all accuracies tied: no rank correlation
        rho, rho_p = 0.0, 1.0
    else:
        rho, rho_p = stats.spearmanr(index, stage_acc.reshape(-1), alternative="greater")
    return {
        "last_minus_first_mean": float(diff.mean()),
        "last_minus_first_std": float(diff.std(ddof=1)),
        "seeds_last_above_first": int((diff > 0).sum()),
        "paired_t_p_one_sided": t_p,
        "spearman_rho": float(rho) if np.isfinite(rho) else 0.0,
        "spearman_p_one_sided": float(rho_p) if np.isfinite(rho_p) else 1.0,
        "holds": bool(t_p < ALPHA and np.isfinite(rho_p) and rho_p < ALPHA and rho > 0),
        "alpha": ALPHA,
    }


def mean_std(values) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for a single value)."""
    v = np.asarray(values, dtype=float)
    return float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else 0.0


# %%
# Run every seed of the task and test the claim of Fig. 3: the neural path features are learnt
# during training.


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--task", choices=sorted(TASKS), default="digits47")
    ap.add_argument("--seeds", type=int, default=1, help="ReLU runs (each with its FLNPFs)")
    ap.add_argument("--n-train", type=int, default=None, help="digits10: training examples")
    ap.add_argument("-o", "--out", type=Path, default=Path("out/npk_fig3"))
    args = ap.parse_args(argv)
    task = (QUICK if args.quick else TASKS)[args.task]
    if args.n_train is not None:
        if args.task != "digits10":
            raise SystemExit("--n-train applies to --task digits10 only")
        task = dataclasses.replace(task, n_train=args.n_train)
    if args.seeds < 1:
        raise SystemExit(f"--seeds: got {args.seeds}, expected >= 1")
    data = load_split(task)
    t0 = time.perf_counter()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small matrices: a second thread only adds overhead
    try:
        runs = [
            run_seed(task, data, s, track_nu=task.track_nu and s == 0) for s in range(args.seeds)
        ]
    finally:
        torch.set_num_threads(threads)
    wall = time.perf_counter() - t0
    stage_acc = np.array([[r["flnpf_acc"][e] for e in task.stage_epochs] for r in runs])

    def row(k: int | None, epoch: int) -> dict:
        accs = [r["flnpf_acc"][epoch] for r in runs]
        relu = [r["relu_acc"][epoch] for r in runs]
        return {
            "stage": k,
            "gates_from_epoch": epoch,
            "test_acc": mean_std(accs)[0],
            "test_acc_std": mean_std(accs)[1],
            "test_acc_runs": accs,
            "relu_test_acc_at_stage": mean_std(relu)[0],
        }

    flnpf = [row(k + 1, e) for k, e in enumerate(task.stage_epochs)]
    references = [row(None, e) for e in task.reference_epochs]
    fr_runs = [r["frnpf_acc"] for r in runs]
    res = {
        "task": args.task,
        "config": {
            **dataclasses.asdict(task),
            "seeds": args.seeds,
            # legacy key of the digits47 output
            "n_test": task.n_test,
        },
        "nu": runs[0]["nu"],
        "flnpf": flnpf,
        "flnpf_references": references,
        "frnpf_test_acc": mean_std(fr_runs)[0],
        "frnpf_test_acc_std": mean_std(fr_runs)[1],
        "frnpf_test_acc_runs": fr_runs,
        "relu_losses": [r["relu_losses"] for r in runs],
        "rise": rise_test(stage_acc),
        "wall_s": wall,
    }
    if task.d_out == 1:
        res["n_pos_train"] = int((data[1] > 0).sum())
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "fig3.json").write_text(json.dumps(res, indent=1))
    plot(res, args.out, ("png",) if args.quick else ("png", "svg"))
    if res["nu"]:
        nus = res["nu"]
        print(f"nu: {nus[0][1]:.4g} at epoch 0 -> {nus[-1][1]:.4g} at epoch {nus[-1][0]}")
    print(
        f"{args.task}, {args.seeds} seed(s), FLNPF stages (epoch: mean +- std %):",
        ", ".join(
            f"{f['gates_from_epoch']}: {f['test_acc']:.2f} +- {f['test_acc_std']:.2f}"
            for f in [*references, *flnpf]
        ),
        f"| FRNPF {res['frnpf_test_acc']:.2f} +- {res['frnpf_test_acc_std']:.2f}",
    )
    if res["rise"] is not None:
        r = res["rise"]
        print(
            f"last - first stage: {r['last_minus_first_mean']:+.2f} +- "
            f"{r['last_minus_first_std']:.2f} ({r['seeds_last_above_first']}/{args.seeds} "
            f"seeds up), paired t p = {r['paired_t_p_one_sided']:.3g}; Spearman rho = "
            f"{r['spearman_rho']:.3f}, p = {r['spearman_p_one_sided']:.3g}; "
            f"rise {'holds' if r['holds'] else 'does not hold'} at alpha = {ALPHA}"
        )
    print(f"wall {wall:.0f} s")
    return res


# %%
# Fig. 3: accuracy against stage (left) and $\nu_t$ against epoch (middle).


def plot(res: dict, out: Path, formats: tuple[str, ...] = ("png", "svg")) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
    rows = [*res["flnpf_references"], *res["flnpf"]]
    epochs = [f["gates_from_epoch"] for f in rows]
    axes[0].errorbar(
        epochs,
        [f["test_acc"] for f in rows],
        [f["test_acc_std"] for f in rows],
        marker="o",
        capsize=3,
        label="FLNPF (gates of epoch e)",
    )
    axes[0].plot(epochs, [f["relu_test_acc_at_stage"] for f in rows], "s:", label="ReLU at epoch e")
    axes[0].axhline(res["frnpf_test_acc"], color="gray", ls="--", label="FRNPF")
    # zoom on the FLNPF/FRNPF range; an untrained ReLU (chance level) is marked off scale
    low = min([f["test_acc"] - f["test_acc_std"] for f in rows] + [res["frnpf_test_acc"]])
    low = max(0.0, low - 1.0)
    top = max([f["relu_test_acc_at_stage"] for f in rows] + [f["test_acc"] for f in rows])
    axes[0].set_ylim(low, min(100.0, top + 1.0))
    for e, f in zip(epochs, rows, strict=True):
        if f["relu_test_acc_at_stage"] < low:
            axes[0].annotate(
                f"ReLU at e={e}: {f['relu_test_acc_at_stage']:.0f}% (off scale)",
                (e, low),
                xytext=(4, 4),
                textcoords="offset points",
                fontsize=7,
            )
    axes[0].set_xlabel("epoch e of the ReLU run the gates are copied from")
    axes[0].set_ylabel("test accuracy % (mean ± std over seeds)")
    axes[0].legend(fontsize=7)
    if res["nu"]:
        axes[1].plot([e for e, _ in res["nu"]], [v for _, v in res["nu"]])
        axes[1].set_ylabel(r"$\nu_t$")
    else:
        for losses in res["relu_losses"]:
            axes[1].semilogy(range(1, len(losses) + 1), losses, color="C0", alpha=0.5)
        axes[1].set_ylabel("ReLU training loss")
    axes[1].set_xlabel("epoch")
    cfg = res["config"]
    fig.suptitle(
        f"NPF/NPK Fig. 3 on {res['task']}: FC w={cfg['width']} d={cfg['depth']}, "
        f"{cfg['seeds']} seed(s); wall {res['wall_s']:.0f} s",
        fontsize=8,
    )
    save_figure(fig, out, "fig3", tight=True, formats=formats)


# %%
# Run the example. The documentation runs ``main`` in its ``--quick`` mode (the command line
# gives ``--quick -o DIR``); the figures it writes are shown below.

if __name__ == "__main__":
    main()
