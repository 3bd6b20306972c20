"""The symmetry quotient (issue 15): one context per orbit, and families as symbols.

Every result of the quotient route is compared with an independent computation: the
general route over every context (``quotient=False``), the numeric derive at the
substituted parameter values, or Eqs. (44)-(46) of Saxe, Sodhani & Lewallen (2022).
"""

from __future__ import annotations

import glob
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import sympy as sp

import gdln
from gdln._bounded._limits import Limits
from gdln._errors import GdlnError, GraphSpecError
from gdln.task import _families

ROOT = Path(__file__).resolve().parents[1]
ROUTING = ROOT / "graphs" / "routing.yaml"


def _zero(expr) -> bool:
    return sp.simplify(sp.sympify(expr)) == 0


def assert_same(a: gdln.Reduction, b: gdln.Reduction, subs: dict | None = None) -> None:
    """Systems, orbit sizes, data values, conserved and eliminated quantities agree."""
    subs = subs or {}

    def s(x):
        return sp.sympify(x).subs(subs)

    assert _zero(s(a.constant) - s(b.constant))
    assert len(a.systems) == len(b.systems)
    for sa, sb in zip(a.systems, b.systems, strict=True):
        assert sa.variables == sb.variables
        assert sa.modes == sb.modes
        for v in sa.variables:
            assert _zero(s(sa.rhs[v]) - s(sb.rhs[v])), (v, sa.rhs[v], sb.rhs[v])
            assert _zero(s(sa.orbit(v)) - s(sb.orbit(v)))
        assert sa.symbols == sb.symbols  # s, d per mode
        assert len(sa.conserved) == len(sb.conserved)
        for qa, qb in zip(sa.conserved, sb.conserved, strict=True):
            assert _zero(s(qa) - s(qb)), (qa, qb)
        assert set(sa.eliminated) == set(sb.eliminated)
        for v, expr in sa.eliminated.items():
            assert _zero(
                s(expr).subs({c: s(x) for c, x in sa.constants.items()})
                - s(sb.eliminated[v]).subs({c: s(x) for c, x in sb.constants.items()})
            )


def _cases(sizes, lumps):
    """(M, K, lump) cases; under ``full`` (slow: closed forms) only M=7, K=4 by default."""
    return [
        pytest.param(
            M, K, lump, marks=[pytest.mark.slow] if lump == "full" and (M, K) != (7, 4) else []
        )
        for M, K in sizes
        for lump in lumps
    ]


@pytest.mark.parametrize(
    ("M", "K", "lump"),
    _cases([(7, 4), (5, 3), (12, 5), (5, 5), (6, 1)], ["symmetry", "balanced", "full"]),
)
def test_quotient_equals_every_context(M, K, lump):
    problem = gdln.load(ROUTING, params={"M": str(M), "K": str(K)})
    general = gdln.reduce(problem, lump=lump, route="contexts")
    quotient = gdln.reduce(problem, lump=lump, route="auto")
    assert quotient.route.startswith("symmetry quotient")
    assert len(quotient.problem.require_task().contexts) == 1
    assert_same(general, quotient)
    for sg, sq in zip(general.systems, quotient.systems, strict=True):
        assert {v: set(e) for v, e in sg.edges.items()} == {v: set(e) for v, e in sq.edges.items()}


@pytest.mark.parametrize(
    ("M", "K", "lump"), _cases([(7, 4), (5, 3), (12, 5)], ["symmetry", "full"])
)
def test_symbolic_family_substitutes_back(M, K, lump):
    family = gdln.reduce(gdln.load(ROUTING), lump=lump, symbolic=("M", "K"))
    numeric = gdln.reduce(
        gdln.load(ROUTING, params={"M": str(M), "K": str(K)}), lump=lump, route="contexts"
    )
    m, k = sp.symbols("M K", integer=True, positive=True)  # as reduce(symbolic=) makes them
    assert family.symbolic == ("M", "K")
    assert_same(numeric, family, subs={m: M, k: K})


def test_symbolic_routing_is_eqs_44_to_46():
    """Eqs. (44)-(46): tau dB1/dt = (1/M) B3 B2 [S - B3 B2 B1 D], B2 without 1/M, B3 as B1."""
    (system,) = gdln.reduce(gdln.load(ROUTING), lump="symmetry", symbolic=("M", "K")).systems
    B1, B2, B3 = system.variables
    M = sp.Symbol("M", integer=True, positive=True)
    S, D = sp.Symbol("s", real=True), sp.Symbol("d", real=True)
    error = S - B3 * B2 * B1 * D
    assert _zero(system.rhs[B1] - B3 * B2 * error / M)
    assert _zero(system.rhs[B2] - B3 * B1 * error)
    assert _zero(system.rhs[B3] - B2 * B1 * error / M)
    assert [system.orbit(v) for v in system.variables] == [M, 1, M]
    # the conserved quantities of Eqs. (44)-(46): M B1^2 - B2^2 and B1^2 - B3^2
    for q in system.conserved:
        grad = sum(sp.diff(q, v) * system.rhs[v] for v in system.variables)
        assert _zero(grad)
    assert any(_zero(q - (M * B1**2 - B2**2)) for q in system.conserved)


@pytest.mark.slow
def test_every_shipped_graph_unchanged_by_the_quotient():
    for path in sorted(glob.glob(str(ROOT / "graphs" / "*.yaml"))):
        problem = gdln.load(path)
        if problem.task is None or "resnet" in path:
            continue
        for lump in ("symmetry", "full"):
            general = gdln.reduce(problem, lump=lump, route="contexts")
            tried = gdln.reduce(problem, lump=lump, route="auto")
            families = getattr(problem.require_task().contexts, "families", ())
            # a file with a context family says which route it took; one without has none
            assert bool(tried.route) == bool(families), (path, tried.route)
            assert tried.route.startswith("symmetry quotient") == path.endswith("routing.yaml")
            assert_same(general, tried)


def test_random_pick_falls_back_and_says_why():
    problem = gdln.load(ROUTING, params={"seed": "3"})
    tried = gdln.reduce(problem, lump="symmetry", route="auto")
    assert tried.route.startswith("every context (no symmetry quotient")
    assert "pick() with seed=3 draws at random" in tried.route
    assert_same(gdln.reduce(problem, lump="symmetry", route="contexts"), tried)
    with pytest.raises(GdlnError, match="no symmetry quotient"):
        gdln.reduce(problem, lump="symmetry", symbolic=("M",))


def _variant(tmp_path: Path, old: str, new: str, name: str = "variant.yaml") -> Path:
    text = ROUTING.read_text()
    assert old in text
    path = tmp_path / name
    path.write_text(text.replace(old, new))
    return path


def test_representatives_that_differ_are_each_derived(tmp_path):
    """Contexts that open y{i} beside y{j}: for k = 0 the two coincide, so the terms
    differ along k and every representative is derived (still one per orbit)."""
    path = _variant(
        tmp_path, 'active: ["x{i}->h1", "h2->y{j}"]', 'active: ["x{i}->h1", "h2->y{j}", "h2->y{i}"]'
    )
    problem = gdln.load(path, params={"M": "5", "K": "3"})
    quotient = gdln.reduce(problem, lump="symmetry", route="auto")
    assert "3 representatives" in quotient.route
    assert_same(gdln.reduce(problem, lump="symmetry", route="contexts"), quotient)
    with pytest.raises(GdlnError, match="differ along K"):
        gdln.reduce(problem, lump="symmetry", symbolic=("M", "K"))


def test_probability_that_depends_on_the_residual_index(tmp_path):
    path = _variant(tmp_path, "probability: 1/(K*M)", "probability: 2*(k+1)/(K*(K+1)*M)")
    problem = gdln.load(path, params={"M": "6", "K": "3"})
    quotient = gdln.reduce(problem, lump="symmetry", route="auto")
    assert "3 representatives" in quotient.route
    assert_same(gdln.reduce(problem, lump="symmetry", route="contexts"), quotient)


def test_symbolic_parameter_in_a_size_is_refused(tmp_path):
    path = _variant(tmp_path, "- {id: h1, size: hidden}", '- {id: h1, size: "hidden + 0*M"}')
    with pytest.raises(GdlnError, match=r"nodes\[1\]\.size uses it"):
        gdln.reduce(gdln.load(path), lump="symmetry", symbolic=("M",))
    with pytest.raises(GdlnError, match="not a parameter"):
        gdln.reduce(gdln.load(ROUTING), lump="symmetry", symbolic=("Q",))
    with pytest.raises(GdlnError, match="need a lumping"):
        gdln.reduce(gdln.load(ROUTING), lump="none", symbolic=("M",))


def test_large_family_is_not_expanded(monkeypatch):
    """Above EAGER_CONTEXTS a family stays a rule: derive never makes its contexts, and
    the result is the symbolic family's at these values."""
    monkeypatch.setattr(_families, "EAGER_CONTEXTS", 50)
    monkeypatch.setattr("gdln.graphfile._tasks.EAGER_CONTEXTS", 50)
    params = {"M": "30", "K": "12"}
    problem = gdln.load(ROUTING, params=params)
    contexts = problem.require_task().contexts
    assert len(contexts) == 360 and not contexts.expanded
    reduction = gdln.reduce(problem, lump="symmetry")  # automatic on an unexpanded family
    assert not contexts.expanded
    assert reduction.route.startswith("symmetry quotient: 360 contexts in 1 representative")
    family = gdln.reduce(gdln.load(ROUTING), lump="symmetry", symbolic=("M", "K"))
    M = sp.Symbol("M", integer=True, positive=True)
    K = sp.Symbol("K", integer=True, positive=True)
    assert_same(reduction, family, subs={M: 30, K: 12})
    # made on demand, the contexts are those of the eager reader
    monkeypatch.setattr(_families, "EAGER_CONTEXTS", 10**6)
    monkeypatch.setattr("gdln.graphfile._tasks.EAGER_CONTEXTS", 10**6)
    eager = gdln.load(ROUTING, params=params).require_task().contexts
    assert contexts[17] == eager[17] and contexts[-1] == eager[-1]
    assert list(contexts) == list(eager)


def test_unexpanded_family_checks_probabilities_and_limits(monkeypatch, tmp_path):
    monkeypatch.setattr("gdln.graphfile._tasks.EAGER_CONTEXTS", 50)
    path = _variant(tmp_path, "probability: 1/(K*M)", "probability: 1/(K*M + 1)")
    with pytest.raises(GdlnError, match="sum to"):
        gdln.load(path, params={"M": "30", "K": "12"})
    problem = gdln.load(ROUTING, params={"M": "30", "K": "12"}, limits=Limits(entries=1000))
    with (
        gdln._bounded._limits.use_limits(Limits(entries=100)),
        pytest.raises(GraphSpecError, match="entries"),
    ):
        list(problem.require_task().contexts)


def test_cli_symbolic_json_gives_orbit_expressions():
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "gdln",
            "derive",
            str(ROUTING),
            "--symbolic",
            "M,K",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    data = json.loads(result.stdout)
    assert data["symbolic"] == ["M", "K"]
    assert [v["orbit"] for v in data["systems"][0]["variables"]] == ["M", 1, "M"]
    assert data["route"] == "quotient"  # the declared name (issue 33 item 8)
    assert "symmetry quotient" in data["route_reason"]
    bad = subprocess.run(
        [sys.executable, "-m", "gdln", "derive", str(ROUTING), "--symbolic", "Q"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert bad.returncode == 2 and "not a parameter" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_quotient_reduction_gives_the_whole_networks_weights():
    """The decoupled weights of Eq. (9) of a reduction derived on the quotient are those of
    the whole network (its bases from every context), and a family kept symbolic has none."""
    quotient = gdln.reduce(gdln.load(ROUTING), lump="symmetry")  # the rule: the quotient
    assert quotient.route.startswith("symmetry quotient")
    general = gdln.reduce(gdln.load(ROUTING), lump="symmetry", route="contexts")
    assert general.route == "" and general.whole is general
    ours, theirs = quotient.decoupled_weights(seed=3), general.decoupled_weights(seed=3)
    assert len(ours) == 2 * 7 + 1 and set(ours) == set(theirs)
    for edge, weight in theirs.items():
        np.testing.assert_array_equal(ours[edge], weight)
    symbolic = gdln.reduce(gdln.load(ROUTING), lump="symmetry", symbolic=("M", "K"))
    with pytest.raises(GdlnError, match=r"keeps M, K as symbols and has no bases for every"):
        symbolic.decoupled_weights()


def test_problems_with_families_pickle(monkeypatch):
    """Sweeps send problems to workers: a family, expanded or not, survives pickling."""
    import pickle

    monkeypatch.setattr("gdln.graphfile._tasks.EAGER_CONTEXTS", 50)
    for params in ({}, {"M": "30", "K": "12"}):
        problem = gdln.load(ROUTING, params=params)
        back = pickle.loads(pickle.dumps(problem))
        assert list(back.require_task().contexts) == list(problem.require_task().contexts)
        assert back.families == problem.families


def test_expanded_family_counts_its_contexts_once():
    """Routing M=100, K=40: 202 nodes + 201 edges + 4000 contexts = 4403 entries."""
    gdln.load(ROUTING, params={"M": "100", "K": "40"}, limits=Limits(entries=4403))
    with pytest.raises(GdlnError, match="4403 entries"):
        gdln.load(ROUTING, params={"M": "100", "K": "40"}, limits=Limits(entries=4402))
