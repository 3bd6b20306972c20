"""The ``gdln`` group: its command table, ``main``, and how errors are shown.

The group lists the commands from :data:`COMMANDS` without importing them, so
``gdln --help`` imports neither torch, sympy nor scipy; a command's module is imported
when that command runs or shows its own help.
"""

from __future__ import annotations

import importlib
import os
import sys
import warnings
from typing import IO, Any, NamedTuple, TextIO

import click

import gdln

from ._common import shown


class CommandEntry(NamedTuple):
    """Where a command lives and its one-line help (the first line of its docstring)."""

    module: str
    help: str


#: The commands in pipeline order: name -> (module, one-line help).
COMMANDS: dict[str, CommandEntry] = {
    "graphs": CommandEntry(
        "gdln.cli._graphs",
        "List the graphs shipped with gdln: name, description, the figure each reproduces.",
    ),
    "paths": CommandEntry(
        "gdln.cli._theory", "List input-output paths, |P(e)| per edge and |T(v)| per output."
    ),
    "stats": CommandEntry(
        "gdln.cli._theory",
        "Print the path statistics and the bases U, V that diagonalise them (Eqs 5-8).",
    ),
    "derive": CommandEntry(
        "gdln.cli._theory", "Derive the reduced singular-value ODEs (Eq 10), lumped and simplified."
    ),
    "solve": CommandEntry(
        "gdln.cli._theory",
        "Solve the dynamics numerically; summarise it, or write t, loss and every variable.",
    ),
    "timescales": CommandEntry(
        "gdln.cli._timescales",
        "Order, times and plateaus of the stages of learning from small initial weights.",
    ),
    "schedule": CommandEntry(
        "gdln.cli._schedule",
        "Solve the file's schedule phase by phase; print routes, losses per context, forgetting.",
    ),
    "simulate": CommandEntry(
        "gdln.cli._simulate",
        "Train the full gated network of FILE by gradient descent and save its trajectory.",
    ),
    "compare": CommandEntry(
        "gdln.cli._simulate",
        "Reduced theory (ODE and GD map) vs simulation (decoupled and random init).",
    ),
    "extract": CommandEntry(
        "gdln.cli._gating",
        "Write the gated network of a ReLU network's patterns at a step as a graph file.",
    ),
    "plot": CommandEntry(
        "gdln.cli._plot",
        "Draw a result file (solve, simulate, timescales, a sweep table, kernel.json).",
    ),
    "kernel": CommandEntry(
        "gdln.cli._kernel",
        "Compute a kernel of a deep gated network on a dataset; print its spectrum.",
    ),
    "sd": CommandEntry(
        "gdln.cli._sd",
        "Exact expected SD loss, gradient and regulariser of one scalar residual chain.",
    ),
    "schema": CommandEntry(
        "gdln.cli._schema",
        "Print the JSON Schema (draft 2020-12) of graph, task and dataset files.",
    ),
}


#: The longest line an error or a warning takes, ``gdln: error: `` included.
MAX_LINE = 300


def one_line(prefix: str, message: str) -> str:
    """``prefix`` and ``message`` as one line of at most :data:`MAX_LINE` characters.

    Every character that is not printable is escaped (:func:`gdln.outputs.printable`), so
    that a name from a file cannot rewrite the terminal; a message that is still too long
    (the messages shorten the values they quote, so this is the last line of defence) is
    cut in the middle, keeping its start and its end.
    """
    lines = "\n" in message or "\r" in message
    text = gdln.outputs.printable(" ".join(message.split()) if lines else message)
    room = MAX_LINE - len(prefix)
    if len(text) > room:
        text = f"{text[: room // 2 - 2]}...{text[len(text) - (room - room // 2 - 1) :]}"
    return prefix + text


class CommandFailed(click.ClickException):
    """A gdln error or an OS error of an input or output, shown as one line."""

    exit_code = 2

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(one_line("gdln: error: ", self.message), err=True, file=file)


def describe(err: BaseException) -> str:
    """One line for ``err``: an OS error names its file (shortened), a gdln error is its
    message."""
    if isinstance(err, OSError) and err.strerror and err.filename is not None:
        name = os.fsdecode(err.filename) if isinstance(err.filename, bytes) else err.filename
        return f"{shown(name)}: {err.strerror}"
    return str(err) or type(err).__name__


class LazyGroup(click.Group):
    """A group whose commands are imported when they are used, listed from a table."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        command: click.Command = getattr(importlib.import_module(entry.module), cmd_name)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, entry.help) for name, entry in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; gdln and OS errors become :class:`CommandFailed` unless --debug."""
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            raise  # the reader went away (gdln paths ... | head): main stops quietly
        except (gdln.GdlnError, OSError) as err:
            if ctx.params.get("debug"):
                raise
            raise CommandFailed(describe(err)) from err


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(f"gdln, version {gdln.__version__}")
        ctx.exit()


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version and exit.",
)
@click.option(
    "--debug",
    is_flag=True,
    envvar="GDLN_DEBUG",
    help="Show the full traceback of an error (also GDLN_DEBUG=1).",
)
def cli(debug: bool) -> None:
    """Exact learning dynamics of gated deep linear networks, from graph files.

    \b
    Example:
      gdln graphs
      gdln derive routing --lump symmetry
    """


def main(argv: list[str] | None = None) -> None:
    """Run the group: errors become one line on stderr and exit code 2 (1 if aborted);
    each gdln warning is one line, ``gdln: warning: <message>``."""
    with warnings.catch_warnings():
        warnings.simplefilter("always", gdln.GdlnWarning)
        others = warnings.showwarning

        def show(
            message: Warning | str,
            category: type[Warning],
            filename: str,
            lineno: int,
            file: TextIO | None = None,
            line: str | None = None,
        ) -> None:
            if issubclass(category, gdln.GdlnWarning):
                click.echo(one_line("gdln: warning: ", str(message)), err=True)
            else:
                others(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        _run(argv)


def _run(argv: list[str] | None) -> None:
    """:func:`main` without the warnings."""
    try:
        result = cli.main(args=argv, prog_name="gdln", standalone_mode=False)
    except click.exceptions.Exit as exit_:
        sys.exit(exit_.exit_code)
    except click.ClickException as err:
        # click's own errors (a usage error) quote what was typed, not always escaped
        err.message = gdln.outputs.printable(err.message)  # type: ignore[misc]
        err.show()
        sys.exit(2)
    except click.exceptions.Abort:
        sys.exit(1)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        sys.exit(1)
    if isinstance(result, int) and not isinstance(result, bool) and result:
        sys.exit(result)  # a non-zero exit code returned by click (standalone_mode=False)
