"""Deep gated networks, neural path features and kernels, the NTK and the path formula for the Gram matrix.

Lakshminarayanan & Singh (deep gated networks; neural path features and kernels) and the
combinatorial path formula for the gradient-descent Gram matrix.
"""

from .._lazy import attach_stub

__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
