"""Wall time of the README's ``gdln compare`` command, and where it goes (issue 25, item 3).

    gdln compare graphs/routing.yaml --param hidden=64 --lr 0.05 --t-max 40 \\
        --b0 0.1 -o OUT

Each repeat runs the command in a fresh process with default settings (threads chosen by
gdln) and takes its wall time; the load average is printed at the start and the end.
``--parts`` then runs it once more with timers around each stage of the main process
(the imports are what is left; the simulations run in a second process, started before
the file is read, and then only the wait for them is counted). ``--load N`` starts N busy-loop processes for the whole run
(``--load cores`` one per core), so that the figures under load come from the same run
as those without (``--load 0,cores`` runs both, alternating repeats). ``--in-process`` also runs each
repeat with torch imported before the command starts, so that ``compare`` makes its
simulations in its own process instead of a worker (what it does when torch is loaded).

    python benchmarks/bench_compare.py [--repeat 7] [--parts] [--load 0,cores]
        [--in-process] [--extra ...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMAND = [
    "compare",
    str(ROOT / "graphs" / "routing.yaml"),
    "--param",
    "hidden=64",
    "--lr",
    "0.05",
    "--t-max",
    "40",
    "--b0",
    "0.1",
    "--no-progress",
]

PARTS = r"""
import sys, time, json
start = time.perf_counter()
sys.path.insert(0, {root!r})
import gdln.comparison._compare as cmp
import gdln.comparison._schedule as schedule
import gdln._runtime._jobs as jobs
spent = {{}}
def timed(module, name, label):
    inner = getattr(module, name)
    def wrapper(*args, **kwargs):
        t = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[label] = spent.get(label, 0.0) + time.perf_counter() - t
    setattr(module, name, wrapper)
import gdln.cli._common as common
timed(common, "load_problem", "load the problem")
import gdln.solution
def lazy(name, label):  # imported on first use, as compare does
    def first(*args, **kwargs):
        from gdln.solution import _dynamics
        return getattr(_dynamics, name)(*args, **kwargs)
    setattr(gdln.solution, name, first)
    timed(gdln.solution, name, label)
lazy("dynamics_by_route", "derive (dynamics_by_route; scipy imported)")
lazy("solve", "ODE and GD map")
timed(schedule, "whole_reduction", "the whole network's bases (Eq. 9)")
timed(schedule, "predicted_stages", "stage times (timescales)")
timed(schedule, "prepare_drawing", "import matplotlib, warm its text")
timed(jobs.Jobs, "results", "simulations (wait for them)")
timed(cmp, "_write", "figures side by side, files")
import gdln.cli
try:
    gdln.cli.main({argv!r})
except SystemExit:
    pass
total = time.perf_counter() - start
spent["simulations (wait for them)"] -= spent.get("import matplotlib, warm its text", 0.0)
spent["imports and the rest"] = total - sum(spent.values())
spent["total (in process)"] = total
print("@@" + json.dumps(spent))
"""


def _busy(count: int) -> list[subprocess.Popen]:
    """``count`` processes that spin on a core each until killed."""
    loop = "while True:\n    pass\n"
    return [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(count)]


def _run(argv: list[str], env: dict[str, str], *, here: bool = False) -> float:
    """Wall time of ``gdln ARGV`` in a fresh process; ``here``: with torch imported first,
    so that compare simulates in its own process (no worker)."""
    if here:
        code = f"import torch, gdln.cli\ngdln.cli.main({argv!r})"
        command = [sys.executable, "-c", code]
    else:
        command = [sys.executable, "-m", "gdln", *argv]
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, env=env, cwd=ROOT)
    return time.perf_counter() - start


def _cell(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} [{min(values):.2f}-{max(values):.2f}]"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--parts", action="store_true", help="time each stage once")
    parser.add_argument("--load", default="0", help="busy processes: N, 'cores', or a list")
    parser.add_argument(
        "--in-process", action="store_true", help="also: torch imported first (no worker)"
    )
    parser.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="more options")
    args = parser.parse_args(argv)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    loads = [cores if x == "cores" else int(x) for x in args.load.split(",")]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    print(f"# {cores} cores, load average {os.getloadavg()[0]:.1f} at the start")
    print(f"# gdln {' '.join([*COMMAND[:1], 'graphs/routing.yaml', *COMMAND[2:], *args.extra])}")
    ways = [False, True] if args.in_process else [False]
    walls: dict[tuple[int, bool], list[float]] = {(n, w): [] for n in loads for w in ways}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeat):
            for n in loads:
                busy = _busy(n)
                try:
                    time.sleep(0.2 if n else 0)  # let the busy loops start
                    for here in ways:
                        out = Path(tmp) / f"out-{n}-{r}-{here}"
                        argv = [*COMMAND, *args.extra, "-o", str(out)]
                        walls[(n, here)].append(_run(argv, env, here=here))
                finally:
                    for p in busy:
                        p.kill()
                        p.wait()
        print(
            f"{'busy processes':<16} {'simulations':<24} "
            f"{'wall s, median [min-max] of ' + str(args.repeat):<34}"
        )
        for (n, here), values in walls.items():
            where = "here (torch first)" if here else "worker process"
            print(f"{n:<16} {where:<24} {_cell(values):<34}")
        if args.parts:
            out = Path(tmp) / "parts"
            code = PARTS.format(root=str(ROOT), argv=[*COMMAND, *args.extra, "-o", str(out)])
            result = subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT
            )
            line = [s for s in result.stdout.splitlines() if s.startswith("@@")]
            if not line:
                print(result.stderr[-2000:])
                raise SystemExit(1)
            import json

            print(f"\n{'stage (one run, no busy processes)':<40} {'s':>6}")
            for label, seconds in json.loads(line[0][2:]).items():
                print(f"{label:<40} {seconds:>6.2f}")
    print(f"# load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
