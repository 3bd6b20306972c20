"""``Task.examples`` fills each context's rows from what it binds (issue 38 part 3: at
routing M = 100, K = 40 it built 800 000 small arrays, 5 s of every simulation's set-up).
Checked row block by row block against the task's own contexts and datasets, on every
shipped graph and a wide routing."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import GRAPHS, load

CASES = [(path.stem, {}) for path in sorted(GRAPHS.glob("*.yaml"))]
CASES += [("routing", {"M": 12, "K": 5, "hidden": 4})]


@pytest.mark.parametrize(("name", "params"), CASES, ids=[f"{n}{p or ''}" for n, p in CASES])
def test_every_context_block_is_its_data_gates_and_weight(name, params):
    problem = load(name, **params)
    if problem.task is None:
        pytest.skip("no task")
    graph, task = problem.graph, problem.task
    examples = problem.examples()
    inputs = [v for v in graph if graph.in_degree(v) == 0]
    outputs = [v for v in graph if graph.out_degree(v) == 0]
    gated = [v for v in graph if graph.nodes[v].get("gated")]
    gated += [e for e in graph.edges if graph.edges[e].get("gated")]
    assert examples.context_labels == tuple(c.label for c in task.contexts)
    assert set(examples.gates) == set(gated)
    start = 0
    for index, c in enumerate(task.contexts):
        arrays, w = task.datasets[c.dataset].realize()
        rows = slice(start, start + len(w))
        start += len(w)
        assert (examples.context[rows] == index).all()
        np.testing.assert_array_equal(examples.weights[rows], float(c.probability) * w)
        for nodes, bound, table in ((inputs, c.inputs, examples.inputs),
                                    (outputs, c.targets, examples.targets)):  # fmt: skip
            for v in nodes:
                size = int(graph.nodes[v]["size"])
                want = arrays[bound[v]] if v in bound else np.zeros((len(w), size))
                np.testing.assert_array_equal(table[v][rows], want, err_msg=f"{c.label} {v}")
                assert table[v].dtype == np.float64
        for g in gated:
            np.testing.assert_array_equal(examples.gates[g][rows], float(c.gates.get(g, 0)))
    assert start == len(examples.weights) == len(examples.context)
