"""Printed reports: the LaTeX form of the statistics is LaTeX throughout, and agrees with
the JSON and text forms."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import sympy as sp
from helpers import load

import gdln

CASES = {"xor": {}, "crosspath": {}, "routing": {"M": 3, "K": 2}, "context": {"pathways": 1}}
MATRIX = re.compile(r"^\S.* = (\\left\[\\begin\{matrix\}.*\\end\{matrix\}\\right\])$")


def as_matrix(rows: list, exact: bool) -> sp.Matrix:
    if exact:
        return sp.Matrix([[sp.sympify(x) for x in row] for row in rows])
    return sp.Matrix(np.asarray(rows, dtype=float))


@pytest.mark.parametrize("name", sorted(CASES))
def test_stats_latex_is_latex_and_matches_json(name: str) -> None:
    problem = load(name, **CASES[name])
    reduction = gdln.reduce(problem)
    latex = gdln.format_statistics(problem, reduction, "latex")
    data = json.loads(gdln.format_statistics(problem, reduction, "json"))
    for art in ("\\/", "---", "[[", "__"):
        assert art not in latex  # no ASCII art, no numpy arrays
    matrices = []
    for line in latex.splitlines():
        if line and not line.startswith("%"):
            match = MATRIX.match(line)
            assert match, line
            matrices.append(match.group(1))
    # every statistic, every row of mode values and every basis of the JSON, in LaTeX
    expected = [as_matrix(m, data["exact"]) for m in data["Sigma_yx"].values()]
    expected += [as_matrix(entry["value"], data["exact"]) for entry in data["Sigma_x"]]
    expected += [as_matrix([values], True) for values in data["mode_values"].values()]
    for component in data["components"]:
        expected += [as_matrix(b, component["exact"]) for b in component["bases"].values()]
    assert len(matrices) == len(expected)
    for got, want in zip(matrices, expected, strict=True):
        assert got == sp.latex(want, mat_delim="[", mat_str="matrix")


def test_stats_text_values_match_json() -> None:
    problem = load("crosspath")
    reduction = gdln.reduce(problem)
    text = gdln.format_statistics(problem, reduction, "text")
    data = json.loads(gdln.format_statistics(problem, reduction, "json"))
    for key, values in data["mode_values"].items():
        assert f"  {key} = [{', '.join(values)}]" in text


def test_latex_names_escape_special_characters() -> None:
    from gdln.paths._latex import latex_name

    assert latex_name("x_1->h#2") == r"\mathrm{x\_1} \to \mathrm{h\#2}"
