"""The sweep examples (Figs. 5-7) run in --quick mode and show the paper's qualitative claims.

Each test runs ``main(["--quick", "-o", tmp])`` of one example and checks the claim of
its figure, not the numbers it produces.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "core"


def load_example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # so that process-pool workers can unpickle its functions
    spec.loader.exec_module(module)
    return module


def run(name: str, tmp_path: Path) -> dict:
    results = load_example(name).main(["--quick", "-o", str(tmp_path), "--workers", "1"])
    assert json.loads((tmp_path / "results.json").read_text())["quick"] is True
    for figure in results["figures"]:
        assert Path(figure).stat().st_size > 1000
    assert {Path(f).suffix for f in results["figures"]} == {".png", ".svg"}
    return results


def test_race_quick(tmp_path: Path) -> None:
    results = run("race", tmp_path)
    theory = results["theory"]
    # Eq. 56: B2 = P^(1/4) B1 once learned from small balanced weights.
    for ratio, P in zip(theory["ratio_B2_B1"], theory["P"], strict=True):
        assert ratio == pytest.approx(P**0.25, rel=1e-2)
    # Fig. 5b: more sharing, faster learning.
    times = theory["half_time_top_mode"]
    assert all(a > b for a, b in itertools.pairwise(times))
    # Eq. 56 in the full network from random weights: B2/B1 grows with P like P^(1/4).
    # Not exactly: the input matrices keep unlearned random directions (s.d. 0.2 x
    # Xavier) that add to their singular values, a few percent at these sizes.
    sim = results["simulation"]
    assert sim["P"] == theory["P"]
    for ratio, P in zip(sim["ratio_B2_B1"], sim["P"], strict=True):
        assert ratio == pytest.approx(P**0.25, rel=0.05)
    assert all(a < b for a, b in itertools.pairwise(sim["ratio_B2_B1"]))
    # Fig. 5c: untrained routes fail at small K/M and are learned at large K/M.
    gen = results["generalisation"]
    untrained = [u for u in gen["untrained_error"] if u is not None]
    assert untrained[0] > 0.5
    assert untrained[-1] < 0.2 * untrained[0]
    assert max(gen["trained_error"]) < 0.1
    onset = gen["onset_K_over_M"]
    assert onset is not None and 0 < onset < 1


def test_init_scale_quick(tmp_path: Path) -> None:
    results = run("init_scale", tmp_path)
    trained, untrained = results["trained_error"], results["untrained_error"]
    # Fig. 6b: zero-shot generalisation only in the rich (small sigma_0) regime.
    assert untrained[0] < 0.5 * untrained[-1]
    assert trained[-1] < 0.5 * untrained[-1]
    # Fig. 6c: one shared representation at small sigma_0, distinct ones at large.
    similarity = results["cross_domain_similarity"]
    assert similarity[0] > similarity[-1] + 0.2
    # Fig. 6a: large sigma_0 learns at once (exponential), small sigma_0 sits on a plateau.
    early = results["loss_at_10pct_time"]
    assert early[-1] < 0.5 * early[0]


def test_naturalistic_quick(tmp_path: Path) -> None:
    results = run("naturalistic", tmp_path)
    chance = 0.1
    k_untrained = results["k_untrained_accuracy"]
    k_trained = results["k_trained_accuracy"]
    # Fig. 7b/c: trained routes are learned; untrained ones only at larger K/M.
    assert min(k_trained) > chance + 0.3
    assert k_untrained[0] < chance + 0.15
    assert k_untrained[-1] > k_untrained[0] + 0.3
    # Fig. 7d: the trained-untrained gap opens at large init scale.
    gap = [
        t - u
        for t, u in zip(
            results["scale_trained_accuracy"], results["scale_untrained_accuracy"], strict=True
        )
    ]
    assert gap[-1] > gap[0]
    assert all(math.isfinite(g) for g in gap)


@pytest.mark.slow  # 8-14 s: starts a local Dask cluster
def test_race_quick_on_a_dask_cluster(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    race = load_example("race")
    with distributed.LocalCluster(n_workers=1, processes=False, dashboard_address=None) as cluster:
        race.main(["--quick", "-o", str(tmp_path), "--scheduler", cluster.scheduler_address])
    from gdln.sweep._sweep import read_table

    rows = read_table(tmp_path / "sweep.csv")
    assert len(rows) == 4
    for row in rows[:2]:  # the same numbers as a direct call in this process
        point = {k: row[k] for k in ("M", "K", "seed", "hidden", "scale", "lr", "t_max")}
        direct = race.route_errors(**point)
        assert direct["trained_error"] == pytest.approx(row["trained_error"], rel=1e-12)
        assert direct["final_loss"] == pytest.approx(row["final_loss"], rel=1e-12)
