"""Property-based fuzzing of graph files (issue 14): a valid Problem or a short GdlnError.

Random bytes, random YAML trees built from the graph-file vocabulary, and mutations of the
shipped graphs in ``graphs/`` (structural edits of the parsed document and byte edits of
its text, also as networkx node-link JSON and GraphML) are thrown at :func:`gdln.load` and
at ``gdln paths`` in-process. Every outcome must be a :class:`gdln.Problem` or a
:class:`gdln.GdlnError` subclass with a one-line message of at most 300 characters; any
other exception fails the test. The default run tries a few hundred files; the slow one
(``pytest -m slow``) tries 10 000 more.

Structured documents (issue 22) start from the shipped graphs at small parameters and edit
them as a careless user would: a value of the wrong type at any key, a deleted key, an
unknown key, probabilities that do not sum to 1 or are symbolic, a scalar where
``repeat:`` expects a mapping. Whatever loads is taken on through ``problem.examples()``,
:func:`gdln.reduce` (with each lumping) and a two-step :func:`gdln.simulate`; each stage
must give its result or a one-line :class:`gdln.GdlnError`. What this fuzz found is kept
as the ``test_found_*`` tests.
"""

from __future__ import annotations

import copy
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

# an edit may write an old key (``init`` under ``solve:``), which is read with a
# deprecation warning: the behaviour the tests of old spellings check, not a failure here
pytestmark = pytest.mark.filterwarnings("ignore::gdln._errors.GdlnDeprecationWarning")

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


# -- structured documents (issue 22) ---------------------------------------------------------
SMALL_PARAMS = {  # the shipped graphs at sizes every stage handles in milliseconds
    "context": {"hidden": 2},
    "race": {"M": 4, "P": 4, "hidden": 2},
    "resnet_sd": {"L": 2, "width": 2},
    "routing": {"M": 3, "K": 2, "hidden": 2},
}
WRONG = st.deferred(lambda: _WRONG).map(copy.deepcopy)  # sampled lists and dicts are shared
_WRONG = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([0, -1, 2, 7, 0.5, 1e300, float("nan"), float("inf"), 10**6 + 1]),
    st.sampled_from(["x", "M", "s", "s/2", "1/3", "'text'", "x{i}", "{", "1 +", "ℎ", ""]),
    st.sampled_from([[], {}, [1], [[1, 0]], {"i": 2}, {"x": "y"}, [None], {"i": [0, 1]}]),
)
PROBABILITIES = st.sampled_from(
    [0, 1, 2, -1, 0.3, "1/3", "s", "s/2", "1 - s", "2*s", "'p'", None, [], "1/0"]
).map(copy.deepcopy)
REPEATS = st.sampled_from([2, "M", 0, -1, "s", "x", None, [0, 1], {"i": "s"}, {"i": [0, "x"]}]).map(
    copy.deepcopy
)


def _small(name: str) -> dict[str, Any]:
    doc = yaml.safe_load(SHIPPED[name])
    doc.setdefault("params", {}).update(SMALL_PARAMS.get(name, {}))
    return doc


def _dicts_with(doc: Any, key: str) -> list[dict[str, Any]]:
    return [c[k] for c, k in _places(doc) if isinstance(c[k], dict) and key in c[k]] + (
        [doc] if key in doc else []
    )


ACTIONS = ["type", "delete", "unknown", "probability", "sum", "symbolic", "repeat", "symbols"]


@st.composite
def structured_documents(draw: st.DrawFn) -> dict[str, Any]:
    """A small shipped graph with one or two edits of the kinds a person makes."""
    doc = _small(draw(st.sampled_from(sorted(SHIPPED))))
    for _ in range(draw(st.integers(1, 2))):
        action = draw(st.sampled_from(ACTIONS))
        places = _places(doc)
        if action in ("type", "delete") and places:
            container, key = places[draw(st.integers(0, len(places) - 1))]
            if action == "type":
                container[key] = draw(WRONG)  # a value of another type (or out of range)
            else:
                del container[key]
        elif action == "unknown":
            targets = [doc] + [c[k] for c, k in places if isinstance(c[k], dict)]
            target = targets[draw(st.integers(0, len(targets) - 1))]
            target[draw(st.one_of(st.sampled_from(KEYS), TEXT))] = draw(WRONG)
        elif action in ("probability", "sum", "symbolic"):  # contexts and random gates
            if action == "symbolic":
                doc["symbols"] = ["s"]
            values = {
                "probability": PROBABILITIES,
                "sum": st.sampled_from([0.3, 0.5, "1/3", 1, 0]),  # need not sum to 1
                "symbolic": st.sampled_from(["s", "s/2", "1 - s", "s**2", "s*s"]),
            }[action]
            for entry in _dicts_with(doc, "probability") + _dicts_with(doc, "p"):
                entry["probability" if "probability" in entry else "p"] = draw(values)
        elif action == "repeat":  # a scalar (or a bad range) where a mapping is expected
            entries = _dicts_with(doc, "repeat")
            if entries:
                entries[draw(st.integers(0, len(entries) - 1))]["repeat"] = draw(REPEATS)
        elif action == "symbols":
            symbols = st.sampled_from([["s"], "s", [1], [["s"]], ["s", "s"], None, ["M"]])
            doc["symbols"] = copy.deepcopy(draw(symbols))
    return doc


def _stage(run: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """One stage of the pipeline: its result, or ``None`` after a one-line GdlnError.

    A file's errors are also short (:data:`MESSAGE`); later ones may list more (the
    statistics that have no common bases, say).
    """
    try:
        return run(*args, **kwargs)
    except gdln.GdlnError as err:
        message = str(err)
        assert "\n" not in message, message
        assert len(message) <= (MESSAGE if run is gdln.load else 4 * MESSAGE), message
        return None


def _small_enough(problem: gdln.Problem) -> bool:
    """Whether the later stages stay cheap: small nodes, few contexts."""
    graph, task = problem.graph, problem.task
    return (
        task is not None
        and max(size for _, size in graph.nodes(data="size")) <= 16
        and graph.number_of_edges() <= 40
        and len(task.contexts) <= 64
    )


def _pipeline(doc: dict[str, Any], lump: str = "symmetry") -> None:
    """The property through every stage: load, examples, reduce, simulate."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "fuzzed.yaml"
        path.write_bytes(_yaml(doc))
        problem = _stage(gdln.load, path)
    if problem is None or not _small_enough(problem):
        return
    examples = _stage(problem.examples)
    _stage(gdln.reduce, problem, lump=lump)
    if examples is not None:
        settings = dict(threads=1, device="cpu")
        _stage(gdln.simulate, problem.graph, examples, steps=2, lr=0.01, **settings)


LUMPS = st.sampled_from(["none", "symmetry", "balanced", "full"])


@_fuzz(50)
@given(doc=structured_documents(), lump=LUMPS)
def test_structured_documents_through_every_stage(doc: dict[str, Any], lump: str) -> None:
    _pipeline(doc, lump)


@pytest.mark.slow
@_fuzz(3_000)
@given(doc=structured_documents(), lump=LUMPS)
def test_many_structured_documents_through_every_stage(doc: dict[str, Any], lump: str) -> None:
    _pipeline(doc, lump)


def _found_scalar_repeat() -> dict[str, Any]:
    doc = _small("routing")
    doc["nodes"][0]["repeat"] = 3
    return doc


def _found_symbolic_probability() -> dict[str, Any]:
    doc = _small("context")
    doc["symbols"] = ["s"]
    doc["task"]["contexts"][0]["probability"] = "s"
    return doc


def _found_missing_moment() -> dict[str, Any]:
    doc = _small("context")
    del doc["datasets"]["first"]["moments"]["y"]["x"]
    return doc


def _found_repeated_label() -> dict[str, Any]:
    doc = _small("context")
    del doc["task"]["contexts"][0]["label"]  # both contexts default to the label 'x->y'
    doc.pop("schedule", None)  # (it names the labels removed here)
    return doc


def _write_doc(tmp_path: Path, doc: dict[str, Any]) -> Path:
    path = tmp_path / "g.yaml"
    path.write_bytes(_yaml(doc))
    return path


def test_found_a_scalar_repeat(tmp_path: Path) -> None:  # was TypeError: 'int' ... not iterable
    path = _write_doc(tmp_path, _found_scalar_repeat())
    with pytest.raises(
        gdln.GraphSpecError, match=r"nodes\[0\]\.repeat: expected a mapping, got int 3"
    ):
        gdln.load(path)


def test_found_a_symbolic_probability(tmp_path: Path) -> None:  # was TypeError from examples()
    problem = gdln.load(_write_doc(tmp_path, _found_symbolic_probability()))
    with pytest.raises(gdln.TaskSpecError, match=r"context 'context0': symbol 's' .* has no value"):
        problem.examples()


def test_found_a_missing_moment(tmp_path: Path) -> None:  # was KeyError from reduce
    problem = gdln.load(_write_doc(tmp_path, _found_missing_moment()))
    with pytest.raises(gdln.TaskSpecError, match=r"dataset 'first' gives no moment <y x\^T>"):
        gdln.reduce(problem)


def test_found_a_repeated_label(tmp_path: Path) -> None:  # was ValueError: 'loss/x->y' 6 rows
    problem = gdln.load(_write_doc(tmp_path, _found_repeated_label()))
    assert [c.label for c in problem.task.contexts] == ["x->y", "x->y#1"]
    settings = dict(threads=1, device="cpu")
    run = gdln.simulate(problem.graph, problem.examples(), steps=2, lr=0.01, **settings)
    assert {"loss/x->y", "loss/x->y#1"} <= set(run.series)
