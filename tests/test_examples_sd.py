"""Each stochastic-depth example runs with --quick, writes what it promises and shows its claim."""

from __future__ import annotations

import importlib.util
import itertools
import json
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "stochastic_depth"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _figures(folder: Path, stem: str) -> None:
    for ext in ("png", "svg"):
        assert (folder / f"{stem}.{ext}").stat().st_size > 0


def test_linear_dynamics_quick(tmp_path):
    r"""The exact expected GD map is the mean of the SD runs, and SD shrinks the transfer.

    Every recorded weight of the runs' mean lies within $k$ standard errors of the
    expected GD map, $k$ the Bonferroni bound for all recorded entries: under pure Monte
    Carlo noise ($t$ with runs - 1 degrees of freedom) any entry exceeds it with
    probability below $10^{-3}$. (The two differ also at $O(\mathrm{lr})$ through the
    step-to-step fluctuations, far below one standard error of 20 runs.) At equilibrium
    without SD the transfer of each mode is $s$ (Eq. 10); with SD it moves towards the
    identity, $|\mathbb E f - 1| < |s - 1|$ on the same side, and the mode with $s = 1$
    stays at 1.
    """
    from scipy import stats

    r = _load("sd_linear_dynamics").main(["--quick", "-o", str(tmp_path)])
    _figures(tmp_path, "sd_linear_dynamics")
    saved = json.loads((tmp_path / "sd_linear_dynamics.json").read_text())
    s, meta = np.array(r["s"]), saved["meta"]
    entries = (len(saved["t"]) - 1) * meta["L"] * s.size
    k = stats.t.isf(1e-3 / (2 * entries), meta["runs"] - 1)
    assert saved["max_z_b_sim_vs_gd"] <= k
    np.testing.assert_allclose(saved["equilibrium_nosd_transfer"], s, rtol=1e-6)
    sd = np.array(saved["equilibrium_sd_mean_transfer"])
    moved = s != 1.0
    assert np.all(np.abs(sd[moved] - 1) < np.abs(s[moved] - 1))
    assert np.all((sd[moved] - 1) * (s[moved] - 1) > 0)
    assert sd[~moved] == pytest.approx(1.0, abs=1e-6)
    # the GD map is an O(lr) Euler discretisation of the flow
    assert saved["max_abs_dev_gd_vs_flow"] < 0.05


def test_gradient_growth_quick_measures_prop_1(tmp_path):
    r"""Measured $\tilde q_l$ equals Prop. 1 within 4 standard errors, for all six settings.

    Standard errors come from the Monte Carlo samples (60 at ``--quick``). The measured
    value carries a finite-width bias besides the noise; we do not add an allowance for it
    but run at a width (256) where it is far below one standard error:
    with $d_{\rm out}=1$ the ratio equals $\|J^T u\|^2$ for a uniform unit vector $u$
    independent of the Jacobian $J$ of blocks $l+1..L$, so $q_l=\mathbb E\|J\|_F^2/N$, and
    propagating tangents forward (each $W_k$ is independent of everything before it) gives
    exactly $\mathbb E\|t_k\|^2=\mathbb E\|t_{k-1}\|^2+2\kappa^2p_k\,
    \mathbb E\|D_kt_{k-1}\|^2$. Prop. 1 is the case $\rho_k=\mathbb E\|D_kt_{k-1}\|^2/
    \mathbb E\|t_{k-1}\|^2=\frac12$; at width $N$, $\rho_k-\frac12=O(1/N)$ (unit $i$'s own
    activation is a $1/N$ share of the variance that sets its sign). The calibration of
    ``test_prop_1_gradient_growth_within_monte_carlo_error`` (6000 samples, L = 3) bounds
    the relative bias at N = 256 by 0.2% per plain layer (by $0.2\%\,\kappa^2$ per Stable
    layer), i.e. at most 0.8% on $\tilde q_0$ here, against standard errors of 1.3-10% at
    this sample size. k = 4 leaves a two-sided normal tail of 6e-5 per comparison (30 of
    them).
    """
    from gdln.sd import gradient_growth

    r = _load("sd_gradient_growth").main(["--quick", "-o", str(tmp_path)])
    _figures(tmp_path, "sd_gradient_growth")
    assert len(r) == 6
    for key, row in r.items():
        q, se = np.array(row["q"]), np.array(row["stderr"])
        theory = gradient_growth(row["p"], scaling=key.split("/")[1])
        assert np.all(np.abs(q - theory) <= 4 * se), key
    # the budget is the same for both SD modes, and the uniform one grows fastest (Fig. 2)
    assert sum(r["uniform/plain"]["p"]) == pytest.approx(sum(r["linear/plain"]["p"]))
    assert r["uniform/plain"]["theory"][0] > r["linear/plain"]["theory"][0]


def _linear_chain_by_enumeration(b, p, s, kappa, const):
    """E over all 2^L masks of sum_a (-s_a f_a + f_a^2 / 2) + const, and the loss at gates p."""
    L = b.shape[0]
    expected = 0.0
    for bits in itertools.product((0.0, 1.0), repeat=L):
        delta = np.array(bits)
        prob = np.prod(np.where(delta == 1, p, 1 - p))
        f = np.prod(1 + kappa * delta[:, None] * b, axis=0)
        expected += prob * (np.sum(-s * f + 0.5 * f**2) + const)
    f_avg = np.prod(1 + kappa * p[:, None] * b, axis=0)
    return expected, float(np.sum(-s * f_avg + 0.5 * f_avg**2) + const)


def test_regulariser_quick_decomposes_the_sd_loss(tmp_path):
    r"""Table 3: SD loss = average-network loss + penalty.

    Linear chains: the example's exact expected loss and average-network loss equal an
    enumeration of all $2^L$ masks of its recorded weights, and expected = average +
    exact penalty ($\frac12d\,\mathrm{Var}f$). ReLU (Monte Carlo over masks): the gap left
    after the penalty, $|L-\bar L-\mathrm{pen}|$, is smaller than the gap without it,
    $|L-\bar L|$, exactly when the true $L>\bar L+\mathrm{pen}/2$ (pen > 0); we require the
    Monte Carlo estimate to exceed that line by 3 of its standard errors at every trained
    checkpoint. At initialisation the paper's gaps (0.015 vs 0.003) are of the order of
    the standard error at this size, so step 0 is not tested.
    """
    r = _load("sd_regulariser").main(["--quick", "-o", str(tmp_path)])
    _figures(tmp_path, "sd_regulariser")
    setup = r["linear_setup"]
    p, s = np.array(setup["p"]), np.array(setup["s"])
    assert setup["scaling"] == "stable" and setup["mask"] == "unscaled" and setup["d"] == 1.0
    const = 0.5 * float(np.sum(s**2))
    for row in r["linear"]:
        b = np.array(row["b"])
        expected, average = _linear_chain_by_enumeration(b, p, s, 1 / np.sqrt(b.shape[0]), const)
        assert row["expected_loss"] == pytest.approx(expected, rel=1e-10)
        assert row["average_loss"] == pytest.approx(average, rel=1e-10)
        assert row["expected_loss"] == pytest.approx(
            row["average_loss"] + row["penalty_exact"], rel=1e-10
        )
    trained = [row for row in r["relu"] if row["step"] > 0]
    assert len(trained) == 4
    for row in trained:
        assert row["penalty"] > 0
        line = row["average_loss"] + row["penalty"] / 2
        assert row["sd_loss"] - 3 * row["sd_loss_se"] > line, row


def test_gaussian_noise_quick_becomes_gaussian_with_depth(tmp_path):
    """Fig. 5: normality is rejected at the 5% level at shallow layers, not at the deepest.

    At layers 1 and 2 the neuron takes at most 4 values over the 30 masks, so the median
    Shapiro-Wilk p-value over inputs is far below 0.05; at layer L = 10 the noise sums 10
    gated blocks and the median p-value (0.5 under normality) stays above 0.05 at
    initialisation and at every training checkpoint.
    """
    r = _load("sd_gaussian_noise").main(["--quick", "-o", str(tmp_path)])
    _figures(tmp_path, "sd_gaussian_noise")
    by_depth = {int(k): v for k, v in r["by_depth"].items()}
    for ell in (1, 2):
        assert by_depth[ell]["median"] < 0.05
    assert by_depth[10]["median"] > 0.05
    assert all(s["median"] > 0.05 for s in r["by_step"].values())
    assert len(r["by_step"]) == 5


def test_budget_quick_runs_each_mode_at_its_budget(tmp_path, monkeypatch):
    """Table 2's comparison is made at equal budgets: every run's survival probabilities sum
    to its budget L_bar, SenseMode's follow the rule of Sec. 6 (p_l proportional to |S_l|,
    clipped at 1), and the linear mode is left out exactly where no p_L >= 0 meets the
    budget, L_bar < (L - 1)/2. (Which mode wins needs the full run; the quick networks
    train 10 steps.)
    """
    module = _load("sd_budget")
    calls = []
    real = module.mode_for_budget

    def spy(mode, L, budget, *, sensitivities=None):
        p = real(mode, L, budget, sensitivities=sensitivities)
        calls.append((mode, L, budget, None if sensitivities is None else np.abs(sensitivities), p))
        return p

    monkeypatch.setattr(module, "mode_for_budget", spy)
    r = module.main(["--quick", "-o", str(tmp_path)])
    _figures(tmp_path, "sd_budget")
    assert {c[0] for c in calls} == {"uniform", "sensemode_proportional", "linear"}
    for mode, L, budget, sens, p in calls:
        assert p.sum() == pytest.approx(budget, rel=1e-12) and np.all((p >= 0) & (p <= 1))
        assert mode != "linear" or budget >= (L - 1) / 2
        if mode == "sensemode_proportional":
            free = p < 1.0
            np.testing.assert_allclose(p[free] / sens[free], p[free][0] / sens[free][0])
            assert np.all(sens[~free] * p[free][0] / sens[free][0] >= 1.0 - 1e-12)
    L = 4
    for task, rows in r.items():
        for ratio, row in rows.items():
            if float(ratio) == 1.0:
                assert set(row) == {"uniform"}  # no SD: the mode is moot
                continue
            assert (row["linear"] is None) == (float(ratio) * L < (L - 1) / 2)
            for values in row.values():
                if values is not None:
                    assert len(values) == 2 and all(np.isfinite(values))
                    assert all(0 <= v <= 100 for v in values) or task == "toy"
            u, sm = np.array(row["uniform"]), np.array(row["sensemode_proportional"])
            mean, se, _, _ = module.paired_difference(row)
            assert mean == pytest.approx(np.mean(u - sm))
            assert se == pytest.approx(np.std(u - sm, ddof=1) / np.sqrt(2))


def _assert_lemma_2_maximiser(g, p, budget):
    """KKT conditions of max sum_l p_l (1 - p_l) g_l at sum_l p_l = budget, 0 <= p <= 1
    (concave for g > 0, so they make p the maximiser): one multiplier lam with
    g_l (1 - 2 p_l) = lam where 0 < p_l < 1, -g_l >= lam where p_l = 1, g_l <= lam where
    p_l = 0."""
    g, p = np.asarray(g), np.asarray(p)
    assert p.sum() == pytest.approx(budget, abs=1e-8) and np.all((p >= 0) & (p <= 1))
    slope = g * (1 - 2 * p)
    inner = (p > 1e-12) & (p < 1 - 1e-12)
    assert inner.any()
    lam = slope[inner].mean()
    scale = np.abs(g).max()
    np.testing.assert_allclose(slope[inner], lam, atol=1e-8 * scale)
    assert np.all(-g[p >= 1 - 1e-12] >= lam - 1e-8 * scale)
    assert np.all(g[p <= 1e-12] <= lam + 1e-8 * scale)


def test_max_regularisation_quick_holds_thm_1_and_lemma_2(tmp_path):
    r"""Thm. 1: at initialisation $\mathbb E_W[g_l]$ is the same for every layer. Per
    initialisation, each layer's $g_l$ minus that initialisation's mean over layers has
    mean 0 for every $l$; the paired $t$ statistic over the 24 initialisations stays within
    the Bonferroni bound for the L layers at level $10^{-3}$. Lemma 2: $p^*$, from the
    mean $g$ at init and from the trained network's $g$, maximises
    $\sum_l p_l(1-p_l)g_l$ at the budget (its KKT conditions).
    """
    from scipy import stats

    r = _load("sd_max_regularisation").main(["--quick", "-o", str(tmp_path)])
    _figures(tmp_path, "sd_max_regularisation")
    g = np.array(r["g_init_runs"])  # (inits, L)
    inits, L = g.shape
    np.testing.assert_allclose(r["g_init_mean"], g.mean(axis=0), rtol=1e-12)
    centred = g - g.mean(axis=1, keepdims=True)
    t = centred.mean(axis=0) / (centred.std(axis=0, ddof=1) / np.sqrt(inits))
    assert np.all(np.abs(t) <= stats.t.isf(1e-3 / (2 * L), inits - 1)), t
    budget = 0.7 * L
    _assert_lemma_2_maximiser(r["g_init_mean"], r["p_star_init"], budget)
    _assert_lemma_2_maximiser(r["g_trained"], r["p_star_trained"], budget)


def test_depth_concentration_quick_holds_lemma_1(tmp_path):
    """Lemma 1: the exact law of L_delta has mean L_p and variance v_p, puts at most beta
    outside the Bennett bound, and the uniform mode has the larger variance and bound; the
    Monte Carlo tail frequency is within 5 binomial standard errors of the exact one."""
    r = _load("sd_depth_concentration").main(["--quick", "-o", str(tmp_path)])
    _figures(tmp_path, "sd_depth_concentration")
    beta = json.loads((tmp_path / "sd_depth_concentration.json").read_text())["meta"]["beta"]
    for s in r.values():
        assert s["pmf_mean"] == pytest.approx(s["mean"], rel=1e-12)
        assert s["pmf_variance"] == pytest.approx(s["variance"], rel=1e-10)
        assert sum(s["pmf"]) == pytest.approx(1.0, rel=1e-12)
        assert s["tail_exact"] <= beta
        se = np.sqrt(s["tail_exact"] * (1 - s["tail_exact"]) / s["samples"])
        assert abs(s["tail_mc"] - s["tail_exact"]) <= 5 * se
    assert r["uniform"]["variance"] > r["linear"]["variance"]
    assert r["uniform"]["bound"] > r["linear"]["bound"]
