"""``gdln kernel``: the NPK, NTK or path-formula Gram matrix of a network on a dataset."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click
import numpy as np
import torch

from ..kernels._dgn import DATASETS, MODES, DGNSpecError, Gate, make_dataset, make_dgn, train_dgn
from ..kernels._gram_paths import mlp_graph, mlp_term_counts, path_gram
from ..kernels._npk import neural_path_kernel, normalised_nu
from ..kernels._ntk import neural_tangent_kernel

__all__ = ["kernel"]

#: Largest number of Eq. 12 summands ``--kind h`` will enumerate.
MAX_H_TERMS = 2_000_000


def _spectrum_summary(eig: np.ndarray) -> dict[str, Any]:
    return {
        "rho_min": float(eig[0]),
        "rho_max": float(eig[-1]),
        "trace": float(eig.sum()),
        "condition": float(eig[-1] / eig[0]) if eig[0] > 0 else float("inf"),
    }


def _ecdf_plot(eig: np.ndarray, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.5, 3.5))
    e = np.sort(eig) / eig[-1]
    ax.plot(np.arange(1, len(e) + 1), np.cumsum(e), lw=1.5)
    ax.set_xlabel("index k (eigenvalues ascending)")
    ax.set_ylabel(r"$\sum_{i\leq k}\rho_i/\rho_{\max}$")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


@click.command("kernel")
@click.option(
    "--kind",
    type=click.Choice(["npk", "ntk", "h"]),
    default="npk",
    show_default=True,
    help="npk: H = Sigma . Lambda (NPF/NPK Lemma 2.1); ntk: torch.func NTK with its "
    "value/gate split; h: path formula of the GD Gram matrix (Thm. 5.1 of the "
    "path-formula paper) on the network's value weights.",
)
@click.option("--dataset", type=click.Choice(list(DATASETS)), default="digits47", show_default=True)
@click.option("-n", "--n", "n", type=int, default=200, show_default=True, help="Examples.")
@click.option("--width", type=int, default=64, show_default=True)
@click.option("--depth", type=int, default=4, show_default=True, help="Weight layers d.")
@click.option("--mode", type=click.Choice(list(MODES)), default="relu", show_default=True)
@click.option(
    "--gate",
    "gate_kind",
    type=click.Choice(["relu", "soft", "bernoulli"]),
    default=None,
    help="Gate function; default relu (bernoulli for --mode frg).",
)
@click.option("--beta", type=float, default=4.0, show_default=True, help="Soft-gate slope.")
@click.option("--epsilon", type=float, default=0.0, show_default=True)
@click.option("--p", "p", type=float, default=0.5, show_default=True, help="Bernoulli rate.")
@click.option("--sigma", type=float, default=None, help="Weight scale; default sqrt(2/w).")
@click.option(
    "--train-epochs",
    type=int,
    default=0,
    show_default=True,
    help="Train (Adam, squared loss) before computing; for flnpf the ReLU source is trained.",
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--chunk-size", type=int, default=None, help="NTK: examples per vectorised Jacobian chunk."
)
@click.option(
    "-o",
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory for kernel.json, kernel.npy and ecdf.png.",
)
@click.option("--plot/--no-plot", default=True, show_default=True, help="Write ecdf.png.")
def kernel(
    kind: str,
    dataset: str,
    n: int,
    width: int,
    depth: int,
    mode: str,
    gate_kind: str | None,
    beta: float,
    epsilon: float,
    p: float,
    sigma: float | None,
    train_epochs: int,
    seed: int,
    chunk_size: int | None,
    out: Path | None,
    plot: bool,
) -> None:
    """Compute a kernel of a deep gated network on a dataset; print its spectrum.

    Writes, under --out, kernel.json (settings, spectrum summary, all eigenvalues, nu =
    y^T (K/tr K)^-1 y for +-1 targets (digit parity for --dataset digits), and for
    --kind ntk the value/gate split norms),
    kernel.npy and the eigenvalue e.c.d.f. plot ecdf.png.

    \b
    Example:
      gdln kernel --kind ntk --dataset digits47 -n 200 --width 100 --depth 5 \\
          --mode dnpfl --gate soft -o out/ntk
    """
    if train_epochs < 0:
        raise DGNSpecError(f"--train-epochs: got {train_epochs}, expected an integer >= 0")
    x, y = make_dataset(dataset, n=n, seed=seed)
    if gate_kind is None:
        gate_kind = "bernoulli" if mode == "frg" else "relu"
    gate = Gate(gate_kind, beta=beta, epsilon=epsilon, p=p)  # type: ignore[arg-type]
    source = None
    targets = y.double() if y.dtype != torch.int64 else (y % 2).double() * 2 - 1
    if mode == "flnpf":
        source = make_dgn(x.shape[1], width, depth, gate=Gate("relu"), sigma=sigma, seed=seed + 1)
        if train_epochs:
            source = train_dgn(source, x, targets, epochs=train_epochs, seed=seed).net
    net = make_dgn(
        x.shape[1],
        width,
        depth,
        mode=mode,
        gate=gate,
        sigma=sigma,
        seed=seed,
        source=source,
        n_examples=n,
    )
    if train_epochs and mode != "flnpf":
        net = train_dgn(net, x, targets, epochs=train_epochs, seed=seed).net
    info: dict[str, Any] = {
        "kind": kind,
        "dataset": dataset,
        "n": n,
        "width": width,
        "depth": depth,
        "mode": mode,
        "gate": gate_kind,
        "beta": beta,
        "epsilon": epsilon,
        "p": p,
        "sigma": net.sigma,
        "train_epochs": train_epochs,
        "seed": seed,
    }
    start = time.perf_counter()
    if kind == "npk":
        npk = neural_path_kernel(net, x)
        matrix = npk.kernel  # the true kernel is matrix * exp(log_scale)
        info["log_scale"] = npk.log_scale
    elif kind == "ntk":
        split = neural_tangent_kernel(net, x, chunk_size=chunk_size)
        matrix = split.total
        info["split_frobenius"] = {
            part: float(np.linalg.norm(getattr(split, part)))
            for part in ("value", "feature", "cross", "total")
        }
    else:
        if mode not in ("relu",) or gate_kind != "relu":
            raise DGNSpecError(
                f"--kind h: got --mode {mode} --gate {gate_kind}, expected --mode relu "
                "--gate relu (the path formula needs per-node activations of one network)"
            )
        n_s, n_w = mlp_term_counts(net.widths)
        if n_s + n_w > MAX_H_TERMS:
            raise DGNSpecError(
                f"--kind h: the path formula has {n_s + n_w} summands per entry, more than "
                f"{MAX_H_TERMS}; use smaller --width/--depth or --kind ntk"
            )
        graph = mlp_graph(net.widths, weights=[w.numpy() for w in net.value])
        pg = path_gram(graph, x.numpy())
        matrix = pg.H
        info["terms"] = {"strong": pg.n_strong, "weak": pg.n_weak}
        info["split_frobenius"] = {
            "strong": float(np.linalg.norm(pg.strong)),
            "weak": float(np.linalg.norm(pg.weak)),
        }
    info["seconds"] = time.perf_counter() - start
    eig = np.linalg.eigvalsh(matrix)
    info["spectrum"] = _spectrum_summary(eig)
    try:
        info["nu"] = normalised_nu(matrix, targets.numpy())
    except DGNSpecError:
        info["nu"] = None
    info["eigenvalues"] = [float(e) for e in eig]
    s = info["spectrum"]
    click.echo(
        f"{kind} on {dataset} (n={n}, d={depth}, w={width}, mode={mode}, gate={gate_kind}): "
        f"rho_min={s['rho_min']:.4g} rho_max={s['rho_max']:.4g} trace={s['trace']:.4g} "
        f"nu={info['nu'] if info['nu'] is None else format(info['nu'], '.4g')} "
        + (f"(kernel / exp({info['log_scale']:.6g})) " if info.get("log_scale") else "")
        + f"[{info['seconds']:.2f}s]"
    )
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "kernel.json").write_text(json.dumps(info, indent=1))
        np.save(out / "kernel.npy", matrix)
        if plot:
            _ecdf_plot(eig, out / "ecdf.png", f"{kind}, {mode}, d={depth}, w={width}")
        click.echo(f"wrote {out}/kernel.json, kernel.npy" + (", ecdf.png" if plot else ""))
