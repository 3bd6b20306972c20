"""Each kernels example runs end to end with --quick and writes its outputs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"_example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("name", "output"),
    [
        ("npk_table2", "table2.json"),
        ("npk_fig3", "fig3.json"),
        ("npk_thm51", "thm51.json"),
        ("dgn_experiments", "dgn_experiments.json"),
        ("pathgram_teacher_student", "teacher_student.json"),
    ],
)
def test_example_quick(name, output, tmp_path):
    res = _load(name).main(["--quick", "-o", str(tmp_path)])
    assert isinstance(res, dict)
    data = json.loads((tmp_path / output).read_text())
    assert data
    if name == "pathgram_teacher_student":
        assert data["thm51_max_rel_diff"] < 1e-10
        assert data["terms"]["4"] == [51 * 4, 0]
