"""Local worker processes for a sweep, each running one point at a time.

Unlike :class:`concurrent.futures.ProcessPoolExecutor`, whose pool breaks as a whole when
one process dies and then fails every pending point, the coordinator here knows which
point each process is running. A process that dies (killed by the out-of-memory killer,
a crash in native code, ``os._exit``) costs only its own point: the point is run again
in a new process, and after :data:`MAX_DEATHS` deaths it is reported as unfinished with
the exit code or signal. Points that finished are never run again.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import pickle
import signal
import traceback
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any

from ._errors import Point, SweepSpecError

__all__ = ["MAX_DEATHS", "run_in_processes"]

MAX_DEATHS = 3  # a point whose process dies this often is reported, not retried

Report = Callable[[int, Mapping[str, Any]], None]
Fail = Callable[[int, str, str], None]


def _serve(conn: Connection, function_bytes: bytes) -> None:
    """The loop of one worker process: receive (index, point), send back the outcome."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the coordinator's to handle
    try:
        function = pickle.loads(function_bytes)
    except BaseException as error:  # reported to the coordinator
        conn.send(("unusable", f"{type(error).__name__}: {error}"))
        return
    while True:
        try:
            task = conn.recv()
        except EOFError:  # the coordinator is gone
            return
        if task is None:
            return
        index, point = task
        try:
            reply: tuple[Any, ...] = ("ok", index, function(**point))
        except BaseException as error:  # SystemExit too is the point's failure
            reply = ("failed", index, f"{type(error).__name__}: {error}", traceback.format_exc())
        try:
            conn.send(reply)
        except Exception as error:  # a result that cannot be pickled
            reason = f"its result cannot be sent back: {type(error).__name__}: {error}"
            conn.send(("failed", index, reason, ""))


class _Worker:
    def __init__(self, context: Any, function_bytes: bytes):
        self.conn, child = context.Pipe()
        self.process: BaseProcess = context.Process(
            target=_serve, args=(child, function_bytes), name="gdln-sweep-worker"
        )
        self.process.start()
        child.close()
        self.task: tuple[int, Point] | None = None

    def stop(self, *, now: bool) -> None:
        if not now:
            with contextlib.suppress(OSError):
                self.conn.send(None)
            self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(timeout=5)
        if self.process.is_alive():  # pragma: no cover - a function that ignores SIGTERM
            self.process.kill()
            self.process.join()
        self.conn.close()


def _death(process: BaseProcess) -> str:
    process.join(timeout=5)
    code = process.exitcode
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def run_in_processes(
    function_bytes: bytes,
    todo: Sequence[tuple[int, Point]],
    workers: int,
    report: Report,
    fail: Fail,
) -> None:
    """Run ``todo`` in up to ``workers`` processes, calling back as points finish.

    Parameters
    ----------
    function_bytes
        The pickled function.
    todo
        (index, point) pairs.
    workers
        The most processes at once.
    report
        Called in this process with (index, the function's return value).
    fail
        Called with (index, one-line reason, traceback text) for a point that raised or
        whose process died :data:`MAX_DEATHS` times.

    Raises
    ------
    SweepSpecError
        The function cannot be unpickled in a worker process.
    """
    context = multiprocessing.get_context()
    queue = deque(todo)
    deaths: dict[int, int] = {}
    idle: list[_Worker] = []
    busy: list[_Worker] = []
    try:
        while queue or busy:
            while queue and len(busy) < workers:
                worker = idle.pop() if idle else _Worker(context, function_bytes)
                worker.task = queue.popleft()
                with contextlib.suppress(OSError):  # a dead process is found by wait()
                    worker.conn.send(worker.task)
                busy.append(worker)
            ready = wait([w.conn for w in busy] + [w.process.sentinel for w in busy])
            for worker in list(busy):
                if worker.conn not in ready and worker.process.sentinel not in ready:
                    continue
                assert worker.task is not None
                index, point = worker.task
                try:
                    message = worker.conn.recv() if worker.conn.poll() else None
                except (EOFError, OSError):
                    message = None
                busy.remove(worker)
                if message is None:  # the process died while running the point
                    how = _death(worker.process)
                    worker.stop(now=True)
                    deaths[index] = deaths.get(index, 0) + 1
                    if deaths[index] >= MAX_DEATHS:
                        fail(index, f"the worker process died {deaths[index]} times ({how})", "")
                    else:
                        queue.appendleft((index, point))
                    continue
                worker.task = None
                idle.append(worker)
                if message[0] == "unusable":
                    raise SweepSpecError(
                        f"the function cannot be loaded in a worker process ({message[1]}); "
                        "define it at the top level of an importable module"
                    )
                if message[0] == "ok":
                    report(index, message[2])
                else:
                    fail(index, message[2], message[3])
    finally:
        for worker in busy:
            worker.stop(now=True)
        for worker in idle:
            worker.stop(now=False)
