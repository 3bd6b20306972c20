r"""A second Python process that runs a target's jobs, started before they are needed.

:func:`gdln.compare` needs sympy, scipy and matplotlib for the theory and the figures,
and torch for the simulations of the full network (Sec. 2 of Saxe et al. 2022); torch
alone takes about a second to import. A :class:`Worker` imports its target's module (for
the simulations, :func:`gdln.simulate`'s, which imports torch) in a process of its own as
soon as it starts, and then runs the target for each job it is sent (of those waiting,
the lowest priority number first), so that on a machine with a free core the imports, the
theory and the simulations overlap. :func:`standby` starts one before its jobs are known
(``gdln compare`` does, before reading the file).

The two processes talk over a :func:`multiprocessing.Pipe`: the parent sends the keyword
arguments of the target (objects it made itself, e.g. a loaded problem's graph and
examples) with a number and a priority, the worker sends back the number with the result
or the exception. Nothing read from a file is unpickled, only what these two processes
made, and the target is a name the calling code gives (``"package.module:function"``),
never one read from a file. The worker ignores SIGINT (the parent handles Ctrl-C and then
ends it) and exits when the parent closes the pipe or goes away.

Only the standard library is imported here.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import multiprocessing
import os
import pickle
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from .._errors import GdlnError
from ._threads import usable_cores

__all__ = ["Worker", "serve", "standby", "take_standby", "target_function", "worthwhile"]

_START = "import sys; from gdln._runtime._worker import serve; serve(int(sys.argv[1]), sys.argv[2])"
_TARGET = re.compile(r"gdln(\.\w+)+:\w+")
"""A target: a function of gdln, ``"gdln.package.module:function"``."""


def target_function(target: str) -> Callable[..., Any]:
    """The function a target names, its module imported (see the module docstring).

    >>> target_function("gdln._runtime._threads:usable_cores").__name__
    'usable_cores'
    """
    _check_target(target)
    module, _, name = target.partition(":")
    function: Callable[..., Any] = getattr(importlib.import_module(module), name)
    return function


def _check_target(target: str) -> None:
    if not isinstance(target, str) or not _TARGET.fullmatch(target):
        raise ValueError(f"target {target!r}: expected 'gdln.package.module:function'")


class Worker:
    """A second process that runs ``target`` for the jobs it is sent.

    Use it as a context manager (the process ends on exit), :meth:`submit` the keyword
    arguments of each run (with a priority), and take each result by the number
    :meth:`submit` returned with :meth:`result`. Of the jobs waiting when the worker is
    free, it runs the one of lowest priority number first, then the earliest sent.
    ``what`` names the jobs in messages (``"simulation"``).
    """

    def __init__(self, target: str, *, what: str = "job") -> None:
        _check_target(target)
        self.target, self.what = target, what
        ours, theirs = multiprocessing.Pipe()
        package = str(Path(__file__).resolve().parents[2])  # this gdln, whatever sys.path
        path = os.environ.get("PYTHONPATH")
        env = dict(os.environ, PYTHONPATH=package + (os.pathsep + path if path else ""))
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", _START, str(theirs.fileno()), target],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                env=env,
            )
        finally:
            theirs.close()
        self.conn = ours
        # jobs are written by a thread: the worker reads them only once its target is
        # imported, and a job larger than the pipe's buffer must not hold this process
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

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def submit(self, *, priority: int = 0, **kwargs: Any) -> int:
        """Send one run of the target with these keyword arguments; return the number
        :meth:`result` takes. ``priority``: a lower number runs first among the jobs
        waiting when the worker is free."""
        number = self.sent
        self.sent += 1
        self.outbox.put(pickle.dumps((number, priority, kwargs), protocol=pickle.HIGHEST_PROTOCOL))
        return number

    def result(self, number: int) -> Any:
        """The result of job ``number``; its exception is raised here."""
        while number not in self.received:
            try:
                done, kind, value = self.conn.recv()
            except (EOFError, OSError):
                code = self.process.wait()
                raise GdlnError(
                    f"the {self.what} process ended without a result (exit status {code})"
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


def worthwhile(heavy: str = "torch") -> bool:
    """Whether running jobs in a second process can overlap work here: the library whose
    import the worker takes over (``heavy``) is not imported in this process yet (its
    import is most of what overlaps), on POSIX, with at least two cores this process may
    use."""
    if heavy in sys.modules or os.name != "posix":
        return False
    return usable_cores() >= 2


_STANDBY: list[Worker] = []
"""The workers :func:`standby` started, until :func:`take_standby` takes one (at most one
per target)."""


@contextlib.contextmanager
def standby(target: str, *, what: str = "job", heavy: str = "torch") -> Iterator[None]:
    """Start a worker of ``target`` now, where :func:`worthwhile`, for the first
    :func:`take_standby` of that target in this block; it imports the target while the
    caller does something else (reads its problem). One not taken is ended on the way out."""
    if any(w.target == target for w in _STANDBY) or not worthwhile(heavy):
        yield
        return
    try:
        worker = Worker(target, what=what)
    except OSError:  # no process to be had: the taker starts its own or runs here
        yield
        return
    _STANDBY.append(worker)
    try:
        yield
    finally:
        if worker in _STANDBY:
            _STANDBY.remove(worker)
            worker.close()


def take_standby(target: str) -> Worker | None:
    """The worker of ``target`` that :func:`standby` started, if it is still running (then
    it is the caller's to close), else ``None``."""
    while mine := [w for w in _STANDBY if w.target == target]:
        worker = mine[-1]
        _STANDBY.remove(worker)
        if worker.process.poll() is None:
            return worker
        worker.close()
    return None


def serve(fd: int, target: str) -> None:
    """The worker's loop: import ``target``, then run it for each job sent down ``fd``
    and reply."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    conn = Connection(fd)
    function = target_function(target)  # torch, while the parent works on the theory
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
            reply: tuple[int, str, Any] = (number, "ok", function(**job))
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
