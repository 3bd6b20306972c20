"""Start-up cost: ``import gdln``, ``gdln --help`` and each ``gdln <command> --help``.

Each figure is the median wall time of fresh processes, with the heavy libraries each
start-up imported. With ``--baseline DIR`` (a checkout of an older gdln, e.g. made with
``git worktree add --detach /tmp/gdln-old <commit>``) the same commands run against that
tree in the same sitting, side by side.

    python benchmarks/bench_startup.py [--repeat 7] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HEAVY = ("torch", "sympy", "scipy", "networkx", "numpy", "matplotlib")
COMMANDS = ("paths", "stats", "derive", "solve", "simulate", "compare", "kernel", "sd")

PROBE = """
import sys, time
t0 = time.perf_counter()
{body}
dt = time.perf_counter() - t0
heavy = [m for m in {heavy!r} if m in sys.modules]
sys.__stdout__.write(f"\\n@@ {{dt:.6f}} {{','.join(heavy)}}\\n")
"""


def _help(argv: list[str]) -> str:
    return f"import gdln.cli\ntry:\n    gdln.cli.main({argv!r})\nexcept SystemExit:\n    pass"


def _cases() -> list[tuple[str, str]]:
    cases = [("import gdln", "import gdln"), ("gdln --help", _help(["--help"]))]
    cases += [(f"gdln {c} --help", _help([c, "--help"])) for c in COMMANDS]
    return cases


def _measure(tree: Path, body: str, repeat: int) -> tuple[float, float, str]:
    """Median in-process time, median whole-process wall time, heavy modules imported."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    inner, outer, heavy = [], [], ""
    for _ in range(repeat):
        start = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-c", PROBE.format(body=body, heavy=HEAVY)],
            capture_output=True,
            text=True,
            env=env,
            cwd=tree,
        )
        outer.append(time.perf_counter() - start)
        line = [s for s in out.stdout.splitlines() if s.startswith("@@ ")]
        if not line:
            return float("nan"), float("nan"), f"failed: {out.stderr.strip()[-80:]}"
        seconds, _, heavy = line[-1][3:].partition(" ")
        inner.append(float(seconds))
    return statistics.median(inner), statistics.median(outer), heavy or "-"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--baseline", type=Path, default=None, help="an older gdln checkout")
    args = parser.parse_args(argv)
    here = Path(__file__).resolve().parents[1]
    trees = [("now", here)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
    print(f"load average {os.getloadavg()[0]:.1f}; median of {args.repeat} fresh processes")
    print(
        f"{'':<22}"
        + "".join(f"{name + ' s':>12}{'process s':>11}  {'imports':<28}" for name, _ in trees)
    )
    for label, body in _cases():
        row = f"{label:<22}"
        for _, tree in trees:
            inner, outer, heavy = _measure(tree, body, args.repeat)
            row += f"{inner:>12.3f}{outer:>11.3f}  {heavy:<28}"
        print(row)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
