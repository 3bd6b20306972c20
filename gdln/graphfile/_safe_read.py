"""Bounded reading of YAML graph and task files: every failure becomes one short GraphSpecError.

The file is read by the bounded reader every stage uses (:mod:`gdln._bounded._read`: its
kind and size checked before it is read, at most ``file_bytes + 1`` bytes, decoded
strictly); a YAML document is then first streamed as parser events, which cost no nesting
and no alias expansion, to check its depth and its expanded size against
:class:`~gdln.graphfile.Limits` before the document is built. JSON is read by the same
bounded reader; GraphML goes to networkx's parser (expat, which refuses external entities
and entity-expansion bombs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from .._bounded._limits import Limits, current_limits
from .._errors import GraphSpecError, shorten, shorten_text
from ..outputs import unprintable

__all__ = ["CoreSchemaLoader", "parse_yaml", "yaml_error_message"]

_SafeLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when installed
_LIBYAML_DEPTH = 1000  # libyaml's own nesting limit (PyYAML 6.0.4 on)
_ErrorClass = type[GraphSpecError]


class CoreSchemaLoader(_SafeLoader):  # type: ignore[misc,valid-type]
    """PyYAML's safe loader with the implicit types of the YAML 1.2 core schema.

    Built on libyaml's parser when it is installed. PyYAML follows YAML 1.1, which reads ``on``/``off``/``yes``/``no``/``y``/``n`` as
    booleans, ``010`` as 8, ``1:30`` as 90 and ``2024-01-01`` as a date. Here only
    ``true``/``false`` (in three spellings) are booleans; integers are decimal, ``0o``
    octal or ``0x`` hexadecimal; floats are decimal with ``.inf`` and ``.nan``; anything
    else is text.

    >>> yaml.load("{label: on, size: 010, t: 1:30, ok: true}", CoreSchemaLoader)
    {'label': 'on', 'size': 10, 't': '1:30', 'ok': True}

    A mapping that gives one key twice, or a key that is not printable text, is refused
    (:func:`_check_keys`), where PyYAML would keep the last value.
    """

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._checked: set[int] = set()

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        """PyYAML's merge of ``<<`` keys, after :func:`_check_keys` on the keys as written.

        PyYAML's ``flatten_mapping`` is the first thing done to a mapping (and the only
        thing that changes one: it prepends the merged pairs), so the keys the document
        wrote are checked once per mapping, before any merge, and a key that overrides a
        merged one (``{<<: *base, size: 3}``) is not taken for a repeat.
        """
        if id(node) not in self._checked:
            self._checked.add(id(node))
            _check_keys(self, node)
        super().flatten_mapping(node)


def _construct_int(loader: CoreSchemaLoader, node: yaml.ScalarNode) -> int:
    text = str(loader.construct_scalar(node))
    return int(text, 0) if text.startswith(("0o", "0x")) else int(text)


CoreSchemaLoader.yaml_implicit_resolvers = {}
for _tag, _pattern, _first in (
    ("null", r"~|null|Null|NULL|", ["~", "n", "N", ""]),
    ("bool", r"true|True|TRUE|false|False|FALSE", list("tTfF")),
    ("int", r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+", list("-+0123456789")),
    (
        "float",
        r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)",
        list("-+0123456789."),
    ),
    ("merge", r"<<", ["<"]),
):
    CoreSchemaLoader.add_implicit_resolver(
        f"tag:yaml.org,2002:{_tag}", re.compile(f"^(?:{_pattern})$"), _first
    )
CoreSchemaLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_MERGE = "tag:yaml.org,2002:merge"


def _check_keys(loader: CoreSchemaLoader, node: yaml.MappingNode) -> None:
    """Refuse a key written twice in one mapping, and a key that is not printable text.

    Two keys are one when they are equal (``1`` and ``1.0``) or read the same as text
    (``1`` and ``"1"``): gdln reads names as text. A merge key ``<<`` may appear once.
    """
    seen: dict[Any, tuple[Any, yaml.Node, yaml.Node]] = {}
    for key_node, value_node in node.value:
        key = "<<" if key_node.tag == _MERGE else loader.construct_object(key_node, deep=True)
        if isinstance(key, str) and (bad := unprintable(key)) is not None:
            raise _Refusal(
                None,
                f"the key {shorten(key, 40)} at column {key_node.start_mark.column + 1} holds {bad}; "
                "names must be printable text",
                where=f"line {key_node.start_mark.line + 1}",
            )
        try:
            hash(key)
        except TypeError:
            continue  # PyYAML refuses it ("found unhashable key")
        for same in (key, str(key)) if not isinstance(key, str) else (key,):
            if same in seen:
                raise _repeated(seen[same], (key, key_node, value_node))
        seen[key] = seen[str(key)] = (key, key_node, value_node)


def _repeated(
    first: tuple[Any, yaml.Node, yaml.Node], again: tuple[Any, yaml.Node, yaml.Node]
) -> _Refusal:
    """The refusal of a key written twice, naming both places and both values."""
    (key1, node1, value1), (key2, node2, value2) = first, again
    one, two = node1.start_mark, node2.start_mark
    at = (
        f"line {one.line + 1}, column {one.column + 1}"
        if one.line != two.line
        else (f"column {one.column + 1}")
    )
    what = (
        f"repeated key {shorten(key2, 40)}"
        if repr(key1) == repr(key2)
        else (f"the keys {shorten(key1, 40)} and {shorten(key2, 40)} are one name")
    )
    return _Refusal(
        None,
        f"{what}: {_shown(value1)} at {at}, then {_shown(value2)} at column {two.column + 1}; "
        "a mapping gives each key once",
        where=f"line {two.line + 1}",
    )


def _shown(node: yaml.Node) -> str:
    """A value as written, for a message: a plain scalar as its text, a quoted or empty
    one as its ``repr``, a collection by its kind."""
    if isinstance(node, yaml.ScalarNode):
        text = str(node.value)
        return shorten_text(text, 40) if text and not node.style else shorten(text, 40)
    return "a list" if isinstance(node, yaml.SequenceNode) else "a mapping"


_Loader = CoreSchemaLoader


@dataclass
class _Extent:
    """Size and depth of the YAML value being streamed and of each anchor seen so far."""

    limits: Limits
    total: int = 0  # values so far, aliases counted as what they stand for
    open: list[tuple[str | None, int]] = field(default_factory=list)
    heights: list[int] = field(default_factory=list)  # deepest nesting below each open one
    anchors: dict[str, tuple[int, int]] = field(default_factory=dict)  # size, height

    def add(self, size: int, height: int, where: str) -> None:
        self.total += size
        if self.total > self.limits.yaml_nodes:
            raise _Refusal("yaml_nodes", f"more than {self.limits.yaml_nodes} values {where}")
        depth = len(self.open) + height
        if depth > self.limits.depth:
            raise _Refusal("depth", f"nesting {depth} deep {where}")
        if self.heights:
            self.heights[-1] = max(self.heights[-1], height + 1)

    def start(self, anchor: str | None, where: str) -> None:
        self.add(1, 1, where)
        self.open.append((anchor, self.total - 1))
        self.heights.append(1)

    def end(self) -> None:
        anchor, before = self.open.pop()
        height = self.heights.pop()
        if self.heights:
            self.heights[-1] = max(self.heights[-1], height + 1)
        if anchor is not None:
            self.anchors[anchor] = (self.total - before, height)

    def alias(self, anchor: str, where: str) -> None:
        if any(name == anchor for name, _ in self.open):
            raise _Refusal(None, f"alias *{anchor} {where} refers to a collection holding it")
        size, height = self.anchors.get(anchor, (1, 0))
        self.add(size, height, f"{where} (through alias *{anchor})")


class _Refusal(Exception):
    """A YAML document refused by a limit (``limit``), or for what it is (``None``),
    at a place (``where``, e.g. ``"line 3"``) when it is known."""

    def __init__(self, limit: str | None, what: str, *, where: str | None = None):
        self.limit, self.what, self.where = limit, what, where


def _check_yaml_extent(text: str, limits: Limits) -> None:
    """Stream the parser's events and refuse a document too deep or too large.

    libyaml (bundled with PyYAML 6.0.4) refuses nesting deeper than its own limit of 1000,
    and its scanner reads a run of ``[`` or ``{`` ahead before the first event, so a deep
    document can fail there before gdln's count reaches its limit. Such a document is
    streamed again by PyYAML's pure-Python parser, which has no such limit, so that depth
    is reported the same way (``nesting N deep at line L``) with every PyYAML release.
    """
    try:
        _stream_extent(text, limits, _Loader)
    except yaml.MarkedYAMLError as err:
        if _SafeLoader is yaml.SafeLoader or "nesting depth" not in str(err.problem):
            raise
        _stream_extent(text, limits, yaml.SafeLoader)  # pure Python: refuses at gdln's limit
        line = "?" if err.problem_mark is None else err.problem_mark.line + 1
        raise _Refusal(
            None,
            f"nesting deeper than libyaml's limit of {_LIBYAML_DEPTH} at line {line}: "
            "PyYAML's parser refuses it whatever GDLN_MAX_DEPTH says",
        ) from None


def _stream_extent(text: str, limits: Limits, loader: Any) -> None:
    """:func:`_check_yaml_extent` on the events of ``loader``'s parser."""
    extent = _Extent(limits)
    for event in yaml.parse(text, Loader=loader):
        where = f"at line {event.start_mark.line + 1}"
        if isinstance(event, yaml.ScalarEvent):
            extent.add(1, 0, where)
            if event.anchor is not None:
                extent.anchors[event.anchor] = (1, 0)
        elif isinstance(event, yaml.CollectionStartEvent):
            extent.start(event.anchor, where)
        elif isinstance(event, yaml.CollectionEndEvent):
            extent.end()
        elif isinstance(event, yaml.AliasEvent):
            extent.alias(str(event.anchor), where)


def yaml_error_message(err: yaml.YAMLError, text: str) -> tuple[str, str | None]:
    r"""PyYAML's error on one line, with its cause, and where it is (``"line L"``).

    PyYAML's message spans several lines: what the parser was doing (``while parsing a
    flow mapping``, and where that started), the problem (``expected ',' or '}'``) and
    where it was found. All of it is kept, on one line, with the column and the text
    found there (libyaml's problems do not quote the character, such as a tab).

    >>> text = "nodes:\n\t- x\n"
    >>> try:
    ...     yaml.load(text, Loader=CoreSchemaLoader)
    ... except yaml.YAMLError as err:
    ...     message, where = yaml_error_message(err, text)
    >>> where, "cannot start any token" in message, r"there: '\t- x'" in message
    ('line 2', True, True)
    """
    if isinstance(err, yaml.reader.ReaderError):
        return (
            f"malformed YAML: {err.reason} (character #x{err.character:04x} at offset "
            f"{err.position})",
            None,
        )
    mark = getattr(err, "problem_mark", None)
    if not isinstance(err, yaml.MarkedYAMLError) or mark is None:
        return "malformed YAML: " + " ".join(str(err).split()), None
    lines = text.split("\n")
    found = lines[mark.line][mark.column : mark.column + 12] if mark.line < len(lines) else ""
    notes = [f"the text there: {found!r}" if found else "at the end of a line or of the file"]
    if err.context:
        started = err.context_mark
        if started is not None and (started.line, started.column) != (mark.line, mark.column):
            notes.append(f"{err.context} at line {started.line + 1}, column {started.column + 1}")
        else:
            notes.append(err.context)
    return (
        f"malformed YAML at column {mark.column + 1}: {err.problem} ({'; '.join(notes)})",
        f"line {mark.line + 1}",
    )


def parse_yaml(text: str, *, source: str, cls: _ErrorClass = GraphSpecError) -> Any:
    """Parse one YAML document (:class:`CoreSchemaLoader`), within the current limits."""
    limits = current_limits()
    try:
        _check_yaml_extent(text, limits)
        return yaml.load(text, Loader=_Loader)
    except _Refusal as refusal:
        what = (
            refusal.what if refusal.limit is None else limits.exceeded(refusal.limit, refusal.what)
        )
        raise cls(what, source=source, key=refusal.where) from None
    except yaml.YAMLError as err:
        message, where = yaml_error_message(err, text)
        raise cls(message, source=source, key=where) from err
    except RecursionError as err:  # the pure-Python composer recurses once per level
        raise cls(
            "nested too deep for PyYAML's pure-Python parser; lower GDLN_MAX_DEPTH or "
            "install PyYAML with libyaml",
            source=source,
        ) from err
    except (ValueError, TypeError, OverflowError) as err:  # an int of 5000 digits, a bad date
        raise cls(f"malformed YAML value: {err}".splitlines()[0], source=source) from err
