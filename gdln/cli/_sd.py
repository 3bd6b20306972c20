"""``gdln sd``: exact expected loss of a stochastic-depth residual chain, from the shell."""

from __future__ import annotations

import click
import numpy as np

from ..sd import (
    StochasticDepthError,
    chain_regulariser,
    depth_concentration,
    expected_chain,
    expected_chain_symbolic,
    gradient_growth,
    mode_for_budget,
    survival_probabilities,
)


def _floats(text: str | None, name: str) -> np.ndarray | None:
    if text is None:
        return None
    try:
        return np.array([float(v) for v in text.split(",")])
    except ValueError:
        raise StochasticDepthError(
            f"--{name} = {text!r} is not a comma-separated list of numbers", key=name
        ) from None


@click.command("sd")
@click.option("--L", "L", type=int, default=10, show_default=True, help="residual blocks")
@click.option(
    "--mode",
    default="linear",
    show_default=True,
    help="survival mode: uniform, linear, per_layer, sensemode, sensemode_proportional",
)
@click.option("--p-L", "p_L", type=float, default=0.5, show_default=True, help="p_L")
@click.option("--budget", type=float, default=None, help="average depth sum(p); overrides p_L")
@click.option("--p", "p_list", default=None, help="per_layer probabilities, comma-separated")
@click.option("--sensitivities", default=None, help="SenseMode sensitivities, comma-separated")
@click.option("--p-min", type=float, default=None, help="SenseMode minimum survival")
@click.option("--scaling", default="stable", show_default=True, help="plain or stable")
@click.option("--mask", default="unscaled", show_default=True, help="unscaled or inverted")
@click.option("--b", "b_list", default=None, help="residual scalars b_l (default 0.1 each)")
@click.option("--s", "s", type=float, default=1.0, show_default=True, help="mode strength s")
@click.option("--d", "d", type=float, default=1.0, show_default=True, help="input strength d")
@click.option("--symbolic", is_flag=True, help="also print the sympy expression (L <= 6)")
def sd(
    L: int,
    mode: str,
    p_L: float,
    budget: float | None,
    p_list: str | None,
    sensitivities: str | None,
    p_min: float | None,
    scaling: str,
    mask: str,
    b_list: str | None,
    s: float,
    d: float,
    symbolic: bool,
) -> None:
    """Exact expected SD loss, gradient and regulariser of one scalar residual chain.

    Example:

        gdln sd --L 20 --mode linear --budget 14 --scaling stable --b 0.3 --symbolic
    """
    sens = _floats(sensitivities, "sensitivities")
    if budget is not None:
        p = mode_for_budget(mode, L, budget, sensitivities=sens)
    else:
        p = survival_probabilities(
            mode, L, p_L=p_L, p=_floats(p_list, "p"), sensitivities=sens, p_min=p_min
        )
    b = _floats(b_list, "b")
    if b is None:
        b = np.full(L, 0.1)
    elif b.size == 1:
        b = np.full(L, float(b[0]))
    ex = expected_chain(b, p, s=s, d=d, scaling=scaling, mask=mask)
    reg = chain_regulariser(b, p, s=s, d=d, scaling=scaling, mask=mask)
    conc = depth_concentration(p)
    click.echo(f"p = {np.array2string(p, precision=4, max_line_width=100)}")
    click.echo(f"E[f] = {ex.mean[0]:.10g}   E[f^2] = {ex.second[0]:.10g}")
    click.echo(f"E[loss] = {ex.loss:.10g}   average-network loss = {ex.average_loss:.10g}")
    click.echo(
        f"regulariser: exact {reg.penalty_exact:.6g}, Eq. 6 (paper) {reg.penalty_paper:.6g}, "
        f"first order at the mean {reg.penalty_first_order:.6g}"
    )
    click.echo(f"dE[loss]/db = {np.array2string(ex.grad, precision=4, max_line_width=100)}")
    click.echo(
        f"depth: mean {conc.mean:.4g}, variance {conc.variance:.4g}, "
        f"95% Bennett bound +-{conc.bound:.4g}; gradient growth q_0 = "
        f"{gradient_growth(p, scaling=scaling)[0]:.6g} (Prop. 1)"
    )
    if symbolic:
        if L > 6:
            raise StochasticDepthError(f"--symbolic needs L <= 6, got L = {L}", key="L")
        ch = expected_chain_symbolic(L, scaling=scaling, mask=mask)
        click.echo(f"E[loss] = {ch.loss}")
