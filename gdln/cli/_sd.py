"""``gdln sd``: exact expected loss of a stochastic-depth residual chain, from the shell.

The survival probabilities come from :func:`gdln.sd.survival_probabilities` (or
:func:`gdln.sd.mode_for_budget`), everything printed from :func:`gdln.sd.chain_summary`.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

import gdln

from ._common import (
    CommandLineError,
    number_list,
    old_spellings,
    output_file,
    output_options,
    write,
)

if TYPE_CHECKING:
    import numpy as np

__all__ = ["sd"]

#: The survival modes whose probabilities follow from one number, p_L.
ONE_NUMBER_MODES = ("uniform", "linear")
DEFAULT_P_L = 0.5


@click.command("sd")
@old_spellings("sd")
@click.option(
    "-L", "--depth", "L", type=int, default=10, show_default=True, help="Residual blocks L."
)
@click.option(
    "--survival",
    type=click.Choice(list(gdln.sd.SURVIVAL_MODES)),
    default=None,
    help="The survival rule: how the probabilities p_l are set (default linear).",
)
@click.option(
    "--p",
    "p_text",
    default=None,
    metavar="P|P1,P2,...",
    help="Survival probabilities: p_L for uniform and linear (default 0.5), one per block "
    "for per_layer (comma-separated).",
)
@click.option("--budget", type=float, default=None, help="Average depth sum(p), instead of --p.")
@click.option("--sensitivities", default=None, help="SenseMode sensitivities, comma-separated.")
@click.option("--p-min", type=float, default=None, help="SenseMode minimum survival.")
@click.option(
    "--scaling", type=click.Choice(["plain", "stable"]), default="stable", show_default=True
)
@click.option(
    "--mask",
    type=click.Choice(list(gdln.sd.MASK_CONVENTIONS)),
    default="unscaled",
    show_default=True,
)
@click.option(
    "--b",
    "b_text",
    default="0.1",
    show_default=True,
    help="Residual scalars b_l: one, or one per block.",
)
@click.option("--s", "s", type=float, default=1.0, show_default=True, help="Mode strength s.")
@click.option("--d", "d", type=float, default=1.0, show_default=True, help="Input strength d.")
@click.option("--expression", is_flag=True, help="Also print the sympy expression (L <= 6).")
@output_options(("text", "json"), default="text", what="summary")
def sd(
    L: int,
    survival: str | None,
    p_text: str | None,
    budget: float | None,
    sensitivities: str | None,
    p_min: float | None,
    scaling: str,
    mask: str,
    b_text: str,
    s: float,
    d: float,
    expression: bool,
    fmt: str | None,
    out: str | None,
    force: bool,
) -> None:
    """Exact expected SD loss, gradient and regulariser of one scalar residual chain.

    \b
    Example:
      gdln sd -L 20 --survival linear --budget 14 --scaling stable --b 0.3 --expression
    """
    import numpy as np  # here, not at the top: --help stays instant

    output = output_file(out, fmt, force, formats=("text", "json"))
    mode = survival or "linear"
    symbolic = bool(expression)
    p = _probabilities(
        mode,
        L,
        number_list("--p", p_text),
        budget,
        number_list("--sensitivities", sensitivities),
        p_min,
    )
    summary = gdln.sd.chain_summary(
        np.array(number_list("--b", b_text)),
        p,
        s=s,
        d=d,
        scaling=scaling,
        mask=mask,
        symbolic=symbolic,
    )
    if output.format == "json":
        write(output, json.dumps({"mode": mode, "budget": budget, **summary.to_json()}, indent=1))
    else:
        write(output, _text(summary))


def _probabilities(
    mode: str,
    L: int,
    p: tuple[float, ...] | None,
    budget: float | None,
    sensitivities: tuple[float, ...] | None,
    p_min: float | None,
) -> np.ndarray:
    """The survival probabilities that ``--survival`` and its settings describe."""
    import numpy as np

    if budget is not None:
        if p is not None:
            raise CommandLineError("--p and --budget both set the survival probabilities; give one")
        return gdln.sd.mode_for_budget(mode, L, budget, sensitivities=sensitivities)
    if mode in ONE_NUMBER_MODES:
        values = p or (DEFAULT_P_L,)
        if len(values) != 1:
            raise CommandLineError(
                f"--p: survival mode {mode} takes one number, p_L; got {len(values)} numbers"
            )
        return gdln.sd.survival_probabilities(mode, L, p_L=values[0])
    if p is not None and mode != "per_layer":
        raise CommandLineError(
            f"--p: survival mode {mode} sets p from --sensitivities; drop --p or use per_layer"
        )
    return gdln.sd.survival_probabilities(
        mode, L, p=None if p is None else np.array(p), sensitivities=sensitivities, p_min=p_min
    )


def _text(summary: gdln.sd.ChainSummary) -> str:
    """The human-readable summary, one quantity per line."""
    import numpy as np

    ex, reg, depth = summary.expectation, summary.regulariser, summary.depth
    lines = [
        f"p = {np.array2string(summary.p, precision=4, max_line_width=100)}",
        f"E[f] = {ex.mean[0]:.10g}   E[f^2] = {ex.second[0]:.10g}",
        f"E[loss] = {ex.loss:.10g}   average-network loss = {ex.average_loss:.10g}",
        f"regulariser: exact {reg.penalty_exact:.6g}, Eq. 6 (paper) {reg.penalty_paper:.6g}, "
        f"first order at the mean {reg.penalty_first_order:.6g}",
        f"dE[loss]/db = {np.array2string(ex.grad, precision=4, max_line_width=100)}",
        f"depth: mean {depth.mean:.4g}, variance {depth.variance:.4g}, "
        f"95% Bennett bound +-{depth.bound:.4g}; gradient growth q_0 = "
        f"{summary.growth[0]:.6g} (Prop. 1)",
    ]
    if summary.symbolic_loss is not None:
        lines.append(f"E[loss] = {summary.symbolic_loss}")
    return "\n".join(lines)
