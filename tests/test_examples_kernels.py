"""Each kernels example runs end to end with --quick and writes its outputs."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"_example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
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


def test_fig3_nu_series_is_nu_of_each_epochs_kernel(tmp_path, monkeypatch):
    """Every recorded nu_t equals y^T (H_t / tr H_t)^{-1} y with H_t = Phi_t^T Phi_t of the
    ReLU network after epoch t (Fig. 3 middle of NPF/NPK), Phi_t listed path by path."""
    from gdln.kernels._npk import neural_path_features

    module = _load("npk_fig3")
    snapshots = {}
    real = module.train_dgn

    def spy(net, x, y, *, callback=None, **kw):
        if callback is None or net.mode != "relu":
            return real(net, x, y, callback=callback, **kw)

        def keep(epoch, live):
            snapshots[epoch] = (live.clone(), x.clone(), y.numpy().copy())
            callback(epoch, live)

        return real(net, x, y, callback=keep, **kw)

    monkeypatch.setattr(module, "train_dgn", spy)
    res = module.main(["--quick", "-o", str(tmp_path)])
    epochs = module.QUICK["digits47"].epochs
    assert [e for e, _ in res["nu"]] == list(range(epochs + 1))
    for epoch, nu in res["nu"]:
        net, x, y = snapshots[epoch]
        phi = neural_path_features(net, x)
        h = phi.T @ phi
        assert nu == pytest.approx(float(y @ np.linalg.solve(h / np.trace(h), y)), rel=1e-6)
    assert len({round(v, 6) for _, v in res["nu"]}) == len(res["nu"])  # the kernel moves


def test_fig3_digits10_reports_stages_and_rise(tmp_path):
    """The 10-class task: FLNPF-1..6 stats per stage, epoch-0 reference, a rise test."""
    module = _load("npk_fig3")
    res = module.main(["--quick", "--task", "digits10", "--seeds", "2", "-o", str(tmp_path)])
    task = module.QUICK["digits10"]
    assert [f["gates_from_epoch"] for f in res["flnpf"]] == list(task.stage_epochs)
    assert [f["gates_from_epoch"] for f in res["flnpf_references"]] == [0]
    for f in res["flnpf"]:
        assert len(f["test_acc_runs"]) == 2
        assert all(0 <= a <= 100 for a in f["test_acc_runs"])
        assert f["test_acc"] == pytest.approx(sum(f["test_acc_runs"]) / 2)
    rise = res["rise"]
    assert 0 <= rise["paired_t_p_one_sided"] <= 1
    assert -1 <= rise["spearman_rho"] <= 1
    assert isinstance(rise["holds"], bool)
    assert not res["nu"]  # nu_t needs +-1 labels: digits47 only


def test_fig3_rise_test_detects_rise_and_its_absence():
    rise_test = _load("npk_fig3").rise_test
    rng = np.random.default_rng(0)
    rising = np.arange(6) * 2.0 + rng.normal(0, 0.3, size=(5, 6))
    assert rise_test(rising)["holds"]
    assert not rise_test(rising[:, ::-1])["holds"]
    assert not rise_test(np.full((5, 6), 90.0))["holds"]  # ties everywhere
    assert not rise_test(90 + rng.normal(0, 1.0, size=(5, 6)))["holds"]  # noise, no trend
    assert rise_test(rising[:1]) is None  # one seed: no test


def test_teacher_student_windows():
    module = _load("pathgram_teacher_student")
    # geometric decay at rate c: every window measures c
    losses = list(0.7 ** np.arange(41))
    for w in module.WINDOWS:
        assert module.window_rate(module.rates(losses), w, 40) == pytest.approx(0.3)
    # a steep region then a slow one: early sees the steep rate, late and flat the slow one
    steep = 0.5 ** np.arange(11)
    slow = steep[-1] * 0.95 ** np.arange(1, 31)
    r = module.rates(list(np.r_[steep, slow]))
    assert module.window_rate(r, "early", 40) == pytest.approx(0.5)
    assert module.window_rate(r, "late", 40) == pytest.approx(0.05)
    assert module.window_rate(r, "flat", 40) == pytest.approx(0.05)
    # a rate that keeps changing by > 1% per step has no flat window
    drifting = np.cumprod(1 - np.linspace(0.5, 0.01, 41))
    assert np.isnan(module.window_rate(module.rates(list(drifting)), "flat", 40))
    fit = module.linear_fit([1, 2, 3, 4], [0.1, 0.2, 0.3, float("nan")])
    assert fit["slope"] == pytest.approx(0.1) and fit["r2"] == pytest.approx(1.0)


def test_teacher_student_window_option(tmp_path):
    res = _load("pathgram_teacher_student").main(
        ["--quick", "--window", "late", "-o", str(tmp_path)]
    )
    for act in ("linear", "sigmoid"):
        assert res[act]["slope"] == res[act]["windows"]["late"]["slope"]
        # one step size of 1/rho_max: the loss falls at every window's steps
        for w in ("early", "late"):
            assert all(0 < row["rate"] < 1 for row in res[act]["windows"][w]["rows"])
