"""No value from a file or the command line runs code (issue 22, section 1).

``sympy.sympify`` of a string is ``eval``. Each test writes, at one place where a graph
file, a task or the command line takes a value, an expression whose text operand would
create a sentinel file if it ever reached ``sympify``, ``eval`` or ``exec``. The run must
end in a :class:`gdln.GdlnError` (one line and exit 2 on the command line) and the
sentinel must not exist. A last test reads the package's source and refuses any call that
can evaluate text outside a short list, each entry with its reason.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import networkx as nx
import pytest
import yaml
from helpers import GRAPHS, run_cli

import gdln

PACKAGE = Path(gdln.__file__).parent
BASE: dict[str, Any] = {
    "nodes": [{"id": "x", "size": 2}, {"id": "y", "size": 1}],
    "edges": [{"source": "x", "target": "y"}],
}
DATA = {"d": {"examples": {"x": [[1, 0], [0, 1]], "y": [[1], [0]]}}}


def _code(sentinel: Path) -> str:
    """Python source that creates ``sentinel`` when it is evaluated."""
    return f"__import__('pathlib').Path({str(sentinel)!r}).touch()"


def _text(sentinel: Path, operator: str = "/ 2") -> str:
    """An expression whose operand is that source as text: ``"<code>" / 2``."""
    return f"{_code(sentinel)!r} {operator}".strip()


def _task(probability: Any = 1, y: Any = None) -> dict[str, Any]:
    data = json.loads(json.dumps(DATA))
    if y is not None:
        data["d"]["examples"]["y"] = [[y], [0]]
    context = {"probability": probability, "dataset": "d", "inputs": {"x": "x"}}
    return {"datasets": data, "task": {"contexts": [{**context, "targets": {"y": "y"}}]}}


def _yaml(folder: Path, doc: dict[str, Any], name: str = "g.yaml") -> Path:
    path = folder / name
    path.write_text(yaml.safe_dump(doc))
    return path


def _params(s: Path) -> dict[str, Any]:
    return {**BASE, "params": {"n": _text(s)}}


def _derived(s: Path) -> dict[str, Any]:
    return {**BASE, "params": {"n": 1}, "derived": {"m": f"n + {_text(s)}"}}


def _size(s: Path) -> dict[str, Any]:
    return {**BASE, "nodes": [{"id": "x", "size": _text(s)}, {"id": "y", "size": 1}]}


def _probability(s: Path) -> dict[str, Any]:
    return {**BASE, **_task(probability=_text(s))}


def _matrix_entry(s: Path) -> dict[str, Any]:
    return {**BASE, **_task(y=_text(s, ""))}  # a text, no operator: sympy.Matrix sympifies it


def _init(s: Path) -> dict[str, Any]:
    return {**BASE, "solve": {"init": _text(s)}}


def _node_link(folder: Path, s: Path | None) -> Path:
    graph = nx.DiGraph()
    graph.add_node("x", size=2)
    graph.add_node("y", size=1 if s is None else 2)
    graph.add_edge("x", "y", **({} if s is None else {"fixed": _text(s)}))
    path = folder / "g.json"
    path.write_text(json.dumps(nx.node_link_data(graph, edges="links")))
    return path


def _graphml(folder: Path, s: Path) -> Path:
    graph = nx.DiGraph()
    graph.add_node("x", size=2)
    graph.add_node("y", size=2)
    graph.add_edge("x", "y", fixed=_text(s))
    path = folder / "g.graphml"
    nx.write_graphml(graph, path)
    return path


FILES: dict[str, Callable[[Path, Path], Path]] = {
    "params": lambda folder, s: _yaml(folder, _params(s)),
    "derived": lambda folder, s: _yaml(folder, _derived(s)),
    "node size": lambda folder, s: _yaml(folder, _size(s)),
    "context probability": lambda folder, s: _yaml(folder, _probability(s)),
    "dataset entry": lambda folder, s: _yaml(folder, _matrix_entry(s)),
    "solve.init": lambda folder, s: _yaml(folder, _init(s)),
    "node-link JSON edge attribute": _node_link,
    "GraphML edge attribute": _graphml,
}


def _one_line_refusal(code: int, out: str, err: str) -> None:
    assert (code, out) == (2, ""), (code, out, err)
    assert err.startswith("gdln: error: ") and err.count("\n") == 1, err


@pytest.mark.parametrize("where", sorted(FILES))
def test_a_file_value_never_runs_code(where: str, tmp_path: Path) -> None:
    sentinel = tmp_path / "SENTINEL"
    path = FILES[where](tmp_path, sentinel)
    with pytest.raises(gdln.GdlnError, match="text"):
        gdln.load(path)
    assert not sentinel.exists()


@pytest.mark.parametrize("where", sorted(FILES))
def test_a_file_value_never_runs_code_cli(
    where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sentinel = tmp_path / "SENTINEL"
    path = FILES[where](tmp_path, sentinel)
    _one_line_refusal(*run_cli(["paths", str(path)], capsys))
    assert not sentinel.exists()


def test_a_task_file_value_never_runs_code(tmp_path: Path) -> None:
    sentinel = tmp_path / "SENTINEL"
    graph = _yaml(tmp_path, BASE)
    task = _yaml(tmp_path, _task(probability=_text(sentinel)), "task.yaml")
    with pytest.raises(gdln.TaskSpecError, match="needs numbers, got the text"):
        gdln.load(graph, task=task)
    assert not sentinel.exists()


def test_a_param_override_never_runs_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sentinel = tmp_path / "SENTINEL"
    path = _yaml(tmp_path, {**BASE, "params": {"n": 1}})
    with pytest.raises(gdln.GraphSpecError, match=r"params\.n: .*/ needs numbers"):
        gdln.load(path, params={"n": _text(sentinel)})
    _one_line_refusal(*run_cli(["paths", str(path), "--param", f"n={_text(sentinel)}"], capsys))
    assert not sentinel.exists()


def test_a_param_override_of_a_networkx_graph_never_runs_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a node-link graph has no parameters of its own: --param names reach its task file
    sentinel = tmp_path / "SENTINEL"
    graph = _node_link(tmp_path, None)
    task = _yaml(tmp_path, _task(probability="n / 2"), "task.yaml")
    pair = f"n={_code(sentinel)}"  # was passed on as text, then divided
    _one_line_refusal(*run_cli(["paths", str(graph), "--task", str(task), "--param", pair], capsys))
    assert not sentinel.exists()


def test_a_b0_option_never_runs_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sentinel = tmp_path / "SENTINEL"
    init = _text(sentinel)
    _one_line_refusal(*run_cli(["derive", str(GRAPHS / "xor.yaml"), "--b0", init], capsys))
    assert not sentinel.exists()


def _quotient_file(folder: Path, sentinel: Path) -> Path:
    """Routing whose probability is text only when M is a symbol: ``M == 7`` holds for the
    file's M = 7, not for the symbol M of the symmetry quotient (``gdln derive --symbolic``)."""
    text = (GRAPHS / "routing.yaml").read_text()
    rule = json.dumps(f"1/(K*M) if M == 7 else {_code(sentinel)!r}")
    path = folder / "r.yaml"
    path.write_text(text.replace("probability: 1/(K*M)", f"probability: {rule}"))
    return path


def test_the_quotient_never_runs_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sentinel = tmp_path / "SENTINEL"
    path = _quotient_file(tmp_path, sentinel)
    problem = gdln.load(path)  # M = 7: the probability is 1/28
    with pytest.raises(gdln.GdlnError, match="expected a number, got the text"):
        gdln.reduce(problem, lump="symmetry", symbolic=["M"])
    _one_line_refusal(*run_cli(["derive", str(path), "--symbolic", "M"], capsys))
    assert not sentinel.exists()


# -- the package's source ------------------------------------------------------------------
# Calls that evaluate text, or unpickle, with why each allowed one cannot see a file's text.
ALLOWED = {
    ("reduction/_numeric.py", "exec"): "the source is printed by sympy from derived equations "
    "whose symbols are renamed y_i, c_i, x_i",
    ("reduction/_numeric.py", "lambdify"): "sympy expressions of the derivation, never text",
    ("graphfile/_safe_read.py", "yaml.load"): "Loader=CoreSchemaLoader, a SafeLoader "
    "(test_yaml_loader_is_safe)",
    ("sweep/_pool.py", "pickle.loads"): "the caller's own function, pickled by run_sweep in "
    "the same session and sent down a pipe to its worker process; nothing read from a file",
}
SYMPY = {"sympify", "parse_expr", "S", "lambdify"}  # called as sp.X, sympy.X or X
BUILTINS = {"eval", "exec", "compile", "__import__"}  # called by their bare name
UNPICKLING = {"pickle.load", "pickle.loads", "yaml.load", "yaml.unsafe_load", "yaml.full_load"}
EVALUATING = SYMPY | BUILTINS


def _call_name(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        owner = func.value.id if isinstance(func.value, ast.Name) else ""
        if owner in {"pickle", "yaml", "np", "numpy", "torch"}:
            return f"{owner}.{func.attr}"
        return func.attr if func.attr in SYMPY else ""
    return ""


def _risky_calls(path: Path) -> list[tuple[str, int]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        name = _call_name(node)
        if name in EVALUATING or name in UNPICKLING:
            out.append((name, node.lineno))
        elif name in {"np.load", "numpy.load", "torch.load"}:
            flags = {k.arg: k.value for k in node.keywords}
            pickles = flags.get("allow_pickle", flags.get("weights_only"))
            safe = isinstance(pickles, ast.Constant) and pickles.value is (name == "torch.load")
            if (name == "torch.load" or "allow_pickle" in flags) and not safe:
                out.append((name, node.lineno))
    return out


def test_no_call_can_evaluate_text() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        found += [
            f"{rel}:{line}: {name}()"
            for name, line in _risky_calls(path)
            if (rel, name) not in ALLOWED
        ]
    assert not found, "calls that can evaluate text or unpickle: " + ", ".join(found)


def test_the_scan_sees_such_calls(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        "import sympy as sp, numpy as np, pickle\n"
        "sp.sympify(x)\neval(y)\nsp.S(z)\nnp.load(f, allow_pickle=True)\npickle.loads(b)\n"
        "np.load(f, allow_pickle=False)\nre.compile(p)\ncompile(s, 'f', 'exec')\n"
    )
    assert [name for name, _ in _risky_calls(source)] == [
        "sympify",
        "eval",
        "S",
        "np.load",
        "pickle.loads",
        "compile",
    ]


def test_yaml_loader_is_safe() -> None:
    from gdln.graphfile._safe_read import _Loader

    assert issubclass(_Loader, (yaml.SafeLoader, getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
