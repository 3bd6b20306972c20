"""Exact learning dynamics from λ-balanced starts, and the tangent kernel along a trajectory.

Beyond the decoupled starts of the exact reduction (Eq. 9 of Saxe et al. 2022): a two-layer
pathway whose weights satisfy $W_2^\\top W_2 - W_1W_1^\\top = \\lambda I$ learns by a matrix
Riccati equation with a closed-form solution for every start, aligned with the task or not
(Fukumizu 1998; Braun et al. 2022 for λ = 0; Dominé et al. 2025 for any λ). Along that
solution, or along a
reduced trajectory from decoupled weights, the network's neural tangent kernel and the
representations of its hidden nodes follow from the theory alone.
"""

from .._lazy import attach_stub

__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
