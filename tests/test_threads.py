"""The thread count a simulation chooses when it is not given (``gdln/_runtime/_threads.py``).

No timings: the rule is checked on its inputs (the work of a step, the free cores), and
``simulate`` is checked to run on what it chose, to record it and to restore torch's.
"""

from __future__ import annotations

import io
import threading
from dataclasses import replace

import numpy as np
import pytest
import torch

import gdln
from gdln._runtime import _threads as threads_module
from gdln._runtime._threads import FLOPS_PER_THREAD, auto_threads, free_cores
from gdln.simulation import simulate

ROUTING = "graphs/routing.yaml"


def test_small_steps_take_one_thread_whatever_the_free_cores() -> None:
    assert auto_threads(1e6, 10, free=8) == 1
    assert auto_threads(1.9 * FLOPS_PER_THREAD * 10, 10, free=8) == 1


def test_large_steps_take_a_thread_per_share_of_work_up_to_the_free_cores() -> None:
    per_op = 3 * FLOPS_PER_THREAD
    assert auto_threads(per_op * 16, 16, free=8) == 3
    assert auto_threads(per_op * 16, 16, free=2) == 2
    assert auto_threads(per_op * 16, 16, free=1) == 1


def test_free_cores_counts_the_other_runnable_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(threads_module.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})

    def loadavg(text: str):  # type: ignore[no-untyped-def]
        return lambda *args, **kwargs: io.StringIO(text)

    def use(text: str) -> None:  # the module's open() reads this /proc/loadavg
        monkeypatch.setattr(threads_module, "open", loadavg(text), raising=False)

    use("0.50 0.40 0.30 1/300 4242\n")
    assert free_cores() == 4  # only this process runs
    use("3.00 2.00 1.00 3/300 4242\n")
    assert free_cores() == 2
    use("9.00 9.00 9.00 12/300 4242\n")
    assert free_cores() == 1


def test_simulate_records_the_threads_it_chose_and_restores_torchs() -> None:
    problem = gdln.load(ROUTING, params={"M": 4, "K": 2, "hidden": 8})
    before = torch.get_num_threads()
    run = simulate(problem.graph, problem.examples(), steps=3, lr=0.05)
    assert run.meta["threads"] == 1  # a small network
    given = simulate(
        problem.graph,
        problem.examples(),
        steps=3,
        lr=0.05,
        threads=2,
    )
    assert given.meta["threads"] == 2
    assert torch.get_num_threads() == before


def test_simulate_runs_on_the_threads_the_rule_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the work threshold lowered and two cores free, a run takes two threads."""
    problem = gdln.load(ROUTING, params={"M": 4, "K": 2, "hidden": 8})
    seen = []
    train = gdln.simulation._simulate.train

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(torch.get_num_threads())
        return train(*args, **kwargs)

    monkeypatch.setattr(threads_module, "FLOPS_PER_THREAD", 1.0)
    monkeypatch.setattr(threads_module, "free_cores", lambda: 2)
    monkeypatch.setattr(gdln.simulation._simulate, "train", spy)
    before = torch.get_num_threads()
    run = simulate(problem.graph, problem.examples(), steps=2, lr=0.05)
    assert run.meta["threads"] == 2 and seen == [2]
    assert torch.get_num_threads() == before


def test_auto_is_the_declared_default_and_a_problems_count_overrides() -> None:
    """``threads`` resolves through the problem's settings: ``"auto"`` (the declared
    default, or given) chooses; an integer among the problem's settings is what runs."""
    plain = gdln.load(ROUTING, params={"M": 4, "K": 2, "hidden": 8})
    assert plain.settings.threads == "auto"
    auto = dict(threads="auto")
    assert simulate(plain, steps=2, seeds=1, **auto).meta["threads"] == 1
    two = replace(plain, settings=plain.settings.given(threads=2))
    assert simulate(two, steps=2, seeds=1).meta["threads"] == 2
    assert simulate(two, steps=2, seeds=1, **auto).meta["threads"] == 1


def _singular_value_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("gdln-svd")]


def test_singular_values_on_the_second_thread_are_those_of_the_recorded_weights(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With ``threads`` left ``auto`` on two cores the SVDs run beside the training: the
    run equals one without that thread bit for bit, its singular values are numpy's of
    the weights recorded at the same steps, and the thread is gone afterwards."""
    monkeypatch.setattr(threads_module.os, "sched_getaffinity", lambda pid: {0, 1})
    problem = gdln.load(ROUTING, params={"M": 3, "K": 2, "hidden": 6})
    made = []
    original = threads_module.record_thread

    def spy(device, threads):  # type: ignore[no-untyped-def]
        made.append(original(device, threads))
        return made[-1]

    monkeypatch.setattr(gdln.simulation._simulate, "record_thread", spy)
    kwargs = dict(steps=40, lr=0.1, seeds=3)
    beside = simulate(problem, **kwargs, record_weights=True)
    alone = simulate(problem, **kwargs, threads=1)
    assert made == [True, False]
    assert beside.meta["singular_values_thread"] and not alone.meta["singular_values_thread"]
    assert not _singular_value_threads()
    for key, values in alone.series.items():
        np.testing.assert_array_equal(beside.series[key], values, err_msg=key)
    for edge in problem.graph.edges:
        weights = beside.weights(edge)  # (time, seed, |t|, |s|)
        expected = np.linalg.svd(weights, compute_uv=False)
        np.testing.assert_allclose(beside.singular_values(edge), expected, atol=1e-13)


def test_the_second_thread_ends_when_a_run_diverges() -> None:
    problem = gdln.load(ROUTING, params={"M": 3, "K": 2, "hidden": 6})
    with pytest.raises(gdln.GdlnError, match="diverged"):
        simulate(problem, steps=200, lr=50.0, seeds=2, init_scale=1.0)
    assert not _singular_value_threads()
