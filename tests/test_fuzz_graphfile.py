"""Property-based fuzzing of graph files (issue 14): a valid Problem or a short GdlnError.

Random bytes, random YAML trees built from the graph-file vocabulary, and mutations of the
shipped graphs in ``graphs/`` (structural edits of the parsed document and byte edits of
its text, also as networkx node-link JSON and GraphML) are thrown at :func:`gdln.load` and
at ``gdln paths`` in-process. Every outcome must be a :class:`gdln.Problem` or a
:class:`gdln.GdlnError` subclass with a one-line message of at most 300 characters; any
other exception fails the test. The default run tries a few hundred files; the slow one
(``pytest -m slow``) tries 10 000 more.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import networkx as nx
import pytest
import yaml
from helpers import GRAPHS, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gdln

MESSAGE = 300
SHIPPED = {path.stem: path.read_text() for path in sorted(GRAPHS.glob("*.yaml"))}
KEYS = [
    "name", "params", "derived", "symbols", "checks", "nodes", "edges", "datasets", "task",
    "solve", "id", "size", "gated", "repeat", "let", "source", "target", "fixed", "contexts",
    "examples", "npz", "probability", "dataset", "builtin", "inputs", "targets", "active",
    "gates", "random_gates", "item", "p", "weight", "weights", "moments", "expr", "M", "K",
    "i", "j", "x", "y", "h", "init", "t_max", "lr", "lump", "label",
]  # fmt: skip
WORDS = [
    "x", "y", "h", "x{i}", "y{j}", "h{i+1}", "M", "i", "M+1", "1/0", "1/M", "2**5000",
    "10**7", "x->y", "{", "}", "{i", "pick(0, 0, 3, 1, 1)", "pick(i, k, M, K, 0)", "sqrt(-1)",
    "isqrt(-1)", "min()", "abs('a')", "sqrt('a b')", "1e400", "0.5", "true", "a b",
    "__import__('os')", "x.y", "[1]", "(1,", "-" * 300 + "1", "+".join("1" * 200),
    "i if M else j", "not M", "M > 2 and K", "hierarchy", "whitened", "full", "symmetry",
]  # fmt: skip
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 12),
    st.sampled_from([0, 10**6, 10**6 + 1, 10**7, 2**70, -(10**9)]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(WORDS),
    TEXT,
)
TREES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(KEYS), TEXT), inner, max_size=4),
    ),
    max_leaves=25,
)
DOCUMENTS = st.dictionaries(st.sampled_from(KEYS), TREES, max_size=6)


def _fuzz(examples: int) -> Callable[[Any], Any]:
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.function_scoped_fixture,  # capsys: run_cli reads it out every time
        ],
    )


def _loads_or_refuses(data: bytes, suffix: str) -> None:
    """The property: ``gdln.load`` gives a Problem or a GdlnError with a short message."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"fuzzed{suffix}"
        path.write_bytes(data)
        try:
            problem = gdln.load(path)
        except gdln.GdlnError as err:
            message = str(err)
            assert "\n" not in message and len(message) <= MESSAGE, message
            return
    assert isinstance(problem, gdln.Problem)
    assert problem.graph.number_of_nodes() > 0


def _cli_succeeds_or_refuses(data: bytes, suffix: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The property through ``gdln paths``: exit 0, or exit 2 and one short line."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"fuzzed{suffix}"
        path.write_bytes(data)
        code, out, err = run_cli(["paths", str(path)], capsys)
    if code == 0:
        assert out and not err
        return
    assert (code, out) == (2, ""), err
    assert err.startswith("gdln: error: ") and err.count("\n") == 1, err
    assert len(err.strip()) <= MESSAGE, err


# -- generators ----------------------------------------------------------------------------
def _places(doc: Any) -> list[tuple[Any, Any]]:
    """Every (container, key or index) of a parsed document, found without recursion."""
    out: list[tuple[Any, Any]] = []
    pending = [doc]
    while pending:
        value = pending.pop()
        keys = list(value) if isinstance(value, dict) else range(len(value))
        for key in keys:
            out.append((value, key))
            if isinstance(value[key], (dict, list)):
                pending.append(value[key])
    return out


@st.composite
def mutated_documents(draw: st.DrawFn, base: Callable[[], Any]) -> Any:
    """A parsed document with a few random edits: delete, replace, duplicate, rename."""
    doc = base()
    for _ in range(draw(st.integers(1, 4))):
        places = _places(doc)
        if not places:
            break
        container, key = places[draw(st.integers(0, len(places) - 1))]
        action = draw(st.sampled_from(["delete", "replace", "duplicate", "rename"]))
        if action == "delete":
            del container[key]
        elif action == "replace":
            container[key] = draw(TREES)
        elif action == "duplicate" and isinstance(container, list):
            container.append(json.loads(json.dumps(container[key], default=str)))
        elif action == "rename" and isinstance(container, dict):
            container[draw(st.one_of(st.sampled_from(KEYS), TEXT))] = container.pop(key)
    return doc


@st.composite
def mutated_bytes(draw: st.DrawFn, text: str) -> bytes:
    """``text`` with a few bytes deleted, inserted or replaced."""
    data = bytearray(text.encode())
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        action = draw(st.sampled_from(["delete", "insert", "replace"]))
        chunk = draw(st.one_of(st.binary(max_size=6), st.sampled_from([b"&a", b"*a", b"[", b"{"])))
        if action == "delete":
            del data[at : at + draw(st.integers(1, 20))]
        elif action == "insert":
            data[at:at] = chunk
        else:
            data[at : at + len(chunk)] = chunk
    return bytes(data)


def _yaml(doc: Any) -> bytes:
    return yaml.safe_dump(doc, allow_unicode=True).encode()


def _shipped_doc(name: str) -> Callable[[], Any]:
    return lambda: yaml.safe_load(SHIPPED[name])


def _node_link(name: str) -> dict[str, Any]:
    graph = gdln.load(
        GRAPHS / f"{name}.yaml", params={"M": "3", "K": "2"} if name == "routing" else {}
    )
    for _, _, attrs in graph.graph.edges(data=True):  # sympy values as expressions
        attrs.update({k: str(v) for k, v in attrs.items() if k == "fixed"})
    return nx.node_link_data(graph.graph, edges="links")


NODE_LINK = {name: _node_link(name) for name in ("xor", "routing", "resnet_sd")}
GRAPHML = {name: "\n".join(nx.generate_graphml(nx.node_link_graph(data, edges="links")))
           for name, data in NODE_LINK.items()}  # fmt: skip

SHIPPED_NAMES = st.sampled_from(sorted(SHIPPED))
YAML_FILES = st.one_of(
    st.builds(_yaml, DOCUMENTS),
    SHIPPED_NAMES.flatmap(lambda n: mutated_documents(_shipped_doc(n))).map(_yaml),
    SHIPPED_NAMES.flatmap(lambda n: mutated_bytes(SHIPPED[n])),
)
JSON_FILES = st.one_of(
    st.sampled_from(sorted(NODE_LINK))
    .flatmap(lambda n: mutated_documents(lambda: json.loads(json.dumps(NODE_LINK[n]))))
    .map(lambda doc: json.dumps(doc, default=str).encode()),
    st.sampled_from(sorted(NODE_LINK)).flatmap(lambda n: mutated_bytes(json.dumps(NODE_LINK[n]))),
)
GRAPHML_FILES = st.sampled_from(sorted(GRAPHML)).flatmap(lambda n: mutated_bytes(GRAPHML[n]))
ANY_FILE = st.one_of(
    st.tuples(YAML_FILES, st.just(".yaml")),
    st.tuples(JSON_FILES, st.just(".json")),
    st.tuples(GRAPHML_FILES, st.just(".graphml")),
    st.tuples(st.binary(max_size=3000), st.sampled_from([".yaml", ".json", ".graphml"])),
)


# -- the properties --------------------------------------------------------------------
@_fuzz(60)
@given(data=st.binary(max_size=3000), suffix=st.sampled_from([".yaml", ".json", ".graphml"]))
def test_random_bytes(data: bytes, suffix: str) -> None:
    _loads_or_refuses(data, suffix)


@_fuzz(100)
@given(data=st.builds(_yaml, DOCUMENTS))
def test_random_yaml_trees(data: bytes) -> None:
    _loads_or_refuses(data, ".yaml")


@_fuzz(100)
@given(data=YAML_FILES)
def test_mutated_shipped_graphs(data: bytes) -> None:
    _loads_or_refuses(data, ".yaml")


@_fuzz(60)
@given(data=JSON_FILES)
def test_mutated_node_link_json(data: bytes) -> None:
    _loads_or_refuses(data, ".json")


@_fuzz(60)
@given(data=GRAPHML_FILES)
def test_mutated_graphml(data: bytes) -> None:
    _loads_or_refuses(data, ".graphml")


@_fuzz(60)
@given(file=ANY_FILE)
def test_cli_in_process(file: tuple[bytes, str], capsys: pytest.CaptureFixture[str]) -> None:
    _cli_succeeds_or_refuses(*file, capsys)


@pytest.mark.slow
@_fuzz(10_000)
@given(file=ANY_FILE)
def test_many_files(file: tuple[bytes, str]) -> None:
    _loads_or_refuses(*file)


@pytest.mark.slow
@_fuzz(2_000)
@given(file=ANY_FILE)
def test_many_files_cli(file: tuple[bytes, str], capsys: pytest.CaptureFixture[str]) -> None:
    _cli_succeeds_or_refuses(*file, capsys)
