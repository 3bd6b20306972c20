"""Every setting declared once: the command line, the Python API, the schema and the
graph-file reference agree with the declaration, and every door takes one route.

Each test reads the declaration (``gdln.settings.declarations()``) and one consumer, so a
consumer that drifts from it (an option default of its own, a schema enum copied by hand,
a reference row left behind, a function that reads the file differently) fails here.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
import warnings
from fractions import Fraction
from pathlib import Path

import click
import numpy as np
import pytest

import gdln
from gdln.cli._common import COMMAND_SETTINGS
from gdln.cli._main import cli
from gdln.settings import SettingError, Settings, declarations

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))
settings_tables = importlib.import_module("settings_tables")
GRAPHS = ROOT / "graphs"

#: The public functions and the declared settings each takes as a keyword.
FUNCTION_SETTINGS = {
    "reduce": ("lump", "b0", "route"),
    "solve": ("t_max", "lr", "dynamics", "points", "method", "route", "lump", "b0"),
    "simulate": ("t_max", "lr", "init_scheme", "init_scale", "b0", "seeds", "seed", "points"),
    "compare": (
        "lr",
        "t_max",
        "init_scheme",
        "init_scale",
        "theory_start",
        "b0",
        "seeds",
        "seed",
        "lump",
        "route",
        "points",
    ),
    "timescales": ("b0", "route", "lump"),
}
#: The declared settings of how a simulation trains (keywords of gdln.simulate).
RUN_SETTINGS = ("optimizer", "batch_size", "momentum", "dtype", "device", "threads", "progress")


def test_every_declared_setting_reaches_a_user() -> None:
    """No orphan: each setting is a file key, an option or a keyword somewhere."""
    reached = {n for names in COMMAND_SETTINGS.values() for n in names}
    reached |= {n for names in FUNCTION_SETTINGS.values() for n in names} | set(RUN_SETTINGS)
    assert set(declarations()) == reached


@pytest.mark.parametrize("command", sorted(COMMAND_SETTINGS))
def test_command_line_options_are_the_declarations(command: str) -> None:
    """Each option: the declared spelling, no default of its own, the declared choices, and
    a help that says the meaning and where the default comes from."""
    found = cli.get_command(click.Context(cli), command)
    assert found is not None
    options = {p.name: p for p in found.params if isinstance(p, click.Option)}
    for name in COMMAND_SETTINGS[command]:
        declaration = declarations()[name]
        option = options[name]
        assert declaration.option in option.opts, (command, name)
        assert option.default is None, (command, name)  # the library resolves it
        if declaration.choices is not None:
            assert list(option.type.choices) == list(declaration.choices)
        text = " ".join(option.help.split())
        assert declaration.meaning in text
        assert f"else {declaration.shown})" in text or f"(default: {declaration.shown})" in text
        if declaration.file_key:
            assert f"the file's {declaration.file_key}" in text


@pytest.mark.parametrize("function", sorted(FUNCTION_SETTINGS))
def test_python_keywords_are_the_declarations(function: str) -> None:
    """Each public function takes every setting by its declared name, default ``None``
    (the problem's value)."""
    parameters = inspect.signature(getattr(gdln, function)).parameters
    for name in FUNCTION_SETTINGS[function]:
        assert parameters[name].default is None, (function, name)
        assert parameters[name].kind is inspect.Parameter.KEYWORD_ONLY


def test_simulation_settings_defaults_are_the_declarations() -> None:
    # simulate's keywords of the declared settings take the problem's value (None), and a
    # run on a bare graph, with no problem, records the declared defaults
    parameters = inspect.signature(gdln.simulate).parameters
    assert all(parameters[name].default is None for name in RUN_SETTINGS)
    problem = gdln.load("graphs/chain.yaml")
    run = gdln.simulate(problem.graph, problem.examples(), steps=1, lr=0.1, seeds=1)
    assert run.meta["dtype"] == Settings().dtype and run.meta["optimizer"] == Settings().optimizer


def test_schema_sections_are_the_declarations() -> None:
    schema = gdln.graphfile.schema()["properties"]
    for declaration in declarations().values():
        if declaration.file_key is None:
            continue
        section, key = declaration.file_key.split(".")
        entry = schema[section]["properties"][key]
        assert entry["description"] == declaration.meaning
        assert entry["default"] == declaration.shown
        if declaration.choices is not None:
            assert entry["enum"] == list(declaration.choices)
    for section in ("solve", "simulate"):
        declared = {
            d.file_key.split(".")[1]
            for d in declarations().values()
            if d.file_key and d.file_key.startswith(section)
        }
        assert set(schema[section]["properties"]) - declared <= {"init"}  # the old key


def test_the_settings_tables_of_the_docs_are_the_declarations() -> None:
    """docs/graph_files.md has one row per file key (values, default, option, meaning) and
    docs/guide/cli.md one per option, as docs/_ext/settings_tables.py writes them."""
    for page, tables in settings_tables.pages().items():
        text = page.read_text(encoding="utf-8")
        for head, rows in tables:
            start, end = settings_tables.table_in(text, head)
            assert text[start:end] == rows, (
                f"{page.name}: the settings table differs from the declarations; "
                "run python docs/_ext/settings_tables.py"
            )


def test_the_graph_file_reference_is_the_declarations() -> None:
    """Read independently of the generator: each declaration's row, cell by cell."""
    page = (ROOT / "docs" / "graph_files.md").read_text(encoding="utf-8")
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `(\w+)` \|.*\|$", page, re.M)}
    for declaration in declarations().values():
        if declaration.file_key is None:
            continue
        key = declaration.file_key.split(".")[1]
        row = rows[key]
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[2] == f"`{declaration.shown}`", key
        assert cells[3] == f"`{declaration.option}`", key
        assert cells[4] == declaration.meaning, key
        if declaration.choices is not None:
            assert cells[1] == ", ".join(f"`{c}`" for c in declaration.choices), key


def test_the_command_line_guide_lists_every_option() -> None:
    page = (ROOT / "docs" / "guide" / "cli.md").read_text(encoding="utf-8")
    for declaration in declarations().values():
        if declaration.option:
            assert f"`{declaration.option}`" in page, declaration.option


def test_precedence_call_then_file_then_default(tmp_path: Path) -> None:
    """The one rule, read off the values each door uses."""
    text = (GRAPHS / "chain.yaml").read_text(encoding="utf-8")
    assert "solve: {b0: 0.1, t_max: 40}" in text
    path = tmp_path / "chain.yaml"
    path.write_text(text.replace("solve: {b0: 0.1, t_max: 40}", "solve: {b0: 1/4, t_max: 3}"))
    problem = gdln.load(path)
    assert problem.settings.t_max == 3.0 and problem.settings.lr == 0.05  # file, default
    run = gdln.solve(problem, points=4)
    assert run.t[-1] == 3.0 and len(run.t) == 4
    assert float(run.series["B1"][0, 0]) == 0.25
    assert gdln.solve(problem, t_max=1.5, b0=0.5, points=2).t[-1] == 1.5
    reduction = gdln.reduce(problem, b0="1/8")
    assert all(
        v == gdln.reduce(problem, b0=0.125).systems[0].initial[k]
        for k, v in reduction.systems[0].initial.items()
    )


def test_a_setting_is_read_once_with_one_message(tmp_path: Path) -> None:
    """A bad value names the setting and its option (Python, command line) or the file key."""
    problem = gdln.load(GRAPHS / "chain.yaml")
    with pytest.raises(
        SettingError, match=r"chain\.yaml: lump \(--lump\): expected one of none, symmetry"
    ):
        gdln.reduce(problem, lump="fast")
    path = tmp_path / "bad.yaml"
    path.write_text((GRAPHS / "chain.yaml").read_text().replace("t_max: 40", "t_max: -4"))
    with pytest.raises(SettingError, match=r"bad\.yaml: solve\.t_max: expected a finite number"):
        gdln.load(path)
    path.write_text((GRAPHS / "chain.yaml").read_text().replace("t_max: 40", "speed: 4"))
    with pytest.raises(SettingError, match=r"bad\.yaml: solve: unknown setting 'speed'; expected"):
        gdln.load(path)


# ----------------------------------------------------------------------------- one route


ROUTE_CASES = [
    ("routing", {"M": "5", "K": "3", "hidden": "8"}),
    ("race", {"M": "4", "P": "4"}),
    ("xor", {}),
    ("chain", {}),
    ("context", {}),
]


@pytest.mark.parametrize(("name", "params"), ROUTE_CASES, ids=[c[0] for c in ROUTE_CASES])
def test_every_door_takes_one_route_and_one_system(name: str, params: dict, tmp_path: Path) -> None:
    """derive (gdln.reduce), solve (gdln.solve on the problem) and compare report the same
    route, and what solve and compare integrate is what derive printed: the same variables,
    and losses equal to rounding when that system is solved."""
    problem = gdln.load(GRAPHS / f"{name}.yaml", params=params)
    derived = gdln.reduce(problem)
    solved = gdln.solve(problem, t_max=2, points=5)
    assert solved.meta["route"] == derived.route_name
    variables = {str(v) for s in derived.systems for v in (*s.variables, *s.eliminated)}
    suffixed = len(derived.systems) > 1
    names = {k.split("@")[0] if suffixed else k for k in solved.series if k != "context_loss"}
    assert names == variables
    again = gdln.solve(derived, t_max=2, points=5)
    np.testing.assert_allclose(solved.loss, again.loss, rtol=1e-12)
    compared = gdln.compare(
        problem,
        t_max=0.5,
        lr=0.05,
        b0=derived.systems[0].initial[derived.systems[0].variables[0]],
        seeds=1,
        points=3,
        threads=1,
    )
    assert compared.metrics["route"] == solved.meta["route"]
    ode = gdln.solve(derived, t_max=0.5, times=compared.ode.t)
    np.testing.assert_allclose(compared.ode.loss, ode.loss, rtol=1e-10)


def test_routing_takes_the_quotient_through_every_door() -> None:
    problem = gdln.load(GRAPHS / "routing.yaml", params={"M": "5", "K": "3", "hidden": "8"})
    assert gdln.reduce(problem).route.startswith("symmetry quotient: 15 contexts in 1")
    solved = gdln.solve(problem, t_max=1, points=2).meta
    assert solved["route"] == "quotient" and solved["route_reason"].startswith("symmetry quotient")
    assert gdln.timescales(problem, b0=0.01, ode=False).stages  # derives on the same route
    contexts = gdln.reduce(problem, route="contexts")
    assert contexts.route == "" and len(contexts.problem.require_task().contexts) == 15


# ----------------------------------------------------------------------------- old spellings


def _warns(call, *args, **kwargs):
    with pytest.warns(gdln.GdlnDeprecationWarning) as caught:
        result = call(*args, **kwargs)
    return result, " ".join(str(w.message) for w in caught)


def test_old_python_keywords_work_this_release_with_a_warning() -> None:
    problem = gdln.load(GRAPHS / "chain.yaml")
    old, said = _warns(gdln.reduce, problem, init=0.2, quotient=False)
    assert "reduce(b0=...)" in said and "reduce(route=...)" in said
    new = gdln.reduce(problem, b0=0.2, route="contexts")
    assert old.systems[0].initial == new.systems[0].initial
    old_run, said = _warns(gdln.solve, new, t_max=1, lr=0.25, n_points=3)
    assert "dynamics='gd-map'" in said and "solve(points=...)" in said
    new_run = gdln.solve(new, t_max=1, dynamics="gd-map", lr=0.25, points=3)
    np.testing.assert_array_equal(old_run.loss, new_run.loss)
    _, said = _warns(gdln.expected_dynamics, problem, init=0.2)
    assert "expected_dynamics(b0=...)" in said
    graph = problem.graph
    drawn, said = _warns(gdln.initial_weights, graph, init=0.3, seeds=1)
    assert "initial_weights(init_scale=...)" in said
    np.testing.assert_array_equal(
        drawn[("x", "h1")], gdln.initial_weights(graph, init_scale=0.3, seeds=1)[("x", "h1")]
    )


def test_old_file_key_is_read_this_release(tmp_path: Path) -> None:
    path = tmp_path / "old.yaml"
    path.write_text(
        (GRAPHS / "chain.yaml").read_text().replace("solve: {b0: 0.1", "solve: {init: 0.3")
    )
    with pytest.warns(gdln.GdlnDeprecationWarning, match=r"solve\.init is now solve\.b0"):
        problem = gdln.load(path)
    assert float(problem.settings.b0) == 0.3


@pytest.mark.parametrize(
    ("solve", "message"),
    [
        ("{init: null, t_max: 40}", r"solve\.init: expected a real number, got None"),
        (
            "{b0: 0.1, t_max: 40, init: 0.3}",
            r"solve\.init: solve\.b0 and solve\.init are one setting, the second its old "
            r"name; keep solve\.b0 only",
        ),
    ],
)
def test_an_old_file_key_is_named_as_written(tmp_path: Path, solve: str, message: str) -> None:
    """Errors name the key the file wrote (found by the graph-file fuzzer: ``init: null``
    beside ``b0`` was reported as ``solve.b0: ... None``, a key whose value was 0.1)."""
    path = tmp_path / "old.yaml"
    text = (GRAPHS / "chain.yaml").read_text()
    line = next(x for x in text.splitlines() if x.startswith("solve:"))
    path.write_text(text.replace(line, f"solve: {solve}"))
    with pytest.warns(gdln.GdlnDeprecationWarning), pytest.raises(gdln.GdlnError) as info:
        gdln.load(path)
    assert re.search(message, str(info.value)), str(info.value)


OLD_OPTIONS = [
    (["derive", "xor", "--init", "0.2"], "--init is now --b0"),
    (["derive", "xor", "--no-quotient"], "--quotient/--no-quotient is now --route contexts"),
    (["solve", "xor", "--init", "0.2", "--points", "2"], "--init is now --b0"),
    (["solve", "xor", "--ode", "--points", "2"], "--ode is now --dynamics flow"),
    (["solve", "xor", "--lr", "0.5", "--points", "2"], "no longer selects the gradient-descent"),
    (["sd", "-L", "3", "--mode", "uniform"], "--mode is now --survival"),
    (["sd", "-L", "3", "--symbolic"], "--symbolic is now --expression"),
]


@pytest.mark.parametrize(
    ("argv", "said"), OLD_OPTIONS, ids=[" ".join(a[:3]) for a, _ in OLD_OPTIONS]
)
def test_old_options_work_this_release_with_one_warning_line(argv, said, capsys) -> None:
    argv = [str(GRAPHS / f"{a}.yaml") if a in ("xor", "chain") else a for a in argv]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", gdln.GdlnDeprecationWarning)  # the CLI shows them
        gdln.cli.main(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("gdln: warning:")]
    assert len(lines) == 1 and said in lines[0], err


def test_old_and_new_options_give_the_same_output(capsys) -> None:
    xor = str(GRAPHS / "xor.yaml")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", gdln.GdlnDeprecationWarning)
        gdln.cli.main(["solve", xor, "--init", "0.2", "--lr", "0.5", "--points", "3"])
        old = capsys.readouterr().out
    gdln.cli.main(
        ["solve", xor, "--b0", "0.2", "--dynamics", "gd-map", "--lr", "0.5", "--points", "3"]
    )
    assert capsys.readouterr().out == old


def test_a_files_simulate_section_presets_the_simulation(tmp_path: Path) -> None:
    """The `simulate:` section the reference documents is read, not refused as unknown."""
    path = tmp_path / "chain.yaml"
    text = (GRAPHS / "chain.yaml").read_text(encoding="utf-8")
    path.write_text(text + "\nsimulate: {seeds: 3, init_scale: 1/20, optimizer: sgd}\n")
    problem = gdln.load(path)
    assert (problem.settings.seeds, problem.settings.init_scale) == (3, 0.05)
    assert problem.settings.optimizer == "sgd" and problem.settings.b0 == Fraction(1, 10)
