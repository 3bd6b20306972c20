"""Exact expected SD chains vs brute force over all 2^L masks, symbolic and path forms."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import sympy as sp

from gdln import GdlnError
from gdln.sd import (
    MASK_CONVENTIONS,
    SURVIVAL_MODES,
    MaskConvention,
    StochasticDepthError,
    brute_force_chain,
    expected_chain,
    expected_chain_symbolic,
    expected_gate_product,
    expected_path_loss,
    expected_sd_flow,
    expected_sd_gd,
    mode_for_budget,
    simulate_sd_gd,
    survival_probabilities,
)

CASES = list(itertools.product(range(1, 11), ["unscaled", "inverted"], ["plain", "stable"]))


def _random_chain(L: int, seed: int, modes: int = 3):
    rng = np.random.default_rng(seed)
    b = rng.normal(scale=0.6, size=(L, modes))
    p = rng.uniform(0.05, 1.0, size=L)
    s = rng.uniform(0.5, 3.0, size=modes)
    d = rng.uniform(0.2, 2.0, size=modes)
    a = rng.uniform(0.5, 1.5, size=modes)
    return b, p, s, d, a


@pytest.mark.parametrize(("L", "mask", "scaling"), CASES)
def test_exact_expected_loss_and_gradient_equal_enumeration_of_all_masks(L, mask, scaling):
    b, p, s, d, a = _random_chain(L, seed=L)
    exact = expected_chain(b, p, s=s, d=d, a=a, c=0.8, scaling=scaling, mask=mask)
    loss, grad = brute_force_chain(b, p, s=s, d=d, a=a, c=0.8, scaling=scaling, mask=mask)
    assert exact.loss == pytest.approx(loss, rel=1e-12, abs=1e-13)
    np.testing.assert_allclose(exact.grad, grad, rtol=1e-12, atol=1e-13)
    assert isinstance(exact.loss, float)


def test_vector_b_gives_vector_gradient_and_paper_moments():
    # E[F] = prod(1 + p b), E[F^2] = prod(1 + 2 p b + p b^2) for the unscaled plain chain
    b = np.array([0.3, -0.7, 1.1])
    p = np.array([0.9, 0.4, 0.6])
    e = expected_chain(b, p, s=1.0)
    assert e.grad.shape == (3,)
    assert e.mean[0] == pytest.approx(np.prod(1 + p * b), rel=1e-14)
    assert e.second[0] == pytest.approx(np.prod(1 + 2 * p * b + p * b**2), rel=1e-14)


def test_gradient_equals_central_differences():
    b, p, s, d, a = _random_chain(6, seed=11)
    e = expected_chain(b, p, s=s, d=d, a=a)
    h = 1e-6
    for idx in [(0, 0), (3, 1), (5, 2)]:
        bp, bm = b.copy(), b.copy()
        bp[idx] += h
        bm[idx] -= h
        fd = expected_chain(bp, p, s=s, d=d, a=a).loss - expected_chain(bm, p, s=s, d=d, a=a).loss
        assert e.grad[idx] == pytest.approx(fd / (2 * h), rel=1e-7, abs=1e-9)


def test_zero_factor_does_not_break_the_gradient():
    # 1 + p b = 0 for block 0: a division-based gradient would return nan or miss terms
    b = np.array([-2.0, 0.5, 0.3])
    p = np.array([0.5, 0.7, 0.2])
    e = expected_chain(b, p, s=1.0)
    _, grad = brute_force_chain(b, p, s=1.0)
    np.testing.assert_allclose(e.grad, grad, rtol=1e-12, atol=1e-14)


def test_path_enumeration_over_2_to_the_L_paths_agrees_with_product_form():
    # every path picks, in each block, the always-on skip edge or the gated residual edge
    L = 5
    rng = np.random.default_rng(3)
    b = rng.normal(scale=0.5, size=L)
    p = rng.uniform(0.1, 1.0, size=L)
    s, d = 1.7, 0.6
    for mask in MASK_CONVENTIONS:
        paths = [
            tuple(f"r{i}" if bit else f"k{i}" for i, bit in enumerate(bits))
            for bits in itertools.product((0, 1), repeat=L)
        ]
        weights = {f"r{i}": b[i] for i in range(L)}
        survival = {f"r{i}": p[i] for i in range(L)}
        P = len(paths)
        loss = expected_path_loss(
            paths, weights, survival, np.full(P, s), np.full((P, P), d), mask=mask
        )
        assert loss == pytest.approx(expected_chain(b, p, s=s, d=d, mask=mask).loss, rel=1e-12)


@pytest.mark.parametrize("mask", ["unscaled", "inverted"])
def test_gate_product_expectation_equals_enumeration_over_edge_states(mask):
    rng = np.random.default_rng(5)
    edges = [f"e{i}" for i in range(6)]
    survival = {e: float(rng.uniform(0.1, 1.0)) for e in edges}
    conv = MaskConvention(mask)
    for trial in range(20):
        j = [e for e in edges if rng.random() < 0.5]
        q = [e for e in edges if rng.random() < 0.5] + (["fixed"] if trial % 2 else [])
        brute = 0.0
        for bits in itertools.product((0.0, 1.0), repeat=len(edges)):
            prob = np.prod(
                [
                    survival[e] if bit else 1 - survival[e]
                    for e, bit in zip(edges, bits, strict=True)
                ]
            )
            g = {
                e: float(conv.gate_value(np.array(bit), survival[e]))
                for e, bit in zip(edges, bits, strict=True)
            }
            gj = np.prod([g[e] for e in j])
            gq = np.prod([g[e] for e in q if e != "fixed"])
            brute += prob * gj * gq
        assert expected_gate_product(j, q, survival, mask=mask) == pytest.approx(brute, rel=1e-12)


def test_depth_1000_runs_and_matches_log_domain_formula_and_limits():
    L = 1000
    rng = np.random.default_rng(0)
    b = rng.normal(scale=1.0, size=(L, 2))
    p = survival_probabilities("linear", L, p_L=0.5)
    e = expected_chain(b, p, s=[1.0, 2.0], d=[1.0, 0.5], scaling="stable")
    kappa = 1 / np.sqrt(L)
    mean_log = np.exp(np.sum(np.log(1 + kappa * p[:, None] * b), axis=0))
    second_log = np.exp(
        np.sum(np.log(1 + 2 * kappa * p[:, None] * b + kappa**2 * p[:, None] * b**2), axis=0)
    )
    np.testing.assert_allclose(e.mean, mean_log, rtol=1e-10)
    np.testing.assert_allclose(e.second, second_log, rtol=1e-10)
    assert np.all(np.isfinite(e.grad))
    # all blocks on: no randomness, E f^2 = (E f)^2 and the loss is the plain network's loss
    full = expected_chain(b[:, 0], np.ones(L), s=1.0, scaling="stable")
    f = np.prod(1 + kappa * b[:, 0])
    assert full.loss == pytest.approx(-f + 0.5 * f**2, rel=1e-10)
    # all blocks off: only the skip path, f = 1
    none = expected_chain(b[:, 0], np.zeros(L), s=1.0, scaling="stable")
    assert none.loss == pytest.approx(-0.5, rel=1e-14)
    assert np.all(none.grad == 0.0)  # a block that never survives is never trained


@pytest.mark.parametrize("mask", ["unscaled", "inverted"])
@pytest.mark.parametrize("scaling", ["plain", "stable"])
def test_symbolic_form_equals_symbolic_sum_over_all_masks(mask, scaling):
    L = 3
    ch = expected_chain_symbolic(L, scaling=scaling, mask=mask)
    brute = sp.Integer(0)
    for bits in itertools.product((0, 1), repeat=L):
        prob = sp.Integer(1)
        f = sp.Integer(1)
        for bit, bl, pl in zip(bits, ch.b, ch.p, strict=True):
            prob *= pl if bit else 1 - pl
            gate = bit if mask == "unscaled" else sp.Integer(bit) / pl
            f *= 1 + ch.kappa * gate * bl
        brute += prob * (-ch.s * f + ch.d * f**2 / 2)
    assert sp.simplify(sp.expand(brute - ch.loss)) == 0


def test_symbolic_gradient_evaluates_to_the_numeric_gradient():
    L = 4
    ch = expected_chain_symbolic(L, scaling="stable", mask="unscaled")
    rng = np.random.default_rng(2)
    b = rng.normal(size=L)
    p = rng.uniform(0.2, 1, size=L)
    subs = {
        **dict(zip(ch.b, b, strict=True)),
        **dict(zip(ch.p, p, strict=True)),
        ch.s: 1.3,
        ch.d: 0.7,
        ch.kappa: 1 / np.sqrt(L),
    }
    sym = np.array([float(g.subs(subs)) for g in ch.gradient()])
    num = expected_chain(b, p, s=1.3, d=0.7, scaling="stable").grad
    np.testing.assert_allclose(sym, num, rtol=1e-12)
    assert float(ch.loss.subs(subs)) == pytest.approx(
        expected_chain(b, p, s=1.3, d=0.7, scaling="stable").loss, rel=1e-12
    )


def test_survival_modes_follow_their_definitions():
    L = 10
    np.testing.assert_allclose(survival_probabilities("uniform", L, p_L=0.3), np.full(L, 0.3))
    lin = survival_probabilities("linear", L, p_L=0.2)
    np.testing.assert_allclose(lin, [1 - (i / L) * 0.8 for i in range(1, L + 1)])
    sens = np.array([3.0, -1.0, 2.0, 0.5])
    p = survival_probabilities("sensemode", 4, sensitivities=sens, p_min=0.2)
    # |S| = [3, 1, 2, 0.5]: largest -> 1, smallest -> p_min, linear in between
    np.testing.assert_allclose(p, 0.2 + 0.8 * (np.abs(sens) - 0.5) / 2.5)
    prop = survival_probabilities(
        "sensemode_proportional", 4, sensitivities=[10.0, 1, 1, 1], budget=2.0
    )
    assert prop.sum() == pytest.approx(2.0)
    assert prop[0] == 1.0 and np.allclose(prop[1:], 1 / 3)


@pytest.mark.parametrize("mode", ["uniform", "linear", "sensemode", "sensemode_proportional"])
def test_mode_for_budget_meets_the_budget(mode):
    L = 20
    sens = np.random.default_rng(1).uniform(0, 1, L) ** 3
    p = mode_for_budget(mode, L, 0.8 * L, sensitivities=sens)
    assert p.sum() == pytest.approx(0.8 * L, rel=1e-12)
    assert np.all((p >= 0) & (p <= 1))


def test_expected_gd_step_is_the_average_of_one_masked_step_over_all_masks():
    L = 6
    b, p, s, d, _ = _random_chain(L, seed=9, modes=2)
    lr = 0.05
    step = expected_sd_gd(b, p, lr=lr, steps=1, s=s, d=d).series["b"][1]
    _, grad = brute_force_chain(b, p, s=s, d=d)  # E over masks of the masked gradient
    np.testing.assert_allclose(step, b - lr * grad, rtol=1e-12)


def test_expected_gd_converges_to_the_expected_flow_at_first_order():
    b0 = np.full((5, 2), 0.05)
    p = survival_probabilities("uniform", 5, p_L=0.6)
    chain = {"s": [2.0, 1.0], "d": [1.0, 1.0]}
    flow = expected_sd_flow(b0, p, [0.0, 2.0], **chain).series["b"][-1]
    errs = []
    for lr in (0.02, 0.01):
        gd = expected_sd_gd(b0, p, lr=lr, steps=round(2.0 / lr), **chain).series["b"][-1]
        errs.append(np.abs(gd - flow).max())
    assert errs[1] < errs[0]
    assert errs[0] / errs[1] == pytest.approx(2.0, rel=0.15)  # Euler: error ~ lr


def test_one_simulated_step_averages_to_the_expected_map_within_monte_carlo_error():
    L, runs = 5, 4000
    b, p, s, d, _ = _random_chain(L, seed=4, modes=2)
    sim = simulate_sd_gd(b, p, lr=0.1, steps=1, runs=runs, seed=1, s=s, d=d).series["b"][1]
    ref = expected_sd_gd(b, p, lr=0.1, steps=1, s=s, d=d).series["b"][1]
    se = sim.std(axis=0, ddof=1) / np.sqrt(runs)
    # 5 standard errors: a false alarm on any of the 10 entries has probability < 1e-5
    assert np.all(np.abs(sim.mean(axis=0) - ref) <= 5 * se + 1e-15)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: survival_probabilities("uniform", 4, p_L=1.5), r"p_L = 1\.5 is outside \[0, 1\]"),
        (
            lambda: survival_probabilities("bogus", 4, p_L=0.5),
            r"mode = 'bogus' is not a survival mode",
        ),
        (lambda: survival_probabilities("linear", 4), r"survival mode 'linear' needs p_L"),
        (lambda: survival_probabilities("uniform", 0, p_L=0.5), r"L = 0 is not a depth"),
        (
            lambda: survival_probabilities("per_layer", 3, p=[0.5, 0.5]),
            r"p has shape \(2,\); expected \(3,\)",
        ),
        (
            lambda: expected_chain([0.1, 0.2], [0.5, -0.1], s=1.0),
            r"p\[1\] = -0\.1 is outside \[0, 1\]",
        ),
        (
            lambda: expected_chain([0.1, 0.2], [0.5, 0.0], s=1.0, mask="inverted"),
            r"p\[1\] = 0 cannot be used with the inverted mask",
        ),
        (
            lambda: expected_chain([0.1], [0.5], s=1.0, mask="dropout"),
            r"mask = 'dropout' is not a mask convention",
        ),
        (
            lambda: expected_chain([0.1], [0.5], s=1.0, scaling="wide"),
            r"scaling = 'wide' is not a residual scaling",
        ),
        (lambda: expected_chain([0.1, 0.2], [0.5], s=1.0), r"p has shape \(1,\); expected \(2,\)"),
        (
            lambda: expected_chain(np.zeros((2, 2, 2)), [0.5, 0.5], s=1.0),
            r"b has shape \(2, 2, 2\)",
        ),
        (
            lambda: mode_for_budget("linear", 10, 2.0),
            r"budget = 2\.0 is below the smallest average depth",
        ),
        (
            lambda: mode_for_budget("uniform", 10, 12.0),
            r"budget = 12\.0 is not an average depth of 10 blocks",
        ),
        (lambda: brute_force_chain(np.zeros(21), np.ones(21), s=1.0), r"L = 21 is too deep"),
        (
            lambda: expected_sd_gd([0.1], [0.5], lr=-1.0, steps=2, s=1.0),
            r"lr = -1\.0 is not a positive",
        ),
        (
            lambda: expected_sd_gd([0.1], [0.5], lr=0.1, steps=2, s=1.0, beta=2),
            r"unknown chain setting",
        ),
    ],
)
def test_errors_name_the_argument_the_value_and_what_was_expected(call, match):
    with pytest.raises(StochasticDepthError, match=match) as info:
        call()
    assert isinstance(info.value, GdlnError) and isinstance(info.value, ValueError)


@pytest.mark.parametrize("mask", ["unscaled", "inverted"])
def test_full_linear_resnet_expected_loss_equals_enumeration_without_alignment(mask):
    from gdln.sd import expected_linear_resnet

    rng = np.random.default_rng(8)
    L, D, N, n_out = 6, 3, 4, 2
    W = rng.normal(scale=0.4, size=(L, N, N))
    win = rng.normal(size=(N, D))
    wout = rng.normal(size=(n_out, N))
    A = rng.normal(size=(D, D))
    sx = A @ A.T / D + 0.1 * np.eye(D)
    syx = rng.normal(size=(n_out, D))
    p = rng.uniform(0.2, 1.0, size=L)
    kappa = 1 / np.sqrt(L)
    ex = expected_linear_resnet(
        W, p, sx, syx, w_in=win, w_out=wout, trace_yy=2.5, scaling="stable", mask=mask
    )

    def masked_loss(Wb, gates):
        F = win
        for ell in range(L):
            F = F + kappa * gates[ell] * Wb[ell] @ F
        F = wout @ F
        return 1.25 - np.trace(F @ syx.T) + 0.5 * np.trace(F @ sx @ F.T)

    conv = MaskConvention(mask)
    brute = 0.0
    for bits in itertools.product((0.0, 1.0), repeat=L):
        bits = np.array(bits)
        prob = np.prod(np.where(bits == 1, p, 1 - p))
        brute += prob * masked_loss(W, conv.gate_value(bits, p))
    assert ex.loss == pytest.approx(brute, rel=1e-12)
    assert ex.average_loss == pytest.approx(masked_loss(W, conv.mean(p)), rel=1e-12)
    # gradient in one block entry by central differences of the enumerated loss
    h = 1e-6
    for idx in [(0, 1, 2), (5, 3, 0)]:
        Wp, Wm = W.copy(), W.copy()
        Wp[idx] += h
        Wm[idx] -= h
        fp = sum(
            np.prod(np.where(np.array(bits) == 1, p, 1 - p))
            * (
                masked_loss(Wp, conv.gate_value(np.array(bits), p))
                - masked_loss(Wm, conv.gate_value(np.array(bits), p))
            )
            for bits in itertools.product((0.0, 1.0), repeat=L)
        )
        assert ex.grad_blocks[idx] == pytest.approx(fp / (2 * h), rel=1e-6, abs=1e-9)


def test_light_tables_name_exactly_the_rules_and_conventions_behind_them():
    from gdln.sd import _masks, _survival

    assert set(SURVIVAL_MODES) == set(_survival._RULES)
    assert set(MASK_CONVENTIONS) == set(_masks._DIVIDES_BY_P)
    assert all(isinstance(v, str) and v for v in [*SURVIVAL_MODES.values()])
    for name, line in MASK_CONVENTIONS.items():
        assert MaskConvention(name).description == line


def test_every_survival_mode_is_accepted_by_survival_probabilities():
    settings = {"p_L": 0.5, "p": [0.9, 0.8, 0.7], "sensitivities": [1.0, 2.0, 3.0]}
    settings |= {"p_min": 0.1, "budget": 2.0}
    for mode in SURVIVAL_MODES:
        p = survival_probabilities(mode, 3, **settings)
        assert p.shape == (3,) and np.all((p >= 0) & (p <= 1)), mode


@pytest.mark.parametrize("mask", sorted(MASK_CONVENTIONS))
def test_mask_moments_equal_the_average_over_both_gate_states(mask):
    """E[g], E[g^2] and Var[g] of the multiplier g(delta), delta ~ Bernoulli(p), summed
    over delta in {0, 1}."""
    conv = MaskConvention(mask)
    p = np.array([0.1, 0.5, 0.9, 1.0])
    on, off = conv.gate_value(np.ones(4), p), conv.gate_value(np.zeros(4), p)
    mean = p * on + (1 - p) * off
    second = p * on**2 + (1 - p) * off**2
    np.testing.assert_allclose(conv.mean(p), mean, rtol=1e-15)
    np.testing.assert_allclose(conv.second_moment(p), second, rtol=1e-15)
    np.testing.assert_allclose(conv.variance(p), second - mean**2, atol=1e-15)


def test_unknown_mask_convention_is_refused_by_name():
    with pytest.raises(StochasticDepthError, match=r"mask = 'dropout' is not a mask convention"):
        MaskConvention("dropout")


def test_name_tables_import_no_numerical_library():
    """The CLI builds its --help choices from these tables: reading them must not load
    numpy, torch, scipy or sympy."""
    import subprocess
    import sys

    code = (
        "import sys, gdln.kernels as k, gdln.sd as sd\n"
        "names = (k.MODES, k.DATASETS, k.ACTIVATIONS, sd.SURVIVAL_MODES, sd.MASK_CONVENTIONS)\n"
        "assert all(names)\n"
        "print(sorted(m for m in ('numpy', 'torch', 'scipy', 'sympy') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
