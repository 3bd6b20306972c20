"""Hostile values for the guest commands, ``gdln kernel`` and ``gdln sd``, and their functions.

Every option and public function behind the two commands is given what breaks numbers:
non-finite or out-of-range values, sizes whose memory exceeds a limit (refused before
anything is allocated, naming ``batch_elements`` and how to raise it), and settings whose
results leave float64 (refused, or computed exactly where the math allows: a ReLU gate
depends only on the sign of its pre-activation). On the command line each ends in one
``gdln: error:`` line and exit code 2; in Python in a ``GdlnError``.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import time

import numpy as np
import pytest
import torch
from helpers import run_cli

from gdln.kernels import (
    DGNSpecError,
    Gate,
    draw_value_weights,
    frg_overlap_mc,
    gram_variance_by_depth,
    kernel_spectrum,
    make_conv_dgn,
    make_dataset,
    make_dgn,
    neural_path_kernel,
    neural_tangent_kernel,
    normalised_nu,
    npk_from_gates,
    overlap,
    spectrum_ecdf,
    train_dgn,
)
from gdln.sd import (
    SDResNet,
    StochasticDepthError,
    chain_regulariser,
    chain_summary,
    expected_chain,
    expected_sd_flow,
    expected_sd_gd,
    measure_gradient_growth,
    mode_for_budget,
    sd_loss_monte_carlo,
    simulate_sd_gd,
    survival_probabilities,
)


def _one_error_line(code: int, out: str, err: str, *needles: str) -> str:
    assert code == 2, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gdln: error: "), err
    assert len(lines[0]) <= 300, lines[0]
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert "Traceback" not in err and "Warning" not in err
    return lines[0]


# ------------------------------------------------------------------ gdln kernel
KERNEL_PAYLOADS = [
    (["--width", "1000000000", "-n", "10"], "batch_elements"),
    (["--depth", "100000", "-n", "10"], "batch_elements"),
    (["--kind", "ntk", "--width", "3000", "--depth", "20"], "GDLN_MAX_BATCH_ELEMENTS"),
    (["--dataset", "uniform2d", "-n", "100000000"], "batch_elements"),
    (["--train-epochs", "1000000000000", "-n", "10"], "steps"),
    (["--seed", "-1", "-n", "10"], "seed"),
    (["--seed", "100000000000000000000000", "-n", "10"], "seed"),
    (["--depth", "450", "--width", "8", "-n", "10"], "the kernel is 0"),
    (["--depth", "60", "--sigma", "1e10", "--gate", "soft", "-n", "6"], "overflowed"),
    (
        ["--kind", "ntk", "--depth", "40", "--width", "8", "--sigma", "1e10", "-n", "6"],
        "overflowed",
    ),
    (
        ["--kind", "ntk", "--depth", "40", "--width", "8", "--sigma", "1e-10", "-n", "6"],
        "underflowed",
    ),
]


@pytest.mark.parametrize(
    ("args", "needle"), KERNEL_PAYLOADS, ids=[" ".join(a) for a, _ in KERNEL_PAYLOADS]
)
def test_kernel_command_refuses_in_one_line(
    args: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _one_error_line(*run_cli(["kernel", *args, "--no-plot"], capsys), needle)


def test_kernel_sizes_are_refused_before_anything_is_allocated() -> None:
    start = time.perf_counter()
    with pytest.raises(DGNSpecError, match=r"batch_elements=\d+ \(raise it: GDLN_MAX_B"):
        kernel_spectrum(width=10**9, n=10)
    with pytest.raises(DGNSpecError, match="batch_elements"):
        make_dgn(64, 10**9, 4)
    with pytest.raises(DGNSpecError, match="batch_elements"):
        make_conv_dgn((4,), 10**5, 4)
    with pytest.raises(DGNSpecError, match="batch_elements"):
        make_dataset("uniform2d", n=10**10)
    assert time.perf_counter() - start < 5


def test_monte_carlo_sizes_are_refused_before_anything_is_drawn() -> None:
    start = time.perf_counter()
    for call in (
        lambda: draw_value_weights([64, 10**5, 1], sigma=1.0, n_samples=10**4),
        lambda: frg_overlap_mc(10**6, 100, 0.5, n_samples=10**8),
        lambda: frg_overlap_mc(8, 3, 0.5, n_samples=10, seed=-1),
        lambda: gram_variance_by_depth(10**5, [3], n_samples=10),
        lambda: gram_variance_by_depth(8, [3], n_samples=10, seed=2**64),
    ):
        with pytest.raises(DGNSpecError, match=r"batch_elements|seed"):
            call()
    assert time.perf_counter() - start < 5


def test_raised_limit_lets_a_larger_network_through(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GDLN_MAX_BATCH_ELEMENTS", "100")
    with pytest.raises(DGNSpecError, match="batch_elements=100 "):
        make_dgn(4, 8, 3)
    monkeypatch.setenv("GDLN_MAX_BATCH_ELEMENTS", "1000")
    assert make_dgn(4, 8, 3).widths == (4, 8, 8, 1)


@pytest.mark.parametrize(
    "call",
    [
        lambda: make_dgn(2, 3, 3, seed=-1),
        lambda: make_dgn(2, 3, 3, seed=2**70),
        lambda: make_dgn(2, True, 3),
        lambda: make_dgn(2, 3, 3, d_out=0),
        lambda: make_dataset("uniform2d", n=5, seed=-3),
        lambda: make_conv_dgn((4,), 2, 3, seed=-1),
        lambda: kernel_spectrum(n=10, chunk_size=True, kind="ntk"),
        lambda: kernel_spectrum(n=10, train_epochs=True),
    ],
    ids=[
        "seed<0",
        "seed>2^63",
        "width=True",
        "d_out=0",
        "data seed",
        "conv seed",
        "chunk",
        "epochs",
    ],
)
def test_kernel_functions_refuse_out_of_range_counts(call) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(DGNSpecError):
        call()


def test_relu_gates_are_exact_where_the_feature_network_leaves_float64() -> None:
    """ReLU gates depend on signs only: the NPK does not depend on sigma at any depth."""
    x = torch.randn(5, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    reference = neural_path_kernel(make_dgn(3, 8, 40, seed=2, sigma=1.0), x)
    for sigma in (1e10, 1e-10):  # the plain product overflows / underflows by depth 40
        npk = neural_path_kernel(make_dgn(3, 8, 40, seed=2, sigma=sigma), x)
        np.testing.assert_array_equal(npk.kernel, reference.kernel)
        assert npk.log_scale == reference.log_scale
    assert np.abs(reference.kernel).max() > 0


def test_soft_gates_that_overflow_are_refused_not_returned() -> None:
    net = make_dgn(3, 8, 60, seed=0, sigma=1e10, gate=Gate("soft"), mode="dnpfl")
    x = torch.ones(4, 3, dtype=torch.float64)
    with pytest.raises(DGNSpecError, match=r"hidden layer .* overflowed float64"):
        neural_path_kernel(net, x)


def test_a_dead_network_is_refused_with_the_reason() -> None:
    with pytest.raises(DGNSpecError, match="the kernel is 0: no path carries any example"):
        kernel_spectrum(depth=450, width=8, n=10)


NON_FINITE = [np.nan, np.inf, -np.inf]


@pytest.mark.parametrize("bad", NON_FINITE, ids=str)
def test_kernel_functions_refuse_non_finite_inputs(bad: float) -> None:
    net = make_dgn(2, 3, 3, seed=0)
    x = torch.ones(4, 2, dtype=torch.float64)
    x[1, 0] = bad
    for call in (
        lambda: neural_path_kernel(net, x),
        lambda: neural_tangent_kernel(net, x),
        lambda: net(x),
        lambda: npk_from_gates(x, net.gates(torch.ones(4, 2, dtype=torch.float64))),
        lambda: train_dgn(net, x, torch.ones(4), epochs=1),
        lambda: train_dgn(net, torch.ones(4, 2), torch.tensor([1.0, bad, 0.0, 1.0]), epochs=1),
        lambda: overlap([torch.full((2, 3), bad)]),
        lambda: normalised_nu(np.array([[1.0, 0.0], [0.0, bad]]), np.ones(2)),
        lambda: normalised_nu(np.eye(2), np.array([1.0, bad])),
        lambda: spectrum_ecdf(np.array([1.0, bad])),
        lambda: train_dgn(net, torch.ones(4, 2), torch.ones(4), lr=bad),
    ):
        with pytest.raises(DGNSpecError):
            call()


# ------------------------------------------------------------------ gdln sd
SD_PAYLOADS = [
    (["-L", "1000000000"], "batch_elements"),
    (["-L", "100000000000000000000"], "GDLN_MAX_BATCH_ELEMENTS"),
    (["--s", "nan"], "s: got nan"),
    (["--s", "inf"], "s: got inf"),
    (["--d", "inf"], "d: got inf"),
    (["--d", "nan"], "d: got nan"),
    (["--b", "nan"], "b: got nan"),
    (["--b", "0.1,0.1,inf,0.1,0.1,0.1,0.1,0.1,0.1,0.1"], "b: got inf"),
    (["--b", "1e308"], "leaves float64"),
    (["--b=-1e300"], "leaves float64"),
    (["--b", "1", "--s", "1e308"], "leaves float64"),
    (["--format", "json", "--b", "1e200"], "leaves float64"),
    (["-L", "3000", "--scaling", "plain", "--b", "0.0001"], "overflows float64"),
]


@pytest.mark.parametrize(("args", "needle"), SD_PAYLOADS, ids=[" ".join(a) for a, _ in SD_PAYLOADS])
def test_sd_command_refuses_in_one_line(
    args: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with np.errstate(all="warn"):
        _one_error_line(*run_cli(["sd", *args], capsys), needle)


def test_sd_functions_refuse_non_finite_values() -> None:
    p = np.full(3, 0.5)
    for call in (
        lambda: expected_chain(np.array([0.1, np.nan, 0.1]), p, s=1.0),
        lambda: expected_chain(np.full(3, 0.1), p, s=np.inf),
        lambda: expected_chain(np.full(3, 0.1), p, s=1.0, d=np.nan),
        lambda: expected_chain(np.full(3, 0.1), p, s=1.0, a=np.nan),
        lambda: expected_chain(np.full(3, 0.1), p, s=1.0, scaling=np.nan),
        lambda: chain_regulariser(np.full(3, np.inf), p, s=1.0),
        lambda: chain_summary(np.nan, p),
    ):
        with pytest.raises(StochasticDepthError, match=r"expected finite numbers|not a finite"):
            call()


def test_sd_results_that_leave_float64_are_refused_without_warnings() -> None:
    with np.errstate(all="raise"):  # a numpy warning would be an error here
        for call in (
            lambda: expected_chain(np.full(10, 1e308), np.full(10, 0.5), s=1.0),
            lambda: chain_summary(1e200, np.full(10, 0.5)),
            lambda: chain_regulariser(np.full(10, -1e300), np.full(10, 0.5), s=1.0),
        ):
            with pytest.raises(StochasticDepthError, match="leaves float64"):
                call()


def test_sd_sizes_are_refused_before_anything_is_allocated() -> None:
    start = time.perf_counter()
    for call in (
        lambda: survival_probabilities("linear", 10**9, p_L=0.5),
        lambda: survival_probabilities("uniform", 10**30, p_L=0.5),
        lambda: mode_for_budget("uniform", 10**9, 10.0),
    ):
        with pytest.raises(StochasticDepthError, match=r"batch_elements=\d+ \(raise it"):
            call()
    assert time.perf_counter() - start < 5


@pytest.mark.parametrize(
    ("call", "needle"),
    [
        (lambda b, p: expected_sd_gd(b, p, lr=0.1, steps=10**12, s=1.0), "limit steps="),
        (lambda b, p: expected_sd_gd(b, p, lr=0.1, steps=10**6, s=1.0), "limit points="),
        (lambda b, p: expected_sd_gd(b, p, lr=True, steps=3, s=1.0), "learning rate"),
        (lambda b, p: simulate_sd_gd(b, p, lr=0.1, steps=2, runs=10**9, s=1.0), "batch_el"),
        (lambda b, p: simulate_sd_gd(b, p, lr=0.1, steps=2, runs=2, seed=-1, s=1.0), "seed"),
        (lambda b, p: expected_sd_flow(b, p, np.array([0.0, np.nan]), s=1.0), "times"),
    ],
    ids=["steps", "records", "lr", "runs", "seed", "times"],
)
def test_sd_dynamics_refuse_work_beyond_the_limits(call, needle: str) -> None:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    with pytest.raises(StochasticDepthError, match=needle):
        call(np.full(3, 0.1), np.full(3, 0.5))
    assert time.perf_counter() - start < 5


def test_sd_networks_and_their_samples_are_bounded() -> None:
    start = time.perf_counter()
    small = SDResNet(2, 4, 1, 3, np.full(3, 0.5))
    x, y = torch.ones(2, 2), torch.ones(2, 1)
    for call in (
        lambda: SDResNet(2, 10**6, 1, 3, np.full(3, 0.5)),
        lambda: SDResNet(2, True, 1, 3, np.full(3, 0.5)),
        lambda: measure_gradient_growth(None, L=3, width=4, samples=10**9),
        lambda: measure_gradient_growth(None, L=3, width=4, samples=5, seed=-1),
        lambda: sd_loss_monte_carlo(small, x, y, masks=10**12),
    ):
        with pytest.raises(StochasticDepthError, match=r"batch_elements|steps|seed|width"):
            call()
    assert time.perf_counter() - start < 5


def test_hoeffding_orders_stay_finite_where_a_factor_is_near_zero() -> None:
    """m_l = 1 + kappa p b_l near 0 makes w_l / m_l^2 huge; the orders still sum to Var f."""
    L = 400
    reg = chain_regulariser(np.full(L, -1.9), np.full(L, 0.5), s=1.0, scaling="plain")
    assert np.all(np.isfinite(reg.variance_orders))
    assert reg.variance_orders.sum() == pytest.approx(reg.penalty_exact, rel=1e-9)
    assert reg.penalty_exact > 0


# ------------------------------------------------------------------ both, in a subprocess
def _limit_memory() -> None:  # pragma: no cover - runs in the child process
    resource.setrlimit(resource.RLIMIT_AS, (2**30, 2**30))


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ["kernel", "--width", "1000000000", "-n", "10"],
        ["kernel", "--depth", "100000", "-n", "10"],
        ["sd", "-L", "1000000000"],
        ["sd", "--b", "1e308"],
    ],
    ids=" ".join,
)
def test_guest_commands_refuse_within_time_and_memory(args: list[str]) -> None:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "gdln", *args],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_limit_memory,
        check=False,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.startswith("gdln: error: ") and done.stderr.count("\n") == 1
    assert time.perf_counter() - start < 30  # the imports of a loaded machine included


def test_training_epochs_are_metered_against_the_work_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``kernel --train-epochs 100000`` ran past 120 s (every count within its limit): the
    epochs are metered, and refused at the pace that would pass the limit ``work``."""
    monkeypatch.setenv("GDLN_MAX_WORK", "2")
    start = time.process_time()
    with pytest.raises(DGNSpecError, match=r"epochs.*work=2 s") as refused:
        kernel_spectrum(n=200, width=64, depth=4, train_epochs=10**6, kind="npk")
    assert time.process_time() - start < 10  # refused at the pace, not after the epochs
    assert "\n" not in str(refused.value) and len(str(refused.value)) <= 300
