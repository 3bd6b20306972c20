"""Fig. 3 of the NPF/NPK paper on binary digits (4 vs 7): NPFs are learnt during training.

Left: FLNPF test accuracy when the gates are copied from a ReLU network at successive
training stages (FLNPF-1..6). Middle: $\\nu_t = y^\\top\\hat H_t^{-1}y$ of the normalised NPK
$\\hat H_t = H_t/\\mathrm{tr}\\,H_t$ on the 200 training examples falls as training proceeds.
FC w=100, d=5, labels +-1, squared loss.

    python examples/npk_fig3.py -o out/fig3
    python examples/npk_fig3.py --quick -o /tmp/fig3
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from gdln._dgn import make_dataset, make_dgn, train_dgn
from gdln._npk import neural_path_kernel, normalised_nu


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("-o", "--out", type=Path, default=Path("out/npk_fig3"))
    args = ap.parse_args(argv)
    if args.quick:
        width, depth, n_train, n_all, epochs, stages, flnpf_epochs = 16, 3, 40, 80, 6, 3, 3
    else:
        width, depth, n_train, n_all, epochs, stages, flnpf_epochs = 100, 5, 200, 358, 60, 6, 60
    x, y = make_dataset("digits47", n=n_all, seed=0)
    xtr, ytr, xte, yte = x[:n_train], y[:n_train], x[n_train:], y[n_train:]
    # balanced training subset is not guaranteed by a random split; report class counts
    stage_epochs = np.linspace(0, epochs, stages).round().astype(int).tolist()
    snapshots: dict[int, object] = {}
    nus: list[tuple[int, float]] = []

    def record(epoch, net):
        nus.append((epoch, normalised_nu(neural_path_kernel(net, xtr).kernel, ytr.numpy())))
        if epoch in stage_epochs:
            snapshots[epoch] = net.clone()

    relu = make_dgn(64, width, depth, seed=1)
    kw = dict(lr=1e-3, optimizer="adam", batch_size=20, loss="squared")
    train_dgn(relu, xtr, ytr, epochs=epochs, seed=0, callback=record, **kw)

    def test_acc(net) -> float:
        with torch.no_grad():
            return float((torch.sign(net(xte)[:, 0]) == yte).double().mean()) * 100

    flnpf = []
    for k, epoch in enumerate(stage_epochs):
        src = snapshots[epoch]
        net = make_dgn(64, width, depth, mode="flnpf", source=src, seed=10 + k)
        trained = train_dgn(net, xtr, ytr, epochs=flnpf_epochs, seed=k, **kw).net
        flnpf.append(
            {
                "stage": k + 1,
                "gates_from_epoch": epoch,
                "test_acc": test_acc(trained),
                "relu_test_acc_at_stage": test_acc(src),
            }
        )
    frnpf = make_dgn(64, width, depth, mode="frnpf_ii", seed=99)
    fr_acc = test_acc(train_dgn(frnpf, xtr, ytr, epochs=flnpf_epochs, seed=0, **kw).net)
    res = {
        "config": {
            "width": width,
            "depth": depth,
            "n_train": n_train,
            "n_test": n_all - n_train,
            "epochs": epochs,
        },
        "nu": nus,
        "flnpf": flnpf,
        "frnpf_test_acc": fr_acc,
        "n_pos_train": int((ytr > 0).sum()),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "fig3.json").write_text(json.dumps(res, indent=1))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
    axes[0].plot([f["stage"] for f in flnpf], [f["test_acc"] for f in flnpf], "o-", label="FLNPF-k")
    axes[0].axhline(fr_acc, color="gray", ls="--", label="FRNPF")
    axes[0].set_xlabel("stage gates copied from")
    axes[0].set_ylabel("test accuracy %")
    axes[0].legend()
    axes[1].plot([e for e, _ in nus], [v for _, v in nus])
    axes[1].set_xlabel("epoch")
    axes[1].set_ylabel(r"$\nu_t$")
    fig.tight_layout()
    fig.savefig(args.out / "fig3.png", dpi=120)
    plt.close(fig)
    print(f"nu: {nus[0][1]:.4g} at epoch 0 -> {nus[-1][1]:.4g} at epoch {nus[-1][0]}")
    print(
        "FLNPF stages:",
        ", ".join(f"{f['gates_from_epoch']}:{f['test_acc']:.1f}%" for f in flnpf),
        f"| FRNPF {fr_acc:.1f}%",
    )
    return res


if __name__ == "__main__":
    main()
