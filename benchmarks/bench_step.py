"""A training step of gdln against the loops a researcher would write (issue 25, items 2, 4).

Rows, each measured side by side in one run (the implementations alternate within each
repeat, so that all see the same load):

* ``fig4e``: routing M = 7, K = 4, hidden 64 (Fig. 4e), 1 seed, float64, 800 steps
  (the horizon of the README's ``gdln compare``);
* ``m100``: routing M = 100, K = 40, hidden 64, 1 seed, float32, 20 steps.

Columns:

* ``gdln``: :func:`gdln.simulate` (full-batch GD on the examples' states, backward pass
  by hand), recording the first and the last step;
* ``hand``: the routing network as three dense gated matrices (inputs side by side,
  gates folded in), torch autograd and the same update, in eager torch;
* ``compiled``: the same step as one function (``torch.func.grad_and_value`` and the
  update), ``torch.compile``-d;
* ``jax``: the same loss, ``jax.value_and_grad``, ``jit`` of ``lax.scan`` over the steps
  (when jax is installed: ``pip install -e ".[bench]"``).

Per step: for gdln, the time of the training loop of a call (its set-up, the examples'
states and the initial weights, apart) over its evaluations; for the others, the row's
steps in a warm loop.
First call: the first run of the row's length in this process, set-up and compilation
included. All run on one CPU thread (``--threads``; jax through ``XLA_FLAGS``) unless
``--device cuda``. The float64 losses of the first steps of every implementation are
compared with gdln's.

    python benchmarks/bench_step.py [--rows fig4e,m100] [--repeat 5] [--quick]
    python benchmarks/bench_step.py --device cuda     # where a GPU is present
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if "--device" not in sys.argv or "cpu" in sys.argv:  # before jax is imported
    os.environ.setdefault(
        "XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    )

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_simulate import _dense_routing  # noqa: E402

import gdln  # noqa: E402
import gdln.simulation._simulate as simulate_module  # noqa: E402
from gdln import simulate  # noqa: E402

TRAIN = simulate_module.train
LOOP: list[float] = []  # the time of the last call's training loop


def _timed_train(*args, **kwargs):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    try:
        return TRAIN(*args, **kwargs)
    finally:
        LOOP.append(time.perf_counter() - start)


simulate_module.train = _timed_train

ROWS = {
    "fig4e": dict(params={"M": 7, "K": 4, "hidden": 64}, dtype="float64", steps=800),
    "m100": dict(params={"M": 100, "K": 40, "hidden": 64}, dtype="float32", steps=20),
}
LR = 0.05


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _seconds(fn) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


class Gdln:
    """gdln.simulate from the xavier start of seed 0 (the hand loops' start)."""

    def __init__(self, problem, dtype: str, device: str) -> None:  # type: ignore[no-untyped-def]
        self.problem, self.examples, self.device = problem, problem.examples(), device
        self.settings = dict(dtype=dtype, device=device, record_every=10**6, progress=False)
        self.threads = 0

    def run(self, steps: int) -> float:
        def call() -> None:
            run = simulate(
                self.problem.graph, self.examples, steps=steps, lr=LR, init_scale=0.2, seeds=1,
                **self.settings,
            )  # fmt: skip
            self.threads = run.meta["threads"]
            _sync(self.device)

        return _seconds(call)

    def losses(self, steps: int) -> np.ndarray:
        settings = dict(dtype="float64", device=self.device)
        run = simulate(
            self.problem.graph,
            self.examples,
            steps=steps,
            lr=LR,
            init_scale=0.2,
            seeds=1,
            **settings,
        )
        return run.loss[:, 0]


class Hand:
    """Three dense gated matmuls, autograd, W -= lr grad: eager torch."""

    def __init__(self, problem, dtype: str, device: str) -> None:  # type: ignore[no-untyped-def]
        self.problem, self.dtype, self.device = problem, dtype, device
        self.x, self.gate, self.y, self.w, self.W = _dense_routing(
            problem, getattr(torch, dtype), device
        )

    def loss(self, W):  # type: ignore[no-untyped-def]
        out = ((self.x @ W[0].mT) @ W[1].mT @ W[2].mT) * self.gate
        return ((0.5 * (self.y - out).square().sum(-1)) @ self.w).sum()

    def run(self, steps: int) -> float:
        def call() -> None:
            for _ in range(steps):
                grads = torch.autograd.grad(self.loss(self.W), self.W)
                with torch.no_grad():
                    for a, g in zip(self.W, grads, strict=True):
                        a.sub_(LR * g)
            _sync(self.device)

        return _seconds(call)

    def losses(self, steps: int) -> np.ndarray:
        fresh = Hand(self.problem, "float64", self.device)
        out = []
        for _ in range(steps + 1):
            loss = fresh.loss(fresh.W)
            out.append(float(loss.detach()))
            grads = torch.autograd.grad(loss, fresh.W)
            with torch.no_grad():
                for a, g in zip(fresh.W, grads, strict=True):
                    a.sub_(LR * g)
        return np.array(out)


class Compiled(Hand):
    """The same step as one function (gradient and update), torch.compile-d."""

    def __init__(self, problem, dtype: str, device: str) -> None:  # type: ignore[no-untyped-def]
        super().__init__(problem, dtype, device)
        self.state = tuple(a.detach() for a in self.W)

        def step(W):  # type: ignore[no-untyped-def]
            grads, loss = torch.func.grad_and_value(self.loss)(W)
            return tuple(a - LR * g for a, g in zip(W, grads, strict=True)), loss

        self.step = torch.compile(step)

    def run(self, steps: int) -> float:
        def call() -> None:
            for _ in range(steps):
                self.state, _ = self.step(self.state)
            _sync(self.device)

        return _seconds(call)


class Jax:
    """The same loss, jax.value_and_grad, jit of lax.scan over the steps."""

    def __init__(self, problem, dtype: str, device: str) -> None:  # type: ignore[no-untyped-def]
        import jax

        jax.config.update("jax_enable_x64", True)
        self.jax, self.problem = jax, problem
        self.arrays = self._arrays(dtype)
        self.compiled: dict[int, object] = {}

    def _arrays(self, dtype: str):  # type: ignore[no-untyped-def]
        x, gate, y, w, W = _dense_routing(self.problem, getattr(torch, dtype), "cpu")
        as_jax = self.jax.numpy.asarray
        return tuple(as_jax(a.detach().numpy()) for a in (x, gate, y, w)), tuple(
            as_jax(a.detach().numpy()) for a in W
        )

    def _runner(self, steps: int, data):  # type: ignore[no-untyped-def]
        jax = self.jax
        x, gate, y, w = data

        def loss(W):  # type: ignore[no-untyped-def]
            out = ((x @ W[0].T) @ W[1].T @ W[2].T) * gate
            return (0.5 * ((y - out) ** 2).sum(-1)) @ w

        def step(W, _):  # type: ignore[no-untyped-def]
            value, grads = jax.value_and_grad(loss)(W)
            return tuple(a - LR * g for a, g in zip(W, grads, strict=True)), value

        return jax.jit(lambda W: jax.lax.scan(step, W, None, length=steps))

    def run(self, steps: int) -> float:
        data, W = self.arrays
        if steps not in self.compiled:
            self.compiled[steps] = self._runner(steps, data)
        runner = self.compiled[steps]
        return _seconds(lambda: self.jax.block_until_ready(runner(W)))  # type: ignore[operator]

    def losses(self, steps: int) -> np.ndarray:
        data, W = self._arrays("float64")
        _, values = self._runner(steps + 1, data)(W)
        return np.asarray(values, dtype=np.float64)


class JaxStates(Jax):
    """gdln's formulation in JAX: the hidden layers on the examples' distinct input rows
    only (4 M rows on routing, not 4 K M), each example's output gathered from its row;
    ``jit`` of ``lax.scan`` as above."""

    def _arrays(self, dtype: str):  # type: ignore[no-untyped-def]
        (x, gate, y, w), W = super()._arrays(dtype)
        rows, index = np.unique(np.asarray(x), axis=0, return_inverse=True)
        as_jax = self.jax.numpy.asarray
        return (as_jax(rows), as_jax(index.ravel()), gate, y, w), W

    def _runner(self, steps: int, data):  # type: ignore[no-untyped-def]
        jax = self.jax
        rows, index, gate, y, w = data

        def loss(W):  # type: ignore[no-untyped-def]
            out = (((rows @ W[0].T) @ W[1].T) @ W[2].T)[index] * gate
            return (0.5 * ((y - out) ** 2).sum(-1)) @ w

        def step(W, _):  # type: ignore[no-untyped-def]
            value, grads = jax.value_and_grad(loss)(W)
            return tuple(a - LR * g for a, g in zip(W, grads, strict=True)), value

        return jax.jit(lambda W: jax.lax.scan(step, W, None, length=steps))


def _cell(values: list[float], scale: float = 1e3) -> str:
    v = np.asarray(values) * scale
    return f"{np.median(v):.3g} [{v.min():.3g}-{v.max():.3g}]"


def row(name: str, *, device: str, repeat: int, quick: bool, skip: set[str]) -> None:
    spec = ROWS[name]
    steps = max(2, spec["steps"] // (10 if quick else 1))
    problem = gdln.load(ROOT / "graphs" / "routing.yaml", params=spec["params"])
    dtype = spec["dtype"]
    print(f"\n## {name}: routing {spec['params']}, {dtype}, 1 seed, {steps} steps, {device}")
    makers = {
        "gdln": Gdln, "hand": Hand, "compiled": Compiled, "jax": Jax, "jax-states": JaxStates,
    }  # fmt: skip
    impls, first = {}, {}
    for label, make in makers.items():
        if label in skip:
            continue
        try:
            start = time.perf_counter()
            impl = make(problem, dtype, device)
            first[label] = time.perf_counter() - start + impl.run(steps)
            impls[label] = impl
        except Exception as error:  # e.g. jax not installed, no C++ compiler
            print(f"# {label}: skipped ({type(error).__name__}: {str(error)[:80]})")
    per_step: dict[str, list[float]] = {label: [] for label in impls}
    whole: dict[str, list[float]] = {label: [] for label in impls}
    cpu: dict[str, float] = dict.fromkeys(impls, 0.0)  # CPU seconds of the repeats
    for _ in range(repeat):
        for label, impl in impls.items():
            start = time.process_time()
            if label == "gdln":
                whole[label].append(impl.run(steps))
                per_step[label].append(LOOP[-1] / (steps + 1))
            else:
                t = impl.run(steps)
                per_step[label].append(t / steps)
                whole[label].append(t)
            cpu[label] += time.process_time() - start
    exact = impls["gdln"].losses(3) if "gdln" in impls else None
    print(f"{'':<10} {'ms per step':>24} {'first call s':>13} {'later calls s':>22} "
          f"{'gdln faster':>12} {'losses vs gdln':>15} {'CPU/wall':>9}")  # fmt: skip
    ours = np.median(per_step["gdln"]) if "gdln" in per_step else float("nan")
    for label in impls:
        agree = ""
        if label == "compiled":
            agree = "(as hand)"  # the same function; compiling it in float64 too is long
        elif exact is not None and label != "gdln":
            try:
                theirs = impls[label].losses(3)
                agree = f"{np.max(np.abs(theirs - exact) / np.abs(exact)):.1e}"
            except Exception as error:
                agree = type(error).__name__
        ratio = np.median(per_step[label]) / ours
        print(
            f"{label:<10} {_cell(per_step[label]):>24} {first[label]:>13.3g} "
            f"{_cell(whole[label], 1):>22} {ratio:>11.2f}x {agree:>15} "
            f"{cpu[label] / sum(whole[label]):>9.2f}"
        )
    if "compiled" in per_step and "hand" in per_step:
        saved = np.median(per_step["hand"]) - np.median(per_step["compiled"])
        cost = first["compiled"] - np.median(whole["compiled"])
        pays = f"after {cost / saved:.0f} steps" if saved > 0 else "never"
        print(f"# torch.compile: {cost:.1f} s to compile; pays for itself {pays}")
    if "gdln" in impls:
        print(f"# gdln ran on {impls['gdln'].threads} thread(s) (chosen by gdln)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="fig4e,m100")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the loops")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="a tenth of the steps")
    parser.add_argument("--skip", default="", help="implementations to leave out, e.g. compiled")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(
        f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, torch "
        f"{torch.__version__}, load average {os.getloadavg()[0]:.1f} at the start; "
        f"median [min-max] of {args.repeat}"
    )
    if args.device.startswith("cuda"):
        print(f"# GPU: {torch.cuda.get_device_name(0)}")
    for name in args.rows.split(","):
        row(name, device=args.device, repeat=args.repeat, quick=args.quick,
            skip=set(filter(None, args.skip.split(","))))  # fmt: skip
    print(f"# load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
