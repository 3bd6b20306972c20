"""What a simulation step costs in tensor operations and host copies, and where tensors live.

Counts, not timings: the operations of one training step are counted with a
``TorchDispatchMode`` on CPU (views launch no kernel and are not counted), so the
structure of the compiled graph is checked without a clock.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import gdln
from gdln import simulate
from gdln.simulation import SimulationSpecError
from gdln.simulation._device import torch_device
from gdln.simulation._plan import compile_plan
from gdln.simulation._random_gates import RandomGates
from gdln.simulation._seeds import GATE_STREAM
from gdln.simulation._weights import Weights

ROUTING = "graphs/routing.yaml"


class _Kernels(TorchDispatchMode):
    """Counts the aten operations that compute (not views), and the copies to the host."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()
        self.host_copies = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if not func.is_view and func.__name__ != "detach.default":
            self.ops[str(func)] += 1
        if func.__name__ == "_local_scalar_dense.default":  # bool(), float(), .item()
            self.host_copies += 1
        return func(*args, **kwargs)


def _count(problem: gdln.Problem, steps: int, **settings: Any) -> _Kernels:
    examples = problem.examples()
    with _Kernels() as mode:
        simulate(
            problem.graph,
            examples,
            steps=steps,
            lr=0.02,
            dtype="float32",
            device="cpu",
            **settings,
        )
    return mode


def test_routing_m100_step_is_at_most_50_kernels() -> None:
    """Routing M=100 (200 gated edges): a training step is a few dozen kernels, not ~3100."""
    problem = gdln.load(ROUTING, params={"M": 100, "K": 4, "hidden": 128})
    short, long = _count(problem, 2, record_steps=[0]), _count(problem, 6, record_steps=[0])
    per_step = (sum(long.ops.values()) - sum(short.ops.values())) / 4
    assert per_step <= 50, (long.ops - short.ops).most_common()
    # the 100 gated edges of a layer are one matmul forward and one or two backward
    assert (long.ops["aten.bmm.default"] - short.ops["aten.bmm.default"]) / 4 <= 8


def test_one_host_copy_per_recorded_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every series of a recorded step (and the divergence check) comes back in one copy.

    On CPU ``.cpu()`` dispatches nothing, so its calls are counted by a wrapper; reading a
    scalar (``bool``, ``float``) is counted by the dispatch mode.
    """
    calls = []
    cpu = torch.Tensor.cpu
    monkeypatch.setattr(torch.Tensor, "cpu", lambda t, *a, **k: calls.append(1) or cpu(t, *a, **k))
    problem = gdln.load(ROUTING, params={"M": 20, "K": 2, "hidden": 8})
    extra = dict(record_every=2, rsm=True, record_weights=True)
    short = _count(problem, 2, **extra)
    short_calls = len(calls)
    long = _count(problem, 8, **extra)
    added = len(calls) - 2 * short_calls + long.host_copies - short.host_copies
    assert added == 3  # steps 4, 6, 8 added one copy each; no other copy or check


def test_random_gates_in_chunks_are_the_per_step_draws() -> None:
    """Chunked draws give each step exactly the draw ``rng.random(m) < p`` of that step."""
    problem = gdln.load(ROUTING, params={"M": 4, "K": 2, "hidden": 3})
    net = compile_plan(problem.graph)
    items = {net.edges[0]: 0.5, net.edges[-1]: 0.25, net.edges[-1][1]: 0.7}
    seeds, chunk = [3, 8], 5
    gates = RandomGates(net, items, seeds, torch.float64, torch.device("cpu"), chunk=chunk)
    ones = [torch.ones((2, 1, 1), dtype=torch.float64) for _ in net.edges]
    weights = Weights.of_edges(ones)
    rngs = [np.random.default_rng((s, GATE_STREAM)) for s in seeds]
    p = np.array(list(items.values()))
    for _ in range(3 * chunk + 2):
        got = [w.flatten().numpy() for w in gates.apply(weights).edges()]
        draw = np.array([rng.random(len(p)) < p for rng in rngs], dtype=float)
        expected = [np.ones(2) for _ in net.edges]
        expected[0] = expected[0] * draw[:, 0]
        expected[-1] = expected[-1] * draw[:, 1] * draw[:, 2]  # its own item and its target's
        for a, b in zip(got, expected, strict=True):
            np.testing.assert_array_equal(a, b)


@pytest.fixture
def meta_default_device():  # type: ignore[no-untyped-def]
    """Tensors made without an explicit device land on 'meta' and fail against CPU ones."""
    torch.set_default_device("meta")
    try:
        yield
    finally:
        torch.set_default_device(None)


def test_every_tensor_is_made_on_the_run_device(meta_default_device: None) -> None:
    """Sparse plan, random gates, bases, rsm, eval examples, SGD: no tensor lacks a device.

    With 'meta' as the default device, a factory call without ``device=`` would mix meta
    and CPU tensors and fail, as a CPU tensor would next to CUDA ones.
    """
    assert torch.empty(1).device.type == "meta"
    problem = gdln.load(ROUTING, params={"M": 20, "K": 1, "hidden": 6})
    examples = dataclasses.replace(
        problem.examples(), random_gates={"h1": 0.8, ("h1", "h2"): 0.6, ("x0", "h1"): 0.5}
    )
    edge = ("h1", "h2")
    bases = {edge: (np.eye(6)[:, :2], np.eye(6)[:, :2])}
    for optimizer, extra in (("gd", {}), ("sgd", {"batch_size": 8, "momentum": 0.5})):
        settings = dict(device="cpu", rsm=True, record_every=2, optimizer=optimizer, **extra)
        run = simulate(
            problem.graph,
            examples,
            steps=4,
            lr=0.05,
            seeds=2,
            eval_examples=problem.examples(),
            bases=bases,
            **settings,
        )
        assert np.isfinite(run.loss).all() and run.series["rsm/h1"].shape == (3, 2, 80, 80)


def test_cuda_index_beyond_the_device_count_is_a_named_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert torch_device("cuda:1") == torch.device("cuda:1")
    with pytest.raises(SimulationSpecError, match=r"device: 'cuda:2' requested but only 2 CUDA"):
        torch_device("cuda:2")
