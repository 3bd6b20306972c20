"""Independent random gates and fixed edges in the core (stochastic depth as a gated network).

References used here, each independent of the code under test:

* the explicitly expanded mixture: every realisation of the random gates as its own
  context with probability prod p or (1 - p), through the deterministic code path;
* the hand-written O(L) chain form ``expected_chain`` and the 2^L enumeration
  ``brute_force_chain`` of ``gdln.sd``;
* torch autograd on the full-matrix network (``tests/helpers.py``), averaged over masks;
* closed forms of the whitened dataset: s_alpha = (n - alpha)/n^2, d = 1/n.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import sympy as sp
from helpers import (
    GRAPHS,
    TWO_INPUTS,
    coactive,
    full_loss_and_gradient,
    load,
    per_mode,
    resnet,
    run_cli,
    write,
)

import gdln
from gdln.sd import brute_force_chain, expected_chain

RTOL = 1e-12


def expanded(problem: gdln.Problem) -> gdln.Problem:
    """The same task with every realisation of the random gates as its own context."""
    task = problem.require_task()
    items = list(task.random_gates)
    contexts = []
    for c in task.contexts:
        for bits in itertools.product((0, 1), repeat=len(items)):
            weight = sp.Integer(1)
            gates = dict(c.gates)
            for item, bit in zip(items, bits, strict=True):
                p = sp.sympify(task.random_gates[item])
                weight *= p if bit else 1 - p
                gates[item] = gates.get(item, 1) * bit
            label = f"{c.label}|{''.join(map(str, bits))}"
            contexts.append(
                replace(c, probability=c.probability * weight, gates=gates, label=label)
            )
    mixture = gdln.Task(contexts=tuple(contexts), datasets=task.datasets)
    return replace(problem, task=mixture)


def zero_if_equal(a: object, b: object) -> bool:
    return all(sp.simplify(x) == 0 for x in sp.Matrix(a) - sp.Matrix(b))


# --------------------------------------------------------------------------------------
# Statistics and the symbolic route against the expanded mixture


@pytest.mark.parametrize("which", ["coactive", "resnet"])
def test_statistics_equal_those_of_the_expanded_mixture(which: str, tmp_path: Path) -> None:
    if which == "coactive":
        problem = coactive(tmp_path)
    else:
        problem = resnet(3, p_L="q", survival="linear", width=2)
    mixture = expanded(problem)
    got = gdln.path_statistics(problem.graph, problem.task)
    want = gdln.path_statistics(mixture.graph, mixture.task)
    assert got.exact and want.exact
    assert set(got.input_output) == set(want.input_output)
    for path, value in got.input_output.items():
        assert zero_if_equal(value, want.input_output[path]), path
    pairs = set(got.input) | set(want.input)
    assert any(j != p for j, p in pairs)  # co-active pairs are really there
    for j, p in pairs:
        assert zero_if_equal(got.input_correlation(j, p), want.input_correlation(j, p)), (j, p)
    q = sp.Symbol("q", positive=True)
    assert any(q in sp.Matrix(v).free_symbols for v in got.input.values())


@pytest.mark.parametrize("which", ["coactive", "resnet"])
def test_reduced_loss_and_odes_equal_those_of_the_expanded_mixture(
    which: str, tmp_path: Path
) -> None:
    if which == "coactive":
        problem = coactive(tmp_path, p_xy="3/4")
    else:
        problem = resnet(3, p_L="q", survival="linear", scaling="stable", width=2)
    ours = gdln.reduce(problem, lump="none", b0=0.1)
    theirs = gdln.reduce(expanded(problem), lump="none", b0=0.1)
    assert sp.simplify(ours.constant - theirs.constant) == 0
    checked = 0
    for a in ours.systems:
        for mode in a.modes:
            (b,) = [s for s in theirs.systems if mode in s.modes]
            assert {str(v) for v in a.variables} == {str(v) for v in b.variables}
            names = {str(v): v for v in a.variables}
            rename = {v: names[str(v)] for v in b.variables}
            diff = per_mode(a, a.loss, mode) - per_mode(b, b.loss, mode).xreplace(rename)
            assert sp.simplify(diff) == 0
            for v in b.variables:
                rhs_b = per_mode(b, b.rhs[v], mode).xreplace(rename)
                assert sp.simplify(per_mode(a, a.rhs[rename[v]], mode) - rhs_b) == 0
            checked += 1
    assert checked >= 2


def test_symbolic_p_stays_symbolic_in_the_odes_and_matches_the_chain() -> None:
    """E[f] = prod(1 + kappa p_l b_l), E[f^2] = prod(1 + 2 kappa p_l b_l + kappa^2 p_l b_l^2)."""
    problem = resnet(2, p_L="q", survival="linear", scaling="stable")
    (system,) = gdln.reduce(problem, lump="none").systems
    q = sp.Symbol("q", positive=True)
    b = [next(v for v in system.variables if str(v) == f"b_h{k}_r{k}") for k in range(2)]
    p = [1 - sp.Rational(k + 1, 2) * (1 - q) for k in range(2)]
    kappa = 1 / sp.sqrt(2)
    s, d = sp.symbols("s d")
    mean = sp.Mul(*[1 + kappa * pl * bl for pl, bl in zip(p, b, strict=True)])
    second = sp.Mul(
        *[1 + 2 * kappa * pl * bl + kappa**2 * pl * bl**2 for pl, bl in zip(p, b, strict=True)]
    )
    for mode in system.modes:
        n = 8
        values = {s: sp.Rational(n - mode, n * n), d: sp.Rational(1, n)}
        expected = -values[s] * mean + values[d] * second / 2
        assert sp.simplify(per_mode(system, system.loss, mode) - expected) == 0
        for v in b:
            rhs = per_mode(system, system.rhs[v], mode)
            assert sp.simplify(rhs + sp.diff(expected, v)) == 0
    assert q in system.rhs[b[0]].free_symbols


def whitened_strengths(n: int) -> tuple[np.ndarray, float]:
    """s_alpha and d of the whitened dataset: Sigma_yx = A/n, A = diag((n - alpha)/n)."""
    return np.array([(n - a) / n**2 for a in range(n)]), 1.0 / n


@pytest.mark.parametrize("L", [1, 4, 10])
@pytest.mark.parametrize("scaling", ["plain", "stable"])
@pytest.mark.parametrize("survival", ["uniform", "linear"])
def test_resnet_sd_equals_chain_form_and_all_masks(L: int, scaling: str, survival: str) -> None:
    problem = resnet(L, scaling=scaling, survival=survival, p_L="0.3")
    dynamics = gdln.expected_dynamics(problem)
    p = np.array([float(x) for x in problem.task.random_gates.values()])
    s, d = whitened_strengths(8)
    b = np.random.default_rng(L).normal(scale=0.4, size=dynamics.alive.shape)
    chain = expected_chain(b, p, s=s, d=d, scaling=scaling)
    np.testing.assert_allclose(dynamics.mode_losses(b), chain.loss_modes, rtol=RTOL, atol=1e-15)
    np.testing.assert_allclose(dynamics.gradient(b), chain.grad, rtol=RTOL, atol=1e-15)
    loss, grad = brute_force_chain(b, p, s=s, d=d, scaling=scaling)
    assert dynamics.loss(b) - dynamics.constant == pytest.approx(loss, rel=RTOL)
    np.testing.assert_allclose(dynamics.gradient(b), grad, rtol=1e-10, atol=1e-14)


def test_inverted_mask_is_the_merge_scaled_by_one_over_p(tmp_path: Path) -> None:
    """docs/stochastic_depth.md: delta_l / p_l is the merge edge holding (kappa / p_l) I."""
    text = (GRAPHS / "resnet_sd.yaml").read_text()
    survival = "p_L if survival == uniform else 1 - (l + 1)/L*(1 - p_L)"
    assert text.count("fixed: kappa,") == 1
    text = text.replace("fixed: kappa,", f'fixed: "kappa/({survival})",')
    L = 5
    params = {"L": str(L), "survival": "linear", "p_L": "0.3"}
    problem = gdln.load(write(tmp_path, text), params=params)
    dynamics = gdln.expected_dynamics(problem)
    p = np.array([float(x) for x in problem.task.random_gates.values()])
    s, d = whitened_strengths(8)
    b = np.random.default_rng(3).normal(scale=0.4, size=dynamics.alive.shape)
    chain = expected_chain(b, p, s=s, d=d, scaling="stable", mask="inverted")
    np.testing.assert_allclose(dynamics.mode_losses(b), chain.loss_modes, rtol=RTOL)
    np.testing.assert_allclose(dynamics.gradient(b), chain.grad, rtol=RTOL, atol=1e-15)


@pytest.mark.parametrize("name", ["xor", "crosspath", "routing", "resnet_sd"])
def test_path_counts_without_listing_equal_the_listed_paths(name: str) -> None:
    from gdln.paths._statistics import active_paths, context_activity
    from gdln.reduction._reduce import _count_active

    problem = load(name, **({"L": 4} if name == "resnet_sd" else {}))
    active = active_paths(problem.graph, problem.task)
    per_output = [
        [
            sum(1 for i in found if active.paths[i].target == o)
            for o in {p.target for p in active.paths}
        ]
        for found in active.gates
    ]
    listed = (sum(map(sum, per_output)), sum(n * n for row in per_output for n in row))
    assert _count_active(problem.graph, problem.task) == listed
    activity = context_activity(problem.graph, problem.task)
    assert [sum(a.paths.values()) for a in activity] == [sum(row) for row in per_output]


def test_moment_route_at_depth_1000_agrees_with_the_chain_form() -> None:
    problem = resnet(1000, scaling="stable", survival="linear")
    with pytest.raises(gdln.TooManyPathsError, match="more than the 100000 the symbolic route"):
        gdln.reduce(problem)
    dynamics = gdln.expected_dynamics(problem)
    assert dynamics.tape_size < 10 * 1000  # O(L) for 2^1000 paths
    p = np.array([float(x) for x in problem.task.random_gates.values()])
    s, d = whitened_strengths(8)
    b = np.random.default_rng(0).normal(scale=1.0, size=dynamics.alive.shape)
    chain = expected_chain(b, p, s=s, d=d, scaling="stable")
    losses, grad = dynamics.mode_losses(b), dynamics.gradient(b)
    assert np.all(np.isfinite(losses)) and np.all(np.isfinite(grad))
    np.testing.assert_allclose(losses, chain.loss_modes, rtol=1e-10)
    np.testing.assert_allclose(grad, chain.grad, rtol=1e-10, atol=1e-14)


# --------------------------------------------------------------------------------------
# Against autograd on the full network, averaged over every mask


def masked_examples(problem: gdln.Problem, bits: dict) -> gdln.ExampleSet:
    ex = problem.examples()
    gates = {k: v * bits.get(k, 1) for k, v in ex.gates.items()}
    return replace(ex, gates=gates, random_gates={})


@pytest.mark.parametrize("which", ["resnet2", "resnet4-stable", "coactive", "two_inputs"])
def test_expected_dynamics_equal_mask_average_of_autograd(which: str, tmp_path: Path) -> None:
    if which == "coactive":
        problem = coactive(tmp_path, p_xy="3/4")
        dynamics = gdln.expected_dynamics(gdln.reduce(problem))
    elif which == "two_inputs":
        problem = gdln.load(write(tmp_path, TWO_INPUTS))
        dynamics = gdln.expected_dynamics(problem)
    else:
        L = int(which[6])
        problem = resnet(L, width=4, survival="linear", scaling="plain" if L == 2 else "stable")
        dynamics = gdln.expected_dynamics(problem)
    survival = problem.task.random_gates
    rng = np.random.default_rng(7)
    b = np.where(dynamics.alive, rng.normal(scale=0.5, size=dynamics.alive.shape), 0)
    weights = dynamics.decoupled_weights(b, seed=3)
    loss, grad = 0.0, {e: np.zeros_like(w) for e, w in weights.items()}
    for bits in itertools.product((0, 1), repeat=len(survival)):
        chosen = dict(zip(survival, bits, strict=True))
        prob = np.prod([float(p) if chosen[k] else 1 - float(p) for k, p in survival.items()])
        ell, g = full_loss_and_gradient(problem, weights, masked_examples(problem, chosen))
        loss += prob * ell
        for e in grad:
            grad[e] += prob * g[e]
    assert loss == pytest.approx(dynamics.loss(b), rel=1e-10)
    flow = dynamics.flow(b)
    scale = max(np.abs(g).max() for g in grad.values())
    for i, e in enumerate(dynamics.edges):
        left, right, slots = dynamics.edge_bases(e, seed=3)
        minus = -grad[e]
        projected = np.einsum("ta,ts,sa->a", left, minus, right)
        np.testing.assert_allclose(projected, flow[i, slots], rtol=1e-10, atol=1e-10 * scale)
        rest = minus - (left * projected) @ right.T
        assert np.abs(rest).max() <= 1e-10 * scale  # the flow stays decoupled
    for e, w in weights.items():  # fixed edges hold c I
        c = problem.graph.edges[e].get("fixed")
        if c is not None:
            np.testing.assert_array_equal(w, float(c) * np.eye(w.shape[0]))


def test_full_matrix_dynamics_are_the_expected_flow_and_keep_fixed_edges() -> None:
    """Eqs. (3)-(4) with the expected statistics, from decoupled weights, vs the moment route."""
    problem = resnet(2, width=3, survival="linear")
    dynamics = gdln.expected_dynamics(problem, b0=0.2)
    weights = dynamics.decoupled_weights(seed=2)  # from dynamics.initial
    full = gdln.solve(problem, route="matrix", weights=weights, t_max=5, points=6)
    reduced = gdln.solve(dynamics, t_max=5, points=6)
    np.testing.assert_allclose(full.loss, reduced.loss, rtol=1e-6)
    for e in problem.graph.edges:
        series = full.series[f"W[{e[0]}->{e[1]}]"]
        if problem.graph.edges[e].get("fixed") is not None:
            np.testing.assert_array_equal(series[-1], series[0])
        else:
            i = dynamics.edges.index(e)
            left, right, slots = dynamics.edge_bases(e, seed=2)
            got = np.einsum("ta,ts,sa->a", left, series[-1], right)
            want = reduced.series[str(dynamics.variables[i])][-1, slots]
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-8)


def test_decoupled_weights_project_back() -> None:
    dynamics = gdln.expected_dynamics(resnet(3, width=4))
    b = np.random.default_rng(0).normal(size=dynamics.alive.shape)
    np.testing.assert_allclose(dynamics.project(dynamics.decoupled_weights(b)), b, rtol=1e-12)


# --------------------------------------------------------------------------------------
# The simulator: random gates redrawn every step, fixed edges untouched


def one_step(problem: gdln.Problem, weights: dict, seeds: int, lr: float) -> gdln.Trajectory:
    return gdln.simulate(
        problem.graph,
        problem.examples(),
        steps=1,
        lr=lr,
        init_scheme="given",
        weights=weights,
        seeds=seeds,
        record_weights=True,
        threads=1,
    )


@pytest.mark.parametrize("which", ["resnet", "coactive"])
def test_simulated_step_averages_to_the_expected_map(which: str, tmp_path: Path) -> None:
    if which == "resnet":
        problem = resnet(3, width=4, p_L="0.4", survival="linear")
        dynamics = gdln.expected_dynamics(problem)
    else:  # a random node gate (folded into its in-edges) and a random edge gate
        problem = coactive(tmp_path, p_xy="3/4")
        dynamics = gdln.expected_dynamics(gdln.reduce(problem))
    rng = np.random.default_rng(1)
    b0 = np.where(dynamics.alive, rng.normal(scale=0.5, size=dynamics.alive.shape), 0)
    weights = dynamics.decoupled_weights(b0)
    lr, n = 0.5, 400
    run = one_step(problem, weights, n, lr)
    after = {e: run.series[f"W/{e[0]}->{e[1]}"][-1] for e in weights}  # (seeds, |t|, |s|)
    b1 = np.array([dynamics.project({e: after[e][r] for e in weights}) for r in range(n)])
    mean = b1.mean(axis=0)
    se = b1.std(axis=0, ddof=1) / np.sqrt(n)
    expected = b0 + lr * dynamics.flow(b0)
    moving = se > 1e-12  # entries that the draw changes (others vary by rounding only)
    assert moving.sum() >= 4  # the random gates really vary the step
    k = 5.0  # standard errors; at most 24 compared entries, so a false alarm has p < 1e-4
    assert np.all(np.abs(mean - expected)[moving] <= k * se[moving])
    assert np.allclose(mean[~moving], expected[~moving], rtol=1e-10, atol=1e-12)
    for e in weights:
        c = problem.graph.edges[e].get("fixed")
        if c is not None:  # fixed edges do not move
            eye = float(c) * np.eye(after[e].shape[-1])
            assert np.array_equal(after[e], np.broadcast_to(eye, after[e].shape))
    again = one_step(problem, weights, n, lr)
    for e in weights:  # reproducible under the seeds
        key = f"W/{e[0]}->{e[1]}"
        np.testing.assert_array_equal(again.series[key], run.series[key])


def test_simulator_refuses_symbolic_survival_probability() -> None:
    problem = resnet(2, p_L="q")
    with pytest.raises(gdln.SimulationSpecError, match=r"survival probability of .* is q"):
        gdln.simulate(problem.graph, problem.examples(), steps=1, lr=0.1)


# --------------------------------------------------------------------------------------
# Solving, printing, errors


def test_solve_accepts_expected_dynamics_and_matches_the_reduced_ode() -> None:
    problem = resnet(3, width=3)
    by_moments = gdln.solve(gdln.expected_dynamics(problem), t_max=20, points=11)
    by_symbols = gdln.solve(gdln.reduce(problem, lump="none"), t_max=20, points=11)
    np.testing.assert_allclose(by_moments.loss, by_symbols.loss, rtol=1e-6)
    np.testing.assert_allclose(
        by_moments.series["b_h1_r1"], by_symbols.series["b_h1_r1"], rtol=1e-6, atol=1e-9
    )
    gd_moments = gdln.solve(gdln.expected_dynamics(problem), t_max=5, dynamics="gd-map", lr=0.5)
    gd_symbols = gdln.solve(gdln.reduce(problem, lump="none"), t_max=5, dynamics="gd-map", lr=0.5)
    np.testing.assert_allclose(gd_moments.loss, gd_symbols.loss, rtol=1e-12)
    assert np.all(np.diff(by_moments.loss) <= 1e-12)  # gradient flow never increases the loss


def test_cli_prints_symbolic_expected_odes_and_solves_deep_nets(capsys) -> None:
    path = str(GRAPHS / "resnet_sd.yaml")
    code, out, _ = run_cli(["paths", path, "--param", "L=3"], capsys)
    assert code == 0 and "8 input-output paths" in out and "h0->r0->h1->r1->h2->r2->h3" in out
    code, out, _ = run_cli(
        ["derive", path, "--param", "L=3", "--param", "p_L=q", "--lump", "none"], capsys
    )
    assert code == 0 and "q" in out and "b_h2_r2" in out
    code, out, _ = run_cli(["stats", path, "--param", "L=2", "--param", "p_L=q"], capsys)
    assert code == 0 and "q" in out
    code, out, err = run_cli(["derive", path, "--param", "L=1000"], capsys)
    assert code == 2 and "gdln.expected_dynamics" in err
    code, out, _ = run_cli(
        ["solve", path, "--param", "L=1000", "--t-max", "2", "--points", "3", "--format", "csv"],
        capsys,
    )
    rows = out.strip().splitlines()[1:]  # after the line of variable_edges
    assert code == 0 and len(rows) == 4 and rows[0].startswith("t,loss,b_h0_r0 (mode 0)")
    loss = [float(r.split(",")[1]) for r in rows[1:]]
    assert loss[-1] < loss[0]


BAD_P = """\
nodes: [{id: x, size: 1}, {id: h, size: 1, gated: true}, {id: y, size: 1}]
edges: [{source: x, target: h}, {source: h, target: y}]
task:
  random_gates: [{item: h, p: 3/2}]
  examples: [{inputs: {x: [1]}, targets: {y: [1]}}]
"""


def test_stats_and_derive_keep_symbolic_p_with_bases_from_path_statistics(
    tmp_path: Path,
) -> None:
    problem = coactive(tmp_path)
    reduction = gdln.reduce(problem)
    assert all(m.exact_vectors is not None for m in reduction.modes)
    text = gdln.format_statistics(problem, reduction)
    # Sigma_yx(x->y) = q/3 (2, 0)^T (1, 1, 0) (examples 0 and 2 keep x->y, y = 0 in 2);
    # in the mode u = e_1, v = (1, 1, 0)/sqrt(2) that is 2 sqrt(2) q / 3
    assert "S(x->y) = [2*sqrt(2)*q/3" in text
    q = sp.Symbol("q", positive=True)
    assert any(q in e.free_symbols for s in reduction.systems for e in s.rhs.values())


def test_error_probability_outside_unit_interval(tmp_path: Path, capsys) -> None:
    path = write(tmp_path, BAD_P)
    with pytest.raises(
        gdln.TaskSpecError,
        match=r"task.random_gates\[0\].p: survival probability p = 3/2 of 'h' is outside \[0, 1\]",
    ):
        gdln.load(path)
    code, _, err = run_cli(["derive", str(path)], capsys)
    assert code == 2 and err.count("\n") == 1 and "outside [0, 1]" in err


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("x", "node 'x' is not gated"),
        ("h->y", "edge 'h->y' is not gated"),
        ("z", "node 'z' does not exist"),
    ],
)
def test_error_random_item_must_be_a_gated_item(tmp_path: Path, item: str, message: str) -> None:
    text = BAD_P.replace("{item: h, p: 3/2}", f'{{item: "{item}", p: 1/2}}')
    with pytest.raises(gdln.TaskSpecError, match=rf"task.random_gates\[0\].item: {message}"):
        gdln.load(write(tmp_path, text))


def test_error_random_item_listed_twice(tmp_path: Path) -> None:
    text = BAD_P.replace("[{item: h, p: 3/2}]", "[{item: h, p: 1/2}, {item: h, p: 1/3}]")
    with pytest.raises(gdln.TaskSpecError, match=r"random_gates\[1\].item: 'h' is listed twice"):
        gdln.load(write(tmp_path, text))


def test_error_fixed_edge_needs_equal_sizes(tmp_path: Path) -> None:
    text = """\
nodes: [{id: x, size: 2}, {id: h, size: 3}, {id: y, size: 3}]
edges: [{source: x, target: h, fixed: 1}, {source: h, target: y}]
"""
    with pytest.raises(
        gdln.GraphSpecError,
        match=r"edges\[0\].fixed: fixed edge x->h holds 1 times the identity, which needs "
        r"equal sizes, got \|x\| = 2 and \|h\| = 3",
    ):
        gdln.load(write(tmp_path, text))


def test_error_fixed_value_must_be_a_number(tmp_path: Path) -> None:
    text = """\
nodes: [{id: x, size: 2}, {id: y, size: 2}]
edges: [{source: x, target: y, fixed: "'one'"}]
"""
    with pytest.raises(
        gdln.GraphSpecError, match=r"edges\[0\]\.fixed: expected a number, got .one. \(a text\)"
    ):
        gdln.load(write(tmp_path, text))


def test_error_builtin_whitened_needs_a_size(tmp_path: Path) -> None:
    text = (GRAPHS / "resnet_sd.yaml").read_text().replace("size: width}", "size: 0}")
    with pytest.raises(
        gdln.TaskSpecError, match=r"datasets.data: builtin 'whitened': size must be a positive"
    ):
        gdln.load(write(tmp_path, text))


def test_error_fixed_class_whose_data_bases_differ(tmp_path: Path) -> None:
    """A fixed skip x -> y needs U = V; a non-symmetric map has U != V."""
    text = """\
nodes: [{id: x, size: 2}, {id: h, size: 2}, {id: y, size: 2}]
edges:
  - {source: x, target: y, fixed: 1}
  - {source: x, target: h}
  - {source: h, target: y}
task:
  examples:
    - {inputs: {x: [1, 0]}, targets: {y: [1, 2]}}
    - {inputs: {x: [0, 1]}, targets: {y: [0, 1]}}
"""
    path = write(tmp_path, text)
    with pytest.raises(gdln.NotDiagonalizableError, match=r"fixed edges x->y hold W = c I"):
        gdln.reduce(gdln.load(path))
    with pytest.raises(gdln.NotDiagonalizableError, match=r"fixed edges x->y hold W = c I"):
        gdln.expected_dynamics(gdln.load(path))


def test_symmetric_fixed_skip_reduces_exactly(tmp_path: Path) -> None:
    """The same net with a symmetric positive map: b_skip = 1 in every mode, autograd agrees."""
    text = """\
nodes: [{id: x, size: 2}, {id: h, size: 2}, {id: y, size: 2}]
edges:
  - {source: x, target: y, fixed: 1}
  - {source: x, target: h}
  - {source: h, target: y}
task:
  examples:
    - {inputs: {x: [1, 0]}, targets: {y: [2, 1]}}
    - {inputs: {x: [0, 1]}, targets: {y: [1, 3]}}
"""
    problem = gdln.load(write(tmp_path, text))
    reduction = gdln.reduce(problem, lump="none", b0=0.3)
    weights = reduction.decoupled_weights(seed=1)
    np.testing.assert_array_equal(weights[("x", "y")], np.eye(2))
    loss, grad = full_loss_and_gradient(problem, weights)
    dynamics = gdln.expected_dynamics(reduction)
    b = dynamics.project(weights, seed=1)
    assert loss == pytest.approx(dynamics.loss(b), rel=1e-10)
    np.testing.assert_allclose(
        dynamics.project({e: -g for e, g in grad.items()}, seed=1), dynamics.flow(b), rtol=1e-10
    )


def test_error_numbers_needed_for_symbolic_p() -> None:
    problem = resnet(2, p_L="q")
    with pytest.raises(gdln.GdlnError, match="survival probability or gate is symbolic"):
        gdln.expected_dynamics(problem).loss(np.zeros((2, 8)))
    with pytest.raises(gdln.GdlnError, match=r"symbol 'q' .*has no value; .*--param q=VALUE"):
        gdln.solve(gdln.reduce(problem), t_max=1)


def test_routing_with_symbolic_random_input_gates_is_eqs_44_to_46_times_p(tmp_path: Path) -> None:
    """One path per context, so E[delta] = E[delta^2] = q scales the whole loss by q."""
    text = (GRAPHS / "routing.yaml").read_text().replace("name: routing\n", "symbols: [q]\n")
    text = text.replace(
        "task:\n", 'task:\n  random_gates:\n    - {item: "x{i}->h1", p: q, repeat: {i: M}}\n'
    )
    M = 4
    problem = gdln.load(write(tmp_path, text), params={"M": str(M), "K": "2"})
    (system,) = gdln.reduce(problem, lump="symmetry").systems
    B1, B2, B3 = system.variables
    q, s, d = sp.Symbol("q", positive=True), *system.symbols
    error = s - B1 * B2 * B3 * d
    expected = {B1: q * B2 * B3 * error / M, B2: q * B1 * B3 * error, B3: q * B1 * B2 * error / M}
    for v, rhs in expected.items():
        assert sp.simplify(system.rhs[v] - rhs) == 0
    assert len(system.conserved) == 2
    for Q in system.conserved:  # conserved by the flow, as a polynomial identity
        assert sp.simplify(sum(sp.diff(Q, v) * system.rhs[v] for v in system.variables)) == 0


def test_gate_product_expectation_is_over_the_union() -> None:
    q = sp.Symbol("q", positive=True)
    g = gdln.GateProduct(2, frozenset({"a", "b"})) * gdln.GateProduct(3, frozenset({"b"}))
    assert sp.simplify(g.expectation({"a": q, "b": sp.Rational(1, 2)}) - 3 * q) == 0
    assert gdln.sd.expected_gate_product(["a", "b"], ["b"], {"a": q, "b": q}) == q**2
