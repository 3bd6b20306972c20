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
    "dynamics_of": lambda p: gdln.solution.dynamics_of(p, b0=0.01),
    "solve": lambda p: gdln.solve(p, b0=0.01, t_max=2, points=3, weight_decay=0.1),
    "solve gd-map": lambda p: gdln.solve(p, dynamics="gd-map", lr=0.1, t_max=1, points=3),
    "solve_full": lambda p: gdln.solve_full(p, b0=0.01, t_max=1, points=3),
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
    run = gdln.solve_schedule(problem, gdln.task.blocked(["context0", "context1"], 5.0), points=5)
    assert len(given_calls) == 1, given_calls
    assert np.isfinite(run.trajectory.loss).all()


def test_solve_batch_resolves_once(given_calls: list[dict[str, object]]) -> None:
    reduction = gdln.reduce(load("chain"))
    given_calls.clear()
    gdln.solution.solve_batch(reduction, [0.5, 1.0], t_max=1, points=3)
    assert len(given_calls) == 1, given_calls


@pytest.mark.parametrize(
    "function",
    [gdln.reduce, gdln.solve, gdln.solve_full, gdln.timescales, gdln.compare, gdln.solve_schedule],
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

#: The functions that take ``b0`` or ``weight_decay`` as a parameter: the public entry
#: points, plus three kernels whose coefficient is not the
#: setting read from a file: the optimiser's own decay (torch's spelling), the full-matrix
#: flow of given weights (a public kernel) and the λ-balanced phase's refusal of decay.
LOOSE = {
    "b0": {
        "compare", "dynamics_of", "expected_dynamics", "expected_sd_flow", "expected_sd_gd",
        "predict_gating", "reduce", "compare_schedule", "simulate", "simulate_schedule",
        "simulate_sd_gd", "solve", "solve_full", "solve_schedule", "timescales",
    },
    "weight_decay": {
        "compare", "dynamics_of", "expected_dynamics", "reduce", "compare_schedule", "simulate",
        "simulate_schedule", "solve", "solve_from_weights", "solve_full", "solve_schedule",
        "__init__", "full_flow", "balanced_phase",
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
