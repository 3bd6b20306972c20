"""A batch of jobs of one target, in a second process where that overlaps the caller's work.

:func:`gdln.compare` submits its simulations here, with their priorities, and solves the
theory meanwhile; the results come back in the order submitted. Only the standard library
is imported here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import _worker
from ._worker import Worker, take_standby, target_function

__all__ = ["Jobs"]


class Jobs:
    """Runs of ``target`` (``"gdln.package.module:function"``), in a second process when
    that can overlap the caller's own work, else here.

    The worker (:class:`~gdln._runtime._worker.Worker`) imports the target (and the
    library ``heavy`` it loads) and runs the jobs while this process does other work: only
    where :func:`~gdln._runtime._worker.worthwhile` (``heavy`` not imported here yet,
    POSIX, two cores); the one :func:`~gdln._runtime._worker.standby` started for the
    target, if any. Otherwise the jobs are run here, when their results are asked for.
    ``what`` names the jobs in messages. Use it as a context manager: the worker ends on
    the way out.
    """

    def __init__(self, target: str, *, what: str = "job", heavy: str = "torch") -> None:
        self.target, self.what = target, what
        self.jobs: list[dict[str, Any]] = []
        self.numbers: list[int] = []
        self.worker: Worker | None = None
        if use_worker(heavy):
            self.worker = take_standby(target)
            if self.worker is None:
                try:
                    self.worker = Worker(target, what=what)
                except OSError:  # no process to be had: run here
                    self.worker = None

    def __enter__(self) -> Jobs:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.worker is not None:
            self.worker.close()

    def submit(self, job: dict[str, Any], *, priority: int = 0) -> None:
        """Start (or queue) one run of the target with the keyword arguments ``job``; of
        the runs waiting when the worker is free, a lower ``priority`` number runs first
        (here, where all are run when their results are asked for, it changes nothing)."""
        if self.worker is not None:
            self.numbers.append(self.worker.submit(priority=priority, **job))
        else:
            self.jobs.append(job)

    def results(self, *, before: Callable[[], Any] | None = None) -> list[Any]:
        """The results in the order submitted; ``before()`` runs first (while the worker
        runs the jobs)."""
        if before is not None:
            before()
        if self.worker is not None:
            return [self.worker.result(n) for n in self.numbers]
        function = target_function(self.target)
        return [function(**job) for job in self.jobs]


def use_worker(heavy: str) -> bool:
    """Whether to run the jobs in a second process (see :class:`Jobs`): the worker
    module's rule, looked up when asked."""
    return _worker.worthwhile(heavy)
