"""Paths, P(e), T(v) and the split of a path at an edge, against networkx."""

from __future__ import annotations

import itertools

import networkx as nx
import pytest
from helpers import load
from hypothesis import given, settings
from hypothesis import strategies as st

import gdln


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 7), st.floats(0.2, 0.8), st.integers(0, 10_000))
def test_paths_match_networkx_on_random_dags(n: int, p: float, seed: int) -> None:
    g = nx.gnp_random_graph(n, p, seed=seed, directed=True)
    dag = nx.DiGraph([(u, v) for u, v in g.edges if u < v])
    if dag.number_of_edges() == 0:
        return
    ours = sorted(tuple(path.nodes) for path in gdln.enumerate_paths(dag))
    theirs = sorted(
        tuple(path)
        for s in gdln.input_nodes(dag)
        for t in gdln.output_nodes(dag)
        for path in nx.all_simple_paths(dag, s, t)
    )
    assert ours == theirs
    for edge in dag.edges:
        through = sorted(tuple(p.nodes) for p in gdln.paths_through(dag, edge))
        assert through == sorted(q for q in theirs if edge in itertools.pairwise(q))
        for path in gdln.paths_through(dag, edge):
            head, tail = gdln.source_subpath(path, edge), gdln.target_subpath(path, edge)
            assert (
                head.nodes + tail.nodes == path.nodes
                and head.target == edge[0]
                and tail.source == edge[1]
            )
    for v in gdln.output_nodes(dag):
        assert sorted(tuple(p.nodes) for p in gdln.paths_ending_at(dag, v)) == sorted(
            q for q in theirs if q[-1] == v
        )
    counts = gdln.path_counts(dag)
    assert counts.total == len(theirs)
    assert counts.through == {e: sum(e in itertools.pairwise(q) for q in theirs) for e in dag.edges}
    assert counts.ending == {v: sum(q[-1] == v for q in theirs) for v in gdln.output_nodes(dag)}


def test_routing_path_counts() -> None:
    graph = load("routing", M=5, K=2).graph
    assert sum(1 for _ in gdln.enumerate_paths(graph)) == 25
    assert sum(1 for _ in gdln.paths_through(graph, ("h1", "h2"))) == 25
    assert sum(1 for _ in gdln.paths_through(graph, ("x0", "h1"))) == 5


def test_paths_are_enumerated_lazily_on_a_graph_with_2_to_the_40_paths() -> None:
    # Two nodes per layer, each connected to both nodes of the next: 2^40 input-output
    # paths. A version that built the list of P(e) or T(v) first would never return.
    depth = 40
    graph = nx.DiGraph()
    graph.add_edges_from(("in", (0, k)) for k in range(2))
    for layer in range(depth - 1):
        graph.add_edges_from(((layer, a), (layer + 1, b)) for a in range(2) for b in range(2))
    graph.add_edges_from(((depth - 1, k), "out") for k in range(2))
    middle = ((depth // 2, 0), (depth // 2 + 1, 1))
    for path in (
        next(gdln.paths_ending_at(graph, "out")),
        next(gdln.paths_through(graph, middle)),
        next(gdln.enumerate_paths(graph)),
    ):
        assert path.source == "in" and path.target == "out" and len(path) == depth + 1
        assert all(graph.has_edge(u, v) for u, v in path.edges)
    assert middle in next(gdln.paths_through(graph, middle)).edges


def test_path_counts_of_a_residual_chain_are_powers_of_two() -> None:
    # resnet_sd: every block doubles the paths (skip or residual branch), so 2^L in all,
    # and the residual edge of block l lies on 2^(L-1) of them. Counted, never listed.
    L = 1000
    graph = load("resnet_sd", L=L).graph
    counts = gdln.path_counts(graph)
    assert counts.total == 2**L
    assert counts.through[("h0", "r0")] == 2 ** (L - 1)
    assert counts.ending == {f"h{L}": 2**L}


def test_gdln_paths_prints_counts_of_2_to_the_1000_paths_without_listing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from gdln.cli import main

    main(["paths", "graphs/resnet_sd.yaml", "--param", "L=1000"])
    out = capsys.readouterr().out
    assert f"{2**1000} input-output paths" in out and "counted, not listed" in out
    with pytest.raises(SystemExit) as exit_info:
        main(["paths", "graphs/resnet_sd.yaml", "--param", "L=1000", "--format", "json"])
    assert exit_info.value.code == 2
    assert "too many to list in JSON" in capsys.readouterr().err
