"""Schedules as values and as a graph file's ``schedule:`` section (gdln/task/_schedule.py,
gdln/graphfile/_schedule.py): what they hold, and every refusal in one line naming the file,
the key and the value."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest
import sympy as sp
import yaml
from helpers import GRAPHS

import gdln
from gdln.task import Phase, Schedule, blocked, interleaved


def _with_schedule(tmp_path: Path, entries: str, name: str = "g.yaml") -> Path:
    """graphs/context.yaml with ``entries`` as its schedule instead of its own."""
    path = tmp_path / name
    text = (GRAPHS / "context.yaml").read_text(encoding="utf-8").split("\nschedule:")[0]
    path.write_text(f"{text}\nschedule: {entries}\n", encoding="utf-8")
    return path


def test_short_forms_in_python() -> None:
    s = blocked(["a", "b"], 2.5, repeats=2)
    assert [p.name for p in s.phases] == ["a", "b", "a", "b"]
    assert s.boundaries == (0.0, 2.5, 5.0, 7.5, 10.0)
    assert s.duration == 10.0
    (phase,) = interleaved(["a", "b", "c"], 3).phases
    assert phase.probabilities == dict.fromkeys("abc", sp.Rational(1, 3))
    assert sum(phase.probabilities.values()) == 1  # exact
    assert Phase(1, {"a": 0.1, "b": 0.9}).probabilities["a"] == sp.Rational(1, 10)
    assert Phase(1, {"a": 1, "b": 0}).trained == ("a",)


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: Phase(0, {"a": 1}), r"phase\.duration: duration 0: expected a finite number > 0"),
        (lambda: Phase(float("inf"), {"a": 1}), "duration inf"),
        (lambda: Phase(True, {"a": 1}), "duration True"),
        (lambda: Phase(1, {"a": 0.5}), r"probabilities sum to 1/2, expected 1"),
        (lambda: Phase(1, {"a": 2, "b": -1}), r"probabilities\.a: probability 2"),
        (lambda: Phase(1, {"a": "1"}), r"probability '1': expected a number"),
        (lambda: Phase(1, {}), "exactly one of them"),
        (lambda: Schedule(()), "at least one phase"),
        (lambda: Schedule((1,)), r"phases\[0\]: expected a Phase"),
        (lambda: blocked(["a"], 1, repeats=0), "repeats 0"),
        (lambda: blocked("ab", 1), "expected a list of labels"),
        (lambda: interleaved([], 1), "expected a list of labels"),
    ],
)
def test_python_refusals(build, match: str) -> None:
    with pytest.raises(gdln.TaskSpecError, match=match):
        build()


def test_python_phases_are_keyed_for_messages() -> None:
    s = Schedule((Phase(1, {"a": 1}), Phase(2, {"b": 1})))
    assert [p.key for p in s.phases] == ["phases[0]", "phases[1]"]
    problem = gdln.load(GRAPHS / "context.yaml")
    with pytest.raises(gdln.TaskSpecError, match=r"phases\[0\]\.probabilities\.a: no context"):
        s.check(problem.require_task())


def test_file_schedule_expands_and_matches_the_schema(tmp_path: Path) -> None:
    path = _with_schedule(
        tmp_path,
        "[{blocked: [context0, context1], duration: 25, repeats: 2},"
        " {interleaved: [context0, context1], duration: 2*25},"
        " {duration: 10, probabilities: {context0: 1/3, context1: 2/3}, name: mix}]",
    )
    problem = gdln.load(path)
    s = problem.schedule
    assert s is not None and s.source == str(path)
    assert [p.name for p in s.phases] == ["context0", "context1"] * 2 + ["interleaved", "mix"]
    assert s.boundaries == (0.0, 25.0, 50.0, 75.0, 100.0, 150.0, 160.0)
    assert s.phases[-1].probabilities == {
        "context0": sp.Rational(1, 3),
        "context1": sp.Rational(2, 3),
    }
    assert s.phases[1].key == "schedule[0].blocked[1]"
    jsonschema.validate(yaml.safe_load(path.read_text()), gdln.graphfile.schema())
    assert gdln.load(GRAPHS / "chain.yaml").schedule is None
    shipped = gdln.load(GRAPHS / "context.yaml").schedule  # blocked, then interleaved
    assert shipped is not None
    assert [p.name for p in shipped.phases] == ["context0", "context1", "interleaved"]


@pytest.mark.parametrize(
    ("entries", "match"),
    [
        ("[{duration: 0, probabilities: {context0: 1}}]", r"schedule\[0\]\.duration: duration 0"),
        ("[{duration: -1, blocked: [context0]}]", r"schedule\[0\]\.duration: duration -1"),
        (
            "[{duration: 1, probabilities: {context0: 1/2}}]",
            r"schedule\[0\]\.probabilities: .*sum to 1/2",
        ),
        (
            "[{duration: 1, probabilities: {context0: 3/2, context1: -1/2}}]",
            r"probabilities\.context0: probability 3/2",
        ),
        (
            "[{duration: 1, probabilities: {contextX: 1}}]",
            r"schedule\[0\]\.probabilities\.contextX: no context is labelled 'contextX'",
        ),
        (
            "[{duration: 1, blocked: [context0, nope]}]",
            r"schedule\[0\]\.blocked\[1\]\.probabilities\.nope",
        ),
        (
            "[{duration: 1, blocked: [context0], interleaved: [context1]}]",
            r"schedule\[0\]: give exactly one of",
        ),
        ("[{probabilities: {context0: 1}}]", r"schedule\[0\]: missing 'duration'"),
        (
            "[{duration: 1, probabilities: {context0: 1}, colour: red}]",
            r"schedule\[0\]: unknown key 'colour'",
        ),
        (
            "[{duration: 1, blocked: [context0], repeats: 0}]",
            r"schedule\[0\]\.repeats: expected an integer >= 1, got 0",
        ),
        ("[{duration: 1, interleaved: [context0], repeats: 2}]", r"'repeats' goes with 'blocked'"),
        (
            "[{duration: 1, blocked: [1]}]",
            r"schedule\[0\]\.blocked\[0\]: expected a context label, got the number 1",
        ),
        ("[]", r"schedule: expected a list of phases"),
        ("{duration: 1}", r"schedule: expected a list"),
        ("[{duration: 1, blocked: [context0], repeats: 100000}]", r"above the limit of 10000"),
        ("[{duration: x, blocked: [context0]}]", r"schedule\[0\]\.duration"),
    ],
)
def test_file_refusals_name_file_key_and_value(tmp_path: Path, entries: str, match: str) -> None:
    path = _with_schedule(tmp_path, entries)
    with pytest.raises(gdln.TaskSpecError, match=match) as err:
        gdln.load(path)
    assert str(err.value).startswith(str(path)) and len(str(err.value)) <= 300


def test_a_schedule_needs_a_task(tmp_path: Path) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(
        "nodes: [{id: x, size: 1}, {id: y, size: 1}]\nedges: [{source: x, target: y}]\n"
        "schedule: [{duration: 1, probabilities: {a: 1}}]\n"
    )
    with pytest.raises(gdln.TaskSpecError, match="schedule: a schedule orders the contexts"):
        gdln.load(path)


def test_a_phase_reads_a_task_file_of_its_own(tmp_path: Path) -> None:
    (tmp_path / "swap.yaml").write_text(
        "datasets:\n  d: {moments: {x: {x: [[1/3, 0], [0, 1/3]]}, y: {x: [[0, -1/3]], y: [[1/3]]}}}\n"
        "task:\n  contexts:\n    - {label: reversed, probability: 1, dataset: d, active: ['x->h1'],"
        " inputs: {x: x}, targets: {y: y}}\n"
    )
    path = _with_schedule(
        tmp_path, "[{duration: 5, blocked: [context0]}, {duration: 5, task: swap.yaml}]"
    )
    s = gdln.load(path).schedule
    assert s is not None and s.phases[1].task is not None
    assert s.phases[1].trained == ("reversed",) and s.phases[1].name == "task"
    union = gdln.task._schedule.schedule_task(gdln.load(path).require_task(), s)
    assert [c.label for c in union.contexts] == ["context0", "context1", "reversed"]
    bad = _with_schedule(tmp_path, "[{duration: 5, task: missing.yaml}]", "h.yaml")
    with pytest.raises(gdln.TaskSpecError, match=r"missing\.yaml"):
        gdln.load(bad)
