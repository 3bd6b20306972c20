"""The torch SD ResNet against the exact chain theory, finite differences and Prop. 1."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from gdln._sd_resnet import (
    SDResNet,
    average_network_loss,
    layer_sensitivities,
    measure_gradient_growth,
    sd_loss_monte_carlo,
    sd_penalty,
    train_sd,
)
from gdln._sd_theory import chain_regulariser, gradient_growth
from gdln._stochastic_depth import StochasticDepthError, expected_chain


def _aligned_linear_net(L, N, p, mask, scaling, seed=0):
    """Linear SD ResNet with W_l = R diag(b_l) R^T: decoupled into N scalar chains."""
    rng = np.random.default_rng(seed)
    R, _ = np.linalg.qr(rng.normal(size=(N, N)))
    b = rng.normal(scale=0.5, size=(L, N))
    net = SDResNet(
        N,
        N,
        N,
        L,
        p,
        activation="linear",
        scaling=scaling,
        mask=mask,
        io_layers=False,
        dtype=torch.float64,
    )
    with torch.no_grad():
        for ell in range(L):
            net.blocks[ell].copy_(torch.tensor(R @ np.diag(b[ell]) @ R.T))
    return net, R, b


@pytest.mark.parametrize("mask", ["unscaled", "inverted"])
@pytest.mark.parametrize("scaling", ["plain", "stable"])
def test_linear_sd_resnet_expected_loss_equals_exact_chain_expectation(mask, scaling):
    # task y = R diag(s) R^T x with white inputs: per mode d = 1, s_alpha, const 1/2 sum s^2
    L, N, n = 5, 4, 4000
    p = np.array([0.9, 0.3, 0.6, 0.5, 0.8])
    net, R, b = _aligned_linear_net(L, N, p, mask, scaling)
    s = np.array([2.0, 1.0, 0.5, 1.5])
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(n, N, generator=gen, dtype=torch.float64)
    # whiten exactly so that the sample covariance is the identity
    x = x - x.mean(0)
    evals, evecs = torch.linalg.eigh(x.T @ x / n)
    x = x @ evecs @ torch.diag(evals**-0.5) @ evecs.T
    y = x @ torch.tensor(R @ np.diag(s) @ R.T).T
    brute = 0.0
    for bits in itertools.product((0.0, 1.0), repeat=L):
        prob = np.prod(np.where(np.array(bits) == 1, p, 1 - p))
        delta = torch.tensor(bits, dtype=torch.float64)
        gates = delta if mask == "unscaled" else delta / torch.tensor(p)
        with torch.no_grad():
            brute += prob * float(0.5 * ((net(x, gates) - y) ** 2).sum(-1).mean())
    exact = expected_chain(b, p, s=s, d=1.0, scaling=scaling, mask=mask).loss + 0.5 * np.sum(s**2)
    assert brute == pytest.approx(exact, rel=1e-10)
    # average network: eval mode uses the mean gate
    net.eval()
    avg = expected_chain(b, p, s=s, d=1.0, scaling=scaling, mask=mask).average_loss
    assert average_network_loss(net, x, y) == pytest.approx(avg + 0.5 * np.sum(s**2), rel=1e-10)


def test_penalty_of_the_aligned_linear_net_equals_the_chain_formula():
    L, N = 6, 3
    p = np.linspace(0.9, 0.4, L)
    net, R, b = _aligned_linear_net(L, N, p, "unscaled", "stable", seed=1)
    x = torch.tensor(R, dtype=torch.float64) * np.sqrt(N)  # rows: white inputs along R
    pen, g = sd_penalty(net, x)
    # the N rows of sqrt(N) R have identity covariance: every mode has d = 1
    ref = chain_regulariser(b, p, s=np.zeros(N), d=1.0, scaling="stable")
    assert pen == pytest.approx(ref.penalty_paper, rel=1e-10)
    assert g.shape == (L,)


def test_penalty_and_sensitivities_equal_finite_differences_for_relu():
    torch.manual_seed(0)
    L, N = 4, 8
    net = SDResNet(
        5,
        N,
        3,
        L,
        np.full(L, 0.6),
        scaling="stable",
        dtype=torch.float64,
        generator=torch.Generator().manual_seed(3),
    )
    x = torch.randn(10, 5, dtype=torch.float64)
    y = torch.randn(10, 3, dtype=torch.float64)
    pen, g = sd_penalty(net, x)
    S = layer_sensitivities(net, x, y)
    h = 1e-6
    for ell in range(L):
        e = torch.zeros(L, dtype=torch.float64)
        e[ell] = h
        with torch.no_grad():
            dy = (net(x, 1 + e) - net(x, 1 - e)) / (2 * h)
            dl = (
                0.5 * ((net(x, 1 + e) - y) ** 2).sum(-1).mean()
                - 0.5 * ((net(x, 1 - e) - y) ** 2).sum(-1).mean()
            ) / (2 * h)
        assert g[ell] == pytest.approx(float((dy**2).sum(-1).mean()), rel=1e-6)
        assert S[ell] == pytest.approx(float(dl), rel=1e-6, abs=1e-10)
    assert pen == pytest.approx(0.5 * 0.6 * 0.4 * g.sum(), rel=1e-12)


@pytest.mark.parametrize("mask", ["unscaled", "inverted"])
def test_sampled_gates_have_the_convention_mean(mask):
    p = np.array([0.2, 0.5, 0.9])
    net = SDResNet(2, 2, 2, 3, p, mask=mask, dtype=torch.float64)
    n = 20000
    gates = net.sample_gates(n, generator=torch.Generator().manual_seed(1)).numpy()
    mean = net.mean_gates().numpy()
    sd = np.sqrt(net.gate_variance().numpy())
    assert np.all(np.abs(gates.mean(0) - mean) <= 5 * sd / np.sqrt(n))
    assert set(np.unique(gates[:, 0])) <= ({0.0, 1.0} if mask == "unscaled" else {0.0, 5.0})


def test_zero_gates_skip_every_block_and_training_lowers_the_loss():
    L, N = 3, 6
    net = SDResNet(
        4, N, 2, L, np.full(L, 0.5), dtype=torch.float64, generator=torch.Generator().manual_seed(0)
    )
    x = torch.randn(32, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    y = torch.sin(x[:, :2])
    with torch.no_grad():
        np.testing.assert_allclose(
            net(x, torch.zeros(L)).numpy(), (x @ net.w_in.T @ net.w_out.T).numpy()
        )
    before = sd_loss_monte_carlo(net, x, y, masks=200, generator=torch.Generator().manual_seed(2))
    train_sd(net, x, y, steps=200, lr=0.05, generator=torch.Generator().manual_seed(3))
    after = sd_loss_monte_carlo(net, x, y, masks=200, generator=torch.Generator().manual_seed(2))
    assert after[0] < before[0] - 5 * (after[1] + before[1])


@pytest.fixture
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: threading only adds overhead
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("p_value", [None, 0.5])
def test_prop_1_gradient_growth_within_monte_carlo_error(p_value, one_thread):
    # infinite-width theory at width 128: 5 standard errors plus a 3% finite-width allowance
    # (without SD we measured a +1..3% bias at this width over 3 seeds)
    L = 3
    p = None if p_value is None else np.full(L, p_value)
    est = measure_gradient_growth(p, L=L, width=128, samples=150, seed=1)
    theory = gradient_growth(p, L=L)
    assert np.all(np.abs(est.q - theory) <= 5 * est.stderr + 0.03 * theory)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: SDResNet(2, 2, 2, 2, [0.5, 0.5], activation="tanh"), r"activation = 'tanh'"),
        (lambda: SDResNet(2, 2, 2, 2, [0.5]), r"p has shape \(1,\); expected \(2,\)"),
        (lambda: SDResNet(2, 3, 2, 1, [0.5], io_layers=False), r"io_layers=False needs d_in"),
        (lambda: SDResNet(2, 2, 2, 1, [1.2]), r"p\[0\] = 1\.2 is outside \[0, 1\]"),
    ],
)
def test_resnet_errors(call, match):
    with pytest.raises(StochasticDepthError, match=match):
        call()
