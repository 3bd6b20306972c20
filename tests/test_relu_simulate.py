"""ReLU hidden nodes (``activation: relu``) trained by ``gdln simulate`` (issue 37, item 1).

Each run is compared with an independent computation: the reference ReLU trainer of
``tests/reference/relu_net.py`` (torch autograd, no gdln) or a forward pass written here
and differentiated by autograd.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from reference import relu_net as rn

import gdln

XOR_X = np.array([[1.0, 1.0], [1.0, -1.0], [-1.0, 1.0], [-1.0, -1.0]])
XOR_Y = np.array([[1.0], [-1.0], [-1.0], [1.0]])


def relu_chain(sizes: list[int], x: np.ndarray, y: np.ndarray) -> str:
    """A graph file of a ReLU network with the given layer sizes, one example per row."""
    names = ["x"] + [f"h{k}" for k in range(1, len(sizes) - 1)] + ["y"]
    nodes = []
    for k, (name, size) in enumerate(zip(names, sizes, strict=True)):
        hidden = 0 < k < len(sizes) - 1
        nodes.append(f"  - {{id: {name}, size: {size}" + (", activation: relu}" if hidden else "}"))
    edges = [f"  - {{source: {a}, target: {b}}}" for a, b in itertools.pairwise(names)]
    rows = [
        f"    - {{inputs: {{x: {list(map(float, xi))}}}, targets: {{y: {list(map(float, yi))}}}}}"
        for xi, yi in zip(x, y, strict=True)
    ]
    return "\n".join(["nodes:", *nodes, "edges:", *edges, "task:", "  examples:", *rows]) + "\n"


def problem(tmp_path, text: str, name: str = "g.yaml") -> gdln.Problem:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return gdln.load(path)


def given(weights: list[np.ndarray], names: list[str]) -> dict[tuple[str, str], np.ndarray]:
    return {(a, b): w for (a, b), w in zip(itertools.pairwise(names), weights, strict=True)}


@pytest.mark.parametrize("sizes", [[2, 16, 1], [2, 8, 6, 1]], ids=["one-layer", "two-layers"])
def test_gd_follows_the_reference_relu_trainer(tmp_path, sizes) -> None:
    p = problem(tmp_path, relu_chain(sizes, XOR_X, XOR_Y))
    names = ["x"] + [f"h{k}" for k in range(1, len(sizes) - 1)] + ["y"]
    W, _ = rn.init_weights(sizes, 0.5, seed=3)
    run = gdln.simulate(
        p,
        weights=given(W, names),
        steps=60,
        lr=0.2,
        seeds=1,
        record_every=1,
        record_weights=True,
    )
    want = rn.train(XOR_X, XOR_Y, W, lr=0.2, steps=60, record=[60])
    np.testing.assert_allclose(run.loss[:, 0], want.loss, rtol=1e-12, atol=1e-15)
    for (a, b), w in zip(itertools.pairwise(names), want.weights[60], strict=True):
        np.testing.assert_allclose(run.weights((a, b))[-1, 0], w, rtol=1e-10, atol=1e-14)
    assert want.loss[-1] < 0.5 * want.loss[0]  # it learned: the comparison is not of a still net


DAG = """\
nodes:
  - {id: x, size: 3}
  - {id: a, size: 4, activation: relu}
  - {id: b, size: 5, activation: relu, gated: true}
  - {id: y, size: 2}
edges:
  - {source: x, target: a}
  - {source: x, target: b}
  - {source: a, target: b}
  - {source: a, target: y}
  - {source: b, target: y}
task:
  examples:
    - {inputs: {x: [1, 0, 0]}, targets: {y: [1, 0]}, active: [b]}
    - {inputs: {x: [0, 1, 0]}, targets: {y: [0, 1]}, active: [b]}
    - {inputs: {x: [0, 0, 1]}, targets: {y: [1, 1]}, active: []}
    - {inputs: {x: [1, 1, 1]}, targets: {y: [-1, 0]}, weight: 2, gates: {b: 2}}
    - {inputs: {x: [1, 0, 0]}, targets: {y: [0, 0]}, active: []}
"""


def _dag_loss(W: dict, x, t, g, w) -> torch.Tensor:
    """The DAG's loss of Eq. (1), written out: a = relu(W_xa x), b = relu(g (W_xb x + W_ab a))."""
    a = torch.relu(x @ W["x", "a"].T)
    b = torch.relu(g[:, None] * (x @ W["x", "b"].T + a @ W["a", "b"].T))
    out = a @ W["a", "y"].T + b @ W["b", "y"].T
    return (w * 0.5 * ((out - t) ** 2).sum(1)).sum()


@pytest.mark.parametrize("optimizer", ["gd", "sgd"])
def test_a_relu_dag_with_gates_steps_down_autograds_gradient(tmp_path, optimizer) -> None:
    """Fan-in into a gated ReLU node and skip edges: one step against autograd's gradient."""
    p = problem(tmp_path, DAG)
    rng = np.random.default_rng(1)
    W0 = {
        e: rng.normal(0, 0.7, (p.graph.nodes[e[1]]["size"], p.graph.nodes[e[0]]["size"]))
        for e in p.graph.edges
    }
    ex = p.examples()
    batch = 5 if optimizer == "sgd" else None
    run = gdln.simulate(
        p,
        weights=W0,
        steps=1,
        lr=0.1,
        seeds=1,
        optimizer=optimizer,
        batch_size=batch,
        record_every=1,
        record_weights=True,
    )
    Wt = {e: torch.tensor(w, requires_grad=True) for e, w in W0.items()}
    x = torch.tensor(ex.inputs["x"])
    t = torch.tensor(ex.targets["y"])
    g = torch.tensor(ex.gates["b"])
    w = torch.tensor(ex.weights)
    loss = _dag_loss(Wt, x, t, g, w)
    assert run.loss[0, 0] == pytest.approx(float(loss), rel=1e-13)
    if optimizer == "sgd":
        return  # a minibatch's step is not the full gradient's; its loss at step 0 is
    grads = torch.autograd.grad(loss, list(Wt.values()))
    for (e, w0), grad in zip(W0.items(), grads, strict=True):
        np.testing.assert_allclose(
            run.weights(e)[1, 0], w0 - 0.1 * grad.numpy(), rtol=1e-12, atol=1e-15
        )
    # some unit is off on some example: the ReLU matters here
    pre = x @ Wt["x", "a"].T
    assert bool((pre <= 0).any()) and bool((pre > 0).any())


def test_relu_changes_the_run(tmp_path) -> None:
    """The same file without ``activation: relu`` is a different (linear) network."""
    text = relu_chain([2, 16, 1], XOR_X, XOR_Y)
    W, _ = rn.init_weights([2, 16, 1], 0.5, seed=3)
    kwargs = dict(weights=given(W, ["x", "h1", "y"]), steps=30, lr=0.2, seeds=1)
    relu = gdln.simulate(problem(tmp_path, text), **kwargs)
    linear = gdln.simulate(
        problem(tmp_path, text.replace(", activation: relu", ""), "l.yaml"), **kwargs
    )
    assert linear.loss[-1, 0] == pytest.approx(0.5, rel=1e-6)  # XoR is not linearly solvable
    assert relu.loss[-1, 0] < 0.3


@pytest.mark.parametrize(
    ("node", "message"),
    [
        ("{id: x, size: 2, activation: relu}", "is for hidden nodes, and this is an input"),
        ("{id: y, size: 1, activation: relu}", "is for hidden nodes, and this is an output"),
        ("{id: h, size: 2, activation: tanh}", "expected one of linear, relu, got 'tanh'"),
        ("{id: h, size: 2, activation: [relu]}", "expected one of linear, relu"),
    ],
)
def test_activation_errors_name_the_node(tmp_path, node, message) -> None:
    nodes = {"x": "{id: x, size: 2}", "h": "{id: h, size: 2}", "y": "{id: y, size: 1}"}
    nodes[node.split(",")[0].split(": ")[1]] = node
    text = (
        f"nodes: [{nodes['x']}, {nodes['h']}, {nodes['y']}]\n"
        "edges: [{source: x, target: h}, {source: h, target: y}]\n"
    )
    with pytest.raises(gdln.GraphSpecError, match=message):
        problem(tmp_path, text)


# ------------------------------------------------------------------ recording the patterns
def test_recorded_patterns_are_the_reference_patterns_of_the_recorded_weights(tmp_path) -> None:
    sizes = [2, 8, 6, 1]
    p = problem(tmp_path, relu_chain(sizes, XOR_X, XOR_Y))
    W, _ = rn.init_weights(sizes, 0.5, seed=4)
    names = ["x", "h1", "h2", "y"]
    run = gdln.simulate(
        p,
        weights=given(W, names),
        steps=40,
        lr=0.2,
        seeds=1,
        record_steps=[0, 7, 40],
        record_patterns=True,
    )
    want = rn.train(XOR_X, XOR_Y, W, lr=0.2, steps=40, record=[0, 7, 40])
    assert sorted(run.patterns) == ["h1", "h2"]
    for row, step in enumerate([0, 7, 40]):
        for layer, node in enumerate(["h1", "h2"]):
            assert run.patterns[node].dtype == bool
            np.testing.assert_array_equal(run.patterns[node][row, 0], want.patterns[step][layer])
    # the weights come with them, and the examples in meta, through a saved file too
    saved = gdln.Trajectory.load(run.save(tmp_path / "run.npz"))
    np.testing.assert_array_equal(saved.patterns["h2"], run.patterns["h2"])
    np.testing.assert_allclose(saved.weights(("h1", "h2"))[1, 0], want.weights[7][1], rtol=1e-12)
    examples = gdln.task.ExampleSet.from_json(saved.meta["training_examples"])
    np.testing.assert_array_equal(examples.inputs["x"], XOR_X)
    np.testing.assert_array_equal(examples.targets["y"], XOR_Y)


def test_record_patterns_from_the_file_and_the_command_line(tmp_path) -> None:
    from click.testing import CliRunner

    from gdln.cli import cli

    text = relu_chain([2, 4, 1], XOR_X, XOR_Y) + "simulate: {record_patterns: true}\n"
    p = problem(tmp_path, text)
    assert p.settings.record_patterns is True
    run = gdln.simulate(p, steps=3, seeds=1)
    assert run.patterns["h1"].shape == (4, 1, 4, 4)
    path = tmp_path / "plain.yaml"
    path.write_text(relu_chain([2, 4, 1], XOR_X, XOR_Y))
    out = tmp_path / "run.npz"
    args = [
        "simulate",
        str(path),
        "--t-max",
        "1",
        "--seeds",
        "2",
        "--record-patterns",
        "-o",
        str(out),
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert gdln.Trajectory.load(out).patterns["h1"].shape[1:] == (2, 4, 4)


def test_record_patterns_is_refused_without_relu_or_beyond_the_limits(
    tmp_path, monkeypatch
) -> None:
    linear = problem(
        tmp_path, relu_chain([2, 4, 1], XOR_X, XOR_Y).replace(", activation: relu", "")
    )
    settings = dict(record_patterns=True)
    with pytest.raises(gdln.SimulationSpecError, match="no ReLU node"):
        gdln.simulate(linear, steps=2, **settings)
    relu = problem(tmp_path, relu_chain([2, 64, 1], XOR_X, XOR_Y), "r.yaml")
    monkeypatch.setenv("GDLN_MAX_DATA_BYTES", "10000")
    with pytest.raises(gdln.SimulationSpecError, match="data_bytes"):
        gdln.simulate(relu, steps=100, record_every=1, record_patterns=True)
