"""The ``gdln simulate`` and ``gdln compare`` commands (registered by :mod:`gdln.cli`).

They parse arguments and call the package's functions; every problem surfaces as a
:class:`~gdln.GdlnError` (one line, exit status 2 under ``gdln``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

import gdln

from ..simulation import DTYPES, INITS, OPTIMIZERS, SimulationSpecError

__all__ = ["compare", "simulate"]

RANDOM_INITS = sorted(k for k in INITS if k != "given")
TIME_HELP = "time is in units of tau: t/tau = step * lr / (1 - momentum)"


def _problem(file: str, params: tuple[str, ...], task: str | None) -> gdln.Problem:
    return gdln.load(file, params=gdln.parse_params(list(params)), task=task)


def _setting(problem: gdln.Problem, name: str, given: Any, default: Any) -> Any:
    if given is not None:
        return given
    return problem.settings.get(name, default)


def _positive(option: str, value: Any) -> float:
    number = float(value)
    if not (number > 0 and number < float("inf")):
        raise SimulationSpecError(f"{option}: expected a finite number > 0, got {number!r}")
    return number


def parse_record_steps(text: str, steps: int) -> list[int]:
    """``--record-steps``: ``"log:N"`` (step 0 and N log-spaced steps in 1..steps) or ``"3,10,40"``."""
    text = text.strip()
    if text.startswith("log:"):
        try:
            count = int(text[4:])
        except ValueError:
            count = 0
        if count < 1:
            raise SimulationSpecError(
                f"--record-steps: expected 'log:N' with an int N >= 1, got {text!r}"
            )
        return gdln.simulation.log_spaced_steps(steps, count)
    try:
        chosen = [int(part) for part in text.split(",")]
    except ValueError:
        raise SimulationSpecError(
            f"--record-steps: expected 'log:N' or a comma list of step numbers, got {text!r}"
        ) from None
    bad = [k for k in chosen if not 0 <= k <= steps]
    if bad:
        raise SimulationSpecError(
            f"--record-steps: step {bad[0]} is outside 0..{steps} (the run's last step)"
        )
    return chosen


def _options(fn: Any) -> Any:
    """Options shared by both commands, applied bottom-up."""
    options = [
        click.option(
            "--progress/--no-progress", default=True, show_default=True, help="Show a progress bar."
        ),
        click.option("--force", is_flag=True, help="Replace existing output files."),
        click.option(
            "--threads", type=int, default=None, help="CPU threads for torch (default: torch's)."
        ),
        click.option(
            "--device",
            default="auto",
            show_default=True,
            help="auto (CUDA when present), cpu, cuda or cuda:K.",
        ),
        click.option(
            "--dtype", type=click.Choice(sorted(DTYPES)), default="float64", show_default=True
        ),
        click.option(
            "--seed",
            type=int,
            default=0,
            show_default=True,
            help="First seed; runs are reproducible under it.",
        ),
        click.option(
            "--seeds",
            type=int,
            default=10,
            show_default=True,
            help="Number of random-init repetitions, batched.",
        ),
        click.option(
            "--scale",
            type=float,
            default=0.2,
            show_default=True,
            help="sigma0 of the random initialisation.",
        ),
        click.option(
            "--t-max",
            type=float,
            default=None,
            help="Horizon in units of tau (default: the file's solve.t_max, else 10).",
        ),
        click.option(
            "--lr",
            type=float,
            default=None,
            help="Learning rate = Euler step in tau (default: the file's solve.lr, else 0.05).",
        ),
        click.option(
            "--task",
            type=click.Path(),
            default=None,
            help="A task file replacing the graph file's task.",
        ),
        click.option(
            "--param",
            "params",
            multiple=True,
            metavar="NAME=VALUE",
            help="Override a graph-file parameter (repeatable).",
        ),
        click.argument("file", type=click.Path()),
    ]
    for option in options:
        fn = option(fn)
    return fn


@click.command("simulate")
@_options
@click.option(
    "-o", "--out", required=True, type=click.Path(), help="Trajectory file, .npz or .json."
)
@click.option(
    "--init",
    "init",
    type=click.Choice([*RANDOM_INITS, "decoupled"]),
    default="xavier",
    show_default=True,
    help="xavier: sigma0 x Xavier normal; singular/orthogonal: every singular value sigma0; "
    "decoupled: Eq. (9) weights from the reduction, with b(0) = --b0 (one run; hidden "
    "bases drawn from --seed).",
)
@click.option(
    "--b0",
    type=float,
    default=None,
    help="b(0) for --init decoupled (default: the file's solve.init).",
)
@click.option("--optimizer", type=click.Choice(sorted(OPTIMIZERS)), default="gd", show_default=True)
@click.option("--batch-size", type=int, default=None, help="Minibatch size for --optimizer sgd.")
@click.option(
    "--momentum",
    type=float,
    default=0.0,
    show_default=True,
    help="Heavy-ball momentum mu; each step then advances t by lr/(1-mu) tau, and --t-max "
    "is reached in (1-mu) t_max/lr steps.",
)
@click.option(
    "--points",
    type=int,
    default=201,
    show_default=True,
    help="About how many evenly spaced times to record.",
)
@click.option(
    "--record-steps",
    default=None,
    metavar="log:N|K1,K2,...",
    help="Record at chosen steps instead of --points: 'log:N' for N log-spaced steps from "
    "1 to the last (plus step 0), or a comma list of step numbers.",
)
@click.option(
    "--eval-task",
    type=click.Path(),
    default=None,
    help="A task file whose examples are evaluated at each record (e.g. untrained routes).",
)
@click.option(
    "--rsm", is_flag=True, help="Record representational similarity matrices at hidden nodes."
)
@click.option(
    "--project",
    is_flag=True,
    help="Record each edge's weights projected on the reduction's mode vectors.",
)
def simulate(
    file: str,
    params: tuple[str, ...],
    task: str | None,
    lr: float | None,
    t_max: float | None,
    scale: float,
    seeds: int,
    seed: int,
    dtype: str,
    device: str,
    threads: int | None,
    force: bool,
    progress: bool,
    out: str,
    init: str,
    b0: float | None,
    optimizer: str,
    batch_size: int | None,
    momentum: float,
    points: int,
    record_steps: str | None,
    eval_task: str | None,
    rsm: bool,
    project: bool,
) -> None:
    """Train the full gated network of FILE by gradient descent and save its trajectory.

    One weight matrix per edge, gates per example, loss of Eq. (1), gradients by autograd;
    seeds run batched. Time is in units of tau: t/tau = lr * step, and with --momentum
    mu t/tau = step * lr / (1 - mu), the gradient-flow time heavy ball approximates.

    \b
    Example:
      gdln simulate graphs/routing.yaml --lr 0.05 --t-max 40 --seeds 10 -o routing.npz
    """
    path = Path(out)
    if path.suffix not in (".npz", ".json"):
        raise SimulationSpecError(f"--out: expected a .npz or .json file, got {out!r}")
    if path.exists() and not force:
        raise FileExistsError(f"{path} exists; pass --force to replace it")
    if points < 2:
        raise SimulationSpecError(f"--points: expected an int >= 2, got {points}")
    problem = _problem(file, params, task)
    rate = _positive("--lr", _setting(problem, "lr", lr, 0.05))
    horizon = _positive("--t-max", _setting(problem, "t_max", t_max, 10.0))
    if not 0 <= momentum < 1:
        raise SimulationSpecError(f"--momentum: expected a number in [0, 1), got {momentum!r}")
    steps = round(horizon * (1 - momentum) / rate)
    options: dict[str, Any] = {"steps": steps, "lr": rate, "seeds": seeds, "seed": seed}
    settings: dict[str, Any] = {
        "optimizer": optimizer,
        "batch_size": batch_size,
        "momentum": momentum,
        "dtype": dtype,
        "device": device,
        "rsm": rsm,
        "threads": threads,
        "progress": progress,
    }
    if record_steps is None:
        settings["record_every"] = max(1, steps // (points - 1))
    else:
        settings["record_steps"] = tuple(parse_record_steps(record_steps, steps))
    if eval_task is not None:
        options["eval_examples"] = gdln.load(
            file, params=gdln.parse_params(list(params)), task=eval_task
        ).examples()
    reduction = None
    if init == "decoupled" or project:
        start = float(_setting(problem, "init", b0, 0.001))
        reduction = gdln.reduce(problem, lump="none", init=start)
    if project:
        assert reduction is not None
        options["bases"] = reduction.decoupled_bases(seed=seed)
    if init == "decoupled":
        assert reduction is not None
        start = float(_setting(problem, "init", b0, 0.001))
        options |= {
            "init_scheme": "given",
            "weights": reduction.decoupled_weights(start, seed=seed),
        }
        options["seeds"] = [seed]
    else:
        options |= {"init_scheme": init, "init": scale}
    trajectory = gdln.simulate(
        problem.graph,
        problem.examples(),
        settings=gdln.SimulationSettings(**settings),
        **options,
    )
    trajectory.save(path, force=force)
    final = trajectory.loss[-1]
    click.echo(
        f"wrote {path}: {len(trajectory.t)} records to t = {trajectory.t[-1]:g} tau, "
        f"final loss {final.mean():.6g} (mean over {final.size} seed(s))",
        err=True,
    )


@click.command("compare")
@_options
@click.option("-o", "--out", required=True, type=click.Path(), help="Output directory.")
@click.option(
    "--init",
    "b0",
    default="auto",
    show_default=True,
    metavar="auto|file|B0",
    help="Where theory and decoupled run start. auto: b_e(0) read off the random runs' "
    "initial weights (their mode strengths, averaged over seeds), so theory and random "
    "init start alike for any --scale; file: the file's solve.init; a number: that b(0).",
)
@click.option("--random-init", type=click.Choice(RANDOM_INITS), default="xavier", show_default=True)
@click.option("--lump", type=click.Choice(gdln.LUMPINGS), default="none", show_default=True)
@click.option(
    "--points", type=int, default=101, show_default=True, help="Number of recorded times."
)
def compare(
    file: str,
    params: tuple[str, ...],
    task: str | None,
    lr: float | None,
    t_max: float | None,
    scale: float,
    seeds: int,
    seed: int,
    dtype: str,
    device: str,
    threads: int | None,
    force: bool,
    progress: bool,
    out: str,
    b0: str,
    random_init: str,
    lump: str,
    points: int,
) -> None:
    """Reduced theory (ODE and GD map) vs simulation (decoupled and random init).

    Writes loss.png/.svg, singular_values.png/.svg (Fig. 4e-f), the four trajectories
    and metrics.json into OUT. Time is in units of tau: t/tau = lr * step.

    By default (--init auto) the theory starts from the mode strengths of the random
    initial weights themselves, so the comparison holds at any --scale; --init 0.1 with
    --scale 0.2 is the setting of Fig. 4e.

    \b
    Example:
      gdln compare graphs/routing.yaml --param hidden=64 --lr 0.05 --t-max 40 -o cmp/
    """
    start: str | float = b0
    if b0 not in ("auto", "file"):
        try:
            start = float(b0)
        except ValueError:
            raise SimulationSpecError(
                f"--init: expected 'auto', 'file' or a number, got {b0!r}"
            ) from None
    problem = _problem(file, params, task)
    rate = _positive("--lr", _setting(problem, "lr", lr, 0.05))
    result = gdln.compare(
        problem,
        out,
        lr=rate,
        t_max=t_max,
        init_scheme=random_init,
        init=scale,
        theory_init=start,
        seeds=seeds,
        seed=seed,
        lump=lump,
        n_points=points,
        settings=gdln.SimulationSettings(
            dtype=dtype,
            device=None if device == "auto" else device,
            threads=threads,
            progress=progress,
        ),
        force=force,
    )
    m = result.metrics
    half = m["time_to_half_loss"]
    click.echo(
        f"wrote {out}: decoupled vs map {m['decoupled_vs_map']:.2e}, random vs ODE "
        f"{m['random_vs_ode']:.3g} (fraction of L(0)); time to half loss: ODE {half['ode']}, "
        f"random mean {half['random_mean']} tau",
        err=True,
    )
