"""The README is true: its printed output is what gdln prints, its Python runs and does what
the text says, and its links point at files that exist."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from helpers import run_cli

import gdln

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)


def test_the_printed_derivation_is_what_gdln_prints(capsys, monkeypatch, tmp_path) -> None:
    command = re.search(r"```bash\n(python -m venv .*?)\n```", README).group(1)
    args = command.split(" && ")[-1].split()
    assert args[:2] == ["gdln", "derive"]
    printed = re.search(r"The first command prints:\n\n```\n(.*?)```", README, re.S).group(1)
    monkeypatch.chdir(tmp_path)  # the shipped graph by name, from any folder
    code, out, _ = run_cli(args[1:], capsys)
    assert code == 0 and out == printed


def test_the_python_example_runs_and_simulation_is_the_reduced_map(monkeypatch, tmp_path) -> None:
    assert len(BLOCKS) == 1
    monkeypatch.chdir(tmp_path)  # the example names a shipped graph: it runs from any folder
    names: dict = {}
    exec(compile(BLOCKS[0], "README.md python block", "exec"), names)
    trajectory, simulated = names["trajectory"], names["simulated"]
    assert trajectory.t[-1] == pytest.approx(40)
    # From decoupled weights, full-batch GD on the full network is the reduced GD map (Eq. 9).
    reduced_map = gdln.solve(names["reduction"], t_max=40, dynamics="gd-map", lr=0.05, points=41)
    np.testing.assert_allclose(simulated.t, reduced_map.t, rtol=1e-12)
    np.testing.assert_allclose(simulated.loss[:, 0], reduced_map.loss, rtol=1e-10)


@pytest.mark.parametrize("link", sorted(set(re.findall(r"\]\(([^)#]+)\)", README))))
def test_links_point_at_files(link: str) -> None:
    assert (ROOT / link).exists(), link
