"""The ``gdln`` command line. It parses arguments and calls the public API, nothing else."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any, ClassVar

import click

import gdln

PARAM_HELP = "Override a graph-file parameter, e.g. --param M=5 (repeatable)."


def _problem(file: str, params: tuple[str, ...], task: str | None) -> gdln.Problem:
    return gdln.load(file, params=gdln.parse_params(list(params)), task=task)


def _init(file: str, value: str | None) -> Any:
    if value is None:
        return None
    try:
        return gdln.evaluate(value, {})
    except gdln.GdlnError as err:
        raise gdln.GdlnError(
            f"{file}: --init {value!r}: {err}; expected a number such as 0.1"
        ) from err


def _write(text: str, out: str | None, force: bool) -> None:
    if out is None:
        click.echo(text)
        return
    path = Path(out)
    if path.exists() and not force:
        raise gdln.GdlnError(f"{path} exists; pass --force to replace it")
    path.write_text(text + "\n")
    click.echo(f"wrote {path}", err=True)


def common(fn: Any) -> Any:
    fn = click.option(
        "--task",
        "task",
        type=click.Path(),
        default=None,
        help="A task file replacing the graph file's task.",
    )(fn)
    fn = click.option("--param", "params", multiple=True, metavar="NAME=VALUE", help=PARAM_HELP)(fn)
    return click.argument("file", type=click.Path())(fn)


class _LazyGroup(click.Group):
    """A group whose torch-based commands are imported only when they are used or listed.

    ``gdln derive`` and ``gdln solve`` then start without paying torch's import time.
    """

    lazy: ClassVar[dict[str, str]] = {
        "simulate": "gdln.cli._simulate",
        "compare": "gdln.cli._simulate",
        "kernel": "gdln.cli._kernel",
        "sd": "gdln.cli._sd",
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.lazy])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy:
            command: click.Command = getattr(importlib.import_module(self.lazy[cmd_name]), cmd_name)
            return command
        return super().get_command(ctx, cmd_name)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(gdln.__version__, prog_name="gdln")
def cli() -> None:
    """Exact learning dynamics of gated deep linear networks, from graph files.

    \b
    Example:
      gdln derive graphs/routing.yaml --lump symmetry
    """


@cli.command()
@common
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
def paths(file: str, params: tuple[str, ...], task: str | None, fmt: str) -> None:
    """List input-output paths, |P(e)| per edge and |T(v)| per output.

    \b
    Example:
      gdln paths graphs/xor.yaml
    """
    click.echo(gdln.format_paths(_problem(file, params, task), fmt))


@cli.command()
@common
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "latex", "json"]),
    default="text",
    show_default=True,
)
def stats(file: str, params: tuple[str, ...], task: str | None, fmt: str) -> None:
    """Print the path statistics and the bases U, V that diagonalise them (Eqs 5-8).

    \b
    Example:
      gdln stats graphs/context.yaml --param pathways=1 --format latex
    """
    problem = _problem(file, params, task)
    click.echo(gdln.format_statistics(problem, gdln.reduce(problem), fmt))


@cli.command()
@common
@click.option(
    "--lump",
    type=click.Choice(gdln.LUMPINGS),
    default="none",
    show_default=True,
    help="How far to lump the reduced ODEs.",
)
@click.option(
    "--init", default=None, help="Initial value of every b_e (default: the file's solve.init)."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "latex", "json"]),
    default="text",
    show_default=True,
)
def derive(
    file: str, params: tuple[str, ...], task: str | None, lump: str, init: str | None, fmt: str
) -> None:
    """Derive the reduced singular-value ODEs (Eq 10), lumped and simplified.

    \b
    Example:
      gdln derive graphs/routing.yaml --lump full --param M=10
    """
    problem = _problem(file, params, task)
    click.echo(gdln.format_derivation(gdln.reduce(problem, lump=lump, init=_init(file, init)), fmt))


@cli.command()
@common
@click.option(
    "--lump",
    type=click.Choice(gdln.LUMPINGS),
    default=None,
    help="Lumping to solve (default: the file's, else full).",
)
@click.option(
    "--t-max",
    type=float,
    default=None,
    help="Final time in units of tau (default: the file's solve.t_max, else 10).",
)
@click.option("--init", default=None, help="Initial value of every b_e.")
@click.option(
    "--lr",
    type=float,
    default=None,
    help="Iterate the exact gradient-descent map with this learning rate instead of the ODE.",
)
@click.option(
    "--points", type=int, default=201, show_default=True, help="Number of recorded times."
)
@click.option(
    "--format", "fmt", type=click.Choice(["json", "csv"]), default="json", show_default=True
)
@click.option(
    "-o", "--out", default=None, type=click.Path(), help="Write here instead of to standard output."
)
@click.option("--force", is_flag=True, help="Replace an existing output file.")
@click.option(
    "--route",
    type=click.Choice(["auto", "symbolic", "moments"]),
    default="auto",
    show_default=True,
    help="symbolic: the reduced ODE of `derive`; moments: the same expected dynamics "
    "evaluated without listing paths (one variable per edge, no lumping); auto: symbolic "
    "unless the problem has too many paths.",
)
def solve(
    file: str,
    params: tuple[str, ...],
    task: str | None,
    lump: str | None,
    t_max: float | None,
    init: str | None,
    lr: float | None,
    points: int,
    fmt: str,
    out: str | None,
    force: bool,
    route: str,
) -> None:
    """Solve the reduced dynamics numerically; write t, loss and every variable.

    \b
    Example:
      gdln solve graphs/routing.yaml --t-max 30 -o routing.json
      gdln solve graphs/resnet_sd.yaml --param L=1000    # moment route
    """
    problem = _problem(file, params, task)
    lump = lump or problem.settings.get("lump", "full")
    t_end = t_max if t_max is not None else float(problem.settings.get("t_max", 10))
    model: gdln.Reduction | gdln.ExpectedDynamics
    if route == "moments":
        model = gdln.expected_dynamics(problem, init=_init(file, init))
    else:
        try:
            model = gdln.reduce(problem, lump=lump, init=_init(file, init))
        except gdln.TooManyPathsError:
            if route == "symbolic":
                raise
            model = gdln.expected_dynamics(problem, init=_init(file, init))
    trajectory = gdln.solve(model, t_max=t_end, lr=lr, n_points=points)
    _write(gdln.format_trajectory(trajectory, fmt), out, force)


def main(argv: list[str] | None = None) -> None:
    """Entry point: gdln errors become one line on stderr and exit code 2."""
    try:
        cli.main(args=argv, prog_name="gdln", standalone_mode=False)
    except click.exceptions.Exit as exit_:
        sys.exit(exit_.exit_code)
    except click.ClickException as err:
        err.show()
        sys.exit(2)
    except click.exceptions.Abort:
        sys.exit(1)
    except (gdln.GdlnError, FileExistsError) as err:
        click.echo(f"gdln: error: {err}", err=True)
        sys.exit(2)


if __name__ == "__main__":  # pragma: no cover
    main()
