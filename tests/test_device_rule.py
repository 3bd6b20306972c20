"""One device rule for simulation, kernels and stochastic depth (issue 24, item 6).

``None`` and ``"auto"`` mean CUDA when present, else the CPU, in :func:`gdln.simulate`,
:class:`gdln.sd.SDResNet` and :func:`gdln.kernels.draw_value_weights` alike; a bad device
gives the same message from each. There is no GPU here, so the CUDA branches are reached by
making torch report CUDA devices (``torch.cuda.is_available`` / ``device_count``): a
decision for CUDA then shows as torch's own refusal to make a CUDA tensor in this CPU
build, which is what the old rule for kernels and stochastic depth (``None``: where the
weights were drawn) never reached.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import gdln
import gdln._device as rule
from gdln.kernels import DGNSpecError, draw_value_weights
from gdln.sd import SDResNet, StochasticDepthError
from gdln.simulation import SimulationSettings, SimulationSpecError

pytestmark = pytest.mark.skipif(
    torch.cuda.is_available(), reason="fakes CUDA devices on a machine that has none"
)


def _problem() -> gdln.Problem:
    return gdln.load("graphs/chain.yaml")


def _simulate(device: Any) -> Any:
    problem = _problem()
    return gdln.simulate(problem.graph, problem.examples(), steps=1, lr=0.1, device=device)


def _sd(device: Any) -> Any:
    return SDResNet(2, 3, 1, 2, [0.5, 0.5], device=device)


def _kernels(device: Any) -> Any:
    return draw_value_weights([2, 3, 1], sigma=1.0, n_samples=2, device=device)


ENTRY_POINTS: dict[str, tuple[Callable[[Any], Any], type[Exception]]] = {
    "simulate": (_simulate, SimulationSpecError),
    "sd": (_sd, StochasticDepthError),
    "kernels": (_kernels, DGNSpecError),
}


def _fake_cuda(monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)


@pytest.mark.parametrize("device", [None, "auto"])
def test_none_and_auto_are_the_cpu_without_cuda(device: Any) -> None:
    assert rule.resolve_device(device, gdln.GdlnError) == torch.device("cpu")
    assert _simulate(device).meta["device"] == "cpu"
    assert _sd(device).p.device.type == "cpu"
    assert all(w.device.type == "cpu" for w in _kernels(device))


@pytest.mark.parametrize("device", [None, "auto"])
def test_none_and_auto_are_cuda_when_present_for_every_entry_point(
    monkeypatch: pytest.MonkeyPatch, device: Any
) -> None:
    _fake_cuda(monkeypatch, 1)
    assert rule.resolve_device(device, gdln.GdlnError) == torch.device("cuda")
    # the decision for CUDA shows as this CPU build's refusal to make a CUDA tensor
    for name, (call, _) in ENTRY_POINTS.items():
        with pytest.raises((AssertionError, RuntimeError), match=r"CUDA|cuda"):
            call(device)
            pytest.fail(f"{name}: device={device!r} stayed on the CPU with CUDA present")


def test_cpu_stays_on_the_cpu_when_cuda_is_present(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_cuda(monkeypatch, 2)
    assert _sd("cpu").blocks.device.type == "cpu"
    assert all(w.device.type == "cpu" for w in _kernels(torch.device("cpu")))
    assert _simulate("cpu").meta["device"] == "cpu"


@pytest.mark.parametrize(
    ("device", "count", "message"),
    [
        ("tpu", 0, r"device: expected 'auto', 'cpu' or 'cuda\[:k\]', got 'tpu'"),
        ("cuda:x", 0, r"device: expected 'auto', 'cpu' or 'cuda\[:k\]', got 'cuda:x'"),
        (3, 0, r"device: expected 'auto', 'cpu' or 'cuda\[:k\]', got 3"),
        ("cuda", 0, r"device: 'cuda' requested but CUDA is not available; use 'cpu' or 'auto'"),
        (
            "cuda:2",
            2,
            r"device: 'cuda:2' requested but only 2 CUDA device\(s\) are present "
            r"\(cuda:0 to cuda:1\)$",
        ),
    ],
)
def test_one_message_for_a_bad_device_from_every_entry_point(
    monkeypatch: pytest.MonkeyPatch, device: Any, count: int, message: str
) -> None:
    _fake_cuda(monkeypatch, count)
    for call, error in ENTRY_POINTS.values():
        with pytest.raises(error, match=f"^{message}"):
            call(device)


def test_a_cuda_index_within_the_count_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_cuda(monkeypatch, 2)
    assert rule.resolve_device("cuda:1", gdln.GdlnError) == torch.device("cuda:1")


def test_a_torch_device_is_accepted_everywhere_and_kept_as_its_string() -> None:
    settings = SimulationSettings(device=torch.device("cpu"))
    assert settings.device == "cpu" and isinstance(settings.device, str)
    assert _simulate(torch.device("cpu")).meta["device"] == "cpu"
    assert _sd(torch.device("cpu")).p.device.type == "cpu"


def test_the_spelling_is_checked_without_torch() -> None:
    # a device is checked before torch loads: the check needs only the text
    assert rule.check_device("cuda:3", gdln.GdlnError) == "cuda:3"
    assert rule.check_device(None, gdln.GdlnError) is None
    with pytest.raises(gdln.GdlnError, match=r"^device: expected .* got 'gpu'$"):
        rule.check_device("gpu", lambda m: gdln.GdlnError(f"device: {m}"))


def test_the_seeded_draws_do_not_depend_on_the_device_argument() -> None:
    a = _kernels_seeded(None)
    b = _kernels_seeded("cpu")
    assert all(np.array_equal(x.numpy(), y.numpy()) for x, y in zip(a, b, strict=True))


def _kernels_seeded(device: Any) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(5)
    return draw_value_weights([2, 3, 1], sigma=1.0, n_samples=2, generator=gen, device=device)
