"""The paper-reproduction examples (issue 4): xor, context, routing in --quick mode.

Each test runs ``examples/core/NAME.py``'s ``main(["--quick", "-o", tmp])`` and asserts the
qualitative claim of Saxe, Sodhani & Lewallen (2022) that the example reproduces, with
reference values computed here from the paper's closed forms, never copied from a run.
Tolerances that compare an approximation (ReLU network, random initialisation) with the
theory are stated next to the assertion with the measured value they bound.
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent


def _example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        f"example_{name}", ROOT / "examples" / "core" / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _run(name: str, out: Path) -> tuple[ModuleType, dict]:
    module = _example(name)
    results = module.main(["--quick", "-o", str(out)])
    on_disk = json.loads((out / "results.json").read_text())
    assert on_disk.keys() == results.keys()
    for path in results["files"]:
        assert Path(path).stat().st_size > 0
    suffixes = {Path(p).suffix for p in results["files"]}
    assert suffixes == {".png", ".svg"}
    return module, results


@pytest.fixture(scope="module")
def xor(tmp_path_factory: pytest.TempPathFactory) -> tuple[ModuleType, dict]:
    return _run("xor", tmp_path_factory.mktemp("xor"))


@pytest.fixture(scope="module")
def context(tmp_path_factory: pytest.TempPathFactory) -> tuple[ModuleType, dict]:
    return _run("context", tmp_path_factory.mktemp("context"))


@pytest.fixture(scope="module")
def routing(tmp_path_factory: pytest.TempPathFactory) -> tuple[ModuleType, dict]:
    return _run("routing", tmp_path_factory.mktemp("routing"))


# ------------------------------------------------------------------------------------ XoR


def test_xor_eq23_closed_form(xor: tuple[ModuleType, dict]) -> None:
    """Eq. (23): L = 1/2 at a = 0 and L -> 0 as a -> s/d = 1/sqrt(2) (XoR solved)."""
    module, res = xor
    loss = module.eq23(np.array([0.0, 1e4]), 1e-9)
    assert loss[0] == pytest.approx(0.5, abs=1e-8)
    assert loss[1] == pytest.approx(0.0, abs=1e-12)
    assert module.eq21(np.array([1e4]), 1e-9)[0] == pytest.approx(1 / math.sqrt(2))
    # gdln's reduction of graphs/xor.yaml (not typed in) gives the same curve
    assert res["eq23_vs_gdln_ode_max_abs"] < 1e-6


def test_xor_relu_solves_task_and_tracks_eq23(xor: tuple[ModuleType, dict]) -> None:
    """Fig. 3c: ReLU networks from small weights solve XoR along the Eq. (23) curve."""
    _, res = xor
    assert res["relu_initial_loss_mean"] == pytest.approx(0.5, abs=1e-3)  # <y^2>/2
    assert res["relu_final_loss_max"] < 1e-3 * res["relu_initial_loss_mean"]
    # Tolerance: the time to half loss of each ReLU run is within 20% of Eq. (23)'s
    # (measured 12.5-16.2% later, full run), and within 15% of the exact GD map at
    # the same lr (measured 5.8-9.3%).
    t_theory, t_map = res["time_to_half_eq23"], res["time_to_half_gd_map"]
    for t_relu in res["time_to_half_relu"]:
        assert abs(t_relu - t_theory) / t_theory < 0.20
        assert abs(t_relu - t_map) / t_map < 0.15


# -------------------------------------------------------------------------------- context


def test_context_linear_network_reaches_least_squares(context: tuple[ModuleType, dict]) -> None:
    """App. A.2, Eqs. (24)-(25): the linear network reaches W = [1/2 1/2], loss 1/12."""
    _, res = context
    sigma_yx, sigma_x = np.array([1 / 6, 1 / 6]), np.eye(2) / 3
    w_ls = sigma_yx @ np.linalg.inv(sigma_x)
    loss_ls = 0.5 * (1 / 3) - 0.5 * w_ls @ sigma_x @ w_ls  # = 1/12
    lin = res["linear"]
    for w in lin["sim_final_w_tot_mean"]:
        np.testing.assert_allclose(w, w_ls, atol=1e-3)
    assert lin["sim_final_loss_mean"] == pytest.approx(loss_ls, rel=1e-3)
    assert lin["theory_final_loss"] == pytest.approx(loss_ls, rel=1e-6)


def test_context_gated_network_solves_task(context: tuple[ModuleType, dict]) -> None:
    """App. A.2, Eqs. (26)-(29): pathway c reaches W(c) = e_c and the loss goes to 0."""
    _, res = context
    gated = res["gated"]
    np.testing.assert_allclose(gated["sim_final_w_tot_mean"], np.eye(2), atol=1e-3)
    assert gated["sim_final_loss_max"] < 1e-6
    assert gated["theory_final_loss"] < 1e-6
    assert gated["sim_final_loss_max"] < 1e-3 * res["linear"]["sim_final_loss_mean"]


# -------------------------------------------------------------------------------- routing


def test_routing_loss_theory_vs_simulation(routing: tuple[ModuleType, dict]) -> None:
    """Fig. 4e: decoupled init is the reduced map exactly; random init follows it."""
    _, res = routing
    assert res["decoupled_vs_gd_map_max_rel"] < 1e-10
    for key in ("loss_final_theory", "loss_final_decoupled", "loss_final_random_max"):
        assert res[key] < 1e-2 * res["loss_initial_theory"]
    # Tolerance: stage timing of random init within 20% of the reduced GD map at the
    # same lr (measured 0-10%).
    for t_half in res["time_to_half_random"]:
        assert abs(t_half - res["time_to_half_gd_map"]) / res["time_to_half_gd_map"] < 0.2


def test_routing_ratio_approaches_sqrt_m(routing: tuple[ModuleType, dict]) -> None:
    """App. C, Eq. (51): B2/B1 goes from 1 (equal init) to sqrt(M)."""
    _, res = routing
    sqrt_m = math.sqrt(res["settings"]["M"])
    np.testing.assert_allclose(res["ratio_B2_B1_initial_decoupled"], 1.0, atol=1e-9)
    np.testing.assert_allclose(res["ratio_B2_B1_final_theory"], sqrt_m, rtol=0.02)
    np.testing.assert_allclose(res["ratio_B2_B1_final_decoupled"], sqrt_m, rtol=0.02)
    final_random = np.array(res["ratio_B2_B1_final_random_mean"])
    initial_random = np.array(res["ratio_B2_B1_initial_random_mean"])
    # from random init the ratio rises towards sqrt(M); the strongest modes get within 5%
    assert np.all(np.abs(final_random - sqrt_m) < np.abs(initial_random - sqrt_m))
    np.testing.assert_allclose(final_random[:2], sqrt_m, rtol=0.05)


def test_routing_conserved_quantity(routing: tuple[ModuleType, dict]) -> None:
    """M B1^2 - B2^2 is conserved by the flow (App. C); GD breaks it only slightly."""
    _, res = routing
    assert res["conserved_theory_drift"] < 1e-6
    c_lo, c_hi = res["conserved_decoupled"]
    c0 = (
        res["settings"]["M"] * res["settings"]["theory_init_b"] ** 2
        - res["settings"]["theory_init_b"] ** 2
    )
    assert c_hi == pytest.approx(c0, rel=1e-9)
    # compared with B2^2 (~20 for the top mode), the change is small
    assert (c_hi - c_lo) < 1e-2 * res["B2_final_random_mode0_squared"]
    assert res["conserved_matrix_drift_random_max"] < 0.05


def test_routing_shared_representation_and_zero_shot(routing: tuple[ModuleType, dict]) -> None:
    """Fig. 4g-h: one shared representation across domains; untrained routes generalise."""
    _, res = routing
    m, k = res["settings"]["M"], res["settings"]["K"]
    assert res["n_untrained_routes"] == m * (m - k)
    assert res["n_trained_routes"] == m * k
    assert res["untrained_loss_final_max"] < 1e-2 * res["untrained_loss_initial_mean"]
    assert res["untrained_loss_final_decoupled"] < 1e-3 * res["untrained_loss_initial_mean"]
    # same item from different input domains: unrelated at init, aligned after training
    assert abs(res["rsm_cosine_same_item_other_domain_initial_mean"]) < 0.3
    assert res["rsm_cosine_same_item_other_domain_mean"] > 0.8
    assert res["rsm_cosine_same_item_other_domain_mean"] > res["rsm_cosine_other_item_mean"]
