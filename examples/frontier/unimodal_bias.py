r"""Unimodal bias: how long late fusion ignores its weaker modality (Zhang, Latham & Saxe 2024).

A two-layer late-fusion network (``graphs/late_fusion.yaml``) sees two scalar modalities
$x_A$, $x_B$ with standard deviations $\sigma_A = k\,\sigma_B$ and correlation $\rho$ and
learns $y = x_A + x_B$ from small weights. It learns from $A$ alone first (weight
$1 + \rho/k$ on $A$, the mis-attribution $\rho/k$), then from $B$. *Understanding Unimodal
Bias in Multimodal Deep Linear Networks* (Zhang, Latham & Saxe, ICML 2024) derive

$$\frac{t_B}{t_A} = 1 + \frac{k^2 - 1}{1 - \rho^2}$$

at leading order as the initial scale $u_0\to0$. Here the curve comes from gdln alone:
:func:`gdln.timescales` on the graph file, for each $k$ and $\rho$, gives the
leading-order stage times (lines) and the exact reduced ODE's times to half-completion at
$u_0 = 10^{-6}$ (dots); the closed form above is drawn dashed for comparison, and the
three-layer network fused after its first hidden layer (``graphs/late_fusion_deep.yaml``)
is on the right: $A$ takes a time of order $1/u_0$, $B$ lags by a time of order
$\ln(1/u_0)$, so $t_B/t_A\to1$; the lag $t_B - t_A$ is plotted.

Run ``python examples/frontier/unimodal_bias.py [--quick] [-o DIR]``; writes
``unimodal_bias.{png,svg}`` and ``results.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

import gdln

# %%
# The late-fusion graph files.

# sphinx-gallery runs the script without __file__, from its folder (docs/_ext/gdln_gallery.py)
ROOT = Path(globals().get("__file__", Path.cwd() / "x.py")).resolve().parents[2]
GRAPHS = ROOT / "graphs"
U0 = 1e-6


# %%
# For one network and one $(k, \rho)$: the leading-order ratio $t_B/t_A$ of the time scales of
# the two modalities (:func:`gdln.timescales`), and the same ratio from the exact reduced ODE
# at a finite initial scale.


def ratios(name: str, k: float, rho: float, *, ode: bool) -> dict[str, Any]:
    """Leading-order and exact-ODE $t_B/t_A$ of one network at one $(k, \\rho)$."""
    problem = gdln.load(GRAPHS / f"{name}.yaml", params={"k": repr(k), "rho": repr(rho)})
    result = gdln.timescales(problem, b0=U0, ode=ode)
    a, b = result.stages
    out: dict[str, Any] = {
        "k": k,
        "rho": rho,
        "leading": b.time / a.time,
        "leading_lag": b.time - a.time,
        "weight_on_A": float(a.maps["xA->hA->y" if name == "late_fusion" else "xA->a->h->y"][0, 0]),
        "formula": [str(a.time_formula), str(b.time_formula)],
    }
    if ode and a.ode_time and b.ode_time:
        out["ode"] = b.ode_time / a.ode_time
        out["ode_lag"] = b.ode_time - a.ode_time
    return out


# %%
# Left panel: the two-layer network, $t_B/t_A$ against $\rho$ per $k$: gdln's leading order
# (line), the closed form $1 + (k^2 - 1)/(1 - \rho^2)$ (dashed) and the exact reduced ODE
# (dots).


def plot_two_layer(
    left: Any, ks: tuple[float, ...], lines: np.ndarray, two_layer: dict[float, Any]
) -> None:
    """The ratio curves of the two-layer late-fusion network."""
    colours = plt.get_cmap("Set1")
    for i, k in enumerate(ks):
        line, found = two_layer[k]["line"], two_layer[k]["dots"]
        left.plot(lines, [p["leading"] for p in line], color=colours(i), label=f"k = {k:g}")
        fine = np.linspace(-0.92, 0.92, 200)
        left.plot(fine, 1 + (k * k - 1) / (1 - fine**2), "--", color=colours(i), lw=0.8)
        left.plot(
            [p["rho"] for p in found if "ode" in p],
            [p["ode"] for p in found if "ode" in p],
            "o",
            mfc="none",
            color=colours(i),
        )
    left.set(yscale="log", xlabel=r"correlation $\rho$", ylabel=r"$t_B / t_A$")
    left.set_title("two-layer late fusion", fontsize=10)
    left.legend(
        fontsize=8, title="line: gdln leading order\ndots: exact ODE, u0=1e-6", title_fontsize=7
    )


# %%
# Right panel: the network fused after its first hidden layer, where the weaker modality
# lags by $t_B - t_A$.


def plot_deep(right: Any, deep_rhos: np.ndarray, deep: list[dict[str, Any]]) -> None:
    """The lag of the deeper network, leading order and exact ODE."""
    right.plot(deep_rhos, [p["leading_lag"] for p in deep], "-", color="k", label="leading order")
    right.plot(
        [p["rho"] for p in deep if "ode" in p],
        [p["ode_lag"] for p in deep if "ode" in p],
        "o",
        mfc="none",
        color="k",
        label="exact ODE",
    )
    right.set(xlabel=r"correlation $\rho$", ylabel=r"lag $t_B - t_A$ ($\tau$)")
    right.set_title(
        "fused after the first hidden layer, k = 2\n(t_A ~ 0.2/u0, so t_B/t_A ~ 1)", fontsize=9
    )
    right.legend(fontsize=8)


# %%
# The experiment: the ratios of both networks over $\rho$ (fewer points with ``--quick``),
# the figure, and how far the leading order is from the closed form.


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the example; return (and write to ``results.json``) its key numbers."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer points (a few seconds)")
    parser.add_argument("-o", "--out", default="out/unimodal_bias", help="output folder")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()

    ks = (2.0,) if args.quick else (3.0, 2.0, 1.5)
    lines = np.round(np.linspace(-0.9, 0.9, 3 if args.quick else 19), 6)
    dots = np.array([-0.5, 0.5]) if args.quick else np.round(np.linspace(-0.8, 0.8, 9), 6)
    two_layer = {
        k: {
            "line": [ratios("late_fusion", k, float(r), ode=False) for r in lines],
            "dots": [ratios("late_fusion", k, float(r), ode=True) for r in dots],
        }
        for k in ks
    }
    deep_rhos = dots[-1:] if args.quick else dots
    deep = [ratios("late_fusion_deep", 2.0, float(r), ode=True) for r in deep_rhos]

    fig, (left, right) = plt.subplots(1, 2, figsize=(9.0, 3.6))
    plot_two_layer(left, ks, lines, two_layer)
    plot_deep(right, deep_rhos, deep)
    files = gdln.save_figure(fig, out, "unimodal_bias", dpi=110, tight=True)

    gaps = [
        abs(p["leading"] / (1 + (p["k"] ** 2 - 1) / (1 - p["rho"] ** 2)) - 1)
        for k in ks
        for p in two_layer[k]["line"]
    ]
    results = {
        "paper": "t_B/t_A = 1 + (k^2 - 1)/(1 - rho^2) at leading order; weight 1 + rho/k on A",
        "u0": U0,
        "two_layer": {str(k): two_layer[k] for k in ks},
        "deep_fusion_k2": deep,
        "leading_order_vs_formula_max_rel": max(gaps),
        "files": [str(f) for f in files],
        "seconds": time.perf_counter() - start,
    }
    (out / "results.json").write_text(json.dumps(results, indent=2))
    print(
        f"leading order vs 1 + (k^2-1)/(1-rho^2): max relative gap {max(gaps):.2e} "
        f"over {len(gaps)} points; wrote {out}"
    )
    return results


# %%
# Run the example. The documentation runs ``main`` in its ``--quick`` mode (the command line
# gives ``--quick -o DIR``); the figures it writes are shown below, and the numbers it returns
# are printed as JSON.

if __name__ == "__main__":
    main()
