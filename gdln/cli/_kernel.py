"""``gdln kernel``: the NPK, NTK or path-formula Gram matrix of a network on a dataset.

One call of :func:`gdln.kernels.kernel_spectrum`; this module parses the options, prints
the spectrum and writes the files. The choices come from the light tables
:data:`gdln.kernels.KERNEL_KINDS`, ``DATASETS`` and ``MODES``.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

import gdln

from ._common import atomic_folder, old_spellings, output_folder

__all__ = ["kernel"]

GATES = ("relu", "soft", "bernoulli")


@click.command("kernel")
@old_spellings("kernel")
@click.option(
    "--kind",
    type=click.Choice(gdln.kernels.KERNEL_KINDS),
    default="npk",
    show_default=True,
    help="npk: H = Sigma . Lambda (NPF/NPK Lemma 2.1); ntk: torch.func NTK with its "
    "value/gate split; h: path formula of the GD Gram matrix (Thm. 5.1 of the "
    "path-formula paper) on the network's value weights.",
)
@click.option(
    "--dataset", type=click.Choice(gdln.kernels.DATASETS), default="digits47", show_default=True
)
@click.option("-n", "--n", "n", type=int, default=200, show_default=True, help="Examples.")
@click.option("--width", type=int, default=64, show_default=True)
@click.option("--depth", type=int, default=4, show_default=True, help="Weight layers d.")
@click.option(
    "--gating",
    type=click.Choice(gdln.kernels.MODES),
    default=None,
    help="How the network's gates are made (the DGN's gating, NPF paper Sec. 4; default relu).",
)
@click.option(
    "--gate",
    "gate_kind",
    type=click.Choice(GATES),
    default=None,
    help="Gate function; default relu (bernoulli for --gating frg).",
)
@click.option("--beta", type=float, default=4.0, show_default=True, help="Soft-gate slope.")
@click.option("--epsilon", type=float, default=0.0, show_default=True, help="Soft-gate overshoot.")
@click.option(
    "--p",
    "p",
    type=float,
    default=0.5,
    show_default=True,
    help="Probability a Bernoulli gate is on.",
)
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
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="What to print: a one-line summary, or the record of kernel.json.",
)
@click.option(
    "-o",
    "--out",
    type=click.Path(),
    default=None,
    help="Folder for kernel.json, kernel.npy and ecdf.png.",
)
@click.option("--force", is_flag=True, help="Replace the files of an existing output folder.")
@click.option("--plot/--no-plot", default=True, show_default=True, help="Write ecdf.png.")
def kernel(
    kind: str,
    dataset: str,
    n: int,
    width: int,
    depth: int,
    gating: str | None,
    gate_kind: str | None,
    beta: float,
    epsilon: float,
    p: float,
    sigma: float | None,
    train_epochs: int,
    seed: int,
    chunk_size: int | None,
    fmt: str,
    out: str | None,
    force: bool,
    plot: bool,
) -> None:
    """Compute a kernel of a deep gated network on a dataset; print its spectrum.

    Writes, under -o, kernel.json (settings, spectrum summary, all eigenvalues, nu =
    y^T (K/tr K)^-1 y for +-1 targets (digit parity for --dataset digits), and for
    --kind ntk the value/gate split norms), kernel.npy and the eigenvalue e.c.d.f. plot
    ecdf.png.

    \b
    Example:
      gdln kernel --kind ntk --dataset digits47 -n 200 --width 100 --depth 5 \\
          --gating dnpfl --gate soft -o out/ntk
    """
    folder = None if out is None else output_folder(out, force)
    mode = gating or "relu"
    gate = gdln.kernels.Gate(
        gate_kind or ("bernoulli" if mode == "frg" else "relu"),  # type: ignore[arg-type]
        beta=beta,
        epsilon=epsilon,
        p=p,
    )
    spectrum = gdln.kernels.kernel_spectrum(
        kind,
        dataset=dataset,
        n=n,
        width=width,
        depth=depth,
        mode=mode,
        gate=gate,
        sigma=sigma,
        train_epochs=train_epochs,
        seed=seed,
        chunk_size=chunk_size,
    )
    click.echo(
        _summary_line(spectrum) if fmt == "text" else json.dumps(spectrum.to_json(), indent=1)
    )
    if folder is not None:
        with atomic_folder(folder, force=force) as temporary:
            written = _write(spectrum, temporary, plot=plot)
        click.echo(f"wrote {folder}: {', '.join(written)}", err=True)


def _summary_line(spectrum: gdln.kernels.KernelSpectrum) -> str:
    s, info = spectrum.summary, spectrum.settings
    nu = "None" if spectrum.nu is None else format(spectrum.nu, ".4g")
    return (
        f"{spectrum.kind} on {info['dataset']} (n={info['n']}, d={info['depth']}, "
        f"w={info['width']}, mode={info['mode']}, gate={info['gate']}): "
        f"rho_min={s['rho_min']:.4g} rho_max={s['rho_max']:.4g} trace={s['trace']:.4g} "
        f"nu={nu} [{spectrum.seconds:.2f}s]"
        + (f" (kernel / exp({spectrum.log_scale:.6g}))" if spectrum.log_scale else "")
    )


def _write(spectrum: gdln.kernels.KernelSpectrum, folder: Path, *, plot: bool) -> list[str]:
    """kernel.json, kernel.npy and (if ``plot``) ecdf.png in ``folder``; their names."""
    import numpy as np

    (folder / "kernel.json").write_text(json.dumps(spectrum.to_json(), indent=1) + "\n")
    np.save(folder / "kernel.npy", spectrum.matrix)
    if not plot:
        return ["kernel.json", "kernel.npy"]
    _plot_ecdf(spectrum, folder)
    return ["kernel.json", "kernel.npy", "ecdf.png"]


def _plot_ecdf(spectrum: gdln.kernels.KernelSpectrum, folder: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    k, cumulative = gdln.kernels.spectrum_ecdf(spectrum.eigenvalues)
    info = spectrum.settings
    fig, ax = plt.subplots(figsize=(4.5, 3.5))
    ax.plot(k, cumulative, lw=1.5)
    ax.set_xlabel("index k (eigenvalues ascending)")
    ax.set_ylabel(r"$\sum_{i\leq k}\rho_i/\rho_{\max}$")
    ax.set_title(
        f"{spectrum.kind}, {info['mode']}, d={info['depth']}, w={info['width']}", fontsize=9
    )
    gdln.save_figure(fig, folder, "ecdf", dpi=120, formats=("png",), tight=True)
