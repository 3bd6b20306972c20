"""Tasks: mixtures of contexts, each a gating and a dataset (Sec. 2 of Saxe et al. 2022)."""

from .._lazy import attach_stub

__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
