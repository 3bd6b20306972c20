"""What a schedule form takes is one table (``gdln.task.SCHEDULE_TAKES``) read by the
library and the command line alike: a keyword or option outside it is refused in one line
that lists exactly the table's entries (issue 35: three hand lists drifted apart)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers import load

import gdln
from gdln.task import SCHEDULE_TAKES


@pytest.fixture(scope="module")
def context():
    problem = load("context")
    assert problem.schedule is not None
    return problem


def test_the_library_refuses_by_the_table(context, tmp_path):
    with pytest.raises(gdln.GdlnError) as solved:
        gdln.solve(context, schedule=context.schedule, t_max=3)
    assert "schedule and t_max" in str(solved.value)
    assert str(solved.value).endswith(", ".join(SCHEDULE_TAKES["solve"]))
    with pytest.raises(gdln.simulation.SimulationSpecError) as simulated:
        gdln.simulate(context, schedule=context.schedule, dtype="float32")
    assert "schedule and dtype" in str(simulated.value)
    assert str(simulated.value).endswith(", ".join(SCHEDULE_TAKES["simulate"]))
    with pytest.raises(gdln.simulation.SimulationSpecError) as compared:
        gdln.compare(context, tmp_path / "c", schedule=context.schedule, lump="full")
    assert "schedule and lump" in str(compared.value)
    assert str(compared.value).endswith(", ".join(SCHEDULE_TAKES["compare"]))


@pytest.mark.parametrize("form", ["solve", "simulate", "compare"])
def test_the_command_line_refuses_by_the_table(form, tmp_path):
    out = "o.json" if form == "solve" else ("o.npz" if form == "simulate" else "cmp")
    done = subprocess.run(
        [sys.executable, "-m", "gdln", form, "context", "--schedule", "--t-max", "3", "-o", out],
        cwd=tmp_path, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "--schedule and --t-max" in done.stderr
    listed = ", ".join("--" + k.replace("_", "-") for k in SCHEDULE_TAKES[form])
    assert done.stderr.rstrip().endswith(listed)


def test_every_listed_keyword_is_one_the_form_has():
    # the forms are gdln.solve, gdln.simulate and gdln.compare given schedule=
    import inspect

    forms = {"solve": gdln.solve, "simulate": gdln.simulate, "compare": gdln.compare}
    for function in forms.values():
        assert "schedule" in inspect.signature(function).parameters
    for form, function in forms.items():
        parameters = inspect.signature(function).parameters
        missing = [k for k in SCHEDULE_TAKES[form] if k not in parameters]
        assert not missing, (form, missing)
