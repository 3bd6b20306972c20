"""Printing paths, statistics and derivations as text, LaTeX and JSON."""

from .._lazy import attach_stub

__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
