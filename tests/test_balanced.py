"""The exact λ-balanced solution (gdln.balanced) against independent computations.

Each check compares gdln.solve_balanced with something it does not use: full-matrix
gradient flow integrated here (scipy DOP853, rtol 1e-13, gradient written by hand from the
task's examples), the reduced solve of gdln.reduce + gdln.solve from decoupled weights,
Eq. (21) of Saxe et al. 2022, the lazy linear model at large |λ|, the fixed point of
Dominé et al. 2025, and the single-neuron solution of Kunin et al. 2024.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from pathlib import Path

import numpy as np
import pytest
from helpers import load
from scipy.integrate import solve_ivp

import gdln
from gdln.balanced import Pathway, balanced_pathways

LAMBDAS = (0.0, 1.0, 5.0, -3.0)
RTOL_FLOW = 1e-9  # max relative error against the integrated flow (issue 28)


def dense_problem(
    folder: Path, n_in: int, hidden: int, n_out: int, *, seed: int = 0
) -> gdln.Problem:
    """A two-layer linear network on one-hot (whitened) inputs with random targets."""
    targets = np.random.default_rng(seed).normal(size=(n_in, n_out)).round(3)
    rows = []
    for i in range(n_in):
        x = [1 if j == i else 0 for j in range(n_in)]
        rows.append(f"    - {{inputs: {{x: {x}}}, targets: {{y: {targets[i].tolist()}}}}}")
    path = folder / f"dense_{n_in}_{hidden}_{n_out}_{seed}.yaml"
    path.write_text(
        "name: dense\n"
        f"nodes: [{{id: x, size: {n_in}}}, {{id: h, size: {hidden}}}, {{id: y, size: {n_out}}}]\n"
        "edges: [{source: x, target: h}, {source: h, target: y}]\n"
        "task:\n  examples:\n" + "\n".join(rows) + "\n"
    )
    return gdln.load(path)


def path_gates(examples: gdln.ExampleSet, pathway: Pathway) -> np.ndarray:
    """The product of the gates along a pathway, per example."""
    gate = np.ones(len(examples.weights))
    for item in (*pathway.path.edges, *pathway.path.nodes[1:]):
        if item in examples.gates:
            gate = gate * examples.gates[item]
    return gate


def full_flow(
    problem: gdln.Problem,
    weights: Mapping[tuple[Hashable, Hashable], np.ndarray],
    times: np.ndarray,
) -> dict[tuple[Hashable, Hashable], np.ndarray]:
    """Gradient flow tau dW/dt = -dL/dW of every pathway edge, integrated on the flattened
    weights; the gradient of the loss of Eq. (1) is written out from the examples."""
    examples = problem.examples()
    pathways = balanced_pathways(problem)
    edges = [e for p in pathways for e in (p.first, p.second)]
    shapes = [weights[e].shape for e in edges]
    splits = np.cumsum([int(np.prod(s)) for s in shapes])[:-1]
    gates = [path_gates(examples, p) for p in pathways]
    w = examples.weights

    def unpack(y: np.ndarray) -> dict[tuple[Hashable, Hashable], np.ndarray]:
        return {
            e: part.reshape(s)
            for e, s, part in zip(edges, shapes, np.split(y, splits), strict=True)
        }

    def rhs(_: float, y: np.ndarray) -> np.ndarray:
        W = unpack(y)
        out = {v: np.zeros_like(t) for v, t in examples.targets.items()}
        for p, g in zip(pathways, gates, strict=True):
            x = examples.inputs[p.path.source]
            out[p.path.target] += g[:, None] * (x @ W[p.first].T @ W[p.second].T)
        grads = []
        for p, g in zip(pathways, gates, strict=True):
            x = examples.inputs[p.path.source]
            err = (examples.targets[p.path.target] - out[p.path.target]) * (w * g)[:, None]
            grads += [(W[p.second].T @ err.T @ x).ravel(), (err.T @ x @ W[p.first].T).ravel()]
        return np.concatenate(grads)

    y0 = np.concatenate([weights[e].ravel() for e in edges])
    sol = solve_ivp(
        rhs, (0.0, times[-1]), y0, t_eval=times, method="DOP853", rtol=1e-13, atol=1e-14
    )
    assert sol.success
    states = [unpack(sol.y[:, k]) for k in range(len(times))]
    return {e: np.stack([s[e] for s in states]) for e in edges}


def example_losses(
    problem: gdln.Problem, weights: Mapping[tuple[Hashable, Hashable], np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Loss of Eq. (1) and its average within each context, ``(T,)`` and ``(T, contexts)``,
    from a forward pass over the examples at every time."""
    examples = problem.examples()
    pathways = balanced_pathways(problem)
    T = len(next(iter(weights.values())))
    per_example = np.zeros((T, len(examples.weights)))
    for v, target in examples.targets.items():
        out = np.zeros((T, *target.shape))
        for p in pathways:
            if p.path.target == v:
                x = examples.inputs[p.path.source]
                W = weights[p.second] @ weights[p.first]
                out += path_gates(examples, p)[None, :, None] * np.einsum("tij,aj->tai", W, x)
        per_example += 0.5 * ((target[None] - out) ** 2).sum(axis=2)
    w = examples.weights
    contexts = np.unique(examples.context)
    by_context = np.stack(
        [
            per_example[:, examples.context == c]
            @ w[examples.context == c]
            / w[examples.context == c].sum()
            for c in contexts
        ],
        axis=1,
    )
    return per_example @ w, by_context


def _products(weights: Mapping[tuple[Hashable, Hashable], np.ndarray], p: Pathway):
    W1, W2 = weights[p.first], weights[p.second]
    return {
        "W2W1": W2 @ W1,
        "W1TW1": W1.transpose(0, 2, 1) @ W1,
        "W2W2T": W2 @ W2.transpose(0, 2, 1),
    }


def _relative(got: np.ndarray, ref: np.ndarray) -> float:
    return float(np.abs(got - ref).max() / np.abs(ref).max())


PROBLEMS = {
    "dense out>in": lambda tmp: dense_problem(tmp, 3, 3, 5),
    "dense in>out": lambda tmp: dense_problem(tmp, 5, 2, 2, seed=1),
    "xor": lambda tmp: load("xor", hidden=1),  # rank-one inputs (Eq. 19), four pathways
    "context": lambda tmp: load("context", pathways=2, hidden=1),  # gated edges, moments
}


@pytest.mark.parametrize("lam", LAMBDAS)
@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_the_solution_equals_full_matrix_gradient_flow(
    name: str, lam: float, tmp_path: Path
) -> None:
    problem = PROBLEMS[name](tmp_path)
    start = gdln.balanced_weights(problem, lam=lam, scale=0.3, alignment=0.0, seed=3)
    trajectory = gdln.solve_balanced(problem, start, t_max=30.0, points=31)
    flow = full_flow(problem, start, trajectory.t)
    for p in balanced_pathways(problem):
        assert trajectory.meta["lambda"][p.name] == pytest.approx(lam, abs=1e-12)
        for key, ref in _products(flow, p).items():
            assert _relative(trajectory.series[f"{key}/{p.name}"], ref) <= RTOL_FLOW, key
    loss, by_context = example_losses(problem, flow)
    np.testing.assert_allclose(trajectory.loss, loss, rtol=0, atol=RTOL_FLOW * loss[0])
    np.testing.assert_allclose(
        trajectory.series["context_loss"], by_context, rtol=0, atol=RTOL_FLOW * loss[0]
    )


@pytest.mark.parametrize(
    ("name", "params"),
    [("xor", {"hidden": 3}), ("context", {"pathways": 2, "hidden": 3}), ("routes", {})],
)
def test_decoupled_lambda_zero_starts_follow_the_reduced_solve(
    name: str, params: dict[str, int], tmp_path: Path
) -> None:
    """Decoupled weights (Eq. 9) are λ = 0 starts; gdln.reduce + gdln.solve is Eq. (10)."""
    problem = dedicated_routes(tmp_path) if name == "routes" else load(name, **params)
    reduction = gdln.reduce(problem, b0=0.2)
    reduced = gdln.solve(reduction, t_max=20.0, points=21)
    along = gdln.balanced.weights_along(reduction, reduced, seed=4)
    exact = gdln.solve_balanced(problem, reduction.decoupled_weights(seed=4), t_max=20.0, points=21)
    assert all(abs(lam) < 1e-14 for lam in exact.meta["lambda"].values())
    for p in balanced_pathways(problem):
        ref = along[p.second] @ along[p.first]
        assert _relative(exact.series[f"W2W1/{p.name}"], ref) < 1e-8
    np.testing.assert_allclose(exact.loss, reduced.loss, rtol=0, atol=1e-9 * reduced.loss[0])


@pytest.mark.parametrize("lam", [1.0, -3.0])
def test_aligned_unbalanced_modes_follow_the_reduced_solve(lam: float, tmp_path: Path) -> None:
    """A square network where every hidden direction carries a mode: decoupled weights with
    b_2^2 - b_1^2 = λ on every mode are λ-balanced, and alignment=1 draws such a start."""
    problem = dense_problem(tmp_path, 3, 3, 3, seed=2)
    b1, b2 = (0.3, math.sqrt(0.09 + lam)) if lam > 0 else (math.sqrt(0.09 - lam), 0.3)
    reduction = gdln.reduce(problem, b0={"x->h": b1, "h->y": b2})
    reduced = gdln.solve(reduction, t_max=15.0, points=16)
    exact = gdln.solve_balanced(problem, reduction.decoupled_weights(seed=1), t_max=15.0, points=16)
    np.testing.assert_allclose(exact.loss, reduced.loss, rtol=0, atol=1e-9 * reduced.loss[0])
    drawn = gdln.balanced_weights(problem, lam=lam, scale=0.3, alignment=1.0, seed=5)
    np.testing.assert_allclose(
        gdln.solve_balanced(problem, drawn, t_max=15.0, points=16).loss,
        reduced.loss,
        rtol=0,
        atol=1e-9 * reduced.loss[0],
    )


def dedicated_routes(folder: Path) -> gdln.Problem:
    """Two input domains, two output domains, a dedicated hidden node per trained route."""
    path = folder / "routes.yaml"
    path.write_text(
        """\
name: routes
nodes:
  - {id: "x{i}", size: 4, repeat: {i: 2}}
  - {id: "h{i}_{j}", size: 3, repeat: {i: 2, j: 2}}
  - {id: "y{j}", size: 7, repeat: {j: 2}}
edges:
  - {source: "x{i}", target: "h{i}_{j}", gated: true, repeat: {i: 2, j: 2}}
  - {source: "h{i}_{j}", target: "y{j}", gated: true, repeat: {i: 2, j: 2}}
datasets:
  base: {builtin: hierarchy}
task:
  contexts:
    - repeat: {i: 2, j: 2}
      label: "x{i}->y{j}"
      probability: 1/4
      active: ["x{i}->h{i}_{j}", "h{i}_{j}->y{j}"]
      dataset: base
      inputs: {"x{i}": x}
      targets: {"y{j}": y}
"""
    )
    return gdln.load(path)


def test_lambda_zero_follows_eq21_and_the_xor_loss_eq23() -> None:
    """XoR, App. A.1: s = sqrt(2)/4, d = 2/4 per pathway; a(t) of Eq. (21), L of Eq. (23)."""
    problem = load("xor", hidden=1)
    scale = 0.1
    start = gdln.balanced_weights(problem, lam=0.0, scale=scale, alignment=1.0, seed=0)
    trajectory = gdln.solve_balanced(problem, start, t_max=30.0, points=61)
    s, d, a0, t = np.sqrt(2) / 4, 2 / 4, scale**2, trajectory.t
    a = (s / d) / (1 - (1 - s / (d * a0)) * np.exp(-2 * s * t))
    v = np.array([1.0, 1.0]) / np.sqrt(2)  # pathway h0: the example x = [1, 1], y = 1
    got = trajectory.series["W2W1/x->h0->y"][:, 0, :] @ v
    np.testing.assert_allclose(got, a, rtol=1e-11)
    np.testing.assert_allclose(trajectory.loss, 0.5 - np.sqrt(2) * a + a**2, atol=1e-12)


def test_large_lambda_approaches_the_lazy_linear_model() -> None:
    """|λ| -> inf: a(t) -> s/d + (a_0 - s/d) exp(-|λ| d t) (d = 1: s + (a_0 - s)e^{-|λ|t})."""
    problem = load("context", pathways=1, hidden=1)  # s = sqrt(2)/6, d = 1/3 (Eqs. 24-25)
    s, d = np.sqrt(2) / 6, 1 / 3
    v = np.array([1.0, 1.0]) / np.sqrt(2)
    for sign in (1, -1):
        errors = []
        for size in (10.0, 100.0, 1000.0):
            lam = sign * size
            start = gdln.balanced_weights(problem, lam=lam, scale=0.1, alignment=1.0)
            a0 = float((start[("h0", "y")] @ start[("x", "h0")] @ v)[0])
            trajectory = gdln.solve_balanced(problem, start, t_max=5 / (size * d), points=101)
            a = trajectory.series["W2W1/x->h0->y"][:, 0, :] @ v
            lazy = s / d + (a0 - s / d) * np.exp(-size * d * trajectory.t)
            errors.append(float(np.abs(a - lazy).max() / abs(s / d - a0)))
        assert errors[0] > 10 * errors[1] > 100 * errors[2]
        assert errors[2] < 1e-5


@pytest.mark.parametrize("lam", [0.0, 1.0, -3.0, 5.0])
def test_representations_reach_the_balanced_fixed_point(lam: float, tmp_path: Path) -> None:
    """t -> inf: W1ᵀW1 -> V(sqrt(S² + λ²/4) - λ/2)Vᵀ and W2W2ᵀ -> U(sqrt(S² + λ²/4) + λ/2)Uᵀ,
    S, U, V of the whitened target Σyx Σx⁻¹ computed here from the examples."""
    problem = dense_problem(tmp_path, 3, 3, 3, seed=1)
    examples = problem.examples()
    x, y, w = examples.inputs["x"], examples.targets["y"], examples.weights
    sigma_yx = (y * w[:, None]).T @ x
    sigma_x = (x * w[:, None]).T @ x
    U, S, Vt = np.linalg.svd(sigma_yx @ np.linalg.inv(sigma_x))
    start = gdln.balanced_weights(problem, lam=lam, scale=0.2, alignment=0.0, seed=4)
    trajectory = gdln.solve_balanced(problem, start, t_max=2000.0, points=2)
    root = np.sqrt(S**2 + lam**2 / 4)
    np.testing.assert_allclose(
        trajectory.series["W1TW1/x->h->y"][-1], Vt.T @ np.diag(root - lam / 2) @ Vt, atol=1e-10
    )
    np.testing.assert_allclose(
        trajectory.series["W2W2T/x->h->y"][-1], U @ np.diag(root + lam / 2) @ U.T, atol=1e-10
    )


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_a_single_hidden_neuron_follows_the_closed_form(seed: int) -> None:
    """f(x) = a wᵀx with δ = a² - |w|² conserved (any start is λ-balanced, λ = δ):
    ν = <w, β*>/a obeys ν = (-δ + K tanh(K t'/2 + artanh((δ + 2ν0)/K)))/2,
    K = sqrt(4|β*|² + δ²), in the whitened clock t' = c t (Kunin et al. 2024)."""
    problem = load("context", pathways=1, hidden=1)  # Σx = I/3, β* = [1/2, 1/2] (App. A.2)
    c, beta = 1 / 3, np.array([0.5, 0.5])
    rng = np.random.default_rng(seed)
    w, a = rng.normal(scale=0.4, size=(1, 2)), rng.normal(scale=0.4, size=(1, 1))
    delta = float(a[0, 0] ** 2 - w[0] @ w[0])
    nu0 = float(w[0] @ beta / a[0, 0])
    K = np.sqrt(4 * beta @ beta + delta**2)
    trajectory = gdln.solve_balanced(problem, {"x->h0": w, "h0->y": a}, t_max=40.0, points=81)
    assert trajectory.meta["lambda"]["x->h0->y"] == pytest.approx(delta, rel=1e-12)
    product = trajectory.series["W2W1/x->h0->y"][:, 0, :]  # a wᵀ
    nu = product @ beta / trajectory.series["W2W2T/x->h0->y"][:, 0, 0]  # <a w, β>/a²
    # as getrichquick's theory(): a complex artanh covers |δ + 2ν0| > K, where tanh -> coth
    phase = 0.5 * K * c * trajectory.t + np.arctanh(complex((delta + 2 * nu0) / K))
    expected = 0.5 * (-delta + K * np.tanh(phase).real)
    np.testing.assert_allclose(nu, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("lam", LAMBDAS)
def test_drawn_starts_are_balanced_and_aligned_as_asked(lam: float, tmp_path: Path) -> None:
    problem = dense_problem(tmp_path, 4, 3, 5)
    examples = problem.examples()
    x, y, w = examples.inputs["x"], examples.targets["y"], examples.weights
    U, _, Vt = np.linalg.svd((y * w[:, None]).T @ x)
    for alignment in (0.0, 0.5, 1.0):
        start = gdln.balanced_weights(problem, lam=lam, scale=0.5, alignment=alignment, seed=7)
        W1, W2 = start[("x", "h")], start[("h", "y")]
        np.testing.assert_allclose(W2.T @ W2 - W1 @ W1.T, lam * np.eye(3), atol=1e-12)
        in_task_bases = U.T @ W2 @ W1 @ Vt.T
        off = np.abs(in_task_bases[~np.eye(*in_task_bases.shape, dtype=bool)]).max()
        assert (off < 1e-12) == (alignment == 1.0)
    measured = gdln.balanced.measure_balance(problem, {"W/x->h": W1, ("h", "y"): W2})
    assert measured["x->h->y"].lam == pytest.approx(lam, abs=1e-12)
    assert measured["x->h->y"].balanced()
