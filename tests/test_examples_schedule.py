"""``examples/core/blocked_interleaved.py`` in --quick mode: the Flesch et al. (2023)
contrast on App. A.2's task, each end loss against the value worked out here from the
exact moments of x ~ U[-1, 1]^2 (never copied from a run)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow  # the example runs in about 10 s

# 1/2 <(x_c - w x)^2> with <x x^T> = I/3: w = e_other gives 1/3, w = [1/2, 1/2] gives 1/12
FORGOTTEN, LEAST_SQUARES = 1 / 3, 1 / 12


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict:
    path = ROOT / "examples" / "core" / "blocked_interleaved.py"
    spec = importlib.util.spec_from_file_location("example_blocked_interleaved", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    out = tmp_path_factory.mktemp("blocked_interleaved")
    res = module.main(["--quick", "-o", str(out)])
    assert json.loads((out / "results.json").read_text()).keys() == res.keys()
    assert {Path(p).suffix for p in res["files"]} == {".png", ".svg"}
    return res


def test_the_shared_network_forgets_under_blocked_training(results: dict) -> None:
    blocked = results["shared"]["blocked"]
    assert blocked["end_loss"] == pytest.approx([FORGOTTEN, 0], abs=1e-6)
    assert blocked["forgetting"][1] == pytest.approx(FORGOTTEN, abs=1e-6)
    interleaved = results["shared"]["interleaved"]["end_loss"]
    assert interleaved == pytest.approx([LEAST_SQUARES] * 2, abs=1e-6)


def test_the_gated_network_forgets_nothing(results: dict) -> None:
    for kind in ("blocked", "interleaved"):
        assert results["gated"][kind]["end_loss"] == pytest.approx([0, 0], abs=1e-6)
    assert abs(results["gated"]["blocked"]["forgetting"][1]) < 1e-12


def test_the_values_by_hand_agree(results: dict) -> None:
    assert results["by_hand"]["shared"]["blocked"] == pytest.approx([FORGOTTEN, 0])
    assert results["by_hand"]["shared"]["interleaved"] == pytest.approx([LEAST_SQUARES] * 2)
