"""Hostile graph and task files (issue 14): each gets one short GdlnError, fast.

Every kind of file that used to crash, hang or exhaust memory is built here in ``tmp_path``
and thrown at :func:`gdln.load` and at the CLI in-process: the load must raise a
:class:`gdln.GraphSpecError` (a ``TaskSpecError`` for a task file) whose message names the
file and stays within 300 characters, within 10 s. The slow test repeats the CLI runs in
subprocesses under a 1 GiB address-space cap and a 10 s timeout.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import ROOT, run_cli

import gdln
from gdln.graphfile import Limits

SECONDS = 10.0
MESSAGE = 300
VALID = "nodes: [{id: x, size: 1}, {id: y, size: 1}]\nedges: [{source: x, target: y}]\n"


def _bomb(anchor_key: str = "description") -> str:
    """A "billion laughs" alias bomb: 9 levels of 9 aliases, 9**9 strings once expanded."""
    levels = ['&l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    levels += [f"&l{n} [{','.join([f'*l{n - 1}'] * 9)}]" for n in range(1, 9)]
    return f"{anchor_key}: [{', '.join(levels)}]\n"


def _sum(terms: int) -> str:
    return "+".join(["1"] * terms)


HOSTILE_YAML: dict[str, bytes] = {
    "binary": bytes(range(256)) * 8,
    "latin1": ("name: café\n" + VALID).encode("latin-1"),
    "bomb_in_id": (_bomb() + "nodes: [{id: *l8, size: 1}]\nedges: []\n").encode(),
    "bomb_in_size": (_bomb() + "nodes: [{id: x, size: *l8}]\nedges: []\n").encode(),
    "bomb_in_params": (_bomb() + "params: {M: *l8}\n" + VALID).encode(),
    "bomb_in_repeat": (
        _bomb() + "nodes: [{id: 'x{i}', size: 1, repeat: {i: *l8}}]\nedges: []\n"
    ).encode(),
    "recursive_alias": b"nodes: &a [{id: x, size: 1, gated: *a}]\nedges: []\n",
    "deep_yaml": ("nodes: " + "[" * 5000 + "]" * 5000 + "\n").encode(),
    "deep_yaml_block": ("nodes:\n" + "".join(" " * n + "- \n" for n in range(300))).encode(),
    "long_expression_in_size": f"nodes: [{{id: x, size: '{_sum(20_000)}'}}]\n".encode(),
    "long_expression_in_params": (f"params: {{M: '{_sum(20_000)}'}}\n" + VALID).encode(),
    "deep_expression": ("nodes: [{id: x, size: '" + "-" * 1500 + "1'}]\n").encode(),
    "size_true": b"nodes: [{id: x, size: true}, {id: y, size: 1}]\nedges: [{source: x, target: y}]\n",
    "repeat_true": b"nodes: [{id: 'x{i}', size: 1, repeat: {i: true}}]\nedges: []\n",
    "repeat_number": b"nodes: [{id: 'x{i}', size: 1, repeat: 1}]\nedges: []\n",
    "repeat_million": (
        b"nodes: [{id: 'x{i}', size: 1, repeat: {i: 1000000}}, {id: y, size: 1}]\n"
        b"edges: [{source: 'x{i}', target: y, repeat: {i: 1000000}}]\n"
    ),
    "huge_number": ("nodes: [{id: x, size: " + "9" * 240 + "}]\nedges: []\n").encode(),
    "int_of_5000_digits": ("nodes: [{id: x, size: " + "9" * 5000 + "}]\nedges: []\n").encode(),
    "nul_in_expression": b'nodes: [{id: x, size: "1\\0"}]\nedges: []\n',
}


def _write(tmp_path: Path, name: str, data: bytes, suffix: str = ".yaml") -> Path:
    path = tmp_path / f"{name}{suffix}"
    path.write_bytes(data)
    return path


def _directory(tmp_path: Path) -> Path:
    path = tmp_path / "folder.yaml"
    path.mkdir()
    return path


def _huge_file(tmp_path: Path) -> Path:
    """A 100 MB file (sparse: its size is set without writing it)."""
    path = tmp_path / "huge.yaml"
    with path.open("wb") as handle:
        handle.write(VALID.encode())
        handle.truncate(100 * 2**20)
    return path


def _link_loop(tmp_path: Path) -> Path:
    (tmp_path / "a.yaml").symlink_to(tmp_path / "b.yaml")
    (tmp_path / "b.yaml").symlink_to(tmp_path / "a.yaml")
    return tmp_path / "a.yaml"


def _deep_json(tmp_path: Path) -> Path:
    text = '{"directed": true, "nodes": ' + "[" * 100_000 + "]" * 100_000 + ', "links": []}'
    return _write(tmp_path, "deep", text.encode(), ".json")


def _shallow_deep_json(tmp_path: Path) -> Path:
    """Nested deeper than the limit, yet shallow enough for the json module."""
    text = '{"directed": true, "nodes": [], "links": [], "graph": {"a": ' + "[" * 500
    return _write(tmp_path, "deepish", (text + "]" * 500 + "}}").encode(), ".json")


def _graphml_bomb(tmp_path: Path) -> Path:
    entities = '<!ENTITY a0 "lol">' + "".join(
        f'<!ENTITY a{n} "{f"&a{n - 1};" * 10}">' for n in range(1, 10)
    )
    text = f'<?xml version="1.0"?><!DOCTYPE g [{entities}]><graphml><key>&a9;</key></graphml>'
    return _write(tmp_path, "bomb", text.encode(), ".graphml")


def _graphml_external(tmp_path: Path) -> Path:
    secret = tmp_path / "secret.txt"
    secret.write_text("size")
    text = (
        f'<?xml version="1.0"?><!DOCTYPE g [<!ENTITY x SYSTEM "file://{secret}">]>'
        '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">'
        '<key id="d0" for="node" attr.name="&x;" attr.type="int"/>'
        '<graph edgedefault="directed"><node id="x"><data key="d0">1</data></node></graph>'
        "</graphml>"
    )
    return _write(tmp_path, "external", text.encode(), ".graphml")


def _null_graph_json(tmp_path: Path) -> Path:
    text = '{"directed": true, "multigraph": false, "graph": null, "nodes": [{"id": "x", "size": 1}], "links": []}'
    return _write(tmp_path, "null_graph", text.encode(), ".json")


BUILDERS: dict[str, Callable[[Path], Path]] = {
    **{name: (lambda p, n=name, d=data: _write(p, n, d)) for name, data in HOSTILE_YAML.items()},
    "directory": _directory,
    "huge_file": _huge_file,
    "link_loop": _link_loop,
    "deep_json": _deep_json,
    "null_graph_json": _null_graph_json,
    "shallow_deep_json": _shallow_deep_json,
    "graphml_entity_bomb": _graphml_bomb,
    "graphml_external_entity": _graphml_external,
}


def _check_message(err: BaseException, source: Path) -> str:
    message = str(err)
    assert "\n" not in message
    assert len(message) <= MESSAGE, message
    assert str(source)[-20:] in message or source.name in message, message
    return message


@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_load_refuses_hostile_file(kind: str, tmp_path: Path) -> None:
    path = BUILDERS[kind](tmp_path)
    start = time.perf_counter()
    with pytest.raises(gdln.GraphSpecError) as info:
        gdln.load(path)
    assert time.perf_counter() - start < SECONDS
    _check_message(info.value, path)


@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_cli_refuses_hostile_file(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = BUILDERS[kind](tmp_path)
    start = time.perf_counter()
    code, out, err = run_cli(["paths", str(path)], capsys)
    assert time.perf_counter() - start < SECONDS
    assert (code, out) == (2, "")
    assert err.startswith("gdln: error: ") and err.count("\n") == 1, err
    assert len(err.strip()) <= MESSAGE, err


@pytest.mark.parametrize(
    ("kind", "match"),
    [
        ("binary", "not UTF-8 text: byte 0x80 at line 2"),
        ("latin1", "not UTF-8 text: byte 0xe9 at line 1"),
        ("directory", "is a directory"),
        (
            "huge_file",
            r"104857600 bytes exceeds the limit file_bytes=10485760 \(raise it: GDLN_MAX",
        ),
        ("link_loop", "cannot read the file: Too many levels of symbolic links"),
        ("bomb_in_id", "more than 250000 values .* exceeds the limit yaml_nodes=250000"),
        ("recursive_alias", r"alias \*a at line 1 refers to a collection holding it"),
        ("deep_yaml", "nesting 101 deep at line 1 exceeds the limit depth=100"),
        ("deep_yaml_block", "nesting 101 deep at line 101 exceeds the limit depth=100"),
        ("deep_json", "deeply nested JSON exceeds the limit depth=100"),
        ("null_graph_json", "node 'x' has no edges"),
        ("shallow_deep_json", "nesting 101 deep exceeds the limit depth=100"),
        ("long_expression_in_size", "nodes.0..size: .* of 39999 chars exceeds the limit expr"),
        ("long_expression_in_params", "params.M: .* of 39999 chars exceeds the limit expression_"),
        ("deep_expression", "nests 1501 deep exceeds the limit expression_depth=100"),
        ("size_true", r"nodes\[0\].size: expected a number, got the boolean true"),
        ("repeat_true", r"nodes\[0\].repeat.i: expected a number, got the boolean true"),
        ("repeat_number", r"nodes\[0\].repeat: expected a mapping, got int 1"),
        ("repeat_million", r"nodes\[0\]\.repeat: 1000000 entries exceeds the limit entries=500000"),
        ("huge_number", r"size 9{28}\.\.\.9{28} \(240 digits\) is above"),
        ("int_of_5000_digits", "malformed YAML value: Exceeds the limit"),
        ("nul_in_expression", "cannot parse expression"),
        ("graphml_entity_bomb", "cannot read graph: .*(amplification|entity)"),
        ("graphml_external_entity", "cannot read graph: .*(external|undefined) entity"),
    ],
)
def test_hostile_message_names_the_problem(kind: str, match: str, tmp_path: Path) -> None:
    path = BUILDERS[kind](tmp_path)
    with pytest.raises(gdln.GraphSpecError, match=match) as info:
        gdln.load(path)
    _check_message(info.value, path)


def test_limits_are_raised_by_keyword_and_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path, "small", VALID.encode())
    assert gdln.load(path).graph.number_of_nodes() == 2
    with pytest.raises(gdln.GraphSpecError, match="exceeds the limit file_bytes=10 "):
        gdln.load(path, limits=Limits(file_bytes=10))
    monkeypatch.setenv("GDLN_MAX_FILE_BYTES", "10")
    with pytest.raises(gdln.GraphSpecError, match="limit file_bytes=10 "):
        gdln.load(path)
    assert gdln.load(path, limits=Limits()).graph.number_of_nodes() == 2
    monkeypatch.setenv("GDLN_MAX_FILE_BYTES", "ten")
    with pytest.raises(gdln.GraphSpecError, match="GDLN_MAX_FILE_BYTES: expected a positive"):
        gdln.load(path)
    with pytest.raises(gdln.GraphSpecError, match=r"Limits.depth: expected a positive integer"):
        Limits(depth=0)


def test_raised_limits_let_a_large_legitimate_file_through(tmp_path: Path) -> None:
    """A sum of 150 terms nests 151 deep: refused by default, read with a raised limit."""
    path = _write(tmp_path, "sum", f"nodes: [{{id: x, size: '{_sum(150)}'}}]\nedges: []\n".encode())
    with pytest.raises(gdln.GraphSpecError, match="expression_depth=100"):
        gdln.load(path)
    with pytest.raises(gdln.GraphSpecError, match="node 'x' has no edges"):
        gdln.load(path, limits=Limits(expression_depth=200))


def test_yaml_anchors_within_the_limits_still_work(tmp_path: Path) -> None:
    text = (
        "description: [&size 3, &gated {gated: true}]\n"
        "nodes: [{id: x, size: *size}, {id: h, size: *size}, {id: y, size: 1}]\n"
        "edges: [{source: x, target: h, <<: *gated}, {source: h, target: y}]\n"
    )
    graph = gdln.load(_write(tmp_path, "anchors", text.encode())).graph
    assert graph.nodes["h"]["size"] == 3 and graph.edges["x", "h"]["gated"]


def test_unreadable_file_and_task_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path, "valid", VALID.encode())
    with pytest.raises(gdln.TaskSpecError, match=r"task\.yaml: is a directory; expected a task"):
        gdln.load(path, task=_directory(tmp_path).rename(tmp_path / "task.yaml"))
    latin = _write(tmp_path, "latin_task", b"datasets: {caf\xe9: {}}\n")
    with pytest.raises(gdln.TaskSpecError, match=r"latin_task\.yaml: not UTF-8 text: byte 0xe9"):
        gdln.load(path, task=latin)

    real_open = os.open

    def refuse(file: str | Path, flags: int, *args: int, **kwargs: object) -> int:
        if Path(file) == path:
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, flags, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", refuse)
    with pytest.raises(gdln.GraphSpecError, match=r"valid\.yaml: cannot read the file: Permission"):
        gdln.load(path)


def _limit_memory() -> None:  # pragma: no cover - runs in the child process
    resource.setrlimit(resource.RLIMIT_AS, (2**30, 2**30))


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_cli_subprocess_within_time_and_memory(kind: str, tmp_path: Path) -> None:
    """Each hostile file, in a fresh ``gdln paths`` under 1 GiB of address space and 10 s."""
    path = BUILDERS[kind](tmp_path)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-m", "gdln", "paths", str(path)],
        capture_output=True,
        text=True,
        timeout=SECONDS,
        preexec_fn=_limit_memory,
        env=env,
        check=False,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stdout == "" and done.stderr.count("\n") == 1, done.stderr[-2000:]
    assert len(done.stderr.strip()) <= MESSAGE
