"""The exact reduction to per-mode scalar dynamics (Eqs. 7-10 of Saxe et al. 2022), lumping and conserved quantities."""

from .._lazy import attach_stub

__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
