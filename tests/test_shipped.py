"""The paper's graphs by name (gdln/graphfile/_shipped.py, ``gdln graphs``; issue 38 item 1).

The expected names, descriptions and figures are read from the files of the top-level
``graphs/`` folder with PyYAML, not through the code under test.
"""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
import pytest
import yaml
from helpers import GRAPHS, run_cli

import gdln

FILES = sorted(GRAPHS.glob("*.yaml"))
NAMES = [path.stem for path in FILES]


def test_every_file_of_graphs_is_shipped_with_its_description_and_figure() -> None:
    shipped = gdln.graphfile.shipped_graphs()
    assert [g.name for g in shipped] == NAMES
    for graph, path in zip(shipped, FILES, strict=True):
        document = yaml.safe_load(path.read_text())
        assert document["name"] == path.stem  # the name it is found by is the file's own
        assert graph.description == document["description"] and "\n" not in graph.description
        assert graph.reproduces == document.get("reproduces", "")
        assert graph.path.read_bytes() == path.read_bytes()
    reproduced = {g.name: g.reproduces for g in shipped}
    assert "Figs. 4" in reproduced["routing"] and "Fig. 3" in reproduced["xor"]


@pytest.mark.parametrize("name", ["routing", "xor", "chain"])
def test_load_takes_a_name_from_any_folder(name, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # no graphs/ here
    by_name = gdln.load(name)
    by_path = gdln.load(GRAPHS / f"{name}.yaml")
    assert nx.utils.graphs_equal(by_name.graph, by_path.graph)
    assert by_name.params == by_path.params
    assert sorted(gdln.read_graph(name).nodes) == sorted(by_path.graph.nodes)


def test_a_file_that_exists_wins_over_a_name(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("routing").write_text("nodes: []\n")  # a file called routing, not a graph file
    with pytest.raises(gdln.GraphSpecError, match="routing: unknown file type"):
        gdln.load("routing")
    Path("routing").unlink()
    Path("routing").mkdir()  # a folder too
    with pytest.raises(gdln.GraphSpecError, match="routing: unknown file type"):
        gdln.load("routing")


def test_an_unknown_name_is_one_line_listing_the_known_names(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(gdln.GraphSpecError) as caught:
        gdln.load("routin")
    message = str(caught.value)
    assert message.startswith("routin: no such file, and no shipped graph of that name")
    assert f"shipped: {', '.join(NAMES)};" in message and len(message) <= 300
    # a path (a folder or an extension) is a file, whatever its stem
    with pytest.raises(gdln.GraphSpecError, match=r"routing\.yaml: no such file$"):
        gdln.load("routing.yaml")
    with pytest.raises(gdln.GraphSpecError, match=r"^sub/routing: unknown file type"):
        gdln.load("sub/routing")


def test_every_command_takes_a_name(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(["derive", "routing", "--param", "M=3", "--param", "K=2"], capsys)
    assert (code, err) == (0, "") and out.startswith("routing: route quotient, lump=symmetry")
    code, out, err = run_cli(["paths", "xor"], capsys)
    assert code == 0 and "x->h0->y" in out
    code, out, err = run_cli(["derive", "routin"], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("gdln: error: routin: no such file") and "late_fusion_deep" in err


def test_gdln_graphs_lists_names_descriptions_and_figures(capsys) -> None:
    code, out, err = run_cli(["graphs"], capsys)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    for path in FILES:
        document = yaml.safe_load(path.read_text())
        at = next(i for i, line in enumerate(lines) if line.split()[:1] == [path.stem])
        assert lines[at].split(None, 1)[1] == document["description"]
        assert lines[at + 1].split() == ["reproduces:", *document.get("reproduces", "-").split()]
    code, out, _ = run_cli(["graphs", "--format", "json"], capsys)
    rows = json.loads(out)
    assert [row["name"] for row in rows] == NAMES
    assert [Path(row["path"]).read_bytes() for row in rows] == [p.read_bytes() for p in FILES]
