"""gdln.timescales against closed forms and independent gradient flows.

Every reference here is computed in this file: the unimodal-bias formulas of Zhang, Latham
& Saxe (2024), the logistic of Eq. (21), blow-up integrals of Eqs. (47)-(48) and (52)-(53)
of Saxe, Sodhani & Lewallen (2022), and gradient flows of the full matrices (or of the
paper's scalar equations) written out with numpy and integrated with scipy.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import sympy as sp
import yaml
from helpers import NOT_DIAGONALIZABLE, load, write
from scipy.integrate import quad, solve_ivp
from scipy.optimize import brentq

import gdln

U0 = sp.Symbol("u0", positive=True)

# Fig. 4c of Saxe et al. (2022): four one-hot items, seven hierarchical features.
HIERARCHY = np.array(
    [
        [6, 4, 0, 3, 0, 0, 0],
        [6, 4, 0, 0, 3, 0, 0],
        [6, 0, 4, 0, 0, 3, 0],
        [6, 0, 4, 0, 0, 0, 3],
    ],
    dtype=float,
)
S_HIERARCHY = np.linalg.svd(HIERARCHY.T / 4, compute_uv=False)  # items equally likely
D_HIERARCHY = 1 / 4  # one-hot items: Sigma_x = I/4


def late_fusion(k: float, rho: float, **params: object) -> gdln.Problem:
    return load("late_fusion", k=k, rho=rho, **params)


def at(formula: sp.Expr, u0: float) -> float:
    """A printed leading-order formula at ``u0``."""
    return float(formula.subs(U0, u0))


def first_crossing(solution, value_of, level: float, t_end: float) -> float:
    """First t with value_of(state(t)) >= level, refined by brentq."""
    t = np.linspace(0.0, t_end, 4001)
    values = np.array([value_of(x) for x in solution(t).T])
    i = int(np.argmax(values >= level))
    assert values[i] >= level, "never reached"
    return brentq(lambda s: value_of(solution(s)) - level, t[i - 1], t[i])


# ------------------------------------------------------------- two-layer late fusion


@pytest.mark.parametrize(("k", "rho"), [(2, 0.5), (3, -0.2), (1.5, 0.8), (2, 0)])
def test_late_fusion_ratio_and_unimodal_weight_are_the_papers_closed_forms(k, rho) -> None:
    result = gdln.timescales(late_fusion(k, rho), b0=1e-6, ode=False)
    a, b = result.stages
    assert result.analysis == "aligned"
    assert b.time / a.time == pytest.approx(1 + (k**2 - 1) / (1 - rho**2), rel=1e-6)
    # unimodal phase: the A pathway alone, at its least-squares weight 1 + rho/k
    assert a.maps == {"xA->hA->y": pytest.approx(np.array([[1 + rho / k]]), rel=1e-7)}
    # after B: y = x_A + x_B exactly, zero loss
    assert b.maps["xA->hA->y"][0, 0] == pytest.approx(1, rel=1e-7)
    assert b.maps["xB->hB->y"][0, 0] == pytest.approx(1, rel=1e-7)
    assert b.loss == pytest.approx(0, abs=1e-9)
    # A alone leaves 1/2 <y^2> - 1/2 Syx_A^2 / Sigma_A
    initial = 0.5 * (k**2 + 2 * rho * k + 1)
    assert a.loss == pytest.approx(initial - 0.5 * (k**2 + rho * k) ** 2 / k**2, rel=1e-7)
    # t_A = ln(1/u0) / ||Syx_A|| (logistic escape, Eq. 21)
    assert a.time == pytest.approx(math.log(1e6) / (k**2 + rho * k), rel=1e-7)
    for u in (1e-3, 1e-30):
        assert at(a.time_formula, u) == pytest.approx(math.log(1 / u) / (k**2 + rho * k), 1e-5)


def _two_layer_flow_ratio(k: float, rho: float, u0: float) -> float:
    """t_B/t_A of the full 1x1 matrices' gradient flow, written out here.

    y_hat = a2 a1 x_A + b2 b1 x_B from a, b = u0; t_A when a2 a1 reaches half of its
    unimodal value 1 + rho/k, t_B when b2 b1 reaches half of its final value 1.
    """
    SA, SB, SAB = k * k, 1.0, rho * k
    sA, sB = SA + SAB, SB + SAB

    def flow(_t, w):
        a1, a2, b1, b2 = w
        eA = sA - (a2 * a1) * SA - (b2 * b1) * SAB
        eB = sB - (a2 * a1) * SAB - (b2 * b1) * SB
        return [a2 * eA, a1 * eA, b2 * eB, b1 * eB]

    t_end = 3 * (1 + (k * k - 1) / (1 - rho * rho)) * math.log(1 / u0) / sA + 50
    sol = solve_ivp(
        flow, (0, t_end), [u0] * 4, method="LSODA", rtol=1e-11, atol=1e-14 * u0, dense_output=True
    ).sol
    ta = first_crossing(sol, lambda w: w[0] * w[1], (1 + rho / k) / 2, t_end)
    tb = first_crossing(sol, lambda w: w[2] * w[3], 0.5, t_end)
    return tb / ta


def test_late_fusion_exact_ode_approaches_the_limit_from_below() -> None:
    problem = late_fusion(2, 0.5)
    ratios = []
    for u0 in (1e-3, 1e-6, 1e-20):
        a, b = gdln.timescales(problem, b0=u0).stages
        assert b.ode_time / a.ode_time == pytest.approx(_two_layer_flow_ratio(2, 0.5, u0), 1e-6)
        assert b.time / a.time == pytest.approx(5, rel=1e-9)  # the leading order is the limit
        ratios.append(b.ode_time / a.ode_time)
    # the issue's figures: 4.910, 4.955 and about 4.98 against 5
    assert ratios[0] == pytest.approx(4.910, abs=5e-4)
    assert ratios[1] == pytest.approx(4.955, abs=5e-4)
    assert ratios[0] < ratios[1] < ratios[2] < 5


def test_a_product_that_must_change_sign_is_learned_and_the_ode_starts_with_its_sign() -> None:
    # k = 3, rho = -0.4: Syx_B = 1 + rho k < 0 while the residual after A, (1 - rho^2), is
    # positive, so B's product changes sign between the stages (B regains the budget it
    # lost). From +u0 on every edge the reduced ODE cannot; it starts B at the final sign.
    k, rho = 3, -0.4
    formula = 1 + (k**2 - 1) / (1 - rho**2)
    for route in ("contexts", "matrix"):  # the aligned and the asymptotic analysis
        a, b = gdln.timescales(late_fusion(k, rho), b0=1e-6, route=route).stages
        assert b.time / a.time == pytest.approx(formula, rel=1e-6)
        assert b.maps["xB->hB->y"][0, 0] == pytest.approx(1, rel=1e-7)
    gaps = []
    for u0 in (1e-6, 1e-12):
        result = gdln.timescales(late_fusion(k, rho), b0=u0)
        a, b = result.stages
        assert b.mechanism == "exponential"
        gaps.append(abs(b.ode_time / a.ode_time / formula - 1))
    assert gaps[1] < gaps[0] < 0.01
    assert "ODE both start at b(0) = -u0 on" in result.assumptions[-1]


# -------------------------------------------------- vector modalities (asymptotic route)


def _vector_case(seed: int, dA: int = 3, dB: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """A random covariance (A three times stronger) and a random linear target."""
    rng = np.random.default_rng(seed)
    d = dA + dB
    G = rng.standard_normal((d, 2 * d))
    S = G @ G.T / (2 * d)
    S[:dA, :dA] *= 3.0
    return S, rng.standard_normal(d) * 0.5


def _vector_graph(S: np.ndarray, w: np.ndarray, dA: int, hidden: int) -> str:
    syx = w @ S
    moments = {
        "a": {"a": S[:dA, :dA].tolist(), "b": S[:dA, dA:].tolist()},
        "b": {"b": S[dA:, dA:].tolist()},
        "y": {"a": [syx[:dA].tolist()], "b": [syx[dA:].tolist()], "y": float(w @ S @ w)},
    }
    d = len(w)
    doc = {
        "nodes": [
            {"id": "xA", "size": dA},
            {"id": "xB", "size": d - dA},
            {"id": "hA", "size": hidden},
            {"id": "hB", "size": hidden},
            {"id": "y", "size": 1},
        ],
        "edges": [
            {"source": "xA", "target": "hA"},
            {"source": "hA", "target": "y"},
            {"source": "xB", "target": "hB"},
            {"source": "hB", "target": "y"},
        ],
        "datasets": {"m": {"moments": moments}},
        "task": {
            "contexts": [
                {
                    "probability": 1,
                    "dataset": "m",
                    "inputs": {"xA": "a", "xB": "b"},
                    "targets": {"y": "y"},
                }
            ]
        },
    }
    return yaml.safe_dump(doc)


def _vector_formula(S: np.ndarray, w: np.ndarray, dA: int) -> tuple[float, np.ndarray]:
    """1 + (|Syx_A| - |Syx_B|) / |Syx_B - w_A Sigma_AB|, w_A = Syx_A Sigma_A^-1."""
    syx = w @ S
    sa, sb = syx[:dA], syx[dA:]
    wa = sa @ np.linalg.inv(S[:dA, :dA])
    lag = (np.linalg.norm(sa) - np.linalg.norm(sb)) / np.linalg.norm(sb - wa @ S[:dA, dA:])
    return 1 + lag, wa


def _vector_flow_ratio(S: np.ndarray, w: np.ndarray, dA: int, hidden: int, u0: float) -> float:
    """t_B/t_A of the full-matrix gradient flow from small random weights (std u0).

    The maps W_A = W2A W1A, W_B = W2B W1B; t_A when |W_A| reaches half of |w_A|, t_B when
    |W_B| reaches half of its final norm (the criteria of the authors' sweep.py).
    """
    d = len(w)
    dB = d - dA
    syx = w @ S
    rng = np.random.default_rng(1)
    shapes = [(hidden, dA), (1, hidden), (hidden, dB), (1, hidden)]
    x0 = np.concatenate([rng.standard_normal(s).ravel() * u0 for s in shapes])
    cut = np.cumsum([int(np.prod(s)) for s in shapes])[:-1]

    def unpack(x):
        return [p.reshape(s) for p, s in zip(np.split(x, cut), shapes, strict=True)]

    def flow(_t, x):
        W1a, W2a, W1b, W2b = unpack(x)
        E = syx - np.concatenate([(W2a @ W1a)[0], (W2b @ W1b)[0]]) @ S
        Ea, Eb = E[None, :dA], E[None, dA:]
        return np.concatenate(
            [(W2a.T @ Ea).ravel(), (Ea @ W1a.T).ravel(), (W2b.T @ Eb).ravel(), (Eb @ W1b.T).ravel()]
        )

    ratio, wa = _vector_formula(S, w, dA)
    t_end = 3 * ratio * math.log(1 / u0) / np.linalg.norm(syx[:dA]) + 50
    sol = solve_ivp(
        flow, (0, t_end), x0, method="LSODA", rtol=1e-10, atol=1e-14 * u0, dense_output=True
    ).sol

    def norm_a(x):
        W1a, W2a, _, _ = unpack(x)
        return np.linalg.norm(W2a @ W1a)

    def norm_b(x):
        _, _, W1b, W2b = unpack(x)
        return np.linalg.norm(W2b @ W1b)

    ta = first_crossing(sol, norm_a, np.linalg.norm(wa) / 2, t_end)
    tb = first_crossing(sol, norm_b, norm_b(sol(t_end)) / 2, t_end)
    return tb / ta


@pytest.mark.parametrize("seed", [0, 1, 3])
def test_vector_modalities_follow_the_formula_and_the_full_matrix_flow(seed, tmp_path) -> None:
    S, w = _vector_case(seed)
    problem = gdln.load(write(tmp_path, _vector_graph(S, w, 3, hidden=3)))
    with pytest.raises(gdln.NotDiagonalizableError):
        gdln.reduce(problem)
    result = gdln.timescales(problem, b0=1e-12)
    assert result.analysis == "asymptotic"
    assert any("asymptotic" in a for a in result.assumptions)
    a, b = result.stages
    formula, wa = _vector_formula(S, w, 3)
    assert a.pathways == ("xA->hA->y",) and b.pathways == ("xB->hB->y",)
    assert b.time / a.time == pytest.approx(formula, rel=1e-6)
    assert a.maps["xA->hA->y"][0] == pytest.approx(wa, rel=1e-6)  # unimodal solution
    # the full network from small random weights: within O(1/ln(1/u0)) of the formula
    gaps = [abs(_vector_flow_ratio(S, w, 3, 3, u0) / formula - 1) for u0 in (1e-12, 1e-24)]
    assert gaps[1] < gaps[0] < 0.05


# ----------------------------------------------- deep fusion: the ratio depends on u0


def _deep_fusion_ode(k: float, rho: float, u0: float) -> tuple[float, float]:
    """Half times of A and B in the scalar 3-layer fused network, written out here.

    y_hat = c (a2 a1 x_A + b2 b1 x_B) from every weight at u0: the reduced ODE of
    graphs/late_fusion_deep.yaml, derived by hand.
    """
    SA, SB, SAB = k * k, 1.0, rho * k
    sA, sB = SA + SAB, SB + SAB

    def flow(_t, w):
        c, a2, a1, b2, b1 = w
        A, B = a2 * a1, b2 * b1
        eA = sA - c * (A * SA + B * SAB)
        eB = sB - c * (A * SAB + B * SB)
        return [A * eA + B * eB, c * a1 * eA, c * a2 * eA, c * b1 * eB, c * b2 * eB]

    t_end = 0.5 / u0 + 100
    sol = solve_ivp(
        flow, (0, t_end), [u0] * 5, method="LSODA", rtol=1e-10, atol=1e-14 * u0, dense_output=True
    ).sol
    ta = first_crossing(sol, lambda w: w[0] * w[1] * w[2], (1 + rho / k) / 2, t_end)
    tb = first_crossing(sol, lambda w: w[0] * w[3] * w[4], 0.5, t_end)
    return ta, tb


def test_deep_fusion_asymptotic_route_converges_to_the_exact_ode() -> None:
    problem = load("late_fusion_deep", k=2, rho=0.5)
    lag_gaps = []
    for u0 in (1e-3, 1e-6):
        ta, tb = _deep_fusion_ode(2, 0.5, u0)
        a, b = gdln.timescales(problem, b0=u0, route="matrix").stages
        assert a.mechanism == "power" and b.mechanism == "exponential"
        assert a.time / ta - 1 == pytest.approx(0, abs=2 * u0)  # t_A = c/u0 + O(1)
        lag_gaps.append(abs((b.time - a.time) / (tb - ta) - 1))
        assert (b.time / a.time) / (tb / ta) - 1 == pytest.approx(0, abs=2 * u0)
    assert lag_gaps[1] < lag_gaps[0] < 0.05  # the lag is ln(1/u0)/rate + O(1)


@pytest.mark.parametrize("rho", [0.5, -0.2, -0.6])
def test_deep_fusion_lag_is_the_authors_depth_formula(rho) -> None:
    # sweep.py (lag_depth, L = 3, L_f = 2): lag = ln(1/u0) (1 - wb/wa) (1 + rho/k)^(Lf/L - 1)
    # / (1 - rho^2) with wa = k^2 + rho k, wb = 1 + rho k (sigma_B = 1); wb < 0 at
    # rho = -0.6: B shrank while A escaped and regains that budget
    k = 2.0
    wa, wb = k * k + rho * k, 1 + rho * k
    expected = (1 - wb / wa) * (1 + rho / k) ** (2 / 3 - 1) / (1 - rho * rho)
    for route in ("contexts", "matrix"):  # the aligned and the asymptotic analysis
        problem = load("late_fusion_deep", k=k, rho=rho)
        a, b = gdln.timescales(problem, b0=1e-6, route=route, ode=False).stages
        for u in (1e-6, 1e-40):  # the formula's lag is a multiple of ln(1/u0)
            lag = at(sp.expand(b.time_formula - a.time_formula), u)
            assert lag == pytest.approx(expected * math.log(1 / u), rel=1e-4)


# ------------------------------------------------ Saxe et al. 2014: deep linear networks


TWO_LAYER_CHAIN = """\
nodes: [{id: x, size: 3}, {id: h, size: 3}, {id: y, size: 2}]
edges: [{source: x, target: h}, {source: h, target: y}]
task:
  examples:
    - {inputs: {x: [1, 0, 0]}, targets: {y: [2, 0]}}
    - {inputs: {x: [0, 1, 0]}, targets: {y: [0, 1]}}
    - {inputs: {x: [0, 0, 1]}, targets: {y: [1, 0]}}
"""
CHAIN_Y = np.array([[2, 0], [0, 1], [1, 0]], dtype=float)  # the rows above (and chain.yaml)


def test_two_layer_modes_follow_the_logistic_of_eq_21(tmp_path) -> None:
    u0 = 1e-5
    s = np.linalg.svd(CHAIN_Y.T / 3, compute_uv=False)  # Sigma_yx, three equal examples
    d = 1 / 3
    result = gdln.timescales(gdln.load(write(tmp_path, TWO_LAYER_CHAIN)), b0=u0)
    assert len(result.stages) == 2
    for stage, sv in zip(result.stages, s, strict=True):
        assert stage.time == pytest.approx(math.log(1 / u0) / sv, rel=1e-9)
        # Eq. (21): a(t) = (s/d) / (1 - (1 - s/(d a0)) e^{-2st}), a0 = u0^2: half of s/d at
        assert stage.ode_time == pytest.approx(math.log(sv / (d * u0**2) - 1) / (2 * sv), rel=1e-6)
    assert result.stages[-1].loss == pytest.approx(0, abs=1e-12)


def test_deep_chain_stages_go_in_order_of_singular_value() -> None:
    u0 = 1e-4
    s = np.linalg.svd(CHAIN_Y.T / 3, compute_uv=False)
    d = 1 / 3
    result = gdln.timescales(load("chain"), b0=u0)
    assert [st.mechanism for st in result.stages] == ["power", "power"]
    for stage, sv in zip(result.stages, s, strict=True):
        # balanced depth 3: db/dt = b^2 (s - d b^3) blows up at 1/(s u0) when d is dropped
        assert stage.time == pytest.approx(1 / (sv * u0), rel=1e-6)
        assert at(stage.time_formula, 1e-9) == pytest.approx(1 / (sv * 1e-9), rel=1e-5)
        # the exact time to half of s/d, by quadrature of dt = db / (b^2 (s - d b^3))
        half = (sv / d / 2) ** (1 / 3)
        exact, _ = quad(lambda b, s=sv: 1 / (b * b * (s - d * b**3)), u0, half, limit=200)
        assert stage.ode_time == pytest.approx(exact, rel=1e-6)
    # the plateau maps are the top singular components of Sigma_yx Sigma_x^-1 = Y^T
    first = result.stages[0].maps["x->h1->h2->y"]
    U, sv_full, Vt = np.linalg.svd(CHAIN_Y.T)
    assert first == pytest.approx(sv_full[0] * np.outer(U[:, 0], Vt[0]), abs=1e-8)
    assert result.stages[1].maps["x->h1->h2->y"] == pytest.approx(CHAIN_Y.T, abs=1e-8)


# ------------------------------------------------------- the neural race reduction


def _blow_up_time(a: float, c: float) -> float:
    r"""$\int_1^\infty d\xi / (\xi\sqrt{a\xi^2 - c})$, closed form."""
    return math.asin(math.sqrt(c / a)) / math.sqrt(c) if c > 0 else 1 / math.sqrt(a)


def _balanced_pair_half_time(r1: float, r2: float, s: float, d: float, u0: float) -> float:
    """Half time of B2 B1^2 in tau dB1/dt = r1 B2 B1 [s - B2 B1^2 d], tau dB2/dt = r2 B1^2 [...]."""

    def flow(_t, b):
        b1, b2 = b
        e = s - b2 * b1 * b1 * d
        return [r1 * b2 * b1 * e, r2 * b1 * b1 * e]

    t_end = 3 / (r1 * s * u0) + 100
    sol = solve_ivp(
        flow, (0, t_end), [u0, u0], method="LSODA", rtol=1e-11, atol=1e-14 * u0, dense_output=True
    ).sol
    return first_crossing(sol, lambda b: b[1] * b[0] ** 2, s / d / 2, t_end)


@pytest.mark.parametrize(("M", "K"), [(3, 2), (4, 4)])
def test_routing_stages_follow_eqs_47_48(M, K) -> None:
    u0 = 1e-3
    result = gdln.timescales(load("routing", M=M, K=K), b0=u0)
    distinct = sorted(set(np.round(S_HIERARCHY, 12)), reverse=True)  # 3/4 twice: one stage
    assert len(result.stages) == len(distinct) == 3
    assert result.stages[-1].modes == (2, 3)
    for stage, s in zip(result.stages, distinct, strict=True):
        # Eq. (47)-(48) with M B1^2 - B2^2 = (M - 1) u0^2: blow-up of dB2 = s B1^2 B2... at
        # t = (M / (s u0)) int_1^inf dxi / (xi sqrt(M xi^2 - (M - 1)))
        assert stage.time == pytest.approx(M / (s * u0) * _blow_up_time(M, M - 1), rel=1e-6)
        assert stage.ode_time == pytest.approx(
            _balanced_pair_half_time(1 / M, 1.0, s, D_HIERARCHY, u0), rel=1e-5
        )
    # derived on the symmetry quotient (the rule of every command): the representative
    # route's map; every context's route (route contexts) has the same stages and map
    assert any("symmetry quotient" in a for a in result.assumptions)
    every = gdln.timescales(load("routing", M=M, K=K), b0=u0, route="contexts")
    assert [s.time for s in every.stages] == pytest.approx([s.time for s in result.stages])
    # every trained route ends with the dataset's map Sigma_yx Sigma_x^-1 = Y^T
    final = every.stages[-1].maps
    assert len(final) == K * M and len(result.stages[-1].maps) == 1
    for W in [*final.values(), *result.stages[-1].maps.values()]:
        np.testing.assert_allclose(W, HIERARCHY.T, atol=1e-7)
    assert result.stages[-1].loss == pytest.approx(0, abs=1e-9)


def test_race_stages_follow_eqs_52_53() -> None:
    M, P, u0 = 4, 4, 1e-3
    result = gdln.timescales(load("race", M=M, P=P), b0=u0, lump="balanced")
    distinct = sorted(set(np.round(S_HIERARCHY, 12)), reverse=True)
    assert len(result.stages) == 3
    a = math.sqrt(P)
    for stage, s in zip(result.stages, distinct, strict=True):
        # Eqs. (52)-(53): B2^2 - sqrt(P) B1^2 conserved; blow-up at
        # (M^2 / (sqrt(P) s u0)) int_1^inf dxi / (xi sqrt(sqrt(P) xi^2 - (sqrt(P) - 1)))
        expected = M * M / (a * s * u0) * _blow_up_time(a, a - 1)
        assert stage.time == pytest.approx(expected, rel=1e-6)
        assert stage.ode_time == pytest.approx(
            _balanced_pair_half_time(a / M**2, P / M**2, s, D_HIERARCHY, u0), rel=1e-5
        )


def test_more_sharing_learns_sooner() -> None:
    # Sec. 4.2: the race is won by the pathways that share the most (time ~ 1/P^(1/2))
    times = [
        gdln.timescales(load("race", M=4, P=P), b0=1e-3, lump="balanced", ode=False).stages[0].time
        for P in (1, 4, 16)
    ]
    assert times[0] > times[1] > times[2]


# ------------------------------------------------------------------ output and errors


def test_json_has_the_issues_fields() -> None:
    result = gdln.timescales(late_fusion(2, 0.5), b0=1e-6)
    payload = json.loads(gdln.format_timescales(result, "json"))
    assert payload["analysis"] == "aligned" and payload["u0"] == 1e-6
    assert payload["assumptions"] and all(isinstance(a, str) for a in payload["assumptions"])
    first, second = payload["stages"]
    assert {"active", "time", "time_formula", "loss", "maps", "ode_time"} <= set(first)
    assert first["maps"] == {"xA->hA->y": [[pytest.approx(1.25)]]}
    assert first["time_formula"] == str(result.stages[0].time_formula) == "0.2*log(1/u0)"
    assert second["time"] / first["time"] == pytest.approx(5)
    text = gdln.format_timescales(result)
    assert "xB->hB->y[0]" in text and "assumptions:" in text and "ODE half" in text


def test_an_immediate_stage_for_a_one_edge_path() -> None:
    # crosspath.yaml's skip edge x->y has no second small edge: it learns at t = 0 (O(1))
    result = gdln.timescales(load("crosspath"), b0=1e-4)
    assert result.stages[0].mechanism == "immediate" and result.stages[0].time == 0
    assert "x->y[0]" in result.stages[0].pathways


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"b0": 2}, r"late_fusion\.yaml: b0 2: the initial scale u0 must be between 0 and 1"),
        ({"b0": 0}, r"b0 0: the initial scale u0 must be between 0 and 1"),
        ({"b0": "x + 1"}, r"b0 \(--b0\): expected a real number, got 'x \+ 1'"),
        ({"route": "fast"}, r"route \(--route\): expected one of auto, quotient, contexts"),
        ({"route": "moments"}, r"route 'moments' lists no pathways; timescales takes auto"),
        ({"lump": "full"}, r"lump='full': timescales takes none, symmetry or balanced"),
    ],
)
def test_bad_settings_are_one_clear_error(kwargs, match) -> None:
    with pytest.raises(gdln.GdlnError, match=match):
        gdln.timescales(late_fusion(2, 0.5), **kwargs)


def test_an_initial_value_per_edge_is_refused() -> None:
    with pytest.raises(
        gdln.GdlnError, match=r"late_fusion\.yaml: b0 \{'default': 1/10\}: expected one"
    ):
        gdln.timescales(late_fusion(2, 0.5), b0={"default": 0.1})


def test_aligned_route_refuses_statistics_without_common_bases(tmp_path) -> None:
    problem = gdln.load(write(tmp_path, NOT_DIAGONALIZABLE))
    with pytest.raises(gdln.NotDiagonalizableError, match=r"g\.yaml"):
        gdln.timescales(problem, route="contexts")
    assert gdln.timescales(problem).analysis == "asymptotic"


def test_unbound_symbols_are_named(tmp_path) -> None:
    text = NOT_DIAGONALIZABLE.replace("targets: {y: [1]}", "targets: {y: [q]}")
    problem = gdln.load(write(tmp_path, "symbols: [q]\n" + text.replace("[1, 1]", "[1, 0]")))
    with pytest.raises(gdln.GdlnError, match=r"g\.yaml: .*q"):
        gdln.timescales(problem)


def test_ode_half_times_are_those_of_gdln_solve() -> None:
    # the half-times come from the same reduced ODE that gdln.solve integrates (here read
    # off its trajectory: the A map b_xA b_hA, then the B map, reaching half their plateaus)
    problem = late_fusion(2, 0.5)
    result = gdln.timescales(problem, b0=1e-3, lump="none")
    reduction = gdln.reduce(problem, lump="none", b0=1e-3)
    trajectory = gdln.solve(reduction, t_max=10, points=20001)
    s = trajectory.series
    a_map = s["b_xA_hA"][:, 0] * s["b_hA_y"][:, 0]
    b_map = s["b_xB_hB"][:, 0] * s["b_hB_y"][:, 0]
    for stage, values, target in zip(result.stages, (a_map, b_map), (1.25, 1.0), strict=True):
        crossing = trajectory.t[np.argmax(np.abs(values) >= target / 2)]
        assert stage.ode_time == pytest.approx(crossing, abs=10 / 20000)


def test_the_route_is_a_declared_name_and_the_first_line_says_why(tmp_path, capsys) -> None:
    # issue 33 item 8: one route rule, named by the declared choices (gdln.settings.ROUTES)
    # in the result, its JSON and the first line; the analysis (aligned or asymptotic) beside
    from gdln.cli import main

    lacking = gdln.timescales(gdln.load(write(tmp_path, NOT_DIAGONALIZABLE)))
    assert lacking.route == "matrix" and lacking.route in gdln.settings.ROUTES
    assert lacking.route_reason.startswith("auto: no common bases")
    aligned = gdln.timescales(late_fusion(2, 0.5), b0=1e-6, ode=False)
    assert aligned.route == "contexts" and aligned.analysis == "aligned"
    routing = gdln.timescales(gdln.load("routing", params={"M": "3", "K": "2"}), ode=False)
    assert routing.route == "quotient" and routing.route_reason.startswith("symmetry quotient")
    back = gdln.Timescales.from_dict(json.loads(json.dumps(lacking.to_dict())))
    assert (back.route, back.analysis, back.route_reason) == (
        "matrix",
        "asymptotic",
        lacking.route_reason,
    )
    assert main(["timescales", str(tmp_path / "g.yaml")]) in (0, None)
    first = capsys.readouterr().out.splitlines()[0]
    assert "route matrix (auto: no common bases" in first and "asymptotic stages" in first
