"""Numeric solution of the reduced dynamics: the ODE and the exact gradient-descent map."""

from .._lazy import attach_stub

__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
