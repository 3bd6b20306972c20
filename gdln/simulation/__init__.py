"""Training the full gated network in torch, the reference the theory is checked against."""

from .._lazy import attach_stub

__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
