"""Trajectory series are read by what they are, and their names have one owner (issue 24, 7).

The accessors of :class:`gdln.Trajectory` are checked against independent computations
(the SVD of the recorded weights, the projection onto the given bases, the closed form of
a scalar system, the average of the per-context losses); a scan of the package checks that
no module but ``gdln/solution/_series.py`` spells a series name; saved files keep the
names they always had.
"""

from __future__ import annotations

import ast
import itertools
import json
from pathlib import Path

import numpy as np
import pytest

import gdln
from gdln import Trajectory

PACKAGE = Path(gdln.__file__).parent
OWNER = PACKAGE / "solution" / "_series.py"
SPELLINGS = ("sv/", "W/", "proj/", "rsm/", "loss/", "eval/", "sv[", "W[", "W2W1/", "W1TW1/")
SPELLINGS += ("W2W2T/", "kernel_distance", "pattern/")

TWO_SYSTEMS = """\
name: two
nodes:
  - {id: x, size: 2}
  - {id: h, size: 2}
  - {id: y, size: 2}
  - {id: z, size: 1}
  - {id: w, size: 1}
edges:
  - {source: x, target: h}
  - {source: h, target: y}
  - {source: z, target: w}
task:
  examples:
    - {inputs: {x: [1, 0], z: [1]}, targets: {y: [2, 0], w: [3]}}
    - {inputs: {x: [0, 1], z: [-1]}, targets: {y: [0, 1], w: [-3]}}
"""


# ------------------------------------------------------------------- one owner of the names
def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            out.add(id(first.value))
    return out


def _system_suffix(node: ast.JoinedStr) -> bool:
    """Whether an f-string writes ``@`` before a value (``f"{v}@{k}"``, ``f"@{k}"``)."""
    return any(
        isinstance(part, ast.Constant)
        and str(part.value).endswith("@")
        and isinstance(after, ast.FormattedValue)
        for part, after in itertools.pairwise(node.values)
    )


def _spelled_names(path: Path) -> list[str]:
    """Lines where a module spells a series name: a name prefix, ``context_loss`` or ``@k``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = _docstrings(tree)
    found: dict[int, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr) and _system_suffix(node):
            found[node.lineno] = ast.unparse(node)
        text = node.value if isinstance(node, ast.Constant) and id(node) not in docs else None
        if isinstance(text, str) and (text.startswith(SPELLINGS) or text == "context_loss"):
            found[node.lineno] = repr(text)
    return [f"line {line}: {text}" for line, text in sorted(found.items())]


def test_the_scan_finds_a_spelled_name(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        '"""Doc about "sv/<edge>"."""\n'
        'a = series[f"sv/{name}"]\n'
        'b = f"{variable}@{k}"\n'
        'd = f"@{k}" if several else ""\n'
        'c = series["context_loss"]\n'
    )
    assert len(_spelled_names(module)) == 4


@pytest.mark.parametrize(
    "path",
    sorted(p for p in PACKAGE.rglob("*.py") if p != OWNER),
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_no_module_but_the_trajectory_spells_a_series_name(path: Path) -> None:
    assert _spelled_names(path) == []


# ------------------------------------------------------------------ the accessors, checked
@pytest.fixture(scope="module")
def simulated() -> tuple[gdln.Problem, gdln.Reduction, Trajectory]:
    problem = gdln.load("graphs/context.yaml")
    reduction = gdln.reduce(problem, lump="none", b0=0.1, route="contexts")
    bases = reduction.decoupled_bases()
    run = gdln.simulate(
        problem.graph,
        problem.examples(),
        steps=6,
        lr=0.05,
        seeds=2,
        eval_examples=problem.examples(),
        bases={e: (lft, rgt) for e, (lft, rgt) in bases.items()},
        record_weights=True,
        rsm=True,
        record_every=2,
    )
    return problem, reduction, run


def test_singular_values_and_projections_agree_with_the_recorded_weights(simulated) -> None:
    problem, reduction, run = simulated
    bases = reduction.decoupled_bases()
    for edge in problem.graph.edges:
        weights = run.weights(edge)
        assert weights.shape[:2] == (len(run.t), 2)
        np.testing.assert_allclose(
            run.singular_values(edge), np.linalg.svd(weights, compute_uv=False), atol=1e-12
        )
        assert np.array_equal(run.weights(edge), run.weights("->".join(map(str, edge))))
        if edge in bases:
            left, right = bases[edge]
            expected = np.einsum("ta,Sits,sa->Sia", left, weights.swapaxes(0, 1), right)
            np.testing.assert_allclose(run.projections(edge), expected.swapaxes(0, 1), atol=1e-12)


def test_context_losses_average_to_the_loss(simulated) -> None:
    problem, _, run = simulated
    task = problem.require_task()
    probabilities = {c.label: float(c.probability) for c in task.contexts}
    for evaluation, total in ((False, run.loss), (True, run.evaluation_loss())):
        per_context = run.context_losses(evaluation=evaluation)
        assert set(per_context) == set(probabilities)
        mixed = sum(probabilities[label] * loss for label, loss in per_context.items())
        np.testing.assert_allclose(mixed, total, rtol=1e-12)


def test_evaluation_outputs_give_the_example_losses(simulated) -> None:
    problem, _, run = simulated
    examples = problem.examples()
    per_example = 0.0
    for node, target in examples.targets.items():
        per_example = per_example + 0.5 * ((run.outputs(node) - target) ** 2).sum(-1)
    np.testing.assert_allclose(run.example_losses(), per_example, rtol=1e-10, atol=1e-14)


def test_rsm_is_the_gram_matrix_of_a_hidden_representation(simulated) -> None:
    problem, _, run = simulated
    hidden = [
        v for v in problem.graph if problem.graph.in_degree(v) and problem.graph.out_degree(v)
    ]
    for node in hidden:
        rsm = run.rsm(node)
        np.testing.assert_allclose(rsm, rsm.swapaxes(-1, -2), atol=1e-12)
        assert (np.linalg.eigvalsh(rsm) > -1e-10).all()


def test_a_missing_series_is_a_key_error_that_lists_what_there_is(simulated) -> None:
    _, _, run = simulated
    with pytest.raises(KeyError, match=r"no series 'sv/nowhere->x' .*it has: .*sv/"):
        run.singular_values("nowhere->x")


def test_variables_of_several_systems_follow_their_closed_form(tmp_path: Path) -> None:
    graph = tmp_path / "two.yaml"
    graph.write_text(TWO_SYSTEMS)
    reduction = gdln.reduce(gdln.load(graph), lump="none", b0=0.1)
    assert len(reduction.systems) == 2
    t_max = 4.0
    trajectory = gdln.solve(reduction, t_max=t_max, points=9, rtol=1e-12, atol=1e-12)
    # z -> w alone: tau db/dt = s - d b with s = 3, d = 1, so b(t) = 3 - 2.9 exp(-t)
    system = next(k for k, s in enumerate(reduction.systems) if len(s.variables) == 3)
    expected = 3.0 - 2.9 * np.exp(-trajectory.t)
    np.testing.assert_allclose(
        trajectory.variable("b_z_w", system=system)[:, 0], expected, rtol=1e-8
    )
    other = 1 - system
    assert not trajectory.has_variable("b_z_w", system=other)
    assert trajectory.variable("b_x_h", system=other).shape == (9, 1)
    with pytest.raises(KeyError, match="b_z_w"):
        trajectory.variable("b_z_w", system=other)


def test_one_system_is_system_zero() -> None:
    reduction = gdln.reduce(gdln.load("graphs/chain.yaml"), lump="symmetry")
    trajectory = gdln.solve(reduction, t_max=1.0, points=3)
    assert trajectory.variable("B1").shape == (3, len(reduction.systems[0].modes))
    assert trajectory.has_variable("B1", system=0) and not trajectory.has_variable("B1", system=1)
    labels = reduction.context_labels()
    assert list(trajectory.context_losses()) == list(labels)


def test_full_matrix_flow_reads_through_the_same_accessors() -> None:
    problem = gdln.load("graphs/chain.yaml")
    full = gdln.solve(problem, route="matrix", t_max=1.0, points=3)
    for edge in problem.graph.edges:
        np.testing.assert_allclose(
            full.singular_values(edge), np.linalg.svd(full.weights(edge), compute_uv=False)
        )
    light = full.without_weights()
    assert light.singular_values(("x", "h1")).shape == full.singular_values(("x", "h1")).shape
    with pytest.raises(KeyError):
        light.weights(("x", "h1"))


# ------------------------------------------------------------------- the names on disk
def test_saved_files_keep_their_names(tmp_path: Path, simulated) -> None:
    _, _, run = simulated
    npz, js = run.save(tmp_path / "run.npz"), run.save(tmp_path / "run.json")
    with np.load(npz) as data:
        assert "series/sv/x->h1" in data.files and "series/eval/loss" in data.files
    assert "W/x->h1" in json.loads(js.read_text())["series"]
    again = Trajectory.load(npz)
    assert np.array_equal(again.singular_values(("x", "h1")), run.singular_values(("x", "h1")))


def test_a_file_written_with_the_old_names_loads_and_reads(tmp_path: Path) -> None:
    # written as gdln wrote it before the accessors: the names are the keys
    t = np.array([0.0, 1.0])
    np.savez(
        tmp_path / "old.npz",
        t=t,
        loss=np.ones((2, 1)),
        meta=np.array(json.dumps({"context_labels": ["a"]})),
        **{"series/B1@1": np.ones((2, 2)), "series/sv/x->h": np.zeros((2, 1, 3))},
    )
    old = Trajectory.load(tmp_path / "old.npz")
    assert old.variable("B1", system=1).shape == (2, 2)
    assert old.singular_values(("x", "h")).shape == (2, 1, 3)


def test_pathway_series_read_by_pathway() -> None:
    problem = gdln.load("graphs/xor.yaml", params={"hidden": "1"})
    start = gdln.balanced_weights(problem, lam=0.5, scale=0.1, alignment=0.0, seed=0)
    trajectory = gdln.solve_balanced(problem, start, t_max=4, points=5)
    function = trajectory.pathway("W2W1", "x->h0->y")
    w1w1, w2w2 = trajectory.pathway("W1TW1", "x->h0->y"), trajectory.pathway("W2W2T", "x->h0->y")
    assert function.shape[0] == 5 and w1w1.shape[1] == w1w1.shape[2]
    # at t = 0 each series is the product of the starting weights it names
    start_w1, start_w2 = start[("x", "h0")], start[("h0", "y")]
    np.testing.assert_allclose(function[0], start_w2 @ start_w1, atol=1e-12)
    np.testing.assert_allclose(w1w1[0], start_w1.T @ start_w1, atol=1e-12)
    np.testing.assert_allclose(w2w2[0], start_w2 @ start_w2.T, atol=1e-12)
