"""Thm. 5.1 of the NPF/NPK paper: at init, K -> d sigma^(2(d-1)) H_FNPF as the width grows.

FRNPF (II) network: frozen random ReLU feature network, value weights $\\pm\\sigma$ drawn
independently (Assumption 5.1), $\\sigma=\\sqrt{2/w}$. For each width we report the relative
Frobenius distance $\\lVert K_0 - d\\sigma^{2(d-1)}H\\rVert_F/\\lVert d\\sigma^{2(d-1)}H\\rVert_F$,
averaged over seeds, on digits. It should shrink roughly like $w^{-1/2}$.

    python examples/npk_thm51.py -o out/thm51
    python examples/npk_thm51.py --quick -o /tmp/thm51
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

from gdln._dgn import make_dataset, make_dgn
from gdln._npk import neural_path_kernel
from gdln._ntk import value_ntk_layerwise


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("-o", "--out", type=Path, default=Path("out/npk_thm51"))
    args = ap.parse_args(argv)
    if args.quick:
        widths, depth, n, seeds = [8, 32], 3, 20, 2
    else:
        widths, depth, n, seeds = [16, 32, 64, 128, 256, 512, 1024], 4, 100, 5
    x, _ = make_dataset("digits", n=n, seed=0)
    rows = []
    for w in widths:
        errs = []
        for seed in range(seeds):
            net = make_dgn(64, w, depth, mode="frnpf_ii", init="bernoulli", seed=seed)
            h = neural_path_kernel(net, x).kernel
            target = depth * net.sigma ** (2 * (depth - 1)) * h
            k = value_ntk_layerwise(net, x)
            errs.append(float(np.linalg.norm(k - target) / np.linalg.norm(target)))
        rows.append({"width": w, "rel_frobenius": float(np.mean(errs)), "std": float(np.std(errs))})
    slope = float(
        np.polyfit(
            np.log([r["width"] for r in rows]), np.log([r["rel_frobenius"] for r in rows]), 1
        )[0]
    )
    res = {"depth": depth, "n": n, "seeds": seeds, "rows": rows, "loglog_slope": slope}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "thm51.json").write_text(json.dumps(res, indent=1))
    for r in rows:
        print(
            f"w={r['width']:5d}  ||K - d s^(2(d-1)) H|| / ||.|| = {r['rel_frobenius']:.4f}"
            f" +- {r['std']:.4f}"
        )
    print(f"log-log slope {slope:.3f} (w^-1/2 would be -0.5); d={depth}, n={n}")
    assert math.isfinite(slope)
    return res


if __name__ == "__main__":
    main()
