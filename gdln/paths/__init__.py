"""Input-output paths of an architecture graph and their statistics (Eqs. 3-6 of Saxe et al. 2022)."""

from .._lazy import attach_stub

__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
