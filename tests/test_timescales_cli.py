"""``gdln timescales``: formats, outputs, and errors as one line with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import GRAPHS, NOT_DIAGONALIZABLE, run_cli, write

LATE = str(GRAPHS / "late_fusion.yaml")


def test_text_and_json(capsys) -> None:
    code, out, _ = run_cli(["timescales", LATE, "--b0", "1e-6", "--no-ode"], capsys)
    assert code == 0
    assert "route contexts, aligned stages, u0 = 1e-06" in out and "xB->hB->y[0]" in out
    assert "0.2*log(1/u0)" in out and "assumptions:" in out
    code, out, _ = run_cli(
        ["timescales", LATE, "--param", "rho=0", "--b0", "1/1000", "--format", "json"], capsys
    )
    payload = json.loads(out)
    a, b = payload["stages"]
    assert payload["analysis"] == "aligned" and payload["u0"] == 0.001
    assert b["time"] / a["time"] == pytest.approx(4)  # 1 + (k^2 - 1)/(1 - rho^2), rho = 0
    assert a["ode_time"] is not None
    assert a["maps"] == {"xA->hA->y": [[pytest.approx(1.0)]]}  # 1 + rho/k


def test_writes_a_file_and_refuses_to_overwrite(tmp_path, capsys) -> None:
    out = tmp_path / "stages.json"
    code, _, err = run_cli(["timescales", LATE, "--no-ode", "-o", str(out)], capsys)
    assert code == 0 and f"wrote {out}" in err
    assert json.loads(out.read_text())["stages"]
    code, _, err = run_cli(["timescales", LATE, "--no-ode", "-o", str(out)], capsys)
    assert code == 2 and err == f"gdln: error: {out} exists; pass --force to replace it\n"


def test_the_asymptotic_route_is_chosen_and_said(tmp_path, capsys) -> None:
    path = write(tmp_path, NOT_DIAGONALIZABLE)
    code, out, _ = run_cli(["timescales", str(path)], capsys)
    assert code == 0 and "asymptotic stages" in out and "no exact reduced ODE" in out


def test_bad_input_is_one_line_naming_the_file(tmp_path, capsys) -> None:
    code, out, err = run_cli(["timescales", LATE, "--b0", "2"], capsys)
    assert code == 2 and out == ""
    assert err == (f"gdln: error: {LATE}: b0 2: the initial scale u0 must be between 0 and 1\n")
    path = write(tmp_path, NOT_DIAGONALIZABLE)
    code, _, err = run_cli(["timescales", str(path), "--route", "contexts"], capsys)
    assert code == 2 and err.startswith(f"gdln: error: {path}: ") and err.count("\n") == 1
    code, _, err = run_cli(["timescales", LATE, "--route", "fast"], capsys)
    assert code == 2 and "'fast' is not one of 'auto', 'quotient', 'contexts'" in err


def test_help_imports_nothing_heavy() -> None:
    probe = (
        "import json, sys\nfrom gdln.cli import main\n"
        "try:\n    main(['timescales', '--help'])\nexcept SystemExit as exc:\n"
        "    assert not exc.code\n"
        "print(json.dumps(sorted(m for m in ('torch', 'sympy', 'scipy') if m in sys.modules)),"
        " file=sys.stderr)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    assert "--b0" in result.stdout
    assert json.loads(result.stderr.strip().splitlines()[-1]) == []
