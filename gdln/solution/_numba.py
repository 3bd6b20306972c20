r"""numba (the optional ``fast`` extra) compiles a right-hand side, where a batch repays it.

The DOP853 stepper (:mod:`gdln.solution._dop853`) is the same with or without numba;
only the right-hand side changes. numba compiles the flow's scalar form (the function
that CPython runs for LSODA and the gradient-descent map, see
:mod:`gdln.reduction._numeric`) into one loop over the batch, which evaluates a stage of
every member without numpy's temporaries. Importing numba and compiling a system's
right-hand side cost seconds in a process, which a compiled batch repays only when it is
large: ``benchmarks/bench_solve.py`` measures the first call of ``solve_batch`` (compile
included) with and without numba (``benchmarks/README.md`` has the figures), so numba is used from :data:`MIN_BATCH` members on, never for a single
solve, and not at all without numba or with the environment variable ``GDLN_NO_NUMBA``
set. Nothing is compiled ahead of time or cached on disk (the data of each system are
constants of its source).
"""

from __future__ import annotations

import importlib.util
import os
import weakref
from collections.abc import Callable
from typing import Any

from ..reduction._numeric import ScalarRhs

__all__ = ["MIN_BATCH", "available", "batch_kernel"]

MIN_BATCH = 10_000
"""Fewest members of a batch for which numba compiles the right-hand side."""

Kernel = Callable[..., None]
"""``kernel(y, c, out)``: the right-hand side of every member of ``y`` ``(n, batch)``
with constants ``c`` ``(k, batch)``, into ``out`` ``(n, batch)``."""

_KERNELS: weakref.WeakKeyDictionary[Any, Kernel] = weakref.WeakKeyDictionary()


def available() -> bool:
    """Whether numba is installed and not switched off by ``GDLN_NO_NUMBA``."""
    return not os.environ.get("GDLN_NO_NUMBA") and importlib.util.find_spec("numba") is not None


def batch_kernel(scalar: ScalarRhs) -> Kernel:
    """``scalar`` compiled by numba and looped over the batch (compiled on first call,
    once per right-hand side)."""
    if scalar not in _KERNELS:
        import numba

        one = numba.njit(error_model="numpy")(scalar)

        def over_batch(y, c, out):  # type: ignore[no-untyped-def]
            for k in range(y.shape[1]):
                one(y[:, k], c[:, k], out[:, k])

        _KERNELS[scalar] = numba.njit(error_model="numpy")(over_batch)
    return _KERNELS[scalar]
