"""Schedules solved phase by phase (gdln/schedule/), each route against the independent
full-matrix flow of tests/reference (gated_flow.run_schedule: a fresh integrator per phase,
gradient written by hand) and against what can be worked out by hand (App. A.2 of Saxe,
Sodhani & Lewallen 2022: x ~ U[-1, 1]^2, target x_c in context c)."""

from __future__ import annotations

import dataclasses
import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
import sympy as sp
from helpers import GRAPHS
from reference import gated_flow as gf

import gdln
from gdln.task import Phase, Schedule, blocked, interleaved

SX = np.eye(2) / 3
TARGETS = {"context0": [[1 / 3, 0]], "context1": [[0, 1 / 3]]}


def solved(problem: gdln.Problem, schedule: Schedule | None = None, **kw) -> gdln.ScheduleResult:
    """``gdln.solve`` with ``schedule=`` (the file's where none is given), its phases read
    back off the trajectory."""
    chosen = schedule if schedule is not None else problem.require_schedule()
    return gdln.schedule.ScheduleResult.of(gdln.solve(problem, schedule=chosen, **kw))


def _context(pathways: int) -> gdln.Problem:
    return gdln.load(GRAPHS / "context.yaml", params={"pathways": str(pathways), "hidden": "4"})


def _reference(pathways: int) -> tuple[gf.Network, list[gf.Context]]:
    """graphs/context.yaml written out for the reference: one pathway x -> h0 -> y, or
    two whose input edges context c gates (x -> h_c on, the other off)."""
    hidden = [f"h{k}" for k in range(pathways)]
    sizes = {"x": 2, "y": 1, **dict.fromkeys(hidden, 4)}
    edges = [("x", h) for h in hidden] + [(h, "y") for h in hidden]
    net = gf.Network(sizes, edges)
    contexts = []
    for c, label in enumerate(TARGETS):
        gates = {("x", h): float(k == c) for k, h in enumerate(hidden)} if pathways == 2 else {}
        contexts.append(
            gf.Context(
                label,
                0.5,
                edge_gates=gates,
                Sigma_x={("x", "x"): SX},
                Sigma_yx={("y", "x"): np.array(TARGETS[label])},
                Sigma_y={"y": 1 / 3},
            )
        )
    return net, contexts


def _phases(schedule: Schedule) -> list[gf.Phase]:
    return [
        gf.Phase(p.duration, {k: float(v) for k, v in p.probabilities.items()})
        for p in schedule.phases
    ]


def _edge(name: str | tuple[str, str]) -> tuple[str, str]:
    if isinstance(name, tuple):
        return name
    u, _, v = name.removeprefix("W/").partition("->")
    return (u, v)


def _against_reference(run: gdln.ScheduleResult, net, contexts, w0, schedule) -> gf.ScheduleRun:
    """Every context's loss equals the reference's, to 1e-7 of its loss at t = 0."""
    want = gf.run_schedule(net, w0, contexts, _phases(schedule), run.trajectory.t)
    for label, got in run.context_loss.items():
        scale = want.context_loss[label][0]
        np.testing.assert_allclose(got, want.context_loss[label], rtol=0, atol=1e-7 * scale)
    return want


def _without_schedule(text: str) -> str:
    """A graph file's text without its ``schedule:`` section (the file's last)."""
    return text.split("\nschedule:")[0] + "\n"


def _start(problem: gdln.Problem, b0: float = 0.1):
    """The problem's decoupled start of Eq. (9) (its own mixture's bases, hidden bases from
    seed 0), which a schedule from b0 starts from, as a simulation does."""
    return gdln.reduce(problem, b0=b0, route="contexts").decoupled_weights(seed=0)


def test_one_pathway_trained_blocked_forgets_completely() -> None:
    problem = _context(1)
    schedule = blocked(["context0", "context1"], 60.0)
    run = solved(problem, schedule, points=121)
    # the start's bases are the mixture's, v = (1, 1)/sqrt 2; the phases' are e1, then e2:
    # the decoupled start is lambda-balanced (Lambda = 0), and stays so under any data
    assert [p.route for p in run.phases] == ["lambda-balanced"] * 2
    assert "the bases of edge x->h0 in mode 0 differ" in run.phases[0].why
    net, contexts = _reference(1)
    start = {e: w for e, w in _start(problem).items()}
    want = _against_reference(run, net, contexts, start, schedule)
    middle = int(np.argmin(np.abs(run.trajectory.t - 60)))
    product = want.weights[middle][("h0", "y")] @ want.weights[middle][("x", "h0")]
    np.testing.assert_allclose(product, [[1, 0]], atol=1e-6)  # W -> [1, 0]
    product = want.final[("h0", "y")] @ want.final[("x", "h0")]
    np.testing.assert_allclose(product, [[0, 1]], atol=1e-6)  # then [0, 1]
    # by hand: with W = [0, 1], context 0 loses 1/2 E[(x1 - x2)^2] = 1/3; context 1 nothing
    assert run.context_loss["context0"][-1] == pytest.approx(1 / 3, abs=1e-6)
    assert run.context_loss["context1"][-1] == pytest.approx(0, abs=1e-6)
    m = run.measures
    assert m.forgetting[0, 1] == pytest.approx(1 / 3, abs=1e-6)  # context0 off after it learned
    assert np.isnan(m.forgetting[1, 0])  # context1 untrained yet: transfer, not forgetting
    assert m.transfer[1, 0] == pytest.approx(1 / 3 - run.context_loss["context1"][0], abs=1e-5)


def test_two_gated_pathways_forget_nothing() -> None:
    problem = _context(2)
    schedule = blocked(["context0", "context1"], 60.0, repeats=2)
    run = solved(problem, schedule, points=121)
    assert [p.route for p in run.phases] == ["contexts"] * 4  # each context its own bases
    net, contexts = _reference(2)
    _against_reference(run, net, contexts, _start(problem), schedule)
    loss0 = run.context_loss["context0"]
    t = run.trajectory.t
    during = (t >= 60) & (t <= 120)
    assert np.ptp(loss0[during]) == 0  # exactly constant while off: its pathway is gated off
    m = run.measures
    np.testing.assert_array_equal(np.nan_to_num(m.forgetting), 0)
    assert m.savings["context0"] == [(2, 1.0)]  # nothing to relearn


def test_interleaved_one_pathway_ends_at_half() -> None:
    problem = _context(1)
    schedule = interleaved(["context0", "context1"], 150.0)
    run = solved(problem, schedule, points=51)
    assert [p.route for p in run.phases] == ["contexts"]
    net, contexts = _reference(1)
    w0 = _start(problem)
    want = _against_reference(run, net, contexts, w0, schedule)
    product = want.final[("h0", "y")] @ want.final[("x", "h0")]
    np.testing.assert_allclose(product, [[0.5, 0.5]], atol=1e-6)  # Eqs. 24-25: Syx Sx^-1
    for label in TARGETS:  # 1/2 E[(x_c - (x1 + x2)/2)^2] = 1/12 by hand
        assert run.context_loss[label][-1] == pytest.approx(1 / 12, abs=1e-6)


@pytest.mark.parametrize("pathways", [1, 2])
def test_three_phases_from_random_weights(pathways: int) -> None:
    """From random weights (no balance): the full-matrix flow restarted at each boundary."""
    problem = _context(pathways)
    net, contexts = _reference(pathways)
    rng = np.random.default_rng(7)
    w0 = {e: 0.3 * rng.normal(size=net.shape(e)) for e in net.edges}
    schedule = Schedule(
        (
            Phase(7.0, {"context0": 1}),
            Phase(5.5, {"context0": 0.5, "context1": 0.5}),
            Phase(6.0, {"context0": 0.25, "context1": 0.75}),
        )
    )
    given = {f"{u}->{v}": w for (u, v), w in w0.items()}
    run = solved(problem, schedule, weights=given, points=40)
    assert {p.route for p in run.phases} == {"matrix"}
    assert "not λ-balanced" in run.phases[0].why
    _against_reference(run, net, contexts, w0, schedule)
    assert run.trajectory.weights(("x", "h0")).shape == (len(run.trajectory.t), 4, 2)


def test_lambda_balanced_start_takes_the_closed_form_each_phase() -> None:
    problem = _context(1)
    start = gdln.balanced_weights(problem, lam=0.0, scale=0.2, seed=3)
    schedule = blocked(["context0", "context1"], 10.0)
    run = solved(problem, schedule, weights=start, points=41)
    assert [p.route for p in run.phases] == ["lambda-balanced"] * 2
    net, contexts = _reference(1)
    w0 = {_edge(k): v for k, v in start.items()}
    _against_reference(run, net, contexts, w0, schedule)


# -- Braun et al.'s forgetting, from λ-balanced restarts (tests/reference/forgetting.py) ----

CASES = json.loads(
    (Path(__file__).parent / "reference" / "data" / "forgetting_cases.json").read_text()
)


def _regression_problem(case: dict) -> gdln.Problem:
    """Three regression tasks T0, T1, T2 on x (5) -> h (10) -> y (2), one context each."""
    with tempfile.TemporaryDirectory() as folder:
        file = Path(folder) / "net.yaml"
        file.write_text(
            "nodes: [{id: x, size: 5}, {id: h, size: 10}, {id: y, size: 2}]\n"
            "edges: [{source: x, target: h}, {source: h, target: y}]\n"
        )
        problem = gdln.load(file)
    datasets = {
        f"T{m}": gdln.Dataset(
            f"T{m}", {"x": 5, "y": 2}, examples={"x": np.array(X), "y": np.array(Y)}
        )
        for m, (X, Y) in enumerate(zip(case["X"], case["Y"], strict=True))
    }
    contexts = tuple(
        gdln.Context(f"T{m}", sp.Rational(1, 3), {}, f"T{m}", {"x": "x"}, {"y": "y"})
        for m in range(3)
    )
    return dataclasses.replace(problem, task=gdln.Task(contexts, datasets))


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"seed{c['seed']}-t{c['duration']:g}")
def test_forgetting_from_lambda_balanced_restarts(case: dict) -> None:
    problem = _regression_problem(case)
    weights = {"x->h": np.array(case["W1"]), "h->y": np.array(case["W2"])}
    schedule = blocked(["T0", "T1", "T2"], case["duration"])
    run = solved(problem, schedule, weights=weights, points=7)
    assert [p.route for p in run.phases] == ["lambda-balanced"] * 3
    forgot = run.measures.forgetting_between("T0", 1, 2)  # F_0(T_1, T_2)
    want = case["flow"]["F_i(T_j,T_k)"]
    assert forgot == pytest.approx(want, rel=1e-7, abs=1e-12)
    np.testing.assert_allclose(run.measures.end_loss, case["flow"]["loss"], rtol=1e-7)
    # the same schedule by gradient descent (their update is the map of Eq. 2 with lr)
    steps = solved(problem, schedule, weights=weights, dynamics="gd-map", lr=case["lr"], points=7)
    assert {p.route for p in steps.phases} == {"matrix"}
    assert steps.measures.forgetting_between("T0", 1, 2) == pytest.approx(
        case["gd"]["F_i(T_j,T_k)"], rel=1e-9
    )
    np.testing.assert_allclose(steps.measures.end_loss, case["gd"]["loss"], rtol=1e-9)


# -- the gradient-descent map --------------------------------------------------------------


@pytest.mark.parametrize("pathways", [1, 2])
def test_gd_map_equals_gradient_descent_restarted_per_phase(pathways: int) -> None:
    problem = _context(pathways)
    schedule = Schedule(
        (Phase(20.0, {"context0": 1}), Phase(10.0, {"context0": 0.5, "context1": 0.5}))
    )
    run = solved(problem, schedule, dynamics="gd-map", lr=0.05, points=31)
    routes = [p.route for p in run.phases]
    # the mixture's bases are the first phase's only for gated pathways
    assert routes == (["contexts", "contexts"] if pathways == 2 else ["matrix", "matrix"])
    net, contexts = _reference(pathways)
    w0 = _start(problem)
    want = gf.run_schedule(
        net, w0, contexts, _phases(schedule), run.trajectory.t, method="gd", lr=0.05
    )
    for label, got in run.context_loss.items():
        np.testing.assert_allclose(got, want.context_loss[label], rtol=0, atol=1e-12)
    np.testing.assert_allclose(run.trajectory.loss, want.loss, rtol=0, atol=1e-12)


def test_gd_map_boundaries_must_fall_on_steps(tmp_path: Path) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(
        _without_schedule((GRAPHS / "context.yaml").read_text())
        + "schedule: [{duration: 1.01, blocked: [context0, context1]}]\n"
    )
    problem = gdln.load(path)
    with pytest.raises(
        gdln.TaskSpecError,
        match=r"g\.yaml: schedule\[0\]\.blocked\[0\]\.duration: duration 1\.01 is not a whole number of steps of lr=0\.02",
    ):
        solved(problem, dynamics="gd-map", lr=0.02)
    assert len(solved(problem, dynamics="gd-map", lr=0.01).phases) == 2


# -- refusals and fallbacks ------------------------------------------------------------------


def test_lumping_is_rechecked_per_phase() -> None:
    """Interleaved, the two gated pathways lump into one orbit; blocked they do not: the
    schedule then runs unlumped, which every phase shares."""
    problem = _context(2)
    schedule = Schedule(
        (Phase(20.0, {"context0": 0.5, "context1": 0.5}), Phase(20.0, {"context0": 1}))
    )
    run = solved(problem, schedule, points=41)
    assert [p.route for p in run.phases] == ["contexts", "contexts"]
    assert run.trajectory.meta["lump"] == "none"
    assert run.trajectory.has_variable("b_x_h1")
    net, contexts = _reference(2)
    _against_reference(run, net, contexts, _start(problem), schedule)


def test_routes_asked_for_by_name() -> None:
    problem = _context(1)
    schedule = blocked(["context0", "context1"], 5.0)
    with pytest.raises(
        gdln.GdlnError,
        match=r"route 'contexts' ends at phases\[0\]: the bases of edge x->h0 in mode 0 differ from the start's",
    ):
        solved(problem, schedule, route="contexts")
    run = solved(problem, schedule, route="matrix", points=11)
    assert {p.route for p in run.phases} == {"matrix"}
    with pytest.raises(gdln.GdlnError, match="route 'moments' has no schedule"):
        solved(problem, schedule, route="moments")
    with pytest.raises(gdln.GdlnError, match="no schedule: add a 'schedule:' section"):
        gdln.load(GRAPHS / "chain.yaml").require_schedule()


def test_weight_decay_refuses_the_lambda_balanced_restart() -> None:
    from gdln.balanced._phases import refuse_decay

    problem = _context(1)
    start = gdln.balanced_weights(problem, lam=0.0, scale=0.2, seed=3)
    schedule = blocked(["context0", "context1"], 5.0)
    run = solved(problem, schedule, weights=start, weight_decay=0.01, points=11)
    assert [p.route for p in run.phases] == ["matrix", "matrix"]
    assert "no λ-balanced restart" in run.phases[0].why
    net, contexts = _reference(1)
    w0 = {_edge(k): v for k, v in start.items()}
    want = gf.run_schedule(net, w0, contexts, _phases(schedule), run.trajectory.t, gamma=0.01)
    for label, got in run.context_loss.items():
        np.testing.assert_allclose(got, want.context_loss[label], rtol=0, atol=1e-8)
    with pytest.raises(
        gdln.balanced.BalancedSpecError, match=r"weight_decay 0\.01: no λ-balanced restart, since Λ"
    ):
        refuse_decay(0.01)


# -- reversal: the saddle ----------------------------------------------------------------------

REVERSAL = """\
nodes: [{id: x, size: 1}, {id: h, size: 1}, {id: y, size: 1}]
edges: [{source: x, target: h}, {source: h, target: y}]
datasets:
  up: {moments: {x: {x: 1}, y: {x: 1, y: 1}}}
  down: {moments: {x: {x: 1}, y: {x: -1, y: 1}}}
task:
  contexts:
    - {label: up, probability: 1, dataset: up, inputs: {x: x}, targets: {y: y}}
    - {label: down, probability: 0, dataset: down, inputs: {x: x}, targets: {y: y}}
schedule:
  - {blocked: [up, down], duration: 20}
"""


def test_reversal_from_an_exactly_balanced_start_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "reversal.yaml"
    path.write_text(REVERSAL)
    with pytest.raises(
        gdln.GdlnError,
        match=r"reversal\.yaml: schedule\[0\]\.blocked\[1\]: mode 0 starts exactly balanced and aligned against its new target .* the escape depends on the misalignment",
    ):
        solved(gdln.load(path))


def _escape(t: np.ndarray, loss: np.ndarray, start: float) -> float:
    """When the reversed context's loss first falls to 1/8 (the map at half its target,
    W = -1/2; it starts at 2 and the saddle W = 0 has 1/2), linear between records."""
    after = np.flatnonzero((t >= start) & (loss <= 0.125))
    i = int(after[0])
    return float(
        t[i - 1] + (t[i] - t[i - 1]) * (loss[i - 1] - 0.125) / (loss[i - 1] - loss[i]) - start
    )


def test_reversal_escape_grows_like_log_of_one_over_the_misalignment(tmp_path: Path) -> None:
    """From (W1, W2) = (0.1, 0.1(1 + eps)), unlumped: W2^2 - W1^2 is conserved, so the mode
    passes the saddle at a distance ~ sqrt(eps) and escapes after ~ ln(1/eps)/s (s = 1)."""
    path = tmp_path / "reversal.yaml"
    path.write_text(REVERSAL)
    problem = gdln.load(path)
    net = gf.Network({"x": 1, "h": 1, "y": 1}, [("x", "h"), ("h", "y")])
    contexts = [
        gf.Context(
            label,
            Sigma_x={("x", "x"): [[1.0]]},
            Sigma_yx={("y", "x"): [[sign]]},
            Sigma_y={"y": 1.0},
        )
        for label, sign in (("up", 1.0), ("down", -1.0))
    ]
    phases = [gf.Phase(20.0, {"up": 1.0}), gf.Phase(20.0, {"down": 1.0})]
    escapes = []
    for eps in (1e-2, 1e-3, 1e-4, 1e-5):
        b0 = {"x->h": 0.1, "h->y": 0.1 * (1 + eps)}
        run = solved(problem, lump="none", b0=b0, points=2001)
        assert [p.route for p in run.phases] == ["contexts", "contexts"]
        t = run.trajectory.t
        got = _escape(t, run.context_loss["down"], 20.0)
        w0 = {("x", "h"): np.array([[0.1]]), ("h", "y"): np.array([[0.1 * (1 + eps)]])}
        want = gf.run_schedule(net, w0, contexts, phases, t)
        assert got == pytest.approx(_escape(t, want.context_loss["down"], 20.0), abs=1e-6)
        escapes.append(got)
    slopes = np.diff(escapes) / np.log(10)  # d t_escape / d ln(1/eps)
    np.testing.assert_allclose(slopes, 1.0, rtol=0.01)  # 1/s


# -- what a run records ------------------------------------------------------------------------


def test_phases_meta_stages_and_measures_files(tmp_path: Path) -> None:
    problem = _context(2)
    run = solved(problem, blocked(["context0", "context1"], 30.0), points=61)
    meta = run.trajectory.meta
    assert meta["route"] == "schedule" and meta["context_labels"] == ["context0", "context1"]
    assert meta["schedule"]["boundaries"] == [0.0, 30.0, 60.0]
    assert [p["route"] for p in meta["schedule"]["phases"]] == ["contexts", "contexts"]
    # time scales from the small start, recomputed at the switch for the pathway still small
    first = gdln.timescales(
        dataclasses.replace(
            problem,
            task=gdln.task._schedule.phase_task(problem.require_task(), Phase(1, {"context0": 1})),
        ),
        b0=0.1,
        ode=False,
    )
    assert run.phases[0].stages == ((tuple(first.stages[0].pathways), first.stages[0].time),)
    assert run.phases[1].stages == ((("x->h1->y[0]",), 30.0 + first.stages[0].time),)
    shared = solved(_context(1), blocked(["context0", "context1"], 30.0), points=7)
    assert "starts from learned weights" in shared.phases[1].stages_note
    m = run.measures
    written = m.save(tmp_path / "m.json")
    data = json.loads(written.read_text())
    assert data["end_loss"]["context1"][0] == pytest.approx(run.context_loss["context1"][30])
    assert data["forgetting"]["context0"] == [None, 0.0]
    rows = (tmp_path / "m.csv").read_text() if m.save(tmp_path / "m.csv") else ""
    assert rows.splitlines()[0] == "context,phase,name,measure,value"
    assert "context0,1,context1,forgetting,0.0" in rows
    with pytest.raises(gdln.outputs.OutputExistsError):
        m.save(tmp_path / "m.json")
    m.save(tmp_path / "m.json", force=True)


def test_a_phase_with_a_task_file_of_its_own(tmp_path: Path) -> None:
    """Phase 1 trains a task of its own (y = x1 through the second pathway); every
    context of both tasks keeps its loss, against the reference with all three."""
    (tmp_path / "swap.yaml").write_text(
        "datasets:\n  d: {moments: {x: {x: [[1/3, 0], [0, 1/3]]}, y: {x: [[1/3, 0]], y: [[1/3]]}}}\n"
        "task:\n  contexts:\n    - {label: swap, probability: 1, dataset: d, active: ['x->h1'],"
        " inputs: {x: x}, targets: {y: y}}\n"
    )
    path = tmp_path / "g.yaml"
    path.write_text(
        _without_schedule((GRAPHS / "context.yaml").read_text()).replace("hidden: 8", "hidden: 4")
        + "schedule: [{duration: 30, blocked: [context0]}, {duration: 30, task: swap.yaml}]\n"
    )
    problem = gdln.load(path)
    run = solved(problem, points=31)
    assert run.labels == ("context0", "context1", "swap")
    assert run.phases[1].probabilities == {"context0": 0.0, "context1": 0.0, "swap": 1.0}
    net, contexts = _reference(2)
    contexts.append(
        gf.Context(
            "swap",
            edge_gates={("x", "h0"): 0.0, ("x", "h1"): 1.0},
            Sigma_x={("x", "x"): SX},
            Sigma_yx={("y", "x"): np.array([[1 / 3, 0]])},
            Sigma_y={"y": 1 / 3},
        )
    )
    phases = [gf.Phase(30.0, {"context0": 1.0}), gf.Phase(30.0, {"swap": 1.0})]
    want = gf.run_schedule(net, _start(problem), contexts, phases, run.trajectory.t)
    for label, got in run.context_loss.items():
        scale = want.context_loss[label][0]
        np.testing.assert_allclose(got, want.context_loss[label], rtol=0, atol=1e-7 * scale)
    assert run.context_loss["swap"][-1] == pytest.approx(0, abs=1e-6)
    # pathway 1 computes x1 now (to 1e-4 after 30 tau): context 1 (y = x2) loses
    # 1/2 E[(x2 - x1)^2] = 1/3
    assert run.context_loss["context1"][-1] == pytest.approx(1 / 3, abs=1e-4)
