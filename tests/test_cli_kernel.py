"""The ``gdln kernel`` command, through the real entry point.

Every run is checked against the kernel built independently from the public pieces
(``make_dataset``, ``make_dgn``, ``train_dgn`` and the kernel functions of
:mod:`gdln.kernels`) and its spectrum by ``numpy.linalg.eigvalsh``.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch
from helpers import run_cli

from gdln.cli import main
from gdln.kernels import (
    DGNSpecError,
    Gate,
    make_dataset,
    make_dgn,
    neural_path_kernel,
    neural_tangent_kernel,
    normalised_nu,
    train_dgn,
)

PNG = b"\x89PNG\r\n\x1a\n"


def _targets(y: torch.Tensor) -> torch.Tensor:
    """+-1 targets: as given, or the digit's parity for class labels."""
    return y.double() if y.dtype != torch.int64 else (y % 2).double() * 2 - 1


def _check_record(record: dict, kernel: np.ndarray, targets: torch.Tensor) -> None:
    """The printed/written record: spectrum and nu of ``kernel``, computed here."""
    eig = np.linalg.eigvalsh(kernel)
    np.testing.assert_allclose(record["eigenvalues"], eig, rtol=1e-9, atol=1e-12)
    assert record["spectrum"]["rho_min"] == pytest.approx(eig[0], rel=1e-9, abs=1e-12)
    assert record["spectrum"]["rho_max"] == pytest.approx(eig[-1], rel=1e-9)
    assert record["spectrum"]["trace"] == pytest.approx(np.trace(kernel), rel=1e-9)
    try:
        nu = normalised_nu(kernel, targets.numpy())
    except DGNSpecError:
        assert record["nu"] is None
    else:
        assert record["nu"] == pytest.approx(nu, rel=1e-6)


def test_help_has_example(capsys):
    code, out, _ = run_cli(["kernel", "--help"], capsys)
    assert code == 0
    assert "Example:" in out and "gdln kernel --kind ntk" in out and "--force" in out


def test_npk_files_match_library(tmp_path, capsys):
    argv = ["kernel", "--kind", "npk", "--dataset", "digits47", "-n", "20", "--width", "8"]
    code, out, err = run_cli([*argv, "--depth", "3", "-o", str(tmp_path)], capsys)
    assert code == 0, err
    info = json.loads((tmp_path / "kernel.json").read_text())
    x, y = make_dataset("digits47", n=20, seed=0)
    h = neural_path_kernel(make_dgn(64, 8, 3, seed=0), x).kernel
    np.testing.assert_allclose(np.load(tmp_path / "kernel.npy"), h, rtol=1e-12)
    _check_record(info, h, _targets(y))
    assert (tmp_path / "ecdf.png").read_bytes().startswith(PNG)
    assert re.search(r"rho_min=\S+ rho_max=", out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ecdf.png", "kernel.json", "kernel.npy"]


def test_ntk_split_in_json(tmp_path, capsys):
    argv = ["kernel", "--kind", "ntk", "--dataset", "uniform2d", "-n", "10", "--width", "6"]
    argv += ["--depth", "3", "--gating", "dnpfl", "--gate", "soft", "--chunk-size", "3"]
    code, _, err = run_cli([*argv, "-o", str(tmp_path), "--no-plot"], capsys)
    assert code == 0, err
    info = json.loads((tmp_path / "kernel.json").read_text())
    x, y = make_dataset("uniform2d", n=10, seed=0)
    k = neural_tangent_kernel(make_dgn(2, 6, 3, mode="dnpfl", gate=Gate("soft"), seed=0), x)
    assert info["split_frobenius"]["feature"] == pytest.approx(np.linalg.norm(k.feature))
    assert info["split_frobenius"]["value"] == pytest.approx(np.linalg.norm(k.value))
    np.testing.assert_allclose(np.load(tmp_path / "kernel.npy"), k.total, rtol=1e-12)
    _check_record(info, k.total, _targets(y))
    assert not (tmp_path / "ecdf.png").exists()


def test_h_equals_ntk_for_relu(tmp_path, capsys):
    argv = ["kernel", "--kind", "h", "--dataset", "uniform2d", "-n", "8", "--width", "3"]
    code, _, err = run_cli([*argv, "--depth", "3", "-o", str(tmp_path), "--no-plot"], capsys)
    assert code == 0, err
    x, _ = make_dataset("uniform2d", n=8, seed=0)
    k = neural_tangent_kernel(make_dgn(2, 3, 3, seed=0), x).total
    np.testing.assert_allclose(np.load(tmp_path / "kernel.npy"), k, rtol=1e-10, atol=1e-13)
    info = json.loads((tmp_path / "kernel.json").read_text())
    assert info["terms"] == {"strong": 2 * 3 * 3 + 3 * 3 + 3, "weak": 2 * 3 * 3 * 2}


def _frg() -> tuple[np.ndarray, torch.Tensor]:
    x, y = make_dataset("identical", n=12, seed=0)
    net = make_dgn(1, 10, 3, mode="frg", gate=Gate("bernoulli"), seed=0, n_examples=12)
    return neural_path_kernel(net, x).kernel, _targets(y)


def _flnpf_trained() -> tuple[np.ndarray, torch.Tensor]:
    x, y = make_dataset("digits47", n=20, seed=0)
    source = make_dgn(64, 8, 3, gate=Gate("relu"), seed=1)
    source = train_dgn(source, x, _targets(y), epochs=2, seed=0).net
    net = make_dgn(64, 8, 3, mode="flnpf", seed=0, source=source, n_examples=20)
    return neural_path_kernel(net, x).kernel, _targets(y)


def _digits_trained() -> tuple[np.ndarray, torch.Tensor]:
    x, y = make_dataset("digits", n=30, seed=0)
    net = train_dgn(make_dgn(64, 8, 2, seed=0), x, _targets(y), epochs=1, seed=0).net
    return neural_path_kernel(net, x).kernel, _targets(y)


@pytest.mark.parametrize(
    ("args", "reference"),
    [
        (["--dataset", "identical", "-n", "12", "--gating", "frg", "--width", "10"], _frg),
        (
            [
                "--dataset",
                "digits47",
                "-n",
                "20",
                "--gating",
                "flnpf",
                "--width",
                "8",
                "--train-epochs",
                "2",
            ],
            _flnpf_trained,
        ),
        (
            [
                "--dataset",
                "digits",
                "-n",
                "30",
                "--width",
                "8",
                "--depth",
                "2",
                "--train-epochs",
                "1",
            ],
            _digits_trained,
        ),
    ],
    ids=["frg", "flnpf-trained", "digits-trained"],
)
def test_frg_and_flnpf_and_training_print_the_spectrum(args, reference, capsys):
    if "--depth" not in args:
        args = [*args, "--depth", "3"]
    code, out, err = run_cli(["kernel", *args, "--format", "json"], capsys)
    assert code == 0, err
    kernel, targets = reference()
    _check_record(json.loads(out), kernel, targets)


def test_refuses_a_used_folder_without_force(tmp_path, capsys):
    argv = ["kernel", "--dataset", "uniform2d", "-n", "6", "--width", "3", "--depth", "2"]
    (tmp_path / "kernel.json").write_text("old")
    code, out, err = run_cli([*argv, "-o", str(tmp_path)], capsys)
    assert code == 2 and out == ""
    assert err == f"gdln: error: {tmp_path} exists; pass --force to replace it\n"
    assert (tmp_path / "kernel.json").read_text() == "old"
    code, _, err = run_cli([*argv, "-o", str(tmp_path), "--force", "--no-plot"], capsys)
    assert code == 0, err
    assert json.loads((tmp_path / "kernel.json").read_text())["n"] == 6


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["--kind", "h", "--gating", "frnpf_ii", "-n", "4"], r"kind h: got mode frnpf_ii"),
        (["--kind", "h", "--width", "64", "--depth", "6", "-n", "4"], r"summands per entry"),
        (["-n", "3"], r"n: got 3, expected an even number"),
        (["--train-epochs", "-1"], r"train_epochs: got -1"),
        (["--gating", "frg", "--gate", "relu"], r"gate: got kind 'relu' for mode 'frg'"),
        (["--gate", "soft", "--beta", "-1"], r"gate beta: got -1.0"),
        (["--width", "0"], r"width: got 0"),
    ],
)
def test_errors_are_gdln_errors(args, match, tmp_path, capsys):
    out = tmp_path / "out"
    code, _, err = run_cli(["kernel", *args, "-o", str(out)], capsys)
    assert code == 2 and len(err.splitlines()) == 1 and re.search(match, err)
    assert not out.exists() and list(tmp_path.iterdir()) == []  # nothing written
    with pytest.raises(DGNSpecError, match=match):
        main(["--debug", "kernel", *args])


def test_deep_npk_reports_its_scale(tmp_path, capsys):
    # depth 300, width 64: the true kernel (~32^299 on the diagonal) is beyond float64
    args = ["kernel", "--kind", "npk", "-n", "8", "--width", "64", "--depth", "300", "--no-plot"]
    code, out, _ = run_cli([*args, "-o", str(tmp_path / "out")], capsys)
    assert code == 0, out
    info = json.loads((tmp_path / "out" / "kernel.json").read_text())
    x, _ = make_dataset("digits47", n=8, seed=0)
    npk = neural_path_kernel(make_dgn(64, 64, 300, seed=0), x)
    assert info["log_scale"] == npk.log_scale > 600
    assert np.all(np.isfinite(info["eigenvalues"]))
    assert f"exp({npk.log_scale:.6g})" in out
