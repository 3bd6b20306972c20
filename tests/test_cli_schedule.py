"""``gdln schedule`` (gdln/cli/_schedule.py): graphs/context.yaml's schedule (context 0,
context 1, then both) through the command line, against what can be worked out by hand
(App. A.2 of Saxe, Sodhani & Lewallen 2022: x ~ U[-1, 1]^2, target x_c in context c) and
against the independent full-matrix flow of tests/reference restarted at each boundary;
its refusals are one line each; ``gdln plot`` shades the phases."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import numpy as np
import pytest
from helpers import GRAPHS, run_cli
from reference import gated_flow as gf

import gdln

SMALL = ["--param", "hidden=4", "--points", "61"]


def _at(t: list[float], series: list[float], time: float) -> float:
    return float(series[int(np.argmin(np.abs(np.asarray(t) - time)))])


def test_one_pathway_forgets_and_interleaving_ends_at_half(tmp_path: Path, capsys) -> None:
    out, measures = tmp_path / "run.json", tmp_path / "m.csv"
    args = ["schedule", "context", "--param", "pathways=1", *SMALL, "-o", str(out)]
    code, _, err = run_cli([*args, "--measures", str(measures)], capsys)
    assert code == 0, err
    run = json.loads(out.read_text())
    t, loss = run["t"], run["context_loss"]
    assert [p["route"] for p in run["meta"]["schedule"]["phases"]] == ["lambda-balanced"] * 3
    assert run["meta"]["schedule"]["boundaries"] == [0, 60, 120, 180]
    # by hand: W -> [1, 0], then [0, 1] (context 0 loses 1/2 E[(x1 - x2)^2] = 1/3), then
    # [1/2, 1/2] (Eqs. 24-25), where each context loses 1/2 E[(x1 - x2)^2 / 4] = 1/12
    assert _at(t, loss["context0"], 60) == pytest.approx(0, abs=1e-6)
    assert _at(t, loss["context0"], 120) == pytest.approx(1 / 3, abs=1e-6)
    assert loss["context0"][-1] == pytest.approx(1 / 12, abs=1e-6)
    assert loss["context1"][-1] == pytest.approx(1 / 12, abs=1e-6)
    rows = list(csv.DictReader(measures.open()))
    forgetting = [r for r in rows if r["measure"] == "forgetting"]
    assert [(r["context"], r["phase"]) for r in forgetting] == [("context0", "1")]
    assert float(forgetting[0]["value"]) == pytest.approx(1 / 3, abs=1e-6)


def test_two_gated_pathways_forget_nothing_printed(capsys) -> None:
    code, out, err = run_cli(["schedule", "context", *SMALL], capsys)
    assert code == 0, err
    assert out.count("route contexts") == 3
    table = out.split("loss per context")[1].split("measures")[0]
    row0 = next(line for line in table.splitlines() if line.strip().startswith("context0"))
    # context 0's loss at the end of the phase that trains context 1 alone: still 0
    assert abs(float(row0.split()[3])) < 1e-9
    assert "context0  1  context1       forgetting  0" in out
    assert "savings     1" in out


def test_from_weights_every_context_against_the_reference(tmp_path: Path, capsys) -> None:
    """Random starting weights (--weights): every context's loss over the three phases
    equals the full-matrix flow restarted at each boundary, to 1e-7 of its L(0)."""
    rng = np.random.default_rng(3)
    start = {
        ("x", "h0"): 0.3 * rng.standard_normal((4, 2)),
        ("h0", "y"): 0.3 * rng.standard_normal((1, 4)),
    }
    weights = tmp_path / "w.npz"
    np.savez(weights, **{f"W/{u}->{v}": w for (u, v), w in start.items()})
    out = tmp_path / "run.json"
    args = ["schedule", "context", "--param", "pathways=1", *SMALL, "--weights", str(weights)]
    code, _, err = run_cli([*args, "-o", str(out)], capsys)
    assert code == 0, err
    run = json.loads(out.read_text())
    net = gf.Network({"x": 2, "h0": 4, "y": 1}, list(start))
    contexts = [
        gf.Context(
            label,
            0.5,
            Sigma_x={("x", "x"): np.eye(2) / 3},
            Sigma_yx={("y", "x"): np.array([[1 / 3, 0]] if label == "context0" else [[0, 1 / 3]])},
            Sigma_y={"y": 1 / 3},
        )
        for label in ("context0", "context1")
    ]
    phases = [
        gf.Phase(60.0, {"context0": 1.0}),
        gf.Phase(60.0, {"context1": 1.0}),
        gf.Phase(60.0, {"context0": 0.5, "context1": 0.5}),
    ]
    want = gf.run_schedule(net, start, contexts, phases, np.asarray(run["t"]))
    for label in ("context0", "context1"):
        expected = want.context_loss[label]
        got = np.asarray(run["context_loss"][label])
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-7 * expected[0])


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["--route", "moments"], r"route 'moments' has no schedule"),
        (["--lr", "0.07", "--dynamics", "gd-map"], r"schedule\[0\].*not a whole number"),
        (["--b0", "0.1", "--weights", "w.npz"], r"--weights and --b0"),
        (["-o", "{tmp}/a.json", "--measures", "{tmp}/a.json"], r"the same file"),
        (["--measures", "{tmp}/m.txt"], r"expected a file ending in \.json or \.csv"),
    ],
)
def test_refusals_are_one_line(args: list[str], match: str, tmp_path: Path, capsys) -> None:
    args = [a.format(tmp=tmp_path) for a in args]
    code, out, err = run_cli(["schedule", "context", *args], capsys)
    assert (code, out) == (2, "") and err.startswith("gdln: error: ") and err.count("\n") == 1
    assert len(err) <= 301 and re.search(match, err), err


def test_a_file_without_a_schedule_is_refused(capsys) -> None:
    code, out, err = run_cli(["schedule", str(GRAPHS / "chain.yaml")], capsys)
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert "chain.yaml: no schedule: add a 'schedule:' section" in err


def test_an_existing_output_is_kept(tmp_path: Path, capsys) -> None:
    out = tmp_path / "run.json"
    out.write_text("mine")
    code, _, err = run_cli(["schedule", "context", *SMALL, "-o", str(out)], capsys)
    assert code == 2 and "exists; pass --force" in err and out.read_text() == "mine"


def test_plot_shades_each_phase_at_its_boundaries() -> None:
    problem = gdln.load("context", params={"pathways": 2, "hidden": 4})
    solved = gdln.solve(problem, schedule=problem.require_schedule(), points=31)
    run = gdln.schedule.ScheduleResult.of(solved)
    fig = gdln.plotting.plot_result(run.trajectory)
    ax = fig.axes[0]
    spans = {p.get_gid(): p for p in ax.patches if str(p.get_gid()).startswith("phase")}
    assert sorted(spans) == ["phase 0", "phase 1", "phase 2"]
    for k, (start, end) in enumerate([(0, 60), (60, 120), (120, 180)]):
        span = spans[f"phase {k}"]  # a Rectangle in data x
        assert (span.get_x(), span.get_x() + span.get_width()) == pytest.approx((start, end))
    names = [t.get_text() for t in ax.texts if str(t.get_gid()).startswith("phase label")]
    assert names == ["context0", "context1", "interleaved"]
