"""Costs inside every count limit (issue 34): files that pass every count but imply hours
of work, gigabytes, or numbers that overflow half way.

Each payload goes through the Python API and the command line: it must end in one
``GdlnError`` (one ``gdln: error:`` line, exit 2) naming the file and the limit to raise
(``Limits.work``, ``Limits.memory``), within seconds, or, for the overflows, in one line
that names the overflow. The slow test repeats the command lines in subprocesses capped at
1 GiB of address space and 10 s.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import GRAPHS, ROOT, run_cli

import gdln
from gdln._bounded._limits import use_limits
from gdln.graphfile import Limits

SECONDS = 10.0
MESSAGE = 300


def _fan(tmp_path: Path, n: int) -> Path:
    """A 14-line fan: ``n`` hidden nodes of width 2 between one input and one output."""
    path = tmp_path / f"fan{n}.yaml"
    path.write_text(
        f"params: {{N: {n}}}\n"
        "nodes:\n  - {id: x, size: 2}\n  - {id: 'h{i}', size: 2, repeat: {i: N}}\n"
        "  - {id: y, size: 2}\n"
        "edges:\n  - {source: x, target: 'h{i}', repeat: {i: N}}\n"
        "  - {source: 'h{i}', target: y, repeat: {i: N}}\n"
        "task:\n  examples:\n    - {inputs: {x: [1, 0]}, targets: {y: [1, 0]}}\n"
        "    - {inputs: {x: [0, 1]}, targets: {y: [0, 2]}}\n"
        "solve: {b0: 0.1, t_max: 10}\n"
    )
    return path


SMALL = (
    "nodes: [{id: x, size: 4}, {id: h, size: HIDDEN}, {id: y, size: 4}]\n"
    "edges: [{source: x, target: h}, {source: h, target: y}]\n"
    "task:\n  examples:\n"
    "    - {inputs: {x: [1, 0, 0, 0]}, targets: {y: [1, 0, 0, 0]}}\n"
    "    - {inputs: {x: [0, 1, 0, 0]}, targets: {y: [0, 2, 0, 0]}}\n"
    "    - {inputs: {x: [0, 0, 1, 0]}, targets: {y: [0, 0, 3, 0]}}\n"
    "    - {inputs: {x: [0, 0, 0, 1]}, targets: {y: [0, 0, 0, 4]}}\n"
    "solve: {t_max: 10}\n"
)


def _small(tmp_path: Path, hidden: int = 8) -> Path:
    path = tmp_path / f"small{hidden}.yaml"
    path.write_text(SMALL.replace("HIDDEN", str(hidden)))
    return path


def _irrational_examples(tmp_path: Path) -> Path:
    """60 examples of 2 x 80 irrational values: 1.5 million sympy multiply-adds."""
    rng = np.random.default_rng(0)
    rows = []
    for _ in range(60):
        xs = ", ".join(f"'{k}*sqrt(2)'" for k in rng.integers(0, 9, 80))
        ys = ", ".join(f"'{k}*sqrt(3)'" for k in rng.integers(0, 9, 80))
        rows.append(f"    - {{inputs: {{x: [{xs}]}}, targets: {{y: [{ys}]}}}}")
    path = tmp_path / "irrational.yaml"
    path.write_text(
        "nodes: [{id: x, size: 80}, {id: h, size: 8}, {id: y, size: 80}]\n"
        "edges: [{source: x, target: h}, {source: h, target: y}]\n"
        "task:\n  examples:\n" + "\n".join(rows) + "\n"
    )
    return path


def _fixed(tmp_path: Path) -> Path:
    path = tmp_path / "fixed.yaml"
    path.write_text(
        "nodes: [{id: x, size: 2}, {id: h, size: 2}, {id: y, size: 2}]\n"
        "edges: [{source: x, target: h, fixed: 1e200}, {source: h, target: y}]\n"
        "task:\n  examples:\n    - {inputs: {x: [1, 0]}, targets: {y: [1, 0]}}\n"
        "    - {inputs: {x: [0, 1]}, targets: {y: [0, 2]}}\n"
    )
    return path


def _one_line(code: int, out: str, err: str, *matches: str) -> None:
    assert code == 2, (code, err[-2000:])
    assert err.startswith("gdln: error: ") and err.count("\n") == 1, err[-2000:]
    assert len(err.strip()) <= MESSAGE, err
    for match in matches:
        assert match in err, err


def _timed(seconds: float = SECONDS) -> float:
    return time.perf_counter() + seconds


# ------------------------------------------------------------------ the work estimates


@pytest.mark.slow  # 4-9 s: 9600 irrational values read
def test_exact_moments_of_irrational_examples_are_estimated_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _irrational_examples(tmp_path)
    with pytest.raises(gdln.GraphSpecError, match=r"1536000 multiply-adds.*limit work=5 s"):
        gdln.load(path, limits=Limits(work=5))
    monkeypatch.setenv("GDLN_MAX_WORK", "5")
    deadline = _timed()
    _one_line(*run_cli(["stats", str(path)], capsys), "irrational.yaml", "GDLN_MAX_WORK")
    assert time.perf_counter() < deadline


def test_rational_moments_are_integer_arithmetic() -> None:
    """300 examples of 300 small integers: the moments take about a second, not minutes."""
    import sympy as sp

    from gdln.task import Dataset

    rng = np.random.default_rng(1)
    x = sp.ImmutableMatrix(rng.integers(0, 10, (300, 150)).tolist())
    y = sp.ImmutableMatrix(rng.integers(0, 10, (300, 150)).tolist())
    weights = sp.ImmutableMatrix([1] * 300)  # as task examples have them
    data = Dataset(
        name="d", fields={"x": 150, "y": 150}, examples={"x": x, "y": y}, weights=weights
    )
    start = time.process_time()
    moment = data.moment("y", "x")
    assert time.process_time() - start < 5.0
    assert moment[3, 7] == sp.Rational(sum(y[k, 3] * x[k, 7] for k in range(300)), 300)


def test_reduced_equations_without_lumping_are_estimated_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    problem = gdln.load(_fan(tmp_path, 60))
    deadline = _timed()
    with use_limits(Limits(work=1)), pytest.raises(gdln.GdlnError, match=r"terms .*limit work=1 s"):
        gdln.reduce(problem, lump="none")
    assert time.perf_counter() < deadline
    monkeypatch.setenv("GDLN_MAX_WORK", "1")
    code, _out, err = run_cli(["stats", str(tmp_path / "fan60.yaml")], capsys)
    _one_line(code, "", err, "fan60.yaml", "reduced equations", "GDLN_MAX_WORK")
    _one_line(*run_cli(["derive", "--lump", "none", str(tmp_path / "fan60.yaml")], capsys))


def test_compiling_large_equations_is_estimated_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _fan(tmp_path, 40)
    monkeypatch.setenv("GDLN_MAX_WORK", "5")
    with pytest.raises(gdln.GdlnError, match="compiling 80 reduced equations"):
        gdln.solve(gdln.load(path), lump="none")
    _one_line(*run_cli(["solve", "--lump", "none", str(path)], capsys), "compiling")


@pytest.mark.slow  # 4-9 s: the paths are counted twice, by the API and the CLI
def test_a_fan_of_2000_pathways_is_refused_before_its_tape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """331 CPU s and 2.7 GB before; the tape's square terms are counted first."""
    path = _fan(tmp_path, 2000)
    deadline = _timed()
    with pytest.raises(gdln.GdlnError, match=r"moment tape .* 4002000 terms.*limit work=60"):
        gdln.solve(gdln.load(path))
    _one_line(*run_cli(["solve", str(path)], capsys), "fan2000.yaml", "GDLN_MAX_WORK")
    assert time.perf_counter() < deadline + SECONDS


def test_a_stiff_full_matrix_flow_is_metered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--route matrix --b0 1000``: refused once its pace would pass the limit."""
    path = _small(tmp_path)
    monkeypatch.setenv("GDLN_MAX_WORK", "20")  # refused after about a second
    deadline = _timed()
    with pytest.raises(gdln.GdlnError, match=r"full-matrix flow reached t = .* GDLN_MAX_WORK"):
        gdln.solve(gdln.load(path), route="matrix", b0=1000)
    _one_line(*run_cli(["solve", str(path), "--route", "matrix", "--b0", "1000"], capsys))
    assert time.perf_counter() < deadline


def test_weights_of_1000_and_a_huge_lambda_are_estimated_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _small(tmp_path)
    weights = tmp_path / "w.npz"
    np.savez(weights, **{"W/x->h": np.full((8, 4), 1e3), "W/h->y": np.full((4, 8), 1e3)})
    deadline = _timed()
    code, out, err = run_cli(["solve", str(path), "--weights", str(weights)], capsys)
    _one_line(code, out, err, "closed form in", "GDLN_MAX_WORK")
    xor = str(GRAPHS / "xor.yaml")
    code, out, err = run_cli(["solve", xor, "--param", "hidden=1", "--balanced", "1e308"], capsys)
    _one_line(code, out, err, "closed form in", "GDLN_MAX_WORK")
    problem = gdln.load(xor, params={"hidden": "1"})
    start = gdln.balanced_weights(problem, lam=1e200, scale=0.1, seed=0)
    with pytest.raises(gdln.GdlnError, match="closed form in"):
        gdln.solve_balanced(problem, start, t_max=10.0)
    assert time.perf_counter() < deadline


# ------------------------------------------------------------------ memory


def test_a_hidden_node_of_a_million_units_is_refused_before_allocating(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _small(tmp_path, 10**6)
    with pytest.raises(gdln.GdlnError, match=r"8000000 weights recorded 201 times.*memory="):
        gdln.solve(gdln.load(path), route="matrix")
    _one_line(*run_cli(["solve", str(path), "--route", "matrix"], capsys), "GDLN_MAX_MEMORY")


def test_a_simulation_checks_its_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inside ``batch_elements`` a run held 2.4 GB; its bytes are now counted first."""
    path = _small(tmp_path)
    monkeypatch.setenv("GDLN_MAX_MEMORY", "20000")
    with pytest.raises(gdln.GdlnError, match=r"gradients and optimiser state.*memory=20000"):
        gdln.simulate(gdln.load(path), t_max=1, lr=0.05)
    out = tmp_path / "run.npz"
    code, stdout, err = run_cli(["simulate", str(path), "--t-max", "1", "-o", str(out)], capsys)
    _one_line(code, stdout, err, "GDLN_MAX_MEMORY")
    assert not out.exists()


# ------------------------------------------------------------------ overflow half way


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["solve"], "the ODE overflowed"),
        (["solve", "--dynamics", "gd-map"], "gradient-descent map diverged"),
        (["solve", "--route", "matrix"], "full-matrix flow overflowed"),
    ],
)
def test_a_fixed_edge_whose_square_is_no_float(
    args: list[str], match: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _fixed(tmp_path)
    code, out, err = run_cli([*args, str(path)], capsys)
    _one_line(code, out, err, "fixed.yaml", match)


def test_a_fixed_edge_of_1e200_in_python(tmp_path: Path) -> None:
    problem = gdln.load(_fixed(tmp_path))
    reduction = gdln.reduce(problem)  # exact: lumping splits exactly where floats overflow
    assert reduction.systems
    with pytest.raises(gdln.GdlnError, match="the ODE overflowed"):
        gdln.solve(reduction)
    with pytest.raises(gdln.GdlnError, match="full-matrix flow overflowed"):
        gdln.solve(problem, route="matrix")


# ------------------------------------------------------------------ subprocesses


def _limit_memory() -> None:  # pragma: no cover - runs in the child process
    resource.setrlimit(resource.RLIMIT_AS, (2**30, 2**30))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "args"),
    [
        ("fan", ["solve", "{fan}"]),
        ("wide", ["solve", "{wide}", "--route", "matrix"]),
        (
            "balanced",
            ["solve", str(GRAPHS / "xor.yaml"), "--param", "hidden=1", "--balanced", "1e308"],
        ),
        ("fixed", ["solve", "{fixed}"]),
    ],
)
def test_cli_subprocess_within_time_and_memory(kind: str, args: list[str], tmp_path: Path) -> None:
    """Each payload in a fresh ``gdln`` under 1 GiB of address space and 10 s."""
    paths = {
        "fan": _fan(tmp_path, 2000),
        "wide": _small(tmp_path, 10**6),
        "fixed": _fixed(tmp_path),
    }
    argv = [a.format(**{k: str(v) for k, v in paths.items()}) for a in args]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-m", "gdln", *argv],
        capture_output=True,
        text=True,
        timeout=SECONDS,
        preexec_fn=_limit_memory,
        env=env,
        check=False,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stdout == "" and done.stderr.count("\n") == 1, done.stderr[-2000:]
    assert len(done.stderr.strip()) <= MESSAGE
