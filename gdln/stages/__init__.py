"""Stages and time scales of learning from small initialisation: stages, times, plateaus, maps."""

from .._lazy import attach_stub

__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
