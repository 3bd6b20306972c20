"""The names of the kernels :func:`gdln.kernels.kernel_spectrum` computes.

No third-party imports: ``gdln kernel --help`` builds its ``--kind`` choices from here.
"""

KERNEL_KINDS: tuple[str, ...] = ("npk", "ntk", "h")
"""``npk``: the neural path kernel $H=\\Sigma\\odot\\Lambda$ (Lemma 2.1 of NPF/NPK); ``ntk``:
the neural tangent kernel with its value/gate split; ``h``: the path formula for the
gradient-descent Gram matrix (Thm. 5.1 of the path-formula paper)."""
