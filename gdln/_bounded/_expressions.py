"""A small, safe expression grammar for graph files.

Parameters, repetition counts, templated ids (``"x{i}"``) and probabilities
(``"1/(K*M)"``) are written as expressions. They are parsed with :mod:`ast` and walked
by a whitelist interpreter: numbers, names, ``+ - * / // % **``, comparisons,
``and/or/not``, ``a if c else b`` and a few named functions. Nothing is ever passed to
``eval``, and no text ever becomes a sympy object: sympy's ``sympify`` of a string is
``eval``, so every sympy value is built by :func:`as_sympy` from numbers the interpreter
made. Integer arithmetic stays exact: ``/`` gives an ``int`` when the division is exact
and a :class:`sympy.Rational` otherwise, and decimal literals become exact rationals
(``0.2`` is 1/5).

Every evaluation is bounded before it runs: the text by its length and depth
(:class:`~gdln.graphfile.Limits`), each number an operation builds by
:data:`MAX_BITS` (a power's size is estimated before it is computed), each root by
:data:`MAX_ROOT_BITS`, each symbolic value by :data:`MAX_TERMS`, each text by
``expression_chars``, and the work of all expressions of one file by
``expression_work``. Names are plain ASCII (Python would read ``ℎ`` as ``h``).

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
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

import numpy as np
import sympy as sp

from .._errors import GdlnError, shorten, shorten_text
from ._limits import count_work, current_limits

__all__ = [
    "MAX_BITS",
    "MAX_ROOT_BITS",
    "MAX_TERMS",
    "ExpressionError",
    "as_sympy",
    "evaluate",
    "exact",
    "pick",
    "render",
]

MAX_BITS = 4096  # largest magnitude of a number an expression may build: 2**4096 (1234 digits)
MAX_ROOT_BITS = 512  # largest number (numerator or denominator) whose root is taken exactly
MAX_TERMS = 10_000  # most terms of a symbolic or irrational value, shared parts counted each time
MAX_PICK_DOMAINS = 10**6  # largest M of pick(): it draws a permutation of M domains


class ExpressionError(GdlnError, ValueError):
    """An expression is not in the grammar, names something unknown, or is too large."""


def as_sympy(value: Any) -> Any:
    """``value`` as a sympy object, built from a number and never from text.

    The one way gdln turns a value that may come from a file into sympy: ``sympy.sympify``
    of a string runs ``eval`` on it, so a string (or anything but a number) is refused.
    Integers and fractions become exact sympy numbers, floats :class:`sympy.Float`, and a
    sympy object is returned as it is.

    Parameters
    ----------
    value
        A sympy object, a Python or numpy integer or float, or a
        :class:`fractions.Fraction`.

    Returns
    -------
    sympy.Basic
        The same number in sympy.

    Raises
    ------
    ExpressionError
        ``value`` is text, a condition (a boolean) or not a number.

    >>> as_sympy(3), as_sympy(0.5)
    (3, 0.500000000000000)
    >>> as_sympy("1/3")
    Traceback (most recent call last):
    ...
    gdln._bounded._expressions.ExpressionError: expected a number, got the text '1/3'
    """
    if isinstance(value, sp.Basic):
        return value
    if isinstance(value, str):
        raise ExpressionError(f"expected a number, got the text {shorten(value)}")
    if isinstance(value, (bool, np.bool_)):
        raise ExpressionError(f"expected a number, got the condition {value}")
    if isinstance(value, (int, np.integer)):
        return sp.Integer(int(value))
    if isinstance(value, Fraction):
        return sp.Rational(value.numerator, value.denominator)
    if isinstance(value, (float, np.floating)):
        return sp.Float(float(value))
    raise ExpressionError(f"expected a number, got {type(value).__name__} {shorten(value)}")


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
    if isinstance(value, Fraction):  # an exact setting (gdln.settings reads "1/10" so)
        return _simplify_number(sp.Rational(value.numerator, value.denominator))
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
    the expression ``Mod(i + k, m)``. The last few draws are kept, so the ``n_pick``
    calls for one ``i`` draw once; a draw counts against the ``expression_work`` limit.

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
        if not isinstance(value, int) or isinstance(value, bool):
            raise ExpressionError(f"pick(): {name} must be an integer, got {shorten(value)}")
    if not 0 <= k < n_pick <= m:
        raise ExpressionError(f"pick(): need 0 <= k < K <= M, got k={k}, K={n_pick}, M={m}")
    if m > MAX_PICK_DOMAINS:
        raise ExpressionError(f"pick(): M={m} is too large (the limit is {MAX_PICK_DOMAINS})")
    if seed < 0:
        return (i + k) % m
    if i < 0:
        raise ExpressionError(f"pick(): i must be >= 0 with a seed, got {i}")
    return int(_draw(seed, i, m, n_pick)[k])


_DRAWS: OrderedDict[tuple[int, int, int, int], np.ndarray] = OrderedDict()
_DRAWS_LOCK = threading.Lock()
_KEPT_DRAWS = 8  # at most 8 draws of 10**6 int32 domains: 32 MB


def _draw(seed: int, i: int, m: int, n_pick: int) -> np.ndarray:
    """The sorted domains of one seeded draw; recent draws are reused, not drawn again."""
    key = (seed, i, m, n_pick)
    with _DRAWS_LOCK:
        found = _DRAWS.get(key)
        if found is not None:
            _DRAWS.move_to_end(key)
            return found
    # numpy shuffles all M domains unless K is small next to M (then it draws K of them)
    count_work(n_pick if m > 10_000 and 50 * n_pick < m else m, cls=ExpressionError)
    chosen = np.random.default_rng([seed, i]).choice(m, size=n_pick, replace=False)
    found = np.sort(chosen).astype(np.int32)
    found.flags.writeable = False
    with _DRAWS_LOCK:
        _DRAWS[key] = found
        while len(_DRAWS) > _KEPT_DRAWS:
            _DRAWS.popitem(last=False)
    return found


def _isqrt(value: Any) -> int:
    if not isinstance(value, int) or value < 0:
        raise ExpressionError(f"isqrt() needs a non-negative integer, got {shorten(value)}")
    return math.isqrt(value)


def _divide(a: Any, b: Any) -> Any:
    if b == 0:
        raise ExpressionError("division by zero")
    if isinstance(a, int) and isinstance(b, int):
        return a // b if a % b == 0 else sp.Rational(a, b)
    return _simplify_number(as_sympy(a) / as_sympy(b))


def _power(a: Any, b: Any) -> Any:
    r"""``a ** b``, refusing results beyond ``2**MAX_BITS`` before computing them.

    The size of an exact power is $|b|$ times the bits of the base's numerator or
    denominator, whichever is larger (so $(1 + 10^{-20})^{10^{20}}$ is refused, though
    its value is near $e$); a root of a rational (a non-integer exponent) also needs
    the base below ``2**MAX_ROOT_BITS``, since sympy factors the base to simplify it.
    """
    base, exponent = as_sympy(a), as_sympy(b)
    if base == 0 and exponent.is_number and exponent.is_negative:
        raise ExpressionError("division by zero")
    if exponent.is_number:
        _check_power(base, exponent)
        if isinstance(base, sp.Rational) and not exponent.is_integer:
            count_work(_check_root(base) ** 3 // 256, cls=ExpressionError)  # sympy factors it
    if isinstance(a, int) and isinstance(b, int) and b >= 0:
        return a**b
    return _simplify_number(base**exponent)


def _check_power(base: Any, exponent: Any, height: float | None = None) -> None:
    """Refuse ``base**exponent`` (``exponent`` a number) beyond ``2**MAX_BITS``."""
    magnitude = _magnitude(exponent)
    if not base.is_number:
        if magnitude > MAX_BITS:
            raise ExpressionError(
                f"exponent {shorten(exponent, 40)} is too large (the limit is {MAX_BITS})"
            )
        return
    height = _measure(base) if height is None else height
    size = magnitude * height if height else 0.0
    if not size <= MAX_BITS:  # also NaN
        raise ExpressionError(
            f"({shorten(base, 40)})**({shorten(exponent, 40)}) is too large "
            f"(about 2**{size:.3g}; the limit is 2**{MAX_BITS})"
        )


def _check_root(base: sp.Rational) -> int:
    """The bits of a rational whose root is taken, refused above :data:`MAX_ROOT_BITS`."""
    bits = max(int(base.p).bit_length(), int(base.q).bit_length())
    if bits > MAX_ROOT_BITS:
        raise ExpressionError(
            f"a root of a number of {bits} bits is too costly to take exactly "
            f"(the limit is 2**{MAX_ROOT_BITS})"
        )
    return bits


def _magnitude(number: Any) -> float:
    """``|number|`` as a float (``inf`` past the float range or for non-real numbers)."""
    if isinstance(number, sp.Rational):
        p, q = abs(int(number.p)), int(number.q)
        return math.inf if p.bit_length() - q.bit_length() > 1000 else p / q
    value = abs(complex(number.evalf(20)))
    return value if math.isfinite(value) else math.inf


def _check_size(value: Any) -> Any:
    """Refuse a value beyond the size limits (products of large numbers grow without bound).

    Integers and rationals up to ``2**MAX_BITS``; other sympy values (irrational or
    symbolic) are measured by :func:`_measure`.
    """
    if isinstance(value, int) and value.bit_length() > MAX_BITS:
        raise ExpressionError(
            f"a number of {value.bit_length()} bits is too large (the limit is 2**{MAX_BITS})"
        )
    if isinstance(value, sp.Basic):
        _measure(value)
    return value


def _measure(value: sp.Basic) -> float:
    r"""The height of a sympy value, after checking that it is within the size limits.

    The height bounds $\log_2$ of the numerators and denominators the value stands for:
    $\max(\log_2|p|, \log_2 q)$ for a rational $p/q$, $|r|$ times the base's for a
    power $x^r$, the sum over the terms (plus one) for sums, products and functions.
    Refused: more than :data:`MAX_TERMS` terms (shared parts counted each time they
    occur, though visited once), a rational or a power of a number beyond
    ``2**MAX_BITS``, a power of a symbol beyond ``MAX_BITS``, a root of a rational
    beyond ``2**MAX_ROOT_BITS``.
    """
    if isinstance(value, sp.Rational):
        p, q = abs(int(value.p)), int(value.q)
        if max(p.bit_length(), q.bit_length()) > MAX_BITS:
            raise ExpressionError(f"a fraction with terms above 2**{MAX_BITS} is too large")
        return max(math.log2(p) if p else 0.0, math.log2(q))
    terms: dict[sp.Basic, int] = {}
    height: dict[sp.Basic, float] = {}
    pending: list[tuple[sp.Basic, bool]] = [(value, False)]
    while pending:
        node, done = pending.pop()
        if node in terms:
            continue
        if not done:
            pending.append((node, True))
            pending.extend((arg, False) for arg in node.args if arg not in terms)
            continue
        if isinstance(node, sp.Rational) or not node.args:
            height[node] = _measure(node) if isinstance(node, sp.Rational) else 0.0
        elif isinstance(node, sp.Pow) and node.exp.is_number:
            _check_power(node.base, node.exp, height[node.base])
            if isinstance(node.base, sp.Rational) and not node.exp.is_integer:
                _check_root(node.base)
            height[node] = _magnitude(node.exp) * height[node.base]
        else:
            height[node] = sum(height[arg] for arg in node.args) + (not isinstance(node, sp.Mul))
        terms[node] = 1 + sum(terms[arg] for arg in node.args)
        if terms[node] > MAX_TERMS:
            raise ExpressionError(  # not shown: printing it could take as long as building it
                f"a value of more than {MAX_TERMS} terms is too large (the limit is {MAX_TERMS})"
            )
    return height[value]


def _sqrt(value: Any) -> Any:
    return _power(value, sp.Rational(1, 2))


_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: _divide,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: _power,
}
_SYMBOLS: dict[type, str] = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.USub: "-",
    ast.UAdd: "+",
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
    "sqrt": _sqrt,
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
        On syntax outside the grammar, an unknown name or function, bad arithmetic, or
        a value or amount of work beyond the limits.
    """
    if not isinstance(text, str):
        return exact(text)
    tree, nodes = bounded_parse(text)
    count_work(nodes, cls=ExpressionError)
    try:
        value = _walk(tree.body, names, text)
        return value if isinstance(value, (str, bool)) else exact(value)
    except ExpressionError:
        raise
    except (TypeError, ValueError, ArithmeticError) as err:  # also sympy's SympifyError
        raise ExpressionError(f"cannot evaluate {shorten(text)}: {err}") from err


def bounded_parse(text: str) -> tuple[ast.Expression, int]:
    """Parse ``text`` after checking its length; refuse a tree nested beyond the limit.

    The cap comes before :mod:`ast` and before the recursive :func:`_walk`, so an
    expression of 20 000 terms costs a length check, never a ``RecursionError``.
    Returns the tree and its number of nodes.
    """
    limits = current_limits()
    if len(text) > limits.expression_chars:
        raise ExpressionError(
            limits.exceeded(
                "expression_chars", f"expression {shorten(text, 30)} of {len(text)} chars"
            )
        )
    tree, depth, nodes = _parse(text)
    if depth > limits.expression_depth:
        raise ExpressionError(
            limits.exceeded(
                "expression_depth", f"expression {shorten(text, 30)} nests {depth} deep"
            )
        )
    return tree, nodes


@functools.lru_cache(maxsize=4096)
def _parse(text: str) -> tuple[ast.Expression, int, int]:
    """The syntax tree of ``text``, its depth and its number of nodes (found without recursion).

    Python folds identifiers to NFKC (``ℎ`` reads as ``h``), so a name must be written in
    plain ASCII: what the parser read is compared with what was written.
    """
    source = text.strip()
    try:
        tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as err:  # ValueError: NUL
        raise ExpressionError(f"cannot parse expression {shorten(text)}") from err
    pending: list[tuple[ast.AST, int]] = [(tree.body, 1)]
    depth = nodes = 0
    while pending:
        node, level = pending.pop()
        depth, nodes = max(depth, level), nodes + 1
        pending.extend((child, level + 1) for child in ast.iter_child_nodes(node))
        if isinstance(node, ast.Name) and not source.isascii():
            written = ast.get_source_segment(source, node) or node.id
            if not written.isascii():
                raise ExpressionError(
                    f"name {written!r} in {shorten(text)} is not plain ASCII "
                    f"(Python would read it as {node.id!r}); write names in ASCII"
                )
    return tree, depth, nodes


def _text_operation(op: type, left: Any, right: Any, text: str) -> str:
    """``+`` of two texts, refused beyond ``expression_chars``; any other text operation refused."""
    if op is ast.Add and isinstance(left, str) and isinstance(right, str):
        limits = current_limits()
        if len(left) + len(right) > limits.expression_chars:
            raise ExpressionError(
                limits.exceeded(
                    "expression_chars",
                    f"{shorten(text, 30)} builds a text of {len(left) + len(right)} chars",
                )
            )
        return left + right
    shown = left if isinstance(left, str) else right
    raise ExpressionError(
        f"{shorten(text)}: {_SYMBOLS[op]} needs numbers, got the text {shorten(shown, 30)}"
    )


def _compare(op: type, left: Any, right: Any, text: str) -> Any:
    """A comparison; a text equals only a text and is ordered only against a text."""
    if isinstance(left, str) != isinstance(right, str):
        if op is ast.Eq or op is ast.NotEq:
            return op is ast.NotEq
        raise ExpressionError(
            f"{shorten(text)}: {_SYMBOLS[op]} compares two numbers or two texts, "
            f"got {shorten(left, 30)} and {shorten(right, 30)}"
        )
    return _COMPARE[op](left, right)


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
        op = type(node.op)
        left, right = _walk(node.left, names, text), _walk(node.right, names, text)
        if isinstance(left, str) or isinstance(right, str):
            return _text_operation(op, left, right, text)
        return _check_size(_simplify_number(_BINARY[op](left, right)))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Not)):
        value = _walk(node.operand, names, text)
        if isinstance(node.op, ast.Not):
            return not value
        if isinstance(value, str):
            raise ExpressionError(
                f"{shorten(text)}: {_SYMBOLS[type(node.op)]} needs a number, got the text "
                f"{shorten(value, 30)}"
            )
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.Compare):
        left = _walk(node.left, names, text)
        for cmp, comparator in zip(node.ops, node.comparators, strict=True):
            if type(cmp) not in _COMPARE:
                break
            right = _walk(comparator, names, text)
            if not _compare(type(cmp), left, right, text):
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
        for arg in args:
            if isinstance(arg, str):
                raise ExpressionError(
                    f"{shorten(text)}: {node.func.id}() needs numbers, got the text "
                    f"{shorten(arg, 30)}"
                )
        return _check_size(FUNCTIONS[node.func.id](*args))
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
