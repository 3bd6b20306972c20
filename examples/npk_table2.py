"""Table 2 of the NPF/NPK paper on sklearn digits: which NPF learning settings generalise.

FC network (w=100, d=5 by default), modes FRNPF (II), FRNPF (DI), DNPFL, FLNPF and ReLU,
optimisers SGD and Adam, 5 seeds; test accuracy (%) mean +- std. The paper reports on MNIST
that FRNPF < FLNPF ~ ReLU and DNPFL ~ ReLU.

    python examples/npk_table2.py -o out/table2          # full run (a few minutes)
    python examples/npk_table2.py --quick -o /tmp/t2     # smoke run
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from gdln._dgn import Gate, make_dataset, make_dgn, train_dgn

MODES = ("frnpf_ii", "frnpf_di", "dnpfl", "flnpf", "relu")
LABELS = {
    "frnpf_ii": "FRNPF (II)",
    "frnpf_di": "FRNPF (DI)",
    "dnpfl": "DNPFL",
    "flnpf": "FLNPF",
    "relu": "ReLU",
}
PAPER_MNIST = {  # Table 2 of NPF/NPK, FC on MNIST
    "sgd": {"frnpf_ii": 95.85, "frnpf_di": 95.85, "dnpfl": 97.86, "flnpf": 97.10, "relu": 97.85},
    "adam": {"frnpf_ii": 96.02, "frnpf_di": 96.09, "dnpfl": 98.22, "flnpf": 97.82, "relu": 98.14},
}


def accuracy(net, x, y) -> float:
    with torch.no_grad():
        return float((net(x).argmax(dim=1) == y).double().mean()) * 100


def run(
    width: int, depth: int, epochs: int, seeds: int, n_train: int, n_test: int, lr: dict[str, float]
) -> dict:
    x, y = make_dataset("digits", n=n_train + n_test, seed=0)
    xtr, ytr, xte, yte = x[:n_train], y[:n_train], x[n_train:], y[n_train:]
    results: dict[str, dict[str, list[float]]] = {
        o: {m: [] for m in MODES} for o in ("sgd", "adam")
    }
    for seed in range(seeds):
        for opt in ("sgd", "adam"):
            kw = dict(
                epochs=epochs,
                lr=lr[opt],
                optimizer=opt,
                batch_size=32,
                loss="cross_entropy",
                seed=seed,
            )
            relu = train_dgn(
                make_dgn(64, width, depth, d_out=10, seed=100 + seed), xtr, ytr, **kw
            ).net
            results[opt]["relu"].append(accuracy(relu, xte, yte))
            print(f"seed {seed} {opt} relu {results[opt]['relu'][-1]:.2f}", flush=True)
            for mode in ("frnpf_ii", "frnpf_di", "dnpfl", "flnpf"):
                gate = Gate("soft", beta=4.0) if mode == "dnpfl" else Gate("relu")
                net = make_dgn(
                    64,
                    width,
                    depth,
                    d_out=10,
                    mode=mode,
                    gate=gate,
                    seed=seed,
                    source=relu if mode == "flnpf" else None,
                )
                trained = train_dgn(net, xtr, ytr, **kw).net
                results[opt][mode].append(accuracy(trained, xte, yte))
                print(f"seed {seed} {opt} {mode} {results[opt][mode][-1]:.2f}", flush=True)
    return results


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("-o", "--out", type=Path, default=Path("out/npk_table2"))
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=40)
    args = ap.parse_args(argv)
    if args.quick:
        cfg = dict(width=8, depth=3, epochs=1, seeds=1, n_train=100, n_test=50)
    else:
        cfg = dict(
            width=100, depth=5, epochs=args.epochs, seeds=args.seeds, n_train=1297, n_test=500
        )
    torch.manual_seed(0)
    res = run(**cfg, lr={"sgd": 0.1, "adam": 3e-4 if not args.quick else 1e-2})
    args.out.mkdir(parents=True, exist_ok=True)
    lines = [
        "| optimiser | " + " | ".join(LABELS[m] for m in MODES) + " |",
        "|---|" + "---|" * len(MODES),
    ]
    for opt, table in res.items():
        cells = [
            f"{np.mean(table[m]):.2f} ± {np.std(table[m]):.2f} "
            f"(paper MNIST {PAPER_MNIST[opt][m]:.2f})"
            for m in MODES
        ]
        lines.append(f"| {opt} | " + " | ".join(cells) + " |")
    text = "\n".join(lines)
    print(
        f"digits, FC w={cfg['width']} d={cfg['depth']}, {cfg['seeds']} seeds, "
        f"{cfg['epochs']} epochs, test accuracy %\n{text}"
    )
    (args.out / "table2.md").write_text(text + "\n")
    (args.out / "table2.json").write_text(json.dumps({"config": cfg, "accuracy": res}, indent=1))
    return res


if __name__ == "__main__":
    main()
