"""One name, one edge set: the reduced variables of a graph with several systems (issue 33, 10).

A graph whose modes do not all reach the same edges has several systems (independent
blocks of the reduced dynamics). Every output of one reduction (derive's text, LaTeX and
JSON; a solve's JSON, CSV, npz and the Python :class:`gdln.Trajectory`) must use a name
for one edge set only, and every trajectory carries the variable -> edges map. The map is
checked against the full network: from decoupled weights (Eq. 9), gradient flow on the full
weight matrices (torch autograd of Eq. 1, integrated by scipy, written here) must give, on
every edge a name stands for, the values the solve records under that name.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from helpers import full_loss_and_gradient, run_cli, write
from scipy.integrate import solve_ivp

import gdln

# x2 is one-dimensional, so it carries only the first mode of y: mode 0 runs through
# x1->h, x2->h and h->y, mode 1 through x1->h and h->y only (two systems sharing edges).
SHARED = """\
name: shared
nodes:
  - {id: x1, size: 2}
  - {id: x2, size: 1}
  - {id: h, size: 2}
  - {id: y, size: 2}
edges:
  - {source: x1, target: h}
  - {source: x2, target: h}
  - {source: h, target: y}
task:
  examples:
    - {inputs: {x1: [1, 0], x2: [0]}, targets: {y: [2, 0]}}
    - {inputs: {x1: [0, 1], x2: [0]}, targets: {y: [0, 1]}}
    - {inputs: {x1: [0, 0], x2: [1]}, targets: {y: [1, 0]}}
solve: {b0: 0.3}
"""

# Two chains of depth 3; the first has two modes, the second one. lump="full" eliminates
# a variable through a conserved quantity (Eq. 15) in each chain of each system.
CHAINS = """\
name: chains
nodes:
  - {id: x, size: 2}
  - {id: h1, size: 2}
  - {id: h2, size: 2}
  - {id: y, size: 2}
  - {id: z, size: 1}
  - {id: g1, size: 1}
  - {id: g2, size: 1}
  - {id: w, size: 1}
edges:
  - {source: x, target: h1}
  - {source: h1, target: h2}
  - {source: h2, target: y}
  - {source: z, target: g1}
  - {source: g1, target: g2}
  - {source: g2, target: w}
task:
  examples:
    - {inputs: {x: [1, 0], z: [1]}, targets: {y: [2, 0], w: [3]}}
    - {inputs: {x: [0, 1], z: [-1]}, targets: {y: [0, 1], w: [-3]}}
solve: {b0: {default: 0.1, "h1->h2": 0.2, "g1->g2": 0.3}}
"""

LUMPS = ("symmetry", "full", "none")


def _name(edge: tuple) -> str:
    return f"{edge[0]}->{edge[1]}"


def _pairs(reduction: gdln.Reduction) -> list[tuple[int, str, frozenset[str]]]:
    """(system, variable, its edges) for every variable of every system, eliminated ones too."""
    return [
        (k, str(v), frozenset(_name(e) for e in system.edges[v]))
        for k, system in enumerate(reduction.systems)
        for v in (*system.variables, *system.eliminated)
    ]


def _one_set_per_name(pairs: list[tuple[str, frozenset[str]]]) -> dict[str, frozenset[str]]:
    """The name -> edges map of ``pairs``, asserting that no name stands for two edge sets."""
    out: dict[str, frozenset[str]] = {}
    for name, edges in pairs:
        assert out.setdefault(name, edges) == edges, f"{name} is {out[name]} and {edges}"
    return out


@pytest.fixture(params=LUMPS)
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> gdln.Reduction:
    return gdln.reduce(gdln.load(write(tmp_path, SHARED)), lump=request.param)


def test_the_graph_has_two_systems_that_share_edges(shared: gdln.Reduction) -> None:
    assert [s.modes for s in shared.systems] == [(0,), (1,)]
    edges = [set().union(*(e for k, _, e in _pairs(shared) if k == j)) for j in (0, 1)]
    assert edges == [{"x1->h", "x2->h", "h->y"}, {"x1->h", "h->y"}]


def test_a_name_stands_for_one_edge_set_in_every_system(shared: gdln.Reduction) -> None:
    pairs = _pairs(shared)
    expected = _one_set_per_name([(name, edges) for _, name, edges in pairs])
    # and one edge set has one name: a system never calls the same edges otherwise
    assert len(set(expected.values())) == len(expected)


def _derived_text(text: str) -> list[tuple[str, frozenset[str]]]:
    """(name, edges) of every ``NAME: orbit N [edges], initial V`` line of a printout."""
    found = re.findall(r"^(?:% )?\s*(\w+): orbit \S+ \[([^\]]*)\], initial", text, re.M)
    return [(name, frozenset(listed.split(", "))) for name, listed in found]


def test_every_printout_of_derive_names_one_edge_set(shared: gdln.Reduction) -> None:
    expected = _one_set_per_name([(name, edges) for _, name, edges in _pairs(shared)])
    for fmt in ("text", "latex"):
        printed = _derived_text(gdln.format_derivation(shared, fmt))
        assert len(printed) == len(_pairs(shared))
        assert _one_set_per_name(printed) == expected
    payload = json.loads(gdln.format_derivation(shared, "json"))
    listed = [
        (variable["name"], frozenset(variable["edges"]))
        for system in payload["systems"]
        for variable in system["variables"]
    ]
    assert _one_set_per_name(listed) == expected


@pytest.mark.parametrize("lump", LUMPS)
def test_the_recorded_map_is_what_the_full_network_does(lump: str, tmp_path: Path) -> None:
    # The full network from decoupled weights, by gradient flow on its weight matrices
    # (torch autograd of Eq. 1, scipy): every edge a name stands for must carry, in every
    # mode of every system that records the name, the value recorded under that name.
    problem = gdln.load(write(tmp_path, SHARED))
    reduction = gdln.reduce(problem, lump=lump)
    times = np.linspace(0.0, 3.0, 7)
    trajectory = gdln.solve(reduction, times=times, rtol=1e-11, atol=1e-12)
    weights = reduction.decoupled_weights(seed=0)
    edges = list(weights)
    shapes = [weights[e].shape for e in edges]
    sizes = np.cumsum([0] + [int(np.prod(s)) for s in shapes])

    def unpack(flat: np.ndarray) -> dict:
        return {
            e: flat[a:b].reshape(s)
            for e, a, b, s in zip(edges, sizes, sizes[1:], shapes, strict=False)
        }

    def flow(_: float, flat: np.ndarray) -> np.ndarray:
        _, grad = full_loss_and_gradient(problem, unpack(flat))
        return -np.concatenate([grad[e].ravel() for e in edges])

    start = np.concatenate([weights[e].ravel() for e in edges])
    full = solve_ivp(flow, (0, 3), start, t_eval=times, rtol=1e-11, atol=1e-13, method="DOP853")
    path = [unpack(full.y[:, i]) for i in range(len(times))]
    losses = [full_loss_and_gradient(problem, w)[0] for w in path]
    np.testing.assert_allclose(trajectory.loss, losses, rtol=1e-7)

    by_name = {_name(e): e for e in edges}
    modes = trajectory.meta["modes"]
    mapped = trajectory.variable_edges
    assert set(mapped) == {name for _, name, _ in _pairs(reduction)}
    checked = 0
    for name, names in mapped.items():
        for k, system_modes in enumerate(modes):
            if not trajectory.has_variable(name, system=k):
                continue
            recorded = trajectory.variable(name, system=k)
            for edge in (by_name[e] for e in names):
                left, right, slots = reduction.edge_bases(edge, seed=0)
                for a, mode in enumerate(system_modes):
                    j = slots.index(mode)
                    projected = [left[:, j] @ w[edge] @ right[:, j] for w in path]
                    np.testing.assert_allclose(recorded[:, a], projected, rtol=1e-6, atol=1e-9)
                    checked += 1
    assert checked >= 5


@pytest.mark.parametrize("lump", ["symmetry", "full"])
def test_every_saved_form_of_a_solve_carries_the_map(lump: str, tmp_path: Path) -> None:
    reduction = gdln.reduce(gdln.load(write(tmp_path, SHARED)), lump=lump)
    expected = {name: edges for _, name, edges in _pairs(reduction)}
    trajectory = gdln.solve(reduction, t_max=1, points=3)

    def as_sets(mapping: dict) -> dict:
        return {k: frozenset(v) for k, v in mapping.items()}

    assert as_sets(trajectory.variable_edges) == expected
    as_json = json.loads(gdln.format_trajectory(trajectory, "json"))
    assert as_sets(as_json["meta"]["variable_edges"]) == expected
    first, header = gdln.format_trajectory(trajectory, "csv").splitlines()[:2]
    assert first.startswith("# variable_edges: ")
    assert as_sets(json.loads(first.removeprefix("# variable_edges: "))) == expected
    # the table follows: each variable's columns by the network's modes, all of them mapped
    columns = [c.split(" (mode ") for c in header.split(",") if " (mode " in c]
    assert header.startswith("t,loss,") and {name for name, _ in columns} == set(expected)
    assert sorted(int(m.rstrip(")")) for _, m in columns) == sorted(
        m for k, name, _ in _pairs(reduction) for m in reduction.systems[k].modes
    )
    for suffix in (".npz", ".json"):
        again = gdln.Trajectory.load(trajectory.save(tmp_path / f"run{suffix}"))
        assert as_sets(again.variable_edges) == expected


def test_the_command_line_writes_the_map(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    graph = str(write(tmp_path, SHARED))
    reduction = gdln.reduce(gdln.load(graph))
    expected = {name: sorted(edges) for _, name, edges in _pairs(reduction)}
    for suffix in ("json", "csv"):
        out = tmp_path / f"run.{suffix}"
        code, _, err = run_cli(
            ["solve", graph, "--t-max", "1", "--points", "3", "-o", str(out)], capsys
        )
        assert code == 0, err
        text = out.read_text()
        mapped = (
            json.loads(text)["meta"]["variable_edges"]
            if suffix == "json"
            else json.loads(text.splitlines()[0].removeprefix("# variable_edges: "))
        )
        assert {k: sorted(v) for k, v in mapped.items()} == expected


def test_a_name_of_several_systems_is_never_picked_silently(tmp_path: Path) -> None:
    reduction = gdln.reduce(gdln.load(write(tmp_path, SHARED)), lump="symmetry")
    trajectory = gdln.solve(reduction, t_max=1, points=3)
    in_systems = {
        name: [k for k, n, _ in _pairs(reduction) if n == name] for _, name, _ in _pairs(reduction)
    }
    several = [name for name, systems in in_systems.items() if len(systems) > 1]
    alone = [name for name, systems in in_systems.items() if len(systems) == 1]
    assert several and alone
    for name in several:
        with pytest.raises(
            gdln.AmbiguousVariableError, match=rf"'{name}' .*system 0 .*system 1.*system="
        ):
            trajectory.variable(name)
        assert trajectory.has_variable(name)
        for k in in_systems[name]:
            assert trajectory.variable(name, system=k).shape == (3, len(reduction.systems[k].modes))
    for name in alone:
        (k,) = in_systems[name]
        np.testing.assert_array_equal(
            trajectory.variable(name), trajectory.variable(name, system=k)
        )
        assert not trajectory.has_variable(name, system=1 - k)
        with pytest.raises(
            KeyError, match=rf"no variable '{name}' in system {1 - k}; it is in system {k}"
        ):
            trajectory.variable(name, system=1 - k)
    assert issubclass(gdln.AmbiguousVariableError, KeyError)
    with pytest.raises(KeyError, match="no variable 'B99'"):
        trajectory.variable("B99")


def test_constants_of_eq_15_have_one_name_each(tmp_path: Path) -> None:
    problem = gdln.load(write(tmp_path, CHAINS))
    reduction = gdln.reduce(problem, lump="full")
    assert len(reduction.systems) == 2
    constants = [(str(c), v) for s in reduction.systems for c, v in s.constants.items()]
    assert len(constants) == 3 and len({c for c, _ in constants}) == 3
    # each constant is its conserved quantity at the file's initial values
    b0 = {"x->h1": 0.1, "h1->h2": 0.2, "h2->y": 0.1, "z->g1": 0.1, "g1->g2": 0.3, "g2->w": 0.1}
    for system in reduction.systems:
        for variable, expression in system.eliminated.items():
            (constant,) = expression.free_symbols & set(system.constants)
            start = {v: b0[_name(system.edges[v][0])] for v in system.edges}
            squared = float((expression**2).subs(start).subs(constant, system.constants[constant]))
            assert squared == pytest.approx(start[variable] ** 2, rel=1e-12)
    _one_set_per_name([(name, edges) for _, name, edges in _pairs(reduction)])


def test_a_solve_refuses_a_name_given_to_two_edge_sets(tmp_path: Path) -> None:
    # reduce never does this; a reduction edited by hand that does is not solved
    from gdln.reduction._internal import replace

    reduction = gdln.reduce(gdln.load(write(tmp_path, SHARED)), lump="symmetry")
    second = reduction.systems[1]
    first_variable = second.variables[0]
    edges = {**second.edges, first_variable: (("x2", "h"),)}
    edited = replace(reduction, systems=(reduction.systems[0], replace(second, edges=edges)))
    with pytest.raises(
        gdln.GdlnError, match=rf"variable {first_variable} stands for two edge sets"
    ):
        gdln.solve(edited, t_max=1, points=2)
