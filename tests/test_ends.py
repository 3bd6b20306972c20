"""Inputs without data and outputs without targets are refused where signal flows through
them (issue 23 item 5); ends that every context gates off are allowed.

The routing network with one edge written the wrong way round (``h2 -> h1``) used to load
and derive a one-variable system: ``h2`` became an input that no context feeds and ``h1``
an output that no context gives a target.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import GRAPHS, run_cli

import gdln

ROUTING = (GRAPHS / "routing.yaml").read_text()
REVERSED = ROUTING.replace("{source: h1, target: h2}", "{source: h2, target: h1}")


def _write(tmp_path: Path, text: str, name: str = "g.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_reversed_edge_is_refused_naming_the_input_without_data(tmp_path: Path) -> None:
    assert REVERSED != ROUTING
    path = _write(tmp_path, REVERSED)
    with pytest.raises(gdln.TaskSpecError) as info:
        gdln.load(path)
    message = str(info.value)
    assert message == (
        f"{path}: task: node 'h2' is an input (no edges in) that no context gives data "
        "('inputs:'), yet its signal reaches an output in context 'x0->y0'; bind it, or check "
        "the direction of its edges"
    )


def test_the_command_line_refuses_it_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(["derive", str(_write(tmp_path, REVERSED))], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and len(err) <= 300 + len("gdln: error: \n")
    assert "node 'h2' is an input (no edges in) that no context gives data" in err


OUTPUT_WITHOUT_TARGET = """\
nodes: [{id: x, size: 2}, {id: h, size: 3}, {id: y, size: 1}, {id: z, size: 1}]
edges:
  - {source: x, target: h}
  - {source: h, target: y}
  - {source: h, target: z}
task:
  examples:
    - {inputs: {x: [1, 0]}, targets: {y: [1]}}
    - {inputs: {x: [0, 1]}, targets: {y: [-1]}}
"""

INPUT_WITHOUT_DATA = """\
nodes: [{id: x1, size: 2}, {id: x2, size: 2}, {id: y, size: 1}]
edges: [{source: x1, target: y}, {source: x2, target: y}]
task:
  examples:
    - {inputs: {x1: [1, 0]}, targets: {y: [1]}}
    - {inputs: {x1: [0, 1]}, targets: {y: [-1]}}
"""


def test_an_output_no_example_targets_is_refused(tmp_path: Path) -> None:
    with pytest.raises(
        gdln.TaskSpecError,
        match=r"g\.yaml: task: node 'z' is an output \(no edges out\) that no context gives a "
        r"target \('targets:'\), yet signal reaches it in context 'all'; bind it, or check the "
        r"direction of its edges$",
    ):
        gdln.load(_write(tmp_path, OUTPUT_WITHOUT_TARGET))


def test_an_input_no_example_feeds_is_refused(tmp_path: Path) -> None:
    with pytest.raises(gdln.TaskSpecError, match=r"node 'x2' is an input \(no edges in\)"):
        gdln.load(_write(tmp_path, INPUT_WITHOUT_DATA))


def test_a_task_file_is_named_when_its_task_lacks_a_target(tmp_path: Path) -> None:
    graph = _write(tmp_path, OUTPUT_WITHOUT_TARGET.split("task:")[0])
    task = _write(tmp_path, "task:" + OUTPUT_WITHOUT_TARGET.split("task:")[1], "task.yaml")
    with pytest.raises(gdln.TaskSpecError, match=r"task\.yaml: task: node 'z' is an output"):
        gdln.load(graph, task=task)


def test_ends_gated_off_in_every_context_are_allowed() -> None:
    """Random routing (seed >= 0) trains K of M outputs per input: some outputs are
    targeted by no context, and their edges are off in every context."""
    problem = gdln.load(GRAPHS / "routing.yaml", params={"M": "7", "K": "1", "seed": "0"})
    contexts = problem.require_task().contexts
    untargeted = {f"y{j}" for j in range(7)} - {v for c in contexts for v in c.targets}
    assert untargeted  # the case this test is about
    for v in untargeted:
        assert all(c.gates.get(("h2", v), 0) == 0 for c in contexts)


def test_an_evaluation_task_of_one_route_is_allowed(tmp_path: Path) -> None:
    """Evaluating a subset of routes leaves the other inputs unfed, gated off."""
    task = ROUTING.split("datasets:")[1].replace("repeat: {i: M, k: K}", "repeat: {i: 1, k: 1}")
    task = "datasets:" + task.replace("probability: 1/(K*M)", "probability: 1")
    problem = gdln.load(GRAPHS / "routing.yaml", task=_write(tmp_path, task, "one_route.yaml"))
    assert len(problem.require_task().contexts) == 1


def test_a_family_too_large_to_expand_is_checked_on_its_samples(tmp_path: Path) -> None:
    """K*M = 10 100 contexts are not made when read; the reversed edge is still found."""
    params = {"M": "101", "K": "100", "hidden": "4"}
    assert len(gdln.load(GRAPHS / "routing.yaml", params=params).require_task().contexts) > 10_000
    with pytest.raises(gdln.TaskSpecError, match=r"node 'h2' is an input"):
        gdln.load(_write(tmp_path, REVERSED), params=params)
