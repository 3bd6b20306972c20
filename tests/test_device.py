"""Every torch entry point of gdln.sd and gdln.kernels follows its model's/input's device.

There is no GPU here, so the CUDA path is checked by construction: each entry point runs
with ``torch.device("meta")`` as the default device while the model and inputs live on the
CPU. A tensor made without an explicit device then lands on "meta" and the computation
fails, as it would when the model lives on CUDA and a stray tensor on the CPU. Device
strings beyond the machine's CUDA devices give a clear GdlnError.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gdln._errors import GdlnError
from gdln.kernels import (
    dag_ntk,
    draw_value_weights,
    example_5_2_graph,
    frg_overlap_mc,
    make_dgn,
    neural_path_features,
    neural_path_kernel,
    neural_path_value,
    neural_tangent_kernel,
    path_gram,
    sample_value_ntk,
    value_ntk_layerwise,
    value_ntk_samples,
)
from gdln.sd import SDResNet, layer_sensitivities, sd_penalty, train_sd

META = torch.device("meta")  # ``with META:`` makes it the default device


def _cpu(t):
    assert isinstance(t, np.ndarray) or t.device.type == "cpu"
    return t


def _sd_model():
    gen = torch.Generator().manual_seed(0)
    model = SDResNet(3, 4, 2, 5, np.full(5, 0.7), dtype=torch.float64, generator=gen)
    x = torch.randn(6, 3, generator=gen, dtype=torch.float64, device="cpu")
    y = torch.randn(6, 2, generator=gen, dtype=torch.float64, device="cpu")
    return model, x, y, gen


def test_the_meta_default_catches_a_tensor_made_without_a_device():
    # the premise of this module: such a tensor does not mix with CPU tensors
    x = torch.ones(3, device="cpu")
    with META, pytest.raises((RuntimeError, NotImplementedError)):
        (x * torch.ones(3)).cpu().numpy()


def test_sd_resnet_training_step_and_penalty_stay_on_the_model_device():
    model, x, y, gen = _sd_model()
    before = model.blocks.detach().clone()
    with META:
        _sd_entry_points(model, x, y, gen, before)


def _sd_entry_points(model, x, y, gen, before):
    hist = train_sd(model, x, y, steps=2, lr=0.1, batch_size=4, generator=gen, record_every=1)
    assert np.isfinite(hist["train_loss"]).all()
    assert not torch.equal(before, model.blocks.detach())
    assert _cpu(model.sample_gates(3, generator=gen)).shape == (3, 5)
    assert _cpu(model.sample_gates()).shape == (5,)  # the global generator
    pen, g = sd_penalty(model, x)
    assert np.isfinite(pen) and g.shape == (5,)
    assert layer_sensitivities(model, x, y).shape == (5,)


def test_kernels_stay_on_the_device_of_the_net():
    net = make_dgn(3, 4, 3, seed=0)
    x = torch.randn(5, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    with META:
        _kernel_entry_points(net, x)


def _kernel_entry_points(net, x):
    k = neural_path_kernel(net, x)
    phi = neural_path_features(net, x)
    np.testing.assert_allclose(k.kernel, phi.T @ phi, rtol=1e-10, atol=1e-12)
    assert neural_path_value(net).shape == (phi.shape[0],)
    ntk = neural_tangent_kernel(net, x)
    np.testing.assert_allclose(ntk.value, value_ntk_layerwise(net, x), rtol=1e-10, atol=1e-12)


def test_path_gram_and_dag_ntk_run_on_the_cpu_under_any_default():
    g = example_5_2_graph()
    X = np.array([[1.0, 2.0], [0.5, -1.0]])
    with META:
        np.testing.assert_allclose(path_gram(g, X).H, dag_ntk(g, X), rtol=1e-10)


def test_dgn_theory_samplers_follow_their_generator():
    gen = torch.Generator().manual_seed(0)
    with META:
        _theory_entry_points(gen)


def _theory_entry_points(gen):
    w = draw_value_weights([2, 3, 1], sigma=1.0, n_samples=4, generator=gen)
    assert all(_cpu(t).shape[0] == 4 for t in w)
    x = np.ones((2, 2))
    gates = [np.ones((2, 3))]
    assert value_ntk_samples(x, gates, w).shape == (4, 2, 2)
    assert sample_value_ntk(x, gates, sigma=1.0, n_samples=3).shape == (3, 2, 2)
    selfs, _ = frg_overlap_mc(3, 3, 1.0, n_samples=4)
    assert selfs.mean == pytest.approx(9.0)  # p = 1: every gate on, Lambda = w^(d-1)


@pytest.mark.parametrize("device", ["cuda:99", "cuda", "tpu", "not a device"])
def test_device_strings_that_do_not_exist_are_refused(device):
    if device == "cuda" and torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    with pytest.raises(GdlnError, match="device"):
        SDResNet(2, 2, 1, 2, [0.5, 0.5], device=device)
    with pytest.raises(GdlnError, match="device"):
        draw_value_weights([2, 1], sigma=1.0, n_samples=1, device=device)


def test_explicit_cpu_device_gives_the_same_draws():
    a = SDResNet(2, 3, 1, 2, [0.5, 0.5], generator=torch.Generator().manual_seed(3))
    b = SDResNet(2, 3, 1, 2, [0.5, 0.5], generator=torch.Generator().manual_seed(3), device="cpu")
    assert torch.equal(a.blocks, b.blocks) and b.blocks.device.type == "cpu"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_sd_resnet_and_value_ntk_on_cuda_match_the_cpu():
    runs = []
    for device in ("cpu", "cuda"):
        gen = torch.Generator().manual_seed(0)
        model = SDResNet(3, 4, 2, 5, np.full(5, 0.7), dtype=torch.float64, generator=gen)
        model = model.to(device)
        x = torch.randn(6, 3, generator=gen, dtype=torch.float64).to(device)
        y = torch.randn(6, 2, generator=gen, dtype=torch.float64).to(device)
        train_sd(model, x, y, steps=3, lr=0.1, generator=gen)
        w = draw_value_weights([3, 4, 1], sigma=1.0, n_samples=2, generator=gen, device=device)
        k = value_ntk_samples(x.cpu().numpy(), [np.ones((6, 4))], w)
        runs.append((model.blocks.detach().cpu(), sd_penalty(model, x)[0], k))
    np.testing.assert_allclose(runs[1][0].numpy(), runs[0][0].numpy(), rtol=1e-10)
    assert runs[1][1] == pytest.approx(runs[0][1], rel=1e-10)
    np.testing.assert_allclose(runs[1][2], runs[0][2], rtol=1e-10)
