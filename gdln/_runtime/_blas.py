"""One BLAS thread for small dense linear algebra: the rule for every numpy/scipy call.

numpy and scipy each load an OpenBLAS (or MKL) that splits every call between as many
threads as the machine has cores. A small call (a QR, SVD or eigendecomposition of a
matrix of a few hundred rows, a product of such matrices) is over in microseconds on one
thread, but a threaded one waits for every thread it wakes: on a machine whose cores
other processes hold, a 128 x 128 QR took 1.16 s on two threads against 0.56 ms on one,
and a 64 x 64 SVD 184 ms against 0.47 ms (issue 38, on the project's shared 2-core
machine under load). The same reasoning gives torch runs one thread unless their
operations are large (:mod:`gdln._runtime._threads`).

So gdln's dense numerics run inside :func:`one_blas_thread` (a context manager and a
decorator) unless their matrices are large (:func:`blas_threads`: more than
:data:`SMALL_SIDE` rows or columns), as a user's ``threadpoolctl.threadpool_limits``
would. The libraries are found once (threadpoolctl's controller inspects every loaded
shared library, about 1.5 ms) and again only when numpy, scipy's linear algebra or
torch has been imported since (each brings its own BLAS); entering the rule then costs a
few microseconds: one ``get``/``set`` of each library's thread count, and nothing when
already inside it. Threads are restored on leaving, to what they were on entering.

Only the standard library is imported here; threadpoolctl (a dependency) on first use.
"""

from __future__ import annotations

import sys
import threading
from contextlib import ContextDecorator, nullcontext
from typing import Any

__all__ = ["SMALL_SIDE", "blas_threads", "one_blas_thread"]

SMALL_SIDE = 1024
"""Largest matrix side for which a dense call runs BLAS on one thread: below it one
thread is faster on an idle machine and unharmed by a loaded one."""

_BRINGS_BLAS = ("numpy", "scipy.linalg", "torch")
"""Modules whose import loads a BLAS library of its own."""

_lock = threading.RLock()
_state: dict[str, Any] = {"key": None, "libraries": (), "depth": 0, "saved": ()}


def _libraries() -> tuple[Any, ...]:
    """The loaded BLAS libraries' controllers, found again only when one may have come."""
    key = tuple(name in sys.modules for name in _BRINGS_BLAS)
    if key != _state["key"]:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:  # pragma: no cover - a dependency
            libraries: tuple[Any, ...] = ()
        else:
            libraries = tuple(ThreadpoolController().select(user_api="blas").lib_controllers)
        _state["key"], _state["libraries"] = key, libraries
    return tuple(_state["libraries"])


class _OneBlasThread(ContextDecorator):
    """Every loaded BLAS on one thread while inside (see the module docstring)."""

    def __enter__(self) -> _OneBlasThread:
        with _lock:
            if _state["depth"] == 0:
                saved = []
                for library in _libraries():
                    threads = library.num_threads
                    if threads != 1:
                        library.set_num_threads(1)
                        saved.append((library, threads))
                _state["saved"] = tuple(saved)
            _state["depth"] += 1
        return self

    def __exit__(self, *exc: object) -> None:
        with _lock:
            _state["depth"] -= 1
            if _state["depth"] == 0:
                for library, threads in _state["saved"]:
                    library.set_num_threads(threads)
                _state["saved"] = ()


_ONE = _OneBlasThread()


def one_blas_thread() -> _OneBlasThread:
    """Every loaded BLAS library on one thread inside a ``with`` block or a decorated call.

    Nested uses cost nothing; the outermost restores each library's threads on leaving.

    >>> import numpy as np
    >>> with one_blas_thread():
    ...     q, r = np.linalg.qr(np.eye(3))
    """
    return _ONE


def blas_threads(side: int) -> Any:
    """:func:`one_blas_thread` when the largest matrix side ``side`` is at most
    :data:`SMALL_SIDE`, else the libraries' own threads (a null context)."""
    return _ONE if side <= SMALL_SIDE else nullcontext()
