"""Jobs that write files, run at the same time in children forked for them.

Rendering a figure is CPU work in Python that holds the GIL, so separate processes are
what draws two figures in the time of the longer one (:func:`gdln.compare`'s loss and
singular-value figures); the children inherit the figures' data and whatever the parent
has imported (matplotlib, its fonts). Only the standard library is imported here.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from ._threads import usable_cores

__all__ = ["side_by_side"]


def side_by_side(jobs: Sequence[Callable[[], list[Path]]]) -> list[Path]:
    """Run file-writing ``jobs`` (each returns the files it wrote), the last here and
    each other one at the same time in a child process forked for it, where that is safe
    and can help: on Linux, with this process running no other thread (a fork copies
    only the calling thread) and two cores to use. Otherwise, and for a job whose child
    fails, one after another here, so that its error is raised as usual.

    Returns
    -------
    list of Path
        The files written, in the order of ``jobs``.
    """
    if len(jobs) < 2 or not can_fork():
        return [path for job in jobs for path in job()]
    children = [_fork(job) for job in jobs[:-1]]
    last = jobs[-1]()
    written = []
    for job, child in zip(jobs[:-1], children, strict=True):
        paths = _join(*child) if child is not None else None
        written += paths if paths is not None else job()
    return written + last


def can_fork() -> bool:
    """Whether :func:`side_by_side` forks (see there)."""
    return (
        sys.platform.startswith("linux") and threading.active_count() == 1 and usable_cores() >= 2
    )


def _fork(job: Callable[[], list[Path]]) -> tuple[int, int] | None:
    """Start ``job`` in a forked child; its pid and the pipe its file list comes back on."""
    read, write = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(read)
        os.close(write)
        return None
    if pid == 0:  # the child: write, report, and end without running the parent's cleanup
        code = 1
        try:
            for s in (signal.SIGINT, signal.SIGTERM):
                signal.signal(s, signal.SIG_DFL)
            os.close(read)
            paths = job()
            os.write(write, json.dumps([str(p) for p in paths]).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    return pid, read


def _join(pid: int, read: int) -> list[Path] | None:
    """The files the child wrote, or ``None`` if it failed; the child is reaped (killed
    first if this process is interrupted meanwhile)."""
    try:
        with os.fdopen(read, "rb") as pipe:
            report = pipe.read()
        _, status = os.waitpid(pid, 0)
    except BaseException:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise
    if status != 0:
        return None
    return [Path(p) for p in json.loads(report)]
