"""Stochastic depth as Bernoulli gating of residual blocks (Hayou & Ayed)."""

from .._lazy import attach_stub

__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
