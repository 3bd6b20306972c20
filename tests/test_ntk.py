"""NTK by torch.func against per-example autograd and the path identities (gdln.kernels)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from helpers import autograd_rows

from gdln.kernels import DGNSpecError, Gate, make_dgn
from gdln.kernels._npk import neural_path_features, neural_path_kernel, neural_path_value
from gdln.kernels._ntk import neural_tangent_kernel, value_ntk_layerwise, value_tangent_kernel

RTOL = 1e-10


def _x(n, d_in, seed=0):
    return torch.randn(n, d_in, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


CASES = [
    ("relu", None),
    ("relu", Gate("soft", beta=2.0, epsilon=0.1)),
    ("frnpf_ii", None),
    ("frnpf_di", Gate("soft")),
    ("galu", None),
    ("dnpfl", Gate("soft", beta=1.5)),
    ("dnpfl", None),
    ("frg", Gate("bernoulli", p=0.5)),
]


@pytest.mark.parametrize(("mode", "gate"), CASES)
def test_ntk_total_equals_autograd(mode, gate):
    n = 6
    net = make_dgn(3, 4, 3, mode=mode, gate=gate, seed=2, n_examples=n)
    x = _x(n, 3)
    k = neural_tangent_kernel(net, x)
    j = autograd_rows(net, x, net.trainable())
    np.testing.assert_allclose(k.total, j @ j.T, rtol=RTOL, atol=1e-13)


@pytest.mark.parametrize(("mode", "gate"), CASES)
def test_value_and_feature_parts_equal_autograd(mode, gate):
    n = 5
    net = make_dgn(3, 4, 3, mode=mode, gate=gate, seed=4, n_examples=n)
    x = _x(n, 3, seed=1)
    k = neural_tangent_kernel(net, x)
    if net.tied:
        # untie: a DNPFL copy with the same weights has psi^V, psi^F as separate blocks
        net = net.clone(mode="dnpfl")
    jv = autograd_rows(net, x, list(net.value))
    np.testing.assert_allclose(k.value, jv @ jv.T, rtol=RTOL, atol=1e-13)
    np.testing.assert_allclose(value_ntk_layerwise(net, x), k.value, rtol=RTOL, atol=1e-13)
    if mode != "frg" and (gate is not None and gate.kind == "soft"):
        jf = autograd_rows(net, x, list(net.feature))
        np.testing.assert_allclose(k.feature, jf @ jf.T, rtol=RTOL, atol=1e-13)
        np.testing.assert_allclose(k.cross, jv @ jf.T + jf @ jv.T, rtol=RTOL, atol=1e-13)
    else:
        assert not np.any(k.feature)  # hard gates: no gate gradient


def test_split_rules_per_mode():
    x = _x(5, 3)
    soft = Gate("soft")
    relu = make_dgn(3, 4, 3, gate=soft, seed=0)
    k = neural_tangent_kernel(relu, x)
    np.testing.assert_allclose(k.total, k.value + k.feature + k.cross, rtol=RTOL)
    d = neural_tangent_kernel(relu.clone(mode="dnpfl"), x)
    np.testing.assert_allclose(d.total, d.value + d.feature, rtol=RTOL)
    np.testing.assert_allclose(d.value, k.value, rtol=RTOL)
    f = neural_tangent_kernel(relu.clone(mode="frnpf_di"), x)
    np.testing.assert_allclose(f.total, f.value, rtol=RTOL)


def _vtk_enumerated(net):
    """V = (grad v)^T (grad v) with dv(p)/dtheta written out path by path (Def. 3.1)."""
    d_in, *hidden, _ = net.widths
    value = [w.numpy() for w in net.value]
    sizes = [w.size for w in value]
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    rows = []
    for path in itertools.product(range(d_in), *(range(w) for w in hidden)):
        nodes = [*path, 0]
        row = np.zeros(offsets[-1])
        factors = [value[layer][nodes[layer], nodes[layer + 1]] for layer in range(len(value))]
        for layer in range(len(value)):
            others = np.prod([f for m, f in enumerate(factors) if m != layer])
            idx = offsets[layer] + nodes[layer] * value[layer].shape[1] + nodes[layer + 1]
            row[idx] = others
        rows.append(row)
    g = np.array(rows)
    return g @ g.T


@pytest.mark.parametrize(
    ("mode", "gate"),
    [("relu", None), ("frnpf_ii", None), ("frg", Gate("bernoulli")), ("galu", None)],
)
def test_prop31_and_prop33(mode, gate):
    n = 6
    net = make_dgn(2, 3, 3, mode=mode, gate=gate, seed=5, n_examples=n)
    x = _x(n, 2, seed=3)
    vtk = value_tangent_kernel(net)
    np.testing.assert_allclose(vtk, _vtk_enumerated(net), rtol=RTOL, atol=1e-14)
    phi = neural_path_features(net, x)
    k = neural_tangent_kernel(net, x).total
    np.testing.assert_allclose(k, phi.T @ vtk @ phi, rtol=RTOL, atol=1e-13)  # Prop. 3.1
    h = neural_path_kernel(net, x).kernel
    rho_k = np.linalg.eigvalsh(k)[0]
    bound = np.linalg.eigvalsh(h)[0] * np.linalg.eigvalsh(vtk)[-1]
    assert rho_k <= bound * (1 + 1e-10) + 1e-12  # Prop. 3.3


@pytest.mark.parametrize(
    ("mode", "gate"),
    [
        ("frnpf_ii", Gate("soft", beta=2.0)),
        ("frnpf_di", Gate("soft", beta=1.0, epsilon=0.3)),
        ("dnpfl", Gate("soft", beta=3.0)),
        ("relu", Gate("soft", beta=2.0, epsilon=0.1)),
    ],
)
def test_prop31_soft_gates(mode, gate):
    """K^V = Phi^T V Phi with soft gate values in Phi (Prop. 3.1); K^V is all of K for FNPF."""
    n = 6
    net = make_dgn(2, 3, 3, mode=mode, gate=gate, seed=8)
    x = _x(n, 2, seed=4)
    phi = neural_path_features(net, x)
    assert np.any((phi != 0) & (np.abs(phi) < np.abs(x.numpy()).max() * 0.99))  # soft values
    k = neural_tangent_kernel(net, x)
    vtk = _vtk_enumerated(net)
    np.testing.assert_allclose(k.value, phi.T @ vtk @ phi, rtol=RTOL, atol=1e-13)
    if mode.startswith("frnpf"):
        np.testing.assert_allclose(k.total, phi.T @ vtk @ phi, rtol=RTOL, atol=1e-13)
    else:  # the gates learn too: K = K^V + K^F (+ cross terms when tied), K^F != 0
        assert np.abs(k.feature).max() > 1e-6 * np.abs(k.value).max()


def test_vtk_is_the_dln_vtk():
    """Remark after Def. 3.2: V depends on the weights only, not on the gates."""
    a = make_dgn(2, 3, 3, mode="frnpf_ii", seed=1)
    b = make_dgn(2, 3, 3, mode="relu", seed=1)
    object.__setattr__(b, "value", a.value)
    np.testing.assert_array_equal(value_tangent_kernel(a), value_tangent_kernel(b))
    # and K = Phi^T V Phi gives the output-weight part exactly: y = Phi^T v
    x = _x(4, 2)
    np.testing.assert_allclose(
        neural_path_features(a, x).T @ neural_path_value(a), a(x).numpy().ravel(), rtol=RTOL
    )


def test_chunked_equals_unchunked():
    net = make_dgn(3, 5, 4, gate=Gate("soft"), seed=0)
    x = _x(9, 3)
    a = neural_tangent_kernel(net, x)
    b = neural_tangent_kernel(net, x, chunk_size=2)
    np.testing.assert_allclose(a.total, b.total, rtol=RTOL, atol=1e-14)


def test_ntk_errors():
    net = make_dgn(3, 4, 3)
    with pytest.raises(DGNSpecError, match=r"chunk_size: got 0"):
        neural_tangent_kernel(net, _x(2, 3), chunk_size=0)
    with pytest.raises(DGNSpecError, match=r"x: got shape \(2, 4\), expected \(n, d_in=3\)"):
        neural_tangent_kernel(net, _x(2, 4))
    with pytest.raises(DGNSpecError, match=r"d_out=1"):
        neural_tangent_kernel(make_dgn(3, 4, 3, d_out=3), _x(2, 3))
    with pytest.raises(DGNSpecError, match=r"x: got 2 rows, expected n=5"):
        neural_tangent_kernel(make_dgn(3, 4, 3, mode="frg", n_examples=5), _x(2, 3))
