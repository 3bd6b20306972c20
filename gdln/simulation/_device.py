"""Where a simulation's tensors live and in which floating-point type.

The device follows gdln's one rule (:mod:`gdln._device`): ``None``/``"auto"`` is CUDA when
present, else the CPU.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from .._device import resolve_device
from ._settings import device_error

__all__ = ["TORCH_DTYPES", "torch_device"]

TORCH_DTYPES: Mapping[str, torch.dtype] = {"float64": torch.float64, "float32": torch.float32}
"""The torch dtypes of :data:`~gdln.simulation.DTYPES`, by the same names."""


def torch_device(device: Any) -> torch.device:
    """``settings.device`` as a torch device (:func:`gdln._device.resolve_device`)."""
    return resolve_device(device, device_error)
