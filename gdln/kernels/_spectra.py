r"""Kernels of a deep gated network on a dataset, and their spectra.

The Gram matrices whose eigenvalues govern training: the neural path kernel
$H=\Sigma\odot\Lambda$ (Lemma 2.1 of NPF/NPK), the neural tangent kernel with its
value/gate split, and the path formula for $H$ (Thm. 5.1 of the path-formula paper). The
spectrum is summarised as Lakshminarayanan & Singh do (Sec. 4, Figs. 1, 3, 4 of the DGN
paper): $\rho_{\min}$, $\rho_{\max}$, the cumulative eigenvalues (e.c.d.f.) and
$\nu = y^\top\hat H^{-1}y$. ``gdln kernel`` is one call of :func:`kernel_spectrum`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from .._bounded._limits import beyond, current_limits
from . import (
    DGN,
    DGNSpecError,
    Gate,
    make_dataset,
    make_dgn,
    mlp_graph,
    mlp_term_counts,
    neural_path_kernel,
    neural_tangent_kernel,
    normalised_nu,
    path_gram,
    train_dgn,
)
from ._bounds import check_count, check_gates, check_held, check_kernel, check_seed
from ._kinds import KERNEL_KINDS

__all__ = ["MAX_H_TERMS", "KernelSpectrum", "kernel_spectrum", "spectrum_ecdf"]

#: Largest number of summands per entry that ``kind="h"`` will enumerate.
MAX_H_TERMS = 2_000_000

#: Input size of each dataset of :func:`make_dataset`, for estimates made before it is built.
_INPUTS = {"digits": 64, "digits47": 64, "identical": 1, "uniform2d": 2}


@dataclass(frozen=True)
class KernelSpectrum:
    r"""A kernel matrix of a network on a dataset, with its eigenvalues.

    Parameters
    ----------
    kind
        One of :data:`KERNEL_KINDS`.
    matrix
        ``(n, n)`` the kernel.
    eigenvalues
        ``(n,)`` its eigenvalues $\rho_1\le\dots\le\rho_n$ (``numpy.linalg.eigvalsh``).
    nu
        $\nu=y^\top\hat H^{-1}y$ with $\hat H=H/\mathrm{tr}\,H$ for the $\pm1$ targets
        (:func:`normalised_nu`); ``None`` if the kernel is singular.
    settings
        How the network and data were made (``dataset``, ``n``, ``width``, ``depth``,
        ``mode``, ``gate``, ``beta``, ``epsilon``, ``p``, ``sigma``, ``train_epochs``,
        ``seed``).
    split_frobenius
        Frobenius norms of the parts: ``value``, ``feature``, ``cross``, ``total`` (NTK) or
        ``strong``, ``weak`` (path formula); empty for the NPK.
    terms
        ``strong`` and ``weak``: summands per entry of the path formula; empty otherwise.
    seconds
        Time spent computing the kernel.
    log_scale
        The NPK of a deep network is stored divided by $e^{\text{log\_scale}}$ so that it
        stays finite (:class:`NPK`); the true kernel and eigenvalues are ``matrix`` and
        ``eigenvalues`` times ``exp(log_scale)``. 0 for the other kinds and shallow NPKs.

    Raises
    ------
    DGNSpecError
        ``matrix`` and ``eigenvalues`` do not fit together.

    References
    ----------
    Lakshminarayanan & Singh, *Neural Path Features and Neural Path Kernel*, Lemma 2.1 and
    Prop. 4.1; *Model architecture controls gradient descent dynamics: a combinatorial
    path-based formula*, Thm. 5.1.
    """

    kind: str
    matrix: np.ndarray
    eigenvalues: np.ndarray
    nu: float | None
    settings: Mapping[str, Any] = field(default_factory=dict)
    split_frobenius: Mapping[str, float] = field(default_factory=dict)
    terms: Mapping[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    log_scale: float = 0.0

    def __post_init__(self) -> None:
        n = self.matrix.shape[0]
        if self.matrix.shape != (n, n) or self.eigenvalues.shape != (n,):
            raise DGNSpecError(
                f"KernelSpectrum: got matrix {self.matrix.shape} and eigenvalues "
                f"{self.eigenvalues.shape}, expected (n, n) and (n,)"
            )

    @property
    def summary(self) -> dict[str, float]:
        r"""$\rho_{\min}$, $\rho_{\max}$, the trace and the condition number."""
        eig = self.eigenvalues
        return {
            "rho_min": float(eig[0]),
            "rho_max": float(eig[-1]),
            "trace": float(eig.sum()),
            "condition": float(eig[-1] / eig[0]) if eig[0] > 0 else float("inf"),
        }

    def to_json(self) -> dict[str, Any]:
        """The record as JSON values.

        Returns
        -------
        dict
            The settings, the spectrum summary, every eigenvalue and ``nu`` (and the
            value/gate split and path terms where computed).
        """
        record: dict[str, Any] = {"kind": self.kind, **self.settings}
        record["seconds"] = self.seconds
        record["log_scale"] = self.log_scale
        record["spectrum"] = self.summary
        record["nu"] = self.nu
        record["eigenvalues"] = [float(e) for e in self.eigenvalues]
        if self.split_frobenius:
            record["split_frobenius"] = dict(self.split_frobenius)
        if self.terms:
            record["terms"] = dict(self.terms)
        return record


def spectrum_ecdf(eigenvalues: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""The cumulative eigenvalues of a kernel: $k$ and $\sum_{i\le k}\rho_i/\rho_{\max}$.

    Eigenvalues sorted ascending, normalised by the largest (Sec. 4 and Figs. 1, 3 of
    Lakshminarayanan & Singh, "e.c.d.f."). A well-conditioned kernel rises linearly.

    Parameters
    ----------
    eigenvalues
        The kernel's eigenvalues, in any order; the largest must be positive.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        $k = 1, \dots, n$ and the cumulative normalised sums.

    Raises
    ------
    DGNSpecError
        ``eigenvalues`` is not a non-empty vector with a positive largest value.

    References
    ----------
    Lakshminarayanan & Singh, *Deep Gated Networks*, Sec. 4 and Figs. 1, 3.

    Examples
    --------
    >>> k, c = spectrum_ecdf(np.array([2.0, 1.0, 4.0]))
    >>> k.tolist(), c.tolist()
    ([1, 2, 3], [0.25, 0.75, 1.75])
    """
    eig = np.sort(np.asarray(eigenvalues, dtype=float))
    if eig.ndim != 1 or eig.size == 0 or not eig[-1] > 0 or not np.all(np.isfinite(eig)):
        raise DGNSpecError(
            f"eigenvalues: got shape {eig.shape} with largest {eig[-1] if eig.size else None}; "
            "expected a non-empty vector of finite numbers with a positive largest eigenvalue"
        )
    return np.arange(1, eig.size + 1), np.cumsum(eig / eig[-1])


def kernel_spectrum(
    kind: str = "npk",
    *,
    dataset: str = "digits47",
    n: int = 200,
    width: int = 64,
    depth: int = 4,
    mode: str = "relu",
    gate: Gate | None = None,
    sigma: float | None = None,
    train_epochs: int = 0,
    seed: int = 0,
    chunk_size: int | None = None,
) -> KernelSpectrum:
    r"""Build a deep gated network and a dataset, compute a kernel and its spectrum.

    Parameters
    ----------
    kind
        ``"npk"``: $H=\Sigma\odot\Lambda$ (Lemma 2.1 of NPF/NPK); ``"ntk"``: the NTK by
        ``torch.func`` with its value/gate split; ``"h"``: the path formula of the GD Gram
        matrix (Thm. 5.1 of the path-formula paper) on the value weights (needs
        ``mode="relu"`` with ReLU gates).
    dataset, n, seed
        :func:`make_dataset` arguments; ``seed`` also draws the network.
    width, depth, mode, sigma
        :func:`make_dgn` arguments.
    gate
        The gate; default ReLU gates, Bernoulli(1/2) for ``mode="frg"``.
    train_epochs
        Train (Adam, squared loss) for this many epochs first; for ``"flnpf"`` the ReLU
        network the gates are copied from is trained.
    chunk_size
        NTK: examples per vectorised Jacobian chunk.

    Returns
    -------
    KernelSpectrum
        The kernel, its eigenvalues, $\nu$, the settings, the parts' norms and the time
        taken.

    Raises
    ------
    DGNSpecError
        Unknown ``kind``, a negative ``train_epochs``, ``kind="h"`` without ReLU mode
        and gates, or a path formula with too many summands; sizes whose numbers (weights,
        activations, Jacobians, $n\times n$ matrices, estimated before anything is built)
        exceed :class:`gdln.graphfile.Limits` ``batch_elements``, or more epochs than
        ``steps``; a kernel that left float64 (inf or nan; 0, as when every gate of a
        layer is off for every input; or underflowed), which is refused, not returned.

    References
    ----------
    Lakshminarayanan & Singh, *Neural Path Features and Neural Path Kernel*, Lemma 2.1 and
    Prop. 4.1; *Model architecture controls gradient descent dynamics: a combinatorial
    path-based formula*, Thm. 5.1.
    """
    if kind not in KERNEL_KINDS:
        raise DGNSpecError(f"kind: got {kind!r}, expected one of {', '.join(KERNEL_KINDS)}")
    _check_cost(kind, dataset, n, width, depth, mode, gate, train_epochs, seed, chunk_size)
    gate = gate if gate is not None else Gate("bernoulli" if mode == "frg" else "relu")
    if kind == "h" and (mode != "relu" or gate.kind != "relu"):
        raise DGNSpecError(
            f"kind h: got mode {mode} with {gate.kind} gates, expected mode relu with relu "
            "gates (the path formula needs per-node activations of one network)"
        )
    x, y = make_dataset(dataset, n=n, seed=seed)
    targets = y.double() if y.dtype != torch.int64 else (y % 2).double() * 2 - 1
    net = _network(x, targets, width, depth, mode, gate, sigma, train_epochs, seed)
    check_gates(net.gates(x))
    start = time.perf_counter()
    matrix, split, terms, log_scale = _kernel(kind, net, x, chunk_size)
    seconds = time.perf_counter() - start
    check_kernel(
        matrix,
        f"kind {kind} of a {mode} network of depth {depth}, width {width}, sigma {net.sigma:.3g}",
        "lower the depth or raise the width" + (", or change sigma" if kind != "npk" else ""),
    )
    settings = {
        "dataset": dataset,
        "n": n,
        "width": width,
        "depth": depth,
        "mode": mode,
        "gate": gate.kind,
        "beta": gate.beta,
        "epsilon": gate.epsilon,
        "p": gate.p,
        "sigma": net.sigma,
        "train_epochs": train_epochs,
        "seed": seed,
    }
    return KernelSpectrum(
        kind,
        matrix,
        np.linalg.eigvalsh(matrix),
        _nu(matrix, targets.numpy()),
        settings,
        split,
        terms,
        seconds,
        log_scale,
    )


def _check_cost(
    kind: str,
    dataset: str,
    n: Any,
    width: Any,
    depth: Any,
    mode: str,
    gate: Gate | None,
    train_epochs: Any,
    seed: Any,
    chunk_size: Any,
) -> None:
    """Check the counts, then refuse sizes whose numbers exceed ``batch_elements``.

    The estimate counts the weights (twice where feature and value networks differ, three
    times with the ReLU source of ``flnpf``), each layer's gates and values for every
    example (four times when training: the backward pass and Adam's moments), a handful of
    $n\times n$ matrices and, for the NTK, the Jacobian of every example (twice with soft
    gates, whose feature part counts).
    """
    n, width, depth = (check_count(k, v) for k, v in (("n", n), ("width", width), ("depth", depth)))
    epochs = check_count("train_epochs", train_epochs, least=0)
    check_seed(seed)
    if chunk_size is not None:
        check_count("chunk_size", chunk_size)
    if epochs > current_limits().steps:
        raise DGNSpecError(beyond("steps", f"train_epochs={epochs}"))
    d_in = _INPUTS.get(dataset, 64)
    weights = d_in * width + max(depth - 2, 0) * width * width + width if depth > 1 else d_in
    copies = {"relu": 1, "frg": 1, "flnpf": 3}.get(mode, 2)
    activations = 2 * n * width * (depth - 1) * (4 if epochs else 1)
    held = weights * copies * (4 if epochs else 1) + activations + 6 * n * n
    if kind == "ntk":
        soft = gate is not None and gate.differentiable and mode != "frg"
        held += 2 * n * weights * (2 if soft else 1)
    check_held(f"kind {kind} on n={n} examples, width {width}, depth {depth}", held)


def _network(
    x: torch.Tensor,
    targets: torch.Tensor,
    width: int,
    depth: int,
    mode: str,
    gate: Gate,
    sigma: float | None,
    train_epochs: int,
    seed: int,
) -> DGN:
    """The network, trained first if asked (for ``flnpf``: its ReLU gate source)."""
    source = None
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
        n_examples=x.shape[0],
    )
    if train_epochs and mode != "flnpf":
        net = train_dgn(net, x, targets, epochs=train_epochs, seed=seed).net
    return net


def _kernel(
    kind: str, net: DGN, x: torch.Tensor, chunk_size: int | None
) -> tuple[np.ndarray, dict[str, float], dict[str, int], float]:
    """The kernel matrix, the norms of its parts, the path formula's terms, the NPK's scale."""
    if kind == "npk":
        npk = neural_path_kernel(net, x)
        return npk.kernel, {}, {}, npk.log_scale
    if kind == "ntk":
        ntk = neural_tangent_kernel(net, x, chunk_size=chunk_size)
        parts = ("value", "feature", "cross", "total")
        return ntk.total, {p: float(np.linalg.norm(getattr(ntk, p))) for p in parts}, {}, 0.0
    n_strong, n_weak = mlp_term_counts(net.widths)
    if n_strong + n_weak > MAX_H_TERMS:
        raise DGNSpecError(
            f"kind h: the path formula has {n_strong + n_weak} summands per entry, more than "
            f"{MAX_H_TERMS}; use a smaller width or depth, or kind ntk"
        )
    gram = path_gram(mlp_graph(net.widths, weights=[w.numpy() for w in net.value]), x.numpy())
    split = {"strong": float(np.linalg.norm(gram.strong)), "weak": float(np.linalg.norm(gram.weak))}
    return gram.H, split, {"strong": gram.n_strong, "weak": gram.n_weak}, 0.0


def _nu(matrix: np.ndarray, targets: np.ndarray) -> float | None:
    """$\\nu$ of :func:`normalised_nu`, or ``None`` where the kernel is singular."""
    try:
        return normalised_nu(matrix, targets)
    except DGNSpecError:
        return None
