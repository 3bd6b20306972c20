"""Simulations in a second process (``gdln/_runtime/_worker.py``) and ``compare``'s use of it.

The references are the same runs made in this process: a trajectory from the worker must
equal it exactly (the same code on the same thread count), an error must arrive with its
type and fields, and ``gdln compare`` in a fresh process must not import torch itself.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import gdln
from gdln._runtime import _jobs as process_module
from gdln._runtime._worker import Worker
from gdln.comparison._schedule import SIMULATE
from gdln.simulation import SimulationDivergedError, simulate


def SimulationWorker() -> Worker:
    return Worker(SIMULATE, what="simulation")


ROOT = Path(__file__).resolve().parents[1]
ROUTING = str(ROOT / "graphs" / "routing.yaml")
SMALL = {"M": 3, "K": 2, "hidden": 5}


def test_a_divergence_keeps_its_fields_through_pickling() -> None:
    error = SimulationDivergedError("diverged at step 3", step=3, value=float("inf"), seed=7)
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is SimulationDivergedError and str(back) == str(error)
    assert (back.step, back.value, back.seed) == (3, float("inf"), 7)


def test_the_worker_returns_what_simulate_returns_here() -> None:
    problem = gdln.load(ROUTING, params=SMALL)
    job = dict(
        source=problem.graph,
        examples=problem.examples(),
        steps=30,
        lr=0.05,
        seeds=2,
        record_every=10,
        threads=1,
    )
    here = simulate(**job)
    with SimulationWorker() as worker:
        first = worker.submit(**job)
        second = worker.submit(**{**job, "lr": 1e6, "threads": 1})
        there = worker.result(first)
        with pytest.raises(SimulationDivergedError, match=r"diverged at step \d+") as info:
            worker.result(second)
    np.testing.assert_array_equal(there.loss, here.loss)
    assert there.series.keys() == here.series.keys()
    for name, values in here.series.items():
        np.testing.assert_array_equal(there.series[name], values)
    assert there.meta == here.meta
    assert info.value.seed in (0, 1) and info.value.step >= 0


def test_a_worker_that_dies_is_reported() -> None:
    with SimulationWorker() as worker:
        worker.process.kill()
        with pytest.raises(gdln.GdlnError, match="simulation process ended without a result"):
            worker.result(0)


def test_compare_through_the_worker_equals_compare_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    problem = gdln.load(ROUTING, params=SMALL)
    kw = dict(lr=0.05, t_max=1.0, seeds=2, points=5, threads=1)
    monkeypatch.setattr(process_module, "use_worker", lambda heavy: False)
    here = gdln.compare(problem, tmp_path / "here", **kw)
    monkeypatch.setattr(process_module, "use_worker", lambda heavy: True)
    there = gdln.compare(problem, tmp_path / "there", **kw)
    for a, b in ((here.random, there.random), (here.decoupled, there.decoupled)):
        np.testing.assert_array_equal(a.loss, b.loss)
        for name, values in a.series.items():
            np.testing.assert_array_equal(b.series[name], values)
    assert json.dumps(here.metrics, sort_keys=True, default=str) == json.dumps(
        there.metrics, sort_keys=True, default=str
    )


@pytest.mark.slow  # a fresh interpreter and its worker: 5-8 s on a busy machine
def test_the_compare_command_leaves_torch_to_the_worker(tmp_path: Path) -> None:
    """In a fresh process, ``gdln compare`` gets its simulations from the worker."""
    out = tmp_path / "cmp"
    code = (
        "import sys, gdln.cli\n"
        "try:\n"
        f"    gdln.cli.main(['compare', {ROUTING!r}, '--param', 'M=3', '--param', 'K=2',"
        f" '--param', 'hidden=5', '--t-max', '1', '--seeds', '2', '--no-progress',"
        f" '-o', {str(out)!r}])\n"
        "except SystemExit as stop:\n"
        "    assert not stop.code, stop.code\n"
        "print('torch' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "False"
    assert (out / "sim_random.npz").exists() and (out / "loss.png").exists()


def test_start_simulations_hands_its_process_to_the_next_compare(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process started ahead is the one compare simulates in (no second is started),
    and the next compare in the block, finding none, starts its own."""
    from gdln._runtime import _worker as worker_module

    monkeypatch.setattr(worker_module, "worthwhile", lambda heavy="torch": True)
    started = []
    real_init = Worker.__init__

    def counting_init(self: Worker, *args: object, **kwargs: object) -> None:
        real_init(self, *args, **kwargs)  # type: ignore[arg-type]
        started.append(self.process.pid)

    monkeypatch.setattr(Worker, "__init__", counting_init)
    problem = gdln.load(ROUTING, params=SMALL)
    kw = dict(lr=0.05, t_max=1.0, seeds=2, points=5, threads=1)
    with gdln.comparison.start_simulations():
        assert len(started) == 1
        ahead = worker_module._STANDBY[0]
        first = gdln.compare(problem, tmp_path / "a", **kw)
        assert len(started) == 1 and ahead.process.poll() is not None  # used, then ended
        gdln.compare(problem, tmp_path / "b", **kw)
        assert len(started) == 2
    here = simulate(problem, steps=20, lr=0.05, seeds=2, threads=1)
    np.testing.assert_array_equal(first.random.loss[-1], here.loss[-1])


def test_a_process_started_ahead_and_not_used_is_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    from gdln._runtime import _worker as worker_module

    monkeypatch.setattr(worker_module, "worthwhile", lambda heavy="torch": True)
    with pytest.raises(gdln.GdlnError, match="no such file"), gdln.comparison.start_simulations():
        ahead = worker_module._STANDBY[0]
        gdln.load(ROOT / "graphs" / "no_such_graph.yaml")
    assert ahead.process.poll() is not None and not worker_module._STANDBY


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc")
def test_the_compare_command_leaves_no_process_behind_on_bad_input(tmp_path: Path) -> None:
    """``gdln compare`` starts its simulation process before reading the file; a file it
    refuses (exit 2) ends that process too: none is left with the run's marker."""
    marker = f"GDLN_TEST_MARKER_{tmp_path.name}"
    bad = tmp_path / "bad.yaml"
    bad.write_text("nodes: [\n")
    log = tmp_path / "stderr.txt"
    with log.open("w") as stderr:  # not a pipe: reading one to its end would wait for them all
        result = subprocess.run(
            [sys.executable, "-m", "gdln", "compare", str(bad), "-o", str(tmp_path / "out")],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env={**os.environ, marker: "1"},
            timeout=120,
        )
    err = log.read_text()
    assert result.returncode == 2 and err.startswith("gdln: error: "), err
    assert len(err.splitlines()) == 1
    left = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if marker.encode() in environ.read_bytes():
                left.append(environ.parent.name)
        except OSError:
            continue
    assert left == []


def test_of_the_jobs_waiting_the_lowest_priority_number_runs_first() -> None:
    """Jobs sent before the worker is free (it is still importing torch) run by priority,
    then in the order sent; each result is taken by its number, in any order."""
    problem = gdln.load(ROUTING, params=SMALL)
    job = dict(source=problem.graph, examples=problem.examples(), lr=0.05, seeds=1)
    settings = dict(record_every=10, threads=1)
    with SimulationWorker() as worker:
        numbers = [
            worker.submit(priority=p, steps=s, **settings, **job)
            for p, s in ((1, 30), (0, 20), (1, 10), (0, 40))
        ]
        runs = {n: worker.result(n) for n in reversed(numbers)}
    assert [runs[n].meta["steps"] for n in numbers] == [30, 20, 10, 40]
    assert worker.arrived == [numbers[1], numbers[3], numbers[0], numbers[2]]
