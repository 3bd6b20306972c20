"""What the commands share: graph-file arguments, file defaults, and the output writer.

Every option means one thing in every command, and every command that writes follows one
rule: ``-o/--out`` and ``--force`` are checked before anything is computed (the folder
must exist and be writable), the format follows ``-o``'s extension, and the output appears
whole or not at all and never replaces anything without ``--force``, even when two runs
race: every file and folder is written by :mod:`gdln.outputs`, the one mechanism the
library's own writers (:func:`gdln.compare`, :meth:`gdln.Trajectory.save`) use too.

Nothing heavy is imported here: ``gdln <command> --help`` stays instant.
"""

from __future__ import annotations

import functools
import shutil
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

import gdln

F = TypeVar("F", bound=Callable[..., Any])

#: The extension that each output format is written with.
EXTENSIONS: Mapping[str, str] = {
    "text": ".txt",
    "latex": ".tex",
    "json": ".json",
    "csv": ".csv",
    "npz": ".npz",
    "png": ".png",
    "svg": ".svg",
    "pdf": ".pdf",
    "yaml": ".yaml",
}


class CommandLineError(gdln.GdlnError, ValueError):
    """An option, or a combination of options, is malformed; the message names them."""


# ----------------------------------------------------------------------------- graph files


def graph_arguments(fn: F) -> F:
    """``FILE``, ``--param NAME=VALUE`` (repeatable) and ``--task FILE``."""
    fn = click.option(
        "--task",
        "task",
        type=click.Path(),
        default=None,
        help="A task file replacing the graph file's task.",
    )(fn)
    fn = click.option(
        "--param",
        "params",
        multiple=True,
        metavar="NAME=VALUE",
        help="Override a graph-file parameter, e.g. --param M=5 (repeatable).",
    )(fn)
    return click.argument("file", type=click.Path())(fn)


def load_problem(
    file: str, params: tuple[str, ...], task: str | None, *, task_file: str | None = None
) -> gdln.Problem:
    """Read ``file`` with the ``--param`` overrides; ``task_file`` replaces ``--task``."""
    return gdln.load(file, params=gdln.parse_params(list(params)), task=task_file or task)


#: The declared settings (:class:`gdln.settings.Settings`) each command takes as options.
#: Each option is built from its declaration, means the same in every command, and
#: defaults to the graph file's value, else the declared default: the library resolves it.
COMMAND_SETTINGS: Mapping[str, tuple[str, ...]] = {
    "derive": ("lump", "b0", "route", "weight_decay"),
    "solve": (
        "lump",
        "b0",
        "route",
        "t_max",
        "lr",
        "weight_decay",
        "dynamics",
        "points",
        "method",
    ),
    "timescales": ("lump", "b0", "route"),
    # what gdln.solve takes with a schedule, and the random start of --compare
    "schedule": (*gdln.task.SCHEDULE_TAKES["solve"], "init_scale", "seeds"),
    "simulate": (
        "t_max",
        "lr",
        "weight_decay",
        "points",
        "init_scheme",
        "init_scale",
        "b0",
        "seeds",
        "seed",
        "optimizer",
        "batch_size",
        "momentum",
        "dtype",
        "device",
        "threads",
        "progress",
        "record_patterns",
    ),
    "compare": (
        "lump",
        "route",
        "b0",
        "t_max",
        "lr",
        "weight_decay",
        "points",
        "init_scheme",
        "init_scale",
        "theory_start",
        "seeds",
        "seed",
        "dtype",
        "device",
        "threads",
        "progress",
    ),
}


# ----------------------------------------------------------------------------- display


def display_options(fn: F) -> F:
    """``--numeric``: how a printout shows exact values (display only, not a setting of
    the pipeline: it changes no number that is computed)."""
    return click.option(
        "--numeric",
        is_flag=True,
        help="Show exact values (such as -9*sqrt(6227285)/151885) as decimals (6 "
        "decimal places in matrices) in the text output; LaTeX and JSON stay exact.",
    )(fn)


def kernel_option(fn: F) -> F:
    """``--kernel``: what a solve writes besides the trajectory (an output choice, not a
    setting of the pipeline: it changes no number of the solution)."""
    return click.option(
        "--kernel",
        is_flag=True,
        help="Add the tangent kernel along the solution: the kernel distance S(t) from "
        "t = 0 and each hidden node's representational similarity (its Gram matrix over "
        "the task's examples), from the theory (gdln.trajectory_kernels).",
    )(fn)


def schedule_option(fn: F) -> F:
    """``--schedule``: follow the graph file's ``schedule:`` section phase by phase (the
    command's public call with ``schedule=``)."""
    return click.option(
        "--schedule",
        "follow_schedule",
        is_flag=True,
        help="Follow the graph file's schedule: section, phase by phase, each phase from the "
        "previous one's end, recording every context's loss (as gdln schedule does).",
    )(fn)


def for_schedule(settings: dict[str, Any], form: str) -> dict[str, Any]:
    """The options the schedule form of ``form`` takes (``SCHEDULE_TAKES``), from a
    command's ``settings``; an option it does not take, given, is refused
    (``--schedule and --t-max: ...``)."""
    takes = gdln.task.SCHEDULE_TAKES[form]
    for name, value in settings.items():
        if name not in takes and value not in (None, False):
            raise CommandLineError(gdln.task.schedule_refusal(form, name, options=True))
    return {name: settings[name] for name in takes if name in settings}


def terminal_width(output: Output) -> int:
    """The columns text may take: the terminal's width on standard output (``COLUMNS``
    where set, else 80 when it is not a terminal), unlimited in a file."""
    if output.path is not None:
        return 10_000
    return shutil.get_terminal_size().columns


def setting_help(name: str) -> str:
    """An option's help, from its declaration: its meaning and where its default comes from."""
    declaration = gdln.settings.declarations()[name]
    where = f"the file's {declaration.file_key}, else " if declaration.file_key else ""
    return f"{declaration.meaning} (default: {where}{declaration.shown})"


def setting_options(command: str) -> Callable[[F], F]:
    """The options of ``command``'s declared settings (:data:`COMMAND_SETTINGS`), each
    passed on as given (``None`` when absent) for the library to read and resolve."""

    def decorate(fn: F) -> F:
        declared = gdln.settings.declarations()
        for name in reversed(COMMAND_SETTINGS[command]):
            declaration = declared[name]
            option = declaration.option
            assert option is not None
            if name == "progress" or declaration.expected == "true or false":
                fn = click.option(
                    f"{option}/--no-{option[2:]}", name, default=None, help=setting_help(name)
                )(fn)
                continue
            choices = declaration.choices
            fn = click.option(
                option,
                name,
                type=click.Choice(list(choices)) if choices else None,
                default=None,
                metavar=None if choices else "VALUE",
                help=setting_help(name),
            )(fn)
        return fn

    return decorate


def old_spellings(command: str) -> Callable[[F], F]:
    """The hidden options of ``gdln <command>``'s old spellings (the command's rows of
    :data:`gdln.settings.OLD_SPELLINGS`), read with one warning line naming the new
    spelling and passed on under the new names: the command never sees them.

    Put it right under ``@click.command``: an old option takes the type (the choices) of
    the new option it names.
    """

    def decorate(fn: F) -> F:
        params = {p.name: p for p in getattr(fn, "__click_params__", [])}

        @functools.wraps(fn)
        def translated(**values: Any) -> Any:
            gdln.settings.translate_options(command, values)
            return fn(**values)

        for row in gdln.settings.old_options(command):
            kwargs: dict[str, Any] = {"hidden": True, "default": None}
            if row.flag and "/" not in row.old:
                kwargs["is_flag"] = True
            if row.like is not None:
                kwargs["type"] = params[row.like].type
            name = gdln.settings.option_name(row)
            translated = click.option(row.old, name, **kwargs)(translated)
        return translated  # type: ignore[return-value]

    return decorate


def number_list(option: str, text: str | None) -> tuple[float, ...] | None:
    """A comma-separated list of numbers such as ``0.9,0.8,0.5`` (``None`` stays ``None``)."""
    if text is None:
        return None
    try:
        return tuple(float(part) for part in text.split(","))
    except ValueError:
        raise CommandLineError(
            f"{option} {text!r}: expected a comma-separated list of numbers"
        ) from None


# ----------------------------------------------------------------------------- outputs


@dataclass(frozen=True)
class Output:
    """Where a command writes (``path`` ``None``: standard output) and in which format."""

    path: Path | None
    format: str
    force: bool = False


def output_options(formats: tuple[str, ...], *, default: str, what: str = "output") -> Any:
    """``--format`` (one of ``formats``), ``-o/--out FILE`` and ``--force``."""
    endings = ", ".join(EXTENSIONS[f] for f in formats)

    def decorate(fn: F) -> F:
        fn = click.option("--force", is_flag=True, help="Replace an existing output file.")(fn)
        fn = click.option(
            "-o",
            "--out",
            type=click.Path(),
            default=None,
            help=f"Write the {what} to this file ({endings}; the format follows the "
            "extension) instead of to standard output.",
        )(fn)
        return click.option(
            "--format",
            "fmt",
            type=click.Choice(formats),
            default=None,
            help=f"Output format (default: -o's extension, else {default}).",
        )(fn)

    return decorate


def refuse_existing(path: Path) -> NoReturn:
    """The one refusal of every command: ``PATH exists; pass --force to replace it``."""
    raise CommandLineError(f"{shown(path)} exists; pass --force to replace it")


@contextmanager
def refusals() -> Iterator[None]:
    """Show :class:`gdln.outputs.OutputExistsError` (a run that raced this one and wrote
    first, say) as the command line's one refusal."""
    try:
        yield
    except gdln.outputs.OutputExistsError as err:
        raise CommandLineError(
            f"{shown(err.path or '')} exists; pass --force to replace it"
        ) from err


def check_folder(out: Path) -> None:
    """The folder that will hold ``out`` must exist and be reachable
    (:func:`gdln.outputs.folder_problem`)."""
    problem = gdln.outputs.folder_problem(out.parent)
    if problem is not None:
        raise CommandLineError(f"-o {shown(out)}: {problem}")


def shown(path: str | Path) -> str:
    """A path as a message shows it: cut in the middle to at most 100 characters."""
    text = str(path)
    return text if len(text) <= 100 else f"{text[:48]}...{text[-49:]}"


def output_file(
    out: str | None,
    fmt: str | None,
    force: bool,
    *,
    formats: tuple[str, ...],
    default: str | None = None,
) -> Output:
    """Check ``-o``, ``--format`` and ``--force`` before anything is computed.

    The format follows ``-o``'s extension; a ``--format`` that disagrees is refused, and so
    is an existing file without ``--force``, a missing folder or one that cannot be
    written (:func:`gdln.outputs.check_file` creates and removes a probe file there, and
    removes stale temporary files of runs that died).
    """
    if out is None:
        if sys.stdout is None:  # started with standard output closed (gdln ... >&-)
            raise CommandLineError("standard output is closed; write to a file with -o FILE")
        return Output(None, fmt or default or formats[0])
    path = Path(out)
    by_extension = {EXTENSIONS[f]: f for f in formats}
    chosen = by_extension.get(path.suffix.lower())
    if chosen is None:
        endings = " or ".join(by_extension)
        raise CommandLineError(f"-o {shown(out)}: expected a file ending in {endings}")
    if fmt is not None and fmt != chosen:
        raise CommandLineError(
            f"--format {fmt} conflicts with -o {shown(out)}, a {chosen} file; drop --format "
            f"or change the extension to {EXTENSIONS[fmt]}"
        )
    check_folder(path)
    try:
        is_dir, exists = path.is_dir(), path.exists()
    except OSError as err:  # a name too long, say
        raise CommandLineError(f"-o {shown(out)}: {err.strerror or err}") from err
    if is_dir:
        raise CommandLineError(f"-o {shown(out)}: is a folder; expected a file")
    if exists and not force:
        refuse_existing(path)
    with refusals():
        gdln.outputs.check_file(path, force=force)
    return Output(path, chosen, force)


def output_folder(out: str, force: bool) -> Path:
    """Check ``-o DIR`` of a command that writes several files into a folder.

    ``DIR`` may be missing (it is created) or empty; one that holds anything is refused
    unless ``--force``, which replaces the files the command writes and keeps the others
    (:func:`atomic_folder`). The folder above it must exist and be writable.
    """
    path = Path(out)
    check_folder(path)
    if path.exists() and not path.is_dir():
        raise CommandLineError(f"-o {shown(out)}: is a file; expected a folder")
    if path.is_dir() and any(path.iterdir()) and not force:
        refuse_existing(path)
    with refusals():
        gdln.outputs.check_folder(path, force=force)
    return path


@contextmanager
def atomic_path(path: Path, *, force: bool) -> Iterator[Path]:
    """A temporary path beside ``path`` (same extension) that becomes ``path`` on success
    (:func:`gdln.outputs.atomic_file`): exclusively unless ``force``, and on an error or a
    signal the temporary file is removed and ``path`` is left as it was."""
    with refusals(), gdln.outputs.atomic_file(path, force=force) as temporary:
        yield temporary


@contextmanager
def atomic_folder(path: Path, *, force: bool) -> Iterator[Path]:
    """A temporary folder beside ``path`` that takes its place, whole, on success
    (:func:`gdln.outputs.atomic_folder`): a missing ``path`` is created by one rename, an
    existing one (``force``) is swapped for the new folder, which keeps the old folder's
    other entries. On an error or a signal nothing in ``path`` changes."""
    with refusals(), gdln.outputs.atomic_folder(path, force=force) as temporary:
        yield temporary


def echo(text: str, *, err: bool = False) -> None:
    """Print ``text`` (on standard error if ``err``): the one way the commands print, with
    every character that is not printable but the line ends escaped
    (:func:`gdln.outputs.printable`), so that no name from a file or an option can act on
    the terminal."""
    click.echo(gdln.outputs.printable(text, keep="\n"), err=err)


def write(output: Output, text: str) -> None:
    """Print ``text``, or write it (atomically) to ``output.path`` and say so on stderr;
    escaped as :func:`echo` prints it either way."""
    text = gdln.outputs.printable(text, keep="\n")
    if output.path is None:
        click.echo(text)
        return
    with atomic_path(output.path, force=output.force) as temporary:
        temporary.write_text(text + "\n", encoding="utf-8")
    echo(f"wrote {output.path}", err=True)
