"""``gdln simulate`` and ``gdln compare``: the full network in torch, and theory against it.

Both parse their options and call :func:`gdln.simulate` or :func:`gdln.compare`; torch is
imported only when a command runs, never for ``--help`` (the choices come from the light
tables :data:`gdln.simulation.INITS`, ``OPTIMIZERS`` and ``DTYPES``).
"""

from __future__ import annotations

from typing import Any

import click

import gdln

from ._common import (
    DEFAULT_LUMP,
    LUMP_HELP,
    CommandLineError,
    graph_arguments,
    load_problem,
    output_file,
    output_folder,
    positive,
    refusals,
    setting,
)

__all__ = ["compare", "parse_record_steps", "simulate"]

#: The random initialisations (every scheme of gdln.simulation.INITS but explicit weights).
RANDOM_SCHEMES = [name for name in gdln.simulation.INITS if name != "given"]
DEFAULT_LR = 0.05
DEFAULT_T_MAX = 10.0
DEFAULT_SIGMA0 = 0.2
DEFAULT_B0 = 0.001


def parse_record_steps(text: str, steps: int) -> tuple[int, ...]:
    """``--record-steps``: ``"log:N"`` (step 0 and N log-spaced steps in 1..steps) or ``"3,10,40"``."""
    text = text.strip()
    if text.startswith("log:"):
        try:
            count = int(text[4:])
        except ValueError:
            count = 0
        if count < 1:
            raise CommandLineError(
                f"--record-steps: expected 'log:N' with an int N >= 1, got {text!r}"
            )
        most = gdln.graphfile.Limits.from_environment().points
        if count > most:
            raise CommandLineError(
                f"--record-steps {text}: {count} records exceeds the limit points={most} "
                "(raise it: GDLN_MAX_POINTS=N)"
            )
        return tuple(gdln.simulation.log_spaced_steps(steps, count))
    try:
        chosen = [int(part) for part in text.split(",")]
    except ValueError:
        raise CommandLineError(
            f"--record-steps: expected 'log:N' or a comma list of step numbers, got {text!r}"
        ) from None
    bad = [k for k in chosen if not 0 <= k <= steps]
    if bad:
        raise CommandLineError(
            f"--record-steps: step {bad[0]} is outside 0..{steps} (the run's last step)"
        )
    return tuple(chosen)


def run_options(fn: Any) -> Any:
    """Options shared by both commands, applied bottom-up."""
    options = [
        click.option(
            "--progress/--no-progress", default=True, show_default=True, help="Show a progress bar."
        ),
        click.option(
            "--threads",
            type=int,
            default=None,
            help="CPU threads for torch (default: chosen from the work per step; 1 for "
            "small networks and on a busy machine).",
        ),
        click.option(
            "--device",
            default="auto",
            show_default=True,
            help="auto (CUDA when present), cpu, cuda or cuda:K.",
        ),
        click.option(
            "--dtype",
            type=click.Choice(list(gdln.simulation.DTYPES)),
            default="float64",
            show_default=True,
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
        graph_arguments,
    ]
    for option in options:
        fn = option(fn)
    return fn


def _device(device: str) -> str | None:
    return None if device == "auto" else device


@click.command("simulate")
@run_options
@click.option(
    "-o", "--out", required=True, type=click.Path(), help="Trajectory file, .npz or .json."
)
@click.option("--force", is_flag=True, help="Replace an existing output file.")
@click.option(
    "--init-scheme",
    type=click.Choice([*RANDOM_SCHEMES, "decoupled"]),
    default="xavier",
    show_default=True,
    help="xavier: sigma0 x Xavier normal; singular: every singular value sigma0; "
    "orthogonal: gain sigma0 x a random (semi-)orthogonal matrix (torch's orthogonal_); "
    "decoupled: the weights of Eq. (9) from the reduction, with b(0) = --init (one run; "
    "hidden bases drawn from --seed).",
)
@click.option(
    "--init",
    type=float,
    default=None,
    help="The initial scale: sigma0 of a random scheme (default 0.2), or b(0) of the "
    "decoupled scheme (default: the file's solve.init, else 0.001).",
)
@click.option(
    "--optimizer",
    type=click.Choice(list(gdln.simulation.OPTIMIZERS)),
    default="gd",
    show_default=True,
)
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
    seeds: int,
    seed: int,
    dtype: str,
    device: str,
    threads: int | None,
    progress: bool,
    out: str,
    force: bool,
    init_scheme: str,
    init: float | None,
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
      gdln simulate graphs/routing.yaml --init-scheme decoupled --init 0.1 --project -o dec.json
    """
    output = output_file(out, None, force, formats=("npz", "json"))
    if points < 2:
        raise CommandLineError(f"--points: expected an int >= 2, got {points}")
    if not 0 <= momentum < 1:
        raise CommandLineError(f"--momentum: expected a number in [0, 1), got {momentum!r}")
    problem = load_problem(file, params, task)
    rate = positive("--lr", setting(problem, "lr", lr, DEFAULT_LR))
    horizon = positive("--t-max", setting(problem, "t_max", t_max, DEFAULT_T_MAX))
    steps = gdln.simulation.horizon_steps(horizon, lr=rate, momentum=momentum)
    settings = gdln.SimulationSettings(
        optimizer=optimizer,
        batch_size=batch_size,
        momentum=momentum,
        dtype=dtype,
        device=_device(device),
        threads=threads,
        record_every=1 if record_steps else max(1, steps // (points - 1)),
        record_steps=parse_record_steps(record_steps, steps) if record_steps else None,
        rsm=rsm,
        progress=progress,
    )
    reduction = None
    if init_scheme == "decoupled" or project:
        b0 = float(setting(problem, "init", init, DEFAULT_B0))
        reduction = gdln.reduce(problem, lump="none", init=b0)
    start = _start(init_scheme, init, reduction, seeds=seeds, seed=seed)
    if project:
        assert reduction is not None
        start["bases"] = reduction.decoupled_bases(seed=seed)
    if eval_task is not None:
        start["eval_examples"] = load_problem(file, params, task, task_file=eval_task).examples()
    trajectory = gdln.simulate(
        problem.graph, problem.examples(), steps=steps, lr=rate, settings=settings, **start
    )
    assert output.path is not None
    with refusals():
        trajectory.save(output.path, force=output.force)  # whole or not at all
    final = trajectory.loss[-1]
    click.echo(
        f"wrote {output.path}: {len(trajectory.t)} records to t = {trajectory.t[-1]:g} tau, "
        f"final loss {final.mean():.6g} (mean over {final.size} seed(s))",
        err=True,
    )


def _start(
    scheme: str, init: float | None, reduction: Any, *, seeds: int, seed: int
) -> dict[str, Any]:
    """The initialisation keywords of :func:`gdln.simulate` for ``--init-scheme``.

    ``decoupled``: the weights of Eq. (9) of Saxe et al. 2022 at the reduction's b(0),
    one run whose hidden bases are drawn from ``seed``.
    """
    if scheme != "decoupled":
        sigma0 = positive("--init", DEFAULT_SIGMA0 if init is None else init)
        return {"init_scheme": scheme, "init": sigma0, "seeds": seeds, "seed": seed}
    return {
        "init_scheme": "given",
        "weights": reduction.decoupled_weights(seed=seed),
        "seeds": 1,
        "seed": seed,
    }


def _theory_start(text: str) -> str | float:
    """``--theory-init``: ``auto``, ``file`` or a number."""
    if text in ("auto", "file"):
        return text
    try:
        return float(text)
    except ValueError:
        raise CommandLineError(
            f"--theory-init: expected 'auto', 'file' or a number, got {text!r}"
        ) from None


@click.command("compare")
@run_options
@click.option("-o", "--out", required=True, type=click.Path(), help="Output folder.")
@click.option("--force", is_flag=True, help="Replace the files of an existing output folder.")
@click.option(
    "--init-scheme",
    type=click.Choice(RANDOM_SCHEMES),
    default="xavier",
    show_default=True,
    help="The random runs' initialisation.",
)
@click.option(
    "--init",
    type=float,
    default=DEFAULT_SIGMA0,
    show_default=True,
    help="The initial scale sigma0 of the random runs.",
)
@click.option(
    "--theory-init",
    default="auto",
    show_default=True,
    metavar="auto|file|VALUE",
    help="Where theory and decoupled run start. auto: b_e(0) read off the random runs' "
    "initial weights (their mode strengths, averaged over seeds), so theory and random "
    "init start alike for any --init; file: the file's solve.init; a number: that b(0).",
)
@click.option(
    "--lump",
    type=click.Choice(gdln.LUMPINGS),
    default=None,
    help=LUMP_HELP,
)
@click.option(
    "--points", type=int, default=201, show_default=True, help="Number of recorded times."
)
def compare(
    file: str,
    params: tuple[str, ...],
    task: str | None,
    lr: float | None,
    t_max: float | None,
    seeds: int,
    seed: int,
    dtype: str,
    device: str,
    threads: int | None,
    progress: bool,
    out: str,
    force: bool,
    init_scheme: str,
    init: float,
    theory_init: str,
    lump: str | None,
    points: int,
) -> None:
    """Reduced theory (ODE and GD map) vs simulation (decoupled and random init).

    Writes loss.png/.svg, singular_values.png/.svg (Fig. 4e-f), the four trajectories
    and metrics.json into OUT. Time is in units of tau: t/tau = lr * step.

    By default (--theory-init auto) the theory starts from the mode strengths of the
    random initial weights themselves, so the comparison holds at any --init;
    --theory-init 0.1 with --init 0.2 is the setting of Fig. 4e.

    \b
    Example:
      gdln compare graphs/routing.yaml --param hidden=64 --lr 0.05 --t-max 40 -o cmp/
    """
    folder = output_folder(out, force)
    start = _theory_start(theory_init)
    problem = load_problem(file, params, task)
    with refusals():  # gdln.compare writes the folder whole or not at all
        result = gdln.compare(
            problem,
            folder,
            lr=positive("--lr", setting(problem, "lr", lr, DEFAULT_LR)),
            t_max=positive("--t-max", setting(problem, "t_max", t_max, DEFAULT_T_MAX)),
            init_scheme=init_scheme,
            init=positive("--init", init),
            theory_init=start,
            seeds=seeds,
            seed=seed,
            lump=setting(problem, "lump", lump, DEFAULT_LUMP),
            n_points=points,
            settings=gdln.SimulationSettings(
                dtype=dtype, device=_device(device), threads=threads, progress=progress
            ),
            force=force,
        )
    click.echo(f"wrote {folder}\n{_compare_summary(result.metrics)}", err=True)


def _compare_summary(m: Any) -> str:
    """The metrics of ``compare`` in three lines; every seed counted, censored as > t_max."""
    half, t_max = m["time_to_half_loss"], m["t_max"]
    gaps = gdln.comparison.summarize_seeds(m["random_vs_ode_per_seed"])
    times = gdln.comparison.summarize_seeds(half["random_per_seed"], t_max=t_max)

    def time(value: float | None) -> str:
        return f"> {t_max:g}" if value is None else f"{value:.3g}"

    return (
        f"  max loss gap, fraction of L(0): decoupled vs GD map {m['decoupled_vs_map']:.1e}, "
        f"random vs ODE {gaps.text()}\n"
        f"  time to half loss (tau): ODE {time(half['ode'])}, GD map {time(half['gd_map'])}, "
        f"decoupled {time(half['decoupled'])}\n"
        f"  time to half loss (tau), random: {times.text()}"
    )
