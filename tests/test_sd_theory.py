"""The quantities of Hayou & Ayed against definitions, brute force, optimisers and MC."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize

from gdln.sd import (
    StochasticDepthError,
    bennett_u,
    bennett_u_inverse,
    brute_force_chain,
    chain_regulariser,
    chain_sensitivities,
    depth_concentration,
    gradient_growth,
    growth_rate,
    lindeberg_ratio,
    max_regularisation_mode,
    mode_for_budget,
    shapiro_pvalues,
    survival_probabilities,
)


def test_gradient_growth_is_the_product_of_Prop_1():
    p = survival_probabilities("linear", 7, p_L=0.3)
    q = gradient_growth(p)
    for ell in range(8):
        assert q[ell] == pytest.approx(np.prod([1 + p[k - 1] for k in range(ell + 1, 8)]))
    np.testing.assert_allclose(gradient_growth(L=5), 2.0 ** (5 - np.arange(6)))
    np.testing.assert_allclose(growth_rate(gradient_growth(np.full(9, 0.7))), 1.7)
    np.testing.assert_allclose(growth_rate(gradient_growth(L=9)), 2.0)
    np.testing.assert_allclose(gradient_growth(L=4, scaling="stable"), 1.25 ** (4 - np.arange(5)))


def test_uniform_mode_explodes_most_at_fixed_budget():
    # log(1 + x) is concave: prod(1 + p_k) at fixed sum p is largest for equal p_k
    L = 50
    uni = gradient_growth(mode_for_budget("uniform", L, 0.7 * L))[0]
    lin = gradient_growth(mode_for_budget("linear", L, 0.7 * L))[0]
    assert uni > lin


def test_bennett_inverse_is_an_inverse():
    y = np.array([0.0, 1e-6, 0.3, 2.0, 50.0])
    np.testing.assert_allclose(bennett_u(bennett_u_inverse(y)), y, rtol=1e-10, atol=1e-15)


def _depth_central_moments(p):
    r"""Variance and fourth central moment of $L_\delta=\sum_l\delta_l$, in closed form.

    Cumulants of independent terms add: a Bernoulli($p$) has $\kappa_2=p(1-p)$ and
    $\kappa_4=p(1-p)(1-6p(1-p))$, and $\mu_4=\kappa_4+3\kappa_2^2$.
    """
    v = p * (1 - p)
    k2, k4 = v.sum(), np.sum(v * (1 - 6 * v))
    return k2, k4 + 3 * k2**2


def test_depth_moments_helper_against_enumeration():
    p = np.array([0.9, 0.2, 0.55, 0.7])
    probs = {0: 1.0}
    for pl in p:  # distribution of the sum by convolution
        new = {}
        for k, w in probs.items():
            new[k] = new.get(k, 0.0) + w * (1 - pl)
            new[k + 1] = new.get(k + 1, 0.0) + w * pl
        probs = new
    k = np.array(list(probs))
    w = np.array(list(probs.values()))
    mean = np.sum(w * k)
    var, mu4 = _depth_central_moments(p)
    assert var == pytest.approx(np.sum(w * (k - mean) ** 2), rel=1e-12)
    assert mu4 == pytest.approx(np.sum(w * (k - mean) ** 4), rel=1e-12)


def test_lemma_1_mean_variance_and_bound_hold_by_monte_carlo():
    r"""Lemma 1 by Monte Carlo, each tolerance 5 standard errors of its estimator at this n.

    The standard errors are exact, not estimated from the sample: the mean has
    $\sqrt{v_p/n}$; the unbiased sample variance has
    $\mathrm{Var}\,s^2=\mu_4/n-v_p^2(n-3)/(n(n-1))$ (a standard identity for i.i.d.
    draws) with the fourth central moment $\mu_4$ of $L_\delta$ in closed form from its
    cumulants (:func:`_depth_central_moments`); the tail frequency is binomial. We use
    the exact $\mu_4$ rather than the sample's own fourth moment because it is available
    and does not itself fluctuate (the sample fourth moment would add its own error to the
    tolerance). Here $\mu_4/v_p^2=2.96$, so the Gaussian shortcut $\sqrt{2/(n-1)}\,v_p$
    would be almost right; the exact form needs no such assumption.
    """
    rng = np.random.default_rng(0)
    p = survival_probabilities("linear", 40, p_L=0.3)
    beta, n = 0.2, 20000
    c = depth_concentration(p, beta=beta)
    depth = (rng.random((n, p.size)) < p).sum(axis=1)
    var, mu4 = _depth_central_moments(p)
    assert var == pytest.approx(c.variance, rel=1e-12)
    assert abs(depth.mean() - c.mean) <= 5 * np.sqrt(c.variance / n)
    se_var = np.sqrt(mu4 / n - var**2 * (n - 3) / (n * (n - 1)))
    assert abs(depth.var(ddof=1) - c.variance) <= 5 * se_var
    outside = np.mean(np.abs(depth - c.mean) > c.bound)
    assert outside <= beta + 5 * np.sqrt(beta * (1 - beta) / n)


def test_lemma_1_uniform_mode_maximises_variance_and_bound_at_fixed_budget():
    rng = np.random.default_rng(1)
    L = 30
    for _ in range(200):
        p = rng.uniform(0, 1, L)
        uniform = np.full(L, p.mean())
        a, b = depth_concentration(p), depth_concentration(uniform)
        assert a.variance <= b.variance + 1e-12
        assert a.bound <= b.bound + 1e-9


def _avg_loss(pp, b, s, d, kappa):
    f = np.prod(1 + kappa * pp[:, None] * b, axis=0)
    return float(np.sum(-s * f + 0.5 * d * f**2))


@pytest.mark.parametrize("mask", ["unscaled", "inverted"])
def test_regulariser_decomposition_is_exact_for_linear_chains(mask):
    rng = np.random.default_rng(2)
    L = 7
    b = rng.normal(scale=0.7, size=(L, 2))
    p = rng.uniform(0.3, 1, L)
    s, d = np.array([1.0, 2.0]), np.array([1.0, 0.5])
    r = chain_regulariser(b, p, s=s, d=d, mask=mask, const=0.4)
    brute, _ = brute_force_chain(b, p, s=s, d=d, mask=mask, scaling="stable")
    assert r.expected_loss == pytest.approx(brute + 0.4, rel=1e-12)
    assert r.expected_loss == pytest.approx(r.average_loss + r.penalty_exact, rel=1e-12)
    assert r.variance_orders.sum() == pytest.approx(r.penalty_exact, rel=1e-12)
    assert r.variance_orders[0] == pytest.approx(r.penalty_first_order, rel=1e-12)


def test_paper_penalty_and_taylor_average_loss_match_finite_differences():
    rng = np.random.default_rng(3)
    L = 5
    kappa = 1 / np.sqrt(L)
    b = rng.normal(scale=0.7, size=(L, 2))
    p = rng.uniform(0.3, 1, L)
    s, d = np.array([1.0, 2.0]), np.array([1.0, 0.5])
    r = chain_regulariser(b, p, s=s, d=d)
    one, h = np.ones(L), 1e-4
    eye = np.eye(L)
    g = np.array(
        [
            (_avg_loss(one + h * e, b, s, d, kappa) - _avg_loss(one - h * e, b, s, d, kappa))
            / (2 * h)
            for e in eye
        ]
    )
    H = np.array(
        [
            [
                (
                    _avg_loss(one + h * ei + h * ej, b, s, d, kappa)
                    - _avg_loss(one + h * ei - h * ej, b, s, d, kappa)
                    - _avg_loss(one - h * ei + h * ej, b, s, d, kappa)
                    + _avg_loss(one - h * ei - h * ej, b, s, d, kappa)
                )
                / (4 * h * h)
                for ej in eye
            ]
            for ei in eye
        ]
    )
    D = p - 1
    taylor = _avg_loss(one, b, s, d, kappa) + g @ D + 0.5 * D @ H @ D
    assert r.average_loss_taylor == pytest.approx(taylor, rel=1e-6)
    # Eq. (4): 1/2 sum_l p(1-p) d (df/d delta_l at 1)^2, derivative by central differences
    pen = 0.0
    for ell in range(L):
        fp = np.prod(1 + kappa * (one + h * eye[ell])[:, None] * b, axis=0)
        fm = np.prod(1 + kappa * (one - h * eye[ell])[:, None] * b, axis=0)
        pen += 0.5 * p[ell] * (1 - p[ell]) * np.sum(d * ((fp - fm) / (2 * h)) ** 2)
    assert r.penalty_paper == pytest.approx(pen, rel=1e-7)


def test_second_order_form_error_is_higher_order_in_the_drop_rate():
    rng = np.random.default_rng(4)
    L = 8
    b = rng.normal(scale=0.8, size=L)
    rel = []
    for eps in (0.2, 0.1, 0.05):
        r = chain_regulariser(b, np.full(L, 1 - eps), s=1.0, d=1.0)
        rel.append(abs(r.expected_loss - r.paper_approximation) / r.penalty_exact)
    # the penalty is O(eps) and the neglected terms O(eps^2): relative error ~ eps
    assert rel[0] > rel[1] > rel[2]
    assert rel[1] / rel[2] == pytest.approx(2.0, rel=0.3)


def test_lemma_2_mode_matches_a_numerical_optimiser_and_theorem_1():
    rng = np.random.default_rng(5)
    L = 8
    for budget in (2.0, 6.5):
        g = rng.uniform(0.5, 4.0, L)
        p, C = max_regularisation_mode(g, budget)
        assert p.sum() == pytest.approx(budget, abs=1e-9)
        assert np.sign(C) == np.sign(L - 2 * budget)
        res = optimize.minimize(
            lambda x, g=g: -np.sum(x * (1 - x) * g),
            np.full(L, budget / L),
            bounds=[(0, 1)] * L,
            constraints=[{"type": "eq", "fun": lambda x, budget=budget: x.sum() - budget}],
            method="SLSQP",
            options={"ftol": 1e-14, "maxiter": 500},
        )
        assert np.sum(p * (1 - p) * g) >= -res.fun - 1e-9
        np.testing.assert_allclose(p, res.x, atol=1e-5)
    p, _ = max_regularisation_mode(np.full(L, 3.0), 5.0)  # equal g_l: uniform (Thm. 1)
    np.testing.assert_allclose(p, 5.0 / L, atol=1e-12)


def test_sensitivities_are_block_drops_and_their_first_order_form():
    rng = np.random.default_rng(6)
    L = 6
    kappa = 1 / np.sqrt(L)
    b = rng.normal(size=(L, 2))
    s, d = np.array([1.0, 3.0]), np.array([2.0, 1.0])

    def loss(delta):
        f = np.prod(1 + kappa * delta[:, None] * b, axis=0)
        return float(np.sum(-s * f + 0.5 * d * f**2))

    drop, grad = chain_sensitivities(b, s=s, d=d)
    one, h = np.ones(L), 1e-6
    for ell in range(L):
        e = np.eye(L)[ell]
        assert drop[ell] == pytest.approx(loss(one) - loss(one - e), rel=1e-10, abs=1e-12)
        assert grad[ell] == pytest.approx(
            (loss(one + h * e) - loss(one - h * e)) / (2 * h), rel=1e-6
        )


def test_shapiro_pvalues_accept_gaussian_rows_and_reject_bernoulli_rows():
    rng = np.random.default_rng(7)
    n = 400
    pv = shapiro_pvalues(rng.normal(size=(n, 200)))
    # under normality p-values are uniform: P(pv < 0.05) = 0.05, 5 standard errors slack
    assert np.mean(pv < 0.05) <= 0.05 + 5 * np.sqrt(0.05 * 0.95 / n)
    coins = (rng.random((20, 200)) < 0.5).astype(float)
    assert np.all(shapiro_pvalues(coins) < 1e-6)
    assert shapiro_pvalues(np.ones((1, 10)))[0] == 0.0


def test_lindeberg_ratio_falls_for_spread_weights():
    assert lindeberg_ratio(np.ones(100)) == pytest.approx(0.01)
    assert lindeberg_ratio([5.0, 0.0, 0.0]) == 1.0


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: depth_concentration([0.5, 0.5], beta=1.5), r"beta = 1\.5 is not a probability"),
        (lambda: gradient_growth(), r"L = None; without survival probabilities"),
        (
            lambda: max_regularisation_mode([1.0, -1.0], 1.0),
            r"expected a non-empty array of positive",
        ),
        (
            lambda: max_regularisation_mode([1.0, 1.0], 2.0),
            r"budget = 2\.0 is not an average depth",
        ),
        (lambda: shapiro_pvalues(np.zeros((3, 2))), r"samples has shape \(3, 2\)"),
        (lambda: bennett_u_inverse(-1.0), r"defined for y >= 0"),
        (lambda: lindeberg_ratio([0.0, 0.0]), r"mu is identically zero"),
    ],
)
def test_theory_errors(call, match):
    with pytest.raises(StochasticDepthError, match=match):
        call()


# ----------------------------------------------------------------------------------------
# chain_regulariser in O(L): against the former O(L^2) code and against mask enumeration
# ----------------------------------------------------------------------------------------


def _exclusive(m):
    """Product over all rows but row l, by prefix and suffix products (no division)."""
    pre = np.cumprod(np.concatenate([np.ones((1, m.shape[1])), m[:-1]]), axis=0)
    suf = np.cumprod(np.concatenate([np.ones((1, m.shape[1])), m[::-1][:-1]]), axis=0)[::-1]
    return pre * suf


def _quadratic_reference(b, p, s, d, kappa, mask):
    """The O(L^2) Hoeffding orders and unscaled Taylor loss that chain_regulariser had."""
    from gdln.sd._masks import mask_convention

    conv = mask_convention(mask)
    B = b.reshape(b.shape[0], -1)
    L, M = B.shape
    var, mu = conv.variance(p)[:, None], conv.mean(p)[:, None]
    m, one = 1.0 + kappa * mu * B, 1.0 + kappa * B
    orders = np.zeros(L)
    for j in range(M):
        poly = np.array([1.0])
        for ell in range(L):
            poly = np.convolve(poly, [m[ell, j] ** 2, var[ell, 0] * kappa**2 * B[ell, j] ** 2])
        orders += 0.5 * d[j] * poly[1:]
    f1 = np.prod(one, axis=0)
    df1 = kappa * B * _exclusive(one)
    delta = (p - 1.0)[:, None]
    resid = -s + d * f1
    cross = np.zeros(M)
    for ell in range(L):
        rest = one.copy()
        rest[ell] = 1.0
        f2 = kappa**2 * B[ell] * B * _exclusive(rest)
        f2[ell] = 0.0
        cross += delta[ell, 0] * np.sum(f2 * delta, axis=0)
    quad = d * np.sum(df1 * delta, axis=0) ** 2 + resid * cross
    loss1 = -s * f1 + 0.5 * d * f1**2
    taylor = float(np.sum(loss1 + np.sum(resid * df1 * delta, axis=0) + 0.5 * quad))
    return orders, taylor


def _assert_orders_close(got, ref):
    # every order that carries more than 1e-280 of the variance: to 1e-12 relative each
    big = ref > 1e-280 * ref.sum()
    np.testing.assert_allclose(got[big], ref[big], rtol=1e-12, atol=0)
    assert np.all(np.abs(got[~big]) <= 1e-280 * ref.sum())


@pytest.mark.parametrize(
    ("L", "scale", "zeros"),
    [(7, 0.7, 0), (60, 1.0, 0), (300, 0.5, 0), (40, 0.8, 1), (40, 0.8, 2), (40, 0.8, 3)],
)
@pytest.mark.parametrize("mask", ["unscaled", "inverted"])
def test_regulariser_matches_the_quadratic_reference(L, scale, zeros, mask):
    rng = np.random.default_rng(L + zeros)
    kappa = 1 / np.sqrt(L)
    b = rng.normal(scale=scale, size=(L, 2))
    b[rng.choice(L, zeros, replace=False), 0] = -1.0 / kappa  # factors 1 + kappa b = 0
    p = rng.uniform(0.3, 1, L)
    s, d = np.array([1.0, 2.0]), np.array([1.0, 0.5])
    r = chain_regulariser(b, p, s=s, d=d, mask=mask)
    orders, taylor = _quadratic_reference(b, p, s, d, kappa, mask)
    _assert_orders_close(r.variance_orders, orders)
    if mask == "unscaled":
        assert r.average_loss_taylor == pytest.approx(taylor, rel=1e-12, abs=1e-300)


def test_hoeffding_orders_with_vanishing_mean_factors():
    # m_l = 1 + kappa mu_l b_l = 0 for two blocks: the polynomial shifts by two degrees
    L, kappa = 12, 1 / np.sqrt(12)
    rng = np.random.default_rng(8)
    b = rng.normal(size=L)
    p = rng.uniform(0.3, 0.9, L)
    b[[2, 7]] = -1.0 / (kappa * p[[2, 7]])
    r = chain_regulariser(b, p, s=1.0, d=1.0)
    orders, _ = _quadratic_reference(b, p, np.ones(1), np.ones(1), kappa, "unscaled")
    assert r.variance_orders[0] == 0.0
    _assert_orders_close(r.variance_orders, orders)


def _hoeffding_by_enumeration(b, p, kappa, mask):
    """Order-k variance parts of f = prod_l (1 + kappa delta~_l b_l) over all 2^L masks."""
    import itertools

    from gdln.sd._masks import mask_convention

    conv = mask_convention(mask)
    L = b.size
    values = np.stack([conv.gate_value(np.zeros(L), p), conv.gate_value(np.ones(L), p)])
    weights = np.stack([1 - p, p])  # (2, L)
    f = np.ones((2,) * L)
    for ell in range(L):
        shape = [1] * L
        shape[ell] = 2
        f = f * (1 + kappa * b[ell] * values[:, ell]).reshape(shape)

    def conditional(keep):  # E[f | delta_keep], broadcast over the other axes
        g = f
        for ell in range(L):
            if ell not in keep:
                shape = [1] * L
                shape[ell] = 2
                g = np.sum(g * weights[:, ell].reshape(shape), axis=ell, keepdims=True)
        return g

    prob = np.ones((2,) * L)
    for ell in range(L):
        shape = [1] * L
        shape[ell] = 2
        prob = prob * weights[:, ell].reshape(shape)
    orders = np.zeros(L)
    for k in range(1, L + 1):
        for S in itertools.combinations(range(L), k):
            comp = sum(
                (-1) ** (k - len(T)) * conditional(set(T))
                for n in range(k + 1)
                for T in itertools.combinations(S, n)
            )
            orders[k - 1] += 0.5 * float(np.sum(prob * comp**2))
    return orders


@pytest.mark.parametrize("mask", ["unscaled", "inverted"])
def test_hoeffding_orders_match_the_anova_decomposition_over_all_masks(mask):
    L = 6
    rng = np.random.default_rng(9)
    b = rng.normal(scale=1.5, size=L)
    p = rng.uniform(0.2, 0.9, L)
    r = chain_regulariser(b, p, s=1.0, d=1.0, mask=mask)
    brute = _hoeffding_by_enumeration(b, p, 1 / np.sqrt(L), mask)
    np.testing.assert_allclose(r.variance_orders, brute, rtol=1e-10)


def test_regulariser_matches_the_quadratic_reference_when_every_order_matters():
    # plain scaling (kappa = 1): the orders decay slowly, none is truncated away
    rng = np.random.default_rng(10)
    L = 200
    b = rng.normal(size=(L, 1))
    p = rng.uniform(0.2, 0.9, L)
    r = chain_regulariser(b, p, s=1.0, scaling="plain")
    orders, taylor = _quadratic_reference(b, p, np.ones(1), np.ones(1), 1.0, "unscaled")
    assert np.count_nonzero(orders) == L
    _assert_orders_close(r.variance_orders, orders)
    assert r.average_loss_taylor == pytest.approx(taylor, rel=1e-12)
