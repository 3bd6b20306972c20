"""Numeric solution of the reduced dynamics: the ODE (a table of steppers) and the GD map."""

from .._lazy import attach_stub

__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
