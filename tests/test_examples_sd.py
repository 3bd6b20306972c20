"""Each stochastic-depth example runs with --quick and writes what it promises."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_linear_dynamics_quick(tmp_path):
    r = _load("sd_linear_dynamics").main(["--quick", "-o", str(tmp_path)])
    assert (tmp_path / "sd_linear_dynamics.png").exists()
    saved = json.loads((tmp_path / "sd_linear_dynamics.json").read_text())
    # without SD the learned transfer of each mode is s / d = s (closed form of Eq. 10)
    np.testing.assert_allclose(saved["equilibrium_nosd_transfer"], r["s"], rtol=1e-6)
    # the mode with s = 1 needs no residual at all: SD leaves it at the identity
    assert saved["equilibrium_sd_mean_transfer"][2] == pytest.approx(1.0, abs=1e-6)
    # the GD map is an O(lr) Euler discretisation of the flow
    assert saved["max_abs_dev_gd_vs_flow"] < 0.05


@pytest.mark.slow
def test_gradient_growth_quick(tmp_path):
    from gdln._sd_theory import gradient_growth

    r = _load("sd_gradient_growth").main(["--quick", "-o", str(tmp_path)])
    for key in ("standard/plain", "uniform/stable", "linear/plain"):
        np.testing.assert_allclose(
            r[key]["theory"], gradient_growth(r[key]["p"], scaling=key.split("/")[1])
        )
    assert (tmp_path / "sd_gradient_growth.md").read_text().startswith("| l |")


@pytest.mark.slow
def test_regulariser_quick(tmp_path):
    r = _load("sd_regulariser").main(["--quick", "-o", str(tmp_path)])
    for row in r["linear"]:  # exact identity E L = L_bar + 1/2 d Var f, Hoeffding order 1 <= all
        assert row["penalty_first_order"] <= row["penalty_exact"] + 1e-12
    assert all(row["penalty"] >= 0 for row in r["relu"])


@pytest.mark.slow
def test_gaussian_noise_quick(tmp_path):
    r = _load("sd_gaussian_noise").main(["--quick", "-o", str(tmp_path)])
    for s in r["by_depth"].values():
        assert 0.0 <= s["q1"] <= s["median"] <= s["q3"] <= 1.0


@pytest.mark.slow
def test_budget_quick(tmp_path):
    r = _load("sd_budget").main(["--quick", "-o", str(tmp_path)])
    assert r["toy"]["0.25"]["linear"] is None  # linear mode needs budget >= (L - 1)/2
    assert len(r["digits"]["0.75"]["uniform"]) == 1


@pytest.mark.slow
def test_max_regularisation_quick(tmp_path):
    r = _load("sd_max_regularisation").main(["--quick", "-o", str(tmp_path)])
    assert sum(r["p_star_init"]) == pytest.approx(0.7 * 6, abs=1e-8)  # budget met
