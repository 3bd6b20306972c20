"""The ``gdln kernel`` command (gdln.cli), run through click's CliRunner."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from gdln.cli._kernel import kernel
from gdln.kernels._dgn import DGNSpecError, Gate, make_dataset, make_dgn
from gdln.kernels._npk import neural_path_kernel
from gdln.kernels._ntk import neural_tangent_kernel


def _run(args):
    return CliRunner().invoke(kernel, args, catch_exceptions=True)


def test_help_has_example():
    res = _run(["--help"])
    assert res.exit_code == 0
    assert "Example:" in res.output and "gdln kernel --kind ntk" in res.output


def test_npk_json_matches_library(tmp_path):
    res = _run(
        [
            "--kind",
            "npk",
            "--dataset",
            "digits47",
            "-n",
            "20",
            "--width",
            "8",
            "--depth",
            "3",
            "-o",
            str(tmp_path),
        ]
    )
    assert res.exit_code == 0, res.output
    info = json.loads((tmp_path / "kernel.json").read_text())
    x, _ = make_dataset("digits47", n=20, seed=0)
    h = neural_path_kernel(make_dgn(64, 8, 3, seed=0), x).kernel
    np.testing.assert_allclose(np.load(tmp_path / "kernel.npy"), h, rtol=1e-12)
    np.testing.assert_allclose(info["eigenvalues"], np.linalg.eigvalsh(h), rtol=1e-9, atol=1e-12)
    assert info["spectrum"]["rho_min"] == pytest.approx(np.linalg.eigvalsh(h)[0], rel=1e-9)
    assert (tmp_path / "ecdf.png").stat().st_size > 0
    assert re.search(r"rho_min=\S+ rho_max=", res.output)


def test_ntk_split_in_json(tmp_path):
    res = _run(
        [
            "--kind",
            "ntk",
            "--dataset",
            "uniform2d",
            "-n",
            "10",
            "--width",
            "6",
            "--depth",
            "3",
            "--mode",
            "dnpfl",
            "--gate",
            "soft",
            "-o",
            str(tmp_path),
            "--no-plot",
            "--chunk-size",
            "3",
        ]
    )
    assert res.exit_code == 0, res.output
    info = json.loads((tmp_path / "kernel.json").read_text())
    x, _ = make_dataset("uniform2d", n=10, seed=0)
    k = neural_tangent_kernel(make_dgn(2, 6, 3, mode="dnpfl", gate=Gate("soft"), seed=0), x)
    assert info["split_frobenius"]["feature"] == pytest.approx(np.linalg.norm(k.feature))
    np.testing.assert_allclose(np.load(tmp_path / "kernel.npy"), k.total, rtol=1e-12)
    assert not (tmp_path / "ecdf.png").exists()


def test_h_equals_ntk_for_relu(tmp_path):
    res = _run(
        [
            "--kind",
            "h",
            "--dataset",
            "uniform2d",
            "-n",
            "8",
            "--width",
            "3",
            "--depth",
            "3",
            "-o",
            str(tmp_path),
            "--no-plot",
        ]
    )
    assert res.exit_code == 0, res.output
    x, _ = make_dataset("uniform2d", n=8, seed=0)
    k = neural_tangent_kernel(make_dgn(2, 3, 3, seed=0), x).total
    np.testing.assert_allclose(np.load(tmp_path / "kernel.npy"), k, rtol=1e-10, atol=1e-13)
    info = json.loads((tmp_path / "kernel.json").read_text())
    assert info["terms"] == {"strong": 2 * 3 * 3 + 3 * 3 + 3, "weak": 2 * 3 * 3 * 2}


def test_frg_and_flnpf_and_training_run():
    res = _run(
        [
            "--kind",
            "npk",
            "--dataset",
            "identical",
            "-n",
            "12",
            "--mode",
            "frg",
            "--width",
            "10",
            "--depth",
            "3",
        ]
    )
    assert res.exit_code == 0, res.output
    res = _run(
        [
            "--dataset",
            "digits47",
            "-n",
            "20",
            "--mode",
            "flnpf",
            "--width",
            "8",
            "--depth",
            "3",
            "--train-epochs",
            "2",
        ]
    )
    assert res.exit_code == 0, res.output
    res = _run(
        ["--dataset", "digits", "-n", "30", "--width", "8", "--depth", "2", "--train-epochs", "1"]
    )
    assert res.exit_code == 0, res.output
    torch.manual_seed(0)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["--kind", "h", "--mode", "frnpf_ii", "-n", "4"], r"--kind h: got --mode frnpf_ii"),
        (["--kind", "h", "--width", "64", "--depth", "6", "-n", "4"], r"summands per entry"),
        (["-n", "3"], r"n: got 3, expected an even number"),
        (["--train-epochs", "-1"], r"--train-epochs: got -1"),
        (["--mode", "frg", "--gate", "relu"], r"gate: got kind 'relu' for mode 'frg'"),
        (["--gate", "soft", "--beta", "-1"], r"gate beta: got -1.0"),
        (["--width", "0"], r"width: got 0"),
    ],
)
def test_errors_are_gdln_errors(args, match):
    res = _run(args)
    assert isinstance(res.exception, DGNSpecError), res.output
    assert re.search(match, str(res.exception))


def test_deep_npk_reports_its_scale(tmp_path):
    # depth 300, width 64: the true kernel (~32^299 on the diagonal) is beyond float64
    args = ["--kind", "npk", "-n", "8", "--width", "64", "--depth", "300", "--no-plot"]
    res = _run([*args, "-o", str(tmp_path)])
    assert res.exit_code == 0, res.output
    info = json.loads((tmp_path / "kernel.json").read_text())
    x, _ = make_dataset("digits47", n=8, seed=0)
    npk = neural_path_kernel(make_dgn(64, 64, 300, seed=0), x)
    assert info["log_scale"] == npk.log_scale > 600
    assert np.all(np.isfinite(info["eigenvalues"]))
    assert f"exp({npk.log_scale:.6g})" in res.output
