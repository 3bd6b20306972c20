"""The gated network of a ReLU network's patterns (issue 37, item 2): ``gdln.extract``.

Checked against independent computations: torch autograd on the ReLU network
(``tests/reference/relu_net.py``), its brute-force grouping of units and examples, and
the facts of FACTS.md for XoR (3 unit groups each on for 2 of 4 examples, 25/25/50% of
the output, flips stop at steps 98, 90, 79 for seeds 0, 1, 2).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from click.testing import CliRunner
from reference import relu_net as rn

import gdln
from gdln.cli import cli

X = np.array([[1.0, 1.0], [1.0, -1.0], [-1.0, 1.0], [-1.0, -1.0]])
Y = np.array([[1.0], [-1.0], [-1.0], [1.0]])
OPPOSITE = [(0, 3), (1, 2)]  # x and -x


def relu_graph(tmp_path, sizes: list[int], x=X, y=Y, name: str = "relu.yaml") -> gdln.Problem:
    names = ["x"] + [f"h{k}" for k in range(1, len(sizes) - 1)] + ["y"]
    lines = ["nodes:"]
    for k, (node, size) in enumerate(zip(names, sizes, strict=True)):
        relu = ", activation: relu" if 0 < k < len(sizes) - 1 else ""
        lines.append(f"  - {{id: {node}, size: {size}{relu}}}")
    lines.append("edges:")
    lines += [f"  - {{source: {a}, target: {b}}}" for a, b in itertools.pairwise(names)]
    lines += ["task:", "  examples:"]
    lines += [
        f"    - {{inputs: {{x: {list(map(float, a))}}}, targets: {{y: {list(map(float, b))}}}}}"
        for a, b in zip(x, y, strict=True)
    ]
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return gdln.load(path)


def xor_weights(seed: int, hidden: int = 128, sigma: float = 2e-4) -> dict:
    """examples/core/xor.py's draw: W1 = columns 0-1, W2 = column 2 of one normal draw."""
    w = np.random.default_rng(seed).normal(0.0, sigma, (hidden, 3))
    return {("x", "h1"): w[:, :2], ("h1", "y"): w[:, 2:].T}


def run_of(problem, weights, steps, lr, record_every=1, seeds=1):
    settings = dict(record_every=record_every, record_patterns=True)
    return gdln.simulate(problem, weights=weights, steps=steps, lr=lr, seeds=seeds, **settings)


def full_gradient(extraction, problem, sizes):
    """The extracted GDLN's gradient (gdln.full_flow, Eqs. 3-4) as full layer matrices."""
    flow = gdln.full_flow(problem, extraction.weights)
    names = ["x"] + [f"h{k}" for k in range(1, len(sizes) - 1)] + ["y"]
    parts = {v: [(v, list(range(s)))] for v, s in zip(names, sizes, strict=True)}
    for g in extraction.groups:
        parts[g.relu] = [p for p in parts[g.relu] if p[0] != g.relu] + [(g.node, list(g.units))]
    full = []
    for (a, b), (n_in, n_out) in zip(
        itertools.pairwise(names), itertools.pairwise(sizes), strict=True
    ):
        G = np.zeros((n_out, n_in))
        for s, rows_s in parts[a]:
            for t, rows_t in parts[b]:
                if (s, t) in flow:
                    G[np.ix_(rows_t, rows_s)] = -flow[(s, t)]
        full.append(G)
    return full


@pytest.mark.parametrize("sizes", [[2, 16, 1], [2, 8, 6, 1]], ids=["one-layer", "two-layers"])
@pytest.mark.parametrize("step", [0, 7, 25])
def test_extracted_gdln_has_the_relu_networks_output_and_gradient(tmp_path, sizes, step) -> None:
    """Exact identity while no pattern flips: loss, output groups and gradient (autograd)."""
    problem = relu_graph(tmp_path, sizes)
    names = ["x"] + [f"h{k}" for k in range(1, len(sizes) - 1)] + ["y"]
    W, _ = rn.init_weights(sizes, 0.6, seed=5)
    run = run_of(problem, dict(zip(itertools.pairwise(names), W, strict=True)), 30, 0.1)
    found = gdln.extract(run, step=step)
    Wk = [run.weights(e)[step, 0] for e in itertools.pairwise(names)]
    loss, _, grads, _ = rn.relu_loss_and_grads(Wk, None, X, Y)
    gated = found.problem()
    got = full_gradient(found, gated, sizes)
    for g, want in zip(got, grads, strict=True):
        np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())
    trajectory = gdln.solve(
        gated, route="matrix", weights=found.weights, t_max=0.1, dynamics="gd-map", lr=0.1, points=2
    )
    assert trajectory.loss[0] == pytest.approx(loss, rel=1e-12)
    assert found.loss == pytest.approx(loss, rel=1e-12)
    # the groups are the reference's brute-force grouping of identical columns (live ones)
    P = rn.patterns(Wk, None, X)
    for layer, node in enumerate(names[1:-1]):
        want_groups = [u for col, u in rn.group_columns(P[layer]) if any(col)]
        got_groups = [list(g.units) for g in found.groups if g.relu == node]
        assert got_groups == want_groups
    contexts = len(rn.group_rows(np.hstack(P)))
    assert len(gated.require_task().contexts) == contexts


def test_solve_from_the_written_weights_starts_at_the_relu_loss(tmp_path) -> None:
    """gdln solve gated.yaml --weights W.npz --route matrix starts at the ReLU network's loss."""
    problem = relu_graph(tmp_path, [2, 32, 1])
    run = run_of(problem, xor_weights(1, 32, 0.3), 40, 0.2, record_every=5)
    run.save(tmp_path / "run.npz")
    runner = CliRunner()
    args = ["extract", str(tmp_path / "run.npz"), "--step", "20", "-o", str(tmp_path / "g.yaml")]
    args += ["--weights-out", str(tmp_path / "w.npz")]
    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "gated node(s)" in result.output and "left out" in result.output
    solve = ["solve", str(tmp_path / "g.yaml"), "--weights", str(tmp_path / "w.npz")]
    solve += ["--route", "matrix", "--t-max", "1", "-o", str(tmp_path / "t.json")]
    result = runner.invoke(cli, solve)
    assert result.exit_code == 0, result.output
    import json

    theory_loss = json.loads((tmp_path / "t.json").read_text())["loss"]
    W = [run.weights(("x", "h1"))[4, 0], run.weights(("h1", "y"))[4, 0]]
    want, *_ = rn.relu_loss_and_grads(W, None, X, Y)
    assert theory_loss[0] == pytest.approx(want, rel=1e-12)
    # without --force nothing is overwritten: one line, exit 2
    again = runner.invoke(cli, args)
    assert again.exit_code == 2
    assert again.output.count("\n") == 1 and "--force" in again.output


def test_at_initialisation_every_unit_is_on_for_one_of_each_opposite_pair(tmp_path) -> None:
    """No biases, inputs +-x: w.(-x) = -w.x, so each unit is on for exactly one of x, -x."""
    problem = relu_graph(tmp_path, [2, 128, 1])
    found = gdln.extract(run_of(problem, xor_weights(3), 1, 0.4), step=0)
    assert sum(len(g.units) for g in found.groups) == 128 and not found.dead["h1"]
    for g in found.groups:
        for a, b in OPPOSITE:
            assert (a in g.examples) != (b in g.examples)
        assert len(g.contexts) == 2  # half of the four one-example contexts
    # so every example has the units the opposite one lacks: the counts of a pair sum to 128
    on = [sum(len(g.units) for g in found.groups if n in g.examples) for n in range(4)]
    assert on[0] + on[3] == 128 and on[1] + on[2] == 128


@pytest.mark.parametrize(("seed", "last_flip"), [(0, 98), (1, 90), (2, 79)])
def test_xor_extracts_to_three_two_example_groups(tmp_path, seed, last_flip) -> None:
    """FACTS.md: 3 groups each on for 2 of 4 examples, 25/25/50% of the output, flips stop
    at 98, 90, 79; graphs/xor.yaml's one-example pathways are not what it extracts to."""
    problem = relu_graph(tmp_path, [2, 128, 1])
    run = run_of(problem, xor_weights(seed), 200, 0.4)
    found = gdln.extract(run)
    assert found.frozen_from == last_flip
    assert found.flip_fraction[last_flip - 1] > 0 and not found.flip_fraction[last_flip:].any()
    assert len(found.groups) == 3 and all(len(g.examples) == 2 for g in found.groups)
    shares = sorted(found.class_shares().values())
    np.testing.assert_allclose(shares, [0.25, 0.25, 0.5], atol=0.01)
    xor = gdln.load("xor")
    one_example = [frozenset({c}) for c in range(len(xor.require_task().contexts))]
    assert not set(found.class_shares()) & set(one_example)
    # the extracted GDLN's gradient-descent map from the freeze is the ReLU run, step by step
    frozen = gdln.extract(run, step=last_flip)
    gated = frozen.problem()
    steps = 200 - last_flip
    theory = gdln.solve(
        gated,
        route="matrix",
        weights=frozen.weights,
        t_max=0.4 * steps,
        dynamics="gd-map",
        lr=0.4,
        points=steps + 1,
    )
    # the loss to rounding of Eq. (1)'s terms (L(K) = 3e-14 is 1e-13 of L(0)), the weights closely
    np.testing.assert_allclose(
        theory.loss, run.loss[last_flip:, 0], rtol=0, atol=1e-15 * run.loss[0, 0]
    )
    for g in frozen.groups:
        got = theory.weights(("x", g.node))
        want = run.weights(("x", "h1"))[last_flip:, 0][:, list(g.units)]
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12 * np.abs(want).max())


def test_dead_units_are_left_out_and_named(tmp_path) -> None:
    x = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    y = np.array([[1.0], [0.0], [2.0]])
    problem = relu_graph(tmp_path, [2, 4, 1], x, y)
    W1 = np.array([[1.0, 0.5], [-1.0, -2.0], [0.3, -0.1], [-0.5, -0.5]])  # units 1, 3 dead
    run = run_of(problem, {("x", "h1"): W1, ("h1", "y"): np.ones((1, 4))}, 3, 0.05)
    found = gdln.extract(run, step=0)
    assert found.dead["h1"] == (1, 3)
    assert any("2 unit(s) of h1 are off on every example" in s for s in found.left_out)
    assert "h1.0" in found.text and "size: 1" in found.text
    gated = found.problem()
    assert sum(gated.graph.nodes[v]["size"] for v in gated.graph if v.startswith("h1")) == 2


def test_contexts_of_the_task_give_classes_and_the_coarse_graining_error(tmp_path) -> None:
    """Two task contexts: a unit's class is the contexts where it is on for some item;
    the share of (unit, context) gates constant over a context's items is measured."""
    text = """\
nodes: [{id: x, size: 3}, {id: h, size: 12, activation: relu}, {id: y, size: 2}]
edges: [{source: x, target: h}, {source: h, target: y}]
datasets:
  a: {examples: {x: [[1, 0, 1], [0, 1, 1]], y: [[1, 0], [0, 1]]}}
  b: {examples: {x: [[1, 1, -1], [-1, 0, -1]], y: [[1, 1], [0, -1]]}}
task:
  contexts:
    - {probability: 1/2, dataset: a, inputs: {x: x}, targets: {y: y}, label: first}
    - {probability: 1/2, dataset: b, inputs: {x: x}, targets: {y: y}, label: second}
"""
    path = tmp_path / "two.yaml"
    path.write_text(text)
    problem = gdln.load(path)
    rng = np.random.default_rng(2)
    W = {("x", "h"): rng.normal(0, 1, (12, 3)), ("h", "y"): rng.normal(0, 1, (2, 12))}
    found = gdln.extract(run_of(problem, W, 2, 0.05), step=0)
    assert found.contexts == ("first", "second")
    ex = problem.examples()
    P = rn.patterns([W["x", "h"], W["h", "y"]], None, ex.inputs["x"])[0]
    assert found.consistency == pytest.approx(rn.gate_consistency(P, ex.context))
    sets = rn.context_sets(P, ex.context, rule="any")
    for g in found.groups:
        assert all(sets[u] == g.contexts for u in g.units)


def test_extract_errors_are_one_line(tmp_path) -> None:
    problem = relu_graph(tmp_path, [2, 4, 1])
    plain = gdln.simulate(problem, steps=2, seeds=1)
    with pytest.raises(gdln.GraphSpecError, match="no activation patterns"):
        gdln.extract(plain)
    run = run_of(problem, xor_weights(0, 4, 0.3), 10, 0.1, record_every=5)
    with pytest.raises(
        gdln.GraphSpecError,
        match="step 7 was not recorded; the nearest recorded steps are 5 and 10",
    ):
        gdln.extract(run, step=7)
    with pytest.raises(gdln.GraphSpecError, match="seed 3 did not run"):
        gdln.extract(run, seed=3)
    result = CliRunner().invoke(
        cli, ["extract", str(tmp_path / "none.npz"), "-o", str(tmp_path / "g.yaml")]
    )
    assert result.exit_code == 2 and result.output.startswith("gdln: error: ")
    assert result.output.count("\n") == 1 and len(result.output) <= 301


def test_summary_lists_the_twelve_largest_classes_and_sums_the_rest(tmp_path) -> None:
    """Many classes (9 generic examples in 3-d: up to 2(1 + 8 + 28) half-space patterns):
    the summary lists the 12 largest by share and sums the rest, counted here by brute force."""
    rng = np.random.default_rng(4)
    x, y = rng.normal(size=(9, 3)), rng.normal(size=(9, 1))
    problem = relu_graph(tmp_path, [3, 64, 1], x, y)
    W = [rng.normal(0, 1, (64, 3)), rng.normal(0, 1, (1, 64))]
    found = gdln.extract(run_of(problem, {("x", "h1"): W[0], ("h1", "y"): W[1]}, 1, 0.01), step=0)
    P = rn.patterns(W, None, x)[0]
    size = rn.unit_contributions(W[1], np.maximum(x @ W[0].T, 0.0))
    classes = {}
    for col, units in rn.group_columns(P):
        if any(col):
            classes[col] = (len(units), size[units].sum() / size.sum())
    assert len(classes) > 12
    ranked = sorted(classes.items(), key=lambda item: -item[1][1])
    lines = found.summary().splitlines()
    listed = [s for s in lines if s.startswith("    on in ")]
    assert len(listed) == 12
    for line, (col, (units, share)) in zip(listed, ranked[:12], strict=True):
        assert line.startswith(f"    on in {sum(col)} of 9 (")
        assert ": 1 group(s) (h1." in line
        assert line.endswith(f"{units} unit(s), {100 * share:.1f}% of the output")
    rest = sum(share for _, (_, share) in ranked[12:])
    assert f"    {len(ranked) - 12} more class(es): {100 * rest:.1f}% of the output" in lines
