"""Hidden nodes narrower than the modes that reach them, against autograd gradient descent.

The reference is plain full-batch gradient descent on the full network, written here with
torch autograd on the raw examples (not gdln.simulate, not the reduction's numbers).
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from helpers import full_loss_and_gradient, run_cli, write

import gdln
import gdln.reduction._reduce as reduce_module


def autograd_gd(problem: gdln.Problem, weights: dict, *, lr: float, steps: int) -> np.ndarray:
    """Eq. (1) along ``steps`` steps of W <- W - lr dL/dW (torch autograd, float64)."""
    examples = problem.examples()
    W = {e: np.asarray(w, dtype=np.float64) for e, w in weights.items()}
    losses = []
    for _ in range(steps + 1):
        loss, grads = full_loss_and_gradient(problem, W, examples)
        losses.append(loss)
        W = {e: w - lr * grads[e] for e, w in W.items()}
    return np.array(losses)


def modules_graph(tmp_path: Path, *, hidden: int, bits: int = 3) -> Path:
    """Nine parallel two-layer modules on compositional data (issue 23, item 2).

    Inputs: ``bits`` systematic +-1 bits over all 2**bits items, and 2 * one-hot item
    identity; outputs: the same slices. One module per pair (input slice, output slice) of
    {systematic, identity, both}, all gates on.
    """
    n = 2**bits
    sys_rows = [[1 if (i >> b) & 1 else -1 for b in range(bits)] for i in range(n)]
    id_rows = [[2 if j == i else 0 for j in range(n)] for i in range(n)]
    slices = {"sys": ["sys"], "id": ["id"], "both": ["sys", "id"]}
    nodes = [f"{{id: x_sys, size: {bits}}}", f"{{id: x_id, size: {n}}}"]
    nodes += [f"{{id: y_sys, size: {bits}}}", f"{{id: y_id, size: {n}}}"]
    edges = []
    for a, b in itertools.product(slices, repeat=2):
        nodes.append(f"{{id: h_{a}_{b}, size: {hidden}}}")
        edges += [f"{{source: x_{s}, target: h_{a}_{b}}}" for s in slices[a]]
        edges += [f"{{source: h_{a}_{b}, target: y_{s}}}" for s in slices[b]]
    text = (
        f"nodes: [{', '.join(nodes)}]\n"
        f"edges: [{', '.join(edges)}]\n"
        f"datasets: {{data: {{examples: {{sys: {sys_rows}, id: {id_rows}}}}}}}\n"
        "task: {contexts: [{probability: 1, dataset: data, inputs: {x_sys: sys, x_id: id}, "
        "targets: {y_sys: sys, y_id: id}}]}\n"
    )
    return write(tmp_path, text, "modules.yaml")


def bottleneck(tmp_path: Path, *, second_target: float) -> Path:
    r"""x (2) -> h (1) -> y (2): two modes, input variances d = 2 and 1/2.

    Both modes are rotated by (3/5, 4/5) away from the axes. Mode 1: s = 2, gain
    s^2/2d = 1. Mode 2: s = second_target / 2, gain second_target^2 / 4.
    """
    a, b = second_target * -0.8, second_target * 0.6
    text = (
        "nodes: [{id: x, size: 2}, {id: h, size: 1}, {id: y, size: 2}]\n"
        "edges: [{source: x, target: h}, {source: h, target: y}]\n"
        "task: {examples: [{inputs: {x: [1.2, 1.6]}, targets: {y: [1.2, 1.6]}},\n"
        f"                  {{inputs: {{x: [-0.8, 0.6]}}, targets: {{y: [{a}, {b}]}}}}]}}\n"
    )
    return write(tmp_path, text, "bottleneck.yaml")


def nudged(weights: dict, scale: float = 1e-12, seed: int = 0) -> dict:
    """The weights plus a random perturbation of relative size ``scale``."""
    rng = np.random.default_rng(seed)
    return {e: w + scale * rng.standard_normal(np.shape(w)) for e, w in weights.items()}


PARALLEL = (
    r"hidden node 'h_sys_sys' \(width 2\) is narrower than the 3 modes that reach it, and "
    r"another pathway into 'y_sys' bypasses it.*gdln\.solve\(problem, route='matrix'\)"
    r".*--route matrix"
)


def test_parallel_narrow_modules_are_refused(tmp_path: Path) -> None:
    # gdln kept modes 1-2 in every module and predicted a loss floor of 4/7 of L(0);
    # together the modules carry all 8 modes and gradient descent reaches ~0
    problem = gdln.load(modules_graph(tmp_path, hidden=2))
    with pytest.raises(gdln.GdlnError, match=PARALLEL):
        gdln.reduce(problem)
    with pytest.raises(gdln.GdlnError, match=PARALLEL):
        gdln.expected_dynamics(problem)


def test_parallel_narrow_modules_refused_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = modules_graph(tmp_path, hidden=2)
    code, out, err = run_cli(["derive", str(path)], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("gdln: error: ")
    assert "'h_sys_sys' (width 2)" in err and "--route matrix" in err


@pytest.mark.slow
def test_the_refused_decoupled_trajectory_is_one_gradient_descent_leaves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # why the refusal: without it, autograd GD from gdln's own decoupled weights leaves
    # the reduced GD map and goes far below its loss floor
    problem = gdln.load(modules_graph(tmp_path, hidden=2))
    monkeypatch.setattr(reduce_module, "check_narrow_nodes", lambda *a, **k: None)
    reduction = gdln.reduce(problem, b0=0.001)
    lr, steps = 0.1, 1200
    theory = gdln.solve(
        reduction, t_max=lr * steps, dynamics="gd-map", lr=lr, points=steps + 1
    ).loss
    network = autograd_gd(problem, reduction.decoupled_weights(seed=0), lr=lr, steps=steps)
    assert theory[-1] == pytest.approx(2.0, rel=1e-9)  # 4/7 of L(0) = 7/2: modes 3-8 unlearnt
    assert network[-1] < 1e-6 * network[0]


def test_wide_parallel_modules_match_autograd_gd(tmp_path: Path) -> None:
    # wide enough for all 8 modes: no node drops one, and the reduction is exact
    problem = gdln.load(modules_graph(tmp_path, hidden=8))
    reduction = gdln.reduce(problem, b0=0.001)
    lr, steps = 0.1, 400
    theory = gdln.solve(
        reduction, t_max=lr * steps, dynamics="gd-map", lr=lr, points=steps + 1
    ).loss
    network = autograd_gd(problem, reduction.decoupled_weights(seed=0), lr=lr, steps=steps)
    np.testing.assert_allclose(network, theory, rtol=0, atol=1e-10 * theory[0])
    assert network[-1] < 1e-3 * network[0]


def test_single_bottleneck_is_accepted_and_matches_autograd_gd(tmp_path: Path) -> None:
    # one pathway, h narrower than the 2 modes, keeping the mode with the larger gain
    # (1 > 1/4): exact, and stable: GD from the decoupled weights, nudged by 1e-12, stays
    problem = gdln.load(bottleneck(tmp_path, second_target=1.0))
    reduction = gdln.reduce(problem, b0=0.01)
    lr, steps = 0.05, 3000
    theory = gdln.solve(
        reduction, t_max=lr * steps, dynamics="gd-map", lr=lr, points=steps + 1
    ).loss
    weights = nudged(reduction.decoupled_weights(seed=0))
    network = autograd_gd(problem, weights, lr=lr, steps=steps)
    np.testing.assert_allclose(network, theory, rtol=0, atol=1e-10 * theory[0])
    # closed form: the floor is L(0) minus the kept mode's gain s^2/2d = 1
    assert network[-1] == pytest.approx(0.5 * (0.5 * 4 + 0.5 * 1) - 1, rel=1e-9)


def test_race_with_narrow_pathways_is_accepted(tmp_path: Path) -> None:
    # P routes per hidden pathway, one path per route: each pathway is a single chain
    problem = gdln.load(
        Path(__file__).parent.parent / "graphs" / "race.yaml",
        params={"M": "4", "P": "4", "hidden": "2"},
    )
    reduction = gdln.reduce(problem, b0=0.3)
    lr, steps = 0.2, 300
    theory = gdln.solve(
        reduction, t_max=lr * steps, dynamics="gd-map", lr=lr, points=steps + 1
    ).loss
    network = autograd_gd(problem, reduction.decoupled_weights(seed=0), lr=lr, steps=steps)
    np.testing.assert_allclose(network, theory, rtol=0, atol=1e-10 * theory[0])


KEEPS_WEAKER = (
    r"hidden node 'h' \(width 1\) is narrower than the 2 modes that reach it, and keeps "
    r"mode 1 \(lowers the loss by 1\) over mode 2 \(by 2\.25\)"
)


def test_bottleneck_keeping_the_weaker_mode_is_refused(tmp_path: Path) -> None:
    # mode 1 has the larger s (2 > 3/2) but the smaller gain s^2/2d (1 < 9/4)
    problem = gdln.load(bottleneck(tmp_path, second_target=3.0))
    with pytest.raises(gdln.GdlnError, match=KEEPS_WEAKER):
        gdln.reduce(problem)
    with pytest.raises(gdln.GdlnError, match=KEEPS_WEAKER):
        gdln.expected_dynamics(problem)


def test_keeping_the_weaker_mode_is_a_trajectory_gradient_descent_leaves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # why the refusal: the decoupled set keeping mode 1 is a saddle; GD nudged off it by
    # 1e-12 leaves it for the floor L(0) - 9/4 of keeping mode 2, below L(0) - 1
    problem = gdln.load(bottleneck(tmp_path, second_target=3.0))
    monkeypatch.setattr(reduce_module, "check_narrow_nodes", lambda *a, **k: None)
    reduction = gdln.reduce(problem, b0=0.01)
    lr, steps = 0.05, 3000
    theory = gdln.solve(
        reduction, t_max=lr * steps, dynamics="gd-map", lr=lr, points=steps + 1
    ).loss
    network = autograd_gd(problem, nudged(reduction.decoupled_weights(seed=0)), lr=lr, steps=steps)
    start = 0.5 * (0.5 * 4 + 0.5 * 9)
    assert theory[-1] == pytest.approx(start - 1, rel=1e-9)
    assert network[-1] == pytest.approx(start - 9 / 4, rel=1e-6)
