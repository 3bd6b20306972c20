"""The reduction against the paper's equations and against autograd on the full network."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import sympy as sp
from helpers import NOT_DIAGONALIZABLE, RTOL_EXACT, full_loss_and_gradient, load, rhs_values

import gdln

B1, B2, B3, s, d, C = sp.symbols("B1 B2 B3 s d C", real=True)


def rhs_by_name(system: gdln.ReducedSystem) -> dict[str, sp.Expr]:
    return {str(v): e for v, e in system.rhs.items()}


def same(got: sp.Expr, expected: sp.Expr) -> bool:
    names = {str(x): x for x in got.free_symbols}
    expected = expected.subs({x: names.get(str(x), x) for x in expected.free_symbols})
    return sp.simplify(got - expected) == 0


@pytest.mark.parametrize("M,K", [(7, 4), (5, 2), (4, 4)])
def test_routing_symmetry_gives_eqs_44_to_46(M: int, K: int) -> None:
    (system,) = gdln.reduce(load("routing", M=M, K=K), lump="symmetry").systems
    rhs = rhs_by_name(system)
    error = s - B3 * B2 * B1 * d
    assert same(rhs["B1"], B3 * B2 * error / M)  # Eq. (44)
    assert same(rhs["B2"], B3 * B1 * error)  # Eq. (45)
    assert same(rhs["B3"], B2 * B1 * error / M)  # Eq. (46)
    assert [system.orbit(v) for v in system.variables] == [M, 1, M]


def test_routing_balanced_gives_eqs_47_48_and_conserved_quantity() -> None:
    M = 7
    (system,) = gdln.reduce(load("routing", M=M, K=4), lump="balanced").systems
    rhs = rhs_by_name(system)
    error = s - B2 * B1**2 * d
    assert same(rhs["B1"], B2 * B1 * error / M)  # Eq. (47)
    assert same(rhs["B2"], B1**2 * error)  # Eq. (48)
    (q,) = system.conserved
    assert same(q, M * B1**2 - B2**2) or same(q, B2**2 - M * B1**2)


def test_routing_full_gives_eq_15() -> None:
    M, init = 7, sp.Rational(1, 10)
    (system,) = gdln.reduce(load("routing", M=M, K=4), lump="full", b0=init).systems
    assert [str(v) for v in system.variables] == ["B2"]
    expected = (B2**2 + C) / M * (s - B2 * (B2**2 + C) * d / M)  # Eq. (15)
    assert same(system.rhs[system.variables[0]], expected)
    (c,) = system.constants
    assert system.constants[c] == M * init**2 - init**2  # C = M B1(0)^2 - B2(0)^2


@pytest.mark.parametrize("P", [1, 4, 100])
def test_race_gives_eqs_52_53(P: int) -> None:
    M = 10
    (system,) = gdln.reduce(load("race", M=M, P=P), lump="symmetry").systems
    rhs = rhs_by_name(system)
    # balanced subspace B3 = B1 of the symmetric system, as in App. C
    error = s - B2 * B1**2 * d
    assert same(rhs["B1"].subs(B3, B1), sp.sqrt(P) / M**2 * B2 * B1 * error)  # Eq. (52)
    assert same(rhs["B2"].subs(B3, B1), sp.Rational(P, M**2) * B1**2 * error)  # Eq. (53)


def test_routing_base_dataset_modes_are_exact() -> None:
    (system,) = gdln.reduce(load("routing", M=3, K=2)).systems
    values = {str(k): v for k, v in system.symbols.items()}
    # Sigma_yx of Fig. 4c: (1/4) Y^T with one-hot inputs; Y Y^T has eigenvalues 185, 41, 9, 9
    assert [sp.simplify(v**2 * 16) for v in values["s"]] == [185, 41, 9, 9]
    assert all(v == sp.Rational(1, 4) for v in values["d"])


def test_xor_loss_is_eq_23_and_solution_is_eq_21() -> None:
    reduction = gdln.reduce(load("xor"), lump="full")
    (system,) = reduction.systems
    (B,) = system.variables
    a = sp.Symbol("a", positive=True)
    values = {k: v[0] for k, v in system.symbols.items()}
    loss = reduction.constant + system.loss.subs(values)
    assert (
        sp.simplify(loss.subs(B, sp.sqrt(a)) - (sp.Rational(1, 2) - sp.sqrt(2) * a + a**2)) == 0
    )  # Eq. (23)
    # Eq. (21) with the pathway statistics s = sqrt(2)/P, d = 2/P, P = 4, tau = 1
    t, a0 = sp.symbols("t a0", positive=True)
    sp_, dp = sp.sqrt(2) / 4, sp.Rational(2, 4)
    eq21 = (sp_ / dp) / (1 - (1 - sp_ / (dp * a0)) * sp.exp(-2 * sp_ * t))
    solution = system.closed_form[str(B)].expr.subs(values)
    b0 = next(x for x in solution.free_symbols if x.name.endswith("_0"))
    t_ours = next(x for x in solution.free_symbols if x.name == "t")
    ours = (solution**2).subs({b0: sp.sqrt(a0), t_ours: t})
    for tv, av in [(0.3, 0.01), (2.0, 0.1), (7.5, 0.3)]:
        assert float(ours.subs({t: tv, a0: av})) == pytest.approx(
            float(eq21.subs({t: tv, a0: av})), rel=1e-12
        )


@pytest.mark.parametrize(
    ("pathways", "expected"),
    [(1, [[0.5, 0.5]]), (2, [[1.0, 0.0], [0.0, 1.0]])],
)
def test_context_task_converges_to_app_a2_solutions(
    pathways: int, expected: list[list[float]]
) -> None:
    problem = load("context", pathways=pathways)
    reduction = gdln.reduce(problem, lump="none", b0=0.1)
    trajectory = gdln.solve(reduction, t_max=400)
    # rebuild the total map of each pathway from the final reduced variables
    final = {
        name: series[-1] for name, series in trajectory.series.items() if name != "context_loss"
    }
    totals = []
    for k in range(pathways):
        W = np.zeros((1, 2))
        for system in reduction.systems:
            b_in, b_out = (f"b_x_h{k}", f"b_h{k}_y")
            if b_in not in final:
                continue
            edge = ("x", f"h{k}")
            _, right, slots = reduction.edge_bases(edge)
            out_left, _, _ = reduction.edge_bases((f"h{k}", "y"))
            for j, alpha in enumerate(system.modes):
                col = slots.index(alpha)
                W += (
                    final[b_out][j]
                    * final[b_in][j]
                    * np.outer(out_left[:, col] / np.linalg.norm(out_left[:, col]), right[:, col])
                )
        totals.append(W.ravel())
    np.testing.assert_allclose(totals, expected, atol=1e-6)


@pytest.mark.parametrize("name", ["crosspath", "chain", "routing", "xor"])
def test_reduced_dynamics_equal_autograd_of_full_network(name: str) -> None:
    # Decoupled weights W_e = sum_alpha b_{e,alpha} u_alpha v_alpha^T (Eq. 9) with a
    # different random b for every edge and every mode, so that a mix-up of edges, modes
    # or orbit factors cannot cancel out.
    problem = load(name, **({"M": 4, "K": 3, "hidden": 8} if name == "routing" else {}))
    reduction = gdln.reduce(problem, lump="none")
    rng = np.random.default_rng(7)
    b = {}  # (edge, mode) -> value
    for system in reduction.systems:
        for v in system.variables:
            (edge,) = system.edges[v]
            for alpha in system.modes:
                b[(edge, alpha)] = rng.uniform(-0.8, 0.8)
    weights = {}
    for edge in problem.graph.edges:
        left, right, slots = reduction.edge_bases(edge, seed=3)
        values = np.array([b.get((edge, alpha), 0.0) for alpha in slots])
        shape = (problem.graph.nodes[edge[1]]["size"], problem.graph.nodes[edge[0]]["size"])
        weights[edge] = left @ np.diag(values) @ right.T if slots else np.zeros(shape)
    loss, grad = full_loss_and_gradient(problem, weights)
    # loss: constant + sum over modes of the per-mode loss; rhs per mode at those values
    total = float(reduction.constant)
    flows = {}
    for system in reduction.systems:
        args = list(system.variables) + list(system.symbols)
        point = [
            np.array([b[(system.edges[v][0], a)] for a in system.modes]) for v in system.variables
        ]
        point += [np.array([float(x) for x in system.symbols[k]]) for k in system.symbols]
        total += float(np.sum(sp.lambdify(args, system.loss, "numpy")(*point)))
        for v in system.variables:
            value = np.broadcast_to(
                sp.lambdify(args, system.rhs[v], "numpy")(*point), len(system.modes)
            )
            for j, alpha in enumerate(system.modes):
                flows[(system.edges[v][0], alpha)] = value[j]
    assert len(set(np.round(list(b.values()), 12))) == len(b) > 1
    assert loss == pytest.approx(total, rel=RTOL_EXACT)
    # gradient: projected onto the modes it is -rhs; nothing outside the modes
    scale = max(np.abs(g).max() for g in grad.values())
    for edge, g in grad.items():
        left, right, slots = reduction.edge_bases(edge, seed=3)
        flow = -g
        for k, alpha in enumerate(slots):
            projected = left[:, k] @ flow @ right[:, k]
            assert projected == pytest.approx(
                flows[(edge, alpha)], rel=RTOL_EXACT, abs=RTOL_EXACT * scale
            )
            flow = flow - projected * np.outer(left[:, k], right[:, k])
        assert np.abs(flow).max() <= RTOL_EXACT * scale


def test_lumped_rhs_equals_unlumped_on_tied_subspace() -> None:
    problem = load("routing", M=4, K=2)
    tied = gdln.reduce(problem, lump="symmetry", b0=0.2)
    free = gdln.reduce(problem, lump="none", b0=0.2)
    (st,), (sf,) = tied.systems, free.systems
    point = {v: 0.3 + 0.1 * i for i, v in enumerate(st.variables)}
    lumped = rhs_values(st, point)
    edge_value = {e: point[v] for v in st.variables for e in st.edges[v]}
    unlumped = rhs_values(sf, {v: edge_value[sf.edges[v][0]] for v in sf.variables})
    for v in sf.variables:
        owner = next(w for w in st.variables if sf.edges[v][0] in st.edges[w])
        np.testing.assert_allclose(unlumped[v], lumped[owner], rtol=RTOL_EXACT)


def test_conserved_quantities_are_conserved_numerically() -> None:
    reduction = gdln.reduce(load("routing", M=5, K=3), lump="symmetry", b0=0.2)
    trajectory = gdln.solve(reduction, t_max=30)
    (system,) = reduction.systems
    for q in system.conserved:
        fn = sp.lambdify(system.variables, q, "numpy")
        values = fn(*[trajectory.series[str(v)] for v in system.variables])
        assert np.ptp(values) <= 1e-8 * max(1.0, np.abs(values).max())


def test_random_routing_choice_splits_unequal_outputs() -> None:
    reduction = gdln.reduce(load("routing", M=6, K=2, seed=1), lump="symmetry")
    task = reduction.problem.task
    counts = {}
    for c in task.contexts:
        (out,) = c.targets
        counts[out] = counts.get(out, 0) + 1
    (system,) = reduction.systems
    output_blocks = [v for v in system.variables if system.edges[v][0][1].startswith("y")]
    # outputs trained a different number of times cannot share a variable
    assert len(output_blocks) == len(set(counts.values()))


def test_edges_that_no_context_uses_carry_no_mode() -> None:
    """A seeded random choice leaves an output out: its edge has no basis and W = 0."""
    problem = load("routing", M=5, K=1, seed=3, hidden=6)
    reduction = gdln.reduce(problem, lump="none", b0=0.2)
    used = {e for p in reduction.active.paths for e in p.edges}
    unused = set(problem.graph.edges) - used
    assert unused
    bases = reduction.decoupled_bases(seed=1)
    assert set(bases) == used
    for left, right in bases.values():
        np.testing.assert_allclose(left.T @ left, np.eye(left.shape[1]), atol=1e-12)
        np.testing.assert_allclose(right.T @ right, np.eye(right.shape[1]), atol=1e-12)
    weights = reduction.decoupled_weights(seed=1)
    for e in unused:
        left, right, slots = reduction.edge_bases(e, seed=1)
        assert slots == [] and left.shape[1] == right.shape[1] == 0
        assert not weights[e].any()
    loss, _ = full_loss_and_gradient(problem, weights)
    assert loss == pytest.approx(gdln.solve(reduction, t_max=1, points=2).loss[0], rel=1e-10)


def test_not_diagonalizable_names_paths_and_residual(tmp_path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(NOT_DIAGONALIZABLE)
    with pytest.raises(
        gdln.NotDiagonalizableError, match=r"no common bases.*relative residual"
    ) as info:
        gdln.reduce(gdln.load(path))
    assert info.value.paths and info.value.residual > 1e-3


def test_unknown_lumping_is_an_error() -> None:
    with pytest.raises(
        gdln.GdlnError,
        match=r"lump \(--lump\): expected one of none, symmetry, balanced, full; got 'sideways'",
    ):
        gdln.reduce(load("chain"), lump="sideways")  # type: ignore[arg-type]


# -- symbolic data (``symbols:`` in a graph file) ------------------------------------------

SYMBOLIC_SCALE = """
symbols: [a]
nodes: [{id: x, size: 3}, {id: h, size: 2}, {id: y, size: 2}]
edges: [{source: x, target: h}, {source: h, target: y}]
task:
  examples:
    - {inputs: {x: [1, 0, 0]}, targets: {y: [2*a, 0]}}
    - {inputs: {x: [0, 1, 0]}, targets: {y: [0, a]}}
    - {inputs: {x: [0, 0, 1]}, targets: {y: [a, 0]}}
"""

SYMBOLIC_PROBABILITY = """
symbols: [p]
nodes: [{id: x, size: 2}, {id: "h{k}", size: 2, repeat: {k: 2}}, {id: y, size: 1}]
edges:
  - {source: x, target: "h{k}", gated: true, repeat: {k: 2}}
  - {source: "h{k}", target: y, repeat: {k: 2}}
datasets:
  first:  {moments: {x: {x: [[1/3, 0], [0, 1/3]]}, y: {x: [[1/3, 0]], y: [[1/3]]}}}
  second: {moments: {x: {x: [[1/3, 0], [0, 1/3]]}, y: {x: [[0, 1/3]], y: [[1/3]]}}}
task:
  contexts:
    - {probability: p, active: ["x->h0"], dataset: first, inputs: {x: x}, targets: {y: y}}
    - {probability: 1 - p, active: ["x->h1"], dataset: second, inputs: {x: x}, targets: {y: y}}
"""


def symbolic(tmp_path, text: str, **params: str) -> gdln.Problem:
    path = tmp_path / "symbolic.yaml"
    path.write_text(text)
    return gdln.load(path, params=params)


def test_symbolic_target_scale_multiplies_the_singular_values(tmp_path) -> None:
    a = sp.Symbol("a", positive=True)
    (system,) = gdln.reduce(symbolic(tmp_path, SYMBOLIC_SCALE)).systems
    (numeric,) = gdln.reduce(symbolic(tmp_path, SYMBOLIC_SCALE, a="1")).systems
    values = {str(k): v for k, v in system.symbols.items()}
    plain = {str(k): v for k, v in numeric.symbols.items()}
    # Sigma_yx scales with a, Sigma_x does not: s = a * (its value at a = 1), d unchanged
    assert values["s"] and all(
        sp.simplify(got - a * want) == 0 for got, want in zip(values["s"], plain["s"], strict=True)
    )
    assert values["d"] == plain["d"]
    (bound,) = gdln.reduce(symbolic(tmp_path, SYMBOLIC_SCALE, a="1/3")).systems
    bound_s = {str(k): v for k, v in bound.symbols.items()}["s"]
    assert all(got == want / 3 for got, want in zip(bound_s, plain["s"], strict=True))
    # the constant of the loss is 1/2 <|y|^2> = 1/2 (4 + 1 + 1) a^2 / 3
    reduction = gdln.reduce(symbolic(tmp_path, SYMBOLIC_SCALE))
    assert sp.simplify(reduction.constant - a**2) == 0


def test_symbolic_probability_lumps_and_binds(tmp_path) -> None:
    p = sp.Symbol("p", positive=True)
    problem = symbolic(tmp_path, SYMBOLIC_PROBABILITY)
    (system,) = gdln.reduce(problem, lump="symmetry").systems
    (bound,) = gdln.reduce(
        symbolic(tmp_path, SYMBOLIC_PROBABILITY, p="1/3"), lump="symmetry"
    ).systems
    assert [str(v) for v in system.variables] == [str(v) for v in bound.variables]
    for v, w in zip(system.variables, bound.variables, strict=True):
        assert p in system.rhs[v].free_symbols
        assert same(system.rhs[v].subs(p, sp.Rational(1, 3)), bound.rhs[w])
    with pytest.raises(gdln.GdlnError, match=r"symbol 'p' .*has no value; .*--param p=VALUE"):
        gdln.solve(gdln.reduce(problem), t_max=1)
    trajectory = gdln.solve(gdln.reduce(symbolic(tmp_path, SYMBOLIC_PROBABILITY, p="1/3")), t_max=1)
    assert np.all(np.isfinite(trajectory.loss))


def test_bases_that_depend_on_a_symbol_need_its_value(tmp_path) -> None:
    text = SYMBOLIC_SCALE.replace("[2*a, 0]", "[1, a]").replace("[0, a]", "[0, 1]")
    with pytest.raises(
        gdln.GdlnError,
        match=r"symbolic\.yaml: the bases of the path statistics \(Eqs\. 7-8\) depend on "
        r"symbol 'a'; give it a value: --param a=VALUE",
    ):
        gdln.reduce(symbolic(tmp_path, text))
    assert gdln.reduce(symbolic(tmp_path, text, a="2")).systems


def test_unbound_symbol_in_examples_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(
        gdln.TaskSpecError, match=r"symbolic\.yaml: symbol 'a' .*has no value.*--param a=VALUE"
    ):
        symbolic(tmp_path, SYMBOLIC_SCALE).examples()


# ---------------------------------------------------------------------------------------
# Walking only open gated edges, and constants once per binding (issue 15): checked against
# a naive enumeration of every graph path and against the data directly.


def _naive_active(problem: gdln.Problem) -> list[dict[tuple, object]]:
    """Per context: every input-output path with a nonzero product of all its gates."""
    import networkx as nx

    graph, task = problem.graph, problem.require_task()
    sinks = [v for v in graph.nodes if graph.out_degree(v) == 0]
    out = []
    for c in task.contexts:
        found = {}
        for source in c.inputs:
            for sink in sinks:
                for nodes in nx.all_simple_paths(graph, source, sink):
                    g = 1
                    for u, w in itertools.pairwise(nodes):
                        g = g * c.gate((u, w), graph.edges[u, w].get("gated", False))
                        g = g * c.gate(w, graph.nodes[w].get("gated", False))
                    if g != 0:
                        found[tuple(nodes)] = g
        out.append(found)
    return out


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("routing", {"M": "5", "K": "3"}),
        ("routing", {"M": "4", "K": "4", "seed": "2"}),
        ("context", {}),
        ("crosspath", {}),
        ("race", {}),
        ("xor", {}),
        ("resnet_sd", {}),
    ],
)
def test_active_paths_walk_only_open_gates_yet_find_every_path(name, params) -> None:
    from gdln.paths._statistics import active_paths
    from gdln.reduction._reduce import _count_active

    problem = gdln.load(f"graphs/{name}.yaml", params=params)
    active = active_paths(problem.graph, problem.require_task())
    naive = _naive_active(problem)
    for found, expected in zip(active.gates, naive, strict=True):
        assert {active.paths[i].nodes: g for i, g in found.items()} == expected
    pairs = sum(
        sum(1 for p in found if p[-1] == o) ** 2 for found in naive for o in {p[-1] for p in found}
    )
    paths = sum(len(found) for found in naive)
    assert _count_active(problem.graph, problem.require_task()) == (paths, pairs)


@pytest.mark.parametrize("name", ["routing", "context", "xor"])
def test_constants_computed_once_per_binding_equal_the_data(name) -> None:
    problem = gdln.load(f"graphs/{name}.yaml")
    task = problem.require_task()
    reduction = gdln.reduce(problem, route="contexts")  # one constant per context
    expected = []
    for c in task.contexts:
        data = task.datasets[c.dataset]
        expected.append(sum((data.moment(f, f).trace() for f in c.targets.values()), 0) / 2)
    for got, want in zip(reduction.context_constants, expected, strict=True):
        assert sp.simplify(got - want) == 0
    total = sum((c.probability * v for c, v in zip(task.contexts, expected, strict=True)), 0)
    full_constant = reduction.constant  # plus modes with only fixed edges (none here)
    assert sp.simplify(full_constant - total) == 0
