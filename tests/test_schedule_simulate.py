"""gdln.simulate with schedule= (gdln/schedule/_simulate.py): the full network trained in
torch phase by phase equals the reduced gradient-descent map of gdln.solve with schedule=
from the same decoupled weights (Eq. 9), to rounding, for every context all along (also
while a phase switches it off), the exactness issue 36 asks of a schedule."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import GRAPHS, full_context_losses

import gdln
from gdln.task import Schedule, blocked, interleaved


def solved(problem: gdln.Problem, schedule: Schedule, **kw) -> gdln.ScheduleResult:
    """``gdln.solve`` with ``schedule=``, its phases read back off the trajectory."""
    return gdln.schedule.ScheduleResult.of(gdln.solve(problem, schedule=schedule, **kw))


def _context(pathways: int) -> gdln.Problem:
    return gdln.load(GRAPHS / "context.yaml", params={"pathways": str(pathways), "hidden": "4"})


def _same(sim: gdln.Trajectory, run: gdln.ScheduleResult) -> None:
    np.testing.assert_allclose(sim.t, run.trajectory.t, rtol=0, atol=1e-12)
    losses = sim.context_losses()
    assert sorted(losses) == sorted(run.context_loss)
    for label, got in run.context_loss.items():
        scale = got[0]
        np.testing.assert_allclose(losses[label][:, 0], got, rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(sim.loss[:, 0], run.trajectory.loss, rtol=0, atol=1e-12)


@pytest.mark.parametrize("pathways", [1, 2])
def test_simulation_equals_the_reduced_map_from_decoupled_weights(pathways: int) -> None:
    problem = _context(pathways)
    both = ["context0", "context1"]
    schedule = Schedule(blocked(both, 1.0).phases + interleaved(both, 1.0).phases)
    start = gdln.reduce(problem, b0=0.1, route="contexts").decoupled_weights(seed=0)
    sim = gdln.simulate(problem, schedule=schedule, lr=0.05, weights=start, seeds=1, points=31)
    run = solved(problem, schedule, dynamics="gd-map", lr=0.05, b0=0.1, times=sim.t)
    # two gated pathways keep the start's bases (reduced map); one pathway does not
    want = ["contexts"] * 3 if pathways == 2 else ["matrix"] * 3
    assert [p.route for p in run.phases] == want
    _same(sim, run)
    # context 1 is off in phase 0: its loss moves only through shared weights
    off = sim.context_losses()["context1"][:, 0]
    moved = float(np.ptp(off[sim.t <= 1.0]))
    assert moved == 0 if pathways == 2 else moved > 1e-4
    assert sim.meta["schedule"]["boundaries"] == [0.0, 1.0, 2.0, 3.0]


def test_a_boundary_off_the_steps_is_refused() -> None:
    with pytest.raises(gdln.TaskSpecError, match=r"phases\[0\]\.duration: duration 1 is not"):
        gdln.simulate(_context(2), schedule=blocked(["context0", "context1"], 1.0), lr=0.3, seeds=1)


@pytest.mark.parametrize("pathways", [1, 2])
def test_a_decoupled_start_is_the_schedules_own(pathways: int) -> None:
    # init_scheme="decoupled" starts the simulation where solve with schedule= starts (the
    # weights of Eq. 9 on the bases of every context the schedule sees), not at the first
    # phase's own bases: the two then stay equal to rounding
    problem = _context(pathways)
    schedule = blocked(["context0", "context1"], 1.0)
    sim = gdln.simulate(
        problem, schedule=schedule, lr=0.05, init_scheme="decoupled", b0=0.1, seeds=1, points=21
    )
    run = solved(problem, schedule, dynamics="gd-map", lr=0.05, b0=0.1, times=sim.t)
    _same(sim, run)
    # the start's loss per context, written out in numpy from the task's decoupled weights
    weights = gdln.reduce(problem, b0=0.1, route="contexts").decoupled_weights(seed=0)
    want = full_context_losses(problem, weights)
    losses = sim.context_losses()
    got = [losses[c.label][0, 0] for c in problem.task.contexts]
    np.testing.assert_allclose(got, want, rtol=1e-12)
