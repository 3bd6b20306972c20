r"""Temporary names beside an output, stale ones left by dead runs, and the folder lock.

An output ``NAME`` is written under a hidden name in the same folder (so on the same file
system, where a rename is atomic):

* ``.NAME.gdln-tmp-HOST-PID-XXXXXXXX[.ext]``: the file or folder being written;
* ``.NAME.gdln-old-HOST-PID-XXXXXXXX``: an existing folder set aside while a new one is
  swapped into its place (``force``), removed right after.

``HOST`` is a short hash of the machine's name and ``PID`` the writing process, so that a
later run can tell a stale name (its process is gone, e.g. after SIGKILL or a power cut)
from one that a live run is writing, on this machine or another sharing the folder.
:func:`remove_stale` removes stale names, and puts a folder left aside back in place if
the run died between the two renames of a swap.

Moving an output into place holds an exclusive lock on its folder (:func:`locked`,
``flock`` on the folder itself: no lock file, and the kernel releases it when the process
dies), so that two gdln runs never decide "nothing is there" at the same time.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import secrets
import shutil
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["aside_name", "held_signals", "locked", "prefix", "remove_stale"]

_NAME_KEPT = 120
"""Longest part of an output's name kept in its temporary names (file names end at 255)."""

_TEMPORARY = re.compile(
    r"\.(?P<name>.+)\.gdln-(?P<kind>tmp|old)-(?P<host>[0-9a-f]{8})-(?P<pid>\d+)-[a-z0-9_]+",
    re.DOTALL,
)


@functools.cache
def _host() -> str:
    """Eight hex digits naming this machine in temporary names."""
    import socket

    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


def prefix(name: str, kind: str = "tmp") -> str:
    """The start of a temporary name for output ``name`` written by this process."""
    return f".{name[:_NAME_KEPT]}.gdln-{kind}-{_host()}-{os.getpid()}-"


def aside_name(name: str) -> str:
    """A fresh name under which an existing folder ``name`` is set aside during a swap."""
    return prefix(name, "old") + secrets.token_hex(4)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this machine (of any user)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it exists, and belongs to someone else
        return True
    return True


def _remove(path: Path) -> bool:
    """Remove a file or a folder tree; whether it is gone."""
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def remove_stale(folder: str | os.PathLike[str]) -> list[Path]:
    """Remove the temporary names in ``folder`` whose writing process is gone.

    Only names made on this machine are considered (``HOST``), and only those whose
    process ``PID`` no longer exists. A folder set aside by a swap that was killed before
    the new folder took its place is renamed back to its own name instead of removed.

    Parameters
    ----------
    folder
        The folder to clean (missing or unreadable folders are left alone).

    Returns
    -------
    list of Path
        The temporary names removed or put back.
    """
    folder = Path(folder)
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    done: list[Path] = []
    for entry in names:
        if not entry.startswith(".") or ".gdln-" not in entry:
            continue
        found = _TEMPORARY.match(entry)
        if found is None or found["host"] != _host() or _alive(int(found["pid"])):
            continue
        path = folder / entry
        own = folder / found["name"]
        if found["kind"] == "old" and len(found["name"]) < _NAME_KEPT:
            if not os.path.lexists(own):
                with contextlib.suppress(OSError):
                    os.rename(path, own)
                    done.append(path)
                continue
        elif found["kind"] == "old":
            continue  # a truncated name: where it belongs is unknown, so leave it
        if _remove(path):
            done.append(path)
    return done


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``folder`` (where the platform and file system allow).

    Every gdln writer takes it to move an output into ``folder``; the kernel drops it if
    the process dies, so it never goes stale.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: exclusive creation still holds
        yield
        return
    try:
        handle = os.open(folder, os.O_RDONLY)
    except OSError:
        yield
        return
    try:
        with contextlib.suppress(OSError):  # a file system without flock: no lock
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)


_HELD = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def held_signals() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back for a few system calls that must not be separated.

    In the main thread, each signal that arrives meanwhile is noted and delivered to the
    previous handler when the block ends; elsewhere (signal handlers run only in the main
    thread) this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []

    def note(signum: int, _frame: Any) -> None:
        arrived.append(signum)

    previous = {s: signal.signal(s, note) for s in _HELD}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, signal.SIG_DFL if handler is None else handler)
        for signum in dict.fromkeys(arrived):
            signal.raise_signal(signum)
