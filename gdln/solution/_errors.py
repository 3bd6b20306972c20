"""The solution's errors: a lookup that names no one series."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._errors import GdlnError

__all__ = ["AmbiguousVariableError"]


class AmbiguousVariableError(GdlnError, KeyError):
    """A reduced variable is recorded in several systems and no ``system`` was given.

    :meth:`gdln.Trajectory.variable` never picks one: the message names the systems and
    their modes. A :class:`KeyError`, as a missing variable is.
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""

    @classmethod
    def between(cls, name: str, systems: Sequence[int], modes: Any) -> AmbiguousVariableError:
        """The error for ``name`` recorded in ``systems`` (``modes``: ``meta["modes"]``)."""
        listed = (
            modes if isinstance(modes, list) and all(isinstance(m, list) for m in modes) else []
        )
        which = "; ".join(
            f"system {k}" + (f" (modes {listed[k]})" if k < len(listed) else "") for k in systems
        )
        return cls(f"variable {name!r} is recorded in several systems ({which}): pass system=")
