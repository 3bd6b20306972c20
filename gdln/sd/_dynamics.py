r"""Training dynamics under stochastic depth: the exact expected flow and map, and SD itself.

Stochastic depth redraws the mask at every step. One SD step from $b$ has conditional
mean exactly the expected GD map $b\mapsto b-\mathrm{lr}\,\nabla_b\mathbb E[\mathcal L]$
(the gradient is linear in the masked loss); its Euler limit is gradient flow on the exact
expected loss of :func:`gdln.sd.expected_chain`. :func:`simulate_sd_gd` runs SD itself, a
fresh mask every step, for comparison.

Time convention: full-batch gradient descent with learning rate ``lr`` is the Euler
step $\mathrm dt=\mathrm{lr}$ of $\tau\,\mathrm db/\mathrm dt=-\partial\mathcal L/\partial b$
with $\tau=1$.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy.integrate import solve_ivp

from .._bounded._limits import beyond, current_limits
from ..settings._choices import ATOL, RTOL
from ..solution import Trajectory
from ._chain import chain_inputs, chain_scale, expected_chain, masked_chains
from ._checks import StochasticDepthError

__all__ = ["expected_sd_flow", "expected_sd_gd", "simulate_sd_gd"]


def _chain_settings(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    allowed = {"s", "d", "scaling", "mask", "a", "c"}
    unknown = set(kwargs) - allowed
    if unknown:
        raise StochasticDepthError(
            f"unknown chain setting(s) {sorted(unknown)}; expected some of {sorted(allowed)}",
            key=sorted(unknown)[0],
        )
    return dict(kwargs)


def expected_sd_flow(
    b: np.ndarray,
    p: np.ndarray,
    t: np.ndarray,
    *,
    rtol: float = RTOL,
    atol: float = ATOL,
    **chain: Any,
) -> Trajectory:
    r"""Gradient flow on the exact expected SD loss, $\tau\dot b=-\nabla_b\mathbb E[\mathcal L]$.

    The small-learning-rate limit of SD training with masks redrawn every step: the
    update averaged over one step's mask is exactly $-\mathrm{lr}\,\nabla\mathbb E[\mathcal L]$
    (:func:`expected_sd_gd`), and its Euler limit is this ODE ($\tau=1$, $t=\mathrm{lr}\times$
    step). The expected loss and gradient come from :func:`expected_chain`.

    Parameters
    ----------
    b
        ``(L,)`` or ``(L, M)``: the chain's residual scalars at the start, $t = 0$.
    p
        ``(L,)`` survival probabilities.
    t
        Increasing times (in units of $\tau$) at which to record.
    rtol, atol
        Relative and absolute tolerances of the ODE solver.
    **chain
        ``s``, ``d``, ``scaling``, ``mask``, ``a``, ``c`` as for :func:`expected_chain`.

    Returns
    -------
    Trajectory
        ``loss`` is the expected loss; series ``"b"`` ``(T, L, M)``, ``"mean_transfer"``
        $\mathbb E f$ ``(T, M)`` and ``"average_loss"`` ``(T,)``.

    Raises
    ------
    StochasticDepthError
        The times are not increasing, or an input is malformed.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eq. (10) (gradient flow on a pathway's loss), here on
    its expectation over the masks of Hayou & Ayed (2021), "Regularization in ResNet with
    Stochastic Depth", Eq. (1).
    """
    chain = _chain_settings(chain)
    b = np.asarray(b, dtype=float)
    shape = b.shape
    t = np.asarray(t, dtype=float)
    if (
        t.ndim != 1
        or t.size == 0
        or not np.all(np.isfinite(t))
        or np.any(np.diff(t) <= 0)
        or t[0] < 0
    ):
        raise StochasticDepthError("t must be non-negative and strictly increasing times", key="t")

    def rhs(_: float, y: np.ndarray) -> np.ndarray:
        return -expected_chain(y.reshape(shape), p, **chain).grad.ravel()

    sol = solve_ivp(
        rhs, (0.0, float(t[-1])), b.ravel(), t_eval=t, rtol=rtol, atol=atol, method="DOP853"
    )
    if not sol.success:  # pragma: no cover - depends on the integrator
        raise StochasticDepthError(f"the ODE solver failed: {sol.message}", key="t")
    bs = sol.y.T.reshape((len(t), *shape))
    return _record(t, bs, p, chain, method="expected gradient flow")


def _record(
    t: np.ndarray, bs: np.ndarray, p: np.ndarray, chain: Mapping[str, Any], *, method: str
) -> Trajectory:
    ex = [expected_chain(bk, p, **chain) for bk in bs]
    b3 = bs.reshape(len(t), bs.shape[1], -1)
    return Trajectory(
        t=t,
        loss=np.array([e.loss for e in ex]),
        series={
            "b": b3,
            "mean_transfer": np.array([e.mean for e in ex]),
            "average_loss": np.array([e.average_loss for e in ex]),
        },
        meta={
            "method": method,
            "p": np.asarray(p, dtype=float).tolist(),
            **{
                k: (np.asarray(v).tolist() if not isinstance(v, str) else v)
                for k, v in chain.items()
            },
        },
    )


def expected_sd_gd(
    b: np.ndarray, p: np.ndarray, *, lr: float, steps: int, record_every: int = 1, **chain: Any
) -> Trajectory:
    r"""The expected GD map $b\mapsto b-\mathrm{lr}\,\nabla_b\mathbb E[\mathcal L](b)$, iterated.

    One SD step from $b$ with a fresh mask has conditional mean exactly this map
    (the gradient is linear in the masked loss). Iterating it is the deterministic
    reference for the mean of many simulations (:func:`simulate_sd_gd`); the two differ
    only through the step-to-step fluctuations, at $O(\mathrm{lr})$.

    Parameters
    ----------
    b
        ``(L,)`` or ``(L, M)``: the chain's residual scalars at the start, step 0.
    p
        ``(L,)`` survival probabilities.
    lr
        Learning rate; time advances ``lr`` per step (units of $\tau$).
    steps
        Number of updates.
    record_every
        Record every this many steps (and step 0).
    **chain
        ``s``, ``d``, ``scaling``, ``mask``, ``a``, ``c`` as for :func:`expected_chain`.

    Returns
    -------
    Trajectory
        As :func:`expected_sd_flow`: the expected loss and series ``"b"``,
        ``"mean_transfer"`` and ``"average_loss"`` at the recorded steps.

    Raises
    ------
    StochasticDepthError
        ``lr``, ``steps`` or ``record_every`` is not positive, or an input is malformed.

    References
    ----------
    Hayou & Ayed (2021), "Regularization in ResNet with Stochastic Depth", Eq. (1) (the
    masked network); Saxe, Sodhani & Lewallen (2022), Eq. (10).
    """
    chain = _chain_settings(chain)
    lr, steps, record_every = _check_gd(lr, steps, record_every)
    b = np.asarray(b, dtype=float).copy()
    recs, ts = [b.copy()], [0.0]
    for k in range(1, steps + 1):
        b = b - lr * expected_chain(b, p, **chain).grad
        if k % record_every == 0:
            recs.append(b.copy())
            ts.append(k * lr)
    return _record(np.array(ts), np.array(recs), p, chain, method="expected GD map")


def _check_gd(lr: float, steps: int, record_every: int) -> tuple[float, int, int]:
    """The settings of a GD run, its steps within ``Limits.steps`` and its records within
    ``Limits.points``."""
    if isinstance(lr, bool) or not isinstance(lr, numbers.Real) or not 0 < lr < math.inf:
        raise StochasticDepthError(f"lr = {lr!r} is not a positive learning rate", key="lr")
    for name, value in (("steps", steps), ("record_every", record_every)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise StochasticDepthError(f"{name} = {value!r}; expected a positive integer", key=name)
    limits = current_limits()
    if steps > limits.steps:
        raise StochasticDepthError(beyond("steps", f"steps={steps}"), key="steps")
    if steps // record_every + 1 > limits.points:
        what = f"{steps // record_every + 1} records (steps={steps}, record_every={record_every})"
        raise StochasticDepthError(beyond("points", what), key="record_every")
    return float(lr), int(steps), int(record_every)


def simulate_sd_gd(
    b: np.ndarray,
    p: np.ndarray,
    *,
    lr: float,
    steps: int,
    runs: int,
    seed: int = 0,
    record_every: int = 1,
    **chain: Any,
) -> Trajectory:
    r"""Monte Carlo SD training of scalar chains: a fresh mask every step, ``runs`` copies.

    Each step draws $\delta_l\sim\mathrm{Bernoulli}(p_l)$ (shared by the modes of a run)
    and applies $b\leftarrow b-\mathrm{lr}\,\nabla_b\mathcal L(\delta)$ with
    $\mathcal L(\delta)=\sum_\alpha -s_\alpha f_\alpha(\delta)+\frac12d_\alpha f_\alpha(\delta)^2$.

    Parameters
    ----------
    b
        ``(L,)`` or ``(L, M)``: the chain's residual scalars at the start (every run's),
        step 0.
    p
        ``(L,)`` survival probabilities.
    lr
        Learning rate; time advances ``lr`` per step (units of $\tau$).
    steps
        Number of updates.
    runs
        Number of independent runs (each with its own masks).
    seed
        Seed of the masks' random generator.
    record_every
        Record every this many steps (and step 0).
    **chain
        ``s``, ``d``, ``scaling``, ``mask``, ``a``, ``c`` as for :func:`expected_chain`.

    Returns
    -------
    Trajectory
        ``loss`` ``(T, runs)``: the *exact expected* loss at each run's current weights;
        series ``"b"`` ``(T, runs, L, M)``.

    Raises
    ------
    StochasticDepthError
        ``lr``, ``steps``, ``runs`` or ``record_every`` is not positive, or an input is
        malformed.

    References
    ----------
    Hayou & Ayed (2021), "Regularization in ResNet with Stochastic Depth", Eq. (1) (a fresh
    Bernoulli mask every step); Saxe, Sodhani & Lewallen (2022), Eq. (10).
    """
    chain = _chain_settings(chain)
    lr, steps, record_every = _check_gd(lr, steps, record_every)
    if isinstance(runs, bool) or not isinstance(runs, (int, np.integer)) or runs < 1:
        raise StochasticDepthError(f"runs = {runs!r}; expected a positive integer", key="runs")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise StochasticDepthError(f"seed = {seed!r}; expected an integer >= 0", key="seed")
    b = np.asarray(b, dtype=float)
    held = int(runs) * b.size * (steps // record_every + 4)
    if held > current_limits().batch_elements:
        raise StochasticDepthError(
            beyond("batch_elements", f"{runs} runs of {b.size} weights, {held:.3g} numbers"),
            key="runs",
        )
    B0, pc, conv, s_, d_, ca, _ = chain_inputs(
        b.reshape(b.shape[0], -1),
        p,
        chain.get("mask", "unscaled"),
        chain.get("s"),
        chain.get("d", 1.0),
        chain.get("a", 1.0),
        chain.get("c", 1.0),
    )
    if chain.get("s") is None:
        raise StochasticDepthError("simulate_sd_gd needs s", key="s")
    L, M = B0.shape
    kappa = chain_scale(chain.get("scaling", "plain"), L)
    rng = np.random.default_rng(seed)
    B = np.broadcast_to(B0, (runs, L, M)).copy()
    recs, ts = [B.copy()], [0.0]
    for k in range(1, steps + 1):
        delta = (rng.random((runs, L)) < pc).astype(float)
        gate = conv.gate_value(delta, pc)
        B = B - lr * masked_chains(gate, B, ca=ca, s=s_, d=d_, kappa=kappa)[1]
        if k % record_every == 0:
            recs.append(B.copy())
            ts.append(k * lr)
    bs = np.array(recs)  # (T, runs, L, M)
    loss = np.array([[expected_chain(bk, pc, **chain).loss for bk in row] for row in bs])
    return Trajectory(
        t=np.array(ts),
        loss=loss,
        series={"b": bs},
        meta={
            "method": "SD gradient descent (Monte Carlo)",
            "runs": int(runs),
            "seed": int(seed),
            "p": pc.tolist(),
        },
    )
