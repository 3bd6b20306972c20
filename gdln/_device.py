"""Where torch tensors live: the one device rule of simulation, kernels and stochastic depth.

Every ``device`` argument of gdln (:func:`gdln.simulate`, :func:`gdln.compare`,
:class:`gdln.sd.SDResNet`, :func:`gdln.kernels.draw_value_weights`) means the same:

* ``None`` or ``"auto"``: CUDA when present, else the CPU;
* ``"cpu"``; ``"cuda"`` or ``"cuda:k"`` (the ``k``-th CUDA device); or a ``torch.device``
  of those types.

:func:`check_device` checks the spelling without importing torch (settings are checked
before torch loads); :func:`resolve_device` checks it again against the machine and returns
the ``torch.device``. Both raise through the caller's ``error``, which turns the message body
into the caller's :class:`~gdln.GdlnError`; the message reads ``device: <body>`` everywhere.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._errors import GdlnError, shorten

if TYPE_CHECKING:
    import torch

__all__ = ["AUTO", "check_device", "resolve_device"]

AUTO = "auto"
"""The device that ``None`` also means: CUDA when present, else the CPU."""

_SPELLING = re.compile(r"auto|cpu(:\d+)?|cuda(:\d+)?")
_EXPECTED = "expected 'auto', 'cpu' or 'cuda[:k]'"

ErrorFactory = Callable[[str], GdlnError]
"""Builds the caller's exception from a message body (``lambda m: MyError(f"device: {m}")``)."""


def check_device(device: Any, error: ErrorFactory) -> str | None:
    """``device`` as ``None`` or its spelling (``"auto"``, ``"cpu"``, ``"cuda:1"``), checked.

    Only the spelling is checked, and torch is not imported; whether a CUDA device is
    there is for :func:`resolve_device`. A ``torch.device`` is given by its string.

    Parameters
    ----------
    device
        ``None``, ``"auto"``, ``"cpu"``, ``"cuda[:k]"`` or a ``torch.device``.
    error
        Turns a message body into the exception to raise.

    Returns
    -------
    str or None
        ``None`` for ``None``, else the device's spelling.

    Raises
    ------
    GdlnError
        Built by ``error``: ``device`` is not one of those spellings.

    Examples
    --------
    >>> check_device("cuda:1", GdlnError)
    'cuda:1'
    >>> check_device("tpu", lambda m: GdlnError(f"device: {m}"))
    Traceback (most recent call last):
    ...
    gdln._errors.GdlnError: device: expected 'auto', 'cpu' or 'cuda[:k]', got 'tpu'
    """
    if device is None:
        return None
    torch_module = sys.modules.get("torch")  # a torch.device exists only once torch is loaded
    if torch_module is not None and isinstance(device, torch_module.device):
        device = str(device)
    if not (isinstance(device, str) and _SPELLING.fullmatch(device)):
        raise error(f"{_EXPECTED}, got {shorten(device)}")
    return device


def resolve_device(device: Any, error: ErrorFactory) -> torch.device:
    """The ``torch.device`` that ``device`` names on this machine (see the module's rule).

    Parameters
    ----------
    device
        ``None``/``"auto"`` (CUDA when present, else the CPU), ``"cpu"``, ``"cuda[:k]"``
        or a ``torch.device``.
    error
        Turns a message body into the exception to raise.

    Returns
    -------
    torch.device
        The device, with CUDA's index as given (``cuda`` is the current CUDA device).

    Raises
    ------
    GdlnError
        Built by ``error``: the spelling is wrong, CUDA is asked for but not available,
        or its index is beyond the devices present.
    """
    import torch

    name = check_device(device, error)
    if name is None or name == AUTO:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(name)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise error(f"{name!r} requested but CUDA is not available; use 'cpu' or 'auto'")
        count = torch.cuda.device_count()
        if dev.index is not None and dev.index >= count:
            raise error(
                f"{name!r} requested but only {count} CUDA device(s) are present "
                f"(cuda:0 to cuda:{count - 1})"
            )
    return dev
