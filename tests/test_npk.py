"""NPF, NPV, overlap and NPK against explicit path enumeration (gdln.kernels)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from gdln.kernels import DGNSpecError, Gate, make_dgn
from gdln.kernels._npk import (
    neural_path_features,
    neural_path_kernel,
    neural_path_value,
    normalised_nu,
    num_paths,
    overlap,
)

RTOL = 1e-10

NETS = [
    ("relu", None, (2, 3, 3)),
    ("relu", Gate("soft", beta=2.0, epsilon=0.1), (3, 2, 4)),
    ("frnpf_ii", None, (2, 3, 3)),
    ("dnpfl", Gate("soft"), (3, 3, 2)),
    ("frg", Gate("bernoulli", p=0.6), (2, 3, 4)),
]


def _x(n, d_in, seed=0):
    return torch.randn(n, d_in, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _enumerate(net, x):
    """Explicit path enumeration: Phi (P, n) and v (P,) by looping over every path."""
    d_in, *hidden, _ = net.widths
    gates = [g.numpy() for g in net.gates(x)]
    value = [w.numpy() for w in net.value]
    xs = x.numpy()
    phi, v = [], []
    for path in itertools.product(range(d_in), *(range(w) for w in hidden)):
        activity = np.ones(len(xs))
        for layer, unit in enumerate(path[1:]):
            activity = activity * gates[layer][:, unit]
        phi.append(xs[:, path[0]] * activity)
        strength = 1.0
        nodes = [*path, 0]
        for layer, W in enumerate(value):
            strength *= W[nodes[layer], nodes[layer + 1]]
        v.append(strength)
    return np.array(phi), np.array(v)


@pytest.mark.parametrize(("mode", "gate", "shape"), NETS)
def test_npf_npv_match_enumeration_and_prop21(mode, gate, shape):
    d_in, w, d = shape
    n = 5
    net = make_dgn(d_in, w, d, mode=mode, gate=gate, seed=7, n_examples=n)
    x = _x(n, d_in)
    phi_e, v_e = _enumerate(net, x)
    phi, v = neural_path_features(net, x), neural_path_value(net)
    assert phi.shape == (num_paths(net), n) == phi_e.shape
    np.testing.assert_allclose(phi, phi_e, rtol=RTOL, atol=1e-14)
    np.testing.assert_allclose(v, v_e, rtol=RTOL, atol=1e-14)
    # Prop. 2.1: y = Phi^T v
    np.testing.assert_allclose(phi.T @ v, net(x).numpy().ravel(), rtol=RTOL, atol=1e-13)


@pytest.mark.parametrize(("mode", "gate", "shape"), NETS)
def test_npk_equals_sigma_hadamard_lambda_equals_phi_t_phi(mode, gate, shape):
    d_in, w, d = shape
    n = 6
    net = make_dgn(d_in, w, d, mode=mode, gate=gate, seed=3, n_examples=n)
    x = _x(n, d_in, seed=1)
    phi_e, _ = _enumerate(net, x)
    k = neural_path_kernel(net, x)
    np.testing.assert_allclose(k.kernel, phi_e.T @ phi_e, rtol=RTOL, atol=1e-12)
    np.testing.assert_allclose(k.input_gram, x.numpy() @ x.numpy().T, rtol=RTOL)
    # Def. 2.2: Lambda = (number of co-active paths over all inputs) / d_in
    xs = torch.ones(n, d_in, dtype=torch.float64)
    phi_ones, _ = _enumerate(net, xs) if mode != "frg" else (None, None)
    if phi_ones is not None:
        lam_paths = (phi_ones.T @ phi_ones) / d_in
        np.testing.assert_allclose(neural_path_kernel(net, xs).overlap, lam_paths, rtol=RTOL)
        # and the overlap computed for x equals that for ones: gates differ, so compare gates
    gates = net.gates(x)
    lam = overlap(gates)
    assert np.allclose(lam, k.overlap, rtol=RTOL)


def test_overlap_counts_active_paths_for_hard_gates():
    net = make_dgn(2, 4, 4, seed=11)
    x = _x(7, 2, seed=2)
    gates = [g.numpy().astype(bool) for g in net.gates(x)]
    lam = overlap(net.gates(x))
    for s in range(7):
        for t in range(7):
            count = sum(
                all(gates[layer][s, u] and gates[layer][t, u] for layer, u in enumerate(path))
                for path in itertools.product(range(4), repeat=3)
            )
            assert lam[s, t] == count


def test_depth_one_overlap_is_all_ones():
    net = make_dgn(3, 4, 1)
    x = _x(4, 3)
    k = neural_path_kernel(net, x)
    np.testing.assert_array_equal(k.overlap, np.ones((4, 4)))


def test_nu_is_y_solve_normalised_kernel():
    """nu = y^T (H / tr H)^{-1} y (Sec. 6 item 3 of NPF/NPK), by a linear solve."""
    rng = np.random.default_rng(0)
    a = rng.normal(size=(6, 6))
    h = a @ a.T + 0.1 * np.eye(6)
    y = rng.choice([-1.0, 1.0], size=6)
    expected = float(y @ np.linalg.solve(h / np.trace(h), y))
    got = normalised_nu(h, y)
    assert isinstance(got, float)
    assert got == pytest.approx(expected, rel=1e-10)
    # scale invariance: nu depends on H only through H / tr H
    assert normalised_nu(37.0 * h, y) == pytest.approx(got, rel=1e-10)


def test_nu_of_the_npk_by_enumeration():
    """nu of a DGN's NPK equals y^T (Phi^T Phi / tr)^{-1} y with Phi listed path by path."""
    net = make_dgn(3, 4, 3, seed=3)
    x = _x(6, 3, seed=5)
    y = np.where(np.arange(6) % 2 == 0, 1.0, -1.0)
    phi, _ = _enumerate(net, x)
    h = phi.T @ phi
    expected = float(y @ np.linalg.solve(h / np.trace(h), y))
    assert normalised_nu(neural_path_kernel(net, x).kernel, y) == pytest.approx(expected, rel=1e-8)


def test_npk_errors():
    net = make_dgn(3, 4, 3, d_out=2)
    with pytest.raises(DGNSpecError, match=r"net: got d_out=2, expected d_out=1"):
        neural_path_features(net, _x(2, 3))
    with pytest.raises(DGNSpecError, match=r"kernel, y: got shapes \(2, 2\) and \(3,\)"):
        normalised_nu(np.eye(2), np.ones(3))
    with pytest.raises(DGNSpecError, match=r"not positive definite"):
        normalised_nu(np.ones((2, 2)), np.array([1.0, -1.0]))
    with pytest.raises(DGNSpecError, match=r"trace is 0.0"):
        normalised_nu(np.zeros((2, 2)), np.ones(2))
    with pytest.raises(DGNSpecError, match=r"got no gate layers and no n"):
        overlap([])
    big = make_dgn(64, 128, 6)
    with pytest.raises(DGNSpecError, match=r"would list .* path entries"):
        neural_path_value(big)


def _exact_overlap(gates):
    """Lambda entry by entry as Python integers (0/1 gates: every Gram entry is an integer)."""
    grams = [np.rint(g.numpy() @ g.numpy().T).astype(np.int64) for g in gates]
    n = grams[0].shape[0]
    out = [[1] * n for _ in range(n)]
    for gram in grams:
        for i in range(n):
            for j in range(n):
                out[i][j] *= int(gram[i, j])
    return out


def test_deep_npk_is_finite_and_exact_with_a_stored_scale():
    # ReLU DGN of width 64 and depth 1000: Lambda reaches ~32^999, far beyond float64
    n, d_in = 5, 3
    net = make_dgn(d_in, 64, 1000, seed=0)
    x = _x(n, d_in, seed=2)
    gates = [g.detach() for g in net.gates(x)]
    assert set(np.unique(gates[0].numpy())) <= {0.0, 1.0}
    k = neural_path_kernel(net, x)
    assert np.all(np.isfinite(k.kernel)) and k.log_scale > 1000
    with np.errstate(over="ignore"):
        assert np.isinf(overlap(gates)).any()  # the plain product overflows
    exponent = round(k.log_scale / np.log(2.0))
    assert k.log_scale == exponent * np.log(2.0)
    exact = _exact_overlap(gates)
    # int / int is correctly rounded: the true overlap divided by 2^exponent
    lam = np.array([[e / 2**exponent for e in row] for row in exact])
    np.testing.assert_allclose(k.overlap, lam, rtol=1e-12, atol=0)
    np.testing.assert_allclose(k.kernel, k.input_gram * lam, rtol=1e-12, atol=0)
    # log-domain spectrum: every diagonal entry of Lambda, against exact integer logs
    logs = [math.log(exact[i][i]) for i in range(n)]
    got = [math.log(k.overlap[i, i]) + k.log_scale for i in range(n)]
    np.testing.assert_allclose(got, logs, rtol=1e-14)


def test_shallow_npk_is_stored_unscaled_and_scaling_keeps_the_spectrum():
    n, d_in = 6, 3
    x = _x(n, d_in, seed=3)
    shallow = make_dgn(d_in, 8, 4, seed=1)
    k = neural_path_kernel(shallow, x)
    assert k.log_scale == 0.0
    lam = np.ones((n, n))
    for g in shallow.gates(x):
        lam = lam * (g.detach().numpy() @ g.detach().numpy().T)
    np.testing.assert_array_equal(k.overlap, lam)
    # depth 150: the true kernel still fits in float64 (~32^149 = 2^745) but is stored scaled
    deep = make_dgn(d_in, 64, 150, seed=1)
    k = neural_path_kernel(deep, x)
    assert k.log_scale > 0
    plain = x.numpy() @ x.numpy().T * overlap([g.detach() for g in deep.gates(x)])
    assert np.all(np.isfinite(plain))
    np.testing.assert_allclose(k.kernel * np.exp(k.log_scale), plain, rtol=1e-12)
    np.testing.assert_allclose(
        k.eigenvalues() * np.exp(k.log_scale), np.linalg.eigvalsh(plain), rtol=1e-10
    )
