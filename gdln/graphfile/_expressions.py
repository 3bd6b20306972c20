"""A small, safe expression grammar for graph files.

Parameters, repetition counts, templated ids (``"x{i}"``) and probabilities
(``"1/(K*M)"``) are written as expressions. They are parsed with :mod:`ast` and walked
by a whitelist interpreter: numbers, names, ``+ - * / // % **``, comparisons,
``and/or/not``, ``a if c else b`` and a few named functions. Nothing is ever passed to
``eval``. Integer arithmetic stays exact: ``/`` gives an ``int`` when the division is
exact and a :class:`sympy.Rational` otherwise, and decimal literals become exact
rationals (``0.2`` is 1/5).

>>> evaluate("1/(K*M)", {"K": 4, "M": 7})
1/28
>>> evaluate("(i + k) % M", {"i": 6, "k": 2, "M": 7})
1
>>> render("y{(i + 1) % M}", {"i": 6, "M": 7})
'y0'
"""

from __future__ import annotations

import ast
import functools
import math
import operator
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import sympy as sp

from .._errors import GdlnError, shorten, shorten_text
from ._limits import current_limits

__all__ = ["MAX_BITS", "ExpressionError", "evaluate", "exact", "pick", "render"]

MAX_BITS = 4096  # largest magnitude of a number an expression may build: 2**4096 (1234 digits)
MAX_PICK_DOMAINS = 10**6  # largest M of pick(): it draws a permutation of M domains


class ExpressionError(GdlnError, ValueError):
    """An expression is not in the grammar, names something unknown, or is too large."""


def exact(value: Any) -> Any:
    """Turn a Python number into an exact one: ints stay, floats become rationals."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ExpressionError(f"number {value!r} is not finite")
        return _simplify_number(sp.Rational(repr(value)))
    if isinstance(value, sp.Basic):
        return _simplify_number(value)
    raise ExpressionError(f"{shorten(value)} is not a number")


def _simplify_number(value: Any) -> Any:
    if isinstance(value, sp.Integer):
        return int(value)
    return value


def pick(i: int, k: int, m: int, n_pick: int, seed: int) -> int:
    """The ``k``-th of ``n_pick`` output domains trained with input domain ``i``.

    With ``seed < 0`` it is ``(i + k) mod m`` (every output is trained ``n_pick`` times);
    otherwise a seeded random choice of ``n_pick`` distinct domains out of ``m``, drawn
    independently for each ``i`` (Sec. 4 of Saxe et al. 2022: K trained output domains
    per input domain). With symbols for ``i``, ``k`` or ``m`` and ``seed < 0`` it is
    the expression ``Mod(i + k, m)``.

    >>> [pick(5, k, 7, 3, -1) for k in range(3)]
    [5, 6, 0]
    """
    if (
        isinstance(seed, int)
        and seed < 0
        and any(isinstance(v, sp.Basic) and v.free_symbols for v in (i, k, m))
    ):
        return sp.Mod(i + k, m)  # the rule itself, for the symmetry quotient's checks
    if any(isinstance(v, sp.Basic) and v.free_symbols for v in (i, k, m)):
        raise ExpressionError(f"pick() with seed={seed} draws at random: it has no symbolic rule")
    for name, value in (("i", i), ("k", k), ("M", m), ("K", n_pick), ("seed", seed)):
        if not isinstance(value, int):
            raise ExpressionError(f"pick(): {name} must be an integer, got {value!r}")
    if not 0 <= k < n_pick <= m:
        raise ExpressionError(f"pick(): need 0 <= k < K <= M, got k={k}, K={n_pick}, M={m}")
    if m > MAX_PICK_DOMAINS:
        raise ExpressionError(f"pick(): M={m} is too large (the limit is {MAX_PICK_DOMAINS})")
    if seed < 0:
        return (i + k) % m
    chosen = np.random.default_rng([seed, i]).choice(m, size=n_pick, replace=False)
    return int(np.sort(chosen)[k])


def _isqrt(value: Any) -> int:
    if not isinstance(value, int) or value < 0:
        raise ExpressionError(f"isqrt() needs a non-negative integer, got {value!r}")
    return math.isqrt(value)


def _divide(a: Any, b: Any) -> Any:
    if b == 0:
        raise ExpressionError("division by zero")
    if isinstance(a, int) and isinstance(b, int):
        return a // b if a % b == 0 else sp.Rational(a, b)
    return _simplify_number(sp.sympify(a) / b)


def _power(a: Any, b: Any) -> Any:
    """``a ** b``, refusing results beyond ``2**MAX_BITS`` before computing them."""
    if isinstance(a, str) or isinstance(b, str):
        raise TypeError("** needs numbers")
    base, exponent = sp.sympify(a), sp.sympify(b)
    if base == 0 and exponent.is_number and exponent.is_negative:
        raise ExpressionError("division by zero")
    if base.is_number and exponent.is_number and base != 0:
        size = abs(sp.Float(exponent.evalf(20))) * abs(sp.log(abs(base), 2).evalf(20))
        if size.is_finite is False or size > MAX_BITS:
            raise ExpressionError(
                f"({a})**({b}) is too large (about 2**{_round_bits(size)}; the limit is 2**{MAX_BITS})"
            )
    elif exponent.is_number and abs(exponent) > MAX_BITS:
        raise ExpressionError(f"exponent {b} is too large (the limit is {MAX_BITS})")
    if isinstance(a, int) and isinstance(b, int) and b >= 0:
        return a**b
    return _simplify_number(base**exponent)


def _round_bits(size: Any) -> str:
    return f"{float(size):.3g}" if size.is_finite else "oo"


def _multiply(a: Any, b: Any) -> Any:
    """``a * b`` for numbers only (``'x' * M`` would build a string of any length)."""
    if isinstance(a, str) or isinstance(b, str):
        raise TypeError("* needs numbers")
    return a * b


def _check_size(value: Any) -> Any:
    """Refuse numbers beyond ``2**MAX_BITS`` (products of large numbers grow without bound)."""
    if isinstance(value, int) and value.bit_length() > MAX_BITS:
        raise ExpressionError(
            f"a number of {value.bit_length()} bits is too large (the limit is 2**{MAX_BITS})"
        )
    if (
        isinstance(value, sp.Rational)
        and max(int(value.p).bit_length(), int(value.q).bit_length()) > MAX_BITS
    ):
        raise ExpressionError(f"a fraction with terms above 2**{MAX_BITS} is too large")
    return value


_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: _multiply,
    ast.Div: _divide,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: _power,
}
_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}
FUNCTIONS: dict[str, Callable[..., Any]] = {
    "isqrt": _isqrt,
    "sqrt": lambda x: _simplify_number(sp.sqrt(x)),
    "min": min,
    "max": max,
    "abs": abs,
    "pick": pick,
}


def evaluate(text: Any, names: Mapping[str, Any]) -> Any:
    """Evaluate an expression (or pass a number through, made exact).

    Parameters
    ----------
    text
        An expression string, or a number.
    names
        The values of the names the expression may use.

    Returns
    -------
    object
        The value: an exact number (a Python ``int``, else a ``sympy`` number such as
        ``Rational(1, 3)`` for ``1/3``; floats become rationals), a string or a bool.

    Raises
    ------
    ExpressionError
        On syntax outside the grammar, an unknown name or function, or bad arithmetic.
    """
    if not isinstance(text, str):
        return exact(text)
    tree = _bounded_parse(text)
    try:
        value = _walk(tree.body, names, text)
        return value if isinstance(value, (str, bool)) else exact(value)
    except ExpressionError:
        raise
    except (TypeError, ValueError, ArithmeticError) as err:  # also sympy's SympifyError
        raise ExpressionError(f"cannot evaluate {shorten(text)}: {err}") from err


def _bounded_parse(text: str) -> ast.Expression:
    """Parse ``text`` after checking its length; refuse a tree nested beyond the limit.

    The cap comes before :mod:`ast` and before the recursive :func:`_walk`, so an
    expression of 20 000 terms costs a length check, never a ``RecursionError``.
    """
    limits = current_limits()
    if len(text) > limits.expression_chars:
        raise ExpressionError(
            limits.exceeded(
                "expression_chars", f"expression {shorten(text, 30)} of {len(text)} chars"
            )
        )
    tree, depth = _parse(text)
    if depth > limits.expression_depth:
        raise ExpressionError(
            limits.exceeded(
                "expression_depth", f"expression {shorten(text, 30)} nests {depth} deep"
            )
        )
    return tree


@functools.lru_cache(maxsize=4096)
def _parse(text: str) -> tuple[ast.Expression, int]:
    """The syntax tree of ``text`` and its depth (found without recursion)."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as err:  # ValueError: NUL
        raise ExpressionError(f"cannot parse expression {shorten(text)}") from err
    pending: list[tuple[ast.AST, int]] = [(tree.body, 1)]
    depth = 0
    while pending:
        node, level = pending.pop()
        depth = max(depth, level)
        pending.extend((child, level + 1) for child in ast.iter_child_nodes(node))
    return tree, depth


def _walk(node: ast.AST, names: Mapping[str, Any], text: str) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return exact(node.value)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in names:
            known = ", ".join(sorted(names)) or "none"
            raise ExpressionError(
                f"unknown name {shorten(node.id)} in {shorten(text)} (known: {shorten_text(known, 80)})"
            )
        return names[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _walk(node.left, names, text), _walk(node.right, names, text)
        return _check_size(_simplify_number(_BINARY[type(node.op)](left, right)))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Not)):
        value = _walk(node.operand, names, text)
        if isinstance(node.op, ast.Not):
            return not value
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.Compare):
        left = _walk(node.left, names, text)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            if type(op) not in _COMPARE:
                break
            right = _walk(comparator, names, text)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        else:
            return True
    if isinstance(node, ast.BoolOp):
        values = (_walk(v, names, text) for v in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.IfExp):
        branch = node.body if _walk(node.test, names, text) else node.orelse
        return _walk(branch, names, text)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and not node.keywords
        and node.func.id in FUNCTIONS
    ):
        args = [_walk(a, names, text) for a in node.args]
        return FUNCTIONS[node.func.id](*args)
    raise ExpressionError(
        f"{shorten(text)}: {ast.dump(node)[:40]}... is not allowed; use numbers, parameter names, "
        f"+ - * / // % **, comparisons and the functions {', '.join(sorted(FUNCTIONS))}"
    )


def render(template: Any, names: Mapping[str, Any]) -> str:
    """Fill ``{expression}`` fields of an id template, e.g. ``"x{i}"`` or ``"h{l+1}"``."""
    text = str(template)
    out: list[str] = []
    pos = 0
    while True:
        start = text.find("{", pos)
        if start < 0:
            out.append(text[pos:])
            break
        end = text.find("}", start)
        if end < 0:
            raise ExpressionError(f"unclosed '{{' in {shorten(text)}")
        out.append(text[pos:start])
        field = text[start + 1 : end]
        value = names[field] if field in names and isinstance(names[field], int) else None
        if value is None or isinstance(value, bool):
            value = evaluate(field, names)
        out.append(str(value))
        pos = end + 1
    if "}" in out[-1]:
        raise ExpressionError(f"unmatched '}}' in {shorten(text)}")
    return "".join(out)
