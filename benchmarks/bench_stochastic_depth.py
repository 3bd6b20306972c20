"""Exact expected SD loss and gradient: O(L) product form vs 2^L enumeration vs Monte Carlo.

For one scalar residual chain (Stable scaling, linear mode p_L = 0.5, unscaled mask) at
L = 10, 20, 1000 this prints, side by side: the time of the O(L) exact loss+gradient, of
brute-force enumeration of all 2^L masks (L <= 20 only), and of Monte Carlo with n masks,
with the Monte Carlo errors relative to the exact values and their standard errors. Every
time is process CPU time (so that a shared machine's load inflates it less than wall
time), given as the median and the range over repeats; the load average is printed
before and after each table.

A second table times `chain_regulariser` (Eqs. 4/6 of Hayou & Ayed against the exact
loss) at L = 10^2 .. 10^4 side by side with the O(L^2) code it replaced (kept below as
`quadratic_regulariser`), with their largest relative disagreement.

    python benchmarks/bench_stochastic_depth.py            # about a minute
    python benchmarks/bench_stochastic_depth.py --quick    # L = 10 and 1000 only, small MC
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

from gdln.sd import (
    brute_force_chain,
    chain_regulariser,
    chain_scale,
    expected_chain,
    survival_probabilities,
)


def cpu_times(fn, repeat: int, per: int = 1) -> np.ndarray:
    """Process CPU time of one call of ``fn``, measured ``repeat`` times over ``per`` calls."""
    times = []
    for _ in range(repeat):
        t0 = time.process_time()
        for _ in range(per):
            fn()
        times.append((time.process_time() - t0) / per)
    return np.array(times)


def spread(times: np.ndarray, unit: float, name: str) -> str:
    """``median [min-max] unit`` of ``times`` (seconds) in units of ``unit`` seconds."""
    lo, mid, hi = (float(np.min(times)), float(np.median(times)), float(np.max(times)))
    if len(times) == 1:
        return f"{mid / unit:.3g} {name} (1 run)"
    return f"{mid / unit:.3g} [{lo / unit:.3g}-{hi / unit:.3g}] {name}"


def load() -> str:
    """The 1-minute load average, for the table's caption."""
    return f"{os.getloadavg()[0]:.1f}"


def monte_carlo(b, p, kappa, n, rng, chunk=20000):
    """Mean and standard error of the masked loss and gradient over n masks."""
    losses, grads = [], []
    for start in range(0, n, chunk):
        k = min(chunk, n - start)
        delta = (rng.random((k, b.size)) < p).astype(float)
        h = 1.0 + kappa * delta * b
        f = np.prod(h, axis=1)
        losses.append(-f + 0.5 * f**2)
        ones = np.ones((k, 1))  # leave-one-out products, vectorised over masks
        pre = np.cumprod(np.concatenate([ones, h[:, :-1]], axis=1), axis=1)
        suf = np.cumprod(np.concatenate([ones, h[:, ::-1][:, :-1]], axis=1), axis=1)[:, ::-1]
        excl = pre * suf
        grads.append((-1.0 + f)[:, None] * excl * kappa * delta)
    losses, grads = np.concatenate(losses), np.concatenate(grads)
    return (
        losses.mean(),
        losses.std(ddof=1) / np.sqrt(n),
        grads.mean(0),
        grads.std(0, ddof=1) / np.sqrt(n),
    )


def _exclusive(m):
    pre = np.cumprod(np.concatenate([np.ones((1, m.shape[1])), m[:-1]]), axis=0)
    suf = np.cumprod(np.concatenate([np.ones((1, m.shape[1])), m[::-1][:-1]]), axis=0)[::-1]
    return pre * suf


def quadratic_regulariser(b, p, kappa):
    """The former O(L^2) Hoeffding orders and Taylor loss (unscaled mask, s = d = a = c = 1)."""
    B = b[:, None]
    L = B.shape[0]
    var, mu = (p * (1 - p))[:, None], p[:, None]
    m, one = 1.0 + kappa * mu * B, 1.0 + kappa * B
    poly = np.array([1.0])
    for ell in range(L):
        poly = np.convolve(poly, [m[ell, 0] ** 2, var[ell, 0] * kappa**2 * B[ell, 0] ** 2])
    orders = 0.5 * poly[1:]
    f1, df1, delta = np.prod(one, axis=0), kappa * B * _exclusive(one), (p - 1.0)[:, None]
    resid = -1.0 + f1
    cross = np.zeros(1)
    for ell in range(L):
        rest = one.copy()
        rest[ell] = 1.0
        f2 = kappa**2 * B[ell] * B * _exclusive(rest)
        f2[ell] = 0.0
        cross += delta[ell, 0] * np.sum(f2 * delta, axis=0)
    quad = np.sum(df1 * delta, axis=0) ** 2 + resid * cross
    loss1 = -f1 + 0.5 * f1**2
    return orders, float(np.sum(loss1 + np.sum(resid * df1 * delta, axis=0) + 0.5 * quad))


def regulariser_rows(depths, rng) -> None:
    """Print chain_regulariser against the O(L^2) reference, same inputs, one process."""
    print(f"\n# load average {load()}; CPU times, median [range] of 7 (new) and 3 (reference) runs")
    print("| L | chain_regulariser | O(L^2) reference | ratio | max rel. diff (Taylor, orders) |")
    print("|---|---|---|---|---|")
    for L in depths:
        b = rng.normal(size=L)
        p = survival_probabilities("linear", L, p_L=0.5)
        kappa = chain_scale("stable", L)
        r = chain_regulariser(b, p, s=1.0)
        t_new = cpu_times(lambda b=b, p=p: chain_regulariser(b, p, s=1.0), 7)
        t_ref = cpu_times(lambda b=b, p=p, k=kappa: quadratic_regulariser(b, p, k), 3)
        orders, taylor = quadratic_regulariser(b, p, kappa)
        big = orders > 1e-280 * orders.sum()
        d_orders = float(np.max(np.abs(r.variance_orders[big] / orders[big] - 1)))
        d_taylor = abs(r.average_loss_taylor / taylor - 1)
        print(
            f"| {L} | {spread(t_new, 1e-3, 'ms')} | {spread(t_ref, 1e-3, 'ms')} | "
            f"{np.median(t_ref) / np.median(t_new):.0f}x | "
            f"{d_taylor:.1e}, {d_orders:.1e} |"
        )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--mc", type=int, default=100_000, help="Monte Carlo masks")
    args = ap.parse_args(argv)
    depths = (10, 1000) if args.quick else (10, 20, 1000)
    n_mc = 2000 if args.quick else args.mc
    rng = np.random.default_rng(0)
    print(
        f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, numpy "
        f"{np.__version__}, load average {load()}; CPU times, median [range] over repeats: "
        "exact 7 x 100 calls, enumeration 5 (L = 20: 3), Monte Carlo 3"
    )
    print(
        "| L | exact O(L) | 2^L enumeration | agreement | MC n | MC time | "
        "MC rel. err. loss (SE) | MC max grad err / SE |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for L in depths:
        b = rng.normal(scale=1.0, size=L)
        p = survival_probabilities("linear", L, p_L=0.5)
        kappa = chain_scale("stable", L)
        ex = expected_chain(b, p, s=1.0, scaling="stable")
        t_exact = cpu_times(lambda b=b, p=p: expected_chain(b, p, s=1.0, scaling="stable"), 7, 100)
        if L <= 20:
            t_brute = cpu_times(
                lambda b=b, p=p: brute_force_chain(b, p, s=1.0, scaling="stable"),
                3 if L > 12 else 5,
            )
            loss_b, grad_b = brute_force_chain(b, p, s=1.0, scaling="stable")
            agree = max(
                abs(loss_b - ex.loss) / abs(ex.loss),
                float(np.max(np.abs(grad_b - ex.grad)) / np.max(np.abs(ex.grad))),
            )
            brute, agreement = spread(t_brute, 1e-3, "ms"), f"{agree:.1e}"
        else:
            brute, agreement = f"2^{L} masks: not enumerable", "-"
        t0 = time.process_time()
        m, se, g, gse = monte_carlo(b, p, kappa, n_mc, rng)
        first = time.process_time() - t0

        # two more timed runs on their own generators, so that rng (and the rows after
        # this one) draw the same masks as with a single run
        def mc_run(seed: int, b=b, p=p, kappa=kappa) -> None:
            monte_carlo(b, p, kappa, n_mc, np.random.default_rng(seed))

        more = [cpu_times(lambda s=s: mc_run(s), 1)[0] for s in (101, 102)]
        t_mc = np.array([first, *more])
        rel = abs(m - ex.loss) / abs(ex.loss)
        gz = float(np.max(np.abs(g - ex.grad) / np.maximum(gse, 1e-300)))
        print(
            f"| {L} | {spread(t_exact, 1e-6, 'us')} | {brute} | {agreement} | {n_mc} | "
            f"{spread(t_mc, 1e-3, 'ms')} | {rel:.1e} ({se / abs(ex.loss):.1e}) | {gz:.2f} |"
        )
    regulariser_rows((100, 1000) if args.quick else (100, 1000, 10_000), rng)


if __name__ == "__main__":
    main()
