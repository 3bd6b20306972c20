"""Running a sweep's points on a Dask distributed cluster.

The scheduler reruns a task whose worker dies on another worker, and gives up with
``KilledWorker`` after ``distributed.scheduler.allowed-failures`` (3) deaths. Each result is
fetched as soon as its task finishes and its future released at once, so that the loss of
a worker later on does not make Dask compute finished points again. While the cluster has
no worker at all (every worker died, or none has joined), the sweep waits at most
``no_worker_timeout`` seconds and then reports every point it has not finished.

Dask is imported only here, when a scheduler address is given.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ._errors import Point, SweepSpecError
from ._pool import Fail, Report

__all__ = ["run_on_dask"]

_POLL = 0.05  # seconds between looks at finished tasks
_CHECK = 1.0  # seconds between asking the scheduler for its workers


def _call(function: Callable[..., Mapping[str, Any]], point: Point) -> Any:
    return function(**point)


def _reason(error: BaseException) -> str:
    if type(error).__name__ == "KilledWorker":
        return (
            "every Dask worker that ran it died (KilledWorker, after "
            "distributed.scheduler.allowed-failures retries)"
        )
    return f"{type(error).__name__}: {error}"


def run_on_dask(
    function: Callable[..., Mapping[str, Any]],
    todo: Sequence[tuple[int, Point]],
    scheduler: str,
    report: Report,
    fail: Fail,
    *,
    no_worker_timeout: float | None,
) -> None:
    """Run ``todo`` on the Dask cluster at ``scheduler``, calling back as points finish.

    Parameters
    ----------
    function
        The sweep's function.
    todo
        (index, point) pairs.
    scheduler
        The scheduler's address.
    report
        Called in this process with (index, the function's return value).
    fail
        Called with (index, one-line reason, traceback text) for a point that raised,
        whose workers kept dying, or that was not run because no worker was left.
    no_worker_timeout
        Seconds to wait while the cluster has no worker (None: no limit).

    Raises
    ------
    SweepSpecError
        Dask is not installed, or the scheduler cannot be reached.
    """
    try:
        from distributed import Client, as_completed
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise SweepSpecError(
            f"scheduler={scheduler!r} needs Dask: pip install 'dask[distributed]' ({error})"
        ) from error
    try:
        client = Client(scheduler, timeout=30)
    except Exception as error:
        raise SweepSpecError(
            f"cannot connect to the Dask scheduler at {scheduler!r}: {error}"
        ) from error
    pending: dict[Any, tuple[Any, int, Point]] = {}
    try:
        for index, point in todo:
            future = client.submit(_call, function, point, pure=False)
            pending[future.key] = (future, index, point)
        finished = as_completed([entry[0] for entry in pending.values()])
        next_check, alone_since = 0.0, None
        while pending:
            batch = finished.next_batch(block=False) if finished.has_ready() else []
            for future in batch:
                _, index, point = pending.pop(future.key)
                if future.status == "finished":
                    try:
                        outcome: Any = future.result()
                    except Exception as error:  # lost while being fetched
                        fail(index, _reason(error), "")
                    else:
                        report(index, outcome)
                elif future.status == "error":
                    fail(index, _reason(future.exception()), _traceback(future))
                else:
                    fail(index, f"Dask reports the task as {future.status}", "")
                future.release()  # no later worker loss makes Dask compute it again
            if batch:
                continue
            now = time.monotonic()
            if now >= next_check:
                next_check = now + _CHECK
                if _has_workers(client):
                    alone_since = None
                elif alone_since is None:
                    alone_since = now
                elif no_worker_timeout is not None and now - alone_since >= no_worker_timeout:
                    reason = (
                        f"not finished: the cluster at {scheduler} had no Dask worker for "
                        f"{no_worker_timeout:g} s (no_worker_timeout)"
                    )
                    for future, index, _ in sorted(pending.values(), key=lambda e: e[1]):
                        future.cancel()
                        fail(index, reason, "")
                    return
            time.sleep(_POLL)
    finally:
        for future, _, _ in pending.values():
            future.cancel()
        client.close()


def _has_workers(client: Any) -> bool:
    try:
        return bool(client.nthreads())
    except Exception:  # the scheduler itself is unreachable: no worker either
        return False


def _traceback(future: Any) -> str:
    import traceback

    try:
        return "".join(traceback.format_tb(future.traceback()))
    except Exception:  # a traceback Dask could not keep
        return ""
