"""Where a simulation's tensors live and in which floating-point type."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from ._errors import SimulationSpecError

__all__ = ["TORCH_DTYPES", "torch_device"]

TORCH_DTYPES: Mapping[str, torch.dtype] = {"float64": torch.float64, "float32": torch.float32}
"""The torch dtypes of :data:`~gdln.simulation.DTYPES`, by the same names."""


def torch_device(device: str | None) -> torch.device:
    """``None``/``"auto"`` (CUDA when present), ``"cpu"`` or ``"cuda[:k]"`` as a torch device."""
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise SimulationSpecError(
            f"device: expected 'auto', 'cpu' or 'cuda[:k]', got {device!r}"
        ) from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise SimulationSpecError(
            f"device: {device!r} requested but CUDA is not available; use 'cpu' or 'auto'"
        )
    if dev.type not in ("cpu", "cuda"):
        raise SimulationSpecError(f"device: expected 'auto', 'cpu' or 'cuda[:k]', got {device!r}")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise SimulationSpecError(
            f"device: {device!r} requested but only {torch.cuda.device_count()} CUDA device(s) "
            f"are present (cuda:0 to cuda:{torch.cuda.device_count() - 1})"
        )
    return dev
