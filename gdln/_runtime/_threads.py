"""How many CPU threads a simulation uses when the user does not say.

torch's intra-op threads split each tensor operation between them. That pays only when
an operation is long against the cost of waking and joining the threads, and on a
machine whose cores other processes hold, a thread that is not scheduled holds up every
operation until it is: on a busy 2-core machine two threads made the small products of
the routing network of Fig. 4 up to 9 times slower than one, and never faster on an
idle one (issue 25). So a run takes one thread unless the mean operation of its step
is large (:data:`FLOPS_PER_THREAD` floating-point operations for each thread), and never
more threads than the cores free when it starts.

The singular values a run records are another matter: each is one LAPACK call that
needs no other thread to finish, so with ``threads`` left ``auto`` they are computed on
a second thread beside the training (:func:`record_thread`) wherever this process may
use two cores; under load that thread simply shares the cores, with no wait on every
operation.

Only the standard library is imported here.
"""

from __future__ import annotations

import os

__all__ = ["FLOPS_PER_THREAD", "auto_threads", "free_cores", "record_thread", "usable_cores"]

FLOPS_PER_THREAD = 2e7
"""Floating-point operations of the mean operation of a step per thread it gets: about
one millisecond of one core, against the tens of microseconds that waking a thread and
waiting for it cost on an idle machine."""


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the system has one)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return cores or 1


def free_cores() -> int:
    """The cores this process may use that no other runnable task holds now (at least 1).

    Other runnable tasks are counted from ``/proc/loadavg`` (those running or waiting
    for a core right now, this one excepted), else from the 1-minute load average.
    """
    cores = usable_cores()
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            runnable = int(f.read().split()[3].split("/")[0])
        others = max(0, runnable - 1)
    except (OSError, ValueError, IndexError):
        try:
            others = round(os.getloadavg()[0])
        except OSError:
            others = 0
    return max(1, cores - others)


def auto_threads(flops: float, operations: int, *, free: int | None = None) -> int:
    """The threads for a step of ``flops`` floating-point operations in ``operations`` ops.

    One thread per :data:`FLOPS_PER_THREAD` of the mean operation, at most ``free``
    (default: :func:`free_cores`), at least one.

    >>> auto_threads(3e6, 16, free=2)  # the routing network of Fig. 4e: one thread
    1
    >>> auto_threads(4e9, 16, free=2)
    2
    >>> auto_threads(4e9, 16, free=1)  # the other core is busy
    1
    """
    wanted = int(flops / max(operations, 1) // FLOPS_PER_THREAD)
    if wanted <= 1:
        return 1
    return max(1, min(wanted, free_cores() if free is None else free))


def record_thread(device: object, threads: int | str) -> bool:
    """Whether a run's singular values are computed on a second thread: on the CPU, with
    ``threads`` left ``"auto"`` (a count the user gives is all the run takes) and at least
    two cores this process may use.

    >>> record_thread("cuda", "auto"), record_thread("cpu", 1)
    (False, False)
    """
    if threads != "auto" or getattr(device, "type", device) != "cpu":
        return False
    return usable_cores() >= 2
