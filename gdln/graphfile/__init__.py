"""Reading graph files (YAML, node-link JSON, GraphML) into a :class:`~gdln.Problem`."""

import warnings
from typing import Any

from .._errors import REMOVED_IN
from .._lazy import attach_stub
from ..settings._spellings import OLD_SPELLINGS

_getattr, __dir__, __all__ = attach_stub(__name__, __file__)

_MOVED = {
    row.old: row.new.rsplit(".", 1)[0] for row in OLD_SPELLINGS if row.where == "gdln.graphfile"
}
"""Names that moved out of this package, kept importable here (their rows of
:data:`gdln.settings.OLD_SPELLINGS`)."""


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
