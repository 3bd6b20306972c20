"""Deep gated networks: gates, modes, initialisation and training (gdln.kernels)."""

from __future__ import annotations

import math

import pytest
import torch

from gdln import GdlnError
from gdln.kernels import MODES, DGNSpecError, Gate, dgn_forward, make_dgn, train_dgn


def _x(n: int = 6, d_in: int = 3, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, d_in, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_relu_mode_is_a_relu_network():
    net = make_dgn(3, 5, 4, seed=1)
    x = _x()
    z = x
    for W in net.value[:-1]:
        z = torch.relu(z @ W)
    assert torch.allclose(net(x), z @ net.value[-1], rtol=1e-12, atol=0)
    assert all(f is v for f, v in zip(net.feature, net.value, strict=True))


def test_soft_gate_formula():
    g = Gate("soft", beta=3.0, epsilon=0.2)
    q = torch.linspace(-2, 2, 9, dtype=torch.float64)
    assert torch.allclose(g(q), 1.2 / (1 + torch.exp(-3.0 * q)), rtol=1e-14)


def test_galu_gates_come_from_the_feature_network_only():
    net = make_dgn(3, 5, 3, mode="galu", seed=2)
    x = _x()
    z = x
    expected = []
    for W in net.feature[:-1]:
        q = z @ W
        expected.append((q > 0).double())
        z = torch.relu(q)
    for got, want in zip(net.gates(x), expected, strict=True):
        assert torch.equal(got, want)
    # Changing the value weights leaves the gates alone and the output is linear in them.
    out = net(x)
    scaled = dgn_forward([2 * net.value[0], *net.value[1:]], x, net.gates(x))
    assert torch.allclose(scaled, 2 * out, rtol=1e-12)


def test_initialisations_ii_di_flnpf():
    ii = make_dgn(3, 4, 3, mode="frnpf_ii", seed=3)
    assert not any(torch.equal(f, v) for f, v in zip(ii.feature, ii.value, strict=True))
    di = make_dgn(3, 4, 3, mode="frnpf_di", seed=3)
    assert all(torch.equal(f, v) for f, v in zip(di.feature, di.value, strict=True))
    assert all(f is not v for f, v in zip(di.feature, di.value, strict=True))
    relu = make_dgn(3, 4, 3, seed=4)
    fl = make_dgn(3, 4, 3, mode="flnpf", source=relu, seed=5)
    x = _x()
    for a, b in zip(fl.gates(x), relu.gates(x), strict=True):
        assert torch.equal(a, b)


def test_bernoulli_weights_are_plus_minus_sigma():
    net = make_dgn(4, 8, 3, init="bernoulli", sigma=0.3, seed=0)
    for W in net.value:
        assert torch.all(torch.isclose(W.abs(), torch.tensor(0.3, dtype=W.dtype)))


def test_frg_gates_fixed_per_example_and_rate():
    n, w = 400, 50
    net = make_dgn(2, w, 3, mode="frg", gate=Gate("bernoulli", p=0.3), n_examples=n, seed=0)
    g = net.gates(_x(n, 2))
    assert len(g) == 2 and g[0].shape == (n, w)
    # mean of n*w Bernoulli(0.3) draws: 5 standard errors.
    m = n * w
    tol = 5 * math.sqrt(0.3 * 0.7 / m)
    assert abs(float(g[0].mean()) - 0.3) < tol


def test_trainable_sets_follow_the_modes():
    src = make_dgn(3, 4, 3, seed=0)
    for mode in MODES:
        net = make_dgn(
            3,
            4,
            3,
            mode=mode,
            seed=0,
            source=src,
            n_examples=5,
            gate=Gate("bernoulli") if mode == "frg" else None,
        )
        n_train = len(net.trainable())
        assert n_train == (6 if mode == "dnpfl" else 3), mode


def test_training_reduces_loss_and_keeps_features_frozen():
    x = _x(20, 3)
    y = torch.sin(x[:, 0])
    net = make_dgn(3, 16, 3, mode="frnpf_ii", seed=0)
    res = train_dgn(net, x, y, epochs=30, lr=1e-2, batch_size=20)
    assert res.losses[-1] < res.losses[0]
    for a, b in zip(res.net.feature, net.feature, strict=True):
        assert torch.equal(a, b)
    # the input network is untouched
    assert not torch.equal(res.net.value[0], net.value[0])


def test_training_frg_and_relu_and_dnpfl_run():
    x = _x(10, 3)
    y = torch.cos(x[:, 1])
    for mode, gate in (("frg", Gate("bernoulli")), ("relu", None), ("dnpfl", Gate("soft"))):
        net = make_dgn(3, 8, 3, mode=mode, gate=gate, n_examples=10, seed=1)
        res = train_dgn(net, x, y, epochs=20, lr=1e-2, optimizer="sgd", batch_size=5)
        assert res.losses[-1] < res.losses[0], mode


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"mode": "bogus"}, r"mode: got 'bogus'"),
        ({"width": 0}, r"width: got 0, expected an integer >= 1"),
        ({"init": "uniform"}, r"init: got 'uniform'"),
        ({"sigma": -1.0}, r"sigma: got -1.0"),
        ({"mode": "flnpf"}, r"source: mode 'flnpf' needs a 'relu' DGN"),
        ({"mode": "frg"}, r"n_examples: got None"),
        ({"mode": "frg", "gate": Gate("relu"), "n_examples": 3}, r"gate: got kind 'relu'"),
    ],
)
def test_make_dgn_errors(kwargs, match):
    args = {"d_in": 3, "width": 4, "depth": 3, **kwargs}
    with pytest.raises(DGNSpecError, match=match):
        make_dgn(**args)


def test_gate_and_input_errors():
    with pytest.raises(DGNSpecError, match=r"gate kind: got 'tanh'"):
        Gate("tanh")  # type: ignore[arg-type]
    with pytest.raises(DGNSpecError, match=r"gate p: got 1.5"):
        Gate("bernoulli", p=1.5)
    with pytest.raises(DGNSpecError, match=r"gate beta: got 0"):
        Gate("soft", beta=0)
    with pytest.raises(DGNSpecError, match=r"gates are drawn per example"):
        Gate("bernoulli")(torch.zeros(2))
    net = make_dgn(3, 4, 3)
    with pytest.raises(DGNSpecError, match=r"x: got shape \(2, 5\), expected \(n, d_in=3\)"):
        net(torch.zeros(2, 5))
    frg = make_dgn(3, 4, 3, mode="frg", n_examples=4)
    with pytest.raises(DGNSpecError, match=r"x: got 2 rows, expected n=4"):
        frg(torch.zeros(2, 3))
    with pytest.raises(DGNSpecError, match=r"optimizer: got 'lbfgs'"):
        train_dgn(net, torch.zeros(2, 3), torch.zeros(2), optimizer="lbfgs")  # type: ignore
    with pytest.raises(DGNSpecError, match=r"loss: got 'hinge'"):
        train_dgn(net, torch.zeros(2, 3), torch.zeros(2), loss="hinge")  # type: ignore
    with pytest.raises(DGNSpecError, match=r"y: got 3 rows, expected 2"):
        train_dgn(net, torch.zeros(2, 3), torch.zeros(3))
    with pytest.raises(DGNSpecError, match=r"training diverged"):
        train_dgn(
            make_dgn(3, 4, 1), _x(8, 3) * 100, torch.ones(8), lr=1e6, optimizer="sgd", epochs=40
        )
    assert issubclass(DGNSpecError, GdlnError)


def test_datasets():
    from gdln.kernels import make_dataset

    x, y = make_dataset("digits47", n=40, seed=0)
    assert x.shape == (40, 64) and sorted(set(y.tolist())) == [-1.0, 1.0]
    assert float((y == 1).sum()) == 20
    assert torch.allclose(x.norm(dim=1), torch.ones(40, dtype=x.dtype))
    x2, _ = make_dataset("digits47", n=40, seed=0)
    assert torch.equal(x, x2)
    x, y = make_dataset("digits", n=50, seed=1)
    assert y.dtype == torch.int64 and x.shape == (50, 64)
    x, y = make_dataset("identical", n=5)
    assert torch.equal(x, torch.ones(5, 1, dtype=x.dtype)) and bool((y.abs() <= 1).all())
    x, _ = make_dataset("uniform2d", n=5)
    assert x.shape == (5, 2)
    with pytest.raises(DGNSpecError, match=r"dataset: got 'mnist'"):
        make_dataset("mnist", n=3)
    with pytest.raises(DGNSpecError, match=r"n: got 41, expected an even number"):
        make_dataset("digits47", n=41)
    with pytest.raises(DGNSpecError, match=r"n: got 0, expected an integer >= 1"):
        make_dataset("digits", n=0)
    with pytest.raises(DGNSpecError, match=r"n: got 5000, expected at most 1797"):
        make_dataset("digits", n=5000)
