"""Schedules solved phase by phase (gdln/schedule/), each route against the independent
full-matrix flow of tests/reference (gated_flow.run_schedule: a fresh integrator per phase,
gradient written by hand) and against what can be worked out by hand (App. A.2 of Saxe,
Sodhani & Lewallen 2022: x ~ U[-1, 1]^2, target x_c in context c)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from helpers import GRAPHS
from reference import gated_flow as gf

import gdln
from gdln.task import Phase, Schedule, blocked, interleaved

SX = np.eye(2) / 3
TARGETS = {"context0": [[1 / 3, 0]], "context1": [[0, 1 / 3]]}


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


def _edge(name: str) -> tuple[str, str]:
    u, _, v = name.partition("->")
    return (u, v)


def _against_reference(run: gdln.ScheduleResult, net, contexts, w0, schedule) -> gf.ScheduleRun:
    """Every context's loss equals the reference's, to 1e-7 of its loss at t = 0."""
    want = gf.run_schedule(net, w0, contexts, _phases(schedule), run.trajectory.t)
    for label, got in run.context_loss.items():
        scale = want.context_loss[label][0]
        np.testing.assert_allclose(got, want.context_loss[label], rtol=0, atol=1e-7 * scale)
    return want


def _start(problem: gdln.Problem, probabilities: dict[str, float], b0: float = 0.1):
    """The decoupled start of Eq. (9) of the first phase's reduction (hidden bases from
    seed 0), which the schedule's reduced route starts from."""
    task = gdln.task._schedule.phase_task(problem.require_task(), Phase(1, probabilities))
    first = gdln.reduce(dataclasses.replace(problem, task=task), b0=b0, route="contexts")
    return first.decoupled_weights(seed=0)


def test_one_pathway_trained_blocked_forgets_completely() -> None:
    problem = _context(1)
    schedule = blocked(["context0", "context1"], 60.0)
    run = gdln.solve_schedule(problem, schedule, points=121)
    # the first phase shares its own bases; the switch breaks them (y = x1, then y = x2)
    assert [p.route for p in run.phases] == ["contexts", "lambda-balanced"]
    assert "bases" in run.phases[1].why
    net, contexts = _reference(1)
    start = {e: w for e, w in _start(problem, {"context0": 1}).items()}
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
    run = gdln.solve_schedule(problem, schedule, points=121)
    assert [p.route for p in run.phases] == ["contexts"] * 4  # each context its own bases
    net, contexts = _reference(2)
    _against_reference(run, net, contexts, _start(problem, {"context0": 1}), schedule)
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
    run = gdln.solve_schedule(problem, schedule, points=51)
    assert [p.route for p in run.phases] == ["contexts"]
    net, contexts = _reference(1)
    w0 = _start(problem, {"context0": 0.5, "context1": 0.5})
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
    run = gdln.solve_schedule(problem, schedule, weights=given, points=40)
    assert {p.route for p in run.phases} == {"matrix"}
    assert "not λ-balanced" in run.phases[0].why
    _against_reference(run, net, contexts, w0, schedule)
    assert run.trajectory.weights(("x", "h0")).shape == (len(run.trajectory.t), 4, 2)


def test_lambda_balanced_start_takes_the_closed_form_each_phase() -> None:
    problem = _context(1)
    start = gdln.balanced_weights(problem, lam=0.0, scale=0.2, seed=3)
    schedule = blocked(["context0", "context1"], 10.0)
    run = gdln.solve_schedule(problem, schedule, weights=start, points=41)
    assert [p.route for p in run.phases] == ["lambda-balanced"] * 2
    net, contexts = _reference(1)
    w0 = {_edge(k.removeprefix("W/")) if isinstance(k, str) else k: v for k, v in start.items()}
    _against_reference(run, net, contexts, w0, schedule)
