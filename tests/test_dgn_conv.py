"""Convolutional DGNs with global average pooling: forward pass, paths with shared weights,
NPK as a sum over rotations, NTK and its split (gdln.kernels.ConvDGN, gdln.kernels, gdln.kernels).

Every identity is checked in float64 against an independent computation: explicit loops
over positions and paths, torch.autograd one example at a time, or the exact average over
all weight sign patterns.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from helpers import autograd_rows

from gdln.kernels import ConvDGN, DGNSpecError, Gate, make_conv_dgn, make_dataset, train_dgn
from gdln.kernels._npk import (
    conv_path_features,
    conv_path_kernel,
    conv_path_value,
    neural_path_features,
    neural_path_kernel,
    neural_path_value,
    num_paths,
)
from gdln.kernels._ntk import neural_tangent_kernel, value_ntk_layerwise, value_tangent_kernel

RTOL = 1e-10

NETS = [
    ("relu", None, (5,)),
    ("relu", Gate("soft", beta=2.0, epsilon=0.1), (3, 4)),
    ("frnpf_ii", None, (2, 3)),
    ("dnpfl", Gate("soft"), (4,)),
    ("frg", Gate("bernoulli", p=0.6), (3, 3)),
]


def _x(n, d, seed=0):
    return torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _positions(shape):
    return list(itertools.product(*(range(v) for v in shape)))


def _add(i, delta, shape):
    return tuple((a + b) % m for a, b, m in zip(i, delta, shape, strict=True))


def _forward_loops(net, x):
    """The value network written with explicit loops over positions, offsets and channels."""
    shape, offs = net.image_shape, net.offsets
    gates = [g.numpy() for g in net.gates(x)]
    value = [w.numpy() for w in net.value]
    out = []
    for s in range(x.shape[0]):
        z = {i: np.array([x[s].numpy().reshape(shape)[i]]) for i in _positions(shape)}
        for layer, W in enumerate(value[:-1]):
            new = {}
            for i in _positions(shape):
                q = sum(z[_add(i, off, shape)] @ W[k] for k, off in enumerate(offs))
                new[i] = q * gates[layer][(s, *i)]
            z = new
        pooled = sum(z.values()) / len(z)
        out.append(float(pooled @ value[-1][:, 0]))
    return np.array(out)


def _enumerate(net, x):
    """Every path (delta_1, c_1, ..., delta_{d-1}, c_{d-1}; i_{d-1}) written out.

    Returns the full features (P_bar * D, n), their sums over the final position (P_bar, n)
    and the values per path class (P_bar,); the value of a path is looked up from its
    weights only, so the D rotations of a class get one value by construction of the net,
    which the test then checks.
    """
    shape, offs = net.image_shape, net.offsets
    gates = [g.numpy() for g in net.gates(x)]
    value = [w.numpy() for w in net.value]
    xs = x.numpy().reshape(x.shape[0], *shape)
    d = net.depth
    D = len(_positions(shape))
    per_layer = [list(itertools.product(range(len(offs)), range(c))) for c in net.channels[1:-1]]
    full, shared, values = [], [], []
    for cls in itertools.product(*per_layer) if d > 1 else [()]:
        phi_cls = np.zeros(len(xs))
        vals = set()
        for end in _positions(shape):
            pos = [end]  # positions i_{d-1}, ..., i_0
            for k, _ in reversed(cls):
                pos.append(_add(pos[-1], offs[k], shape))
            pos = pos[::-1]  # i_0, ..., i_{d-1}
            act = np.ones(len(xs))
            for layer, (_, c) in enumerate(cls):
                act = act * gates[layer][(slice(None), *pos[layer + 1], c)]
            phi = np.array([xs[(s, *pos[0])] for s in range(len(xs))]) * act / D
            full.append(phi)
            phi_cls = phi_cls + phi
            v, c_prev = 1.0, 0
            for layer, (k, c) in enumerate(cls):
                v *= value[layer][k, c_prev, c]
                c_prev = c
            vals.add(v * value[-1][c_prev, 0])
        assert len(vals) == 1  # the D rotated paths share their weights
        shared.append(phi_cls)
        values.append(vals.pop())
    return np.array(full), np.array(shared), np.array(values)


@pytest.mark.parametrize(("mode", "gate", "shape"), NETS)
def test_forward_equals_explicit_loops(mode, gate, shape):
    net = make_conv_dgn(shape, 2, 3, mode=mode, gate=gate, seed=3, n_examples=4)
    x = _x(4, math.prod(shape))
    np.testing.assert_allclose(net(x).numpy()[:, 0], _forward_loops(net, x), rtol=RTOL)


@pytest.mark.parametrize(("mode", "gate", "shape"), NETS)
def test_npf_npv_match_path_enumeration_with_shared_weights(mode, gate, shape):
    n = 4
    net = make_conv_dgn(shape, 2, 3, mode=mode, gate=gate, seed=7, n_examples=n)
    x = _x(n, math.prod(shape), seed=1)
    full_e, phi_e, v_e = _enumerate(net, x)
    phi, v = conv_path_features(net, x), conv_path_value(net)
    assert phi.shape == (num_paths(net), n) and v.shape == (num_paths(net),)
    np.testing.assert_allclose(phi, phi_e, rtol=RTOL, atol=1e-15)
    np.testing.assert_allclose(conv_path_features(net, x, shared=False), full_e, atol=1e-15)
    np.testing.assert_allclose(v, v_e, rtol=RTOL, atol=1e-15)
    np.testing.assert_array_equal(neural_path_features(net, x), phi)  # dispatch
    np.testing.assert_array_equal(neural_path_value(net), v)
    y = net(x).numpy()[:, 0]
    np.testing.assert_allclose(phi.T @ v, y, rtol=RTOL, atol=1e-15)  # Prop. 2.1, shared
    v_full = np.repeat(v, math.prod(shape))  # every rotation carries its class's value
    np.testing.assert_allclose(full_e.T @ v_full, y, rtol=RTOL, atol=1e-15)


@pytest.mark.parametrize(("mode", "gate", "shape"), NETS)
def test_conv_npk_equals_phi_t_phi(mode, gate, shape):
    n = 5
    net = make_conv_dgn(shape, 2, 3, mode=mode, gate=gate, seed=2, n_examples=n)
    x = _x(n, math.prod(shape), seed=3)
    _, phi_e, _ = _enumerate(net, x)
    np.testing.assert_allclose(
        conv_path_kernel(net, x, chunk=2), phi_e.T @ phi_e, rtol=RTOL, atol=1e-14
    )


def _rotate(x, shape, r):
    img = x.reshape(x.shape[0], *shape)
    return torch.roll(img, shifts=r, dims=tuple(range(1, 1 + len(shape)))).reshape(x.shape)


@pytest.mark.parametrize(
    ("mode", "gate"), [("relu", None), ("dnpfl", Gate("soft", beta=2.0)), ("galu", None)]
)
def test_npk_is_a_sum_over_rotations_and_rotation_invariant(mode, gate):
    """Gates from a circular convolution rotate with the input, hence: phi_bar, y, H_bar and
    the NTK are invariant, and H_bar(x, x') = sum_r <phi_x, phi_{rot_r x'}> (full paths)."""
    shape, n = (3, 4), 3
    net = make_conv_dgn(shape, 2, 3, mode=mode, gate=gate, seed=5)
    x = _x(n, 12, seed=4)
    xr = _rotate(x, shape, (1, 3))
    np.testing.assert_allclose(conv_path_features(net, xr), conv_path_features(net, x), atol=1e-15)
    np.testing.assert_allclose(net(xr).numpy(), net(x).numpy(), rtol=RTOL, atol=1e-15)
    h = conv_path_kernel(net, x)
    both = torch.cat([x, xr])
    np.testing.assert_allclose(conv_path_kernel(net, both)[:n, n:], h, rtol=RTOL, atol=1e-14)
    k = neural_tangent_kernel(net, both).total
    np.testing.assert_allclose(k[:n, n:], k[:n, :n], rtol=1e-9, atol=1e-13)
    full = conv_path_features(net, x, shared=False)
    by_rotation = sum(
        full.T @ conv_path_features(net, _rotate(x, shape, r), shared=False)
        for r in _positions(shape)
    )
    np.testing.assert_allclose(h, by_rotation, rtol=RTOL, atol=1e-14)


@pytest.mark.parametrize(("mode", "gate", "shape"), NETS)
def test_ntk_and_split_equal_autograd(mode, gate, shape):
    n = 4
    net = make_conv_dgn(shape, 2, 3, mode=mode, gate=gate, seed=4, n_examples=n)
    x = _x(n, math.prod(shape), seed=2)
    k = neural_tangent_kernel(net, x, chunk_size=3)
    j = autograd_rows(net, x, net.trainable())
    np.testing.assert_allclose(k.total, j @ j.T, rtol=RTOL, atol=1e-14)
    untied = net.clone(mode="dnpfl") if net.tied else net
    jv = autograd_rows(untied, x, list(untied.value))
    np.testing.assert_allclose(k.value, jv @ jv.T, rtol=RTOL, atol=1e-14)
    if gate is not None and gate.kind == "soft":
        jf = autograd_rows(untied, x, list(untied.feature))
        np.testing.assert_allclose(k.feature, jf @ jf.T, rtol=RTOL, atol=1e-14)
        np.testing.assert_allclose(k.cross, jv @ jf.T + jf @ jv.T, rtol=RTOL, atol=1e-14)
    else:
        assert not np.any(k.feature)


def _vtk_enumerated(net):
    """V_bar over path classes, dv(p)/dtheta written out: shared weights add up."""
    value = [w.numpy() for w in net.value]
    offsets = np.concatenate([[0], np.cumsum([w.size for w in value])])
    per_layer = [
        list(itertools.product(range(len(net.offsets)), range(c))) for c in net.channels[1:-1]
    ]
    rows = []
    for cls in itertools.product(*per_layer):
        idx, factors, c_prev = [], [], 0
        for layer, (k, c) in enumerate(cls):
            idx.append(offsets[layer] + np.ravel_multi_index((k, c_prev, c), value[layer].shape))
            factors.append(value[layer][k, c_prev, c])
            c_prev = c
        idx.append(offsets[-2] + c_prev)
        factors.append(value[-1][c_prev, 0])
        row = np.zeros(offsets[-1])
        for m, i in enumerate(idx):
            row[i] += np.prod([f for q, f in enumerate(factors) if q != m])
        rows.append(row)
    g = np.array(rows)
    return g @ g.T


@pytest.mark.parametrize(
    ("mode", "gate"),
    [("relu", None), ("frnpf_di", Gate("soft", beta=1.5)), ("frg", Gate("bernoulli"))],
)
def test_prop31_with_shared_weights(mode, gate):
    """K^V = Phi_bar^T V_bar Phi_bar (Prop. 3.1 of NPF/NPK over path classes)."""
    n = 5
    net = make_conv_dgn((4,), 2, 3, mode=mode, gate=gate, seed=6, n_examples=n)
    x = _x(n, 4, seed=7)
    vtk = value_tangent_kernel(net)
    np.testing.assert_allclose(vtk, _vtk_enumerated(net), rtol=RTOL, atol=1e-15)
    phi = conv_path_features(net, x)
    k = neural_tangent_kernel(net, x)
    np.testing.assert_allclose(k.value, phi.T @ vtk @ phi, rtol=RTOL, atol=1e-14)


@pytest.mark.parametrize(("channels", "depth"), [(1, 3), (2, 2)])
def test_expected_ntk_is_d_sigma_h_bar_exactly(channels, depth):
    """Thm. 5.1 of NPF/NPK / Thm. 2.2 of DGN with shared weights: over all +-sigma sign
    patterns of the value weights (gates frozen, FRNPF), E[K0] = d sigma^(2(d-1)) H_bar."""
    sigma = 0.7
    base = make_conv_dgn((3,), channels, depth, mode="frnpf_ii", seed=1, sigma=sigma)
    x = _x(4, 3, seed=8)
    shapes = [tuple(v.shape) for v in base.value]
    sizes = [math.prod(s) for s in shapes]
    total = np.zeros((4, 4))
    count = 0
    for signs in itertools.product((-1.0, 1.0), repeat=sum(sizes)):
        flat = sigma * torch.tensor(signs, dtype=torch.float64)
        parts = torch.split(flat, sizes)
        value = tuple(p.reshape(s) for p, s in zip(parts, shapes, strict=True))
        net = ConvDGN("frnpf_ii", base.gate, base.feature, value, (3,), 3, None, sigma)
        total += neural_tangent_kernel(net, x).total
        count += 1
    expected = depth * sigma ** (2 * (depth - 1)) * conv_path_kernel(base, x)
    np.testing.assert_allclose(total / count, expected, rtol=1e-12, atol=1e-14)


def test_training_and_flnpf_gates():
    x, y = make_dataset("digits47", n=40, seed=0)
    relu = make_conv_dgn((8, 8), 3, 3, seed=0)
    res = train_dgn(relu, x, y, epochs=5, lr=3e-2)
    assert res.losses[-1] < res.losses[0]
    fl = make_conv_dgn((8, 8), 3, 3, mode="flnpf", source=res.net, seed=1)
    for a, b in zip(fl.gates(x), res.net.gates(x), strict=True):
        assert torch.equal(a, b)
    soft = make_conv_dgn((8, 8), 3, 3, mode="dnpfl", gate=Gate("soft"), seed=0)
    trained = train_dgn(soft, x, y, epochs=5, lr=3e-2).net
    assert not torch.equal(trained.feature[0], soft.feature[0])  # the gates learn


def test_conv_errors():
    with pytest.raises(DGNSpecError, match=r"kernel: got 2, expected an odd integer"):
        make_conv_dgn((8, 8), 3, 3, kernel=2)
    with pytest.raises(DGNSpecError, match=r"image_shape: got \(2, 2, 2\)"):
        make_conv_dgn((2, 2, 2), 3, 3)
    with pytest.raises(DGNSpecError, match=r"channels: got 0"):
        make_conv_dgn((8,), 0, 3)
    net = make_conv_dgn((8, 8), 3, 3)
    with pytest.raises(DGNSpecError, match=r"x: got shape \(2, 63\), expected \(n, d_in=64\)"):
        net(_x(2, 63))
    with pytest.raises(DGNSpecError, match=r"use conv_path_kernel"):
        neural_path_kernel(net, _x(2, 64))
    with pytest.raises(DGNSpecError, match=r"value_ntk_layerwise is for fully connected"):
        value_ntk_layerwise(net, _x(2, 64))
    with pytest.raises(DGNSpecError, match=r"source: mode 'flnpf' needs a 'relu' ConvDGN"):
        make_conv_dgn((8, 8), 3, 3, mode="flnpf")
    with pytest.raises(DGNSpecError, match=r"value\[0\]: got shape \(9, 2, 3\)"):
        ConvDGN("relu", Gate(), (), (torch.zeros(9, 2, 3), torch.zeros(3, 1)), (8, 8))
    with pytest.raises(DGNSpecError, match=r"would list .* path entries"):
        conv_path_features(make_conv_dgn((8, 8), 16, 5), _x(10, 64))
