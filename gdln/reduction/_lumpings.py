"""The names of the lumpings, in a module light enough for the command line's help."""

LUMPINGS: tuple[str, ...] = ("none", "symmetry", "balanced", "full")
"""The lumpings :func:`gdln.reduce` accepts, from finest to coarsest:

``none``
    one variable per trained edge and mode (Eq. 10);
``symmetry``
    edges tied by the graph's symmetry (a directed colour refinement), kept only where every
    member of a block has the same right-hand side; exact for the ODE and the
    gradient-descent map alike (Eqs. 44-46 of Saxe et al. 2022 for routing);
``balanced``
    the same verified tying, started from edges grouped by equal initial value instead of
    by the graph's symmetry (Eqs. 47-48);
``full``
    ``balanced``, then variables eliminated through conserved quadratic quantities
    (Eq. 15), which gradient flow conserves.
"""
