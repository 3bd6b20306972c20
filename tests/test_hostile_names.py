"""Names that would act on a terminal, and names that lose data (issue 34).

Node ids, labels, keys and file names holding ESC, BEL, VT, NEL, NUL, U+2028 and other
control or format characters used to reach error lines and listings raw (an error line
could set the window title or clear the screen), and ids holding NUL made ``simulate -o
out.npz`` write two zip members of one name. Now names in graph and task files must be
printable text (refused at load, in every format), everything gdln prints goes through one
sanitiser (:func:`gdln.outputs.printable`), an ``.npz`` output refuses names that zip would
change, and a weights file that gives one edge twice is refused.
"""

from __future__ import annotations

import dataclasses
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
from helpers import load, run_cli

import gdln

LINE = 300
# each payload is a name; the second is its YAML spelling where YAML needs an escape
PAYLOADS: dict[str, str] = {
    "osc_title": "x\x1b]0;pwned\x07",
    "clear_screen": "x\x1b[2J\x1b[H",
    "bel": "x\x07",
    "vt": "x\x0b",
    "nel": "x\x85",
    "nul": "x\x00a",
    "line_separator": "x\u2028",
    "paragraph_separator": "x\u2029",
    "right_to_left_override": "x\u202e",
    "zero_width_space": "x\u200b",
    "del": "x\x7f",
    "newline": "x\ny",
}
XML_PAYLOADS = ("nel", "line_separator", "paragraph_separator", "right_to_left_override", "del")


def _q(name: str) -> str:
    """``name`` as a YAML double-quoted scalar (JSON's escapes are YAML's)."""
    return json.dumps(name)


def _graph(node: str = "x", *, name: str | None = None, label: str | None = None) -> str:
    q = _q(node)
    head = f"name: {_q(name)}\n" if name is not None else ""
    context = f", label: {_q(label)}" if label is not None else ""
    return (
        f"{head}nodes:\n  - {{id: {q}, size: 2}}\n  - {{id: y, size: 1}}\n"
        f"edges:\n  - {{source: {q}, target: y}}\n"
        "datasets:\n  d: {examples: {a: [[1, 0], [0, 1]], b: [[1], [2]]}}\n"
        f"task:\n  contexts:\n    - {{dataset: d, probability: 1, inputs: {{{q}: a}}, "
        f"targets: {{y: b}}{context}}}\n"
    )


def _key_in_task(name: str) -> str:
    return _graph().replace("  d: {", f"  {_q(name)}: {{").replace("dataset: d,", "dataset: d0,")


PLACES = {
    "node_id": lambda p: _graph(p),
    "graph_name": lambda p: _graph(name=p),
    "context_label": lambda p: _graph(label=p),
    "dataset_name_key": _key_in_task,
}


def _printed(text: str) -> bool:
    """Whether ``text`` holds nothing a terminal acts on but line ends."""
    return all(line.isprintable() for line in text.split("\n"))


def _one_line(code: int, out: str, err: str) -> str:
    assert (code, out) == (2, ""), (code, out, err)
    assert err.startswith("gdln: error: ") and err.count("\n") == 1, repr(err)
    assert len(err) - 1 <= LINE and _printed(err), repr(err)
    return err


# ----------------------------------------------------------------------------- at load


@pytest.mark.parametrize("place", sorted(PLACES))
@pytest.mark.parametrize("payload", sorted(PAYLOADS))
def test_a_name_that_is_not_printable_is_refused_at_load(
    payload: str, place: str, tmp_path: Path
) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(PLACES[place](PAYLOADS[payload]), encoding="utf-8")
    with pytest.raises(gdln.GraphSpecError, match="names must be printable text") as info:
        gdln.load(path)
    message = str(info.value)
    assert message.isprintable() and len(message) <= LINE, repr(message)


@pytest.mark.parametrize("payload", sorted(PAYLOADS))
def test_a_task_file_with_such_a_name_is_refused(payload: str, tmp_path: Path) -> None:
    graph = tmp_path / "g.yaml"
    graph.write_text(_graph(), encoding="utf-8")
    task = tmp_path / "t.yaml"
    task.write_text(_key_in_task(PAYLOADS[payload]).split("datasets:")[1].join(["datasets:", ""]))
    with pytest.raises(gdln.TaskSpecError, match="names must be printable text") as info:
        gdln.load(graph, task=task)
    assert str(info.value).isprintable()


@pytest.mark.parametrize("payload", sorted(PAYLOADS))
def test_a_node_link_id_that_is_not_printable_is_refused(payload: str, tmp_path: Path) -> None:
    nodes = [{"id": PAYLOADS[payload], "size": 2}, {"id": "y", "size": 1}]
    links = [{"source": PAYLOADS[payload], "target": "y"}]
    path = tmp_path / "g.json"
    path.write_text(
        json.dumps({"directed": True, "multigraph": False, "nodes": nodes, "links": links})
    )
    with pytest.raises(gdln.GraphSpecError, match=r"node id .* names must be printable") as info:
        gdln.load(path)
    assert str(info.value).isprintable()


@pytest.mark.parametrize("payload", XML_PAYLOADS)
def test_a_graphml_id_that_is_not_printable_is_refused(payload: str, tmp_path: Path) -> None:
    node = PAYLOADS[payload].encode("ascii", "xmlcharrefreplace").decode()
    text = (
        '<?xml version="1.0"?><graphml xmlns="http://graphml.graphdrawing.org/xmlns">'
        '<key id="d0" for="node" attr.name="size" attr.type="long"/>'
        f'<graph edgedefault="directed"><node id="{node}"><data key="d0">2</data></node>'
        '<node id="y"><data key="d0">1</data></node>'
        f'<edge source="{node}" target="y"/></graph></graphml>'
    )
    path = tmp_path / "g.graphml"
    path.write_text(text)
    with pytest.raises(gdln.GraphSpecError, match=r"node id .* names must be printable") as info:
        gdln.load(path)
    assert str(info.value).isprintable()


@pytest.mark.parametrize("command", ["paths", "stats", "derive", "solve", "simulate"])
@pytest.mark.parametrize("payload", sorted(PAYLOADS))
def test_every_command_refuses_such_a_name_in_one_printable_line(
    payload: str, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(_graph(PAYLOADS[payload]), encoding="utf-8")
    extra = ["-o", str(tmp_path / "run.npz"), "--t-max", "1"] if command == "simulate" else []
    err = _one_line(*run_cli([command, str(path), *extra], capsys))
    assert "names must be printable text" in err
    assert not (tmp_path / "run.npz").exists()


# ----------------------------------------------------------------------------- printing


# no file name holds NUL; click removes CSI sequences (clear_screen) from what it prints when
# the output is not a terminal, as here, but prints them to a terminal
FILE_PAYLOADS = [k for k in PAYLOADS if k not in ("nul", "newline", "clear_screen")]


@pytest.mark.parametrize("payload", FILE_PAYLOADS)
def test_a_missing_file_is_named_escaped(
    payload: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / f"{PAYLOADS[payload]}.yaml"
    err = _one_line(*run_cli(["paths", str(path)], capsys))
    assert err.endswith(": no such file\n"), err
    with pytest.raises(gdln.GraphSpecError) as info:
        gdln.load(path)
    assert str(info.value).isprintable()


@pytest.mark.parametrize("command", ["paths", "derive", "solve"])
@pytest.mark.parametrize("payload", FILE_PAYLOADS)
def test_listings_escape_a_name_taken_from_the_file_name(
    payload: str, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The graph is named after its file; every line of every listing stays printable."""
    path = tmp_path / f"{PAYLOADS[payload]}.yaml"
    path.write_text(_graph(), encoding="utf-8")
    extra = ["--t-max", "1"] if command == "solve" else []
    code, out, err = run_cli([command, str(path), *extra], capsys)
    assert code == 0, err
    assert out and _printed(out) and _printed(err), repr(out + err)
    if command in ("paths", "derive"):
        assert gdln.outputs.printable(path.stem) in out


@pytest.mark.parametrize("payload", FILE_PAYLOADS)
def test_the_output_name_is_printed_escaped(
    payload: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    graph = tmp_path / "g.yaml"
    graph.write_text(_graph(), encoding="utf-8")
    out_file = tmp_path / f"{PAYLOADS[payload]}.txt"
    code, out, err = run_cli(["paths", str(graph), "-o", str(out_file)], capsys)
    assert code == 0 and out_file.exists() and _printed(err), repr(err)
    code, out, err = run_cli(
        ["simulate", str(graph), "-o", f"{out_file}.npz", "--t-max", "1"], capsys
    )
    assert code == 0 and _printed(err), repr(err)
    code, out, err = run_cli(["paths", str(graph), "-o", str(out_file)], capsys)  # exists
    _one_line(code, out, err)


def test_printable_escapes_what_a_terminal_acts_on() -> None:
    printable = gdln.outputs.printable
    for text in PAYLOADS.values():
        shown = printable(text)
        assert shown.isprintable() and printable(shown) == shown
    assert printable("x\x1b]0;t\x07") == "x\\x1b]0;t\\x07"
    assert printable("a\u2028b\nc", keep="\n") == "a\\u2028b\nc"
    assert printable("\\frac{1}{2} über ü") == "\\frac{1}{2} über ü"  # LaTeX, letters kept
    assert gdln.outputs.unprintable("x\x85") == "the control character U+0085 ('\\x85')"


def test_an_error_line_is_one_printable_line_of_at_most_300_characters() -> None:
    from gdln.cli._main import MAX_LINE, one_line

    for message in ("x" * 1000, "a\x1b]0;t\x07" * 200, "one\ntwo\r\nthree"):
        line = one_line("gdln: error: ", message)
        assert len(line) <= MAX_LINE == LINE and line.isprintable(), line
    assert one_line("gdln: error: ", "a" * 150 + "b" * 200).endswith("b" * 100)
    error = gdln.GdlnError("node 'x\x1b[2J'")
    assert str(error) == "node 'x\\x1b[2J'"


# ----------------------------------------------------------------------------- data lost


def test_a_series_name_that_zip_would_cut_is_refused_and_nothing_written(tmp_path: Path) -> None:
    """Ids holding NUL used to make two members ``series/sv/h`` (series lost, exit 0)."""
    problem = load("chain")
    run = gdln.simulate(problem, t_max=0.2, lr=0.1, seeds=1)
    series = {k: v for k, v in run.series.items()}
    key = next(iter(series))
    bad = dataclasses.replace(run, series={f"{key}\x00a": series[key], f"{key}\x00b": series[key]})
    out = tmp_path / "run.npz"
    with pytest.raises(gdln.outputs.OutputError, match=r"would be stored as .*NUL") as info:
        bad.save(out)
    assert str(info.value).isprintable()
    assert list(tmp_path.iterdir()) == []
    run.save(out)  # the names of a run from a file are kept as they are
    with zipfile.ZipFile(out) as archive:
        names = archive.namelist()
    assert len(names) == len(set(names)) == 3 + len(series)


def test_check_npz_names_refuses_names_zip_changes() -> None:
    check = gdln.outputs.check_npz_names
    check(["t", "series/W/x->h", "series/sv/h"], output="run.npz")
    for names, match in (
        (["a\x00b"], "would be stored as 'a'"),
        (["a\ud800"], "not valid text"),
    ):
        with pytest.raises(gdln.outputs.OutputError, match=match):
            check(names, output="run.npz")


@pytest.fixture
def xor() -> gdln.Problem:
    return load("xor", hidden=1)


def test_a_weights_file_that_gives_one_edge_twice_is_refused(
    xor: gdln.Problem, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    weights = gdln.balanced_weights(xor, lam=0.5, scale=0.1, seed=0)
    arrays = {f"W/{u}->{v}": w for (u, v), w in weights.items()}
    (u, v), w = next(iter(weights.items()))
    arrays[f"series/W/{u}->{v}"] = np.stack([[2 * w]])  # a recorded trajectory's spelling
    path = tmp_path / "w.npz"
    np.savez(path, **arrays)
    match = rf"arrays 'W/{u}->{v}' and 'series/W/{u}->{v}' both give the weights of {u}->{v}"
    with pytest.raises(gdln.GraphSpecError, match=match):
        gdln.read_weight_file(xor, path)
    graph = str(Path(__file__).resolve().parents[1] / "graphs" / "xor.yaml")
    err = _one_line(
        *run_cli(["solve", graph, "--param", "hidden=1", "--weights", str(path)], capsys)
    )
    assert f"'W/{u}->{v}' and 'series/W/{u}->{v}'" in err
