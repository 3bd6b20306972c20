"""The safe expression grammar."""

from __future__ import annotations

import contextlib

import pytest
import sympy as sp
from hypothesis import given
from hypothesis import strategies as st

from gdln import GdlnError
from gdln.graphfile._expressions import ExpressionError, evaluate, pick, render


def test_exact_arithmetic() -> None:
    assert evaluate("1/(K*M)", {"K": 4, "M": 7}) == sp.Rational(1, 28)
    assert evaluate("M/2", {"M": 10}) == 5 and isinstance(evaluate("M/2", {"M": 10}), int)
    assert evaluate("0.2", {}) == sp.Rational(1, 5)
    assert evaluate("isqrt(P) ** 2 == P", {"P": 16}) is True
    assert evaluate("'a' if c == 0 else 'b'", {"c": 1}) == "b"


def test_render_fills_fields() -> None:
    assert render("h{l+1}_{(i + k) % M}", {"l": 2, "i": 5, "k": 3, "M": 7}) == "h3_1"


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("__import__('os')", "is not allowed"),
        ("a.b", "is not allowed"),
        ("x + 1", "unknown name 'x'"),
        ("1 +", "cannot parse"),
        ("1/0", "division by zero"),
        ("isqrt(-1)", "non-negative integer"),
        ("9**9**9", r"\(9\)\*\*\(387420489\) is too large \(about 2\*\*1.23e\+09"),
        ("(1/2)**5000", "is too large"),
        ("2**4095 * 2**4095", "a number of 8191 bits is too large"),
        ("0**-1", "division by zero"),
        ("'x' * 10**9", r"\* needs numbers, got the text 'x'"),
        ("pick(0, 0, 10**7, 1, 3)", "M=10000000 is too large"),
    ],
)
def test_rejected(text: str, match: str) -> None:
    with pytest.raises(ExpressionError, match=match):
        evaluate(text, {})


def test_expression_errors_are_gdln_errors() -> None:
    # the CLI prints any GdlnError as one line; an expression error must be one
    with pytest.raises(GdlnError, match="unknown name 'abc'"):
        evaluate("abc", {})


def test_large_but_bounded_numbers_are_exact() -> None:
    assert evaluate("2**4000", {}) == 2**4000
    assert evaluate("(1/3)**100", {}) == sp.Rational(1, 3**100)


def test_pick_default_and_seeded() -> None:
    assert [pick(2, k, 5, 3, -1) for k in range(3)] == [2, 3, 4]
    chosen = [pick(4, k, 9, 4, 7) for k in range(4)]
    assert len(set(chosen)) == 4 and chosen == sorted(chosen) and all(0 <= j < 9 for j in chosen)
    assert chosen == [pick(4, k, 9, 4, 7) for k in range(4)]  # reproducible


@given(st.text(max_size=20))
def test_fuzz_only_expression_errors(text: str) -> None:
    with contextlib.suppress(ExpressionError):
        evaluate(text, {"M": 3})
