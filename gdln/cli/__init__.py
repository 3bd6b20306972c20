"""The ``gdln`` command line: a thin layer that parses arguments and calls the public API.

One module per command group: :mod:`._theory` (paths, stats, derive, solve),
:mod:`._simulate` (simulate, compare), :mod:`._kernel` and :mod:`._sd`; :mod:`._main` holds
the group, its command table and the error handling, :mod:`._common` the options and the
output writer that every command shares.

:func:`main` is the entry point. Before it imports anything else (click, the commands,
torch), it turns SIGINT and SIGTERM into an exception that unwinds the run, so that every
temporary output is removed on the way out; the run then ends with one line,
``gdln: interrupted`` (or ``terminated``), and exit status 130 (or 143). A second signal
while the first unwinds ends the process at once.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._main import cli as cli

__all__ = ["Interrupted", "cli", "main"]

#: The signals that end a run cleanly, and the word its last line says.
SIGNALS: dict[int, str] = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated"}


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived; raised where the program was, so that it unwinds.

    A ``BaseException``, so that no ``except Exception`` (nor click's handling of
    ``KeyboardInterrupt``) stops it on the way to :func:`main`.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _stop_now(signum: int, _frame: Any) -> None:
    os._exit(128 + signum)


def _unwind(signum: int, _frame: Any) -> None:
    for other in SIGNALS:
        signal.signal(other, _stop_now)
    raise Interrupted(signum)


def _handle_signals() -> dict[int, Callable[..., Any] | int | None]:
    """Install :func:`_unwind` for SIGINT and SIGTERM; return the previous handlers."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {s: signal.signal(s, _unwind) for s in SIGNALS}


def main(argv: list[str] | None = None, *, handle_signals: bool | None = None) -> None:
    """Run ``gdln ARGV``; errors become one line on stderr and exit status 2.

    Parameters
    ----------
    argv
        The arguments; ``None``: the process's own (``sys.argv[1:]``).
    handle_signals
        Whether SIGINT and SIGTERM end the run cleanly (one line, exit 130 or 143, no
        temporary files left) for the time of the call; default: when ``argv`` is
        ``None``, i.e. when this is the program.
    """
    if argv is None:
        _fill_closed_descriptors()
    previous = (
        _handle_signals() if (argv is None if handle_signals is None else handle_signals) else {}
    )
    code: object = 0
    try:
        from ._main import main as run

        run(argv)
    except Interrupted as stop:
        if sys.stderr is not None:
            sys.stderr.write(f"gdln: {SIGNALS[stop.signum]}\n")
            sys.stderr.flush()
        raise SystemExit(128 + stop.signum) from None
    except SystemExit as stop:
        if argv is not None:
            raise
        code = stop.code
    finally:
        for s, handler in previous.items():
            signal.signal(s, signal.SIG_DFL if handler is None else handler)
    if argv is None:
        _end(code)


def _fill_closed_descriptors() -> None:
    """Open the null device on standard input, output or error where the program was
    started with it closed (``gdln ... >&-``), so that no file gdln opens later takes
    its number and receives what a library or a child process writes there. Python
    has set ``sys.stdout`` (or ``sys.stdin``, ``sys.stderr``) to ``None`` for it, and a
    command that would print there refuses to run."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            opened = os.open(os.devnull, os.O_RDWR)
            if opened != fd:  # a lower one was closed too and took it: filled in turn
                os.dup2(opened, fd)
                os.close(opened)


def _end(code: object) -> None:
    """End the program now with ``code`` (as :class:`SystemExit` reads it), once its
    output is flushed: every file it wrote is closed and its helper processes are ended by
    then, and the interpreter's teardown of torch, sympy and matplotlib would add 0.1 to
    0.3 s to every command. A signal from here on ends it at once."""
    if threading.current_thread() is threading.main_thread():
        for s in SIGNALS:
            signal.signal(s, _stop_now)
    if code is not None and not isinstance(code, int):
        if sys.stderr is not None:
            sys.stderr.write(f"{code}\n")
        code = 1
    for stream in (sys.stdout, sys.stderr):  # None: started with it closed
        try:
            if stream is not None:
                stream.flush()
        except (BrokenPipeError, ValueError):  # the reader went away, or it was closed
            pass
    os._exit(code or 0)


def __getattr__(name: str) -> Any:
    if name == "cli":  # the click group, imported when it is asked for
        from ._main import cli

        return cli
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
