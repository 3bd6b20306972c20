r"""XoR: the GDLN's analytic loss against ReLU networks trained by backprop (Fig. 3c, App. A.1).

Saxe, Sodhani & Lewallen (2022), Fig. 3c and App. A.1. The four XoR points
$x = [\pm1\ \pm1]^T$ have targets $y = \pm 1$ ($+1$ when the two bits agree). A GDLN with
four pathways, pathway $\mu$ active on example $\mu$ only (``graphs/xor.yaml``, Fig. 3b),
has per pathway $s = \sqrt2/P$, $d = 2/P$ with $P = 4$ (Eqs. 18-20); its effective
singular value follows Eq. (21),

$$a(t) = \frac{s/d}{1 - (1 - \frac{s}{d a_0}) e^{-2st/\tau}},$$

and the loss is Eq. (23), $\mathcal L(t) = \tfrac12 - \sqrt2\, a(t) + a(t)^2$.

The simulation is an ordinary two-layer ReLU network $f(x) = W_2\,\mathrm{ReLU}(W_1 x)$
(no biases), $N_h = 128$, written in torch here, trained with full-batch gradient descent
on the loss of Eq. (1) ($\tfrac12$ squared error averaged over the four points) from
i.i.d. $\mathcal N(0, \sigma_0^2)$ weights, $\sigma_0 = 0.0002$, 10 repetitions.

Time. The paper's $\tau = 5/2$ is in units of gradient steps: one step is $dt = 1$ of
$\tau\,dW/dt = -\partial\mathcal L/\partial W$, i.e. learning rate $\mathrm{lr} = 1/\tau =
0.4$, and $t/\tau = \mathrm{lr}\cdot\mathrm{step}$ (= step/τ). Figures use $t/\tau$.

Initial value $a_0$ (not fitted). In a two-layer linear pathway from small random
weights, with $p = W_1 v$ and $q = W_2^T u$ the projections on the pathway's input and
output singular vectors, the linearised flow $\dot p = s q$, $\dot q = s p$ gives
$a = q\cdot p \approx \tfrac14\lVert p_0 + q_0\rVert^2 e^{2st/\tau}$ once $p$ and $q$
have aligned, so the effective initial value in Eq. (21) is
$a_0 = \tfrac14\lVert p_0+q_0\rVert^2$. For the ReLU network pathway $\mu$ is taken as the
hidden units active on $x_\mu$ at initialisation, $v = x_\mu/\lVert x_\mu\rVert$ and
$u = y_\mu$; $a_0$ is this quantity averaged over the four pathways and the seeds.

Besides Eq. (23) (the ODE) the example also runs :func:`gdln.solve` on
``graphs/xor.yaml`` (reduction found by gdln, not typed in) as the ODE and as the exact
gradient-descent map at the same ``lr``, so that the discretisation error of lr = 0.4
is separated from the ReLU-vs-GDLN difference.

Run ``python examples/core/xor.py [--quick] [-o DIR]``; writes ``xor_loss.{png,svg}``,
``xor_weights.{png,svg}`` (input-to-hidden weights after training, Fig. 3a) and
``results.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import torch

import gdln

# %%
# The task: the four XoR points and their targets, and the per-pathway singular value
# $s = \sqrt2/P$ and input variance $d = 2/P$ of Eqs. (18)-(20), $P = 4$.

# sphinx-gallery runs the script without __file__, from its folder (docs/_ext/gdln_gallery.py)
ROOT = Path(globals().get("__file__", Path.cwd() / "x.py")).resolve().parents[2]
GRAPH = ROOT / "graphs" / "xor.yaml"

X = np.array([[1.0, 1.0], [1.0, -1.0], [-1.0, 1.0], [-1.0, -1.0]])
Y = np.array([1.0, -1.0, -1.0, 1.0])
P = 4
S_PATH = math.sqrt(2) / P  # Eq. (18): singular value of one pathway
D_PATH = 2 / P  # input variance along v


# %%
# The closed forms: the effective singular value $a(t)$ of one pathway (Eq. 21) and the total
# loss $\mathcal L(t) = \tfrac12 - \sqrt2\, a + a^2$ (Eq. 23).


def eq21(t: np.ndarray, a0: float) -> np.ndarray:
    """Effective singular value of one pathway, Eq. (21), time in units of $\\tau$."""
    r = S_PATH / D_PATH
    return r / (1.0 - (1.0 - r / a0) * np.exp(-2.0 * S_PATH * t))


def eq23(t: np.ndarray, a0: float) -> np.ndarray:
    """Total XoR loss of the four-pathway GDLN, Eq. (23)."""
    a = eq21(t, a0)
    return 0.5 - math.sqrt(2) * a + a**2


# %%
# The simulation: two-layer ReLU networks $W_2\,\mathrm{ReLU}(W_1 x)$ trained by full-batch
# gradient descent on the loss of Eq. (1), every seed in one batch, and the initial value
# $a_0 = \tfrac14\lVert p_0 + q_0\rVert^2$ read from their initial weights (not fitted).


def train_relu(
    *, hidden: int, sigma0: float, lr: float, steps: int, seeds: list[int]
) -> dict[str, np.ndarray]:
    """Full-batch GD on $f(x) = W_2 \\mathrm{ReLU}(W_1 x)$, all seeds batched (float64).

    Seed ``r`` draws $W_1$ then $W_2$ from ``numpy.random.default_rng(r)``.
    """
    w1_0 = np.stack(
        [np.random.default_rng(s).normal(0.0, sigma0, size=(hidden, 2 + 1)) for s in seeds]
    )
    # column 2 is the draw for W_2, so both come from the seed's single generator
    w1 = torch.tensor(w1_0[:, :, :2], requires_grad=True)
    w2 = torch.tensor(w1_0[:, :, 2:].transpose(0, 2, 1).copy(), requires_grad=True)
    x = torch.tensor(X.T)  # (2, P)
    y = torch.tensor(Y)
    losses = np.empty((steps + 1, len(seeds)))
    a0 = _initial_a(w1_0[:, :, :2], w1_0[:, :, 2])
    for step in range(steps + 1):
        out = (w2 @ torch.relu(w1 @ x))[:, 0, :]  # (S, P)
        loss = 0.5 * ((out - y) ** 2).mean(dim=1)
        losses[step] = loss.detach().numpy()
        if step == steps:
            break
        g1, g2 = torch.autograd.grad(loss.sum(), (w1, w2))
        with torch.no_grad():
            w1 -= lr * g1
            w2 -= lr * g2
    return {"loss": losses, "a0": a0, "w1": w1.detach().numpy(), "w2": w2.detach().numpy()}


def _initial_a(w1: np.ndarray, w2: np.ndarray) -> np.ndarray:
    """$a_0 = \\frac14\\lVert p_0+q_0\\rVert^2$ per seed, averaged over the four pathways."""
    values = []
    for mu in range(P):
        v = X[mu] / np.linalg.norm(X[mu])
        active = (w1 @ X[mu]) > 0  # (S, hidden)
        p = np.where(active, w1 @ v, 0.0)
        q = np.where(active, Y[mu] * w2, 0.0)
        values.append(0.25 * ((p + q) ** 2).sum(axis=1))
    return np.mean(values, axis=0)


# %%
# Fig. 3c: the loss of every ReLU network beside Eq. (23) and the exact gradient-descent map
# of the GDLN.


def plot_loss(
    t: np.ndarray,
    relu: dict[str, np.ndarray],
    gd_map: gdln.Trajectory,
    *,
    a0: float,
    lr: float,
    hidden: int,
    sigma0: float,
    t_max: float,
    out: Path,
) -> list[Path]:
    """The losses of Fig. 3c."""
    reps = relu["loss"].shape[1]
    t_fine = np.linspace(0.0, t_max, 801)
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for r in range(reps):
        ax.plot(t, relu["loss"][:, r], color="C3", lw=0.8, alpha=0.6)
    ax.plot([], [], color="C3", lw=0.8, label=f"ReLU network, backprop ({reps} seeds)")
    ax.plot(t_fine, eq23(t_fine, a0), color="C0", lw=2, label="GDLN, Eq. (23)")
    ax.plot(gd_map.t, gd_map.loss, "k--", lw=1, label=f"GDLN, exact GD map (lr={lr})")
    ax.set_xlabel(r"time $t/\tau$  ($\tau$ = 5/2 steps)")
    ax.set_ylabel(r"training loss $\mathcal{L}$")
    ax.set_title(rf"XoR (Fig. 3c): $N_h$={hidden}, $\sigma_0$={sigma0}, $a_0$={a0:.2g}")
    ax.legend(fontsize=7)
    return gdln.save_figure(fig, out, "xor_loss", dpi=110, tight=True)


# %%
# Fig. 3a: the input-to-hidden weights of one trained network (one dot per hidden unit),
# with the directions of the four XoR points (red: target $+1$, blue: $-1$).


def plot_weights(relu: dict[str, np.ndarray], out: Path) -> list[Path]:
    """The trained input weights of seed 0 (Fig. 3a)."""
    fig, ax = plt.subplots(figsize=(3.8, 3.6))
    w1 = relu["w1"][0]
    norms = np.linalg.norm(w1, axis=1)
    ax.scatter(w1[:, 0], w1[:, 1], s=8, c="m")
    ax.scatter(X[:, 0] * norms.max(), X[:, 1] * norms.max(), c=["r" if y > 0 else "b" for y in Y])
    ax.set_xlabel(r"$W_1[:, 0]$ (input 1 weight, a.u.)")
    ax.set_ylabel(r"$W_1[:, 1]$ (input 2 weight, a.u.)")
    ax.set_title("input-to-hidden weights\nafter training (seed 0)")
    ax.set_aspect("equal")
    return gdln.save_figure(fig, out, "xor_weights", dpi=110, tight=True)


# %%
# The experiment: train the ReLU networks, evaluate Eq. (23) from their $a_0$, solve the GDLN
# of ``graphs/xor.yaml`` with :func:`gdln.solve` as the ODE and as the exact gradient-descent
# map at the same learning rate, then draw both figures.


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the example; return (and write to ``results.json``) its key numbers."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (< 30 s)")
    parser.add_argument("-o", "--out", default="out/xor", help="output folder")
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument(
        "--lr",
        type=float,
        default=None,
        help="learning rate = time step in tau (default 1/tau = 0.4 with tau = 5/2 steps)",
    )
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    torch.set_num_threads(1)

    hidden, sigma0, tau_steps = 128, 0.0002, 2.5  # Fig. 3c parameters
    lr = 1.0 / tau_steps if args.lr is None else args.lr
    reps = 4 if args.quick else 10
    t_max = 40.0
    steps = round(t_max / lr)
    seeds = list(range(args.seed, args.seed + reps))
    relu = train_relu(hidden=hidden, sigma0=sigma0, lr=lr, steps=steps, seeds=seeds)
    t = lr * np.arange(steps + 1)
    a0 = float(relu["a0"].mean())
    theory = eq23(t, a0)
    t_fine = np.linspace(0.0, t_max, 801)

    problem = gdln.load(GRAPH, params={"hidden": str(hidden)})
    reduction = gdln.reduce(problem, lump="full", b0=math.sqrt(a0))  # balanced: a = B1^2
    ode = gdln.solve(reduction, t_max=t_max, points=801)
    gd_map = gdln.solve(reduction, t_max=t_max, dynamics="gd-map", lr=lr, points=steps + 1)

    mean_loss = relu["loss"].mean(axis=1)
    gap_mean = float(np.max(np.abs(mean_loss - theory)) / theory[0])
    gap_seeds = np.max(np.abs(relu["loss"] - theory[:, None]), axis=0) / theory[0]
    map_gap = float(np.max(np.abs(mean_loss - gd_map.loss)) / gd_map.loss[0])
    half_relu = [gdln.time_to_half_loss(t, relu["loss"][:, r]) for r in range(reps)]
    results: dict[str, Any] = {
        "paper": "Fig. 3c: ReLU dynamics from small weights closely track Eq. (23)",
        "settings": {
            "hidden": hidden,
            "sigma0": sigma0,
            "tau_in_steps": tau_steps,
            "lr": lr,
            "steps": steps,
            "t_max_tau": t_max,
            "repetitions": reps,
            "seeds": seeds,
        },
        "a0": a0,
        "a0_per_seed": relu["a0"].tolist(),
        "eq23_vs_gdln_ode_max_abs": float(np.max(np.abs(eq23(ode.t, a0) - ode.loss))),
        "relu_mean_vs_eq23_max_rel": gap_mean,
        "relu_seed_vs_eq23_max_rel": gap_seeds.tolist(),
        "relu_mean_vs_gd_map_max_rel": map_gap,
        "time_to_half_eq23": gdln.time_to_half_loss(t_fine, eq23(t_fine, a0)),
        "time_to_half_gd_map": gdln.time_to_half_loss(gd_map.t, gd_map.loss),
        "time_to_half_relu": half_relu,
        "relu_initial_loss_mean": float(relu["loss"][0].mean()),
        "relu_final_loss_max": float(relu["loss"][-1].max()),
    }

    files = plot_loss(
        t, relu, gd_map, a0=a0, lr=lr, hidden=hidden, sigma0=sigma0, t_max=t_max, out=out
    )
    files += plot_weights(relu, out)

    results["files"] = [str(f) for f in files]
    results["wall_time_s"] = time.perf_counter() - start
    (out / "results.json").write_text(json.dumps(results, indent=2))
    return results


# %%
# Run the example. The documentation runs ``main`` in its ``--quick`` mode (the command line
# gives ``--quick -o DIR``); the figures it writes are shown below, and the numbers it returns
# are printed as JSON.

if __name__ == "__main__":
    res = main()
    print(json.dumps({k: v for k, v in res.items() if k not in ("files",)}, indent=2))
