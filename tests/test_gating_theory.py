"""A ReLU run against its extracted gated network (issue 37, item 4): ``relu_theory``,
its figure and ``gdln plot RUN --gated``.

Checked against torch autograd (``tests/reference/relu_net.py``, no gdln): the ReLU
network trained by the reference from the same start, and the gated linear network of
the patterns at the start step with those masks frozen, trained by autograd steps.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
from click.testing import CliRunner
from reference import relu_net as rn

import gdln
from gdln.cli import cli

X = np.array([[1.0, 1.0], [1.0, -1.0], [-1.0, 1.0], [-1.0, -1.0]])
Y = np.array([[1.0], [-1.0], [-1.0], [1.0]])
LR, STEPS = 0.4, 200


def xor_problem(tmp_path, hidden: int = 128) -> gdln.Problem:
    rows = "\n".join(
        f"    - {{inputs: {{x: {a.tolist()}}}, targets: {{y: {b.tolist()}}}}}"
        for a, b in zip(X, Y, strict=True)
    )
    path = tmp_path / "xor_relu.yaml"
    path.write_text(
        f"nodes: [{{id: x, size: 2}}, {{id: h, size: {hidden}, activation: relu}}, "
        "{id: y, size: 1}]\nedges: [{source: x, target: h}, {source: h, target: y}]\n"
        f"task:\n  examples:\n{rows}\n"
    )
    return gdln.load(path)


def start(seed: int = 0, hidden: int = 128, sigma: float = 2e-4) -> list[np.ndarray]:
    w = np.random.default_rng(seed).normal(0.0, sigma, (hidden, 3))
    return [w[:, :2], w[:, 2:].T]


@pytest.fixture(scope="module")
def xor_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("xor")
    W = start()
    run = gdln.simulate(
        xor_problem(folder),
        weights={("x", "h"): W[0], ("h", "y"): W[1]},
        steps=STEPS,
        lr=LR,
        seeds=1,
        record_every=1,
        record_patterns=True,
    )
    run.save(folder / "run.npz")
    return run, folder / "run.npz"


def gated_losses(W, masks, steps: int) -> np.ndarray:
    """The gated linear network with the masks frozen, trained by autograd GD steps."""
    W = [w.copy() for w in W]
    out = []
    for _ in range(steps + 1):
        loss, _, grads, _ = rn.gated_loss_and_grads(W, None, X, Y, masks)
        out.append(loss)
        W = [w - LR * g for w, g in zip(W, grads, strict=True)]
    return np.array(out)


def test_from_the_freeze_the_gated_network_is_the_relu_network(xor_run) -> None:
    """FACTS.md: seed 0's patterns freeze at step 98; from there the extracted GDLN's GD map
    gives the reference ReLU network's losses, and its own loss is the reference's."""
    run, _ = xor_run
    result = gdln.gating.relu_theory(run)
    reference = rn.train(X, Y, start(), lr=LR, steps=STEPS)
    assert result.extraction.step == 98 and result.start == pytest.approx(98 * LR)
    assert not reference.flips[99:].any() and reference.flips[98] > 0
    np.testing.assert_allclose(result.loss, reference.loss, rtol=1e-10, atol=1e-16)
    np.testing.assert_allclose(result.theory.t, LR * np.arange(STEPS - 98 + 1), rtol=1e-12)
    np.testing.assert_allclose(
        result.theory.loss, reference.loss[98:], rtol=0, atol=1e-15 * reference.loss[0]
    )
    assert result.gap() < 1e-6
    np.testing.assert_array_equal(result.flip_fraction > 0, reference.flips[1:] > 0)
    np.testing.assert_allclose(result.flip_fraction, reference.flips[1:] / (4 * 128))


def test_before_the_freeze_it_is_exact_for_the_gated_network_only(xor_run) -> None:
    """From step 20 the theory is the gated network of step 20's masks (autograd with the
    masks frozen), which leaves the ReLU network at its first flip."""
    run, _ = xor_run
    result = gdln.gating.relu_theory(run, step=20)
    reference = rn.train(X, Y, start(), lr=LR, steps=STEPS, record=[20])
    masks = [m.astype(float) for m in reference.patterns[20]]
    want = gated_losses(reference.weights[20], masks, STEPS - 20)
    np.testing.assert_allclose(result.theory.loss, want, rtol=1e-9, atol=1e-15)
    # one step from step 20 is the ReLU network's step (same patterns at W(20)); its loss
    # at step 21 already differs where a pattern flipped between 20 and 21
    reference = rn.train(X, Y, start(), lr=LR, steps=STEPS, record=[20, 21])
    for g in result.extraction.groups:
        got = result.theory.weights(("x", g.node))[1]
        np.testing.assert_allclose(got, reference.weights[21][0][list(g.units)], rtol=1e-10)
    assert reference.flips[21] > 0
    assert np.max(np.abs(want - reference.loss[20:])) > 1e-3 * reference.loss[0]
    # a shorter span: 10 steps from step 20, the gap over the records in it
    short = gdln.gating.relu_theory(run, step=20, t_max=10 * LR)
    assert short.theory.t[-1] == pytest.approx(10 * LR) and len(short.theory.t) == 11
    gap = np.max(np.abs(want[:11] - reference.loss[20:31])) / reference.loss[20]
    assert short.gap() == pytest.approx(gap, rel=1e-8)


def test_the_figure_draws_what_the_result_holds(xor_run, tmp_path) -> None:
    run, path = xor_run
    prediction = gdln.predict_gating(xor_problem(tmp_path), t_max=20, points=21)
    result = gdln.gating.relu_theory(run, prediction=prediction, points=11)
    fig = gdln.plotting.plot_result(result)
    lines = {line.get_gid(): line for ax in fig.axes for line in ax.get_lines()}
    np.testing.assert_allclose(lines["relu-loss"].get_ydata(), result.loss)
    np.testing.assert_allclose(lines["gated-theory"].get_xdata(), result.theory.t + 98 * LR)
    np.testing.assert_allclose(lines["gated-theory"].get_ydata(), result.theory.loss)
    flips = np.asarray(lines["flips"].get_ydata(), float)
    np.testing.assert_array_equal(np.isnan(flips), result.flip_fraction == 0)
    assert result.agreement is not None
    np.testing.assert_allclose(lines["agreement"].get_ydata(), result.agreement.agreement)
    np.testing.assert_allclose(lines["selectivity"].get_ydata(), result.agreement.selectivity)
    for size in range(1, 5):
        np.testing.assert_allclose(
            lines[f"on-in-{size}"].get_ydata(), result.agreement.sizes[:, size]
        )
    assert len(fig.axes) == 3
    assert len(gdln.plotting.plot_result(path, gated=True, step=150).axes) == 2


def test_gdln_plot_gated_writes_the_figure_and_refuses_in_one_line(xor_run, tmp_path) -> None:
    _, path = xor_run
    runner = CliRunner()
    out = tmp_path / "relu.png"
    result = runner.invoke(cli, ["plot", str(path), "--gated", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:4] == b"\x89PNG"
    plain = tmp_path / "plain.npz"
    gdln.simulate(xor_problem(tmp_path, 4), steps=2, seeds=1).save(plain)
    for args, message in [
        ([str(plain), "--gated"], "no activation patterns"),
        ([str(path), "--step", "3"], "step 3: only with gated"),
        ([str(path), "--gated", "--step", "7000"], "step 7000 was not recorded"),
    ]:
        result = runner.invoke(cli, ["plot", *args, "-o", str(tmp_path / "x.png")])
        assert result.exit_code == 2, result.output
        assert result.output.startswith("gdln: error: ") and message in result.output
        assert result.output.count("\n") == 1
    with pytest.raises(gdln.GdlnError, match="dynamics: expected one of gd-map, flow"):
        gdln.gating.relu_theory(path, dynamics="euler")
