"""The names stochastic depth is configured by, light enough for the command line's help.

Nothing here imports numpy, scipy or sympy, so ``gdln sd --help`` can list the choices
without loading them. Each table maps a name to one line for help texts; the rules behind
the names live in :mod:`gdln.sd._survival` and :mod:`gdln.sd._masks`, keyed by the same
names.
"""

SURVIVAL_MODES: dict[str, str] = {
    "uniform": "p_l = p_L for every block (Huang et al. 2016)",
    "linear": "p_l = 1 - (l/L)(1 - p_L), falling with depth (Sec. 2 of Hayou & Ayed)",
    "per_layer": "one given p_l per block",
    "sensemode": "|S_l| mapped linearly onto [p_min, 1] (Sec. 5 of Hayou & Ayed)",
    "sensemode_proportional": "p_l proportional to |S_l| at a budget sum_l p_l (Sec. 6)",
}
"""The survival modes :func:`gdln.sd.survival_probabilities` knows, with one line each."""

MASK_CONVENTIONS: dict[str, str] = {
    "unscaled": "delta_l in {0,1}; test time multiplies block l by p_l (Hayou & Ayed)",
    "inverted": "delta_l/p_l in {0,1/p_l}; test time uses the full network (timm)",
}
"""The mask conventions (:class:`gdln.sd.MaskConvention`), with one line each."""
