"""One door: every public entry point resolves its settings once, and nothing below it again.

Issue 35, item 1. The properties checked: a call of an entry point resolves the settings
exactly once (``Settings.given`` is the one rule; counted by wrapping it), the resolved
value the body receives is the call's (what it gave, ``called``) over the file's, and the
signature users read has no ``resolved`` parameter.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import numpy as np
import pytest
from helpers import load

import gdln
from gdln.settings import Settings

ENTRIES = {
    "reduce": lambda p: gdln.reduce(p, b0=0.01, lump="none"),
    "solve": lambda p: gdln.solve(p, b0=0.01, t_max=2, points=3, weight_decay=0.1),
    "solve gd-map": lambda p: gdln.solve(p, dynamics="gd-map", lr=0.1, t_max=1, points=3),
    "solve matrix": lambda p: gdln.solve(p, route="matrix", b0=0.01, t_max=1, points=3),
    "timescales": lambda p: gdln.timescales(p, b0=1e-3, ode=False),
    "expected_dynamics": lambda p: gdln.expected_dynamics(p, b0=0.01),
}


@pytest.fixture
def given_calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, object]]:
    calls: list[dict[str, object]] = []
    original = Settings.given

    def counted(self: Settings, **values: object) -> Settings:
        calls.append(values)
        return original(self, **values)

    monkeypatch.setattr(Settings, "given", counted)
    return calls


@pytest.mark.parametrize("entry", sorted(ENTRIES))
def test_an_entry_point_resolves_its_settings_once(
    entry: str, given_calls: list[dict[str, object]]
) -> None:
    problem = load("chain")
    ENTRIES[entry](problem)
    assert len(given_calls) == 1, given_calls


def test_the_schedule_resolves_once(given_calls: list[dict[str, object]]) -> None:
    problem = load("context", pathways=1)
    schedule = gdln.task.blocked(["context0", "context1"], 5.0)
    run = gdln.solve(problem, schedule=schedule, points=5)
    assert len(given_calls) == 1, given_calls
    assert np.isfinite(run.loss).all()


def test_solve_batch_resolves_once(given_calls: list[dict[str, object]]) -> None:
    reduction = gdln.reduce(load("chain"))
    given_calls.clear()
    gdln.solution.solve_batch(reduction, [0.5, 1.0], t_max=1, points=3)
    assert len(given_calls) == 1, given_calls


@pytest.mark.parametrize(
    "function",
    [gdln.reduce, gdln.solve, gdln.simulate, gdln.timescales, gdln.compare],
)
def test_the_signature_users_read_has_no_resolved_parameter(function: object) -> None:
    parameters = inspect.signature(function).parameters  # type: ignore[arg-type]
    assert "resolved" not in parameters
    assert "b0" in parameters or "weight_decay" in parameters


def test_resolved_cannot_be_passed_from_outside() -> None:
    with pytest.raises(TypeError, match="resolved"):
        gdln.reduce(load("chain"), resolved=Settings())  # type: ignore[call-arg]


def test_a_reductions_own_start_and_decay_are_kept_unless_given() -> None:
    # expected_dynamics of a Reduction: its own b0 and weight decay, unless the call gives one
    problem = load("chain")
    reduction = gdln.reduce(problem, b0=0.3, weight_decay=0.25)
    own = gdln.expected_dynamics(reduction)
    assert own.weight_decay == pytest.approx(0.25)
    given = gdln.expected_dynamics(reduction, weight_decay=0.5)
    assert given.weight_decay == pytest.approx(0.5)
    start = np.asarray(own.numeric_flow().y0)
    assert np.allclose(np.abs(start), 0.3)


# ----------------------------------------------------------------------------- the source

PACKAGE = Path(gdln.__file__).parent

#: The functions that take ``b0`` or ``weight_decay`` as a parameter: public entry points
#: only (at most 8 each, issue 35), the last two of ``weight_decay`` the ones of given
#: weights (the λ-balanced closed form and the full-matrix flow's kernel). ``schedule=``
#: is the one door of a schedule; the matrix route and given weights are ``solve``'s;
#: below the doors the coefficient is ``gamma`` (the flow's, the λ-balanced refusal's).
LOOSE = {
    "b0": {
        "compare", "expected_dynamics", "predict_gating", "reduce", "simulate", "solve",
        "timescales",
    },
    "weight_decay": {
        "compare", "expected_dynamics", "reduce", "simulate", "solve", "solve_from_weights",
        "full_flow",
    },
}  # fmt: skip


def _functions() -> list[tuple[Path, ast.FunctionDef | ast.AsyncFunctionDef]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                found.append((path, node))
    return found


@pytest.mark.parametrize("name", sorted(LOOSE))
def test_loose_settings_stop_at_the_doors(name: str) -> None:
    # below a door a setting travels inside the one resolved value, never as a keyword
    holders = set()
    for _, node in _functions():
        a = node.args
        if name in {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}:
            holders.add(node.name)
    assert holders == LOOSE[name]
    assert len(holders) <= 8


def test_settings_are_resolved_at_the_doors_only() -> None:
    # Settings.given, the one rule, is called by the door and at most three other places
    sites = []
    for path, node in _functions():
        for call in ast.walk(node):
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr == "given"
            ):
                sites.append(f"{path.relative_to(PACKAGE)}:{node.name}")
    assert "settings/_door.py:entered" in sites
    assert len(set(sites)) <= 4, sites


def test_simulation_settings_are_an_old_spelling_of_simulates_keywords() -> None:
    problem = load("chain")
    old_value = gdln.simulation.SimulationSettings(record_every=2, dtype="float32")
    with pytest.warns(
        gdln.GdlnDeprecationWarning,
        match=r"simulate\(settings=\.\.\.\) is now simulate\(dtype=\.\.\., record_every=\.\.\.\)",
    ):
        old = gdln.simulate(problem, steps=4, lr=0.1, seeds=1, settings=old_value)
    new = gdln.simulate(problem, steps=4, lr=0.1, seeds=1, record_every=2, dtype="float32")
    assert old.meta["dtype"] == new.meta["dtype"] == "float32"
    np.testing.assert_array_equal(old.t, [0.0, 0.2, 0.4])
    np.testing.assert_array_equal(old.loss, new.loss)


# ----------------------------------------------------------- the doors that replaced forms


def test_weights_given_to_solve_start_the_full_matrix_flow_there() -> None:
    # tests/test_full.py checks the flow against independent integrations; here: the start
    # is the given weights exactly, the route says why, and gradient flow lowers the loss
    from gdln.solution._full import initial_full_weights

    problem = load("chain")
    weights = initial_full_weights(problem, problem.settings.given(b0=0.2), seed=3)
    run = gdln.solve(problem, weights=weights, t_max=4.0, points=5)
    assert run.meta["route"] == "matrix" and "weights given" in run.meta["route_reason"]
    for (u, v), w in weights.items():
        np.testing.assert_array_equal(run.series[f"W[{u}->{v}]"][0], w)
    assert np.all(np.diff(run.loss) < 0)


def test_solve_refuses_weights_with_another_start_or_a_reduced_route() -> None:
    from gdln.solution._full import initial_full_weights

    problem = load("chain")
    weights = initial_full_weights(problem, problem.settings, seed=0)
    with pytest.raises(gdln.GdlnError, match=r"weights and b0: a start from given weights"):
        gdln.solve(problem, weights=weights, b0=0.1)
    with pytest.raises(gdln.GdlnError, match=r"weights and route 'contexts'"):
        gdln.solve(problem, weights=weights, route="contexts")
    with pytest.raises(gdln.GdlnError, match=r"this model was obtained already"):
        gdln.solve(gdln.reduce(problem), weights=weights)


def test_a_schedules_phases_are_read_back_from_its_trajectory() -> None:
    # ScheduleResult.of(trajectory) against the engine's own result, field by field
    from gdln.schedule import ScheduleResult, run_schedule

    problem = load("context", pathways=1)
    schedule = gdln.task.blocked(["context0", "context1"], 30.0)
    grid = np.linspace(0.0, schedule.duration, 7)
    direct = run_schedule(
        problem, schedule, problem.settings, times=grid, weights=None, rtol=1e-10, atol=1e-12
    )
    read = ScheduleResult.of(gdln.solve(problem, schedule=schedule, times=grid))
    assert read.phases == direct.phases and read.labels == direct.labels
    assert read.boundaries == direct.boundaries
    np.testing.assert_array_equal(read.measures.forgetting, direct.measures.forgetting)
    with pytest.raises(gdln.GdlnError, match="not a solved schedule"):
        ScheduleResult.of(gdln.solve(problem, t_max=1.0, points=3))


def test_the_schedule_forms_refuse_by_the_one_table() -> None:
    problem = load("context", pathways=1)
    schedule = gdln.task.blocked(["context0", "context1"], 1.0)
    for call, form in (
        (lambda: gdln.solve(problem, schedule=schedule, t_max=3.0), "solve"),
        (lambda: gdln.simulate(problem, schedule=schedule, t_max=3.0), "simulate"),
        (lambda: gdln.simulate(problem, schedule=schedule, optimizer="sgd"), "simulate"),
    ):
        with pytest.raises(gdln.GdlnError, match=rf"and {form} with a schedule takes only"):
            call()
