"""Checking a torch device named by the user (shared by the torch-using subpackages)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ._errors import GdlnError

__all__ = ["resolve_device"]


def resolve_device(
    device: str | torch.device | None, error: Callable[[str], GdlnError]
) -> torch.device | None:
    """``torch.device(device)``, or ``None`` for ``None``; a clear error when it does not exist.

    Accepts ``"cpu"`` and ``"cuda[:k]"``; ``error`` builds the caller's exception from a
    one-line message (e.g. ``lambda m: DGNSpecError(f"device: {m}")``).
    """
    if device is None:
        return None
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise error(f"got {device!r}, expected 'cpu' or 'cuda[:k]'") from exc
    if dev.type not in ("cpu", "cuda"):
        raise error(f"got {device!r}, expected 'cpu' or 'cuda[:k]'")
    if dev.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise error(f"got {device!r} but CUDA is not available; use 'cpu'")
        if dev.index is not None and dev.index >= count:
            raise error(f"got {device!r} but only {count} CUDA device(s) exist (cuda:0..)")
    return dev
