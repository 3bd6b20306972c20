"""Sec. 7 of the path-formula paper: teacher-student convergence rates and depth momentum.

Teacher: 2 layers, input 50, hidden 100 (ReLU; the paper does not name it), output 1,
Gaussian inputs and weights. Students: 2-layer networks of width m (linear or sigmoid), no
biases, full-batch GD on the l2 loss with one step size for all widths. The convergence
rate at step t is 1 - L_{t+1}/L_t; for linear students L is the excess over the
least-squares loss, which is all a linear student can reach (the raw loss's rate decays to 0
once that floor is reached). Rates are kept while L exceeds 1e-6 of its start, then
averaged over a window (all three are measured on every run; ``--window`` picks the one
the figure and the top-level fit report):

``early``
    the first quarter of the T training steps (the steep region);
``late``
    the last half of the kept steps (the paper's "steady region", Sec. 7, by a rule fixed
    in advance: steps T/2..T when L stays above the floor);
``flat``
    the longest final run of steps over which the rate changes by less than 1% per step
    (|r_{t+1} - r_t| < 0.01 r_t), if it is at least T/10 steps long (else no value).

Thm. 5.1 with Prop. 6.1: H of a 2-layer student is a sum of m i.i.d. strongly-Gram terms
(51 m summands, no weakly-Gram ones), so the rate should grow linearly in m.

Depth-induced momentum (Prop. 6.2, Fig. 5): g = mu * f adds a trainable scalar; we report
the convergence-rate curves of f (GD), g (GD), mu2*mu1*f (GD) and f with momentum. Along
two GD trajectories, g's (mu trained, starting at 1) and f's (mu = 1 throughout), we check
at every recorded state: Eq. (34), H(g) = mu^2 H(f) + u_f u_f^T, against autodiff; the
inequality App. F proves, cos(H(g) u_g, u_g) >= cos(H(f) u_f, u_f); and Eq. (17) read with
du/dt = H (y - u), cos(H(g)(y - u_g), u_g) >= cos(H(f)(y - u_f), u_f). The fraction of
states where each holds is reported.

    python examples/kernels/pathgram_teacher_student.py -o out/pathgram
    python examples/kernels/pathgram_teacher_student.py --seeds 5 --window late -o out/pathgram
    python examples/kernels/pathgram_teacher_student.py --quick -o /tmp/pathgram
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from gdln import save_figure
from gdln.kernels import mlp_graph, mlp_term_counts, momentum_cosines, path_gram

# %%
# The students' activations and the windows the convergence rate is averaged over.

ACT = {"linear": lambda a: a, "sigmoid": torch.sigmoid}
WINDOWS = ("early", "late", "flat")
#: ``flat`` window: largest relative change of the rate per step, and shortest length
#: as a fraction of the training steps.
FLAT_TOL, FLAT_MIN_FRACTION = 0.01, 0.1


# %%
# The teacher's data, a student of width $m$, its forward pass and full-batch gradient descent
# on the $\ell_2$ loss (optionally with scalar gates and momentum).


def teacher_data(n: int, d_in: int, hidden: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d_in, generator=g, dtype=torch.float64)
    w1 = torch.randn(d_in, hidden, generator=g, dtype=torch.float64) / d_in**0.5
    w2 = torch.randn(hidden, 1, generator=g, dtype=torch.float64) / hidden**0.5
    return x, (torch.relu(x @ w1) @ w2)[:, 0]


def student(d_in: int, m: int, seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [
        torch.randn(d_in, m, generator=g, dtype=torch.float64) / d_in**0.5,
        torch.randn(m, 1, generator=g, dtype=torch.float64),
    ]


def forward(params, x, act, scalars=()):
    out = (ACT[act](x @ params[0]) @ params[1])[:, 0]
    for s in scalars:
        out = s * out
    return out


def train(params, x, y, act, lr, steps, *, scalars=(), momentum=0.0) -> list[float]:
    params = [p.clone().requires_grad_(True) for p in params]
    scalars = [torch.tensor(float(s), dtype=torch.float64, requires_grad=True) for s in scalars]
    opt = torch.optim.SGD(params + scalars, lr=lr, momentum=momentum)
    losses = []
    for _ in range(steps + 1):
        opt.zero_grad()
        loss = 0.5 * ((forward(params, x, act, scalars) - y) ** 2).sum()
        losses.append(float(loss.detach()))
        loss.backward()
        opt.step()
    return losses


# %%
# The convergence rate $1 - L_{t+1}/L_t$ per step, its mean over a window, and the line it
# follows against the width (Sec. 7).


def rates(losses: list[float], floor: float = 0.0) -> np.ndarray:
    """1 - L_{t+1}/L_t on the excess loss L - floor, while it exceeds 1e-6 of its start."""
    ell = np.asarray(losses) - floor
    keep = np.flatnonzero(ell > 1e-6 * ell[0])
    last = keep[-1] if len(keep) else 0
    ell = ell[: last + 1]
    return 1 - ell[1:] / ell[:-1] if len(ell) > 1 else np.zeros(1)


def window_rate(r: np.ndarray, window: str, steps: int) -> float:
    """Mean convergence rate over one window of the kept rates ``r`` (NaN if empty).

    Examples
    --------
    >>> r = np.r_[np.full(10, 0.5), np.full(30, 0.1)]
    >>> [round(window_rate(r, w, 40), 3) for w in WINDOWS]
    [0.5, 0.1, 0.1]
    """
    if window == "early":
        part = r[: steps // 4]
    elif window == "late":
        part = r[len(r) // 2 :]
    elif window == "flat":
        rel = np.abs(np.diff(r)) / np.maximum(np.abs(r[:-1]), np.finfo(float).tiny)
        rough = np.flatnonzero(rel >= FLAT_TOL)
        start = int(rough[-1]) + 1 if len(rough) else 0
        part = r[start:]
        if len(part) < max(2, FLAT_MIN_FRACTION * steps):
            part = r[:0]
    else:
        raise ValueError(f"window: got {window!r}, expected one of {', '.join(WINDOWS)}")
    return float(part.mean()) if len(part) else float("nan")


def linear_fit(widths, rates) -> dict:
    """Least-squares line rate = slope * m + intercept and its R^2 (NaN rates dropped)."""
    ms, rs = np.asarray(widths, dtype=float), np.asarray(rates, dtype=float)
    ok = np.isfinite(rs)
    ms, rs = ms[ok], rs[ok]
    if len(ms) < 2:
        return {"slope": float("nan"), "intercept": float("nan"), "r2": float("nan")}
    slope, icpt = np.polyfit(ms, rs, 1)
    ss_tot = np.sum((rs - rs.mean()) ** 2)
    r2 = 1 - np.sum((rs - (slope * ms + icpt)) ** 2) / ss_tot if ss_tot > 0 else float("nan")
    return {"slope": float(slope), "intercept": float(icpt), "r2": float(r2)}


# %%
# The Gram matrix $H$ from the Jacobian, the independent computation that the path formula
# (:func:`gdln.kernels.path_gram`) is checked against.


def jac_gram(params, x, act, scalars=()) -> np.ndarray:
    def f(*ps):
        return forward(ps[: len(params)], x, act, ps[len(params) :])

    allp = [*params, *[torch.tensor(float(s), dtype=torch.float64) for s in scalars]]
    jac = torch.func.jacrev(f, argnums=tuple(range(len(allp))))(*allp)
    j = torch.cat([t.reshape(x.shape[0], -1) for t in jac], dim=1)
    return (j @ j.T).numpy()


# %%
# The command line; the experiment itself is ``_main`` below.


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seeds", type=int, default=None, help="students per width (default 2)")
    ap.add_argument("--steps", type=int, default=None, help="GD steps T (default 300)")
    ap.add_argument(
        "--window", choices=WINDOWS, default="early", help="window the figure and fit report"
    )
    ap.add_argument("-o", "--out", type=Path, default=Path("out/pathgram"))
    args = ap.parse_args(argv)
    q = args.quick
    n, d_in = (30, 50) if q else (200, 50)
    widths = [4, 8, 16] if q else [25, 50, 100, 200, 400]
    steps = args.steps if args.steps is not None else (20 if q else 300)
    if steps < 4:
        raise SystemExit(f"--steps: got {steps}, expected >= 4")
    seeds = args.seeds if args.seeds is not None else (1 if q else 2)
    if seeds < 1:
        raise SystemExit(f"--seeds: got {seeds}, expected >= 1")
    t0 = time.perf_counter()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _main(args, q, n, d_in, widths, steps, seeds, t0)
    finally:
        torch.set_num_threads(threads)


# %%
# Prop. 6.2 of the path-formula paper at states along a gradient-descent trajectory of the
# scaled network $g = \mu f$, with its Gram matrix from autodiff.


def prop62_states(
    p, x, y, lr: float, steps: int, n_states: int, *, train_mu: bool = True
) -> list[dict]:
    """Prop. 6.2 of the path-formula paper at ``n_states`` states of a GD trajectory.

    ``train_mu``: the trajectory of g = mu f (mu trained from 1); else that of f (mu = 1).
    """
    params = [t.clone().requires_grad_(True) for t in p]
    mu = torch.tensor(1.0, dtype=torch.float64, requires_grad=train_mu)
    opt = torch.optim.SGD([*params, mu] if train_mu else params, lr=lr)
    yn = y.numpy()
    out = []
    for _ in range(n_states):
        pd = [t.detach() for t in params]
        m = float(mu.detach())
        with torch.no_grad():
            u_f = forward(pd, x, "linear").numpy()
        h_f = jac_gram(pd, x, "linear")
        h_g = jac_gram(pd, x, "linear", (m,))  # autodiff on g, independent of Eq. 34
        c = momentum_cosines(h_f, u_f, m, yn)
        eq34 = m * m * h_f + np.outer(u_f, u_f)
        out.append(
            {
                "mu": m,
                "eq34_rel_diff": float(np.abs(h_g - eq34).max() / np.abs(h_g).max()),
                "proved_f": c.proved_f,
                "proved_g": c.proved_g,
                "proved_holds": c.proved_holds,
                "flow_f": c.flow_f,
                "flow_g": c.flow_g,
                "flow_holds": c.flow_holds,
                "u_dot_residual": float(m * u_f @ (yn - m * u_f)),
            }
        )
        for _ in range(max(1, steps // n_states)):
            opt.zero_grad()
            (0.5 * ((forward(params, x, "linear", (mu,)) - y) ** 2).sum()).backward()
            opt.step()
    return out


# %%
# Thm. 5.1 of the path-formula paper on one student: the Gram matrix from the path formula
# (:func:`gdln.kernels.path_gram`) equals the one from autodiff, and the number of terms per
# width.


def thm51_check(x: torch.Tensor, d_in: int, widths: list[int]) -> dict:
    """Largest relative difference of the two Gram matrices, and the term counts."""
    # Thm. 5.1 check on one student: path formula == autodiff, and term counts
    p0 = student(d_in, widths[0], 0)
    graph = mlp_graph(
        [d_in, widths[0], 1], activation="sigmoid", weights=[p0[0].numpy(), p0[1].numpy()]
    )
    pg = path_gram(graph, x.numpy())
    h_ad = jac_gram(p0, x, "sigmoid")
    thm51_max_rel_diff = float(np.abs(pg.H - h_ad).max() / np.abs(h_ad).max())
    terms = {m: mlp_term_counts([d_in, m, 1]) for m in widths}
    return {"thm51_max_rel_diff": thm51_max_rel_diff, "terms": terms}


# %%
# Sec. 7: the convergence rate against the width $m$ for linear and sigmoid students, one
# step size for every width, averaged over each window and fitted by a line.


def width_rates(
    x: torch.Tensor,
    y: torch.Tensor,
    d_in: int,
    widths: list[int],
    steps: int,
    seeds: int,
    window: str,
) -> dict:
    """Per activation: the step size, the fit of the chosen window and every window."""
    out: dict = {}
    for act in ("linear", "sigmoid"):
        # one step size for every width: 1 / rho_max(H) of the widest student at init
        h_big = jac_gram(student(d_in, widths[-1], 0), x, act)
        lr = 1.0 / float(np.linalg.eigvalsh(h_big)[-1])
        # a linear student can at best reach the least-squares loss: rates use the excess
        floor = 0.0
        if act == "linear":
            beta = np.linalg.lstsq(x.numpy(), y.numpy(), rcond=None)[0]
            floor = 0.5 * float(np.sum((x.numpy() @ beta - y.numpy()) ** 2))
        runs = {
            m: [
                rates(train(student(d_in, m, s), x, y, act, lr, steps), floor) for s in range(seeds)
            ]
            for m in widths
        }
        windows = {}
        for w in WINDOWS:
            rows = []
            for m in widths:
                r = [window_rate(rr, w, steps) for rr in runs[m]]
                found = [v for v in r if np.isfinite(v)]
                rows.append(
                    {
                        "width": m,
                        "rate": float(np.mean(found)) if found else float("nan"),
                        "std": float(np.std(found)) if found else float("nan"),
                        "runs_with_window": len(found),
                    }
                )
            fit = linear_fit([r["width"] for r in rows], [r["rate"] for r in rows])
            windows[w] = {"rows": rows, **fit}
        out[act] = {"lr": lr, **windows[window], "windows": windows}
    return out


# %%
# Depth-induced momentum: a scalar layer $\mu$ in front of the student (a deeper network with
# the same function) speeds up gradient descent, as heavy-ball momentum does.


def depth_momentum(
    x: torch.Tensor, y: torch.Tensor, d_in: int, widths: list[int], steps: int
) -> tuple[int, list[torch.Tensor], float, dict[str, np.ndarray]]:
    """The width, start and step size used, and the rate curve of each variant."""
    # depth-induced momentum
    m = widths[len(widths) // 2]
    p = student(d_in, m, 7)
    lr = 0.5 / float(np.linalg.eigvalsh(jac_gram(p, x, "linear", (1.0, 1.0)))[-1])
    curves = {
        "2-layer GD": rates(train(p, x, y, "linear", lr, steps)),
        "3-layer (mu f) GD": rates(train(p, x, y, "linear", lr, steps, scalars=(1.0,))),
        "4-layer (mu2 mu1 f) GD": rates(train(p, x, y, "linear", lr, steps, scalars=(1.0, 1.0))),
        "2-layer momentum 0.5": rates(train(p, x, y, "linear", lr, steps, momentum=0.5)),
    }
    return m, p, lr, curves


# %%
# Prop. 6.2 of the path-formula paper along the trajectory of $g = \mu f$ ($\mu$ trained from
# 1) and along that of $f$ ($\mu = 1$).


def prop62(
    p: list[torch.Tensor], x: torch.Tensor, y: torch.Tensor, lr: float, steps: int, n_states: int
) -> dict:
    """Summary of Prop. 6.2 at ``n_states`` states of each trajectory."""
    # Prop. 6.2 along g's GD trajectory (mu trained from 1) and along f's (mu = 1)
    out: dict = {}
    for name, train_mu in (("g_trajectory", True), ("f_trajectory_mu1", False)):
        states = prop62_states(p, x, y, lr, steps, n_states, train_mu=train_mu)
        out[name] = {
            "states": len(states),
            "eq34_max_rel_diff": max(st["eq34_rel_diff"] for st in states),
            "proved_form_holds_fraction": float(np.mean([st["proved_holds"] for st in states])),
            "flow_form_holds_fraction": float(np.mean([st["flow_holds"] for st in states])),
            "mu_range": [min(st["mu"] for st in states), max(st["mu"] for st in states)],
            "u_dot_residual_range": [
                min(st["u_dot_residual"] for st in states),
                max(st["u_dot_residual"] for st in states),
            ],
            "rows": states,
        }
    return out


# %%
# The experiment: the four parts above on the teacher's data, then the figure (rates against
# the width, and the momentum curves) and the printed summary.


def _main(args, q, n, d_in, widths, steps, seeds, t0) -> dict:
    x, y = teacher_data(n, d_in, 100, seed=0)
    res: dict = {
        "n": n,
        "widths": widths,
        "steps": steps,
        "seeds": seeds,
        "window": args.window,
    }
    res.update(thm51_check(x, d_in, widths))
    res.update(width_rates(x, y, d_in, widths, steps, seeds, args.window))
    m, p, lr, curves = depth_momentum(x, y, d_in, widths, steps)
    res["momentum_mean_rate"] = {k: float(v.mean()) for k, v in curves.items()}
    res["momentum_curves"] = {k: v.tolist() for k, v in curves.items()}
    res["prop62"] = prop62(p, x, y, lr, steps, 5 if q else 40)
    args.out.mkdir(parents=True, exist_ok=True)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.2))
    for ax, act in zip(axes[:2], ("linear", "sigmoid"), strict=True):
        rows = res[act]["rows"]
        ax.errorbar(
            [r["width"] for r in rows],
            [r["rate"] for r in rows],
            [r["std"] for r in rows],
            marker="o",
        )
        ax.set_title(
            f"{act} student, {args.window} window: rate vs width (R^2={res[act]['r2']:.3f})",
            fontsize=8,
        )
        ax.set_xlabel("width m")
    for k, v in curves.items():
        axes[2].plot(v, label=k)
    axes[2].set_title(f"depth-induced momentum, linear student m={m}", fontsize=8)
    axes[2].set_xscale("symlog", linthresh=10)
    axes[2].legend(fontsize=7)
    res["wall_s"] = time.perf_counter() - t0
    axes[2].set_xlabel("GD step t")
    axes[2].set_ylabel("convergence rate 1 - L_{t+1}/L_t")
    for ax in axes[:2]:
        ax.set_ylabel(f"mean rate over the {args.window} window")
    fig.suptitle(
        f"path-formula Sec. 7: teacher-student, n={n}, T={steps}, {seeds} seed(s) per width; "
        f"wall {res['wall_s']:.0f} s",
        fontsize=8,
    )
    save_figure(
        fig, args.out, "teacher_student", tight=True, formats=("png",) if q else ("png", "svg")
    )
    (args.out / "teacher_student.json").write_text(json.dumps(res, indent=1, default=str))
    print(f"Thm 5.1 path formula vs autodiff: max rel diff {res['thm51_max_rel_diff']:.1e}")
    for act in ("linear", "sigmoid"):
        for w in WINDOWS:
            win = res[act]["windows"][w]
            print(
                f"{act}, {w} window: rate = {win['slope']:.3g} m + {win['intercept']:.3g}, "
                f"R^2 = {win['r2']:.4f}; "
                + ", ".join(
                    f"m={r['width']}: {r['rate']:.4g} +- {r['std']:.2g}"
                    f" ({r['runs_with_window']}/{seeds})"
                    for r in win["rows"]
                )
            )
    print("mean rates:", {k: round(v, 5) for k, v in res["momentum_mean_rate"].items()})
    for name, pr in res["prop62"].items():
        print(
            f"Prop 6.2 along {name} ({pr['states']} states, mu in "
            f"[{pr['mu_range'][0]:.4f}, {pr['mu_range'][1]:.4f}]): Eq. 34 max rel diff "
            f"{pr['eq34_max_rel_diff']:.1e}; proved form cos(H u, u) held at "
            f"{pr['proved_form_holds_fraction']:.0%}, du/dt form cos(H (y - u), u) at "
            f"{pr['flow_form_holds_fraction']:.0%}; u.(y - u) in "
            f"[{pr['u_dot_residual_range'][0]:.3g}, {pr['u_dot_residual_range'][1]:.3g}]"
        )
    print(f"wall {res['wall_s']:.0f} s")
    return res


# %%
# Run the example. The documentation runs ``main`` in its ``--quick`` mode (the command line
# gives ``--quick -o DIR``); the figures it writes are shown below.

if __name__ == "__main__":
    main()
