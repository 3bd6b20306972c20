"""Issue 38's speed goals in one side-by-side run: the README's compare, the Fig. 4e ODE,
a training step against JAX, and what the imports alone cost.

Rows (each alternates this tree with ``--before REF`` where given, so both see the same
load; the load average is printed at the start and the end):

* ``compare``: the README's ``gdln compare graphs/routing.yaml --param hidden=64 --lr
  0.05 --t-max 40 --b0 0.1`` in a fresh process: CPU seconds (user + system of the
  process and its children, the operating system's accounting) and wall seconds.
* ``imports``: CPU seconds of ``import X`` in a fresh process, less a bare interpreter's,
  for the libraries compare loads (torch in its simulation process, the rest in the main
  one): the floor under compare's CPU time.
* ``ode``: ``gdln.solve`` of Fig. 4e (routing M = 7, K = 4, hidden 64, b0 = 0.1,
  ``lump="symmetry"``, t = 40, 201 points) in a fresh process: median milliseconds of 40
  solves after one, and the largest distance of its loss from scipy's ``solve_ivp``
  DOP853 at rtol 1e-13 on the same right-hand side, as a fraction of L(0).
* ``setup``: one ``gdln.simulate`` call of one step at routing M = 100, K = 40, hidden
  64 (float32, one seed, one thread) in a fresh process, after a first call: the set-up
  every call redoes (the examples, their distinct states, the initial weights).
* ``recording`` (this tree only): one seed, 800 steps at Fig. 4e's routing with hidden
  width 64, 256 and ``--widths``, one thread: recording the ends only, the default 201
  records, and 201 records without singular values (``record_singular_values=False``).
* ``cores``: what two processes get from the machine's cores: the CPU time of a fixed
  Python loop alone, then two copies at once; the throughput of two against one
  (2.0 on two real cores, about 1.25 where the issue measured).
* ``step`` (this tree only; the training code is ``--before``'s too): ms per step at
  Fig. 4e (float64, 1 seed, 800 steps, one thread) of gdln, the plain network in JAX
  (``jit`` of ``lax.scan``) and gdln's distinct-states formulation in JAX
  (``bench_step.py``'s ``jax`` and ``jax-states`` rows; needs ``pip install -e
  ".[bench]"``).

    python benchmarks/bench_goals.py [--before REF] [--repeat 7] [--only compare,ode,...]
        [--widths 64,256]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMPARE = ["compare", "routing", "--param", "hidden=64", "--lr", "0.05", "--t-max", "40"]
COMPARE += ["--b0", "0.1", "--no-progress"]
LIBRARIES = ("torch", "sympy", "scipy.integrate", "matplotlib.pyplot", "networkx", "numpy")

ODE = """
import sys, time
import numpy as np
from scipy.integrate import solve_ivp
import gdln
problem = gdln.load("routing", params={"M": "7", "K": "4", "hidden": "64"})
reduction = gdln.reduce(problem, lump="symmetry", b0=0.1)
trajectory = gdln.solve(reduction, t_max=40.0)
times = []
for _ in range(40):
    start = time.perf_counter()
    trajectory = gdln.solve(reduction, t_max=40.0)
    times.append(time.perf_counter() - start)
flow = reduction.numeric_flow()
c = np.asarray(flow.constants, dtype=float)
tight = solve_ivp(lambda t, y: flow.rhs(y, c), (0.0, 40.0), flow.y0, method="DOP853",
                  t_eval=trajectory.t, rtol=1e-13, atol=1e-16)
loss = flow.record(tight.y.T[:, :, None], c[:, None]).loss[:, 0]
error = np.max(np.abs(trajectory.loss - loss)) / loss[0]
# the floor of this stepper: scipy's odeint on the bare scalar right-hand side, at the
# tolerances gdln steps one system with (rtol 1e-13, atol 1e-15), no checks around it
from scipy.integrate import odeint
values, size = c.tolist(), len(flow.y0)
def bare(y, t):
    out = [0.0] * size
    flow.scalar(y.tolist(), values, out)
    return out
floor = []
for _ in range(40):
    start = time.perf_counter()
    _, info = odeint(bare, flow.y0, trajectory.t, rtol=1e-13, atol=1e-15, full_output=True)
    floor.append(time.perf_counter() - start)
y = np.array(flow.y0)
start = time.perf_counter()
for _ in range(2000):
    bare(y, 0.0)
call = (time.perf_counter() - start) / 2000
print("@@", 1e3 * float(np.median(times)), float(error), 1e3 * float(np.median(floor)),
      int(info["nfe"][-1]), 1e6 * call)
"""


def _model() -> str:
    """The processor's model name (Linux), else ``""``."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return ""
    return next((s.split(":", 1)[1].strip() for s in lines if s.startswith("model name")), "")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _process(command: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, str]:
    """CPU and wall seconds of a fresh process (its children included), and its output."""
    cpu, start = _children_cpu(), time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd)
    wall, cpu = time.perf_counter() - start, _children_cpu() - cpu
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[:4])}... failed:\n{done.stderr[-2000:]}")
    return cpu, wall, done.stdout


def _tree(ref: str, into: Path) -> Path:
    """The files of git revision ``ref`` under ``into``."""
    archive = subprocess.run(["git", "archive", ref], cwd=ROOT, capture_output=True, check=True)
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    return into


def _cell(values: list[float], digits: str = ".2f") -> str:
    return f"{statistics.median(values):{digits}} [{min(values):{digits}}-{max(values):{digits}}]"


def compare_rows(trees: dict[str, Path], repeat: int, tmp: Path) -> None:
    cpu: dict[str, list[float]] = {name: [] for name in trees}
    wall: dict[str, list[float]] = {name: [] for name in trees}
    for r in range(repeat + 1):  # the first round warms the disk cache, not counted
        for name, tree in trees.items():
            env = dict(os.environ, PYTHONPATH=str(tree))
            argv = [sys.executable, "-m", "gdln", *COMPARE, "-o", str(tmp / f"{name}-{r}")]
            c, w, _ = _process(argv, env, tmp)
            if r:
                cpu[name].append(c)
                wall[name].append(w)
    print(f"\n## compare, whole process, median [min-max] of {repeat}")
    print(f"{'tree':<10} {'CPU s':>20} {'wall s':>20}")
    for name in trees:
        print(f"{name:<10} {_cell(cpu[name]):>20} {_cell(wall[name]):>20}")


def import_rows(repeat: int, tmp: Path) -> None:
    env = dict(os.environ)
    spent: dict[str, list[float]] = {name: [] for name in ("(bare)", *LIBRARIES)}
    for _ in range(repeat):
        for name in spent:
            code = "pass" if name == "(bare)" else f"import {name}"
            spent[name].append(_process([sys.executable, "-c", code], env, tmp)[0])
    bare = statistics.median(spent["(bare)"])
    print(
        f"\n## imports: CPU s in a fresh process less a bare one ({bare:.2f} s), median of {repeat}"
    )
    for name in LIBRARIES:
        print(f"{name:<20} {statistics.median(spent[name]) - bare:>6.2f}")


def ode_rows(trees: dict[str, Path], repeat: int, tmp: Path) -> None:
    ms: dict[str, list[float]] = {name: [] for name in trees}
    error: dict[str, float] = {}
    floor: list[float] = []
    for _ in range(repeat):
        for name, tree in trees.items():
            env = dict(os.environ, PYTHONPATH=str(tree))
            out = _process([sys.executable, "-c", ODE], env, tmp)[2]
            line = next(s for s in out.splitlines() if s.startswith("@@"))
            value, err, bare, calls, per_call = (float(x) for x in line.split()[1:])
            ms[name].append(value)
            error[name] = err
            if name == "now":
                floor.append(bare)
    print(f"\n## Fig. 4e reduced ODE, gdln.solve defaults; median [min-max] of {repeat} processes")
    print(f"{'tree':<10} {'ms per solve':>22} {'max |loss - tight| / L(0)':>27}")
    for name in trees:
        print(f"{name:<10} {_cell(ms[name]):>22} {error[name]:>27.2g}")
    print(
        f"# odeint alone on the bare right-hand side at rtol 1e-13: {_cell(floor)} ms, "
        f"{calls:.0f} calls; one call of the right-hand side {per_call:.2f} us"
    )


SETUP = """
import time, gdln
problem = gdln.load("routing", params={"M": "100", "K": "40", "hidden": "64"})
run = dict(steps=1, lr=0.05, seeds=1, threads=1, progress=False, dtype="float32")
gdln.simulate(problem, **run)
start = time.perf_counter()
gdln.simulate(problem, **run)
print("@@", time.perf_counter() - start)
"""

RECORDING = """
import sys, time, gdln
problem = gdln.load("routing", params={"M": "7", "K": "4", "hidden": sys.argv[1]})
run = dict(steps=800, lr=0.05, seeds=1, threads=1, progress=False)
ways = {"ends": {"record_steps": [0, 800]}, "201": {},
        "201, no sv": {"record_singular_values": False}}
gdln.simulate(problem, steps=2, seeds=1, threads=1, progress=False)
print("@@", end="")
for name, how in ways.items():
    start = time.process_time()
    gdln.simulate(problem, **run, **how)
    print("", time.process_time() - start, end="")
print()
"""


SPIN = "import time\nstart = time.perf_counter()\nsum(range(30_000_000))\nprint('@@', time.perf_counter() - start)"


def cores_rows(repeat: int, tmp: Path) -> None:
    alone, together = [], []
    for _ in range(repeat):
        alone.append(float(_process([sys.executable, "-c", SPIN], dict(os.environ), tmp)[2][3:]))
        pair = [subprocess.Popen([sys.executable, "-c", SPIN], stdout=subprocess.PIPE, text=True)
                for _ in range(2)]  # fmt: skip
        together.append(max(float(p.communicate()[0][3:]) for p in pair))
    ratio = 2 * statistics.median(alone) / statistics.median(together)
    print(f"\n## cores: one loop alone {_cell(alone)} s, two at once {_cell(together)} s "
          f"(the slower of the pair); two processes get {ratio:.2f}x the throughput of one")  # fmt: skip


def setup_rows(trees: dict[str, Path], repeat: int, tmp: Path) -> None:
    seconds: dict[str, list[float]] = {name: [] for name in trees}
    for _ in range(repeat):
        for name, tree in trees.items():
            env = dict(os.environ, PYTHONPATH=str(tree))
            out = _process([sys.executable, "-c", SETUP], env, tmp)[2]
            seconds[name].append(float(out.split("@@")[1]))
    print(
        f"\n## simulate, 1 step at M = 100, K = 40: s per later call, median [min-max] of {repeat}"
    )
    for name in trees:
        print(f"{name:<10} {_cell(seconds[name]):>22}")


def recording_rows(widths: list[str], tmp: Path) -> None:
    print(
        "\n## one seed, 800 steps (Fig. 4e's routing), CPU s: ends only | 201 records | 201, no sv"
    )
    for width in widths:
        out = _process([sys.executable, "-c", RECORDING, width], dict(os.environ), tmp)[2]
        ends, full, lean = (float(x) for x in out.split("@@")[1].split())
        print(f"hidden {width:>5}  {ends:8.2f} {full:8.2f} {lean:8.2f}   201 records: "
              f"{full / ends:.1f}x the ends-only run, {lean / ends:.2f}x without sv")  # fmt: skip


def step_rows(repeat: int) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    sys.argv = [sys.argv[0]]  # bench_step reads --device from the command line
    import bench_step
    import torch

    torch.set_num_threads(1)  # the loops on one thread, as bench_step.py's default
    bench_step.row("fig4e", device="cpu", repeat=repeat, quick=False, skip={"compiled"})
    # where gdln's step spends its time: torch's own profile of one 800-step run
    from torch.profiler import ProfilerActivity, profile

    import gdln

    problem = gdln.load("routing", params={"M": "7", "K": "4", "hidden": "64"})
    run = dict(steps=800, lr=0.05, seeds=1, dtype="float64", threads=1, progress=False)
    run |= {"record_steps": [0, 800]}
    gdln.simulate(problem, **run)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        gdln.simulate(problem, **run)
    events = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
    total = sum(e.self_cpu_time_total for e in events)
    print("# gdln's 800 steps under torch's profiler: operation, calls per step, us per call,")
    print(f"# share of the profiled CPU ({total / 1e3:.0f} ms, the profiler's own cost included)")
    for e in events[:6]:
        print(f"#   {e.key:<22} {e.count / 800:5.1f} {e.self_cpu_time_total / e.count:7.1f} "
              f"{e.self_cpu_time_total / total:6.1%}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default=None, help="a git revision to run beside")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--only", default="cores,compare,imports,ode,setup,recording,step")
    parser.add_argument("--widths", default="64,256", help="hidden widths of the recording row")
    args = parser.parse_args()
    rows = set(args.only.split(","))
    print(
        f"# {platform.machine()} {_model()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}; load average {os.getloadavg()[0]:.2f} at the start"
    )
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        trees = {"now": ROOT}
        if args.before:
            trees["before"] = _tree(args.before, tmp / "before")
        if "cores" in rows:
            cores_rows(args.repeat, tmp)
        if "compare" in rows:
            compare_rows(trees, args.repeat, tmp)
        if "imports" in rows:
            import_rows(args.repeat, tmp)
        if "ode" in rows:
            ode_rows(trees, args.repeat, tmp)
        if "setup" in rows:
            setup_rows(trees, args.repeat, tmp)
        if "recording" in rows:
            recording_rows(args.widths.split(","), tmp)
    if "step" in rows:
        step_rows(args.repeat)
    print(f"# load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
