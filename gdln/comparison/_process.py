"""The process :func:`gdln.compare` simulates in, and starting it ahead of the call.

Only the standard library is imported here: :func:`start_simulations` is called before
anything else is loaded (``gdln compare`` calls it before reading the graph file).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..solution._trajectory import Trajectory

__all__ = ["Simulations", "start_simulations"]


class Simulations:
    """The runs of :func:`gdln.compare`, in a second process when that can overlap the theory.

    The worker (:class:`gdln.simulation._worker.SimulationWorker`) imports torch and
    simulates while this process reduces, solves and loads matplotlib: only where
    :func:`gdln.simulation._worker.worthwhile` (torch not imported here yet, POSIX, two
    cores); the one :func:`start_simulations` started, if any. Otherwise the runs are
    made here, when their results are asked for.
    """

    def __init__(self) -> None:
        self.jobs: list[dict[str, Any]] = []
        self.numbers: list[int] = []
        self.worker: Any = None
        if _use_worker():
            from ..simulation._worker import SimulationWorker, take_standby

            self.worker = take_standby()
            if self.worker is None:
                try:
                    self.worker = SimulationWorker()
                except OSError:  # no process to be had: simulate here
                    self.worker = None

    def __enter__(self) -> Simulations:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.worker is not None:
            self.worker.close()

    def submit(self, job: dict[str, Any], *, priority: int = 0) -> None:
        """Start (or queue) one run of :func:`gdln.simulate`; of the runs waiting when
        the worker is free, a lower ``priority`` number runs first (here, where all are
        run when their results are asked for, it changes nothing)."""
        if self.worker is not None:
            self.numbers.append(self.worker.submit(priority=priority, **job))
        else:
            self.jobs.append(job)

    def results(self, *, before: Any = None) -> list[Trajectory]:
        """The trajectories in the order submitted; ``before()`` runs first (while the
        worker simulates)."""
        if before is not None:
            before()
        if self.worker is not None:
            return [self.worker.result(n) for n in self.numbers]
        from ..simulation import simulate

        return [simulate(**job) for job in self.jobs]


def _use_worker() -> bool:
    """Whether to simulate in a second process (see :class:`Simulations`)."""
    from ..simulation._worker import worthwhile

    return worthwhile()


@contextlib.contextmanager
def start_simulations() -> Iterator[None]:
    """Start the process that the next :func:`gdln.compare` in this block simulates in, now.

    :func:`gdln.compare` starts that process itself when it is called; started earlier, its
    import of torch (about a second) overlaps what comes before the call, e.g. reading
    the graph file (``gdln compare`` does this). Nothing is started where a second process
    would not overlap anything (torch already imported here, one core, not POSIX); a
    process not used by a :func:`gdln.compare` in the block is ended on the way out.

    Yields
    ------
    None

    Examples
    --------
    >>> import gdln
    >>> with gdln.comparison.start_simulations():  # doctest: +SKIP
    ...     result = gdln.compare(gdln.load("graphs/routing.yaml"), t_max=20)
    """
    from ..simulation._worker import standby

    with standby():
        yield
