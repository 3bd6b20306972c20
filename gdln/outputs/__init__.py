"""Outputs that appear whole or not at all, and never replace anything without ``force``;
names printed with every character that would act on a terminal escaped."""

from .._lazy import attach_stub

__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
