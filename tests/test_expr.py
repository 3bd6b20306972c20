"""The safe expression grammar."""

from __future__ import annotations

import contextlib
from fractions import Fraction

import numpy as np
import pytest
import sympy as sp
from hypothesis import given
from hypothesis import strategies as st

from gdln import GdlnError
from gdln._bounded._expressions import ExpressionError, evaluate, pick, render
from gdln._bounded._limits import use_limits
from gdln.graphfile import Limits


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


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("'a' / 2", r"/ needs numbers, got the text 'a'"),
        ("'a' ** 2", r"\*\* needs numbers, got the text 'a'"),
        ("1 - 'a'", r"- needs numbers, got the text 'a'"),
        ("'%0999999999d' % 1", r"% needs numbers, got the text '%0999999999d'"),
        ("'a' + 1", r"\+ needs numbers, got the text 'a'"),
        ("-'a'", r"- needs a number, got the text 'a'"),
        ("'a' < 1", r"< compares two numbers or two texts"),
        ("sqrt('a b')", r"sqrt\(\) needs numbers, got the text 'a b'"),
        ("min('a', 'b')", r"min\(\) needs numbers, got the text 'a'"),
    ],
)
def test_texts_take_part_in_no_arithmetic(text: str, match: str) -> None:
    # sympy.sympify('a') is eval('a'): a text operand of / once became a sympy object
    with pytest.raises(ExpressionError, match=match):
        evaluate(text, {})


def test_texts_compare_and_join_within_the_expression_limit() -> None:
    assert evaluate("'a' == 1", {}) is False and evaluate("'a' != 1", {}) is True
    assert evaluate("s + s", {"s": "ab"}) == "abab"
    with use_limits(Limits(expression_chars=10)):
        assert evaluate("s + s", {"s": "abcde"}) == "abcdeabcde"
        with pytest.raises(
            ExpressionError, match="text of 12 chars exceeds the limit expression_chars=10"
        ):
            evaluate("s + s", {"s": "abcdef"})


def test_as_sympy_builds_numbers_never_from_text() -> None:
    from gdln._bounded._expressions import as_sympy

    assert as_sympy(3) == sp.Integer(3) and isinstance(as_sympy(np.int64(3)), sp.Integer)
    assert as_sympy(Fraction(1, 3)) == sp.Rational(1, 3)
    assert as_sympy(0.5) == sp.Float(0.5) and as_sympy(sp.sqrt(2)) == sp.sqrt(2)
    for value, match in (("1/3", "got the text '1/3'"), (True, "condition"), ([1], "list")):
        with pytest.raises(ExpressionError, match=match):
            as_sympy(value)


def test_names_are_plain_ascii() -> None:
    # Python's parser folds 'ℎ' (U+210E) to 'h' (NFKC): the name would silently be h
    with pytest.raises(ExpressionError, match=r"name 'ℎ' in 'ℎ \+ 1' is not plain ASCII"):
        evaluate("ℎ + 1", {"h": 1})
    assert evaluate("'ℎé' if x else 0", {"x": 1}) == "ℎé"  # text may be any Unicode


def test_a_seeded_pick_draws_once_per_input_domain(monkeypatch: pytest.MonkeyPatch) -> None:
    from gdln._bounded import _expressions

    _expressions._DRAWS.clear()  # the draws kept from earlier tests
    expected = np.sort(np.random.default_rng([3, 4]).choice(50, size=5, replace=False))
    draws = []
    real = np.random.default_rng
    monkeypatch.setattr(np.random, "default_rng", lambda seed: draws.append(seed) or real(seed))
    assert [pick(4, k, 50, 5, 3) for k in range(5)] == expected.tolist()
    assert draws == [[3, 4]]
