"""What the commands share: graph-file arguments, file defaults, and the output writer.

Every option means one thing in every command, and every command that writes follows one
rule: ``-o/--out`` and ``--force`` are checked before anything is computed, the format
follows ``-o``'s extension, and the output appears whole or not at all (it is written to a
temporary file in the same folder, then moved into place with :func:`os.replace`).

Nothing heavy is imported here: ``gdln <command> --help`` stays instant.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

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
}

#: The lumping used when neither the command line nor the file names one: exact for the
#: ODE and for the gradient-descent map alike (DESIGN: tying by symmetry).
DEFAULT_LUMP = "symmetry"
LUMP_HELP = (
    "How far to lump the reduced ODEs (default: the file's solve.lump, else symmetry, "
    "which is exact for the ODE and the gradient-descent map)."
)


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


def setting(problem: gdln.Problem, name: str, given: Any, default: Any) -> Any:
    """The command line's value, else the file's ``solve: {name: ...}``, else ``default``.

    The one rule for every option that a graph file can preset (``init``, ``t_max``,
    ``lr``, ``lump``).
    """
    if given is not None:
        return given
    return problem.settings.get(name, default)


def initial_value(file: str, text: str | None) -> Any:
    """``--init`` of the theory commands: a number or an expression such as ``1/10``."""
    if text is None:
        return None
    try:
        return gdln.evaluate(text, {})
    except gdln.GdlnError as err:
        raise CommandLineError(
            f"{file}: --init {text!r}: {err}; expected a number such as 0.1"
        ) from err


def positive(option: str, value: Any) -> float:
    """``value`` as a float, refused unless finite and > 0."""
    number = float(value)
    if not 0 < number < float("inf"):
        raise CommandLineError(f"{option}: expected a finite number > 0, got {number!r}")
    return number


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


def refuse_existing(path: Path) -> None:
    """The one refusal of every command: ``PATH exists; pass --force to replace it``."""
    raise CommandLineError(f"{path} exists; pass --force to replace it")


def check_folder(out: Path) -> None:
    """The folder that will hold ``out`` must exist; ``out`` must not be a folder."""
    folder = out.parent
    if not folder.is_dir():
        raise CommandLineError(f"-o {out}: the folder {folder} does not exist")


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
    is an existing file without ``--force`` or a missing folder.
    """
    if out is None:
        return Output(None, fmt or default or formats[0])
    path = Path(out)
    by_extension = {EXTENSIONS[f]: f for f in formats}
    chosen = by_extension.get(path.suffix.lower())
    if chosen is None:
        endings = " or ".join(by_extension)
        raise CommandLineError(f"-o {out}: expected a file ending in {endings}")
    if fmt is not None and fmt != chosen:
        raise CommandLineError(
            f"--format {fmt} conflicts with -o {out}, a {chosen} file; drop --format or "
            f"change the extension to {EXTENSIONS[fmt]}"
        )
    check_folder(path)
    if path.is_dir():
        raise CommandLineError(f"-o {out}: is a folder; expected a file")
    if path.exists() and not force:
        refuse_existing(path)
    return Output(path, chosen, force)


def output_folder(out: str, force: bool) -> Path:
    """Check ``-o DIR`` of a command that writes several files into a folder.

    ``DIR`` may be missing (it is created) or empty; one that holds files is refused
    unless ``--force``, which replaces the files the command writes and keeps the others.
    """
    path = Path(out)
    check_folder(path)
    if path.exists() and not path.is_dir():
        raise CommandLineError(f"-o {out}: is a file; expected a folder")
    if path.is_dir() and any(path.iterdir()) and not force:
        refuse_existing(path)
    return path


def _file_mode() -> int:
    """The mode a new file gets from ``open``: 0o666 less the process's umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary path beside ``path`` (same extension) that becomes ``path`` on success.

    On an error the temporary file is removed and ``path`` is left as it was.
    """
    handle, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=path.suffix)
    os.close(handle)
    temporary = Path(name)
    temporary.chmod(_file_mode())  # mkstemp's 0o600 would make the output private
    try:
        yield temporary
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


@contextmanager
def atomic_folder(path: Path) -> Iterator[Path]:
    """A temporary folder beside ``path`` whose files are moved into ``path`` on success.

    Each file appears whole (:func:`os.replace` within one file system); on an error
    nothing in ``path`` changes and the temporary folder is removed.
    """
    temporary = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}."))
    try:
        yield temporary
        path.mkdir(exist_ok=True)
        for item in sorted(temporary.iterdir()):
            os.replace(item, path / item.name)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


def write(output: Output, text: str) -> None:
    """Print ``text``, or write it (atomically) to ``output.path`` and say so on stderr."""
    if output.path is None:
        click.echo(text)
        return
    with atomic_path(output.path) as temporary:
        temporary.write_text(text + "\n", encoding="utf-8")
    click.echo(f"wrote {output.path}", err=True)
