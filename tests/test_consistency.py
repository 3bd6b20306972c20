r"""Typed second moments are checked, and the ``teacher:`` dataset cannot be inconsistent.

Issue 33 item 6. References independent of the code under test: numpy's eigenvalues of
the joint moment matrix written out in the test, and second moments averaged over an
explicit set of examples (sign vectors, whose second moment is exactly the identity)
with the teacher's inputs, targets and noise built from them.
"""

from __future__ import annotations

import itertools
import re
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import sympy as sp
from helpers import write

import gdln

GRAPH = """\
nodes: [{id: x, size: 2}, {id: h, size: 2}, {id: y, size: 1}]
edges: [{source: x, target: h}, {source: h, target: y}]
datasets:
  d: %s
task:
  contexts:
    - {probability: 1, dataset: d, inputs: {x: x}, targets: {y: y}}
"""


def _load(tmp_path: Path, dataset: str) -> gdln.Problem:
    return gdln.load(write(tmp_path, GRAPH % dataset))


def test_cross_moment_given_both_ways_must_agree(tmp_path: Path) -> None:
    """<x y^T> = [1, 0]^T but <y x^T> = [1/2, 0]: no data have both."""
    text = "{moments: {x: {x: [[1, 0], [0, 1]], y: [[1], [0]]}, y: {x: [[0.5, 0]], y: 1}}}"
    with pytest.raises(gdln.TaskSpecError, match=r"datasets\.d\.moments\.x\.y: .*entry \[0, 0\]"):
        _load(tmp_path, text)
    # the same numbers, agreeing, load
    _load(tmp_path, text.replace("[[0.5, 0]]", "[[1, 0]]"))


def test_asymmetric_self_moment_is_refused(tmp_path: Path) -> None:
    text = "{moments: {x: {x: [[1, 0.2], [0.4, 1]]}, y: {x: [[1, 0]], y: 1}}}"
    with pytest.raises(gdln.TaskSpecError, match=r"moments\.x\.x: <x x\^T> is not symmetric"):
        _load(tmp_path, text)


@pytest.mark.parametrize(
    ("yy", "xx"),
    [("1.5", [[1, 0], [0, 1]]), ("1/2", [[1, 0], [0, 1]]), ("3", [[1, 0], [0, -1 / 4]])],
)
def test_negative_joint_moment_names_block_and_eigenvalue(
    tmp_path: Path, yy: str, xx: list[list[float]]
) -> None:
    """<y y^T> below |<y x^T>|^2 (or a negative variance): the smallest eigenvalue is
    reported, as numpy computes it from the joint matrix written out here."""
    text = f"{{moments: {{x: {{x: {xx}}}, y: {{x: [[1, 1]], y: {yy}}}}}}}"
    joint = np.block(
        [[np.array(xx), np.array([[1.0], [1.0]])], [np.ones((1, 2)), float(Fraction(yy))]]
    )
    lowest = np.linalg.eigvalsh(joint)[0]
    assert lowest < -0.05
    with pytest.raises(gdln.TaskSpecError) as caught:
        _load(tmp_path, text)
    message = str(caught.value)
    assert len(message) <= 300 and "datasets.d.moments" in message
    assert "not positive semidefinite" in message
    if xx[1][1] < 0:  # the smallest failing block: the variance of x alone
        assert "<x x^T>" in message and re.search(r"eigenvalue -0\.25\b", message)
    else:
        assert "the joint second moment of x, y" in message
        reported = float(re.search(r"eigenvalue (-[0-9.e-]+)", message).group(1))
        assert reported == pytest.approx(lowest, rel=1e-3)


def test_typed_decimals_of_a_singular_moment_are_admitted(tmp_path: Path) -> None:
    """x uniform on [-1, 1]^2, y = x_1 (graphs/context.yaml) is singular: typed to three
    decimals its joint moment has a tiny negative eigenvalue, within the rounding."""
    text = "{moments: {x: {x: [[0.333, 0], [0, 0.333]]}, y: {x: [[0.333, 0]], y: 0.334}}}"
    joint = np.array([[0.333, 0, 0.333], [0, 0.333, 0], [0.333, 0, 0.3329]])
    assert np.linalg.eigvalsh(joint)[0] < 0  # 0.3329 would not be admitted: too far
    _load(tmp_path, text)  # 0.334 >= 0.333: positive semidefinite
    _load(tmp_path, text.replace("0.334", "0.3329").replace("0.333", "0.3330"))
    with pytest.raises(gdln.TaskSpecError, match="not positive semidefinite"):
        _load(tmp_path, text.replace("y: 0.334", "y: 1/4"))  # exact: no rounding


def test_shipped_moment_datasets_pass() -> None:
    for name in ("context", "late_fusion", "late_fusion_deep"):
        gdln.load(Path(__file__).parent.parent / "graphs" / f"{name}.yaml")


# x = L s and noise n_t = M_t r: covariance C = L L^T and noise covariances M M^T
L = sp.Matrix([[1, 0, 0], [sp.Rational(1, 2), 1, 0], [0, sp.Rational(1, 3), 1]])
W = {
    "t": sp.Matrix([[1, 0, 2], [0, -1, sp.Rational(1, 2)]]),
    "u": sp.Matrix([[sp.Rational(1, 4), 1, 0]]),
}
M = {
    "t": sp.Matrix([[sp.Rational(1, 2), 0], [sp.Rational(1, 4), sp.Rational(1, 3)]]),
    "u": sp.Matrix([[sp.Rational(1, 2)]]),
}


def _yaml(matrix: sp.Matrix) -> str:
    return (
        "[" + ", ".join("[" + ", ".join(str(v) for v in row) + "]" for row in matrix.tolist()) + "]"
    )


TEACHER = f"""\
nodes: [{{id: xa, size: 2}}, {{id: xb, size: 1}}, {{id: h, size: 3}}, {{id: y, size: 2}}, {{id: z, size: 1}}]
edges:
  - {{source: xa, target: h}}
  - {{source: xb, target: h}}
  - {{source: h, target: y}}
  - {{source: h, target: z}}
datasets:
  d:
    teacher:
      inputs: {{a: 2, b: 1}}
      covariance: {_yaml(L * L.T)}
      targets: {{t: {_yaml(W["t"])}, u: {_yaml(W["u"])}}}
      noise: {{t: {_yaml(M["t"] * M["t"].T)}, u: {M["u"][0] ** 2}}}
task:
  contexts:
    - {{probability: 1, dataset: d, inputs: {{xa: a, xb: b}}, targets: {{y: t, z: u}}}}
"""


def test_teacher_moments_equal_an_average_over_examples(tmp_path: Path) -> None:
    """Examples x = L s and noise n_t = M_t r with s, r running over every sign vector
    (E s s^T = I exactly): their average second moments equal the teacher's, which are
    exact rationals."""
    dataset = gdln.load(write(tmp_path, TEACHER)).task.datasets["d"]
    f64 = {k: np.array(v, dtype=float) for k, v in {"L": L, **W}.items()}
    noise = {k: np.array(v, dtype=float) for k, v in M.items()}
    signs = np.array(list(itertools.product((-1.0, 1.0), repeat=6)))  # 3 + 2 + 1 dimensions
    x = signs[:, :3] @ f64["L"].T
    fields = {
        "a": x[:, :2],
        "b": x[:, 2:],
        "t": x @ f64["t"].T + signs[:, 3:5] @ noise["t"].T,
        "u": x @ f64["u"].T + signs[:, 5:] @ noise["u"].T,
    }
    for f, g in itertools.product(fields, repeat=2):
        expected = fields[f].T @ fields[g] / len(signs)
        got = dataset.moment(f, g)
        assert isinstance(got, sp.MatrixBase) and all(v.is_Rational for v in got), (f, g)
        np.testing.assert_allclose(np.array(got, dtype=float), expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (
            ("covariance: [[1, ", "covariance: [[1/10, "),
            r"teacher\.covariance: the covariance is not positive semidefinite",
        ),
        (
            ("[1/2, 5/4, 1/3]", "[1/3, 5/4, 1/3]"),
            r"teacher\.covariance: the covariance is not symmetric",
        ),
        (
            ("u: 1/4}", "u: -1/4}"),
            r"teacher\.noise\.u: the noise covariance is not positive semidefinite",
        ),
        (
            ("u: [[1/4, 1, 0]]", "u: [[1/4, 1]]"),
            r"teacher\.targets\.u: the teacher matrix has 2 columns; expected one per input dimension \(3",
        ),
        (("targets: {t:", "targets: {a:"), r"teacher\.targets\.a: field 'a' is an input too"),
        (
            ("inputs: {a: 2, b: 1}", "inputs: {a: 2, b: 0}"),
            r"teacher\.inputs\.b: expected the field's dimension",
        ),
        (("noise:", "nois:"), r"teacher: unknown key 'nois'"),
    ],
)
def test_teacher_refuses_what_has_no_data(
    tmp_path: Path, change: tuple[str, str], match: str
) -> None:
    text = TEACHER.replace(*change)
    assert text != TEACHER
    with pytest.raises(gdln.TaskSpecError, match=match):
        gdln.load(write(tmp_path, text))


# ---------------------------------------------------------- a dataset built in Python is checked


@pytest.mark.parametrize("exact", [True, False], ids=["sympy", "numpy"])
def test_a_dataset_built_in_python_is_checked_as_a_file_is(exact: bool) -> None:
    """The side door: ``Dataset(moments_given=...)`` without a file. <x x^T> = I and
    <y x^T> = [2, 0] have a joint moment [[1, 0, 2], [0, 1, 0], [2, 0, 1]] whose lowest
    eigenvalue, by numpy here, is 1 - 2 = -1: no data have it."""
    xx, yx, yy = [[1, 0], [0, 1]], [[2, 0]], [[1]]
    joint = np.array([[1, 0, 2], [0, 1, 0], [2, 0, 1]], dtype=float)
    lowest = np.linalg.eigvalsh(joint)[0]
    assert lowest == pytest.approx(-1.0)
    blocks = {("x", "x"): xx, ("y", "x"): yx, ("y", "y"): yy}
    moments = {k: sp.ImmutableMatrix(v) if exact else np.array(v, float) for k, v in blocks.items()}
    with pytest.raises(gdln.TaskSpecError, match=r"not positive semidefinite.*eigenvalue -1\b"):
        gdln.task.Dataset("d", {"x": 2, "y": 1}, moments_given=moments)
    with pytest.raises(ValueError, match=r"'d'.*x.y.*transpose"):  # given both ways, disagreeing
        gdln.task.Dataset(
            "d",
            {"x": 2, "y": 1},
            moments_given={**moments, ("x", "y"): np.array([[0.5], [0.0]])},
        )
    # floats beside a symbolic block: no value of s is known to make them each other's
    # transpose (the float check alone could not read s: a TypeError traceback before)
    with pytest.raises(ValueError, match=r"'d'.*x\.y.*transpose"):
        gdln.task.Dataset(
            "d",
            {"x": 2, "y": 1},
            moments_given={
                ("x", "x"): sp.ImmutableMatrix(xx),
                ("y", "x"): sp.ImmutableMatrix([[sp.Symbol("s"), 0]]),
                ("x", "y"): np.array([[0.25], [0.0]]),
                ("y", "y"): np.array(yy, float),
            },
        )
    fine = {**blocks, ("y", "x"): [[0.5, 0]]}  # eigenvalues 1 +- 0.5 and 1: data exist
    assert min(np.linalg.eigvalsh([[1, 0, 0.5], [0, 1, 0], [0.5, 0, 1]])) > 0
    gdln.task.Dataset(
        "d",
        {"x": 2, "y": 1},
        moments_given={
            k: sp.ImmutableMatrix(v) if exact else np.array(v, float) for k, v in fine.items()
        },
    )
