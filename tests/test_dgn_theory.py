"""Sec. 2 of the DGN paper: sympy closed forms, exact expectations, Monte Carlo checks.

Monte Carlo tolerances are 5 standard errors of the estimate, the standard error being the
sample standard deviation over sqrt(number of samples); with the handful of entries
compared per test the chance of a false failure is below 1e-5. Where it is cheap the
sample sizes are chosen so that a 3% bias of the estimator would lie > 6 standard errors
away (Lemma 2.3: 50 000 samples, Eq. (3): 10 000); the Monte Carlo samplers themselves
are also checked exactly, draw by draw, against the network's own NTK.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import sympy as sp
import torch

from gdln.kernels import DGN, DGNSpecError, Gate, bernoulli_gates, make_dgn
from gdln.kernels._dgn_theory import (
    d_sym,
    draw_value_weights,
    eq3_eigenvalues,
    eq3_eigenvalues_symbolic,
    expected_ntk,
    expected_ntk_factor_symbolic,
    expected_path_inner_symbolic,
    frg_overlap_mc,
    frg_overlap_symbolic,
    p_sym,
    path_norm_symbolic,
    sample_value_ntk,
    sigma_sym,
    value_ntk_samples,
    w_sym,
)
from gdln.kernels._dgn_variance import gram_variance_by_depth
from gdln.kernels._npk import overlap
from gdln.kernels._ntk import value_ntk_layerwise

Z = 5.0  # standard errors


def test_lemma_21_symbolic():
    for d in range(1, 6):
        assert sp.simplify(path_norm_symbolic(d) - d * sigma_sym ** (2 * (d - 1))) == 0
        for k in range(1, d + 1):
            for diff in itertools.combinations(range(1, d + 1), k):
                assert expected_path_inner_symbolic(d, diff) == 0
        assert sp.simplify(expected_path_inner_symbolic(d, []) - path_norm_symbolic(d)) == 0
    factor = expected_ntk_factor_symbolic()
    assert sp.simplify(factor - d_sym * sigma_sym ** (2 * d_sym - 2)) == 0


def test_theorem_22_exact_by_enumerating_all_sign_patterns():
    """E[K0 | gates] over all 2^10 weight sign patterns equals d sigma^(2(d-1)) (Sigma . lambda)."""
    sigma, d = 0.7, 3
    widths = [2, 2, 2, 1]
    x = np.array([[1.0, -0.5], [0.3, 2.0], [-1.2, 0.4]])
    feature = make_dgn(2, 2, 3, mode="galu", seed=3)
    gates = feature.gates(torch.as_tensor(x))
    shapes = list(itertools.pairwise(widths))
    sizes = [a * b for a, b in shapes]
    total = np.zeros((3, 3))
    count = 0
    for signs in itertools.product((-1.0, 1.0), repeat=sum(sizes)):
        flat = sigma * np.array(signs)
        value, start = [], 0
        for (a, b), size in zip(shapes, sizes, strict=True):
            value.append(torch.as_tensor(flat[start : start + size].reshape(a, b)))
            start += size
        net = DGN("frg", Gate("bernoulli"), (), tuple(value), gates, sigma)
        total += value_ntk_layerwise(net, torch.as_tensor(x))
        count += 1
    expected = expected_ntk(x, overlap(gates), d, sigma)
    np.testing.assert_allclose(total / count, expected, rtol=1e-12, atol=1e-13)


def test_value_ntk_samples_equal_the_network_ntk_draw_by_draw():
    """Batched K^V of each weight draw == value_ntk_layerwise of that network (exact)."""
    x = np.random.default_rng(3).normal(size=(5, 3))
    gen = torch.Generator().manual_seed(0)
    widths = [3, 4, 6, 1]
    shared = bernoulli_gates(5, widths[1:-1], 0.5, generator=gen)
    per_draw = [
        torch.stack(list(g))
        for g in zip(
            *[bernoulli_gates(5, widths[1:-1], 0.5, generator=gen) for _ in range(4)], strict=True
        )
    ]
    for init in ("bernoulli", "gaussian"):
        w = draw_value_weights(widths, sigma=0.8, n_samples=4, init=init, generator=gen)
        for gates in (shared, per_draw):
            ks = value_ntk_samples(x, gates, w)
            for r in range(4):
                g_r = tuple(g[r] if g.ndim == 3 else g for g in gates)
                net = DGN("frg", Gate("bernoulli"), (), tuple(t[r] for t in w), g_r, 0.8)
                np.testing.assert_allclose(
                    ks[r], value_ntk_layerwise(net, torch.as_tensor(x)), rtol=1e-12, atol=1e-14
                )


def test_draw_value_weights_scale():
    """+-sigma draws are exactly +-sigma; N(0, sigma^2) draws have variance sigma^2."""
    gen = torch.Generator().manual_seed(1)
    (w,) = draw_value_weights([40, 50], sigma=0.3, n_samples=200, init="bernoulli", generator=gen)
    assert torch.all(w.abs() == 0.3)
    assert abs(float((w > 0).double().mean()) - 0.5) <= Z * 0.5 / math.sqrt(w.numel())
    (g,) = draw_value_weights([40, 50], sigma=0.3, n_samples=200, init="gaussian", generator=gen)
    sq = (g**2).reshape(-1).numpy()
    # 4e5 squares: a 3% error of the scale (6% of the variance) is ~ 25 standard errors off
    assert abs(sq.mean() - 0.09) <= Z * sq.std(ddof=1) / math.sqrt(len(sq))


def test_sample_value_ntk_is_value_ntk_of_its_draws():
    x = np.random.default_rng(0).normal(size=(4, 3))
    gates = make_dgn(3, 6, 3, mode="galu", seed=1).gates(torch.as_tensor(x))
    for init in ("bernoulli", "gaussian"):
        ks = sample_value_ntk(x, gates, sigma=0.5, n_samples=7, init=init, seed=5)
        w = draw_value_weights(
            [3, 6, 6, 1],
            sigma=0.5,
            n_samples=7,
            init=init,
            generator=torch.Generator().manual_seed(5),
        )
        np.testing.assert_allclose(ks, value_ntk_samples(x, gates, w), rtol=1e-12)


def test_theorem_22_monte_carlo_gaussian_weights_galu_gates():
    sigma, d, w, n_samples = math.sqrt(2 / 20), 3, 20, 1000
    x = np.random.default_rng(0).normal(size=(4, 3))
    gates = make_dgn(3, w, d, mode="galu", seed=1).gates(torch.as_tensor(x))
    ks = sample_value_ntk(x, gates, sigma=sigma, n_samples=n_samples, init="gaussian", seed=2)
    mean = ks.mean(axis=0)
    sem = ks.std(axis=0, ddof=1) / math.sqrt(n_samples)
    expected = expected_ntk(x, overlap(gates), d, sigma)
    assert np.all(np.abs(mean - expected) <= Z * sem + 1e-12)


def test_lemma_23_symbolic_and_monte_carlo_measured_constant():
    lam_self, lam_cross = frg_overlap_symbolic()
    assert sp.simplify(lam_self - (p_sym * w_sym) ** (d_sym - 1)) == 0
    assert sp.simplify(lam_cross - (p_sym**2 * w_sym) ** (d_sym - 1)) == 0
    w, d, p = 12, 4, 0.5
    mc_self, mc_cross = frg_overlap_mc(w, d, p, n_samples=50_000, seed=0)
    ours_self = float(lam_self.subs({p_sym: p, w_sym: w, d_sym: d}))
    ours_cross = float(lam_cross.subs({p_sym: p, w_sym: w, d_sym: d}))
    assert abs(float(mc_self.mean) - ours_self) <= Z * float(mc_self.sem)
    assert abs(float(mc_cross.mean) - ours_cross) <= Z * float(mc_cross.sem)
    # The constants printed in Lemma 2.3, d (pw)^(d-1) and d (p^2 w)^(d-1), are rejected.
    assert abs(float(mc_self.mean) - d * ours_self) > Z * float(mc_self.sem)
    assert abs(float(mc_cross.mean) - d * ours_cross) > Z * float(mc_cross.sem)


def test_eq3_eigenvalues_symbolic():
    for n in (2, 3, 4):
        eig = eq3_eigenvalues_symbolic(n)
        big = 1 + (n - 1) * p_sym ** (d_sym - 1)
        small = 1 - p_sym ** (d_sym - 1)
        got = {sp.simplify(k - big) == 0: v for k, v in eig.items()}
        assert got == {True: 1, False: n - 1}
        assert any(sp.simplify(k - small) == 0 and v == n - 1 for k, v in eig.items())
    rho_max, rho_min = eq3_eigenvalues(200, 0.5, 4)
    numeric = np.linalg.eigvalsh(np.full((200, 200), 0.125) + 0.875 * np.eye(200))
    assert rho_max == pytest.approx(numeric[-1], rel=1e-12)
    assert rho_min == pytest.approx(numeric[0], rel=1e-12)


def test_lemma_23_overlap_mc_is_the_overlap_of_its_gates():
    """frg_overlap_mc averages overlap() of i.i.d. Bernoulli gates: check it exactly at p=1."""
    mc_self, mc_cross = frg_overlap_mc(5, 3, 1.0, n_samples=10, seed=0)
    assert float(mc_self.mean) == 25.0 and float(mc_cross.mean) == 25.0
    assert float(mc_self.sem) == 0.0


def test_eq3_monte_carlo_identical_inputs():
    """Experiment 1 setting: x_s = 1, FRG gates, sigma = 1/sqrt(pw): E[K0]/d is Eq. (3)."""
    n, w, d, p, n_samples = 3, 16, 3, 0.5, 10_000
    sigma = 1 / math.sqrt(p * w)
    x = np.ones((n, 1))
    gen = torch.Generator().manual_seed(0)
    gates = [(torch.rand(n_samples, n, w, generator=gen) < p).double() for _ in range(d - 1)]
    weights = draw_value_weights([1, w, w, 1], sigma=sigma, n_samples=n_samples, generator=gen)
    ks = value_ntk_samples(x, gates, weights) / d
    mean = ks.mean(axis=0)
    sem = ks.std(axis=0, ddof=1) / math.sqrt(n_samples)
    target = np.full((n, n), p ** (d - 1)) + (1 - p ** (d - 1)) * np.eye(n)
    assert np.all(np.abs(mean - target) <= Z * sem)


def test_variance_grows_with_depth_at_fixed_width():
    res = gram_variance_by_depth(5, [2, 3], n_samples=1000, seed=1)
    for rel, se in ((res.rel_var_diag, res.rel_var_diag_se), (res.rel_var_off, res.rel_var_off_se)):
        assert rel[1] - rel[0] > Z * math.hypot(se[0], se[1])


def test_theory_errors():
    with pytest.raises(DGNSpecError, match=r"d: got 0, expected an integer >= 1"):
        path_norm_symbolic(0)
    with pytest.raises(DGNSpecError, match=r"differing_layers: got \[4\], expected layers"):
        expected_path_inner_symbolic(3, [4])
    with pytest.raises(DGNSpecError, match=r"n: got 1, expected an integer >= 2"):
        eq3_eigenvalues_symbolic(1)
    with pytest.raises(DGNSpecError, match=r"x, overlap: got shapes \(2, 1\) and \(3, 3\)"):
        expected_ntk(np.ones((2, 1)), np.ones((3, 3)), 2, 1.0)
    with pytest.raises(DGNSpecError, match=r"n_samples: got 0"):
        sample_value_ntk(np.ones((2, 1)), [], sigma=1.0, n_samples=0)
    with pytest.raises(DGNSpecError, match=r"init: got 'uniform'"):
        sample_value_ntk(np.ones((2, 1)), [], sigma=1.0, n_samples=2, init="uniform")
    with pytest.raises(DGNSpecError, match=r"n_samples: got 1, expected an integer >= 2"):
        frg_overlap_mc(3, 2, 0.5, n_samples=1)
    with pytest.raises(DGNSpecError, match=r"depths: got 0"):
        gram_variance_by_depth(3, [0], n_samples=3)
    with pytest.raises(DGNSpecError, match=r"gates: got 0 layers, expected 1"):
        value_ntk_samples(
            np.ones((2, 1)), [], draw_value_weights([1, 3, 1], sigma=1.0, n_samples=2)
        )
    with pytest.raises(DGNSpecError, match=r"n_samples: got 0"):
        draw_value_weights([1, 3, 1], sigma=1.0, n_samples=0)
    with pytest.raises(DGNSpecError, match=r"init: got 'uniform'"):
        draw_value_weights([1, 3, 1], sigma=1.0, n_samples=2, init="uniform")
