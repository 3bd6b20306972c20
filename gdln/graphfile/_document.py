"""Reading a graph or task file into a document, and what every part of the reader shares.

A file becomes a document in one function, :func:`read_file`: YAML (``.yaml``, ``.yml``)
into a mapping, networkx node-link JSON (``.json``) or GraphML (``.graphml``) into a
networkx graph. YAML is read with PyYAML's safe loader under the YAML 1.2 core schema,
so only ``true``/``false`` are booleans and ``on``, ``no`` or ``1:30`` stay text.

The rest of the reader walks the document with a :class:`Scope`: the file, the key path
being read and the names in scope. Every error comes from :meth:`Scope.fail`, so it
names the file, the key and the value. This module also reads the document's
parameters (``params:``, ``symbols:``, ``derived:``, ``checks:``), its ``solve:``
settings, and expands an entry's ``repeat:`` and ``let:``.
"""

from __future__ import annotations

import itertools
import keyword
import math
from collections.abc import Iterator, Mapping, Sequence, Set
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sympy as sp

from .._bounded._expressions import ExpressionError, evaluate, render
from .._bounded._limits import count_entries, current_limits
from .._bounded._read import read_text
from .._errors import GraphSpecError, shorten
from ..outputs import unprintable
from ..settings._declared import SECTIONS, Settings, declarations
from ..settings._spellings import DEPRECATED_KEYS
from ._interchange import parse_networkx, read_networkx
from ._safe_read import parse_yaml

__all__ = [
    "FORMATS",
    "MAX_COUNT",
    "SUFFIXES",
    "Scope",
    "counted_repeat",
    "describe",
    "entry_of",
    "expand",
    "mapping",
    "name",
    "only",
    "parse_document",
    "printable_name",
    "read_file",
    "read_parameters",
    "read_settings",
    "sequence",
    "simple_ids",
    "text",
]

MAX_COUNT = 10**6  # largest node size, repeat count and number of bindings of one entry
YAML_SUFFIXES = (".yaml", ".yml")
NETWORKX_SUFFIXES = (".json", ".graphml")
SUFFIXES = (*YAML_SUFFIXES, *NETWORKX_SUFFIXES)
"""Every file extension :func:`gdln.load` accepts (in any letter case)."""
FORMATS = ("yaml", "json", "graphml")
"""The formats :func:`gdln.graphfile.parse` reads: YAML, networkx node-link JSON, GraphML."""


def read_file(
    path: Path, *, as_yaml: bool = False, error: type[GraphSpecError] = GraphSpecError
) -> Any:
    """Read and parse one file: the only place where a graph or task file is read.

    Reading is bounded by the limits in force (:mod:`gdln._bounded._limits`): the size
    is checked before the file is read, then the text is parsed by
    :func:`parse_document`.

    Parameters
    ----------
    path
        The file; its extension (one of :data:`SUFFIXES`) says how to parse it.
    as_yaml
        Parse as YAML whatever the extension (task files).
    error
        The error class to raise (:class:`~gdln.TaskSpecError` for a task file).

    Returns
    -------
    dict or networkx.Graph
        As :func:`parse_document` returns it.
    """
    source = str(path)
    suffix = path.suffix.lower()
    if not as_yaml and suffix not in SUFFIXES:
        raise error(
            f"unknown file type {shorten(path.suffix)}; expected one of {', '.join(SUFFIXES)}",
            source=source,
        )
    what = "task file" if error is not GraphSpecError else "file"
    if as_yaml or suffix in YAML_SUFFIXES:
        return parse_document(
            read_text(path, cls=error, what=what), "yaml", source=source, error=error
        )
    return read_networkx(path, suffix)


def parse_document(
    text: str | bytes,
    fmt: str,
    *,
    source: str,
    error: type[GraphSpecError] = GraphSpecError,
) -> Any:
    """Parse the text of a graph or task file in the format ``fmt`` (:data:`FORMATS`).

    Parsing is bounded by the limits in force: the text's size first (``file_bytes``, as
    for a file), then YAML depth and alias expansion before the document is built, JSON
    depth after parsing.

    Returns
    -------
    dict or networkx.Graph
        The top-level mapping of a YAML document, or the graph of node-link JSON or
        GraphML as networkx reads it.
    """
    if fmt not in FORMATS:
        raise error(
            f"unknown format {shorten(fmt)}; expected one of {', '.join(FORMATS)}", source=source
        )
    limits = current_limits()
    size = len(text) if isinstance(text, bytes) or 4 * len(text) <= limits.file_bytes else None
    size = len(text.encode("utf-8")) if size is None else size  # type: ignore[union-attr]
    if size > limits.file_bytes:
        raise error(limits.exceeded("file_bytes", f"a text of {size} bytes"), source=source)
    if fmt != "yaml":
        return parse_networkx(text, fmt, source=source)
    if isinstance(text, bytes):
        text = text.decode("utf-8-sig")
    doc = parse_yaml(text, source=source, cls=error)
    if not isinstance(doc, dict):
        raise error(f"expected a mapping at the top level, got {type(doc).__name__}", source=source)
    return doc


@dataclass(frozen=True)
class Scope:
    """Where the reader is: the file, the key path in it, and the names in scope.

    Attributes
    ----------
    source
        The file being read, as errors name it.
    folder
        Its folder: files it names (``npz:``) are found relative to it.
    names
        Parameter, symbol and ``repeat``/``let`` values that expressions may use.
    key
        The key path being read, e.g. ``task.contexts[2].probability``.
    error
        The error class to raise: :class:`~gdln.GraphSpecError`, or
        :class:`~gdln.TaskSpecError` in a task.
    """

    source: str
    folder: Path
    names: Mapping[str, Any] = field(default_factory=dict, repr=False)
    key: str = ""
    error: type[GraphSpecError] = GraphSpecError

    def at(self, *parts: str | int) -> Scope:
        """The scope one or more keys further in: ``at("nodes", 0, "id")`` is ``nodes[0].id``.

        A string part starting with ``[`` or a space is appended as it is.
        """
        key = self.key
        for part in parts:
            if isinstance(part, int):
                key += f"[{part}]"
            elif key and not part.startswith(("[", " ")):
                key += "." + part
            else:
                key += part
        return Scope(self.source, self.folder, self.names, key, self.error)

    def with_key(self, key: str) -> Scope:
        """The scope at another key path (of the same file)."""
        return Scope(self.source, self.folder, self.names, key, self.error)

    def bind(self, names: Mapping[str, Any]) -> Scope:
        """The same place with other names in scope."""
        return Scope(self.source, self.folder, names, self.key, self.error)

    def fail(self, message: str) -> GraphSpecError:
        """The error to raise here (naming the file and key)."""
        return self.error(message, source=self.source, key=self.key or None)

    def evaluate(self, expression: Any) -> Any:
        """The value of an expression or a number (a YAML boolean is refused)."""
        if isinstance(expression, bool):
            raise self.fail(f"expected a number or an expression, got {describe(expression)}")
        try:
            return evaluate(expression, self.names)
        except ExpressionError as err:
            raise self.fail(str(err)) from err

    def number(self, expression: Any) -> Any:
        """Like :meth:`evaluate`, also refusing a condition (``M > 2``) or a text as a number."""
        if isinstance(expression, bool):
            raise self.fail(f"expected a number, got {describe(expression)}")
        value = self.evaluate(expression)
        if isinstance(value, bool):
            raise self.fail(f"expected a number, got {expression!r}, a condition ({value})")
        if isinstance(value, str):
            raise self.fail(f"expected a number, got {shorten(value)} (a text)")
        return value

    def render_at(self, part: str, template: Any, *, integer_ok: bool = False) -> str:
        """``self.at(part).render(template)``, the key built only for an error (hot path)."""
        if isinstance(template, str):
            try:
                return render(template, self.names)
            except ExpressionError:
                pass
        return self.at(part).render(template, integer_ok=integer_ok)

    def number_at(self, part: str, expression: Any) -> Any:
        """``self.at(part).number(expression)``, the key built only for an error."""
        if not isinstance(expression, bool):
            try:
                value = evaluate(expression, self.names)
                if not isinstance(value, (bool, str)):
                    return value
            except ExpressionError:
                pass
        return self.at(part).number(expression)

    def render(self, template: Any, *, integer_ok: bool = False) -> str:
        """Fill the ``{expression}`` fields of a text template, e.g. ``"x{i}"``.

        With ``integer_ok`` (node ids) an integer is taken as its decimal text.
        """
        what = "text or an integer" if integer_ok else "text"
        try:
            return render(text(template, self, integer_ok=integer_ok, what=what), self.names)
        except ExpressionError as err:
            raise self.fail(str(err)) from err


def describe(value: Any) -> str:
    """A value as a message shows it: ``the boolean true``, ``the number 1.5``, ``'x'``."""
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if value is None:
        return "nothing (null)"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return repr(value)
    return f"{type(value).__name__} {value!r}"


def text(value: Any, scope: Scope, *, integer_ok: bool = False, what: str = "text") -> str:
    """A field that must be text; YAML booleans and numbers are refused, with a hint to quote.

    ``integer_ok`` lets an integer stand for its decimal text (node ids).
    """
    if isinstance(value, str):
        return value
    if integer_ok and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    hint = ""
    if isinstance(value, (bool, int, float)):
        typed = str(value).lower() if isinstance(value, bool) else str(value)
        hint = f"; quote it ('{typed}') to mean the text"
    raise scope.fail(f"expected {what}, got {describe(value)}{hint}")


def printable_name(value: str, scope: Scope, *, what: str) -> str:
    """``value``, a name gdln prints (a node id, a label), refused unless printable text.

    A control character (ESC, BEL, NUL, a tab or a line break), a format character (a
    bidirectional override, a zero-width space), a separator other than the space, or an
    unassigned character has no business in a name, and printed raw it would act on the
    terminal (:func:`gdln.outputs.printable`).
    """
    bad = unprintable(value)
    if bad is not None:
        raise scope.fail(f"{what} {shorten(value)} holds {bad}; names must be printable text")
    return value


def name(value: Any, scope: Scope, *, what: str = "variable") -> str:
    """A name that expressions use: a parameter, symbol, ``repeat`` or ``let`` variable."""
    word = text(value, scope, what=f"a {what} name")
    if not word.isidentifier() or keyword.iskeyword(word):
        raise scope.fail(f"{what} {word!r} is not a name")
    if not word.isascii():  # Python reads the name 'ℎ' in an expression as 'h'
        raise scope.fail(f"{what} {word!r} is not plain ASCII; write names in ASCII")
    return word


def mapping(value: Any, scope: Scope) -> dict[Any, Any]:
    """A mapping (``None``, an empty entry, reads as ``{}``)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise scope.fail(f"expected a mapping, got {type(value).__name__} {shorten(value)}")
    return value


def sequence(value: Any, scope: Scope) -> list[Any]:
    """A list (``None``, an empty entry, reads as ``[]``)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise scope.fail(f"expected a list, got {type(value).__name__} {shorten(value)}")
    return value


def only(entry: Mapping[Any, Any], allowed: Set[str], scope: Scope) -> None:
    """Refuse keys of ``entry`` outside ``allowed``."""
    for key in entry:
        if key not in allowed:
            raise scope.fail(f"unknown key {key!r}; expected one of {sorted(allowed)}")


def entry_of(
    value: Any, scope: Scope, *, allowed: Set[str], required: tuple[str, ...] = ()
) -> dict[Any, Any]:
    """One entry of a list (a node, an edge, a context...): a mapping with known keys."""
    entry = mapping(value, scope)
    only(entry, allowed, scope)
    for key in required:
        if key not in entry:
            raise scope.fail(f"missing '{key}'")
    for key in ("repeat", "let"):  # mappings of names: {i: M}, {j: "i + 1"}
        if key in entry:
            mapping(entry[key], scope.at(key))
    return entry


def expand(entry: Mapping[str, Any], scope: Scope) -> Iterator[Scope]:
    """One scope per binding of an entry's ``repeat:`` variables, with its ``let:`` names."""
    ranges = _repeat_ranges(entry, scope)
    _count_bindings(ranges, scope)
    lets = mapping(entry.get("let", {}), scope.at("let"))
    variables = [(name(var, scope.at("let", str(var))), value) for var, value in lets.items()]
    for combo in itertools.product(*(values for _, values in ranges)):
        local = dict(scope.names)
        local.update({var: value for (var, _), value in zip(ranges, combo, strict=True)})
        for var, expression in variables:
            local[var] = scope.at("let", var).bind(local).evaluate(expression)
        yield scope.bind(local)


def simple_ids(
    entry: Mapping[str, Any], scope: Scope, keys: Sequence[str]
) -> list[tuple[str, ...]] | None:
    """The ids an entry's templates render to, per binding, when that needs no expressions.

    The fast path of :func:`expand` for ``repeat:`` entries without ``let:`` whose
    templates (``entry[key]`` for ``key`` in ``keys``) use only bare ``repeat``
    variables, such as ``x{i}``: the same ids, limits and order, in a fraction of the
    time. ``None`` when the entry is not of that form.
    """
    if not counted_repeat(entry) or "let" in entry:
        return None
    templates = [entry[key] for key in keys]
    if not all(isinstance(t, str) for t in templates):
        return None
    variables = [str(v) for v in entry["repeat"]]
    for t in templates:
        fields = [f.split("}")[0] for f in t.split("{")[1:]]
        if t.count("{") != t.count("}") or any(f not in variables for f in fields):
            return None
    ranges = _repeat_ranges(entry, scope)
    _count_bindings(ranges, scope)
    out = []
    for combo in itertools.product(*(values for _, values in ranges)):
        local = dict(zip(variables, combo, strict=True))
        out.append(tuple(t.format_map(local) for t in templates))
    return out


def counted_repeat(entry: Mapping[str, Any]) -> bool:
    """Whether an entry has a ``repeat:`` whose every range is a count (``{i: M}``)."""
    repeat = entry.get("repeat")
    return (
        isinstance(repeat, Mapping)
        and bool(repeat)
        and not any(isinstance(v, list) for v in repeat.values())
    )


def _count_bindings(ranges: list[tuple[str, list[Any]]], scope: Scope) -> None:
    """Refuse more bindings than :data:`MAX_COUNT`; count them against the entries limit."""
    total = math.prod(len(values) for _, values in ranges)
    if total > MAX_COUNT:
        counts = " x ".join(str(len(values)) for _, values in ranges)
        raise scope.at("repeat").fail(f"{counts} repetitions are above the limit of {MAX_COUNT}")
    count_entries(total, source=scope.source, key=scope.at("repeat").key, cls=scope.error)


def _repeat_ranges(entry: Mapping[str, Any], scope: Scope) -> list[tuple[str, list[Any]]]:
    """The values of each ``repeat:`` variable: a list, or ``range(count)``."""
    ranges: list[tuple[str, list[Any]]] = []
    for var, spec in mapping(entry.get("repeat", {}), scope.at("repeat")).items():
        here = scope.at("repeat", str(var))
        variable = name(var, here)
        if isinstance(spec, list):
            values = [here.evaluate(v) for v in spec]
        else:
            count = here.number(spec)
            if not isinstance(count, int) or count < 0:
                raise here.fail(
                    f"repeat count must be a non-negative integer, got {shorten(count)}"
                )
            if count > MAX_COUNT:
                raise here.fail(f"repeat count {shorten(count)} is above the limit of {MAX_COUNT}")
            values = list(range(count))
        ranges.append((variable, values))
    return ranges


def read_parameters(
    doc: Mapping[str, Any], overrides: Mapping[str, Any], scope: Scope
) -> dict[str, Any]:
    """The names a document defines: ``symbols:``, ``params:`` and ``derived:``.

    ``scope.names`` are names already known (a graph file's, for its task file);
    ``overrides`` replace declared values (``--param NAME=VALUE``) or bind a symbol. The
    document's ``checks:`` must hold for the result.
    """
    declared = mapping(doc.get("params", {}), scope.at("params"))
    names: dict[str, Any] = dict(scope.names)
    _read_symbols(doc, overrides, scope.bind(names), names)
    unknown = set(overrides) - set(declared) - set(names)
    if unknown:
        known = ", ".join(sorted(map(str, declared))) or "none"
        raise scope.at("params").fail(
            f"unknown parameter {sorted(unknown)[0]!r} (declared: {known})"
        )
    for key, value in declared.items():
        here = scope.at("params", str(key))
        parameter = name(key, here, what="parameter")
        names[parameter] = here.bind(names).evaluate(overrides.get(parameter, value))
    for key, value in mapping(doc.get("derived", {}), scope.at("derived")).items():
        here = scope.at("derived", str(key))
        names[name(key, here, what="derived")] = here.bind(names).evaluate(value)
    _check(doc, scope.bind(names))
    return names


def _read_symbols(
    doc: Mapping[str, Any], overrides: Mapping[str, Any], scope: Scope, names: dict[str, Any]
) -> None:
    """``symbols:``: positive sympy symbols, unless an override binds one to a value."""
    for index, symbol in enumerate(sequence(doc.get("symbols", []), scope.at("symbols"))):
        here = scope.at("symbols", index)
        word = name(symbol, here, what="symbol")
        if word in overrides:  # --param NAME=VALUE binds a declared symbol to a value
            names[word] = here.at(f" ({word})").bind(names).evaluate(overrides[word])
        else:
            names[word] = sp.Symbol(word, positive=True)


def _check(doc: Mapping[str, Any], scope: Scope) -> None:
    """``checks:``: conditions on the parameters, each with an optional message."""
    for index, check in enumerate(sequence(doc.get("checks", []), scope.at("checks"))):
        here = scope.at("checks", index)
        condition, message = (
            (check.get("expr"), check.get("message")) if isinstance(check, dict) else (check, None)
        )
        if not here.evaluate(condition):
            shown = ", ".join(
                f"{k}={v}" for k, v in scope.names.items() if not isinstance(v, sp.Symbol)
            )
            raise here.fail(f"{message or 'check failed'}: {condition} is false for {shown}")


def read_settings(doc: Mapping[str, Any], scope: Scope) -> Settings:
    """``solve:`` and ``simulate:``: the settings a file presets (:class:`~gdln.settings.Settings`).

    A numeric value may be an expression in the file's parameters (``t_max: 4*M``); every
    value is then read and checked by its declaration, with errors naming the file and key.
    """
    known = declarations()
    by_key = {d.file_key: d for d in known.values() if d.file_key}
    sections: dict[str, dict[str, Any]] = {}
    for section in SECTIONS:
        out: dict[str, Any] = {}
        for key, value in mapping(doc.get(section, {}), scope.at(section)).items():
            file_key = f"{section}.{key}"
            declaration = by_key.get(file_key) or (
                known[DEPRECATED_KEYS[file_key]] if file_key in DEPRECATED_KEYS else None
            )
            flag = declaration is not None and declaration.expected == "true or false"
            numeric = declaration is not None and declaration.choices is None and not flag
            if numeric and isinstance(value, (str, bool)):
                value = scope.at(section, key).number(value)
            out[key] = value
        sections[section] = out
    return Settings.from_file(sections, source=scope.source)
