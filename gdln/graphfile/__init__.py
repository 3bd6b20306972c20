"""Reading graph files (YAML, node-link JSON, GraphML) into a :class:`~gdln.Problem`."""

import warnings
from typing import Any

from .._errors import REMOVED_IN
from .._lazy import attach_stub

_getattr, __dir__, __all__ = attach_stub(__name__, __file__)

_MOVED = {"Problem": "gdln.task"}
"""Names that moved out of this package, kept importable here for one release."""


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        warnings.warn(
            f"gdln.graphfile.{name} is now {_MOVED[name]}.{name} (also gdln.{name}); the old "
            f"name goes in gdln {REMOVED_IN}",
            DeprecationWarning,
            stacklevel=2,
        )
        from .. import task

        return getattr(task, name)
    return _getattr(name)
