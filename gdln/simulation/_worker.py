r"""Simulations in a second Python process, started before they are needed.

:func:`gdln.compare` needs sympy, scipy and matplotlib for the theory and the figures,
and torch for the simulations of the full network (Sec. 2 of Saxe et al. 2022); torch
alone takes about a second to import. A :class:`SimulationWorker` imports torch in a
process of its own as soon as it starts and then runs :func:`gdln.simulate` for each job
it is sent (of those waiting, the lowest priority number first), so that on a machine
with a free core the imports, the theory and the simulations overlap. :func:`standby`
starts one before its jobs are known (``gdln compare`` does, before reading the file).

The two processes talk over a :func:`multiprocessing.Pipe`: the parent sends the
arguments of :func:`gdln.simulate` (objects it made itself, e.g. a loaded problem's
graph and examples) with a number and a priority, the worker sends back the number
with the :class:`~gdln.Trajectory` or the exception. Nothing read from a file is unpickled, only what these two processes made.
The worker ignores SIGINT (the parent handles Ctrl-C and then ends it) and exits when
the parent closes the pipe or goes away.
"""

from __future__ import annotations

import contextlib
import copy
import multiprocessing
import os
import pickle
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from .._errors import GdlnError
from ._threads import usable_cores

__all__ = ["SimulationWorker", "serve", "standby", "take_standby", "worthwhile"]

_START = "import sys; from gdln.simulation._worker import serve; serve(int(sys.argv[1]))"


class SimulationWorker:
    """A second process that runs :func:`gdln.simulate` for the jobs it is sent.

    Use it as a context manager (the process ends on exit), :meth:`submit` the keyword
    arguments of each run (with a priority), and take each result by the number
    :meth:`submit` returned with :meth:`result`. Of the jobs waiting when the worker is
    free, it runs the one of lowest priority number first, then the earliest sent.
    """

    def __init__(self) -> None:
        ours, theirs = multiprocessing.Pipe()
        package = str(Path(__file__).resolve().parents[2])  # this gdln, whatever sys.path
        path = os.environ.get("PYTHONPATH")
        env = dict(os.environ, PYTHONPATH=package + (os.pathsep + path if path else ""))
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", _START, str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                env=env,
            )
        finally:
            theirs.close()
        self.conn = ours
        # jobs are written by a thread: the worker reads them only once torch is imported,
        # and a job larger than the pipe's buffer must not hold this process until then
        self.outbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self.sender = threading.Thread(target=self._send, daemon=True)
        self.sender.start()
        self.sent = 0
        self.received: dict[int, tuple[str, Any]] = {}
        self.arrived: list[int] = []  # the jobs' numbers in the order their results came

    def _send(self) -> None:
        while (data := self.outbox.get()) is not None:
            try:
                self.conn.send_bytes(data)
            except OSError:  # the worker is gone; result() says so
                return

    def __enter__(self) -> SimulationWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def submit(self, *, priority: int = 0, **kwargs: Any) -> int:
        """Send one run of :func:`gdln.simulate` with these keyword arguments; return the
        number :meth:`result` takes. ``priority``: a lower number runs first among the
        jobs waiting when the worker is free."""
        number = self.sent
        self.sent += 1
        self.outbox.put(pickle.dumps((number, priority, kwargs), protocol=pickle.HIGHEST_PROTOCOL))
        return number

    def result(self, number: int) -> Any:
        """The trajectory of job ``number``; its exception is raised here."""
        while number not in self.received:
            try:
                done, kind, value = self.conn.recv()
            except (EOFError, OSError):
                code = self.process.wait()
                raise GdlnError(
                    f"the simulation process ended without a result (exit status {code})"
                ) from None
            self.received[done] = (kind, value)
            self.arrived.append(done)
        kind, value = self.received.pop(number)
        if kind == "error":
            raise value
        return value

    def close(self) -> None:
        """End the process (at once if it is still running a job) and close the pipe."""
        self.outbox.put(None)
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.sender.join()
        self.conn.close()


def worthwhile() -> bool:
    """Whether simulating in a second process can overlap work here: torch is not imported
    in this process yet (its import is most of what overlaps), on POSIX, with at least two
    cores this process may use."""
    if "torch" in sys.modules or os.name != "posix":
        return False
    return usable_cores() >= 2


_STANDBY: list[SimulationWorker] = []
"""The worker :func:`standby` started, until :func:`take_standby` takes it (at most one)."""


@contextlib.contextmanager
def standby() -> Iterator[None]:
    """Start a worker now, where :func:`worthwhile`, for the first :func:`take_standby` in
    this block; it imports torch while the caller does something else (reads its problem).
    One not taken is ended on the way out."""
    if _STANDBY or not worthwhile():
        yield
        return
    try:
        worker = SimulationWorker()
    except OSError:  # no process to be had: the taker starts its own or simulates here
        yield
        return
    _STANDBY.append(worker)
    try:
        yield
    finally:
        if worker in _STANDBY:
            _STANDBY.remove(worker)
            worker.close()


def take_standby() -> SimulationWorker | None:
    """The worker :func:`standby` started, if it is still running (then it is the caller's
    to close), else ``None``."""
    while _STANDBY:
        worker = _STANDBY.pop()
        if worker.process.poll() is None:
            return worker
        worker.close()
    return None


def serve(fd: int) -> None:
    """The worker's loop: import torch, then run each job sent down ``fd`` and reply."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    conn = Connection(fd)
    from ._simulate import simulate  # torch, while the parent works on the theory

    # replies are sent by a thread: the parent reads them when it needs them, and a reply
    # larger than the pipe's buffer must not hold up the next run until then
    replies: queue.SimpleQueue[tuple[int, str, Any]] = queue.SimpleQueue()
    sender = threading.Thread(target=_send_replies, args=(conn, replies), daemon=True)
    sender.start()
    waiting: list[tuple[int, int, dict[str, Any]]] = []  # (priority, number, job)
    while True:
        try:
            while not waiting or conn.poll():  # block for one job, then take all sent
                number, priority, job = conn.recv()
                waiting.append((priority, number, job))
        except (EOFError, OSError):  # the parent is gone
            return
        waiting.sort(key=lambda w: w[:2])
        _, number, job = waiting.pop(0)
        try:
            reply: tuple[int, str, Any] = (number, "ok", simulate(**job))
        except BaseException as error:  # the parent raises it
            reply = (number, "error", _sendable(error))
        replies.put(reply)


def _send_replies(conn: Connection, replies: queue.SimpleQueue[tuple[int, str, Any]]) -> None:
    """Send each reply in order, until the parent is gone."""
    while True:
        try:
            conn.send(replies.get())
        except OSError:
            return


def _sendable(error: BaseException) -> BaseException:
    """``error``, or a :class:`GdlnError` with its text if it cannot be rebuilt elsewhere."""
    try:
        copy.deepcopy(error)  # what pickling it would rebuild
        return error
    except Exception:
        return GdlnError(f"{type(error).__name__}: {error}")
