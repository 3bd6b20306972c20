"""``gdln solve FILE --weights W.npz`` and ``--balanced LAM`` (issue 28, parts 1 and 3).

Reference: the full-matrix gradient flow (with weight decay where set) integrated here,
scipy DOP853 on torch-autograd gradients of Eq. (1) (:func:`helpers.full_loss_and_gradient`),
independent of gdln's solvers.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from helpers import full_loss_and_gradient, load, run_cli
from scipy.integrate import solve_ivp

import gdln

GRAPH = str(Path(__file__).resolve().parents[1] / "graphs" / "xor.yaml")
TIMES = np.linspace(0.0, 6.0, 4)


def reference_losses(problem: gdln.Problem, weights: dict, gamma: float = 0.0) -> np.ndarray:
    """Eq. (1) along the full-matrix flow -dL/dW - gamma W from ``weights``."""
    edges = list(weights)
    shapes = [weights[e].shape for e in edges]
    splits = np.cumsum([weights[e].size for e in edges])[:-1]

    def unpack(y: np.ndarray) -> dict:
        return {e: p.reshape(s) for e, p, s in zip(edges, np.split(y, splits), shapes, strict=True)}

    def rhs(_t: float, y: np.ndarray) -> np.ndarray:
        w = unpack(y)
        _, grad = full_loss_and_gradient(problem, w)
        return np.concatenate([(-grad[e] - gamma * w[e]).ravel() for e in edges])

    y0 = np.concatenate([weights[e].ravel() for e in edges])
    result = solve_ivp(rhs, (0, TIMES[-1]), y0, "DOP853", t_eval=TIMES, rtol=1e-12, atol=1e-14)
    return np.array([full_loss_and_gradient(problem, unpack(y))[0] for y in result.y.T])


def save(path: Path, weights: dict) -> Path:
    np.savez(path, **{f"W/{u}->{v}": w for (u, v), w in weights.items()})
    return path


def solve_cli(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    rc, out, err = run_cli(
        [
            "solve",
            GRAPH,
            "--param",
            "hidden=1",
            "--t-max",
            "6",
            "--points",
            "4",
            "--format",
            "json",
            *args,
        ],
        capsys,
    )
    assert rc == 0, err
    return json.loads(out)


@pytest.fixture
def problem() -> gdln.Problem:
    return load("xor", hidden=1)


def test_balanced_start_is_solved_in_closed_form(problem, tmp_path, capsys) -> None:
    weights = gdln.balanced_weights(problem, lam=0.5, scale=0.1, seed=0)
    out = solve_cli(capsys, "--weights", str(save(tmp_path / "w.npz", weights)))
    assert out["meta"]["route"] == "lambda-balanced"
    assert "W1TW1/x->h0->y" in out["variables"]  # the representations
    reference = reference_losses(problem, weights)
    np.testing.assert_allclose(out["loss"], reference, rtol=1e-9)


def test_unbalanced_start_takes_the_full_matrix_flow(problem, tmp_path, capsys) -> None:
    rng = np.random.default_rng(3)
    weights = {
        e: 0.2 * rng.standard_normal(w.shape)
        for e, w in gdln.balanced_weights(problem, lam=0.0, seed=0).items()
    }
    out = solve_cli(capsys, "--weights", str(save(tmp_path / "w.npz", weights)))
    assert out["meta"]["route"] == "matrix" and "pathway x->h0->y" in out["meta"]["why"]
    assert "WTW[x->h0]" in out["variables"] and "WWT[h0->y]" in out["variables"]
    np.testing.assert_allclose(out["loss"], reference_losses(problem, weights), rtol=1e-9)
    decayed = solve_cli(capsys, "--weights", str(tmp_path / "w.npz"), "--weight-decay", "0.1")
    assert decayed["meta"]["route"] == "matrix" and decayed["meta"]["weight_decay"] == 0.1
    np.testing.assert_allclose(
        decayed["loss"], reference_losses(problem, weights, gamma=0.1), rtol=1e-9
    )


def test_a_recorded_trajectory_gives_its_first_record(problem, tmp_path, capsys) -> None:
    run = gdln.simulate(problem, seeds=2, t_max=1, record_weights=True)
    run.save(tmp_path / "run.npz")
    first = {
        e: np.asarray(run.series[f"W/{u}->{v}"])[0, 0] for e in problem.graph.edges for u, v in [e]
    }
    out = solve_cli(capsys, "--weights", str(tmp_path / "run.npz"))
    np.testing.assert_allclose(out["loss"], reference_losses(problem, first), rtol=1e-9)


def test_balanced_option_draws_a_lambda_balanced_start(problem, capsys) -> None:
    out = solve_cli(capsys, "--balanced", "1")
    assert out["meta"]["route"] == "lambda-balanced"
    np.testing.assert_allclose(list(out["meta"]["lambda"].values()), 1.0, rtol=1e-12)
    weights = gdln.balanced_weights(problem, lam=1.0)
    np.testing.assert_allclose(out["loss"], reference_losses(problem, weights), rtol=1e-9)


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ({"W/x->h0": np.zeros((1, 2))}, r"w\.npz: no array 'W/x->h1' for the trained edge"),
        ({"W/x->h0": np.zeros((2, 2))}, r"weights\['W/x->h0'\]: w\.npz: shape \(2, 2\)"),
        ({"W/x->q": np.zeros((1, 2))}, r"weights\['W/x->q'\]: w\.npz: 'x->q' is not an edge"),
        ({"bias": np.zeros(2)}, r"weights\['bias'\]: w\.npz: array 'bias' names no weight"),
        ({"W/x->h0": np.full((1, 2), np.nan)}, r"weights\['W/x->h0'\]: w\.npz: holds non-finite"),
        ({"W/x->h0": np.array(["a"])}, r"w\.npz: array 'W/x->h0' holds <U1 values"),
    ],
)
def test_bad_weight_files_are_refused(tmp_path, capsys, arrays, message) -> None:
    path = tmp_path / "w.npz"
    np.savez(path, **arrays)
    rc, out, err = run_cli(["solve", GRAPH, "--param", "hidden=1", "--weights", str(path)], capsys)
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert err.startswith(f"gdln: error: {path}: ")
    assert re.search(message, err), err


def test_not_an_npz_and_option_clashes_are_refused(tmp_path, capsys) -> None:
    path = tmp_path / "w.npz"
    path.write_text("not a zip")
    rc, _, err = run_cli(["solve", GRAPH, "--weights", str(path)], capsys)
    assert rc == 2 and "w.npz" in err and "weights" in err
    rc, _, err = run_cli(["solve", GRAPH, "--weights", str(path), "--lump", "none"], capsys)
    assert rc == 2
    assert err.strip() == (
        "gdln: error: --weights and --lump: a start from weights is solved by its own route "
        "(lambda-balanced closed form, else the full-matrix flow)"
    )
    rc, _, err = run_cli(["solve", GRAPH, "--balanced", "x"], capsys)
    assert rc == 2 and err.strip() == "gdln: error: --balanced: expected a finite number, got 'x'"
