"""Wall time of the commands whose times the docs quote: examples in ``--quick`` mode, a CLI run.

Each command runs ``--repeat`` times as a fresh process (start-up and imports included, as a
user sees it), one after the other; the table gives the median and the range of the wall
times, and the 1-minute load average before and after each command's runs, since on a
shared machine the load sets the time. Quoted by ``docs/gallery_repro1.md``,
``docs/gallery_repro2.md`` and ``docs/stochastic_depth.md``.

    python benchmarks/bench_examples.py [--repeat 5] [--only xor,routing]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: name -> argv after the Python executable; ``{out}`` is a fresh folder per run
COMMANDS: dict[str, list[str]] = {
    name: [f"examples/core/{name}.py", "--quick", "-o", "{out}"]
    for name in ("xor", "context", "routing", "race", "init_scale", "naturalistic")
}
COMMANDS["gdln solve resnet_sd L=1000"] = [
    "-m",
    "gdln.cli",
    "solve",
    "graphs/resnet_sd.yaml",
    "--param",
    "L=1000",
]


def _run(argv: list[str]) -> float:
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, *(a.replace("{out}", out) for a in argv)]
        env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
        start = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True)
        return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    ap.add_argument("--repeat", type=int, default=5, help="runs per command")
    ap.add_argument("--only", default="", help="comma-separated names to run")
    args = ap.parse_args(argv)
    names = [n for n in COMMANDS if not args.only or n in args.only.split(",")]
    print(
        f"# {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"{args.repeat} runs each, wall time of a fresh process"
    )
    print("| command | median [s] | range [s] | load average before → after |")
    print("|---|---|---|---|")
    for name in names:
        before = os.getloadavg()[0]
        times = [_run(COMMANDS[name]) for _ in range(args.repeat)]
        after = os.getloadavg()[0]
        shown = " ".join(COMMANDS[name]).replace(" -o {out}", "")
        print(
            f"| `python {shown}` | {statistics.median(times):.1f} | "
            f"{min(times):.1f}–{max(times):.1f} | {before:.1f} → {after:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
