"""The ``gdln sd`` command and :func:`gdln.sd.chain_summary`, against brute force.

The reference enumerates all $2^L$ masks of a small chain
$f=\\prod_l(1+\\kappa\\tilde\\delta_lb_l)$ with loss $-sf+\\frac12df^2$, written here from
the definition (Hayou & Ayed; one mode of Eq. 10 of Saxe et al. 2022).
"""

from __future__ import annotations

import itertools
import json
import math
import re

import numpy as np
import pytest
from helpers import run_cli

import gdln
from gdln.cli import main


def brute_force(
    b: np.ndarray, p: np.ndarray, *, s: float, d: float, kappa: float, inverted: bool
) -> dict[str, object]:
    """E f, E f^2, E loss and its gradient in b, by summing over every mask."""
    L = len(b)
    mean = second = loss = 0.0
    grad = np.zeros(L)
    for mask in itertools.product((0, 1), repeat=L):
        delta = np.array(mask, dtype=float)
        weight = float(np.prod(np.where(delta == 1, p, 1 - p)))
        gate = delta / p if inverted else delta
        factors = 1 + kappa * gate * b
        f = float(np.prod(factors))
        mean += weight * f
        second += weight * f * f
        loss += weight * (-s * f + 0.5 * d * f * f)
        for k in range(L):
            df = kappa * gate[k] * float(np.prod(np.delete(factors, k)))
            grad[k] += weight * (-s + d * f) * df
    return {"mean": mean, "second": second, "loss": loss, "grad": grad}


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    return run_cli(["sd", *args], capsys)


@pytest.mark.parametrize("mask", ["unscaled", "inverted"])
def test_json_equals_brute_force_at_small_depth(mask, capsys) -> None:
    p = np.array([0.9, 0.7, 0.5, 0.3])
    b = np.array([0.1, -0.2, 0.3, 0.4])
    args = [
        "-L",
        "4",
        "--survival",
        "per_layer",
        "--p",
        "0.9,0.7,0.5,0.3",
        "--b",
        "0.1,-0.2,0.3,0.4",
    ]
    args += ["--s", "1.5", "--d", "0.8", "--scaling", "stable", "--mask", mask]
    code, out, err = run([*args, "--format", "json"], capsys)
    assert code == 0, err
    got = json.loads(out)
    ref = brute_force(b, p, s=1.5, d=0.8, kappa=1 / 2, inverted=mask == "inverted")
    assert got["p"] == pytest.approx(p.tolist()) and got["b"] == pytest.approx(b.tolist())
    for key in ("mean", "second", "loss"):
        assert got[key] == pytest.approx(ref[key], rel=1e-12)
    np.testing.assert_allclose(got["grad"], ref["grad"], rtol=1e-10, atol=1e-14)
    # E loss = loss of the average network + d/2 Var f (the exact regulariser)
    variance = ref["second"] - ref["mean"] ** 2
    assert got["regulariser"]["exact"] == pytest.approx(0.4 * variance, rel=1e-10)
    assert got["average_loss"] == pytest.approx(ref["loss"] - 0.4 * variance, rel=1e-10)
    # Lemma 1: mean and variance of the depth; Prop. 1: growth prod (1 + kappa^2 p_k)
    assert got["depth"]["mean"] == pytest.approx(p.sum())
    assert got["depth"]["variance"] == pytest.approx(float(np.sum(p * (1 - p))))
    assert got["gradient_growth"][0] == pytest.approx(float(np.prod(1 + p / 4)))
    assert got["mode"] == "per_layer" and got["mask"] == mask and got["L"] == 4


def test_text_prints_the_numbers_of_the_library(capsys) -> None:
    args = ["-L", "3", "--survival", "uniform", "--p", "0.5", "--b", "0.2", "--scaling", "plain"]
    code, out, err = run([*args, "--expression"], capsys)
    assert code == 0, err
    ref = gdln.sd.expected_chain(np.full(3, 0.2), np.full(3, 0.5), s=1.0, scaling="plain")
    brute = brute_force(np.full(3, 0.2), np.full(3, 0.5), s=1.0, d=1.0, kappa=1.0, inverted=False)
    assert ref.loss == pytest.approx(brute["loss"], rel=1e-12)
    assert f"E[loss] = {ref.loss:.10g}" in out
    assert f"E[f] = {ref.mean[0]:.10g}   E[f^2] = {ref.second[0]:.10g}" in out
    symbolic = re.search(r"^E\[loss\] = (d\*.*)$", out, re.M)
    assert symbolic is not None  # the sympy expression, equal to the number at b, p
    expression = gdln.sd.expected_chain_symbolic(3).loss
    values = {sym: 0.2 for sym in expression.free_symbols if sym.name.startswith("b")}
    values |= {sym: 0.5 for sym in expression.free_symbols if sym.name.startswith("p")}
    values |= {sym: 1.0 for sym in expression.free_symbols if sym.name in ("s", "d")}
    assert symbolic.group(1) == str(expression)
    assert float(expression.subs(values)) == pytest.approx(ref.loss, rel=1e-12)


def test_one_p_is_p_L_and_budget_sets_the_average_depth(capsys) -> None:
    code, out, _ = run(
        ["-L", "4", "--survival", "linear", "--p", "0.2", "--format", "json"], capsys
    )
    # linear mode: p_l = 1 - (l/L)(1 - p_L)
    assert code == 0 and json.loads(out)["p"] == pytest.approx([0.8, 0.6, 0.4, 0.2])
    code, out, _ = run(
        ["-L", "9", "--survival", "linear", "--budget", "7", "--format", "json"], capsys
    )
    p = np.array(json.loads(out)["p"])
    assert code == 0 and p.sum() == pytest.approx(7.0) and np.allclose(np.diff(p), p[1] - p[0])
    code, out, _ = run(["-L", "5", "--format", "json"], capsys)  # default: linear, p_L = 0.5
    assert code == 0 and json.loads(out)["p"] == pytest.approx([0.9, 0.8, 0.7, 0.6, 0.5])


def test_output_file_by_extension_and_force(tmp_path, capsys) -> None:
    out = tmp_path / "sd.json"
    args = ["-L", "3", "--survival", "uniform", "--p", "0.5"]
    code, printed, _ = run([*args, "--format", "json"], capsys)
    assert run([*args, "-o", str(out)], capsys)[0] == 0
    assert json.loads(out.read_text()) == json.loads(printed)
    code, _, err = run([*args, "-o", str(out)], capsys)
    assert code == 2 and err == f"gdln: error: {out} exists; pass --force to replace it\n"
    code, _, err = run([*args, "--format", "text", "-o", str(out), "--force"], capsys)
    assert code == 2 and "--format text conflicts with -o" in err
    text = tmp_path / "sd.txt"
    assert run([*args, "-o", str(text)], capsys)[0] == 0
    assert run(args, capsys)[1] == text.read_text()


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["--p", "1.5"], r"p_L = 1\.5 is outside \[0, 1\]"),
        (["--b", "x,y"], r"--b 'x,y': expected a comma-separated list of numbers"),
        (["-L", "8", "--expression"], r"the symbolic expected loss needs L <= 6, got L = 8"),
        (["--p", "0.5", "--budget", "3"], r"--p and --budget both set the survival probabilities"),
        (["--p", "0.5,0.4"], r"--p: survival mode linear takes one number, p_L; got 2 numbers"),
        (
            ["--survival", "sensemode", "--sensitivities", "1,2,3", "-L", "3", "--p", "0.5"],
            r"--p: survival mode sensemode sets p from --sensitivities",
        ),
        (
            ["-L", "3", "--survival", "per_layer", "--p", "0.5,0.5"],
            r"p has shape \(2,\); expected \(3,\), one survival probability per block",
        ),
        (["-L", "3", "--survival", "per_layer"], r"survival mode 'per_layer' needs p"),
        (["-L", "3", "--b", "0.1,0.2"], r"b has 2 values; expected one, or one per block \(3\)"),
    ],
)
def test_bad_input_is_one_line_and_a_gdln_error(args, match, capsys) -> None:
    code, out, err = run(args, capsys)
    assert code == 2 and out == "" and len(err.splitlines()) == 1
    assert err.startswith("gdln: error: ") and re.search(match, err)
    with pytest.raises(gdln.GdlnError, match=match):
        main(["--debug", "sd", *args])


def test_help_has_an_example(capsys) -> None:
    code, out, _ = run(["--help"], capsys)
    assert code == 0 and "Example:" in out and "gdln sd -L 20" in out and "--force" in out


def test_chain_summary_broadcasts_one_b_and_matches_expected_chain() -> None:
    p = gdln.sd.survival_probabilities("linear", 5, p_L=0.5)
    summary = gdln.sd.chain_summary(0.3, p, s=2.0, d=0.5, scaling="stable")
    ref = gdln.sd.expected_chain(np.full(5, 0.3), p, s=2.0, d=0.5, scaling="stable")
    brute = brute_force(np.full(5, 0.3), p, s=2.0, d=0.5, kappa=1 / math.sqrt(5), inverted=False)
    assert summary.b.tolist() == [0.3] * 5 and summary.symbolic_loss is None
    assert summary.expectation.loss == ref.loss == pytest.approx(brute["loss"], rel=1e-12)
    np.testing.assert_allclose(summary.expectation.grad.reshape(-1), brute["grad"], rtol=1e-10)
