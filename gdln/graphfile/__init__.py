"""Reading graph files (YAML, node-link JSON, GraphML) into a :class:`Problem`."""

from .._lazy import attach_stub

__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
